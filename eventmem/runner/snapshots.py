"""Snapshots: the derived state written to ``cache/snapshot.bin`` with the cursors it covers.

The fold, the slot table, the columns projector's and the keyword projector's own snapshots go in
one msgpack file; the vector index in its own file beside it, mapped on load. A snapshot whose
format, embedder, owner or digests do not match is ignored and rebuilt, never used.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import logging
import mmap
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

import msgspec
import numpy as np

from eventmem.core.errors import JournalCorrupt, UnsafePath
from eventmem.core.ids import new_id
from eventmem.core.records import MemoryRecord, MemoryRecords
from eventmem.core.state import State, StoredState
from eventmem.embedders.embedder import Embedder
from eventmem.journal.files import FileLock, atomic_replace, atomic_write, remove_leftover_temp_files
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths
from eventmem.projectors.base import Batch
from eventmem.projectors.vectors import VectorIndex
from eventmem.runner.cursors import only_appended, prefix_hasher, stat_after_load
from eventmem.runner.derived import Cursor, Derived
from eventmem.runner.projection import projected
from eventmem.runner.slot_digests import SlotDigests

__all__ = [
    "SNAPSHOT_FORMAT",
    "MappedRecords",
    "Snapshot",
    "StoredSnapshot",
    "Taken",
    "encoded_fold",
    "load",
    "many_decoded",
    "read_snapshot",
    "release_pages",
    "take",
    "write",
    "written_memories",
]

log = logging.getLogger("eventmem.runner")

SNAPSHOT_FORMAT = 12
"""3: float16 vector index; 4: the vector index in its own file, mapped on load; 5: causal depths;
6: the clone that wrote it (see :meth:`ProjectPaths.cache_owner`); 7: the dedup keys inside the
columns projector's own snapshot; 8: a memory's metadata and source; 9: the keyword index's word
counts of every row (they were of one slot in eight); 10: the keyword index's in-memory postings after
its database; 11: a contentless keyword table with the digests of its rows' texts, and slot digests
of the keyword texts each apart; 12: the event ids seen packed (:mod:`eventmem.core.event_ids`), the
slot digests in one buffer."""


class Snapshot(msgspec.Struct, kw_only=True):
    format: int
    embedder: str
    cursors: dict[str, Cursor]
    state: State
    slot_ids: list[str]
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
    embeddings_end: int | None = None
    """The embedding cache's size when the snapshot was taken: what it appended since is read on
    the first miss (``None``, from an older snapshot: nothing before the file's end is read)."""
    approximate: bytes = b""
    """The approximate vector index of the vector index file's codes (see :mod:`eventmem.projectors.ann`),
    so that a start above its threshold does not build it again; empty when none was ready."""
    slot_digests: bytes = b""
    """Each slot's digest of the texts indexed (see :class:`~eventmem.runner.slot_digests.SlotDigests`)."""


class StoredSnapshot(msgspec.Struct, kw_only=True):
    """How a snapshot is read back: as :class:`Snapshot`, but nothing is copied out of the file
    that need not be (the memories stay encoded until used, the indexes are views of the file)."""

    format: int
    embedder: str
    cursors: dict[str, Cursor]
    state: StoredState
    slot_ids: list[str]
    keywords: memoryview
    problems: list[tuple[str, int, str]] = []
    columns: memoryview = memoryview(b"")
    vectors_file: str = ""
    owner: str = ""
    embeddings_end: int | None = None
    approximate: memoryview = memoryview(b"")
    slot_digests: memoryview = memoryview(b"")


def read_snapshot(path: Path) -> StoredSnapshot:
    """Decode the snapshot straight from a memory map (no copy of the file), the cyclic GC paused:
    it would otherwise scan the many young objects of the fold again and again.

    The map is not closed here: the encoded memories point into it (it is read-only and the file is
    only ever replaced by a rename, so the pages stay valid); it goes with the last of them."""
    return _read_mapped(path, StoredSnapshot)[0]


_Stored = TypeVar("_Stored", bound=msgspec.Struct)


class MappedRecords:
    """Reads an encoded memory of a snapshot's map from the file (``pread``), not through the map.

    Touching a map faults in the page cache's whole folio around the byte touched (2 MB on a kernel
    that caches files in large folios): a server decoding the few records a recall shows made a
    snapshot's every page resident within tens of calls (1.4 KB a memory at 100k), though it decodes
    a few hundred records. Read this way, only the record's bytes are copied, and the map's pages
    stay let go (see :func:`release_pages`). The file read is the one mapped (the descriptor is of
    its inode, which a new snapshot replaces by a rename, never rewrites), so the bytes are the map's.
    """

    __slots__ = ("__weakref__", "_base", "_fd", "_size")

    def __init__(self, fd: int, mapped: mmap.mmap) -> None:
        self._fd = fd
        self._size = len(mapped)
        weakref.finalize(self, os.close, fd)
        first = np.frombuffer(mapped, np.uint8, count=1)
        self._base = int(first.ctypes.data)
        del first  # (no lasting export: the map can still be closed)

    def __call__(self, raw: msgspec.Raw) -> bytes | msgspec.Raw:
        """The bytes of ``raw``, one of the map's encoded records (else ``raw`` itself)."""
        size = len(raw)
        if not size:
            return raw
        offset = int(np.frombuffer(raw, np.uint8).ctypes.data) - self._base
        if offset < 0 or offset + size > self._size:  # (not of this map)
            return raw
        data = os.pread(self._fd, size, offset)
        return data if len(data) == size else raw


def _read_mapped(path: Path, kind: type[_Stored]) -> tuple[_Stored, mmap.mmap, MappedRecords | None]:
    """``path`` decoded as ``kind`` (see :func:`read_snapshot`), the map it was read from (see
    :func:`release_pages`), and what reads its records from the file (``None`` without ``pread``)."""
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        records = MappedRecords(os.dup(handle.fileno()), mapped) if hasattr(os, "pread") else None
    enabled = gc.isenabled()
    gc.disable()
    try:
        return msgspec.msgpack.decode(mapped, type=kind), mapped, records
    finally:
        if enabled:
            gc.enable()


class _Format(msgspec.Struct):
    format: int


def _format_of(path: Path) -> int | None:
    """The format a snapshot file says it is of (``None``: it says none that can be read)."""
    try:
        return _read_mapped(path, _Format)[0].format
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None


class _StoredMemories(msgspec.Struct):
    memories: dict[str, msgspec.Raw] = {}


class _StoredFold(msgspec.Struct):
    """Of a snapshot, only the fold's memories (left encoded) and the name that tells which one it is."""

    state: _StoredMemories
    vectors_file: str = ""


DECODED_TO_SWAP = 1000
"""A server leaves its records in the snapshot it wrote from this many decoded on (see :func:`many_decoded`)."""


def many_decoded(memories: dict[str, MemoryRecord]) -> bool:
    """Whether the fold holds enough decoded records to leave them in a snapshot's file (see
    :func:`written_memories`): all of them (folded here), or at least :data:`DECODED_TO_SWAP` and a
    twentieth (a merge, a long session)."""
    if not isinstance(memories, MemoryRecords):
        return bool(memories)
    decoded = len(memories) - memories.encoded
    return decoded >= DECODED_TO_SWAP and decoded * 20 >= len(memories)


def written_memories(cache: Path, vectors_file: str) -> tuple[dict[str, msgspec.Raw], MappedRecords | None] | None:
    """The fold's memories, encoded, from the snapshot in ``cache`` if it is the one that names
    ``vectors_file`` (the one this process just wrote, not another process's since), with what reads
    them from the file (see :class:`MappedRecords`); else ``None``. They point into the file's map,
    whose pages are let go (see :func:`release_pages`)."""
    try:
        stored, mapped, records = _read_mapped(cache / "snapshot.bin", _StoredFold)
    except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    release_pages(mapped)
    return (stored.state.memories, records) if stored.vectors_file == vectors_file else None


def release_pages(mapped: mmap.mmap) -> None:
    """Let the pages of a read snapshot's map go from this process's memory: decoding read all of
    the file (as large as 3.6 KB a memory), but only the encoded memories stay in use, and each is
    read again from the file (see :class:`MappedRecords`) when it is first decoded. The map is
    read-only and the file only ever replaced by a rename, so what is read again is what was read."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is not None and not mapped.closed:
        try:
            mapped.madvise(advice)
        except (OSError, ValueError):  # (an advice is only advice)
            pass


Taken = tuple[Snapshot, VectorIndex, Callable[[], bytes]]
"""What :func:`take` takes and :func:`write` writes: the snapshot, a copy of the vector index, and
the function that encodes the keyword index."""


def take(derived: Derived, *, embedder: str, owner: str, embeddings_end: int) -> Taken | None:
    """A snapshot of ``derived`` (and a copy of its vector index, and the function that encodes its
    keyword index's postings as they are now) to :func:`write` from any thread, or ``None`` when the
    fold cannot be encoded. Uses (and forgets) the fold encoded ahead while the
    keyword index was being filled (see :func:`encoded_fold`); the count of events since the last
    snapshot starts again."""
    ahead, derived.encoded_state = derived.encoded_state, None
    try:
        state = encoded_fold(derived.state, ahead)
    except OverflowError as exc:  # an integer of a journal line beyond 64 bits: the journal still holds it
        log.warning("no snapshot written: %s", exc)
        return None
    snapshot = Snapshot(
        format=SNAPSHOT_FORMAT,
        embedder=embedder,
        cursors=dict(derived.cursors),
        state=cast(State, msgspec.Raw(state)),  # encoded as the same bytes
        slot_ids=list(derived.table.ids),
        slot_digests=derived.slot_hashes.stored(),
        keywords=b"",  # (see below)
        problems=[(p.path, p.offset, p.reason) for p in derived.problems.values()],
        columns=derived.columns.snapshot(),
        vectors_file=f"vectors-{new_id()}.faiss",
        owner=owner,
        embeddings_end=embeddings_end,
        approximate=derived.vectors.index.approximate_stored() or b"",
    )
    keywords = derived.keywords.snapshot_later()
    vectors = derived.vectors.index.copy()
    derived.events_since_snapshot = 0
    return snapshot, vectors, keywords


def encoded_fold(state: State, ahead: tuple[State, int, bytes] | None) -> bytes:
    """``state`` encoded: ``ahead`` (a fold, its count of event ids, its encoding) when it is that fold
    unchanged since (every change adds an event id to ``seen``: the same object with as many ids is
    the same state), else encoded now."""
    if ahead is not None and ahead[0] is state and ahead[1] == len(state.seen):
        return ahead[2]
    return msgspec.msgpack.encode(state)


def _written_here(name: str) -> bool:
    """A file :func:`write` writes (under the snapshot lock): the snapshot, a vector index."""
    return name == "snapshot.bin" or (name.startswith("vectors-") and name.endswith(".faiss"))


def write(cache: Path, lock: FileLock, snapshot: Snapshot, vectors: VectorIndex, keywords: Callable[[], bytes]) -> bool:
    """Encode and write ``snapshot`` (made of copies: no lock is needed) with the keyword index
    ``keywords`` encodes (its postings are encoded here, not under the store's lock): the vector index
    first, then the snapshot that names it; older index files go, but for the one the previous
    snapshot named (a process may be about to open it). Temp files a killed writer left (as large as
    a snapshot: hundreds of MB at 100k memories) are removed first. ``lock`` (the cache's snapshot
    lock) is held throughout; if another process holds it, nothing is written."""
    try:
        with lock.hold(blocking=False) as locked:
            if not locked:
                return False
            leftovers = remove_leftover_temp_files(cache, _written_here)
            if leftovers:
                log.info(
                    "removed %d temporary file(s) of %d bytes that a killed snapshot writer left in %s",
                    len(leftovers),
                    sum(size for _, size in leftovers),
                    cache,
                )
            snapshot.keywords = keywords()
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
    finally:
        del snapshot, vectors  # (the copies: freed by the caller's last reference, see Runner._write_snapshot)
    return True


def load(
    derived: Derived, journal: Journal, paths: ProjectPaths, embedder: Embedder, *, map_vectors: bool = False
) -> Derived | None:
    """``derived`` (new and empty) filled from the snapshot, if it matches this version, embedder
    and journal; else ``None`` (and the snapshot is left). The caller swaps it in.

    ``map_vectors`` (a server): the vector index is mapped, not read, and copied into memory by
    a background thread (see :meth:`VectorIndex.load`). The cursors whose digests were taken on
    trust have no hasher yet (see :func:`~eventmem.runner.cursors.make_hashers`)."""
    started = time.perf_counter()
    try:
        snapshot, mapped, records = _read_mapped(paths.cache_dir / "snapshot.bin", StoredSnapshot)
    except OSError:
        return None
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        if _format_of(paths.cache_dir / "snapshot.bin") in (None, SNAPSHOT_FORMAT):
            log.warning("ignoring unreadable snapshot: %s", exc)
        else:  # (an earlier version's, whose fields this one reads otherwise)
            log.info("ignoring snapshot made by another version")
        return None
    if snapshot.format != SNAPSHOT_FORMAT or snapshot.embedder != embedder.model_id:
        log.info("ignoring snapshot made by another version or embedder")
        return None
    if snapshot.owner != paths.cache_owner():
        log.warning("ignoring a snapshot this clone did not write (did it come in through git?)")
        return None
    segments = {s.name: s for s in journal.segments()}
    for name, cursor in snapshot.cursors.items():
        segment = segments.get(name)
        if segment is None or segment.size < cursor.offset:
            log.info("ignoring stale snapshot: %s changed", name)
            return None
    # A segment that was only appended to since (same file, not older, not smaller: the rule
    # every catch-up goes by) needs no check. The others' prefixes are hashed by a thread
    # (hashing and reading release the GIL) while this one loads the indexes; a prefix that
    # does not match means the snapshot is not used.
    suspect = [name for name, cursor in snapshot.cursors.items() if not only_appended(segments[name], cursor)]
    hashers: dict[str, hashlib.blake2b] = {}

    def check() -> None:
        for name in suspect:
            try:
                hashers[name] = prefix_hasher(segments[name], snapshot.cursors[name].offset)
            except OSError:  # gone meanwhile: no hasher, so the snapshot is not used
                return

    checker = threading.Thread(target=check, name="eventmem-snapshot-check")
    checker.start()
    try:
        if not snapshot.vectors_file:
            raise ValueError("it names no vector index file")
        vectors = VectorIndex.load(paths.cache_dir / snapshot.vectors_file, embedder.dim, mapped=map_vectors)
        if not derived.keywords.restore(snapshot.keywords):
            raise ValueError("its keyword index does not open")
    except Exception as exc:  # a damaged snapshot is never used
        log.warning("ignoring damaged snapshot: %s", exc)
        return None
    finally:
        checker.join()
    for name in suspect:
        hasher = hashers.get(name)
        if hasher is None or hasher.digest() != snapshot.cursors[name].digest:
            log.info("ignoring stale snapshot: %s was rewritten", name)
            return None
    try:
        digests = SlotDigests(snapshot.slot_digests)
        snapshot.state.seen.check()
    except ValueError as exc:
        log.warning("ignoring damaged snapshot: %s", exc)
        return None
    if len(digests) != len(snapshot.slot_ids):
        log.warning("ignoring damaged snapshot: %d slot digests for %d slots", len(digests), len(snapshot.slot_ids))
        return None
    derived.state = snapshot.state.state(records)
    derived.problems = {(p, o): JournalCorrupt(p, o, r) for p, o, r in snapshot.problems}
    derived.vectors.adopt(vectors, snapshot.approximate)
    derived.table.replace(_as_keys_of(snapshot.slot_ids, snapshot.state.memories))
    derived.slot_hashes = digests
    # the digests were just verified: only bytes past each offset remain to be read
    derived.cursors = {
        name: msgspec.structs.replace(cursor, stat=stat_after_load(segments[name], cursor.offset))
        for name, cursor in snapshot.cursors.items()
    }
    derived.embeddings_end = snapshot.embeddings_end
    if derived.columns.restore(snapshot.columns):
        refresh_expiries(derived)
    else:
        rebuild_columns(derived)
    derived.hashers = hashers  # kept: the first catch-up goes on from them, not from byte 0
    derived.keywords.settle()  # (postings the snapshot did not keep are made now, from the fold's texts)
    release_pages(mapped)
    log.info("loaded snapshot in %.3fs", time.perf_counter() - started)
    return derived


def _as_keys_of(ids: list[str], memories: dict[str, msgspec.Raw]) -> list[str]:
    """``ids`` as the very strings that key ``memories``: decoded, a snapshot holds each id twice
    (a slot's and its record's, 80 bytes each at 26 characters), and the slot table keeps them."""
    own = {memory_id: memory_id for memory_id in memories}
    return [own.get(memory_id, memory_id) for memory_id in ids]


def refresh_expiries(derived: Derived) -> None:
    """After restoring the columns: the expiry of memories with a TTL (usage may have moved it).
    Only those are looked at (and decoded)."""
    memories = derived.state.memories
    expiries = []
    for memory_id in derived.columns.with_expiry():
        record = memories[memory_id]
        if record.ttl_seconds is not None:
            expiries.append((memory_id, derived.expires_epoch(memory_id, record)))
    derived.columns.expire_at(expiries)


def rebuild_columns(derived: Derived) -> None:
    """Make the columns projection again from the fold (its snapshot did not fit)."""
    visible = [record for memory_id in derived.table.ids if (record := derived.state.visible(memory_id)) is not None]
    derived.columns.load(Batch(tuple(map(functools.partial(projected, derived), visible)), ()))
