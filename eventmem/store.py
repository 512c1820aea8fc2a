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
import itertools
import logging
import math
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.codec import UnknownEvent
from eventmem.config import Config
from eventmem.embedcache import HASH_BYTES, EmbeddingCache, QueryVectors, content_hash
from eventmem.embedder import Embedder, HashingEmbedder, Loadable
from eventmem.errors import JournalCorrupt, JournalUnwritable, UnsafePath
from eventmem.events import KINDS, SCOPES, AnyEvent
from eventmem.files import FileLock, atomic_replace, atomic_write
from eventmem.ids import iso_to_epoch, isos_to_epochs, new_id
from eventmem.journal import Appended, Journal, Segment, describe_os_error, name_of_segment
from eventmem.keywords import BulkLoad, KeywordIndex, Row
from eventmem.lifecycle import dedup_key
from eventmem.project import ProjectPaths, sanitize
from eventmem.providers import ProviderError
from eventmem.redact import scrub_event
from eventmem.state import MemoryRecord, MemoryRecords, State, StoredState
from eventmem.usage import UsageLog
from eventmem.vectors import VectorIndex

__all__ = ["Store"]

log = logging.getLogger("eventmem.store")

SNAPSHOT_FORMAT = 6
"""3: float16 vector index; 4: the vector index in its own file, mapped on load; 5: causal depths;
6: the clone that wrote it (see :meth:`ProjectPaths.cache_owner`)."""
EMBED_BATCH = 256
INLINE_EMBED_MAX = 16
"""With a model-backed embedder in the background mode, at most this many new texts are embedded
inside a call (a save reads its own vector at once); a larger backlog goes to the vector worker."""
RETRY_UNAVAILABLE_SECONDS = 30.0
OWN_VECTORS_AFTER_SECONDS = 1.0
"""A server copies a mapped vector index into memory this long after opening (see VectorIndex.own)."""
BULK_KEYWORDS_MIN = 2000
"""From this many memories on, a rebuild fills the keyword index from a second thread."""
AFTER_REPLY_SECONDS = 0.001
"""With ``defer_after_reply`` (a server), work that a reply need not wait for (the texts of this
process's own changes into the keyword and vector indexes, access counts) runs this long after the
call, from a thread, or at the start of the next call, whichever comes first: a save is answered once
its event is durable and folded."""
GC_PAUSE_BYTES = 1 << 20
"""A catch-up that reads more than this runs with the cyclic GC paused."""
HASH_AHEAD_BYTES = 1 << 20
"""A catch-up that reads more than this digests the segments in a second thread."""
Progress = Callable[[int, int], None]
EmbedItem = tuple[int, str, bytes]
"""(slot, text to embed, the text's content hash)"""


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
    """The filter columns of every slot (see :meth:`Columns.dump`): no per-memory work on load."""
    dedup: dict[str, bytes] | None = None
    """Each live memory's dedup key, so a new process's first save does not hash every memory."""
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
    columns: bytes = b""
    dedup: msgspec.Raw = msgspec.Raw(b"\xc0")
    """(Decoded on first use: a first query does not need it.)"""
    vectors_file: str = ""
    owner: str = ""


@dataclass
class Columns:
    """Per-slot arrays for filtering before the top-k cut."""

    live: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(1024, bool))
    superseded: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(1024, bool))
    kind: npt.NDArray[np.int16] = field(default_factory=lambda: np.full(1024, -1, np.int16))
    scope: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(1024, np.int8))
    importance: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(1024, np.float32))
    created: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(1024, np.float64))
    updated: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(1024, np.float64))
    expires: npt.NDArray[np.float64] = field(default_factory=lambda: np.full(1024, np.inf, np.float64))

    def grow(self, size: int) -> None:
        if size <= len(self.live):
            return
        new = max(size, len(self.live) * 2)
        for name, fill in (
            ("live", False),
            ("superseded", False),
            ("kind", -1),
            ("scope", 0),
            ("importance", 0.0),
            ("created", 0.0),
            ("updated", 0.0),
            ("expires", np.inf),
        ):
            old = getattr(self, name)
            grown = np.full(new, fill, dtype=old.dtype)
            grown[: len(old)] = old
            setattr(self, name, grown)

    NAMES = ("live", "superseded", "kind", "scope", "importance", "created", "updated", "expires")

    def dump(self, count: int) -> bytes:
        """The first ``count`` entries of every column, back to back."""
        return b"".join(getattr(self, name)[:count].tobytes() for name in self.NAMES)

    def load(self, data: bytes, count: int) -> bool:
        """Fill the first ``count`` entries from :meth:`dump` output; False if it does not fit."""
        self.grow(count)
        if len(data) != sum(getattr(self, name).dtype.itemsize for name in self.NAMES) * count:
            return False
        position = 0
        for name in self.NAMES:
            column = getattr(self, name)
            size = column.dtype.itemsize * count
            column[:count] = np.frombuffer(data, dtype=column.dtype, count=count, offset=position)
            position += size
        return True


_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_SCOPE_CODE = {scope: code for code, scope in enumerate(SCOPES)}


def embed_text(record: MemoryRecord) -> str:
    """The text a memory's vector is made from."""
    parts = [record.title, record.content]
    if record.tags:
        parts.append(" ".join(record.tags))
    return "\n".join(p for p in parts if p)


class Store:
    def __init__(self, paths: ProjectPaths, config: Config, embedder: Embedder) -> None:
        self.paths = paths
        self.config = config
        self.embedder = embedder
        self.journal = Journal(paths, durable=config.durability == "fsync", max_segment_bytes=config.max_segment_bytes)
        self.embeddings = EmbeddingCache(paths.cache_dir / "embeddings", embedder.model_id, embedder.dim)
        self.query_vectors = QueryVectors()
        """The last queries' vectors (a model's pass over a query costs milliseconds)."""
        self.lock = threading.RLock()
        self._snapshot_lock = FileLock(paths.cache_dir / "snapshot.lock")
        self.usage = UsageLog(paths.local_dir / "usage.jsonl")
        """Access counts from the clone's local usage stream (never in git)."""
        self.usage_extension: Callable[[str, MemoryRecord], float] = self._usage_extension
        self.rebuilds = 0
        self._snapshot_thread: threading.Thread | None = None
        # vectors made in the background (see start_vectors); guarded by self.lock
        self.background_vectors = False
        self.embed_progress: Progress | None = None
        """Called with (embedded, to embed) as a large batch of texts is embedded."""
        self._embedder_ready = not isinstance(embedder, Loadable) or embedder.loaded
        self._pending: dict[int, tuple[str, bytes]] = {}
        """Slot -> (text, content hash) waiting for the vector worker."""
        self._inflight = 0
        self._generation = 0
        self._vector_error: str | None = None
        self._vector_error_at = 0.0
        self._vector_worker: threading.Thread | None = None
        self._last_vector_worker: threading.Thread | None = None
        self._vectors_stop = threading.Event()
        self._vectors_done = threading.Condition(self.lock)
        self._model_recorded = False
        """The embedder's model id is in ``cache/embeddings/model`` (see _forget_other_models)."""
        self.defer_after_reply = False
        """Index the texts of local changes after the reply (see AFTER_REPLY_SECONDS and :meth:`defer`)."""
        self._deferred_due = threading.Event()
        self._deferred_stop = threading.Event()
        self._after_reply: threading.Thread | None = None
        self._deferred_failed = False
        self._reset()

    # -- state --------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.embeddings.rewind()  # a rebuild needs every cached vector
        if hasattr(self, "_pending"):
            self._pending = {}
            self._generation += 1  # results the vector worker has in flight are for the old slots
        self.state = State()
        self.vectors = VectorIndex(self.embedder.dim)
        self.keywords = KeywordIndex()
        self.cursors: dict[str, Cursor] = {}
        self._hashers: dict[str, hashlib.blake2b] = {}
        self.slots: dict[str, int] = {}
        self.slot_ids: list[str] = []
        self.slot_hashes: list[bytes] = []
        self.columns = Columns()
        self.tag_slots: dict[str, set[int]] = {}
        self.slot_tags: dict[int, tuple[str, ...]] = {}
        self._tags_built = True
        """False after a snapshot load: the tag sets are made on the first tag filter, not at start."""
        self.problems: dict[tuple[str, int], JournalCorrupt] = {}
        self.events_since_snapshot = 0
        self._deferred: list[Callable[[], None]] = []
        """Work deferred until after the reply (see :meth:`defer`), in order."""
        self.changed: set[str] = set()
        """Memories whose visible state changed since :meth:`drain_changes` (for push updates)."""
        self.changed_all = True
        self._dedup: dict[bytes, set[str]] = {}
        self._dedup_unindexed = False
        """``_dedup_of`` came from a snapshot and ``_dedup`` is not made from it yet."""
        self._dedup_of: dict[str, bytes] = {}
        self._dedup_encoded: msgspec.Raw | None = None
        self._dedup_dirty: set[str] | None = None
        """Memories to re-index for dedup; ``None``: index everything on the next lookup."""
        self._encoded_state: tuple[State, int, bytes] | None = None
        """The fold encoded ahead of a snapshot, while the keyword index was being filled (see
        :meth:`_encoded_state_for_snapshot`)."""

    def _slot(self, memory_id: str) -> int:
        slot = self.slots.get(memory_id)
        if slot is None:
            slot = self.slots[memory_id] = len(self.slot_ids)
            self.slot_ids.append(memory_id)
            self.slot_hashes.append(b"")
            self.columns.grow(slot + 1)
        return slot

    # -- catching up --------------------------------------------------------------------------

    def catch_up(self, progress: Progress | None = None, *, flush: bool = True) -> int:
        """Apply everything appended since the last call; rebuild if a segment changed under us.
        First (unless ``flush`` is false) the work deferred until after the reply runs (see
        :meth:`defer`).

        Returns the number of events applied.
        """
        with self.lock:
            if flush:
                self._run_deferred()
            memories = self.state.memories
            damaged = isinstance(memories, MemoryRecords) and memories.damaged
            if damaged:
                log.error("the snapshot in %s was damaged: dropping it and rebuilding", self.paths.cache_dir)
                (self.paths.cache_dir / "snapshot.bin").unlink(missing_ok=True)
            damaged = damaged or self._deferred_failed
            self._deferred_failed = False
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
            if self.slot_ids:
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
            self._sync(touched, defer_index=self.defer_after_reply)
            if not self._model_recorded:  # the first save of a project that had no journal yet
                self._forget_other_models()

    # -- keeping indexes in step with the fold ------------------------------------------------

    def drain_changes(self) -> tuple[bool, set[str]]:
        """What changed since the last call: (everything?, memory ids). Used to push updates."""
        with self.lock:
            everything, changed = self.changed_all, self.changed
            self.changed_all, self.changed = False, set()
            return everything, changed

    def defer(self, work: Callable[[], None]) -> None:
        """Run ``work`` under the lock just after the reply: from a thread a moment later, or at the
        start of the next call (catch-up), whichever comes first; in order with other deferred work.
        Without ``defer_after_reply`` (one command, a library user) it runs now."""
        with self.lock:
            if not self.defer_after_reply:
                work()
                return
            self._deferred.append(work)
            if self._after_reply is None:
                self._after_reply = threading.Thread(target=self._run_later, name="eventmem-after-reply", daemon=True)
                self._after_reply.start()
            self._deferred_due.set()

    def _run_deferred(self) -> None:
        """Run the deferred work (caller holds the lock). If some fails the indexes may lack a text,
        so the next catch-up rebuilds them from the journal (the events are durable and folded)."""
        while self._deferred:
            work, self._deferred = self._deferred, []
            for index, item in enumerate(work):
                try:
                    item()
                except Exception:
                    log.exception("deferred work failed: the indexes will be rebuilt from the journal")
                    self._deferred_failed = True
                    self._deferred = work[index + 1 :] + self._deferred
                    break

    def _run_later(self) -> None:
        """The after-reply thread: runs deferred work a moment after it was deferred."""
        while True:
            self._deferred_due.wait()
            if self._deferred_stop.is_set():
                return
            time.sleep(AFTER_REPLY_SECONDS)
            self._deferred_due.clear()
            with self.lock:
                self._run_deferred()

    def _index_texts(self, rows: list[Row], items: list[EmbedItem]) -> None:
        if rows:
            self.keywords.upsert(rows)
        if items:
            self._embed_or_defer(items)

    def _sync(self, touched: set[str], *, defer_index: bool = False) -> None:
        """Bring slots, columns, tags and the indexes in step with the fold for ``touched``; with
        ``defer_index`` the new texts reach the keyword and vector indexes after the reply (:meth:`defer`)."""
        self._run_deferred()  # earlier texts first: the indexes take changes in order
        state = self.state
        self.changed.update(touched)
        if self._dedup_dirty is not None:
            self._dedup_dirty.update(touched)
        # a memory's "superseded" flag depends on its superseder being alive
        for memory_id in list(touched):
            for link in state.links_of(memory_id):
                if link.relation == "supersedes":
                    touched.add(link.target)
        removed: list[int] = []
        to_embed: list[EmbedItem] = []
        keyword_rows: list[Row] = []
        cols = self.columns
        for memory_id in touched:
            record = state.visible(memory_id)
            slot = self.slots.get(memory_id)
            if record is None:
                if slot is not None and cols.live[slot]:
                    cols.live[slot] = False
                    removed.append(slot)
                    self.slot_hashes[slot] = b""
                    self._untag(slot)
                continue
            if slot is None:
                slot = self._slot(memory_id)
                cols = self.columns
            text = embed_text(record)
            digest = content_hash(text + "\x00" + record.summary)
            if self.slot_hashes[slot] != digest or not cols.live[slot]:
                to_embed.append((slot, text, content_hash(text)))
                keyword_rows.append((slot, record.title, record.summary, record.content, " ".join(record.tags)))
                self.slot_hashes[slot] = digest
            self._set_columns(slot, memory_id, record)
        if removed:
            for slot in removed:
                self._pending.pop(slot, None)
            slots = np.asarray(removed, np.int64)
            self.vectors.remove(slots)
            self.keywords.remove(removed)
        if defer_index and (keyword_rows or to_embed):
            self.defer(functools.partial(self._index_texts, keyword_rows, to_embed))
        else:
            self._index_texts(keyword_rows, to_embed)

    def _sync_all(self, touched: set[str], *, snapshot_due: bool = False) -> None:
        """:meth:`_sync` for a store with no slot yet (a rebuild, a start without a snapshot): every
        visible memory gets a slot in the fold's order, with the same columns, hashes, keyword rows
        and vectors as :meth:`_sync` would give it, made in bulk. The keyword index is filled by a
        thread (SQLite works without the GIL) while this one makes the columns and vectors."""
        state = self.state
        self.changed.update(touched)
        if self._dedup_dirty is not None:
            self._dedup_dirty.update(touched)
        slot_ids, slot_hashes = self.slot_ids, self.slot_hashes
        records: list[MemoryRecord] = []
        to_embed: list[EmbedItem] = []
        bulk: BulkLoad | None = None
        try:
            rows: list[tuple[int, str, str, str, str]] = []
            blake2b = hashlib.blake2b
            for memory_id, record in state.memories.items():
                if not record.exists or ((record.deleted_stamp or record.expired_stamp) and record.status != "live"):
                    continue
                slot = len(slot_ids)
                slot_ids.append(memory_id)
                records.append(record)
                tags = " ".join(record.tags)
                text = embed_text(record)
                # content_hash(text), then content_hash(text + "\x00" + summary) from the same state
                hasher = blake2b(text.encode("utf-8"), digest_size=HASH_BYTES)
                text_hash = hasher.digest()
                hasher.update(b"\x00" + record.summary.encode("utf-8"))
                slot_hashes.append(hasher.digest())
                to_embed.append((slot, text, text_hash))
                rows.append((slot, record.title, record.summary, record.content, tags))
            if len(rows) >= BULK_KEYWORDS_MIN:
                bulk = self.keywords.bulk_load(rows)
            elif rows:
                self.keywords.upsert(rows)
            self.slots = dict(zip(slot_ids, range(len(slot_ids)), strict=True))
            self._fill_columns(records)
            if to_embed:
                self._embed_or_defer(to_embed)
            if self._dedup_dirty is None:  # (wanted by the snapshot: made while the keywords go in)
                self._index_dedup(records)
            if snapshot_due and bulk is not None and not self._pending and not self._inflight:
                try:
                    self._encoded_state = (state, len(state.seen), msgspec.msgpack.encode(state))
                except OverflowError:  # (no snapshot then: see save_snapshot)
                    self._encoded_state = None
        finally:
            if bulk is not None:
                bulk.finish()

    def _index_dedup(self, records: list[MemoryRecord]) -> None:
        """The dedup keys of every visible memory, which ``records`` are."""
        self._dedup_of = dict(zip((r.id for r in records), map(dedup_key, (r.content for r in records)), strict=True))
        self._dedup = _by_dedup_key(self._dedup_of)
        self._dedup_dirty = set()

    def _fill_columns(self, records: list[MemoryRecord]) -> None:
        """:meth:`_set_columns` of slots ``0..len(records)`` at once (columns freshly made)."""
        count = len(records)
        cols = self.columns
        cols.grow(count)
        kind_code, scope_code = _KIND_CODE.get, _SCOPE_CODE.get
        cols.live[:count] = True
        cols.kind[:count] = [kind_code(r.kind, -1) for r in records]
        cols.scope[:count] = [scope_code(r.scope, 0) for r in records]
        cols.importance[:count] = [r.importance for r in records]
        cols.created[:count] = created = isos_to_epochs([r.created_at for r in records])
        updated = [i for i, r in enumerate(records) if r.updated_stamp and r.updated_stamp != r.created_stamp]
        cols.updated[:count] = created
        if updated:
            cols.updated[updated] = isos_to_epochs([records[i].updated_at for i in updated])
        cols.expires[:count] = math.inf
        cols.superseded[:count] = False
        adjacency = self.state.adjacency
        for slot in [i for i, r in enumerate(records) if r.ttl_seconds is not None or r.id in adjacency]:
            record = records[slot]
            if record.ttl_seconds is not None:
                cols.expires[slot] = self.expires_epoch(record.id, record)
            if record.id in adjacency:
                cols.superseded[slot] = self._is_superseded(record.id)
        # tag sets are made on the first tag filter, as after a snapshot load
        self._tags_built = False
        self.tag_slots.clear()
        self.slot_tags.clear()

    def _set_columns(self, slot: int, memory_id: str, record: MemoryRecord) -> None:
        cols = self.columns
        cols.live[slot] = True
        cols.kind[slot] = _KIND_CODE.get(record.kind, -1)
        cols.scope[slot] = _SCOPE_CODE.get(record.scope, 0)
        cols.importance[slot] = record.importance
        created = cols.created[slot] = iso_to_epoch(record.created_at)
        same = not record.updated_stamp or record.updated_stamp == record.created_stamp
        cols.updated[slot] = created if same else iso_to_epoch(record.updated_at)
        cols.expires[slot] = math.inf if record.ttl_seconds is None else self.expires_epoch(memory_id, record)
        cols.superseded[slot] = memory_id in self.state.adjacency and self._is_superseded(memory_id)
        if record.tags or slot in self.slot_tags:
            self._tag(slot, record.tags)

    def hidden_memories(self) -> list[str]:
        """Memories the fold knows that are not live now (deleted, expired, or never saved): found
        from the live column, without looking at (or decoding) the live ones. Call with the lock held."""
        count = len(self.slot_ids)
        hidden = [self.slot_ids[slot] for slot in np.flatnonzero(~self.columns.live[:count]).tolist()]
        hidden += self.state.memories.keys() - self.slots.keys()
        return hidden

    def slots_of_kinds(self, kinds: Iterable[str]) -> npt.NDArray[np.bool_]:
        """A mask over slots: those whose memory has one of these types (from the kind column)."""
        count = len(self.slot_ids)
        codes = [_KIND_CODE.get(kind, -1) for kind in kinds]
        return np.isin(self.columns.kind[:count], np.asarray(codes, np.int16))

    def tag_index(self) -> dict[str, set[int]]:
        """Live slots by tag (built from the fold on first use after a snapshot load)."""
        with self.lock:
            if not self._tags_built:
                self._tags_built = True
                live = self.columns.live
                memories = self.state.memories
                for memory_id, slot in self.slots.items():
                    if live[slot]:
                        tags = memories[memory_id].tags
                        if tags:
                            self._tag(slot, tags)
            return self.tag_slots

    def _untag(self, slot: int) -> None:
        if not self._tags_built:
            return
        for tag in self.slot_tags.pop(slot, ()):
            self.tag_slots.get(tag, set()).discard(slot)

    def _tag(self, slot: int, tags: tuple[str, ...]) -> None:
        if not self._tags_built:
            return
        self._untag(slot)
        self.slot_tags[slot] = tags
        for tag in tags:
            self.tag_slots.setdefault(tag, set()).add(slot)

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

    def _embed_into_index(self, items: list[EmbedItem]) -> None:
        hashes = [h for _, _, h in items]
        vectors, missing = self.embeddings.lookup(hashes)
        # Another process may have embedded these already: read what it appended to the cache.
        # For a save or two with the built-in embedder, embedding again is cheaper than reading.
        if missing and (len(missing) > 8 or not isinstance(self.embedder, HashingEmbedder)):
            self.embeddings.refresh()
            vectors, missing = self.embeddings.lookup(hashes)
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            fresh = self._embed_unique([items[i][1] for i in batch], [hashes[i] for i in batch])
            vectors[batch] = fresh
            self.embeddings.store([hashes[i] for i in batch], fresh)
            if self.embed_progress is not None and len(missing) > EMBED_BATCH:
                self.embed_progress(start + len(batch), len(missing))
        self.vectors.upsert(np.asarray([slot for slot, _, _ in items], np.int64), vectors)

    def _embed_unique(self, texts: list[str], digests: list[bytes]) -> npt.NDArray[np.float32]:
        """Vectors for ``texts``, embedding each distinct text (by content hash) once."""
        first: dict[bytes, int] = {}
        for position, digest in enumerate(digests):
            first.setdefault(digest, position)
        if len(first) == len(digests):
            return self.embedder.embed(texts)
        unique = list(first)
        fresh = self.embedder.embed([texts[first[d]] for d in unique])
        row = {digest: i for i, digest in enumerate(unique)}
        return fresh[[row[d] for d in digests]]

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        cached = self.query_vectors.get(text)
        if cached is not None:
            return cached
        try:
            vector: npt.NDArray[np.float32] = self.embedder.embed([text])[0]
        except ProviderError as exc:
            with self.lock:
                self._vector_failed(exc)
            raise
        self.query_vectors.put(text, vector)
        return vector

    # -- vectors from a model that loads slowly -------------------------------------------------
    #
    # A model-backed embedder (ONNX, Ollama, an OpenAI-compatible endpoint) may take seconds to load
    # and minutes to embed a whole journal. With ``background_vectors`` the fold and the keyword index
    # are made at once, cached vectors are used at once, and the rest is embedded by one worker thread
    # that holds the lock only to take a batch and to put the vectors in; until it is done,
    # :meth:`vector_status` is not "ready" and recall answers from the keyword index alone. Snapshots
    # wait until nothing is pending, so a snapshot never lacks a vector.

    def vector_status(self) -> str:
        """``ready``, ``loading`` (the model), ``embedding`` (a backlog) or ``unavailable``."""
        with self.lock:
            self._run_deferred()  # (of every change made so far)
            if self._vector_error is not None and self.background_vectors:
                self._ensure_worker()  # tries again once RETRY_UNAVAILABLE_SECONDS have passed
            if self._vector_error is not None:
                return "unavailable"
            if not self._embedder_ready and self.background_vectors:
                return "loading"  # (in the foreground mode the first embed loads the model)
            if self._pending or self._inflight:
                return "embedding"
            return "ready"

    def vector_note(self) -> str:
        """The status in words, for a result that had to do without vectors."""
        with self.lock:
            status = self.vector_status()
            model = self.embedder.model_id
            if status == "unavailable":
                return f"semantic search is unavailable ({self._vector_error}); these are keyword matches only"
            if status == "loading":
                return f"the embedding model {model} is still loading; these are keyword matches only"
            if status == "embedding":
                left = len(self._pending) + self._inflight
                return f"{left} memories are still being embedded with {model}; these are keyword matches only"
            return ""

    def wait_vectors(self, timeout: float | None = None) -> bool:
        """Wait until the vector worker is done (or has failed); true when vectors are ready."""
        with self._vectors_done:
            self._vectors_done.wait_for(lambda: self._vector_worker is None, timeout)
            return self.vector_status() == "ready"

    def start_vectors(self) -> None:
        """Switch to background embedding and start loading the model (returns at once)."""
        with self.lock:
            self.background_vectors = True
            if not self._embedder_ready:
                self._ensure_worker()

    def _vector_failed(self, exc: BaseException) -> None:
        log.warning("embedder %s failed: %s", self.embedder.model_id, exc)
        self._vector_error = str(exc)
        self._vector_error_at = time.monotonic()

    def _embed_or_defer(self, items: list[EmbedItem]) -> None:
        if not self.background_vectors or not isinstance(self.embedder, Loadable):
            self._embed_inline(items)
            return
        vectors, missing = self.embeddings.lookup([h for _, _, h in items])
        if missing:
            self.embeddings.refresh()
            vectors, missing = self.embeddings.lookup([h for _, _, h in items])
        absent = set(missing)
        cached = [i for i in range(len(items)) if i not in absent]
        if cached:
            self.vectors.upsert(np.asarray([items[i][0] for i in cached], np.int64), vectors[cached])
        for i in cached:
            self._pending.pop(items[i][0], None)
        if not missing:
            return
        backlog = self._pending or self._inflight or self._vector_error is not None
        if self._embedder_ready and not backlog and len(missing) <= INLINE_EMBED_MAX:
            self._embed_inline([items[i] for i in missing])
            return
        for i in missing:
            slot, text, digest = items[i]
            self._pending[slot] = (text, digest)
        self._ensure_worker()

    def _embed_inline(self, items: list[EmbedItem]) -> None:
        try:
            self._embed_into_index(items)
        except ProviderError as exc:
            # the event is in the journal already: keep it findable by keywords, embed it later
            self._vector_failed(exc)
            for slot, text, digest in items:
                self._pending[slot] = (text, digest)

    def _ensure_worker(self) -> None:
        if self._vector_worker is not None or self._vectors_stop.is_set():
            return
        if self._vector_error is not None:
            if time.monotonic() - self._vector_error_at < RETRY_UNAVAILABLE_SECONDS:
                return
            self._vector_error = None
        worker = threading.Thread(target=self._vector_work, name="eventmem-vectors", daemon=True)
        self._vector_worker = self._last_vector_worker = worker
        worker.start()

    def _vector_work(self) -> None:
        done = 0
        try:
            if not self._embedder_ready:
                assert isinstance(self.embedder, Loadable)
                self.embedder.load()
                with self.lock:
                    self._embedder_ready = True
            while True:
                with self.lock:
                    if self._vectors_stop.is_set() or not self._pending:
                        # decided under the lock: a backlog added after this starts a new worker
                        self._vector_worker = None
                        self._vectors_done.notify_all()
                        snapshot = done > 0 and not self._pending and not self._vectors_stop.is_set()
                        break
                    generation = self._generation
                    batch = list(itertools.islice(self._pending.items(), EMBED_BATCH))
                    for slot, _ in batch:
                        del self._pending[slot]
                    self._inflight = len(batch)
                    total = done + len(batch) + len(self._pending)
                try:
                    fresh = self._embed_unique([text for _, (text, _) in batch], [d for _, (_, d) in batch])
                except BaseException:
                    with self.lock:
                        self._inflight = 0
                        if generation == self._generation:
                            for slot, item in batch:
                                self._pending.setdefault(slot, item)
                    raise
                with self.lock:
                    self._inflight = 0
                    self.embeddings.store([digest for _, (_, digest) in batch], fresh)
                    if generation != self._generation:
                        continue
                    keep = [
                        i
                        for i, (slot, _) in enumerate(batch)
                        if slot < len(self.slot_ids) and self.columns.live[slot] and slot not in self._pending
                    ]
                    if keep:
                        self.vectors.upsert(np.asarray([batch[i][0] for i in keep], np.int64), fresh[keep])
                    done += len(batch)
                    if self.embed_progress is not None:
                        self.embed_progress(done, total)
                    if done % (EMBED_BATCH * 8) < len(batch):
                        log.info("embedded %d of %d memories with %s", done, total, self.embedder.model_id)
        except Exception as exc:
            with self.lock:
                self._vector_failed(exc)
                self._vector_worker = None
                self._vectors_done.notify_all()
            return
        if snapshot:
            with self.lock:
                self._forget_other_models()
            self.save_snapshot(background=True)

    def stop_vectors(self, timeout: float | None = 10.0) -> None:
        """Stop the vector worker after its current batch (what it embedded stays cached).

        Not to be called with the lock held (the worker needs it to finish its batch)."""
        self._vectors_stop.set()
        with self.lock:
            worker = self._last_vector_worker  # (may still be finishing after it marked itself done)
        if worker is not None:
            worker.join(timeout)

    def _usage_extension(self, memory_id: str, record: MemoryRecord) -> float:
        """Each access (local usage stream) extends a TTL by half of it."""
        count = self.usage.count(memory_id)
        return count * _ttl_float(record.ttl_seconds or 0) / 2 if count else 0.0

    def find_duplicate(self, text: str) -> list[str]:
        """Live memories whose content normalises to the same text (see :func:`dedup_key`)."""
        with self.lock:
            self._refresh_dedup()
            return sorted(self._dedup.get(dedup_key(text), ()))

    def _refresh_dedup(self) -> None:
        """Bring the dedup keys up to date (all of them the first time, then what changed)."""
        if self._dedup_unindexed:  # keys loaded with a snapshot: decoded and indexed on first use
            self._dedup_unindexed = False
            encoded, self._dedup_encoded = self._dedup_encoded, None
            try:
                if encoded is not None:
                    self._dedup_of = msgspec.msgpack.decode(encoded, type=dict[str, bytes])
            except (msgspec.DecodeError, msgspec.ValidationError):
                self._dedup_dirty = None  # (damaged: made again from the memories)
            else:
                self._dedup = _by_dedup_key(self._dedup_of)  # (empty until now)
        if self._dedup_dirty is None:
            state = self.state
            self._index_dedup([r for m in state.memories if (r := state.visible(m)) is not None])
            return
        for memory_id in self._dedup_dirty:
            old = self._dedup_of.pop(memory_id, None)
            if old is not None:
                self._dedup[old].discard(memory_id)
            record = self.state.visible(memory_id)
            if record is not None:
                key = dedup_key(record.content)
                self._dedup_of[memory_id] = key
                self._dedup.setdefault(key, set()).add(memory_id)
        self._dedup_dirty = set()

    def refresh_expiry(self, memory_id: str) -> None:
        """Recompute one memory's expiry column (after its usage changed)."""
        with self.lock:
            slot = self.slots.get(memory_id)
            record = self.state.visible(memory_id)
            if slot is not None and record is not None:
                self.columns.expires[slot] = self.expires_epoch(memory_id, record)

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
            self._run_deferred()
            if not self.cursors or self._pending or self._inflight or self._deferred_failed:
                return False  # (vectors still being made: a snapshot would lack them)
            self._refresh_dedup()
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
                slot_ids=list(self.slot_ids),
                slot_hashes=list(self.slot_hashes),
                keywords=self.keywords.serialize(),
                problems=[(p.path, p.offset, p.reason) for p in self.problems.values()],
                columns=self.columns.dump(len(self.slot_ids)),
                dedup=dict(self._dedup_of),
                vectors_file=f"vectors-{new_id()}.faiss",
                owner=self.paths.cache_owner(),
            )
            vectors = self.vectors.copy()
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
            keywords = KeywordIndex(snapshot.keywords)
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
            self.vectors, self.keywords = vectors, keywords
            self.slot_ids = snapshot.slot_ids
            self.slot_hashes = snapshot.slot_hashes
            self.slots = {memory_id: slot for slot, memory_id in enumerate(self.slot_ids)}
            self.columns.grow(len(self.slot_ids))
            # the digests were just verified: only bytes past each offset remain to be read
            self.cursors = {
                name: msgspec.structs.replace(cursor, stat=_stat_after_load(segments[name], cursor.offset))
                for name, cursor in snapshot.cursors.items()
            }
            self.embeddings.skip_to_end()
            if bytes(snapshot.dedup) != b"\xc0":  # (nil: a snapshot made before dedup keys were kept)
                self._dedup_encoded = snapshot.dedup
                self._dedup_unindexed = True
                self._dedup_dirty = set()
            if self.columns.load(snapshot.columns, len(self.slot_ids)):
                self._restore_tags_and_expiry()
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

    def _restore_tags_and_expiry(self) -> None:
        """After loading saved columns: expiry (usage may have moved it); tag sets wait for use.

        Only memories with a TTL have a finite expiry, so only those are looked at (and decoded)."""
        self._tags_built = False
        cols = self.columns
        count = len(self.slot_ids)
        memories = self.state.memories
        for slot in np.flatnonzero(cols.live[:count] & np.isfinite(cols.expires[:count])).tolist():
            memory_id = self.slot_ids[slot]
            record = memories[memory_id]
            if record.ttl_seconds is not None:
                cols.expires[slot] = self.expires_epoch(memory_id, record)

    def _rebuild_columns(self) -> None:
        """Recompute filter columns and tag sets from the fold (after loading a snapshot)."""
        cols = self.columns
        for memory_id, slot in self.slots.items():
            record = self.state.visible(memory_id)
            if record is None:
                cols.live[slot] = False
                continue
            self._set_columns(slot, memory_id, record)

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
            self.defer_after_reply = background_vectors
            if background_vectors:
                self.start_vectors()
            if self.load_snapshot(map_vectors=background_vectors) and self.vectors.mapped:
                # (a moment later: the first calls of a session come first)
                copier = threading.Timer(OWN_VECTORS_AFTER_SECONDS, self.vectors.own)
                copier.name, copier.daemon = "eventmem-vectors-own", True
                copier.start()
            self.catch_up()
            self._forget_other_models()

    def _forget_other_models(self) -> None:
        """After a change of embedder, once every memory has its vector from the new model, drop the
        previous model's embedding cache. Not before: a model that cannot be reached, or an override
        in one command, must not cost the cache of the model that works."""
        if self._pending or self._inflight or self._vector_error is not None:
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
        self._deferred_stop.set()
        self._deferred_due.set()
        with self.lock:
            self._run_deferred()  # (access counts must not be lost)
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


def _by_dedup_key(keys: dict[str, bytes]) -> dict[bytes, set[str]]:
    """Memory ids grouped by their dedup key."""
    groups: dict[bytes, set[str]] = {}
    for memory_id, key in keys.items():
        group = groups.get(key)
        if group is None:
            groups[key] = {memory_id}
        else:
            group.add(memory_id)
    return groups


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
