"""Embedding cache: vectors by (model id, content hash), shared by every process of a project.

One append-only file per model under ``cache/embeddings/``: fixed-size records of a 16-byte
BLAKE2b hash of the text followed by the float32 vector. Fixed-size records make a torn write
(a killed process) easy to see and cut; ``O_APPEND`` writes of whole records keep concurrent
writers from interleaving. A rebuild never embeds the same text twice, and a new process reuses
what another has embedded.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
import numpy.typing as npt

from eventmem.core.errors import UnsafePath
from eventmem.journal.files import FileLock, atomic_write, open_append
from eventmem.journal.project import sanitize

__all__ = ["EmbeddingCache", "QueryVectors", "content_hash", "recorded_model"]

log = logging.getLogger("eventmem.embedders")

HASH_BYTES = 16


def content_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=HASH_BYTES).digest()


class EmbeddingCache:
    """The cache file of one model, indexed by hash. The vectors stay in the file: a lookup reads the
    records it needs (the page cache keeps them warm), so a process holds 16 bytes of hash and a row
    number per text, not a float32 copy of every vector (1.5 KB each at 384 dimensions)."""

    def __init__(self, folder: Path, model_id: str, dim: int) -> None:
        self.path = folder / f"{sanitize(model_id)}.bin"
        self.dim = dim
        self._lock = FileLock(folder / f"{sanitize(model_id)}.lock")
        self._record = np.dtype([("hash", f"V{HASH_BYTES}"), ("vector", np.float32, (dim,))])
        self._rows: dict[bytes, int] = {}
        """Hash -> its record's number in the file (the first of equal hashes)."""
        self._unwritten: dict[bytes, npt.NDArray[np.float32]] = {}
        """Vectors this process made that could not be written: kept here, used as if in the file."""
        self._offset = 0
        self.skipped = False

    def __len__(self) -> int:
        return len(self._rows) + len(self._unwritten)

    def end(self) -> int:
        """The file's size in whole records (0 if it does not exist): where :meth:`skip_to_end` may start."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return 0
        return size - size % self._record.itemsize

    def skip_to_end(self, end: int | None = None) -> None:
        """Start reading at ``end`` (an earlier :meth:`end`), or the file's current end: a loaded
        snapshot already holds every vector the cache had when it was taken, so a new process need
        not read (and index) the whole file for its first save. Records other processes appended
        after ``end`` are read on the next miss (a merge another process embedded is not embedded again)."""
        current = self.end()
        if not current:
            return
        if end is not None:
            current = min(current, max(end - end % self._record.itemsize, 0))
        self._offset = max(self._offset, current)
        self.skipped = True

    def forget_rows(self, end: int | None) -> None:
        """Forget which record holds each hash, as a process that loaded a snapshot taken at ``end``
        (an earlier :meth:`end`) never knew it (see :meth:`skip_to_end`): read again on a rebuild."""
        self._rows = {}
        self._offset = 0
        self.skip_to_end(end)

    def rewind(self) -> None:
        """Read the whole file again on the next miss (after :meth:`skip_to_end`, for a rebuild)."""
        if self.skipped:
            self._rows.clear()
            self._offset = 0
            self.skipped = False

    def refresh(self) -> None:
        """Index the records other processes appended since the last call (their hashes only, read a
        block at a time: the vectors are read when looked up)."""
        size = self._record.itemsize
        block = max(1, (16 << 20) // size)
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                row = self._offset // size
                while True:
                    data = handle.read(block * size)
                    usable = len(data) - len(data) % size
                    if usable == 0:
                        return
                    hashes = np.frombuffer(data, dtype=self._record, count=usable // size)["hash"].tobytes()
                    rows = self._rows
                    for i in range(0, len(hashes), HASH_BYTES):
                        rows.setdefault(hashes[i : i + HASH_BYTES], row)
                        row += 1
                    self._offset += usable
                    if usable < len(data) or len(data) < block * size:
                        return
        except FileNotFoundError:
            return

    def lookup(self, hashes: list[bytes]) -> tuple[npt.NDArray[np.float32], list[int]]:
        """Vectors for ``hashes`` (zeros where missing) and the positions that were missing."""
        found = np.fromiter(map(self._rows.get, hashes, itertools.repeat(-1)), dtype=np.int64, count=len(hashes))
        out = np.zeros((len(hashes), self.dim), dtype=np.float32)
        read = self._read_rows(found, hashes, out)
        if self._unwritten:
            for i, digest in enumerate(hashes):
                vector = self._unwritten.get(digest)
                if vector is not None and not read[i]:
                    out[i] = vector
                    read[i] = True
        return out, np.flatnonzero(~read).tolist()

    def _read_rows(
        self, found: npt.NDArray[np.int64], hashes: list[bytes], out: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.bool_]:
        """Read the records ``found`` (-1: none) into ``out``, the nearby ones in one read; a record
        gone from the file (or holding another hash: a file replaced) counts as not found."""
        read = np.zeros(len(found), dtype=bool)
        wanted = np.flatnonzero(found >= 0)
        if not len(wanted):
            return read
        size = self._record.itemsize
        order = wanted[np.argsort(found[wanted], kind="stable")]
        rows = found[order]
        # runs of records at most 64 apart are read in one go (as is a whole file, in blocks)
        breaks = np.flatnonzero((np.diff(rows) > 64) | (np.diff(np.arange(len(rows)) // 8192) > 0)) + 1
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return read
        try:
            for run in np.split(np.arange(len(rows)), breaks):
                first, last = int(rows[run[0]]), int(rows[run[-1]])
                data = os.pread(fd, (last - first + 1) * size, first * size)
                count = len(data) // size
                records = np.frombuffer(data, dtype=self._record, count=count)
                at = rows[run] - first
                inside = at < count
                places, at = order[run][inside], at[inside]
                asked = np.frombuffer(b"".join(hashes[i] for i in places.tolist()), dtype=f"V{HASH_BYTES}")
                same = records["hash"][at] == asked
                out[places[same]] = records["vector"][at[same]]
                read[places[same]] = True
        except OSError:
            pass
        finally:
            os.close(fd)
        return read

    def store(self, hashes: list[bytes], vectors: npt.NDArray[np.float32]) -> None:
        """Append new vectors (best effort: the cache is derived, a failed write loses nothing)."""
        new = [(h, v) for h, v in zip(hashes, vectors, strict=True) if h not in self._rows and h not in self._unwritten]
        new = list({h: (h, v) for h, v in reversed(new)}.values())[::-1]  # (the first of equal hashes)
        if not new:
            return
        records = np.zeros(len(new), dtype=self._record)
        records["hash"] = [np.void(h) for h, _ in new]
        records["vector"] = np.stack([v for _, v in new])
        written = -1
        try:
            with self._lock.hold():
                fd = open_append(self.path, os.O_RDWR)  # never through a link inside the project
                try:
                    size = os.fstat(fd).st_size
                    if size % self._record.itemsize:  # a torn record from a killed process
                        size -= size % self._record.itemsize
                        os.ftruncate(fd, size)
                    view = memoryview(records.tobytes())
                    while view:
                        view = view[os.write(fd, view) :]
                    written = size // self._record.itemsize
                    if size == self._offset:  # (read up to here: the next refresh need not read these)
                        self._offset = size + len(new) * self._record.itemsize
                finally:
                    os.close(fd)
        except (OSError, UnsafePath):
            pass
        # usable in this process at once: by their place in the file (the next refresh reads them
        # again and keeps these), or, if the write failed, from memory
        for i, (digest, vector) in enumerate(new):
            if written >= 0:
                self._rows.setdefault(digest, written + i)
            else:
                self._unwritten[digest] = np.array(vector, dtype=np.float32)


class QueryVectors:
    """The vectors of the last ``size`` query texts, in memory: a question asked again (an agent
    repeats itself, a client retries, several tools ask alike) costs a model no second pass."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> npt.NDArray[np.float32] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
            return vector

    def put(self, text: str, vector: npt.NDArray[np.float32]) -> None:
        vector.setflags(write=False)  # (shared by every later caller)
        with self._lock:
            self._vectors[text] = vector
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)


def recorded_model(folder: Path) -> str:
    """The model whose vectors every memory had when ``folder/model`` was last written ("" if none):
    another model than the embedder's means that the project's vectors are being replaced."""
    try:
        return (folder / "model").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def forget_other_models(folder: Path, model_id: str) -> bool:
    """Drop the embedding cache of the model recorded in ``folder/model`` if it is not ``model_id``,
    and record ``model_id``; whether it is recorded now. Called once every memory has its vector from
    the new model: a model that cannot be reached, or an override in one command, must not cost the
    cache of the model that works."""
    marker = folder / "model"
    previous = recorded_model(folder)
    if previous == model_id:
        return True
    if previous:
        log.warning(
            "embedder changed from %s to %s: dropping the old embedding cache in %s", previous, model_id, folder
        )
        for suffix in (".bin", ".lock"):
            (folder / f"{sanitize(previous)}{suffix}").unlink(missing_ok=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(marker, model_id.encode("utf-8"))
        return True
    except OSError as exc:
        log.warning("could not record the embedder in %s: %s", marker, exc)
        return False
