"""The projector runner: one journal and its derived state, kept current with the disk.

Before a call is answered, :meth:`Store.catch_up` stats the segments (cheap) and applies whatever
any process appended since; so a save acknowledged by one process is seen by a call that another
process starts afterwards. A segment that shrank, vanished or was rewritten (git checkout, rebase,
pull) is detected by its prefix digest, and everything is rebuilt: the fold is commutative, so a
rebuild gives the same answers as the incremental path.

What a rebuild makes and a snapshot holds is one :class:`~eventmem.runner.derived.Derived`, swapped
whole under the lock. In a server a save is answered once its event is appended and folded: the
texts of this process's own changes reach the keyword and vector indexes just after the reply (see
:mod:`~eventmem.runner.deferral`), and in any case before the next call reads them. A snapshot
(``cache/snapshot.bin``) whose version, embedder or digests do not match is ignored and rebuilt.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

from eventmem.core.errors import JournalUnwritable
from eventmem.core.events import AnyEvent
from eventmem.core.records import MemoryRecord, MemoryRecords
from eventmem.core.redact import scrub_event
from eventmem.core.state import State
from eventmem.embedders.embedcache import EmbeddingCache, forget_other_models
from eventmem.embedders.embedder import Embedder, ForgetsWords
from eventmem.journal.config import Config
from eventmem.journal.files import FileLock
from eventmem.journal.journal import Journal, describe_os_error
from eventmem.journal.project import ProjectPaths
from eventmem.journal.usage import UsageLog
from eventmem.projectors.base import AFTER_CALL_SECONDS
from eventmem.projectors.columns import make_dedup_keys
from eventmem.runner import cursors, projection, snapshots
from eventmem.runner.deferral import Deferral
from eventmem.runner.derived import Derived, ttl_float
from eventmem.runner.embedding import EmbeddingQueue, Progress
from eventmem.runner.heap import give_back_freed_memory
from eventmem.runner.readview import ReadView
from eventmem.runner.tuning import Tuning

__all__ = ["Store"]

log = logging.getLogger("eventmem.runner")

OWN_VECTORS_AFTER_SECONDS = 1.0
"""A server copies a mapped vector index into memory this long after opening (see VectorIndex.own)."""
GIVE_BACK_AFTER_EVENTS = 1000
"""A catch-up of this many events (a start, a merge) gives the memory it freed back to the system."""
GIVE_BACK_WAIT_SECONDS = 600.0
"""How long a server waits for the threads a large catch-up started before it gives memory back anyway."""
SNAPSHOT_AFTER_SECONDS = 0.5
"""A server takes a snapshot that a catch-up made due this long after it (not within the call)."""


class Store:
    """One journal and its derived state (:attr:`derived`), kept current under one lock: catch-up,
    appends, deferral, the embedding queue, usage and snapshots are scheduled here, and done by
    :mod:`~eventmem.runner.cursors`, :mod:`~eventmem.runner.projection` and
    :mod:`~eventmem.runner.snapshots` on the derived state."""

    def __init__(
        self, paths: ProjectPaths, config: Config, embedder: Embedder, *, tuning: Tuning | None = None
    ) -> None:
        self.paths = paths
        self.tuning = tuning or Tuning()
        """Where catch-up takes its bulk paths (a new value counts from the next rebuild on)."""
        self.config = config
        self.embedder = embedder
        self.journal = Journal(paths, durable=config.durability == "fsync", max_segment_bytes=config.max_segment_bytes)
        self.embeddings = EmbeddingCache(paths.cache_dir / "embeddings", embedder.model_id, embedder.dim)
        self.lock = threading.RLock()
        self._snapshot_lock = FileLock(paths.cache_dir / "snapshot.lock")
        self.usage = UsageLog(paths.local_dir / "usage.jsonl")
        """Access counts from the clone's local usage stream (never in git)."""
        self.rebuilds = 0
        self._snapshot_thread: threading.Thread | None = None
        self.started_again = 0
        """How many times this server started again from the snapshot of a fold it made (see :meth:`_start_again`)."""
        self._start_again_failed = False
        """A snapshot just written could not be loaded: this process does not start again (it would fold again)."""
        self._starting_again: threading.Thread | None = None
        self._giving_back: threading.Thread | None = None
        """Gives memory back once the threads of a large catch-up are done (see _give_back_when_settled)."""
        self._keying: list[MemoryRecord] | None = None
        """The records whose dedup keys a thread is making (see :meth:`_dedup_keys_beside`)."""
        self._snapshot_timer: threading.Timer | None = None
        """A snapshot due in a server, taken a moment after the call (see :meth:`_snapshot_if_due`)."""
        self.embedding = EmbeddingQueue(
            self.lock, embedder, self.embeddings, self._put_vectors, self._wants_vector, self._vectors_done
        )
        self._model_recorded = False
        """The embedder's model id is in ``cache/embeddings/model`` (see _forget_other_models)."""
        self.deferral = Deferral(self.lock)
        """Work run just after the reply in a server (see :mod:`eventmem.runner.deferral`)."""
        self.derived = self._new_derived()
        """The fold, the projections and the cursors: swapped whole (a rebuild, a snapshot loaded)."""
        self.reading = cursors.Reading(self.journal, self.embedding, self.deferral, config.snapshot_every_events)

    @contextmanager
    def read(self) -> Iterator[ReadView]:
        """A consistent view of the fold and the indexes for the ``with`` block (the lock is held
        throughout, so keep the block short; :meth:`catch_up` first to see other processes' writes)."""
        with self.lock:
            yield ReadView(self.derived, self.embedding, self.usage, self.vector_status)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Keep every other read and write of this runner out for the block (a journal rewrite)."""
        with self.lock:
            yield

    def hold_writes(self) -> None:
        """Wait for the write in progress, if any, and let no other start (for an exit between writes)."""
        self.lock.acquire()

    def _new_derived(self) -> Derived:
        keywords_folder = self.paths.cache_dir if self.deferral.enabled else None  # (a server's: see open)
        return Derived(
            self.embedder.dim, self.tuning, self.embedding.submit, self.usage_extension, self._backlog, keywords_folder
        )

    def _backlog(self) -> bool:
        """Vectors are still being made for a backlog (not waiting on an embedder that failed)."""
        return self.embedding.busy and not self.embedding.failing

    def _swap(self, derived: Derived) -> None:
        """Make ``derived`` the current state (the lock held): work queued for the old one is dropped."""
        self.embedding.forget_all()  # (results the vector worker has in flight are for the old slots)
        self.deferral.drop()
        self.derived = derived

    def _reset(self) -> None:
        self.embeddings.rewind()  # a rebuild needs every cached vector
        self._swap(self._new_derived())

    def catch_up(self, progress: Progress | None = None, *, flush: bool = True) -> int:
        """Apply everything appended since the last call; rebuild if a segment changed under us.
        First (unless ``flush`` is false) the work deferred until after the reply runs (see
        :class:`Deferral`). Returns the number of events applied."""
        with self.lock:
            if flush:
                self.deferral.run()
            memories = self.derived.state.memories
            damaged = isinstance(memories, MemoryRecords) and memories.damaged
            if damaged:
                log.error("the snapshot in %s was damaged: dropping it and rebuilding", self.paths.cache_dir)
                (self.paths.cache_dir / "snapshot.bin").unlink(missing_ok=True)
            damaged = self.deferral.take_failure() or damaged
            try:
                # (a server takes a snapshot made due a moment after the call: see _snapshot_if_due)
                later = self.deferral.enabled
                applied = (
                    -1 if damaged else cursors.catch_up_once(self.derived, self.reading, progress, snapshot_later=later)
                )
                if applied < 0:
                    log.info("journal changed underneath (checkout, rebase or pull) or cache damaged: rebuilding")
                    self.rebuilds += 1
                    self._reset()
                    applied = cursors.catch_up_once(self.derived, self.reading, progress, snapshot_later=later)
                if applied >= GIVE_BACK_AFTER_EVENTS:
                    self._give_back_when_settled()
                self._dedup_keys_beside()
                self._snapshot_if_due()
            finally:
                self.derived.encoded_state = None  # (if no snapshot used it)
            self.derived.refresh_expiries(self.usage.refresh())
            return max(applied, 0)

    def _give_back_when_settled(self, after: Sequence[threading.Thread] = ()) -> None:
        """Give the memory a large catch-up (or a load) freed back to the system (see
        :mod:`~eventmem.runner.heap`) from a thread, once the keyword postings, the vector worker and
        the approximate index it started, and the threads ``after``, are done (their threads free as
        much again), never on the call's path: pages given back are faulted in again by the next
        allocations, which would slow the work still to do. A thread already waiting to give back
        does for a catch-up; threads ``after`` (a load's) are waited for by a thread of their own."""
        if not self.deferral.enabled or (not after and self._giving_back is not None and self._giving_back.is_alive()):
            return  # (a command's process ends soon; a server's thread is running)
        ranking, vectors = self.derived.keywords.index.ranking, self.derived.vectors.index

        def later() -> None:
            for thread in after:
                thread.join(GIVE_BACK_WAIT_SECONDS)
            if ranking is not None:
                ranking.wait(GIVE_BACK_WAIT_SECONDS)
            vectors.settle(GIVE_BACK_WAIT_SECONDS)
            self.embedding.wait(GIVE_BACK_WAIT_SECONDS)
            give_back_freed_memory()

        self._giving_back = threading.Thread(target=later, name="eventmem-give-back", daemon=True)
        self._giving_back.start()

    def _dedup_keys_beside(self) -> None:
        """A load of the filter columns leaves its dedup keys to make (see
        :meth:`~eventmem.projectors.columns.ColumnsProjector.unmade_keys`): a server makes them in a
        thread, off the lock, after the call; a command's process, when it needs them."""
        columns = self.derived.columns
        records = columns.unmade_keys()
        if records is None or not self.deferral.enabled or records is self._keying:
            return
        self._keying = records

        def make() -> None:
            time.sleep(AFTER_CALL_SECONDS)  # (the call that made the change answered first)
            keys = make_dedup_keys(records)
            with self.lock:
                columns.install_keys(records, keys)
                self._keying = None

        threading.Thread(target=make, name="eventmem-dedup-keys", daemon=True).start()

    def _snapshot_if_due(self) -> None:
        if self.derived.events_since_snapshot < self.derived.snapshot_due(self.config.snapshot_every_events):
            return
        if not self.deferral.enabled:
            writing = self._snapshot_thread
            if writing is None or not writing.is_alive():  # (a rebuild's is being made: it covers this)
                self.save_snapshot(background=True)
        elif self._snapshot_timer is None:
            # a server: a moment after the call, so that it is not taken on the call's path (the
            # journal holds every event; a process killed before it starts from the older one)
            timer = threading.Timer(SNAPSHOT_AFTER_SECONDS, self._snapshot_later)
            timer.name, timer.daemon = "eventmem-snapshot-later", True
            self._snapshot_timer = timer
            timer.start()

    def _snapshot_later(self) -> None:
        with self.lock:
            if self._snapshot_timer is None:
                return  # (cancelled: the store is closing)
            self._snapshot_timer = None
            if self.derived.events_since_snapshot:
                self.save_snapshot(background=True)

    def apply_adopted(self, events: Iterable[AnyEvent]) -> None:
        """Fold in events this process just wrote into a segment taken as applied with
        :meth:`adopt_segments` (their lines will never be read back)."""
        with self.lock:
            events = list(events)
            projection.apply_local(self.derived, events, self.embedding, self.deferral)
            self._model_seen()
            for event in events:
                self.derived.state.unread.pop(event.id, None)

    def drain_changes(self) -> tuple[bool, set[str]]:
        """What changed since the last call: (everything?, memory ids). Used to push updates."""
        with self.lock:
            return self.derived.drain_changes()

    def vector_status(self) -> str:
        """``ready``, ``loading`` (the model), ``embedding`` (a backlog) or ``unavailable``."""
        with self.lock:
            self.deferral.run()  # (of every change made so far)
            return self.embedding.status()

    def wait_vectors(self, timeout: float | None = None) -> bool:
        """Wait until the vector worker is done (or has failed); true when vectors are ready."""
        self.embedding.wait(timeout)
        return self.vector_status() == "ready"

    def _put_vectors(self, slots: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        self.derived.vectors.put(slots, vectors)

    def _wants_vector(self, slot: int) -> bool:
        return self.derived.wants_vector(slot)

    def _vectors_done(self) -> None:
        """The worker emptied a backlog: every memory has its vector."""
        with self.lock:
            if not self.embedding.busy:  # (a backlog added since is the next worker's)
                self.derived.backlog_done()
            self._forget_other_models()
        give_back_freed_memory()  # (the embedding's batches)
        self.save_snapshot(background=True)

    def usage_extension(self, memory_id: str, record: MemoryRecord) -> float:
        """Each access (local usage stream) extends a TTL by half of it."""
        count = self.usage.count(memory_id)
        return count * ttl_float(record.ttl_seconds or 0) / 2 if count else 0.0

    def record_usage(self, memory_ids: Iterable[str], ts: str) -> None:
        """Count accesses in this clone's usage stream and move the expiry of those memories."""
        self.usage.record(list(memory_ids), ts)
        with self.lock:
            self.derived.refresh_expiries(self.usage.refresh())

    def compact_usage(self, ts: str) -> str | None:
        """Compact the usage stream against the fold; its path if it was rewritten."""
        if self.usage.compact(self.derived.state.memories, ts=ts):
            return str(self.usage.path)
        return None

    def append(self, events: list[AnyEvent]) -> str:
        """Append to the journal, then fold in locally: read-your-writes within the process."""
        events = self.scrubbed(events)
        with self.lock:
            segment = self.journal.append(events)
            projection.apply_local(self.derived, events, self.embedding, self.deferral)
            self._model_seen()
            return segment

    def scrubbed(self, events: list[AnyEvent]) -> list[AnyEvent]:
        """``events`` with every free-text field scrubbed of secrets (see :func:`scrub_event`): every
        append goes through here, whatever wrote the event. Raises :class:`SecretRefused` with
        ``secrets = "refuse"``, before anything is written."""
        refuse = self.config.secrets == "refuse"
        return [scrub_event(event, refuse=refuse) for event in events]

    def append_planned(self, plan: Callable[[], list[AnyEvent]]) -> list[AnyEvent]:
        """Decide what to append on the current state of the journal, with no other writer in between.

        Holds the journal lock, catches up (so the fold includes whatever any process wrote), calls
        ``plan`` and appends what it returns. Used where an event must be written once (a promotion,
        an expiry, a save that may be a duplicate, a conditional change): two processes doing the same
        thing take turns, and the second one's ``plan`` sees the first one's events."""
        with self.lock:
            try:
                self.paths.ensure()
                with self.journal.lock.hold():
                    self.catch_up()
                    events = self.scrubbed(plan())
                    if events:
                        appended = self.journal.append_located(events, locked=True)
                        projection.apply_local(self.derived, events, self.embedding, self.deferral)
                        self._model_seen()
                        # the cursor covers what was just written; the texts of these events are
                        # indexed after the reply (see Deferral)
                        if appended is None or not cursors.cursor_past(self.derived, appended, events):
                            self.catch_up(flush=False)
                        else:
                            self._snapshot_if_due()
            except OSError as exc:
                raise JournalUnwritable(describe_os_error(exc)) from exc
            return events

    def append_planned_batches(self, plan: Callable[[], Iterable[list[AnyEvent]]]) -> int:
        """:meth:`append_planned` for a plan too large to hold at once (an import): ``plan`` yields its
        events a batch at a time, each appended, folded and indexed before the next is asked for, so
        a batch is planned on the fold with the earlier ones in it. The journal lock is held from the
        first to the last, so no other writer's line falls between them: the lines are those one
        append of every batch would write, in one block. A failure stops it after the batches
        written. Returns the number of events appended."""
        written = 0
        with self.lock:
            try:
                self.paths.ensure()
                with self.journal.lock.hold():
                    self.catch_up()
                    for batch in plan():
                        events = self.scrubbed(batch)
                        if not events:
                            continue
                        appended = self.journal.append_located(events, locked=True)
                        projection.apply_local(self.derived, events, self.embedding, self.deferral)
                        self._model_seen()
                        if appended is None or not cursors.cursor_past(self.derived, appended, events):
                            self.catch_up(flush=False)
                        written += len(events)
                    if written:
                        self._snapshot_if_due()
            except OSError as exc:
                raise JournalUnwritable(describe_os_error(exc)) from exc
        return written

    def save_snapshot(self, *, background: bool = False) -> bool:
        """Write the derived state atomically with the offsets it covers (skipped if another process
        is writing one right now, or while vectors are still being made: a snapshot would lack them).
        It is taken under the lock; with ``background`` it is encoded and written by a thread."""
        with self.lock:
            self.deferral.run()
            if not self.derived.cursors or self.embedding.busy or self.deferral.failed:
                return False
            taken = snapshots.take(
                self.derived,
                embedder=self.embedder.model_id,
                owner=self.paths.cache_owner(),
                embeddings_end=self.embeddings.end(),
            )
            fold = (self.derived, len(self.derived.state.seen))
        if taken is None:
            return False
        held = [taken]  # (the writer's only reference to the copies: see _write_snapshot)
        del taken
        if not background:
            return self._write_snapshot(held, fold)
        thread = threading.Thread(target=self._write_snapshot, args=(held, fold), name="eventmem-snapshot")
        thread.start()
        self._snapshot_thread = thread
        return True

    def _write_snapshot(self, held: list[snapshots.Taken], fold: tuple[Derived, int]) -> bool:
        """Write the snapshot :func:`snapshots.take` took of ``fold`` (the derived state, its number of
        event ids then); then, if the fold's records were made in this process, leave them in the file.
        ``held`` holds the only reference to what was taken (the encoded fold, a copy of the vector
        index, the keyword postings frozen): it is emptied, so that those copies are freed once written,
        before the memory is given back (a thread's arguments live until the thread ends: at 100k
        memories 0.8 KB a memory stayed with the allocator after a start that builds)."""
        taken = held.pop()
        vectors_file = taken[0].vectors_file
        written = snapshots.write(self.paths.cache_dir, self._snapshot_lock, *taken)
        del taken
        give_back_freed_memory()
        if not written:
            return False
        derived, seen = fold
        if self.deferral.enabled and self._built_here(derived):
            self._start_again_when_settled(derived)
        elif self.deferral.enabled and snapshots.many_decoded(derived.state.memories):
            self._records_from_snapshot(derived, seen, vectors_file)
        # (taking the snapshot settled the keyword index: after a build, that is what starts its
        # in-memory postings, once the vectors are done; their thread frees as much as it keeps)
        self._give_back_when_settled()
        return True

    def _built_here(self, derived: Derived) -> bool:
        """Whether ``derived`` is a fold this process made of a journal of at least
        :attr:`Tuning.start_again_from` memories (its records all decoded here, none from a snapshot)."""
        return (
            not self._start_again_failed
            and not isinstance(derived.state.memories, MemoryRecords)
            and len(derived.table) >= self.tuning.start_again_from
        )

    def _start_again_when_settled(self, derived: Derived) -> None:
        """Once the threads a build started are done (the keyword postings, the approximate vector
        index), :meth:`_start_again` from a thread. Only a weak reference to ``derived`` is kept
        meanwhile: the point is that nothing of it outlives the swap."""
        if self._starting_again is not None and self._starting_again.is_alive():
            return
        built = weakref.ref(derived)

        def later() -> None:
            held = built()
            if held is None:
                return
            ranking, vectors = held.keywords.index.ranking, held.vectors.index
            del held
            if ranking is not None:
                ranking.wait(GIVE_BACK_WAIT_SECONDS)
            vectors.settle(GIVE_BACK_WAIT_SECONDS)
            self.embedding.wait(GIVE_BACK_WAIT_SECONDS)
            del ranking, vectors
            self._start_again(built)

        self._starting_again = threading.Thread(target=later, name="eventmem-start-again", daemon=True)
        self._starting_again.start()

    def _start_again(self, built: weakref.ref[Derived]) -> bool:
        """Start again from the snapshot of the fold ``built`` refers to, as a server started from
        that snapshot would: write it (with what was made since the last one: the keyword postings,
        the approximate vector index), drop the fold and everything made with it, then load it.

        A fold made here leaves its long-lived objects (the slot table, the columns, the postings,
        the embedding cache's rows, the words the embedder met) among the millions of short-lived
        ones it made: Python's allocator gives an arena of 1 MiB back only once every object in it is
        freed, so the process kept about 2.5 KB a memory more than one started from the snapshot (6.3
        against 3.8 at 100k; 4.5 after this, docs/serving-memory.md). Dropped first and loaded after,
        the new objects fill new arenas. Calls wait for the drop and the load (the lock is held: 0.43 s
        measured at 100k memories). Nothing is done if the fold changed since the snapshot (a write,
        another process's events): the next snapshot tries again."""
        if not self.save_snapshot():
            return False
        with self.lock:
            started = time.perf_counter()
            self.deferral.run()
            derived = self.derived
            if derived is not built() or derived.events_since_snapshot or self.embedding.busy or self.deferral.failed:
                return False
            del derived
            self._swap(self._new_derived())
            self.embeddings.forget_rows(0)
            if isinstance(self.embedder, ForgetsWords):
                self.embedder.forget_words()
            gc.collect()
            give_back_freed_memory()
            try:
                loaded = snapshots.load(self._new_derived(), self.journal, self.paths, self.embedder, map_vectors=True)
            except Exception:  # (the journal is the truth: folded again below)
                log.exception("loading the snapshot just written failed")
                loaded = None
            if loaded is None:  # (replaced by another process since, by one that does not match: unlikely)
                log.warning("the snapshot just written could not be loaded: folding the journal again")
                self._start_again_failed = True
                self.catch_up(flush=False)
                return False
            self._swap(loaded)
            self.embeddings.forget_rows(loaded.embeddings_end)
            if isinstance(self.embedder, ForgetsWords):
                self.embedder.warm()
            self.started_again += 1
            held = time.perf_counter() - started
        self._after_load(loaded)
        log.info("started again from the snapshot of the journal it folded (calls waited at most %.2f s)", held)
        return True

    def _records_from_snapshot(self, derived: Derived, seen: int, vectors_file: str) -> None:
        """A server that folded its journal itself (a rebuild, a first start) holds every memory's
        record decoded: about 2 KB a memory, in objects made among the fold's short-lived ones; a
        merged branch decodes thousands more. Once a snapshot of that very fold is written, the
        records are swapped for their encodings in the file, decoded again when first used, as after
        a start from a snapshot (unchanged: nothing was folded since, and a record encodes and
        decodes to an equal one)."""
        written = snapshots.written_memories(self.paths.cache_dir, vectors_file)
        if written is None:
            return
        memories, records = written
        with self.lock:
            state = derived.state
            if self.derived is not derived or len(state.seen) != seen or not snapshots.many_decoded(state.memories):
                return
            if memories.keys() != state.memories.keys():
                return
            # (keyed by the strings held already, which the slot table shares: the decoded ones go now,
            # where they would have stayed, each beside the slot table's copy, among freed blocks)
            held = {memory_id: memory_id for memory_id in state.memories}
            state.memories = MemoryRecords({held[memory_id]: raw for memory_id, raw in memories.items()}, records)
        del memories, written
        give_back_freed_memory()

    def load_snapshot(self, *, map_vectors: bool = False) -> bool:
        """Load the snapshot if it matches this version, embedder and journal, and swap it in; else
        leave it (see :func:`snapshots.load`)."""
        loaded = snapshots.load(self._new_derived(), self.journal, self.paths, self.embedder, map_vectors=map_vectors)
        if loaded is None:
            return False
        with self.lock:
            self.embeddings.rewind()
            self._swap(loaded)
            self.embeddings.skip_to_end(loaded.embeddings_end)
        self._after_load(loaded)
        return True

    def _after_load(self, loaded: Derived) -> None:
        """What a loaded snapshot leaves to threads: the digests of the segments it took on trust, and
        the copy into memory of a mapped vector index; then the memory they, and the keyword postings
        made from the snapshot's, free is given back (at 100k memories 7 MB after a start from the
        snapshot, 24-40 MB after a start again from it: ``docs/serving-memory.md``)."""
        started: list[threading.Thread] = []
        trusted = [name for name in loaded.cursors if name not in loaded.hashers]
        if trusted:  # their digests go on from here later: made now, beside the first calls
            args = (loaded, self.journal, self.lock, trusted)
            digests = threading.Thread(target=cursors.make_hashers, args=args, name="eventmem-digests", daemon=True)
            digests.start()
            started.append(digests)
        if loaded.vectors.index.mapped:
            # (a moment later: the first calls of a session come first)
            copier = threading.Timer(OWN_VECTORS_AFTER_SECONDS, loaded.vectors.index.own)
            copier.name, copier.daemon = "eventmem-vectors-own", True
            copier.start()
            started.append(copier)
        self._give_back_when_settled(after=started)

    def is_current(self, paths: Iterable[str]) -> bool:
        """Whether every segment at ``paths`` is, by a stat, exactly as this store last applied it
        (no lock and no read: see :func:`cursors.is_current`)."""
        return cursors.is_current(self.derived, paths)

    def adopt_segments(self, names: Iterable[str]) -> None:
        """Take the current bytes of segments this process just rewrote as applied, without a
        rebuild (see :func:`cursors.adopt_segments`)."""
        with self.lock:
            cursors.adopt_segments(self.derived, self.journal, names)

    def rebuild(self, progress: Progress | None = None, *, wait: bool = True) -> int:
        """Drop every projection and fold the whole journal again, then write a snapshot.

        With ``wait=False`` the snapshot file is written by a thread: answers are ready when this
        returns, and :meth:`wait_snapshot` (or :meth:`close`) waits for the file."""
        with self.lock:
            self._reset()
            threaded = False
            try:
                count = cursors.catch_up_once(self.derived, self.reading, progress)
                self._forget_other_models()
                if self.deferral.enabled:
                    self.save_snapshot(background=not wait)
                elif wait:
                    self._snapshot_for_servers(in_thread=False)
                else:  # (answers are ready now: a thread makes the rest, then writes the snapshot)
                    kwargs = {"in_thread": True, "ahead": self.derived.encoded_state}
                    thread = threading.Thread(target=self._snapshot_for_servers, kwargs=kwargs, name="eventmem-rebuild")
                    thread.start()
                    self._snapshot_thread, threaded = thread, True
            finally:
                if not threaded:  # (else the thread's snapshot uses it, then drops it)
                    self.derived.encoded_state = None
            return count

    def _snapshot_for_servers(self, *, in_thread: bool, ahead: tuple[State, int, bytes] | None = None) -> None:
        """A command's rebuild, or its close: make what every server started from its snapshot would otherwise make
        again (and keep only in a snapshot of its close, which a client ending it within seconds cuts
        short), the keyword postings and the approximate vector index, side by side where due; then
        write the snapshot with them. ``in_thread``: in a thread of its own, while reads go on (whose
        catch-ups drop the fold encoded ahead: ``ahead`` is it, given back for the snapshot)."""
        with self.lock:
            derived = self.derived
            vectors = derived.vectors.index
            vectors.refresh()  # (its thread: FAISS works without the GIL beside the postings' thread)
            derived.keywords.settle()  # (starts the postings' thread where due)
            ranking = derived.keywords.index.ranking
        try:
            if ranking is not None:
                ranking.wait()
            vectors.settle()
            with self.lock:  # (a build that was running, one of an import's batches, may leave another due)
                vectors.refresh()
            vectors.settle()
            if not in_thread:  # (the caller holds the lock throughout: nothing dropped it)
                self.save_snapshot()
                return
            with self.lock:  # (taken with the fold encoded ahead, written by a thread this one waits for)
                derived.encoded_state = ahead
                self.save_snapshot(background=True)
                writer = self._snapshot_thread
            if writer is not None and writer is not threading.current_thread():
                writer.join()
        finally:
            derived.encoded_state = None  # (if the snapshot did not use it)

    def wait_settled(self, timeout: float | None = None) -> None:
        """Wait for the work a large catch-up left to threads once its vectors are made: the start
        again from a snapshot (:meth:`_start_again`) and the memory given back."""
        for thread in (self._starting_again, self._giving_back):
            if thread is not None:
                thread.join(timeout)

    def wait_snapshot(self) -> None:
        """Wait until a snapshot being written in the background is on disk."""
        thread = self._snapshot_thread
        if thread is not None:
            thread.join()

    def open(self, *, background_vectors: bool = False) -> None:
        """Cold start: the snapshot if it is valid, then the tail of the journal.

        With ``background_vectors`` (a server) a model-backed embedder loads and embeds in a worker
        thread while keyword search already answers (see :meth:`vector_status`), the texts of
        local changes are indexed just after the reply (see :class:`Deferral`), and a keyword index
        restored from a snapshot keeps its database in a file of the cache folder, out of the
        process's memory (see :mod:`eventmem.projectors.keywords_stored`)."""
        with self.lock:
            self.deferral.enabled = background_vectors
            if background_vectors:
                self.embedding.start()
            loaded = self.load_snapshot(map_vectors=background_vectors)
            if loaded:  # (decoding it and its keyword postings freed as much as they keep)
                self._give_back_when_settled()
            # a large backlog (a fresh clone's every memory, a merged branch) is embedded by the
            # worker while keywords answer, and the answers say so (see EmbeddingQueue.note)
            self.embedding.backlog_to_worker = background_vectors
            self.catch_up()
            self._forget_other_models()

    def _model_seen(self) -> None:
        if not self._model_recorded:  # the first save of a project that had no journal yet
            self._forget_other_models()

    def _forget_other_models(self) -> None:
        """After a change of embedder, once every memory has its vector from the new model, drop the
        previous model's embedding cache (see :func:`~eventmem.embedders.embedcache.forget_other_models`)."""
        if self.embedding.busy or self.embedding.failing:
            return
        if self.paths.journal_dir.is_dir():  # no memory here yet: reading must not create .eventmem/
            self._model_recorded = forget_other_models(self.paths.cache_dir / "embeddings", self.embedder.model_id)

    def close(self) -> None:
        with self.lock:
            timer, self._snapshot_timer = self._snapshot_timer, None
        if timer is not None:
            timer.cancel()  # (a snapshot still due is taken below)
        self.deferral.stop()  # (access counts must not be lost)
        self.embedding.stop(10.0)
        self.wait_snapshot()
        with self.lock:
            # a short-lived process (one CLI command) leaves a small tail for the next start to read
            derived = self.derived
            events = derived.events_since_snapshot
            missing = not (self.paths.cache_dir / "snapshot.bin").exists()
            unkept = derived.keywords.postings_unkept or derived.vectors.approximate_unkept
            building = not derived.vectors.settle(0)  # (an import's last batches start one: its due snapshot lacks it)
            if not self.deferral.enabled and ((events and (missing or events >= 200 or unkept)) or building):
                # a command's (an import's, a fresh clone's first): with what servers would make again
                self._snapshot_for_servers(in_thread=False)
            elif (events and (missing or events >= 200)) or unkept:
                self.save_snapshot()  # (so that the next start reads them: seconds of work at 100k)
        self.derived.keywords.close()  # (no thread of it may outlive the process's exit)
