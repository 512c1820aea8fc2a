"""Merges never conflict: real git, real clones, plain ``git merge`` with nothing installed.

Each scenario checks the same things: git exits 0 and leaves no conflict marker; both merge orders
fold to the same state and answer queries alike; that state is the fold of the union of the two
sides' events; a server that was running before the merge catches up to it; tombstones stay dead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from answers import answers, canonical
from conftest import REPO, git, reopen

from eventmem.journal.history import History, read_revision
from eventmem.journal.project import ProjectPaths
from eventmem.review.audit import audit
from eventmem.service import MemoryService


@pytest.fixture(autouse=True)
def no_recency(monkeypatch: pytest.MonkeyPatch) -> None:
    # answers are compared across processes started at different times: keep time out of scores
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", "0")


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def plain_layout(root: Path) -> None:
    """Nothing but the one-segment-per-clone-and-branch layout: no git attribute, no driver."""
    (root / ".eventmem" / ".gitattributes").unlink()


def assert_no_conflict(root: Path) -> None:
    assert git(root, "diff", "--name-only", "--diff-filter=U") == ""
    for path in (root / ".eventmem").rglob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        assert "<<<<<<<" not in text and ">>>>>>>" not in text and "\n=======\n" not in text


def merge(root: Path, rev: str) -> None:
    result = subprocess.run(["git", "merge", "--no-edit", rev], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_conflict(root)


def rev(root: Path, name: str) -> str:
    return git(root, "rev-parse", name).strip()


def union(root: Path, *revs: str) -> History:
    """Every event of every revision, as one set (duplicates are folded once)."""
    return History("union", [entry for r in revs for entry in read_revision(root, r).entries])


def live_state(service: MemoryService) -> object:
    service.catch_up()
    return canonical(service.project.derived.state)


def test_two_branches_of_one_clone_merge_in_either_order_to_the_union_of_their_events(project: Path) -> None:
    service = reopen(project)
    pool = service.save("The database connection pool holds 50 connections", kind="fix", by="ann").id
    doomed = service.save("Tests are flaky because they sleep", kind="problem", by="ann").id
    queue = service.save("Celery is the job queue", kind="decision", by="ann").id
    gone = service.save("Deploy releases by hand", kind="workflow", by="ann").id
    plain_layout(project)
    commit(project, "base memories")

    git(project, "checkout", "-q", "-b", "feature")
    added_on_feature = service.save("Keyword search engine: SQLite FTS5", kind="decision", by="alice").id
    service.update(pool, title="Connection pool size", by="alice")
    service.delete(doomed, reason="fixed: tests wait on files now", by="alice")
    commit(project, "feature: memories")

    git(project, "checkout", "-q", "main")
    added_on_main = service.save("Release deploys go out on Tuesdays", kind="workflow", by="bob").id
    service.update(queue, content="Redis is the job queue", importance=0.9, by="bob")
    service.update(doomed, importance=0.8, by="bob")  # later than feature's delete, on a branch that kept it
    service.delete(gone, by="bob")
    commit(project, "main: memories")
    main_tip, feature_tip = rev(project, "main"), rev(project, "feature")
    expected = canonical(union(project, main_tip, feature_tip).fold())

    merge(project, "feature")  # the server that was running on main catches up
    assert live_state(service) == expected
    merged = answers(service)
    assert {added_on_feature, added_on_main, pool, queue} <= merged["memories"].keys()
    assert doomed not in merged["memories"] and gone not in merged["memories"]  # tombstones stay dead
    assert merged["memories"][pool]["title"] == "Connection pool size"
    assert merged["memories"][queue]["content"] == "Redis is the job queue"

    git(project, "checkout", "-q", "-b", "merged-the-other-way", feature_tip)
    merge(project, main_tip)
    assert live_state(service) == expected
    assert answers(service) == merged
    assert canonical(read_revision(project, "main").fold()) == expected
    service.close()
    fresh = reopen(project)
    assert answers(fresh) == merged
    fresh.close()


def clone(bare: Path, path: Path) -> Path:
    git(bare.parent, "clone", "-q", str(bare), str(path))
    git(path, "config", "pull.rebase", "false")
    return path


def test_two_clones_pushing_and_pulling_through_a_bare_repository_never_conflict(tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    a = clone(bare, tmp_path / "a")
    ann = reopen(a)
    pool = ann.save("The database connection pool holds 50 connections", kind="fix", by="ann").id
    flaky = ann.save("Tests are flaky because they sleep", kind="problem", by="ann").id
    queue = ann.save("Celery is the job queue", kind="decision", by="ann").id
    plain_layout(a)
    commit(a, "base memories")
    git(a, "push", "-q", "origin", "main")
    b = clone(bare, tmp_path / "b")
    bob = reopen(b)

    # both clones work at once, each on its own copy of main
    ann.save("Keyword search engine: SQLite FTS5", kind="decision", by="ann")
    ann.update(pool, title="Connection pool size", by="ann")
    ann.delete(flaky, by="ann")
    commit(a, "ann's memories")
    bob.save("Release deploys go out on Tuesdays", kind="workflow", by="bob")
    bob.update(queue, content="Redis is the job queue", by="bob")
    bob.update(flaky, tags=["tests"], by="bob")  # bob has not seen the delete
    commit(b, "bob's memories")
    ann_segments = {p.name for p in (a / ".eventmem" / "journal").glob("*.jsonl")}
    bob_segments = {p.name for p in (b / ".eventmem" / "journal").glob("*.jsonl")}
    assert len(ann_segments | bob_segments) == 2  # one segment per clone on main

    git(a, "push", "-q", "origin", "main")
    git(b, "push", "-q", "origin", "main:bob-work")
    git(a, "fetch", "-q")
    expected = canonical(union(a, "main", "origin/bob-work").fold())

    # bob pulls ann's work into his running server
    pulled = subprocess.run(["git", "pull", "--no-edit", "origin", "main"], cwd=b, capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert_no_conflict(b)
    assert live_state(bob) == expected
    git(b, "push", "-q", "origin", "main")

    # ann merges the other way round (bob's work into hers), then pulls bob's merge on top
    merge(a, "origin/bob-work")
    assert live_state(ann) == expected
    pulled = subprocess.run(["git", "pull", "--no-edit", "origin", "main"], cwd=a, capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert_no_conflict(a)
    assert live_state(ann) == expected
    assert answers(ann) == answers(bob)
    assert flaky not in answers(ann)["memories"]
    ann.close()
    bob.close()


def test_the_same_memory_edited_on_two_branches_resolves_alike_in_either_order_and_audit_reports_it(
    project: Path,
) -> None:
    service = reopen(project)
    search = service.save("Keyword search uses SQLite FTS5", title="Keyword search", kind="decision", by="ann").id
    port = service.save("The staging database listens on port 5433", kind="fix", by="ann").id
    plain_layout(project)
    commit(project, "base memories")
    base = rev(project, "main")

    git(project, "checkout", "-q", "-b", "alice")
    service.update(search, title="Keyword search (alice)", tags=["search"], by="alice")
    service.update(port, content="The staging database listens on port 5434", by="alice")
    commit(project, "alice")
    git(project, "checkout", "-q", "-b", "bob", base)
    service.update(search, title="Keyword search (bob)", content="Keyword search uses FTS5 and bm25", by="bob")
    service.delete(port, reason="staging was shut down", by="bob")
    commit(project, "bob")
    expected = canonical(union(project, "alice", "bob").fold())

    git(project, "checkout", "-q", "main")
    merge(project, "alice")
    merge(project, "bob")
    assert live_state(service) == expected
    first = answers(service)
    git(project, "checkout", "-q", "-b", "other-order", base)
    merge(project, "bob")
    merge(project, "alice")
    assert live_state(service) == expected
    assert answers(service) == first

    memory = first["memories"][search]
    assert memory["title"] == "Keyword search (bob)"  # the later write of the field wins
    assert memory["tags"] == ["search"] and memory["content"] == "Keyword search uses FTS5 and bm25"
    assert port not in first["memories"]  # the delete wins over the concurrent edit

    def reported() -> set[tuple[str, str, str, str, str]]:
        edits = audit(ProjectPaths(project)).concurrent_edits
        return {(e.memory, e.field, e.wins.by, e.loses.by, e.evidence) for e in edits}

    found = {
        (search, "title", "bob", "alice", "journal+git"),
        (port, "status", "bob", "alice", "journal+git"),
    }
    assert reported() == found
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "replay.py"), "audit"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("concurrent edit of") == 2

    # an edit made after the merge has seen both sides: not a concurrent edit
    service.update(search, title="Keyword search", by="carol")
    assert reported() == found
    commit(project, "carol")
    assert reported() == found
    service.close()


def squash_merged_branch_keeps_writing(project: Path, *, attributes: bool) -> subprocess.CompletedProcess[str]:
    """Squash-merge a branch into main, keep writing on the branch, then merge main back into it."""
    service = reopen(project)
    service.save("The database connection pool holds 50 connections", by="ann")
    if not attributes:
        plain_layout(project)
    commit(project, "base")
    git(project, "checkout", "-q", "-b", "feature")
    service.save("Celery is the job queue", by="alice")
    commit(project, "feature, part 1")
    git(project, "checkout", "-q", "main")
    git(project, "merge", "-q", "--squash", "feature")
    commit(project, "feature, squashed")
    git(project, "checkout", "-q", "feature")
    service.save("Redis replaces Celery as the job queue", by="alice")
    commit(project, "feature, part 2")
    service.close()
    return subprocess.run(["git", "merge", "--no-edit", "main"], cwd=project, capture_output=True, text=True)


def test_a_squash_merged_branch_that_keeps_writing_merges_main_again_thanks_to_the_union_attribute(
    project: Path,
) -> None:
    result = squash_merged_branch_keeps_writing(project, attributes=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_no_conflict(project)
    fresh = reopen(project)
    assert canonical(fresh.project.derived.state) == canonical(union(project, "feature", "main").fold())
    assert len(fresh.stats()["by_status"]) == 1 and fresh.stats()["memories"] == 3
    fresh.close()


def test_without_the_union_attribute_that_squash_merge_flow_would_conflict(project: Path) -> None:
    # why `.eventmem/.gitattributes` says `merge=union`: the branch's segment is on two histories
    result = squash_merged_branch_keeps_writing(project, attributes=False)
    assert result.returncode != 0
    assert "CONFLICT" in result.stdout
