"""The projector runner: one journal's folded state and its indexes, kept current with the disk.

Before a call is answered, :meth:`Store.catch_up` stats the segments (cheap) and applies whatever
any process appended since; so a save acknowledged by one process is seen by a call that another
process starts afterwards. A segment that shrank, vanished or was rewritten (git checkout, rebase,
pull) is detected by its prefix digest, and everything is rebuilt: the fold is commutative, so a
rebuild gives the same answers as the incremental path.

In a server (``defer_after_reply``) a save is answered once its event is appended and folded: the
texts of this process's own changes reach the keyword and vector indexes just after the reply (see
:meth:`Store.defer`), and in any case before the next call reads them.

Derived state (fold, FAISS index, FTS5 index) is snapshotted to ``cache/snapshot.bin`` together with
the byte offset and prefix digest of every segment it covers, and loaded on the next start; a
snapshot whose version, embedder or digests do not match is ignored and rebuilt, never used.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

from eventmem.core.errors import JournalCorrupt, JournalUnwritable
from eventmem.core.events import AnyEvent
from eventmem.core.ids import iso_to_epoch
from eventmem.core.records import MemoryRecord, MemoryRecords
from eventmem.core.redact import scrub_event
from eventmem.core.state import State
from eventmem.embedders.embedcache import EmbeddingCache, forget_other_models
from eventmem.embedders.embedder import Embedder
from eventmem.journal.config import Config
from eventmem.journal.files import FileLock
from eventmem.journal.journal import Journal, describe_os_error
from eventmem.journal.project import ProjectPaths
from eventmem.journal.usage import UsageLog
from eventmem.projectors.columns import ColumnsProjector, SlotTable
from eventmem.projectors.keywords import KeywordsProjector
from eventmem.projectors.vectors import VectorsProjector
from eventmem.runner import cursors, snapshots
from eventmem.runner.cursors import Cursor, catch_up_once, cursor_past
from eventmem.runner.deferral import Deferral
from eventmem.runner.embedding import EmbeddingQueue, Progress
from eventmem.runner.projection import sync
from eventmem.runner.readview import ReadView
from eventmem.runner.tuning import Tuning

__all__ = ["Store"]

log = logging.getLogger("eventmem.runner")

OWN_VECTORS_AFTER_SECONDS = 1.0
"""A server copies a mapped vector index into memory this long after opening (see VectorIndex.own)."""


class Store:
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
        self.usage_extension: Callable[[str, MemoryRecord], float] = self._usage_extension
        self.rebuilds = 0
        self._snapshot_thread: threading.Thread | None = None
        self.table = SlotTable()
        """Memory id <-> slot: the row of the filter columns, the keyword index and the vector index
        (one object for the life of the store: the projectors hold it)."""
        self.embedding = EmbeddingQueue(
            self.lock, embedder, self.embeddings, self._put_vectors, self._wants_vector, self._vectors_done
        )
        self._model_recorded = False
        """The embedder's model id is in ``cache/embeddings/model`` (see _forget_other_models)."""
        self.deferral = Deferral(self.lock)
        """Work run just after the reply in a server (see :mod:`eventmem.runner.deferral`)."""
        self._reset()

    # -- reading ------------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[ReadView]:
        """A consistent view of the fold and the indexes for the ``with`` block (the lock is held
        throughout, so keep the block short; :meth:`catch_up` first to see other processes' writes)."""
        with self.lock:
            yield ReadView(self)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Keep every other read and write of this runner out for the block (a journal rewrite)."""
        with self.lock:
            yield

    def hold_writes(self) -> None:
        """Wait for the write in progress, if any, and let no other start (for an exit between writes)."""
        self.lock.acquire()

    # -- state --------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.embeddings.rewind()  # a rebuild needs every cached vector
        self.embedding.forget_all()  # (results the vector worker has in flight are for the old slots)
        self.state = State()
        self.cursors: dict[str, Cursor] = {}
        self._hashers: dict[str, hashlib.blake2b] = {}
        self.table.replace([])
        self.slot_hashes: list[bytes] = []
        """Per slot, the digest of the text indexed (see :meth:`_sync`): unchanged means no re-index."""
        self.columns = ColumnsProjector(self.table, self._visible)
        self.keywords = KeywordsProjector(
            self.table, bulk_from=self.tuning.bulk_keywords_min, postings_from=self.tuning.postings_from
        )
        self.vectors = VectorsProjector(
            self.table, self.embedder.dim, self.embedding.submit, ann_from=self.tuning.ann_from
        )
        self.problems: dict[tuple[str, int], JournalCorrupt] = {}
        self.events_since_snapshot = 0
        self.deferral.drop()
        self.changed: set[str] = set()
        """Memories whose visible state changed since :meth:`drain_changes` (for push updates)."""
        self.changed_all = True
        self._encoded_state: tuple[State, int, bytes] | None = None
        """The fold encoded ahead of a snapshot, while the keyword index was being filled (see
        :meth:`_encoded_state_for_snapshot`)."""

    def _visible(self, memory_id: str) -> MemoryRecord | None:
        return self.state.visible(memory_id)

    # -- catching up --------------------------------------------------------------------------

    def catch_up(self, progress: Progress | None = None, *, flush: bool = True) -> int:
        """Apply everything appended since the last call; rebuild if a segment changed under us.
        First (unless ``flush`` is false) the work deferred until after the reply runs (see
        :meth:`defer`).

        Returns the number of events applied.
        """
        with self.lock:
            if flush:
                self.deferral.run()
            memories = self.state.memories
            damaged = isinstance(memories, MemoryRecords) and memories.damaged
            if damaged:
                log.error("the snapshot in %s was damaged: dropping it and rebuilding", self.paths.cache_dir)
                (self.paths.cache_dir / "snapshot.bin").unlink(missing_ok=True)
            damaged = self.deferral.take_failure() or damaged
            try:
                applied = -1 if damaged else catch_up_once(self, progress)
                if applied < 0:
                    log.info("journal changed underneath (checkout, rebase or pull) or cache damaged: rebuilding")
                    self.rebuilds += 1
                    self._reset()
                    applied = catch_up_once(self, progress)
                self._snapshot_if_due()
            finally:
                self._encoded_state = None  # (if no snapshot used it)
            self._refresh_expiries(self.usage.refresh())
            return max(applied, 0)

    def _snapshot_due(self) -> int:
        """Events to fold before the next snapshot: at least the configured count, and a tenth of
        the journal, so that snapshot writes stay a small share of the work as memory grows."""
        if self.tuning.snapshot_every is not None:
            return self.tuning.snapshot_every
        return max(self.config.snapshot_every_events, len(self.state.seen) // 10)

    def _snapshot_if_due(self) -> None:
        if self.events_since_snapshot >= self._snapshot_due():
            self.save_snapshot(background=True)

    def apply_local(self, events: Iterable[AnyEvent]) -> None:
        """Apply events this process just appended, without waiting for the next catch-up."""
        with self.lock:
            events = list(events)
            touched = set(self.state.written(events))
            sync(self, touched, defer_index=self.deferral.enabled)
            if not self._model_recorded:  # the first save of a project that had no journal yet
                self._forget_other_models()

    def apply_adopted(self, events: Iterable[AnyEvent]) -> None:
        """:meth:`apply_local` for events whose lines went into a segment taken as applied with
        :meth:`adopt_segments` (they will never be read back)."""
        with self.lock:
            events = list(events)
            self.apply_local(events)
            for event in events:
                self.state.unread.pop(event.id, None)

    # -- keeping indexes in step with the fold ------------------------------------------------

    def drain_changes(self) -> tuple[bool, set[str]]:
        """What changed since the last call: (everything?, memory ids). Used to push updates."""
        with self.lock:
            everything, changed = self.changed_all, self.changed
            self.changed_all, self.changed = False, set()
            return everything, changed

    @property
    def defer_after_reply(self) -> bool:
        """Index the texts of local changes after the reply (see :meth:`defer`)."""
        return self.deferral.enabled

    def defer(self, work: Callable[[], None]) -> None:
        """Run ``work`` under the lock just after the reply: from a thread a moment later, or at the
        start of the next call (catch-up), whichever comes first; in order with other deferred work.
        Without ``defer_after_reply`` (one command, a library user) it runs now."""
        self.deferral.defer(work)

    def hidden_memories(self) -> list[str]:
        """Memories the fold knows that are not live now (deleted, expired, or never saved): found
        from the live column, without looking at (or decoding) the live ones. Call with the lock held."""
        ids = self.table.ids
        hidden = [ids[slot] for slot in np.flatnonzero(~self.columns.visible()).tolist()]
        hidden += self.state.memories.keys() - self.table.of.keys()
        return hidden

    def expires_epoch(self, memory_id: str, record: MemoryRecord) -> float:
        if record.ttl_seconds is None:
            return math.inf
        base = iso_to_epoch(record.ttl_set_at) + _ttl_float(record.ttl_seconds)
        return base + self.usage_extension(memory_id, record)

    # -- vectors ------------------------------------------------------------------------------
    #
    # Texts go to the embedding queue (see eventmem.runner.embedding): embedded at once, or by a
    # worker thread with a model that loads slowly (``background_vectors``, a server).

    @property
    def embed_progress(self) -> Progress | None:
        """Called with (embedded, to embed) as a large batch of texts is embedded."""
        return self.embedding.progress

    @embed_progress.setter
    def embed_progress(self, progress: Progress | None) -> None:
        self.embedding.progress = progress

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.embedding.embed_query(text)

    def forget_query_vectors(self) -> None:
        """Drop the cached vectors of past queries (an evaluation embeds each configuration's afresh)."""
        self.embedding.query_vectors.clear()

    def vector_status(self) -> str:
        """``ready``, ``loading`` (the model), ``embedding`` (a backlog) or ``unavailable``."""
        with self.lock:
            self.deferral.run()  # (of every change made so far)
            return self.embedding.status()

    def vector_note(self) -> str:
        """The status in words, for a result that had to do without vectors."""
        with self.lock:
            return self.embedding.note(self.vector_status())

    def wait_vectors(self, timeout: float | None = None) -> bool:
        """Wait until the vector worker is done (or has failed); true when vectors are ready."""
        self.embedding.wait(timeout)
        return self.vector_status() == "ready"

    def start_vectors(self) -> None:
        """Switch to background embedding and start loading the model (returns at once)."""
        self.embedding.start()

    def stop_vectors(self, timeout: float | None = 10.0) -> None:
        """Stop the vector worker after its current batch. Not to be called with the lock held."""
        self.embedding.stop(timeout)

    def _put_vectors(self, slots: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        self.vectors.put(slots, vectors)

    def _vectors_done(self) -> None:
        """The worker emptied a backlog: every memory has its vector."""
        with self.lock:
            self._forget_other_models()
        self.save_snapshot(background=True)

    def _wants_vector(self, slot: int) -> bool:
        return slot < len(self.table) and bool(self.columns.visible()[slot])

    def _usage_extension(self, memory_id: str, record: MemoryRecord) -> float:
        """Each access (local usage stream) extends a TTL by half of it."""
        count = self.usage.count(memory_id)
        return count * _ttl_float(record.ttl_seconds or 0) / 2 if count else 0.0

    def find_duplicate(self, text: str) -> list[str]:
        """Live memories whose content normalises to the same text (see :func:`dedup_key`)."""
        with self.lock:
            return self.columns.duplicates(text)

    def record_usage(self, memory_ids: Iterable[str], ts: str) -> None:
        """Count accesses in this clone's usage stream and move the expiry of those memories."""
        self.usage.record(list(memory_ids), ts)
        with self.lock:
            self._refresh_expiries(self.usage.refresh())

    def compact_usage(self, ts: str) -> str | None:
        """Compact the usage stream against the fold; its path if it was rewritten."""
        if self.usage.compact(self.state.memories, ts=ts):
            return str(self.usage.path)
        return None

    def _refresh_expiries(self, memory_ids: Iterable[str]) -> None:
        """Recompute these memories' expiry column, after their usage changed (the lock held)."""
        expiries = []
        for memory_id in self.columns.expiring(memory_ids):
            record = self.state.visible(memory_id)
            if record is not None:
                expiries.append((memory_id, self.expires_epoch(memory_id, record)))
        if expiries:
            self.columns.expire_at(expiries)

    # -- writing ------------------------------------------------------------------------------

    def append(self, events: list[AnyEvent]) -> str:
        """Append to the journal, then fold in locally: read-your-writes within the process."""
        events = self.scrubbed(events)
        with self.lock:
            segment = self.journal.append(events)
            self.apply_local(events)
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
                        self.apply_local(events)
                        # the cursor covers what was just written; the texts of these events are
                        # indexed after the reply (see defer_after_reply)
                        if appended is None or not cursor_past(self, appended, len(events)):
                            self.catch_up(flush=False)
                        else:  # (their lines will not be read back)
                            for event in events:
                                self.state.unread.pop(event.id, None)
                            self._snapshot_if_due()
            except OSError as exc:
                raise JournalUnwritable(describe_os_error(exc)) from exc
            return events

    # -- snapshots ----------------------------------------------------------------------------

    @property
    def snapshot_path(self) -> str:
        return str(self.paths.cache_dir / "snapshot.bin")

    def save_snapshot(self, *, background: bool = False) -> bool:
        """Write the derived state atomically with the offsets it covers (skipped if another
        process is writing one right now); with ``background`` from a thread (see :func:`snapshots.save`)."""
        return snapshots.save(self, background=background)

    def load_snapshot(self, *, map_vectors: bool = False) -> bool:
        """Load the snapshot if it matches this version, embedder and journal; else leave it
        (see :func:`snapshots.load`)."""
        return snapshots.load(self, map_vectors=map_vectors)

    def is_current(self, paths: Iterable[str]) -> bool:
        """Whether every segment at ``paths`` is, by a stat, exactly as this store last applied it
        (no lock and no read: see :func:`cursors.is_current`)."""
        return cursors.is_current(self, paths)

    def adopt_segments(self, names: Iterable[str]) -> None:
        """Take the current bytes of segments this process just rewrote as applied, without a
        rebuild (see :func:`cursors.adopt_segments`)."""
        cursors.adopt_segments(self, names)

    # -- whole rebuild ------------------------------------------------------------------------

    def rebuild(self, progress: Progress | None = None, *, wait: bool = True) -> int:
        """Drop every projection and fold the whole journal again, then write a snapshot.

        With ``wait=False`` the snapshot file is written by a thread: answers are ready when this
        returns, and :meth:`wait_snapshot` (or :meth:`close`) waits for the file."""
        with self.lock:
            self._reset()
            try:
                count = catch_up_once(self, progress)
                self._forget_other_models()
                self.save_snapshot(background=not wait)
            finally:
                self._encoded_state = None
            return count

    def wait_snapshot(self) -> None:
        """Wait until a snapshot being written in the background is on disk."""
        thread = self._snapshot_thread
        if thread is not None:
            thread.join()

    def open(self, *, background_vectors: bool = False) -> None:
        """Cold start: the snapshot if it is valid, then the tail of the journal.

        With ``background_vectors`` (a server) a model-backed embedder loads and embeds in a worker
        thread while keyword search already answers (see :meth:`vector_status`), and the texts of
        local changes are indexed just after the reply (see ``defer_after_reply``)."""
        with self.lock:
            self.deferral.enabled = background_vectors
            if background_vectors:
                self.start_vectors()
            if self.load_snapshot(map_vectors=background_vectors) and self.vectors.index.mapped:
                # (a moment later: the first calls of a session come first)
                copier = threading.Timer(OWN_VECTORS_AFTER_SECONDS, self.vectors.index.own)
                copier.name, copier.daemon = "eventmem-vectors-own", True
                copier.start()
            self.catch_up()
            self._forget_other_models()

    def _forget_other_models(self) -> None:
        """After a change of embedder, once every memory has its vector from the new model, drop the
        previous model's embedding cache (see :func:`~eventmem.embedders.embedcache.forget_other_models`)."""
        if self.embedding.busy or self.embedding.failing:
            return
        if self.paths.journal_dir.is_dir():  # no memory here yet: reading must not create .eventmem/
            self._model_recorded = forget_other_models(self.paths.cache_dir / "embeddings", self.embedder.model_id)

    def close(self) -> None:
        self.deferral.stop()  # (access counts must not be lost)
        self.stop_vectors()
        self.wait_snapshot()
        with self.lock:
            # a short-lived process (one CLI command) leaves a small tail for the next start to read
            missing = not (self.paths.cache_dir / "snapshot.bin").exists()
            if self.events_since_snapshot and (missing or self.events_since_snapshot >= 200):
                self.save_snapshot()
            elif self.keywords.postings_unkept or self.vectors.approximate_unkept:
                self.save_snapshot()  # (so that the next start reads them: seconds of work at 100k)
        self.keywords.close()  # (no thread of it may outlive the process's exit)


def _ttl_float(seconds: int) -> float:
    """A TTL as a float; one too large for a float (a journal line may carry any integer) is infinite."""
    try:
        return float(seconds)
    except OverflowError:
        return math.inf if seconds > 0 else -math.inf
