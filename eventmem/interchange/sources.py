"""Reading another store's files as untrusted input: real files only, bounded, never written to.

A symbolic link, a device, a file over :data:`~eventmem.core.limits.MAX_IMPORT_BYTES` or a folder of
more than :data:`~eventmem.core.limits.MAX_IMPORT_FILES` notes is refused before anything is read, with
the path named. An SQLite store is copied (with its write-ahead log) into a temporary folder and
opened read-only there, so a store another process has open, or one in a read-only folder, is read
as it is without being touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventmem.core.errors import InvalidInput, UnsafePath
from eventmem.core.limits import MAX_IMPORT_BYTES, MAX_IMPORT_FILES

__all__ = ["note_files", "open_sqlite", "read_text", "real_file"]

SQLITE_HEADER = b"SQLite format 3\x00"


def real_file(path: Path) -> os.stat_result:
    """The status of ``path`` if it is a regular file (not a link) within the size bound."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such file") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symbolic link; eventmem imports only real files. Give the file it points to.")
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"{path} is not a regular file")
    if info.st_size > MAX_IMPORT_BYTES:
        raise InvalidInput(f"{path} is {info.st_size:,} bytes; an import reads at most {MAX_IMPORT_BYTES:,} bytes")
    return info


def read_text(path: Path) -> str:
    """The whole of a real, bounded file as UTF-8 text (a byte that is not UTF-8 is refused, named)."""
    real_file(path)
    data = path.read_bytes()[: MAX_IMPORT_BYTES + 1]
    if len(data) > MAX_IMPORT_BYTES:
        raise InvalidInput(f"{path} grew past {MAX_IMPORT_BYTES:,} bytes while it was read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidInput(f"{path} line {line}: not UTF-8 text (byte {exc.start:,}); is it the right file?") from None


@contextlib.contextmanager
def open_sqlite(path: Path, *, tables: tuple[str, ...]) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a copy of the SQLite store at ``path``, which must hold ``tables``."""
    info = real_file(path)
    with open(path, "rb") as handle:
        if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise InvalidInput(f"{path} is not an SQLite database; is it the right file for this format?")
    with tempfile.TemporaryDirectory(prefix="eventmem-import-") as folder:
        copy = Path(folder) / "store.db"
        shutil.copyfile(path, copy)
        total = info.st_size
        for suffix in ("-wal",):
            side = path.with_name(path.name + suffix)
            if os.path.lexists(side):
                total += real_file(side).st_size
                if total > MAX_IMPORT_BYTES:
                    raise InvalidInput(f"{path} and its log are over {MAX_IMPORT_BYTES:,} bytes")
                shutil.copyfile(side, copy.with_name(copy.name + suffix))
        try:
            connection = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise InvalidInput(f"{path}: cannot open it as SQLite ({exc})") from None
        try:
            try:
                found = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            except sqlite3.DatabaseError as exc:
                raise InvalidInput(f"{path}: a damaged or truncated SQLite file ({exc})") from None
            missing = [name for name in tables if name not in found]
            if missing:
                raise InvalidInput(
                    f"{path} has no {', '.join(missing)} table: not a store of this format (tables: "
                    f"{', '.join(sorted(found)[:8]) or 'none'})"
                )
            yield connection
        finally:
            connection.close()


def note_files(folder: Path, suffixes: tuple[str, ...] = (".md",)) -> list[Path]:
    """The note files below ``folder``, sorted; links and hidden folders are left out, the count bounded."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise InvalidInput(f"{folder}: no such folder") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{folder} is a symbolic link; give the folder it points to")
    if stat.S_ISREG(info.st_mode):
        if not folder.name.lower().endswith(suffixes):
            raise InvalidInput(
                f"{folder} is not a markdown note (a {' or '.join(suffixes)} file): give a note or a folder of "
                "notes, or import it as the format it is in (server-memory for a JSONL knowledge graph)"
            )
        return [folder]
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidInput(f"{folder} is not a folder")
    found: list[Path] = []
    total = 0
    for current, folders, files in os.walk(folder, followlinks=False):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            path = Path(current) / name
            if not name.lower().endswith(suffixes) or os.path.islink(path):
                continue
            found.append(path)
            total += os.lstat(path).st_size
            if len(found) > MAX_IMPORT_FILES or total > MAX_IMPORT_BYTES:
                raise InvalidInput(
                    f"{folder} holds more than {MAX_IMPORT_FILES:,} notes or {MAX_IMPORT_BYTES:,} bytes; import "
                    "a smaller folder"
                )
    return found


def json_with_list(path: Path, key: str, what: str) -> dict[str, Any]:
    """A JSON file holding an object with a ``key`` list (an export, a backup); else one clear error."""
    try:
        data = json.loads(read_text(path))
    except ValueError as exc:
        raise InvalidInput(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise InvalidInput(f"{path}: not {what} (no {key} list)")
    return data


def objects_in(entries: Any, where: str, problems: list[Any], problem: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects of a JSON list with their place (``where[index]``); anything else is a problem."""
    for index, record in enumerate(entries if isinstance(entries, list) else []):
        place = f"{where}[{index}]"
        if isinstance(record, dict):
            yield place, record
        else:
            problems.append(problem(place, "not an object"))


def holds_json_object(path: Path) -> bool:
    """Whether a store file is a JSON object (an export, a backup) rather than a database: told apart
    by its first bytes; a link or a pipe is refused before it is opened."""
    real_file(path)
    with open(path, "rb") as handle:
        return handle.read(16).lstrip().startswith(b"{")
