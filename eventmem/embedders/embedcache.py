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
    def __init__(self, folder: Path, model_id: str, dim: int) -> None:
        self.path = folder / f"{sanitize(model_id)}.bin"
        self.dim = dim
        self._lock = FileLock(folder / f"{sanitize(model_id)}.lock")
        self._record = np.dtype([("hash", f"V{HASH_BYTES}"), ("vector", np.float32, (dim,))])
        self._rows: dict[bytes, int] = {}
        self._vectors: npt.NDArray[np.float32] = np.zeros((1024, dim), dtype=np.float32)
        self._count = 0
        self._offset = 0
        self.skipped = False

    def __len__(self) -> int:
        return len(self._rows)

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
        not read (and keep) the whole file for its first save. Records other processes appended
        after ``end`` are read on the next miss (a merge another process embedded is not embedded again)."""
        current = self.end()
        if not current:
            return
        if end is not None:
            current = min(current, max(end - end % self._record.itemsize, 0))
        self._offset = max(self._offset, current)
        self.skipped = True

    def rewind(self) -> None:
        """Read the whole file again on the next miss (after :meth:`skip_to_end`, for a rebuild)."""
        if self.skipped:
            self._rows.clear()
            self._count = 0
            self._offset = 0
            self.skipped = False

    def refresh(self) -> None:
        """Read records other processes appended since the last call."""
        size = self._record.itemsize
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        usable = len(data) - len(data) % size
        if usable == 0:
            return
        records = np.frombuffer(data, dtype=self._record, count=usable // size)
        hashes = records["hash"].tobytes()
        rows = self._rows
        start = self._count
        if not rows:  # the first read: every record is kept, the first of equal hashes is used
            keys = [hashes[i : i + HASH_BYTES] for i in range(0, len(hashes), HASH_BYTES)]
            rows.update(zip(reversed(keys), range(start + len(keys) - 1, start - 1, -1), strict=True))
            if start == 0:  # the vectors where they were read (read-only: _reserve copies on growth)
                self._vectors = records["vector"]
            else:
                self._reserve(start + len(records))
                self._vectors[start : start + len(records)] = records["vector"]
            self._count += len(records)
        else:
            fresh: list[int] = []
            for i in range(len(records)):
                digest = hashes[i * HASH_BYTES : (i + 1) * HASH_BYTES]
                if digest not in rows:
                    rows[digest] = start + len(fresh)
                    fresh.append(i)
            if fresh:
                self._reserve(start + len(fresh))
                self._vectors[start : start + len(fresh)] = records["vector"][fresh]
                self._count += len(fresh)
        self._offset += usable

    def _reserve(self, count: int) -> None:
        if count > len(self._vectors):  # amortised growth: no copy of the whole cache per save
            # (also what makes the read-only view of the first read writable)
            grown = np.zeros((max(count, len(self._vectors) * 2), self.dim), dtype=np.float32)
            grown[: self._count] = self._vectors[: self._count]
            self._vectors = grown

    def _append(self, digest: bytes, vector: npt.NDArray[np.float32]) -> None:
        self._reserve(self._count + 1)
        self._vectors[self._count] = vector
        self._rows[digest] = self._count
        self._count += 1

    def lookup(self, hashes: list[bytes]) -> tuple[npt.NDArray[np.float32], list[int]]:
        """Vectors for ``hashes`` (zeros where missing) and the positions that were missing."""
        found = np.fromiter(map(self._rows.get, hashes, itertools.repeat(-1)), dtype=np.int64, count=len(hashes))
        missing_mask = found < 0
        if missing_mask.all():  # (zeros are mapped lazily; a gather would copy row 0 for every hash)
            return np.zeros((len(hashes), self.dim), dtype=np.float32), list(range(len(hashes)))
        out = self._vectors[np.where(missing_mask, 0, found)]
        out = np.asarray(out, dtype=np.float32)
        out[missing_mask] = 0.0
        return out, np.flatnonzero(missing_mask).tolist()

    def store(self, hashes: list[bytes], vectors: npt.NDArray[np.float32]) -> None:
        """Append new vectors (best effort: the cache is derived, a failed write loses nothing)."""
        new = [(h, v) for h, v in zip(hashes, vectors, strict=True) if h not in self._rows]
        if not new:
            return
        records = np.zeros(len(new), dtype=self._record)
        records["hash"] = [np.void(h) for h, _ in new]
        records["vector"] = np.stack([v for _, v in new])
        try:
            with self._lock.hold():
                fd = open_append(self.path, os.O_RDWR)  # never through a link inside the project
                try:
                    size = os.fstat(fd).st_size
                    if size % self._record.itemsize:  # a torn record from a killed process
                        os.ftruncate(fd, size - size % self._record.itemsize)
                    view = memoryview(records.tobytes())
                    while view:
                        view = view[os.write(fd, view) :]
                finally:
                    os.close(fd)
        except (OSError, UnsafePath):
            pass
        # (no re-read here: records other processes wrote come in with the next refresh)
        for digest, vector in new:  # usable in this process at once, even if the write failed
            if digest not in self._rows:
                self._append(digest, vector)


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
