"""Readable history: ``eventmem diff`` (also as git's diff driver and textconv), ``pr-summary``,
``init --git-drivers``, and ``tools/replay.py`` ``at``, ``log``, ``diff`` and the audit's clock
checks, run as commands in real git repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_runner import eventmem as run_eventmem
from conftest import REPO, eventmem_command, git, reopen
from hypothesis import given, settings
from hypothesis import strategies as st
from test_property_merge_answers import event_sets

from eventmem.core.codec import encode_event
from eventmem.core.events import Event, MemoryExpired, MemoryPromoted, MemorySaved, MemoryUpdated
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.history import Entry, History, as_of, load, memory_log, read_revision, read_worktree
from eventmem.journal.project import ProjectPaths
from eventmem.review.audit import audit
from eventmem.review.journaldiff import diff_histories, diff_states
from eventmem.review.journaldiff_render import render_markdown

GOLDEN = REPO / "tests" / "golden" / "journal_v1.jsonl"


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def eventmem(cwd: Path, *args: str) -> str:
    result = run_eventmem(cwd, *args)  # (in process: see tests/cli_runner.py)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def replay(cwd: Path, *args: str) -> str:
    return run(cwd, sys.executable, str(REPO / "tools" / "replay.py"), *args).stdout


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def append(root: Path, *events: Event) -> None:
    service = reopen(root)
    service.project.append(list(events))
    service.close()


def two_revisions(project: Path) -> dict[str, str]:
    """A base commit, then one commit that adds, changes, deletes, expires and promotes memories."""
    service = reopen(project)
    ids = {
        "changed": service.save("Keyword search uses SQLite FTS5", title="Keyword search", kind="decision").id,
        "deleted": service.save("Tests sleep instead of waiting", kind="problem").id,
        "expired": service.save("Deploy freeze this week", kind="task", ttl_seconds=3600).id,
        "promoted": service.save("The pool holds 50 connections", kind="fix", ttl_seconds=86400).id,
    }
    ids["base"] = commit(project, "base")
    service.update(ids["changed"], title="Keyword search: FTS5", tags=["search", "sqlite"], by="alice")
    service.delete(ids["deleted"], reason="tests wait on files now", by="bob")
    ids["added"] = service.save("Redis is the job queue", kind="decision", by="alice").id
    service.project.append(
        [
            MemoryExpired(id=new_id(), ts=now_iso(), by="compaction", memory=ids["expired"]),
            MemoryPromoted(id=new_id(), ts=now_iso(), by="carol", memory=ids["promoted"], reason="recalled often"),
        ]
    )
    service.close()
    ids["head"] = commit(project, "memories")
    return ids


def test_diff_of_two_revisions_names_every_kind_of_memory_change_in_words_and_as_json(project: Path) -> None:
    ids = two_revisions(project)
    text = eventmem(project, "diff", ids["base"], ids["head"])
    assert "1 added, 1 changed, 1 promoted, 1 deleted, 1 expired" in text
    lines = {line.split()[1]: line for line in text.splitlines()[1:]}
    assert ids["added"] in lines["added"] and "alice" in lines["added"]
    assert 'title "Keyword search" → "Keyword search: FTS5"' in lines["changed"]
    assert "tags [] → [search, sqlite]" in lines["changed"]
    assert ids["deleted"] in lines["deleted"] and "(tests wait on files now)" in lines["deleted"]
    assert ids["expired"] in lines["expired"] and ids["promoted"] in lines["promoted"]

    data = json.loads(eventmem(project, "diff", ids["base"], ids["head"], "--json"))
    changes = {change["memory"]: change for change in data["memories"]}
    assert {memory: change["changes"] for memory, change in changes.items()} == {
        ids["added"]: ["added"],
        ids["changed"]: ["changed"],
        ids["promoted"]: ["promoted"],
        ids["deleted"]: ["deleted"],
        ids["expired"]: ["expired"],
    }
    assert {f["field"]: [f["old"], f["new"]] for f in changes[ids["changed"]]["fields"]} == {
        "title": ["Keyword search", "Keyword search: FTS5"],
        "tags": [[], ["search", "sqlite"]],
    }
    assert changes[ids["promoted"]]["reasons"] == ["recalled often"] and changes[ids["promoted"]]["by"] == ["carol"]
    assert data["events_added"] == 5 and data["events_removed"] == 0


def test_diff_defaults_to_head_against_the_working_tree_and_reads_journals_from_paths(project: Path) -> None:
    ids = two_revisions(project)
    assert "no memory changes; 0 new event(s)" in eventmem(project, "diff")
    append(project, MemoryUpdated(id=new_id(), ts=now_iso(), by="dan", memory=ids["added"], importance=0.9))
    text = eventmem(project, "diff")
    assert "1 changed" in text and "importance 0.5 → 0.9" in text and "dan" in text
    # two journals as folders: a copy of the golden journal against an empty folder
    empty, golden = project.parent / "empty", project.parent / "golden"
    empty.mkdir()
    golden.mkdir()
    (golden / "journal_v1.jsonl").write_bytes(GOLDEN.read_bytes())
    data = json.loads(eventmem(project, "diff", str(empty), str(golden), "--json"))
    assert sum("added" in change["changes"] for change in data["memories"]) == 5
    assert data["unknown_added"] == {"pinned": 1}  # a newer event type: counted, not lost


def test_git_diff_shows_memory_changes_through_the_diff_driver_and_textconv(project: Path) -> None:
    ids = two_revisions(project)
    driver = " ".join(eventmem_command("diff", "--git-driver"))
    attributes = project / ".eventmem" / ".gitattributes"
    attributes.write_text(attributes.read_text() + "journal/*.jsonl diff=eventmem\n")
    shown = git(project, "-c", f"diff.eventmem.command={driver}", "diff", ids["base"], ids["head"], "--", ".eventmem")
    assert "memory changes a/journal/" in shown and '"type":' not in shown
    assert "added" in shown and 'title "Keyword search" → "Keyword search: FTS5"' in shown

    # the same through GIT_EXTERNAL_DIFF, with no attribute at all
    attributes.unlink()
    env = dict(os.environ, GIT_EXTERNAL_DIFF=driver)
    shown = run(project, "git", "diff", ids["base"], ids["head"], "--", ".eventmem", env=env).stdout
    assert "~ changed" in shown and ids["changed"] in shown

    # textconv: one sentence per event, used by git log -p
    attributes.write_text("journal/*.jsonl diff=eventmem\n")
    textconv = " ".join(eventmem_command("diff", "--textconv"))
    log = git(project, "-c", f"diff.eventmem.textconv={textconv}", "log", "-p", "-1", "--", ".eventmem")
    assert f"+{now_iso()[:4]}" in log and f"deleted   {ids['deleted']}" in log and '{"type"' not in log


def test_init_with_git_drivers_installs_the_attributes_and_configures_the_driver(project: Path) -> None:
    data = json.loads(eventmem(project, "init", "--git-drivers", "--json"))
    attributes = (project / ".eventmem" / ".gitattributes").read_text()
    assert "journal/*.jsonl merge=union" in attributes and "journal/*.jsonl diff=eventmem" in attributes
    assert "archive/*.jsonl diff=eventmem" in attributes
    assert git(project, "config", "diff.eventmem.command").strip().endswith("diff --git-driver")
    assert data["git"]["git_config"]["diff.eventmem.textconv"].endswith("diff --textconv")
    eventmem(project, "init", "--git-drivers")  # again: nothing added twice
    assert (project / ".eventmem" / ".gitattributes").read_text() == attributes
    ids = two_revisions(project)
    shown = git(project, "diff", ids["base"], ids["head"])  # plain git diff now speaks memory
    assert "memory changes" in shown and "+ added" in shown


def test_pr_summary_prints_the_branch_memory_changes_as_markdown(project: Path) -> None:
    service = reopen(project)
    kept = service.save("Keyword search uses SQLite FTS5", title="Keyword search", kind="decision").id
    commit(project, "base")
    git(project, "checkout", "-q", "-b", "feature")
    service.update(kept, content="FTS5 | bm25 ranking", by="alice")
    added = service.save("Redis is the job queue", title="Job queue", kind="decision", by="alice").id
    service.close()
    commit(project, "feature")
    summary = eventmem(project, "pr-summary")
    assert summary.startswith("### Memory changes\n")
    assert "**Added**" in summary and f"- **Job queue** `{added}`" in summary and "_(alice)_" in summary
    assert "**Changed**" in summary and "FTS5 \\| bm25 ranking" in summary  # table-safe markdown
    assert "no memory changes" not in summary.lower()
    data = json.loads(eventmem(project, "pr-summary", "main", "--json"))
    assert data["fork_point"] == git(project, "rev-parse", "main").strip()
    assert [c["memory"] for c in data["diff"]["memories"]] == [added, kept]
    git(project, "checkout", "-q", "main")
    assert "No memory changes." in eventmem(project, "pr-summary", "main", "--head", "main")


def test_at_travels_to_a_time_an_event_or_a_revision(project: Path) -> None:
    service = reopen(project)
    memory = service.save("The pool holds 20 connections", title="Pool size", kind="fix").id
    first = commit(project, "first")
    service.update(memory, content="The pool holds 50 connections", by="alice")
    service.delete(service.save("A passing thought").id)
    service.close()
    commit(project, "second")
    history = read_worktree(ProjectPaths(project))
    saved, updated = sorted(
        (e for e in history.entries if getattr(e.event, "memory", "") == memory), key=lambda e: e.stamp
    )

    by_revision = json.loads(replay(project, "at", first, memory, "--json"))
    assert by_revision["memory"]["content"] == "The pool holds 20 connections"
    by_event = json.loads(replay(project, "at", saved.event.id, memory, "--json"))
    assert by_event["memory"]["content"] == "The pool holds 20 connections"
    assert by_event["as_of"].startswith(f"as of event {saved.event.id}")
    by_time = json.loads(replay(project, "at", updated.event.ts, memory, "--json"))
    assert by_time["memory"]["content"] == "The pool holds 50 connections"
    assert as_of(project, "2000-01-01").state.memories == {}
    listing = replay(project, "at", updated.event.ts, "--all")
    assert "Pool size" in listing and "A passing thought" not in listing
    assert "deleted" in replay(project, "at", "HEAD", "--all")


def test_log_tells_who_changed_what_and_when(project: Path) -> None:
    service = reopen(project)
    memory = service.save("Keyword search uses SQLite FTS5", title="Keyword search", kind="decision", by="ann").id
    service.update(memory, title="Keyword search: FTS5", by="alice")
    service.delete(memory, reason="superseded by the search doc", by="bob")
    service.close()
    text = replay(project, "log", memory)
    lines = text.splitlines()
    assert lines[0] == f"history of {memory}: 3 event(s)"
    assert "saved" in lines[1] and "by ann" in lines[1] and '[decision] "Keyword search"' in lines[1]
    assert 'title "Keyword search" → "Keyword search: FTS5"' in lines[2] and "by alice" in lines[2]
    assert 'status "live" → "deleted"' in lines[3] and "(superseded by the search doc)" in lines[3]
    data = json.loads(replay(project, "log", memory, "--json"))
    assert [event["by"] for event in data["events"]] == ["ann", "alice", "bob"]
    assert data["concurrent_edits"] == []


def test_replay_diff_and_memory_log_read_the_same_history_as_eventmem(project: Path) -> None:
    ids = two_revisions(project)
    assert replay(project, "diff", ids["base"], ids["head"]) == eventmem(project, "diff", ids["base"], ids["head"])
    log = memory_log(read_revision(project, ids["head"]), ids["changed"])
    assert [line.type for line in log] == ["saved", "updated"]
    assert log[1].changes["title"] == ["Keyword search", "Keyword search: FTS5"]


def test_a_project_in_a_subfolder_of_the_repository_reads_its_own_journal_at_a_revision(project: Path) -> None:
    sub = project / "services" / "api"
    sub.mkdir(parents=True)
    service = reopen(sub)
    service.save("The api service caches for 60 seconds")
    commit(project, "api memory")
    service.save("The api service retries twice")
    service.close()
    assert len(read_revision(sub, "HEAD").entries) == 1
    assert eventmem(sub, "diff").startswith("memory changes HEAD (") and "1 added" in eventmem(sub, "diff")


def test_audit_warns_of_events_stamped_in_the_future_or_far_from_their_id(project: Path) -> None:
    service = reopen(project)
    memory = service.save("The pool holds 50 connections").id
    service.close()
    future = MemoryUpdated(id=new_id(), ts="2099-01-01T00:00:00.000000Z", memory=memory, by="skewed", importance=0.9)
    old_id = "01JGZ8E0000000000000000009"  # minted in January 2025
    mismatch = MemorySaved(id=old_id, ts=now_iso(), memory=new_id(), content="written with a wrong clock")
    append(project, future, mismatch)
    report = audit(ProjectPaths(project))
    found = {(skew.event, skew.problem) for skew in report.clock_skew}
    assert found == {(future.id, "future"), (future.id, "id_mismatch"), (old_id, "id_mismatch")}
    assert report.ok and report.warnings == 3
    text = replay_audit(project)
    assert text.count("warning  clock skew") == 3 and "2099-01-01" in text


def replay_audit(project: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "replay.py"), "audit"], cwd=project, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_a_diff_names_memories_that_a_rewritten_history_no_longer_holds(project: Path) -> None:
    ids = two_revisions(project)
    back: Any = diff_histories(load(project, ids["head"]), load(project, ids["base"]))
    assert [c.changes for c in back.memories if c.memory == ids["added"]] == [["removed"]]
    assert back.events_removed == 5
    assert "Gone from the journal" in render_markdown(back)


def test_without_git_the_journal_alone_says_which_writes_had_seen_which(tmp_path: Path) -> None:
    # three segments in a folder that is not a git repository: the memory saved on main, edited on
    # two branches that each read main's save (an update needs the memory), but not each other
    plain = tmp_path / "plain"
    memory, other = new_id(), new_id()
    stamp = iter(f"2026-01-05T10:00:0{n}.000000Z" for n in range(10))
    main = [
        MemorySaved(id=new_id(), ts=next(stamp), memory=memory, title="Pool", content="pool of 20", by="ann"),
        MemorySaved(id=new_id(), ts=next(stamp), memory=other, content="the queue is celery", by="ann"),
    ]
    alice = [MemoryUpdated(id=new_id(), ts=next(stamp), memory=memory, title="Pool (alice)", by="alice")]
    bob = [
        MemoryUpdated(id=new_id(), ts=next(stamp), memory=memory, title="Pool (bob)", by="bob"),
        # bob then edits a memory that only main holds, *after* alice's edit: that proves nothing
        MemoryUpdated(id=new_id(), ts=next(stamp), memory=other, content="the queue is redis", by="bob"),
    ]
    for name, events in (("w0.main.jsonl", main), ("w1.alice.jsonl", alice), ("w2.bob.jsonl", bob)):
        path = ProjectPaths(plain).journal_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(encode_event(event) for event in events))
    edits = audit(ProjectPaths(plain), use_git=False).concurrent_edits
    assert [(e.memory, e.field, e.wins.by, e.loses.by, e.evidence) for e in edits] == [
        (memory, "title", "bob", "alice", "journal")
    ]
    assert edits[0].wins.value == "Pool (bob)" and edits[0].loses.value == "Pool (alice)"
    assert edits[0].loses.segment == "journal/w1.alice.jsonl"

    # alice later edits a memory whose only save is on bob's segment: she had read bob's segment
    # that far, so a later title of hers has seen bob's title
    late = new_id()
    with open(ProjectPaths(plain).journal_dir / "w2.bob.jsonl", "ab") as handle:
        handle.write(encode_event(MemorySaved(id=new_id(), ts=next(stamp), memory=late, content="x", by="bob")))
    with open(ProjectPaths(plain).journal_dir / "w1.alice.jsonl", "ab") as handle:
        handle.write(encode_event(MemoryUpdated(id=new_id(), ts=next(stamp), memory=late, title="y", by="alice")))
        handle.write(encode_event(MemoryUpdated(id=new_id(), ts=next(stamp), memory=memory, title="Pool", by="alice")))
    edits = audit(ProjectPaths(plain), use_git=False).concurrent_edits
    assert [(e.field, e.wins.by, e.loses.by) for e in edits] == [("title", "bob", "alice")]


@settings(max_examples=100, deadline=None)
@given(events=event_sets(), data=st.data())
def test_a_diff_folding_only_the_memories_that_differ_equals_comparing_the_full_folds(
    events: list[Any], data: st.DataObject
) -> None:
    # the diff folds only what differing events are about; any two subsets of a history must give
    # exactly what comparing the two complete states gives
    keep_old = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    keep_new = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    old = History(
        "old", [Entry(e, "journal/a.jsonl", n) for n, (e, k) in enumerate(zip(events, keep_old, strict=True)) if k]
    )
    new = History(
        "new", [Entry(e, "journal/b.jsonl", n) for n, (e, k) in enumerate(zip(events, keep_new, strict=True)) if k]
    )
    full = diff_states(old.fold(), new.fold(), old_name="old", new_name="new")
    fast = diff_histories(old, new)
    assert fast.links == full.links
    assert [(c.memory, c.changes, c.fields, c.title, c.summary) for c in fast.memories] == [
        (c.memory, c.changes, c.fields, c.title, c.summary) for c in full.memories
    ]


def test_every_history_of_a_memory_tells_its_events_in_the_order_they_happened(project: Path) -> None:
    """A strength update and the unlinks carry ``prev``; they are told when they happened, before a
    supersede made later, by ``replay log``, ``eventmem log`` and the REST history alike."""
    service = reopen(project)
    first = service.save("Sessions are kept in Redis.", title="Session store").id
    other = service.save("Redis runs as a managed service.").id
    service.link(first, other, "depends_on", strength=0.5)
    service.update(first, title="Session store: Redis")  # carries prev
    service.link(first, other, "depends_on", strength=0.8)  # the same link again: an update with prev
    service.delete(other, reason="we left the managed service")  # unlinks carry prev
    service.supersede(first, "Sessions are kept in PostgreSQL.", reason="one database fewer")
    service.close()

    told = json.loads(replay(project, "log", first, "--json"))["events"]
    types = [line["type"] for line in told]
    assert types[:5] == ["saved", "linked", "updated", "linked", "unlinked"], types
    assert [line["ts"] for line in told] == sorted(line["ts"] for line in told)
    logged = json.loads(eventmem(project, "log", first, "--json"))
    assert [event["id"] for event in logged] == [line["event"] for line in told]
    text = eventmem(project, "log", first)
    assert "prev" not in text, text


def test_replay_log_shows_the_words_that_changed_at_the_end_of_a_long_text(project: Path) -> None:
    service = reopen(project)
    text = "The export job writes one file per day into the shared bucket for the customer"
    memory = service.save(text).id
    service.update(memory, content=text + "s")
    service.close()
    lines = replay(project, "log", memory).splitlines()
    assert "[-customer-] {+customers+}" in lines[2], lines


def test_replay_log_takes_an_id_in_any_case_or_a_unique_prefix(project: Path) -> None:
    service = reopen(project)
    memory = service.save("Release notes are written by the on-call engineer.").id
    service.close()
    whole = json.loads(replay(project, "log", memory, "--json"))
    assert json.loads(replay(project, "log", memory.lower(), "--json")) == whole
    assert json.loads(replay(project, "log", memory[:8].lower(), "--json")) == whole
