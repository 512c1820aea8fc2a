"""Atomic replacement of derived files: readers see the old file or the new one, never a mix."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest

from eventmem.journal.files import Replacement, atomic_replace, atomic_write


def test_atomic_write_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "snapshot.bin"
    atomic_write(path, b"old")
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in path.parent.iterdir()) == ["snapshot.bin"]


def test_a_writer_that_fails_half_way_leaves_the_old_file_whole_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "vectors.faiss"
    atomic_write(path, b"old index")

    def write(tmp: Path) -> None:
        tmp.write_bytes(b"half of a new")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_replace(path, write)
    assert path.read_bytes() == b"old index"
    assert sorted(p.name for p in path.parent.iterdir()) == ["vectors.faiss"]


def test_a_writer_that_writes_by_name_is_replaced_in_one_step(tmp_path: Path) -> None:
    path = tmp_path / "index.bin"
    atomic_replace(path, lambda tmp: tmp.write_bytes(b"by name"), durable=False)
    assert path.read_bytes() == b"by name"


def test_a_replacement_written_in_pieces_is_hashed_and_put_in_place_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "ai" / "decisions.md"
    atomic_write(path, b"old")
    with Replacement(path) as new:
        new.write(b"first piece, ")
        new.write(b"second piece")
        assert new.sha256 == hashlib.sha256(b"first piece, second piece").hexdigest()
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in path.parent.iterdir()) == ["decisions.md"]

    with Replacement(path) as new:
        new.write(b"new")
        new.replace(durable=False)
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in path.parent.iterdir()) == ["decisions.md"]


def test_a_replacement_that_fails_half_way_leaves_the_old_file_whole_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "ai" / "decisions.md"
    atomic_write(path, b"old")
    with pytest.raises(OSError, match="No space"), Replacement(path) as new:
        new.write(b"half of a new")
        raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in path.parent.iterdir()) == ["decisions.md"]


def test_a_replacement_written_on_another_file_system_is_copied_beside_the_file_and_renamed(tmp_path: Path) -> None:
    elsewhere = Path("/dev/shm")
    if not elsewhere.is_dir() or elsewhere.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system to write the temp file on")
    scratch = Path(tempfile.mkdtemp(dir=elsewhere))
    try:
        path = tmp_path / "ai" / "decisions.md"
        atomic_write(path, b"old")
        with Replacement(path, scratch=scratch) as new:
            new.write(b"new, written on another file system")
            new.replace(durable=False)
        assert path.read_bytes() == b"new, written on another file system"
        assert sorted(p.name for p in path.parent.iterdir()) == ["decisions.md"]
        assert list(scratch.iterdir()) == []
    finally:
        shutil.rmtree(scratch)
