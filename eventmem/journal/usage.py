"""Access counts, kept out of git: ``.eventmem/local/usage.jsonl``.

Reading a memory must not append to the tracked journal (every search would become a commit-worthy
change), so accesses go to a local, gitignored stream that every process of the clone shares:

- one small JSON line per access, ``{"memory": id, "ts": time}`` (``"n"`` when one line stands
  for several accesses, after the stream is compacted);
- a call's accesses are one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, so lines of
  concurrent processes never interleave; a short file lock keeps the write off a file that is being
  compacted at that moment;
- each process reads the stream incrementally from its own offset; a stream that shrank or was
  replaced (compaction, or someone deleted it) is read again from the start.

Counts are per clone: another clone's accesses are not seen. What they cause that matters to
everyone, a promotion to long-term, is written to the journal as a ``promoted`` event.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import msgspec

from eventmem.core.errors import UnsafePath
from eventmem.journal.files import FileLock, atomic_write, lstat_checked, open_append, remove_leftover_temp_files

__all__ = ["UsageLog"]

log = logging.getLogger("eventmem.journal.usage")

COMPACT_ABOVE_BYTES: Final = 1 << 20
"""The stream is rewritten as one line per memory once it is larger than this."""


class Access(msgspec.Struct, kw_only=True, omit_defaults=True):
    memory: str
    ts: str
    n: int = 1


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Access)


class UsageLog:
    """The usage stream of one memory directory, and the access counts read from it so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = FileLock(path.with_name("usage.lock"))
        self.counts: dict[str, int] = {}
        self._offset = 0
        self._inode = -1

    # -- writing ------------------------------------------------------------------------------

    def record(self, memory_ids: Iterable[str], ts: str) -> None:
        """Append one line per access, all in one write. Failure is logged, never raised: an
        access count is a hint, and a read must not fail because the disk is full."""
        data = b"".join(_encoder.encode(Access(memory=m, ts=ts)) + b"\n" for m in memory_ids)
        if not data:
            return
        try:
            with self.lock.hold():
                fd = open_append(self.path)  # never through a link (the folder is checked too)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except (OSError, UnsafePath) as exc:
            log.warning("could not record accesses in %s: %s", self.path, exc)

    # -- reading ------------------------------------------------------------------------------

    def refresh(self) -> set[str]:
        """Read what was appended since the last call; returns the memories whose count changed.

        A stream that was replaced or shrank is read again from the start (every count is then
        reported as changed). A stream that is a symbolic link is not read (it counts as missing)."""
        try:
            found = lstat_checked(self.path)
        except UnsafePath:
            found = None
        except OSError:
            return set()
        if found is None or not stat.S_ISREG(found.st_mode):
            gone = set(self.counts)
            self.counts, self._offset, self._inode = {}, 0, -1
            return gone
        st = found
        changed: set[str] = set()
        if st.st_ino != self._inode or st.st_size < self._offset:
            changed = set(self.counts)
            self.counts, self._offset, self._inode = {}, 0, st.st_ino
        if st.st_size == self._offset:
            return changed
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                data = os.pread(fd, st.st_size - self._offset, self._offset)
            finally:
                os.close(fd)
        except OSError:
            return changed
        end = data.rfind(b"\n") + 1
        for line in data[:end].split(b"\n"):
            if not line:
                continue
            try:
                access = _decoder.decode(line)
            except msgspec.DecodeError:
                continue  # a damaged line costs one count, nothing more
            self.counts[access.memory] = self.counts.get(access.memory, 0) + access.n
            changed.add(access.memory)
        self._offset += end
        return changed

    def count(self, memory_id: str) -> int:
        return self.counts.get(memory_id, 0)

    # -- compaction ---------------------------------------------------------------------------

    def compact(self, keep: Mapping[str, object] | None = None, *, ts: str = "") -> bool:
        """Rewrite the stream as one line per memory (only once it is large). Memories not in
        ``keep`` (when given: the ones that still exist) are dropped. Returns whether it was done."""
        try:
            if os.stat(self.path).st_size <= COMPACT_ABOVE_BYTES:
                return False
        except OSError:
            return False
        with self.lock.hold():
            self._offset, self._inode, self.counts = 0, -1, {}
            self.refresh()  # everything, under the lock: nothing is appended meanwhile
            lines = [
                _encoder.encode(Access(memory=memory_id, ts=ts, n=n)) + b"\n"
                for memory_id, n in sorted(self.counts.items())
                if keep is None or memory_id in keep
            ]
            remove_leftover_temp_files(self.path.parent, lambda name: name == self.path.name)  # (a killed rewrite's)
            atomic_write(self.path, b"".join(lines), durable=False)
        self._offset, self._inode, self.counts = 0, -1, {}
        self.refresh()
        return True
