"""Project rules: which folder is the root, which branch and writer a segment belongs to."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from eventmem.journal.project import ROOT_MARKERS, ProjectPaths, find_root, global_root


def make(path: Path, *markers: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for marker in markers:
        if marker == "package.json":
            (path / marker).write_text("{}\n")
        else:
            (path / marker).mkdir()
    return path


def no_marker_above(path: Path) -> bool:
    return not any((folder / marker).exists() for folder in path.parents for marker in ROOT_MARKERS)


# -- the root -------------------------------------------------------------------------------------


def test_eventmem_root_wins_over_every_marker(tmp_path: Path) -> None:
    cwd = make(tmp_path / "repo" / "sub", ".eventmem", ".git")
    chosen = find_root(cwd, {"EVENTMEM_ROOT": str(tmp_path / "elsewhere")})
    assert chosen.root == (tmp_path / "elsewhere").resolve()
    assert chosen.source == "env:EVENTMEM_ROOT"


def test_a_relative_root_variable_is_taken_from_the_cwd(tmp_path: Path) -> None:
    cwd = make(tmp_path / "repo")
    chosen = find_root(cwd, {"EVENTMEM_ROOT": "../other"})
    assert chosen.root == (tmp_path / "other").resolve()


def test_a_root_variable_with_an_unexpanded_placeholder_is_ignored(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", ".git")
    for value in ("${workspaceFolder}", "${env:HOME}/x", "  "):
        chosen = find_root(repo, {"EVENTMEM_ROOT": value})
        assert chosen.root == repo.resolve()
        assert chosen.source == "marker:.git"


def test_project_memory_root_is_also_accepted(tmp_path: Path) -> None:
    repo = make(tmp_path / "repo", ".git")
    chosen = find_root(repo, {"PROJECT_MEMORY_ROOT": str(tmp_path / "shared")})
    assert chosen.root == (tmp_path / "shared").resolve()
    assert chosen.source == "env:PROJECT_MEMORY_ROOT"


def test_eventmem_root_beats_project_memory_root_unless_it_is_a_placeholder(tmp_path: Path) -> None:
    both = {"EVENTMEM_ROOT": str(tmp_path / "a"), "PROJECT_MEMORY_ROOT": str(tmp_path / "b")}
    assert find_root(tmp_path, both).source == "env:EVENTMEM_ROOT"
    templated = {"EVENTMEM_ROOT": "${workspaceFolder}", "PROJECT_MEMORY_ROOT": str(tmp_path / "b")}
    chosen = find_root(tmp_path, templated)
    assert chosen.root == (tmp_path / "b").resolve()
    assert chosen.source == "env:PROJECT_MEMORY_ROOT"


def test_the_nearest_eventmem_folder_anywhere_up_the_tree_beats_a_nearer_git(tmp_path: Path) -> None:
    outer = make(tmp_path / "outer", ".eventmem")
    make(outer / "inner", ".git", ".ai", "package.json")
    cwd = make(outer / "inner" / "src" / "deep")
    chosen = find_root(cwd, {})
    assert chosen.root == outer.resolve()
    assert chosen.source == "marker:.eventmem"


def test_the_nearest_of_two_eventmem_folders_wins(tmp_path: Path) -> None:
    outer = make(tmp_path / "outer", ".eventmem")
    inner = make(outer / "inner", ".eventmem")
    assert find_root(make(inner / "src"), {}).root == inner.resolve()


@pytest.mark.parametrize(
    ("far", "near", "winner"),
    [
        (".ai", "package.json", "far"),
        (".ai", ".git", "far"),
        ("package.json", ".git", "far"),
        (".git", "package.json", "near"),
        (".git", ".git", "near"),
    ],
)
def test_markers_are_tried_in_order_of_strength(tmp_path: Path, far: str, near: str, winner: str) -> None:
    far_dir = make(tmp_path / "far", far)
    near_dir = make(far_dir / "near", near)
    chosen = find_root(make(near_dir / "src"), {})
    expected, marker = (far_dir, far) if winner == "far" else (near_dir, near)
    assert chosen.root == expected.resolve()
    assert chosen.source == f"marker:{marker}"


@pytest.mark.parametrize("marker", [".eventmem", ".ai", "package.json", ".git"])
def test_each_marker_alone_marks_the_root(tmp_path: Path, marker: str) -> None:
    root = make(tmp_path / "root", marker)
    chosen = find_root(make(root / "a" / "b"), {})
    assert (chosen.root, chosen.source) == (root.resolve(), f"marker:{marker}")


def test_without_a_variable_or_marker_the_cwd_is_the_root(tmp_path: Path) -> None:
    cwd = make(tmp_path / "plain" / "dir")
    if not no_marker_above(cwd):
        pytest.skip("a folder above the test directory holds a root marker")
    chosen = find_root(cwd, {})
    assert (chosen.root, chosen.source) == (cwd.resolve(), "cwd")


# -- the branch -----------------------------------------------------------------------------------


def test_the_branch_is_read_from_head_and_sanitized(project: Path) -> None:
    paths = ProjectPaths(project)
    assert paths.branch() == "main"
    (project / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    assert paths.branch() == "feature-x"
    (project / ".git" / "HEAD").write_text("ref: refs/heads/fix/#12 weird..name\n")
    assert paths.branch() == "fix-12-weird-name"


def test_a_real_git_checkout_changes_the_branch(project: Path) -> None:
    git(project, "checkout", "-q", "-b", "feature/login")
    assert ProjectPaths(project).branch() == "feature-login"


def test_a_detached_head_is_named_detached(project: Path) -> None:
    (project / ".git" / "HEAD").write_text("3f786850e387550fdab836ed7e6dc881de23001b\n")
    assert ProjectPaths(project).branch() == "detached"


def test_a_git_worktree_reads_its_own_head(project: Path, tmp_path: Path) -> None:
    git(project, "commit", "-q", "--allow-empty", "-m", "start")
    worktree = tmp_path / "wt"
    git(project, "worktree", "add", "-q", "-b", "feature/wt", str(worktree))
    assert (worktree / ".git").is_file()
    paths = ProjectPaths(worktree)
    assert paths.branch() == "feature-wt"
    git_dir = paths.git_dir()
    assert git_dir is not None and git_dir.resolve().is_relative_to((project / ".git").resolve())
    assert ProjectPaths(project).branch() == "main"


def test_a_relative_gitdir_file_is_followed(tmp_path: Path) -> None:
    real = make(tmp_path / "store" / "wt-git")
    (real / "HEAD").write_text("ref: refs/heads/topic\n")
    root = make(tmp_path / "checkout")
    (root / ".git").write_text("gitdir: ../store/wt-git\n")
    assert ProjectPaths(root).git_dir() == real.resolve()
    assert ProjectPaths(root).branch() == "topic"


def test_without_git_the_branch_is_local(tmp_path: Path) -> None:
    assert ProjectPaths(make(tmp_path / "nogit")).branch() == "local"
    broken = make(tmp_path / "broken", ".git")
    assert ProjectPaths(broken).branch() == "local"  # a .git folder without HEAD


# -- the writer id --------------------------------------------------------------------------------


def test_the_writer_id_is_created_once_inside_git_and_stays_stable(project: Path) -> None:
    first = ProjectPaths(project).writer_id()
    assert first
    assert ProjectPaths(project).writer_id() == first
    assert ProjectPaths(project).writer_id() == first
    assert (project / ".git" / "eventmem-writer").read_text().strip() == first
    assert not (project / ".eventmem" / "writer").exists()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == ""


def test_each_clone_gets_its_own_writer_id(tmp_path: Path) -> None:
    ids = set()
    for name in ("one", "two", "three"):
        root = make(tmp_path / name)
        git(root, "init", "-q")
        ids.add(ProjectPaths(root).writer_id())
    assert len(ids) == 3


def test_without_git_the_writer_id_lives_in_the_ignored_eventmem_folder(tmp_path: Path) -> None:
    root = make(tmp_path / "nogit")
    paths = ProjectPaths(root)
    value = paths.writer_id()
    assert (root / ".eventmem" / "writer").read_text().strip() == value
    assert paths.writer_id() == value
    paths.ensure()
    assert "writer" in (root / ".eventmem" / ".gitignore").read_text().splitlines()


RACER = """
import sys
from pathlib import Path
from eventmem.journal.project import ProjectPaths
sys.stdin.readline()  # wait until every racer has started
print(ProjectPaths(Path(sys.argv[1])).writer_id())
"""


def test_processes_racing_to_create_the_writer_id_agree(project: Path) -> None:
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(project)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    ids = [racer.communicate(timeout=60)[0].strip() for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert len(set(ids)) == 1 and ids[0]
    assert ProjectPaths(project).writer_id() == ids[0]
    leftovers = [p.name for p in (project / ".git").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_the_segment_name_is_writer_dot_branch_dot_jsonl(project: Path) -> None:
    paths = ProjectPaths(project)
    assert paths.segment_name() == f"{paths.writer_id()}.main.jsonl"
    (project / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    assert paths.segment_name() == f"{paths.writer_id()}.feature-x.jsonl"


# -- the layout -----------------------------------------------------------------------------------


def test_ensure_writes_a_gitignore_that_ignores_the_cache(project: Path) -> None:
    paths = ProjectPaths(project)
    paths.ensure()
    assert paths.journal_dir.is_dir()
    lines = (paths.base / ".gitignore").read_text().splitlines()
    assert "cache/" in lines
    (paths.cache_dir / "snapshot.bin").parent.mkdir(parents=True)
    (paths.cache_dir / "snapshot.bin").write_bytes(b"x")
    (paths.journal_dir / "w.main.jsonl").write_text("{}\n")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".eventmem/cache/snapshot.bin"], cwd=project, check=False
    ).returncode
    tracked = subprocess.run(
        ["git", "check-ignore", "-q", ".eventmem/journal/w.main.jsonl"], cwd=project, check=False
    ).returncode
    assert (ignored, tracked) == (0, 1)


def test_ensure_keeps_an_existing_gitignore(project: Path) -> None:
    paths = ProjectPaths(project)
    paths.base.mkdir()
    (paths.base / ".gitignore").write_text("cache/\ncustom\n")
    paths.ensure()
    assert (paths.base / ".gitignore").read_text() == "cache/\ncustom\n"


def test_a_relative_global_dir_or_data_home_is_ignored_rather_than_taken_inside_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = tmp_path / "home" / ".local" / "share" / "eventmem" / "global"
    assert global_root({"EVENTMEM_GLOBAL_DIR": "memory/global"}) == default
    assert global_root({"XDG_DATA_HOME": "data"}) == default
    assert global_root({"XDG_DATA_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "eventmem" / "global"
    assert global_root({"EVENTMEM_GLOBAL_DIR": str(tmp_path / "g")}) == tmp_path / "g"
