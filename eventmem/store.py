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

import functools
import gc
import hashlib
import logging
import math
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.codec import UnknownEvent
from eventmem.config import Config
from eventmem.embedcache import HASH_BYTES, EmbeddingCache, content_hash
from eventmem.embedder import Embedder
from eventmem.errors import JournalCorrupt, JournalUnwritable, UnsafePath
from eventmem.events import AnyEvent
from eventmem.files import FileLock, atomic_replace, atomic_write
from eventmem.ids import iso_to_epoch, new_id
from eventmem.journal import Appended, Journal, Segment, describe_os_error, name_of_segment
from eventmem.project import ProjectPaths, sanitize
from eventmem.projectors.base import Batch, Projected
from eventmem.projectors.columns import ColumnsProjector, SlotTable
from eventmem.projectors.keywords import KeywordsProjector
from eventmem.projectors.vectors import EmbedItem, VectorIndex, VectorsProjector, embed_text
from eventmem.redact import scrub_event
from eventmem.runner.deferral import Deferral
from eventmem.runner.embedding import EmbeddingQueue, Progress
from eventmem.runner.readview import ReadView
from eventmem.state import MemoryRecord, MemoryRecords, State, StoredState
from eventmem.usage import UsageLog

__all__ = ["Store"]

log = logging.getLogger("eventmem.store")

SNAPSHOT_FORMAT = 7
"""3: float16 vector index; 4: the vector index in its own file, mapped on load; 5: causal depths;
6: the clone that wrote it (see :meth:`ProjectPaths.cache_owner`); 7: the dedup keys inside the
columns projector's own snapshot."""
OWN_VECTORS_AFTER_SECONDS = 1.0
"""A server copies a mapped vector index into memory this long after opening (see VectorIndex.own)."""
GC_PAUSE_BYTES = 1 << 20
"""A catch-up that reads more than this runs with the cyclic GC paused."""
HASH_AHEAD_BYTES = 1 << 20
"""A catch-up that reads more than this digests the segments in a second thread."""


class Cursor(msgspec.Struct, kw_only=True):
    """How far one segment has been applied, and a digest of the bytes applied."""

    offset: int = 0
    digest: bytes = b""
    stat: tuple[int, int, int] = (0, 0, 0)
    """(size, mtime_ns, inode) when last looked at: unchanged means nothing to do."""


class Snapshot(msgspec.Struct, kw_only=True):
    format: int
    embedder: str
    cursors: dict[str, Cursor]
    state: State
    slot_ids: list[str]
    slot_hashes: list[bytes]
    keywords: bytes
    problems: list[tuple[str, int, str]] = []
    """Corrupt lines in the bytes the snapshot covers: still reported after a warm start."""
    columns: bytes = b""
    """The columns projector's snapshot (filter columns of every slot, dedup keys): no per-memory
    work on load, and a new process's first save does not hash every memory."""
    vectors_file: str = ""
    """The vector index's own file in the cache: loaded as a read-only map, so that a cold start
    does not copy it (see :meth:`VectorIndex.load`)."""
    owner: str = ""
    """The clone that wrote it: a snapshot of another (one committed to git and merged) is ignored."""


class StoredSnapshot(msgspec.Struct, kw_only=True):
    """How a snapshot is read back: as :class:`Snapshot`, but nothing is copied out of the file
    that need not be (the memories stay encoded until used, the indexes are views of the file)."""

    format: int
    embedder: str
    cursors: dict[str, Cursor]
    state: StoredState
    slot_ids: list[str]
    slot_hashes: list[bytes]
    keywords: memoryview
    problems: list[tuple[str, int, str]] = []
    columns: memoryview = memoryview(b"")
    vectors_file: str = ""
    owner: str = ""


class Store:
    def __init__(self, paths: ProjectPaths, config: Config, embedder: Embedder) -> None:
        self.paths = paths
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
        self.keywords = KeywordsProjector(self.table)
        self.vectors = VectorsProjector(self.table, self.embedder.dim, self.embedding.submit)
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

    def _projected(self, record: MemoryRecord) -> Projected:
        """A visible memory as the projectors see it."""
        expires = math.inf if record.ttl_seconds is None else self.expires_epoch(record.id, record)
        superseded = record.id in self.state.adjacency and self._is_superseded(record.id)
        return Projected(record, superseded, expires)

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
                applied = -1 if damaged else self._catch_up_once(progress)
                if applied < 0:
                    log.info("journal changed underneath (checkout, rebase or pull) or cache damaged: rebuilding")
                    self.rebuilds += 1
                    self._reset()
                    applied = self._catch_up_once(progress)
                self._snapshot_if_due()
            finally:
                self._encoded_state = None  # (if no snapshot used it)
            for memory_id in self.usage.refresh():
                self.refresh_expiry(memory_id)
            return max(applied, 0)

    def is_current(self, paths: Iterable[str]) -> bool:
        """Whether every segment at ``paths`` is, by a stat, exactly as this store last applied it.

        No lock and no read: the watcher asks this first, so that this process's own appends (which
        the watcher sees like anyone else's) cost it a stat each instead of a catch-up."""
        cursors = self.cursors
        for path in paths:
            cursor = cursors.get(name_of_segment(path))
            try:
                st = os.stat(path)
            except OSError:
                return False
            if cursor is None or cursor.stat != (st.st_size, st.st_mtime_ns, st.st_ino):
                return False
        return True

    def _snapshot_due(self) -> int:
        """Events to fold before the next snapshot: at least the configured count, and a tenth of
        the journal, so that snapshot writes stay a small share of the work as memory grows."""
        return max(self.config.snapshot_every_events, len(self.state.seen) // 10)

    def _snapshot_if_due(self) -> None:
        if self.events_since_snapshot >= self._snapshot_due():
            self.save_snapshot(background=True)

    def _catch_up_once(self, progress: Progress | None) -> int:
        segments = self.journal.segments()
        present = {s.name for s in segments}
        if any(name not in present for name in self.cursors):
            return -1
        work: list[tuple[Segment, Cursor]] = []
        for segment in segments:
            cursor = self.cursors.get(segment.name)
            stat = (segment.size, segment.mtime_ns, segment.inode)
            if cursor is None:
                cursor = Cursor()
            elif cursor.stat == stat:
                continue
            elif segment.size < cursor.offset:
                return -1
            elif not _only_appended(segment, cursor):  # (touched but not grown: rewritten in place?)
                if _prefix_digest(segment, cursor.offset) != cursor.digest:
                    return -1
            work.append((segment, cursor))
        total = sum(s.size - c.offset for s, c in work)
        if total < GC_PAUSE_BYTES:
            return self._apply_work(work, total, progress)
        # the fold makes many objects that live on: the cyclic GC would scan them again and again
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._apply_work(work, total, progress)
        finally:
            if enabled:
                gc.enable()

    def _apply_work(self, work: list[tuple[Segment, Cursor]], total: int, progress: Progress | None) -> int:
        done = 0
        count = 0
        fresh = not self.state.seen
        events: list[AnyEvent | UnknownEvent] = []
        # a large catch-up digests the segments in a thread (hashlib works without the GIL)
        ahead = (
            _HashAhead([(s, c.offset, self._hashers.get(s.name)) for s, c in work])
            if total >= HASH_AHEAD_BYTES
            else None
        )
        try:
            for index, (segment, cursor) in enumerate(work):
                result = self.journal.scan(segment.path, cursor.offset, name=segment.name)
                for problem in result.corrupt:
                    if (problem.path, problem.offset) not in self.problems:
                        log.error("%s", problem)
                        self.problems[(problem.path, problem.offset)] = problem
                events.extend(result.events)
                count += len(result.events)
                hasher = ahead.hasher(index, result.end) if ahead is not None else None
                if hasher is None:
                    hasher = _hasher_from(self._hashers.get(segment.name), segment, cursor.offset, result.end)
                self._hashers[segment.name] = hasher
                self.cursors[segment.name] = Cursor(
                    offset=result.end,
                    digest=hasher.digest(),
                    stat=(segment.size, segment.mtime_ns, segment.inode),
                )
                done += segment.size - cursor.offset
                if progress is not None:
                    progress(done, total)
        finally:
            if ahead is not None:
                ahead.stop()
        # one batch, so that a prev in a later segment and every copy of an event id are seen together
        folded, stale = self.state.fold(events)
        if stale and not fresh:
            log.info("events arrived that change what was folded before (an awaited prev, another copy of an id)")
            return -1
        touched = set(folded)
        if touched:
            if len(self.table):
                self._sync(touched)
            else:
                self._sync_all(touched, snapshot_due=self.events_since_snapshot + count >= self._snapshot_due())
        self.events_since_snapshot += count
        return count

    def apply_local(self, events: Iterable[AnyEvent]) -> None:
        """Apply events this process just appended, without waiting for the next catch-up."""
        with self.lock:
            events = list(events)
            touched = set(self.state.written(events))
            self._sync(touched, defer_index=self.deferral.enabled)
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

    def _index_texts(self, texts: Batch, items: list[EmbedItem]) -> None:
        if texts.upserts:
            self.keywords.apply(texts)
        self.vectors.embed(items)

    def _sync(self, touched: set[str], *, defer_index: bool = False) -> None:
        """Bring slots, columns, tags and the indexes in step with the fold for ``touched``; with
        ``defer_index`` the new texts reach the keyword and vector indexes after the reply (:meth:`defer`)."""
        self.deferral.run()  # earlier texts first: the indexes take changes in order
        state = self.state
        self.changed.update(touched)
        # a memory's "superseded" flag depends on its superseder being alive
        for memory_id in list(touched):
            for link in state.links_of(memory_id):
                if link.relation == "supersedes":
                    touched.add(link.target)
        removed: list[int] = []
        removals: list[str] = []
        upserts: list[Projected] = []
        to_embed: list[EmbedItem] = []
        texts: list[Projected] = []
        table, hashes = self.table, self.slot_hashes
        live = self.columns.visible()
        for memory_id in touched:
            record = state.visible(memory_id)
            slot = table.get(memory_id)
            if record is None:
                if slot is not None and live[slot]:
                    removals.append(memory_id)
                    removed.append(slot)
                    hashes[slot] = b""
                continue
            if slot is None:
                slot, _ = table.assign(memory_id)
                hashes.append(b"")
                was_live = False
            else:
                was_live = bool(live[slot])
            text = embed_text(record)
            digest = content_hash(text + "\x00" + record.summary)
            projected = self._projected(record)
            if hashes[slot] != digest or not was_live:
                to_embed.append((slot, text, content_hash(text)))
                texts.append(projected)
                hashes[slot] = digest
            upserts.append(projected)
        self.columns.apply(Batch(tuple(upserts), tuple(removals)))
        if removed:
            self.embedding.forget(removed)
            gone = Batch((), tuple(removals))
            self.vectors.apply(gone)
            self.keywords.apply(gone)
        changed = Batch(tuple(texts), ())
        if defer_index and (texts or to_embed):
            self.defer(functools.partial(self._index_texts, changed, to_embed))
        else:
            self._index_texts(changed, to_embed)

    def _sync_all(self, touched: set[str], *, snapshot_due: bool = False) -> None:
        """:meth:`_sync` for a store with no slot yet (a rebuild, a start without a snapshot): every
        visible memory gets a slot in the fold's order, with the same columns, hashes, keyword rows
        and vectors as :meth:`_sync` would give it, made in bulk. The keyword index is filled by a
        thread (SQLite works without the GIL) while this one makes the columns and vectors."""
        state = self.state
        self.changed.update(touched)
        slot_ids: list[str] = []
        slot_hashes = self.slot_hashes
        records: list[MemoryRecord] = []
        to_embed: list[EmbedItem] = []
        try:
            blake2b = hashlib.blake2b
            for memory_id, record in state.memories.items():
                if not record.exists or ((record.deleted_stamp or record.expired_stamp) and record.status != "live"):
                    continue
                slot = len(slot_ids)
                slot_ids.append(memory_id)
                records.append(record)
                text = embed_text(record)
                # content_hash(text), then content_hash(text + "\x00" + summary) from the same state
                hasher = blake2b(text.encode("utf-8"), digest_size=HASH_BYTES)
                text_hash = hasher.digest()
                hasher.update(b"\x00" + record.summary.encode("utf-8"))
                slot_hashes.append(hasher.digest())
                to_embed.append((slot, text, text_hash))
            self.table.extend(slot_ids)
            batch = Batch(tuple(map(self._projected, records)), ())
            self.keywords.load(batch)  # (a large one from a thread, while this one goes on)
            self.columns.load(batch)
            self.vectors.embed(to_embed)  # (what its load would embed, hashed above in the same pass)
            if snapshot_due and self.keywords.loading and not self.embedding.busy:
                try:
                    self._encoded_state = (state, len(state.seen), msgspec.msgpack.encode(state))
                except OverflowError:  # (no snapshot then: see save_snapshot)
                    self._encoded_state = None
        finally:
            self.keywords.settle()

    def hidden_memories(self) -> list[str]:
        """Memories the fold knows that are not live now (deleted, expired, or never saved): found
        from the live column, without looking at (or decoding) the live ones. Call with the lock held."""
        ids = self.table.ids
        hidden = [ids[slot] for slot in np.flatnonzero(~self.columns.visible()).tolist()]
        hidden += self.state.memories.keys() - self.table.of.keys()
        return hidden

    def _is_superseded(self, memory_id: str) -> bool:
        return any(
            link.relation == "supersedes" and link.target == memory_id and self.state.visible(link.source)
            for link in self.state.links_of(memory_id)
        )

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
            for memory_id in self.usage.refresh():
                self.refresh_expiry(memory_id)

    def compact_usage(self, ts: str) -> str | None:
        """Compact the usage stream against the fold; its path if it was rewritten."""
        if self.usage.compact(self.state.memories, ts=ts):
            return str(self.usage.path)
        return None

    def refresh_expiry(self, memory_id: str) -> None:
        """Recompute one memory's expiry column (after its usage changed)."""
        with self.lock:
            record = self.state.visible(memory_id)
            if record is not None:
                self.columns.expire_at([(memory_id, self.expires_epoch(memory_id, record))])

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
        an expiry, a save that may be a duplicate): two processes doing the same thing take turns, and
        the second one's ``plan`` sees the first one's events."""
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
                        if appended is None or not self._cursor_past(appended, len(events)):
                            self.catch_up(flush=False)
                        else:  # (their lines will not be read back)
                            for event in events:
                                self.state.unread.pop(event.id, None)
            except OSError as exc:
                raise JournalUnwritable(describe_os_error(exc)) from exc
            return events

    def _cursor_past(self, appended: Appended, count: int) -> bool:
        """Move the cursor of the segment just appended to past the append, from the bytes written
        (no read), when it stood exactly where the append began; else leave it to a catch-up."""
        cursor = self.cursors.get(appended.name)
        hasher = self._hashers.get(appended.name)
        if (
            cursor is None
            or hasher is None
            or cursor.offset != appended.start
            or cursor.stat[2] != appended.stat[2]
            or appended.stat[0] != appended.start + len(appended.data)
        ):
            return False
        hasher = hasher.copy()
        hasher.update(appended.data)
        self._hashers[appended.name] = hasher
        self.cursors[appended.name] = Cursor(offset=appended.stat[0], digest=hasher.digest(), stat=appended.stat)
        self.events_since_snapshot += count
        self._snapshot_if_due()
        return True

    def adopt_segments(self, names: Iterable[str]) -> None:
        """Take the current bytes of segments this process just rewrote as applied, without a rebuild.

        For compaction, which moves lines between segments without changing the set of events: the
        caller holds the journal lock and had caught up before rewriting, so every event in them is
        already folded. A vanished segment is forgotten."""
        with self.lock:
            present = {s.name: s for s in self.journal.segments()}
            for name in names:
                segment = present.get(name)
                if segment is None:
                    self.cursors.pop(name, None)
                    self._hashers.pop(name, None)
                    continue
                hasher = _prefix_hasher(segment, segment.size)
                self._hashers[name] = hasher
                self.cursors[name] = Cursor(
                    offset=segment.size,
                    digest=hasher.digest(),
                    stat=(segment.size, segment.mtime_ns, segment.inode),
                )

    # -- snapshots ----------------------------------------------------------------------------

    @property
    def snapshot_path(self) -> str:
        return str(self.paths.cache_dir / "snapshot.bin")

    def save_snapshot(self, *, background: bool = False) -> bool:
        """Write the derived state atomically with the offsets it covers (skipped if another
        process is writing one right now). The state is taken under the lock; with ``background``
        the snapshot is encoded from copies and written by a thread so that calls are not held up."""
        with self.lock:
            self.deferral.run()
            if not self.cursors or self.embedding.busy or self.deferral.failed:
                return False  # (vectors still being made: a snapshot would lack them)
            try:
                state = self._encoded_state_for_snapshot()
            except OverflowError as exc:  # an integer of a journal line beyond 64 bits: the journal still holds it
                log.warning("no snapshot written: %s", exc)
                return False
            snapshot = Snapshot(
                format=SNAPSHOT_FORMAT,
                embedder=self.embedder.model_id,
                cursors=dict(self.cursors),
                state=cast(State, msgspec.Raw(state)),  # encoded as the same bytes
                slot_ids=list(self.table.ids),
                slot_hashes=list(self.slot_hashes),
                keywords=self.keywords.snapshot(),
                problems=[(p.path, p.offset, p.reason) for p in self.problems.values()],
                columns=self.columns.snapshot(),
                vectors_file=f"vectors-{new_id()}.faiss",
                owner=self.paths.cache_owner(),
            )
            vectors = self.vectors.index.copy()
            self.events_since_snapshot = 0
        write = functools.partial(self._write_snapshot, snapshot, vectors)
        if background:
            thread = threading.Thread(target=write, name="eventmem-snapshot")
            thread.start()
            self._snapshot_thread = thread
            return True
        return write()

    def _encoded_state_for_snapshot(self) -> bytes:
        """The fold encoded: made ahead while the keyword index was being filled if the fold has not
        changed since (every change adds an event id to ``seen``: the same object with as many ids
        is the same state)."""
        encoded, self._encoded_state = self._encoded_state, None
        if encoded is not None and encoded[0] is self.state and encoded[1] == len(self.state.seen):
            return encoded[2]
        return msgspec.msgpack.encode(self.state)

    def _write_snapshot(self, snapshot: Snapshot, vectors: VectorIndex) -> bool:
        """Encode and write ``snapshot`` (made of copies: no lock is needed): the vector index
        first, then the snapshot that names it; older index files go, but for the one the previous
        snapshot named (a process may be about to open it)."""
        cache = self.paths.cache_dir
        try:
            with self._snapshot_lock.hold(blocking=False) as locked:
                if not locked:
                    return False
                data = msgspec.msgpack.encode(snapshot)
                atomic_replace(cache / snapshot.vectors_file, vectors.write)
                atomic_write(cache / "snapshot.bin", data)
                files = sorted(cache.glob("vectors-*.faiss"), key=lambda path: path.stat().st_mtime_ns)
                for stale in files[:-2]:
                    if stale.name != snapshot.vectors_file:
                        stale.unlink(missing_ok=True)
        except (OSError, UnsafePath) as exc:
            log.warning("could not write snapshot: %s", exc)
            return False
        return True

    def load_snapshot(self, *, map_vectors: bool = False) -> bool:
        """Load the snapshot if it matches this version, embedder and journal; else leave it.

        ``map_vectors`` (a server): the vector index is mapped, not read, and copied into memory by
        a background thread (see :meth:`VectorIndex.load`)."""
        started = time.perf_counter()
        try:
            snapshot = _read_snapshot(self.paths.cache_dir / "snapshot.bin")
        except OSError:
            return False
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            log.warning("ignoring unreadable snapshot: %s", exc)
            return False
        if snapshot.format != SNAPSHOT_FORMAT or snapshot.embedder != self.embedder.model_id:
            log.info("ignoring snapshot made by another version or embedder")
            return False
        if snapshot.owner != self.paths.cache_owner():
            log.warning("ignoring a snapshot this clone did not write (did it come in through git?)")
            return False
        segments = {s.name: s for s in self.journal.segments()}
        for name, cursor in snapshot.cursors.items():
            segment = segments.get(name)
            if segment is None or segment.size < cursor.offset:
                log.info("ignoring stale snapshot: %s changed", name)
                return False
        # A segment that was only appended to since (same file, not older, not smaller: the rule
        # every catch-up goes by) needs no check. The others' prefixes are hashed by a thread
        # (hashing and reading release the GIL) while this one loads the indexes; a prefix that
        # does not match means the snapshot is not used.
        suspect = [name for name, cursor in snapshot.cursors.items() if not _only_appended(segments[name], cursor)]
        hashers: dict[str, hashlib.blake2b] = {}

        def check() -> None:
            for name in suspect:
                try:
                    hashers[name] = _prefix_hasher(segments[name], snapshot.cursors[name].offset)
                except OSError:  # gone meanwhile: no hasher, so the snapshot is not used
                    return

        checker = threading.Thread(target=check, name="eventmem-snapshot-check")
        checker.start()
        try:
            if not snapshot.vectors_file:
                raise ValueError("it names no vector index file")
            path = self.paths.cache_dir / snapshot.vectors_file
            vectors = VectorIndex.load(path, self.embedder.dim, mapped=map_vectors)
            keywords = KeywordsProjector(self.table)
            if not keywords.restore(snapshot.keywords):
                raise ValueError("its keyword index does not open")
        except Exception as exc:  # a damaged snapshot is never used
            log.warning("ignoring damaged snapshot: %s", exc)
            return False
        finally:
            checker.join()
        for name in suspect:
            hasher = hashers.get(name)
            if hasher is None or hasher.digest() != snapshot.cursors[name].digest:
                log.info("ignoring stale snapshot: %s was rewritten", name)
                return False
        with self.lock:
            self._reset()
            self.state = snapshot.state.state()
            self.problems = {(p, o): JournalCorrupt(p, o, r) for p, o, r in snapshot.problems}
            self.vectors.adopt(vectors)
            self.keywords = keywords
            self.table.replace(snapshot.slot_ids)
            self.slot_hashes = snapshot.slot_hashes
            # the digests were just verified: only bytes past each offset remain to be read
            self.cursors = {
                name: msgspec.structs.replace(cursor, stat=_stat_after_load(segments[name], cursor.offset))
                for name, cursor in snapshot.cursors.items()
            }
            self.embeddings.skip_to_end()
            if self.columns.restore(snapshot.columns):
                self._refresh_expiries()
            else:
                self._rebuild_columns()
            self._hashers = hashers  # kept: the first catch-up goes on from them, not from byte 0
        trusted = [name for name in snapshot.cursors if name not in hashers]
        if trusted:  # their digests go on from here later: made now, beside the first calls
            threading.Thread(target=self._make_hashers, args=(trusted,), name="eventmem-digests", daemon=True).start()
        log.info("loaded snapshot in %.3fs", time.perf_counter() - started)
        return True

    def _make_hashers(self, names: list[str]) -> None:
        """Hash the applied prefix of these segments, for catch-ups to go on from (one that comes
        first hashes it itself)."""
        with self.lock:
            segments = {s.name: s for s in self.journal.segments()}
        for name in names:
            with self.lock:
                cursor = self.cursors.get(name)
            segment = segments.get(name)
            if cursor is None or segment is None or name in self._hashers:
                continue
            try:
                hasher = _prefix_hasher(segment, cursor.offset)
            except OSError:
                continue
            with self.lock:
                if name not in self._hashers and self.cursors.get(name) == cursor:
                    self._hashers[name] = hasher

    def _refresh_expiries(self) -> None:
        """After restoring the columns: the expiry of memories with a TTL (usage may have moved it).
        Only those are looked at (and decoded)."""
        memories = self.state.memories
        expiries = []
        for memory_id in self.columns.with_expiry():
            record = memories[memory_id]
            if record.ttl_seconds is not None:
                expiries.append((memory_id, self.expires_epoch(memory_id, record)))
        self.columns.expire_at(expiries)

    def _rebuild_columns(self) -> None:
        """Make the columns projection again from the fold (its snapshot did not fit)."""
        visible = [record for memory_id in self.table.ids if (record := self.state.visible(memory_id)) is not None]
        self.columns.load(Batch(tuple(map(self._projected, visible)), ()))

    # -- whole rebuild ------------------------------------------------------------------------

    def rebuild(self, progress: Progress | None = None, *, wait: bool = True) -> int:
        """Drop every projection and fold the whole journal again, then write a snapshot.

        With ``wait=False`` the snapshot file is written by a thread: answers are ready when this
        returns, and :meth:`wait_snapshot` (or :meth:`close`) waits for the file."""
        with self.lock:
            self._reset()
            try:
                count = self._catch_up_once(progress)
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
        previous model's embedding cache. Not before: a model that cannot be reached, or an override
        in one command, must not cost the cache of the model that works."""
        if self.embedding.busy or self.embedding.failing:
            return
        if not self.paths.journal_dir.is_dir():
            return  # no memory here yet: reading must not create .eventmem/
        folder = self.paths.cache_dir / "embeddings"
        marker = folder / "model"
        current = self.embedder.model_id
        try:
            previous = marker.read_text(encoding="utf-8").strip()
        except OSError:
            previous = ""
        if previous == current:
            self._model_recorded = True
            return
        if previous:
            log.warning(
                "embedder changed from %s to %s: dropping the old embedding cache in %s", previous, current, folder
            )
            for suffix in (".bin", ".lock"):
                (folder / f"{sanitize(previous)}{suffix}").unlink(missing_ok=True)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write(marker, current.encode("utf-8"))
            self._model_recorded = True
        except OSError as exc:
            log.warning("could not record the embedder in %s: %s", marker, exc)

    def close(self) -> None:
        self.deferral.stop()  # (access counts must not be lost)
        self.stop_vectors()
        self.wait_snapshot()
        with self.lock:
            # a short-lived process (one CLI command) leaves a small tail for the next start to read
            missing = not (self.paths.cache_dir / "snapshot.bin").exists()
            if self.events_since_snapshot and (missing or self.events_since_snapshot >= 200):
                self.save_snapshot()


def _read_snapshot(path: Path) -> StoredSnapshot:
    """Decode the snapshot straight from a memory map (no copy of the file), the cyclic GC paused:
    it would otherwise scan the many young objects of the fold again and again.

    The map is not closed here: the encoded memories point into it (it is read-only and the file is
    only ever replaced by a rename, so the pages stay valid); it goes with the last of them."""
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return msgspec.msgpack.decode(mapped, type=StoredSnapshot)
    finally:
        if enabled:
            gc.enable()


def _only_appended(segment: Segment, cursor: Cursor) -> bool:
    """The segment is the file the cursor last read, only grown since (or untouched)."""
    size, mtime_ns, inode = cursor.stat
    if segment.inode != inode or segment.mtime_ns < mtime_ns:
        return False
    return segment.size > size or (segment.size == size and segment.mtime_ns == mtime_ns)


def _stat_after_load(segment: Segment, offset: int) -> tuple[int, int, int]:
    """A verified cursor's stat: the segment's own when fully covered (nothing to re-check), else one
    that makes the next catch-up read the tail without hashing the prefix again."""
    if segment.size == offset:
        return (segment.size, segment.mtime_ns, segment.inode)
    return (offset, -1, segment.inode)


def _hasher_from(hasher: hashlib.blake2b | None, segment: Segment, start: int, end: int) -> hashlib.blake2b:
    """A segment's digest state at ``end``: ``hasher`` (at ``start``, or made from the prefix) fed
    the bytes in between. ``hasher`` itself is left as it was."""
    hasher = hasher.copy() if hasher is not None else _prefix_hasher(segment, start)
    if end > start:
        with open(segment.path, "rb") as handle:
            handle.seek(start)
            hasher.update(handle.read(end - start))
    return hasher


class _HashAhead:
    """Digests segments from their cursor to their size in a thread, while the caller decodes and
    folds them; a segment whose complete lines end elsewhere (a torn tail, bytes appended since
    the stat) is left to the caller."""

    def __init__(self, items: list[tuple[Segment, int, hashlib.blake2b | None]]) -> None:
        self._items = items
        self._done = [threading.Event() for _ in items]
        self._hashers: list[hashlib.blake2b | None] = [None] * len(items)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eventmem-digests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for index, (segment, start, hasher) in enumerate(self._items):
            try:
                if not self._stop.is_set():
                    self._hashers[index] = _hasher_from(hasher, segment, start, segment.size)
            except OSError:
                pass  # the caller reads it again, and reports what goes wrong
            finally:
                self._done[index].set()

    def hasher(self, index: int, end: int) -> hashlib.blake2b | None:
        """The digest state of item ``index`` at byte ``end``, or ``None`` if it was made for
        another length (or could not be made)."""
        self._done[index].wait()
        segment = self._items[index][0]
        return self._hashers[index] if end == segment.size else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _prefix_hasher(segment: Segment, length: int) -> hashlib.blake2b:
    hasher = hashlib.blake2b(digest_size=16)
    with open(segment.path, "rb") as handle:
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(remaining, 1 << 20))
            if not chunk:
                break
            hasher.update(chunk)
            remaining -= len(chunk)
    return hasher


def _prefix_digest(segment: Segment, length: int) -> bytes:
    return _prefix_hasher(segment, length).digest()


def _ttl_float(seconds: int) -> float:
    """A TTL as a float; one too large for a float (a journal line may carry any integer) is infinite."""
    try:
        return float(seconds)
    except OverflowError:
        return math.inf if seconds > 0 else -math.inf
