"""Memory appears in a project only when something is saved, and only what belongs in git shows up."""

from __future__ import annotations

from pathlib import Path

from cli_runner import eventmem
from conftest import git

from eventmem.journal.project import RootChoice
from eventmem.service import open_service


def test_reading_a_project_without_memory_creates_nothing(project: Path) -> None:
    service = open_service(RootChoice(project, "test"))
    assert service.recall("anything") == []
    service.stats()
    service.close()
    for args in (["search", "anything"], ["stats"], ["doctor"], ["log"]):
        eventmem(project.parent, *args, "--root", str(project))
    assert not (project / ".eventmem").exists()


def test_after_the_first_save_git_sees_the_journal_and_its_gitignore_but_no_cache(project: Path) -> None:
    result = eventmem(project.parent, "save", "The first memory of this project", "--root", str(project))
    assert result.returncode == 0, result.stderr
    assert (project / ".eventmem" / "cache").is_dir()  # derived state exists...
    untracked = git(project, "status", "--porcelain", "--untracked-files=all").split("\n")
    paths = sorted(line[3:] for line in untracked if line)
    assert paths[:2] == [".eventmem/.gitattributes", ".eventmem/.gitignore"]
    assert len(paths) == 3  # the cache is ignored
    assert paths[2].startswith(".eventmem/journal/") and paths[2].endswith(".jsonl")
