"""Nothing outside the project: a symbolic link inside it (a segment, ``.eventmem/journal``,
``cache``, ``local``, the ``.ai`` render folder) is refused, never read or written through, while a
project reached through a linked parent folder works as any other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import eventmem, ok_json, save, search_ids
from conftest import git, tree, wait_until
from mcp_client import serve, server_env, text_of

from eventmem.core.errors import UnsafePath
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.service import open_service

SECRET = "The production database password is PURPLE-ELEPHANT-42"


def outside_folder(tmp_path: Path) -> Path:
    """A folder outside the project holding a file, as a link's target would."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "keep.txt").write_text("not eventmem's\n", encoding="utf-8")
    return target


def linked_outside(tmp_path: Path, project: Path, folder: str) -> Path:
    """``.eventmem/<folder>`` made a link to a folder outside the project (the real one, if any, moved
    away); returns the link's target."""
    target = outside_folder(tmp_path)
    link = project / ".eventmem" / folder
    if link.exists():
        os.rename(link, tmp_path / f"{folder}-moved-away")
    link.symlink_to(target, target_is_directory=True)
    return target


def refused_in_one_line(result: subprocess.CompletedProcess[str], link: str) -> None:
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("eventmem: ")]
    assert link in line and "symbolic link" in line and "Remove the link" in line


def test_a_segment_linked_to_a_file_outside_is_not_searchable_and_doctor_names_it(
    tmp_path: Path, project: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    secret = save(elsewhere, SECRET, "--title", "Database password")
    assert search_ids(elsewhere, "PURPLE-ELEPHANT-42 database password")[0] == secret["id"]
    (outside,) = (elsewhere / ".eventmem" / "journal").glob("*.jsonl")
    own = save(project, "The scheduler retries failed jobs three times.", "--title", "Retries")
    (project / ".eventmem" / "journal" / "teammate.main.jsonl").symlink_to(outside)

    found = eventmem(project, "search", "PURPLE-ELEPHANT-42 database password", "--json")
    assert found.returncode == 0 and "PURPLE" not in found.stdout
    assert secret["id"] not in [hit["id"] for hit in json.loads(found.stdout)["results"]]
    assert "journal/teammate.main.jsonl" in found.stderr  # the warning names the refused segment
    assert search_ids(project, "scheduler retries") == [own["id"]]
    doctor = eventmem(project, "doctor", "--json")
    assert doctor.returncode == 1
    report = json.loads(doctor.stdout)
    assert list(report["refused_segments"]) == ["journal/teammate.main.jsonl"]
    assert "symbolic link" in report["refused_segments"]["journal/teammate.main.jsonl"]
    assert "PURPLE" not in doctor.stdout
    assert "journal/teammate.main.jsonl" in eventmem(project, "doctor").stdout
    save(project, "Saving still works beside the refused segment.")


@pytest.mark.parametrize("folder", ["journal", "cache", "local"])
def test_a_save_into_a_linked_memory_folder_is_refused_and_writes_nothing_there(
    tmp_path: Path, project: Path, folder: str
) -> None:
    assert eventmem(project, "init").returncode == 0
    target = linked_outside(tmp_path, project, folder)
    before = tree(target)

    refused_in_one_line(eventmem(project, "save", "A decision about retries."), folder)
    assert tree(target) == before


@pytest.mark.parametrize("folder", ["cache", "local"])
def test_a_rebuild_with_a_linked_cache_or_local_folder_is_refused_and_writes_nothing_there(
    tmp_path: Path, project: Path, folder: str
) -> None:
    save(project, "The scheduler retries failed jobs three times.")
    target = linked_outside(tmp_path, project, folder)
    before = tree(target)

    refused_in_one_line(eventmem(project, "rebuild"), folder)
    assert tree(target) == before


def test_a_linked_snapshot_inside_a_real_cache_folder_is_refused(tmp_path: Path, project: Path) -> None:
    save(project, "The scheduler retries failed jobs three times.")
    outside = tmp_path / "snapshot.bin"
    outside.write_bytes(b"someone else's file")
    snapshot = project / ".eventmem" / "cache" / "snapshot.bin"
    snapshot.unlink(missing_ok=True)
    snapshot.symlink_to(outside)

    refused_in_one_line(eventmem(project, "save", "Another note."), "cache/snapshot.bin")
    assert outside.read_bytes() == b"someone else's file"


@pytest.mark.parametrize("folder", ["journal", "cache"])
def test_an_import_into_a_linked_memory_folder_is_refused_and_writes_nothing_there(
    tmp_path: Path, project: Path, folder: str
) -> None:
    assert eventmem(project, "init").returncode == 0
    incoming = project / "incoming"
    incoming.mkdir()
    (incoming / "project.md").write_text("# Project\n\nA scheduler for batch jobs.\n", encoding="utf-8")
    target = linked_outside(tmp_path, project, folder)
    before = tree(target)

    refused_in_one_line(eventmem(project, "import", "pmp", "incoming"), folder)
    assert tree(target) == before


def test_an_import_of_a_section_file_linked_outside_is_refused(tmp_path: Path, project: Path) -> None:
    incoming = project / ".ai"
    incoming.mkdir()
    secret = tmp_path / "id_ed25519"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    (incoming / "project.md").symlink_to(secret)

    result = eventmem(project, "import", "pmp", ".ai")
    assert result.returncode == 2
    assert "project.md is a symbolic link" in result.stderr
    assert not (project / ".eventmem" / "journal").is_dir() or "PURPLE" not in "".join(
        p.read_text(encoding="utf-8") for p in (project / ".eventmem" / "journal").glob("*.jsonl")
    )


def test_a_linked_render_folder_is_refused_by_import_and_nothing_is_written_there(
    tmp_path: Path, project: Path
) -> None:
    assert eventmem(project, "init").returncode == 0
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = ".ai"\n', encoding="utf-8")
    incoming = project / "incoming"
    incoming.mkdir()
    (incoming / "project.md").write_text("# Project\n\nA scheduler for batch jobs.\n", encoding="utf-8")
    target = outside_folder(tmp_path)
    (project / ".ai").symlink_to(target, target_is_directory=True)
    before = tree(target)

    result = eventmem(project, "import", "pmp", "incoming")  # the setting is ignored: the view goes to the cache
    (warning,) = [line for line in result.stderr.splitlines() if "render_ai_dir" in line]
    assert ".ai" in warning and "symbolic link" in warning and "ignored" in warning
    assert tree(target) == before


@pytest.mark.anyio
async def test_update_current_task_with_a_linked_render_folder_is_a_tool_error_and_writes_nothing(
    tmp_path: Path, project: Path
) -> None:
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = ".ai"\n', encoding="utf-8")
    target = outside_folder(tmp_path)
    (project / ".ai").symlink_to(target, target_is_directory=True)
    before = tree(target)

    async with serve(project, server_env(EVENTMEM_TOOLS="all"), tmp_path / "server.log") as session:
        await session.initialize()
        result = await session.call_tool("update_current_task", {"task": "Ship the retry fix."})
    assert not result.is_error, text_of(result)  # the tracked setting is ignored: the view goes to the cache
    assert ".eventmem/cache/ai/" in text_of(result)
    assert tree(target) == before
    said = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert 'render_ai_dir = ".ai"' in said and "symbolic link" in said and "ignored" in said


def test_the_one_check_refuses_links_and_paths_leaving_the_project_but_not_links_above_the_root(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    (real / "project").mkdir(parents=True)
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    paths = ProjectPaths(tmp_path / "via" / "project")
    assert paths.inside(paths.cache_dir / "ai", kind="folder", create=True).is_dir()
    (paths.base / "local").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UnsafePath, match=r"\.eventmem/local .*symbolic link"):
        paths.inside(paths.local_dir / "usage.jsonl")
    with pytest.raises(UnsafePath, match="not inside the project"):
        paths.inside(paths.root / ".." / "elsewhere")


def test_a_project_reached_through_a_linked_parent_folder_works(tmp_path: Path) -> None:
    real = tmp_path / "data" / "home"
    (real / "project").mkdir(parents=True)
    git(real / "project", "init", "-q", "-b", "main")
    (tmp_path / "home-link").symlink_to(real, target_is_directory=True)
    root = tmp_path / "home-link" / "project"

    service = open_service(RootChoice(root, "test"))
    try:
        saved = service.save("Retries use exponential backoff with jitter.", title="Backoff")
        assert [hit.id for hit in service.recall("exponential backoff")] == [saved.id]
        assert service.warnings() == []
    finally:
        service.close()
    assert save(root, "A second note, saved by the command line.")["id"]
    assert len(ok_json(root, "search", "backoff jitter")["results"]) >= 1
    assert ok_json(root, "doctor")["refused_segments"] == {}


def test_a_linked_settings_file_is_refused_and_not_read(tmp_path: Path, project: Path) -> None:
    outside = tmp_path / "their-settings.toml"
    outside.write_text('embedder = "openai:m@http://127.0.0.1:9/v1?key_env=HOME"\n', encoding="utf-8")
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.toml").symlink_to(outside)

    refused_in_one_line(eventmem(project, "save", "A decision about retries."), "config.toml")
    assert not (project / ".eventmem" / "journal").exists()


@pytest.mark.parametrize("folder", [".eventmem/journal", ".git", ".git/hooks", ".eventmem"])
def test_a_render_folder_inside_git_or_the_memory_folder_is_refused_and_nothing_is_written_there(
    project: Path, folder: str
) -> None:
    save(project, "The scheduler runs batch jobs at night.")
    (project / ".eventmem" / "config.toml").write_text(f'render_ai_dir = "{folder}"\n', encoding="utf-8")
    before = tree(project / folder)
    result = eventmem(project, "save", "Current task: move the scheduler to cron", "--type", "current_task")
    assert result.returncode == 0, result.stderr  # a tracked setting that breaks a rule is ignored, said once
    (warning,) = [line for line in result.stderr.splitlines() if "render_ai_dir" in line]
    assert f'render_ai_dir = "{folder}"' in warning and "outside .git and .eventmem; ignored" in warning
    after = tree(project / folder)  # (the save itself writes the journal: no view file went there)
    views = [
        name for name in after if name.endswith(".md") and not name.startswith("cache/")
    ]  # (cache/ai: the default)
    assert [name for name in views if after[name] != before.get(name)] == []


@pytest.mark.anyio
async def test_a_server_whose_render_folder_became_a_link_says_so_in_one_log_line_and_writes_nothing(
    tmp_path: Path, project: Path
) -> None:
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = ".ai"\n', encoding="utf-8")
    log = tmp_path / "server.log"
    async with serve(project, server_env(EVENTMEM_TOOLS="all"), log) as session:
        await session.initialize()
        result = await session.call_tool("update_current_task", {"task": "Ship the retry fix."})
        assert not result.is_error, text_of(result)
        shutil.rmtree(project / ".ai")
        target = outside_folder(tmp_path)
        (project / ".ai").symlink_to(target, target_is_directory=True)
        before = tree(target)
        eventmem(project, "save", "Current task: ship the retry fix today", "--type", "current_task")  # (ignores it)
        save(project, "A decision another process made", "--type", "decision")
        await wait_until(
            lambda: "could not render the .ai view" in log.read_text(encoding="utf-8"),
            log,
            lambda: log.read_text(encoding="utf-8"),
        )
    assert tree(target) == before
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "could not render" in line]
    assert lines and all(".ai" in line and "symbolic link" in line for line in lines)
    assert "Traceback" not in log.read_text(encoding="utf-8")


def test_a_snapshot_written_by_another_clone_is_never_loaded(tmp_path: Path) -> None:
    """A snapshot committed with ``git add -f`` and merged would be loaded as is if its segment
    digests matched: it could carry memories that no journal line holds. Each clone stamps its
    snapshots with a token kept in ``.git/``, which git never delivers."""
    first = tmp_path / "first"
    first.mkdir()
    git(first, "init", "-q", "-b", "main")
    assert eventmem(first, "save", "Deploys go through the staging cluster first.").returncode == 0
    assert eventmem(first, "rebuild").returncode == 0
    git(first, "add", ".eventmem")
    git(first, "commit", "-q", "-m", "memory")
    second = tmp_path / "second"
    git(tmp_path, "clone", "-q", str(first), str(second))
    shutil.copytree(first / ".eventmem" / "cache", second / ".eventmem" / "cache")  # as a forced commit brings it

    own = eventmem(first, "search", "staging", "deploys")
    assert own.returncode == 0 and "did not write" not in own.stderr
    foreign = eventmem(second, "search", "staging", "deploys")
    assert foreign.returncode == 0 and "Deploys go through the staging cluster" in foreign.stdout
    assert "ignoring a snapshot this clone did not write" in foreign.stderr
    assert eventmem(second, "rebuild").returncode == 0  # its own snapshot now, made from the journal
    again = eventmem(second, "search", "staging", "deploys")
    assert again.returncode == 0 and "did not write" not in again.stderr
