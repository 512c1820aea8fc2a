"""``eventmem doctor --fix`` unsticks a project whose memory folders arrived as symbolic links (a
``git pull`` of a commit that tracks one): it says what it will do, does it, and loses nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_runner import eventmem
from conftest import git


def saved(project: Path, text: str) -> None:
    result = eventmem(project, "save", text)
    assert result.returncode == 0, result.stderr


def memories(project: Path) -> int:
    result = eventmem(project, "--json", "stats")
    assert result.returncode == 0, result.stderr
    count: int = json.loads(result.stdout)["memories"]
    return count


def test_a_tracked_link_at_the_cache_is_replaced_by_a_real_folder_and_every_command_works_again(
    project: Path, tmp_path: Path
) -> None:
    saved(project, "The deploy script lives in tools/deploy.sh")
    saved(project, "Releases are cut on Tuesdays")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not eventmem's\n", encoding="utf-8")
    cache = project / ".eventmem" / "cache"
    shutil.rmtree(cache)
    cache.symlink_to(elsewhere, target_is_directory=True)
    git(project, "add", "-A")
    git(project, "add", "--force", ".eventmem/cache")
    git(project, "commit", "-q", "-m", "a commit that tracks a link")
    tracked = set(git(project, "ls-files").split())
    stuck = eventmem(project, "--json", "stats")
    assert stuck.returncode == 2 and "symbolic link" in stuck.stderr
    assert "`eventmem doctor --fix` does it" in stuck.stderr and stuck.stderr.count("\n") == 1

    fixed = eventmem(project, "doctor", "--fix")
    lines = fixed.stdout.splitlines()
    assert lines[0].startswith("fix:         .eventmem/cache is a symbolic link to ") and "empty folder" in lines[0]
    assert "git tracks the link" in lines[0]
    assert cache.is_dir() and not cache.is_symlink()
    assert memories(project) == 2
    assert (elsewhere / "keep.txt").read_text(encoding="utf-8") == "not eventmem's\n"
    assert set(git(project, "ls-files").split()) == tracked  # the index is as it was: nothing tracked removed
    again = eventmem(project, "doctor", "--fix")
    assert "nothing to do" in again.stdout


def test_a_linked_journal_becomes_a_real_folder_with_every_segment(project: Path, tmp_path: Path) -> None:
    saved(project, "The deploy script lives in tools/deploy.sh")
    journal = project / ".eventmem" / "journal"
    moved = tmp_path / "journal-elsewhere"
    shutil.move(journal, moved)
    journal.symlink_to(moved, target_is_directory=True)
    refused = eventmem(project, "save", "A note while the journal is a link")
    assert refused.returncode != 0
    fixed = eventmem(project, "doctor", "--fix")
    assert ".eventmem/journal is a symbolic link to " in fixed.stdout and "copies of the regular files" in fixed.stdout
    assert journal.is_dir() and not journal.is_symlink()
    assert sorted(p.name for p in journal.iterdir()) == sorted(p.name for p in moved.iterdir())
    saved(project, "A note after the fix")
    assert memories(project) == 2


def test_a_refused_link_names_doctor_fix_only_where_doctor_fix_replaces_it(project: Path, tmp_path: Path) -> None:
    saved(project, "The deploy script lives in tools/deploy.sh")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".ai").symlink_to(elsewhere, target_is_directory=True)  # a render folder: not the doctor's
    result = eventmem(project, "import", "pmp", ".ai")
    assert result.returncode == 2 and "symbolic link" in result.stderr
    assert "doctor --fix" not in result.stderr
