"""The memory lifecycle through a real MCP client (in-process): typed, scoped memories that expire
unless they prove useful, promotion, access counts kept out of git, dedup, relationships, supersede,
structured search, the session-start bundle, and compaction (expiry and archive).

Time is injected, never waited for: a memory that "expired long ago" is written straight into the
journal with an old timestamp, and compaction is run with an explicit ``now``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_runner import eventmem
from conftest import ago, global_dir, journal_events, old_memory, reopen, write_events
from mcp import Client
from mcp.types import Implementation
from mcp_client import call, call_error
from mcp_client import connect as connect_client

from eventmem.core.events import LinkAdded, LinkRemoved, MemoryDeleted, MemoryExpired, MemorySaved
from eventmem.core.ids import new_id, to_iso
from eventmem.journal.project import ProjectPaths

pytestmark = pytest.mark.anyio

CLIENT = Implementation(name="lifecycle-agent", version="1.0")
LIFECYCLE_TOOLS = {
    "store_memory",
    "recall_memories",
    "search_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "create_relationship",
    "get_related_memories",
    "get_context",
    "promote_memory",
    "supersede",
}


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction runs when a test says so (the scheduler has its own test, over stdio)."""
    monkeypatch.setenv("EVENTMEM_COMPACT_INTERVAL_SECONDS", "0")


def connect(project: Path, name: str = CLIENT.name) -> AbstractAsyncContextManager[Client]:
    """A client named ``name`` of a server offering every tool."""
    return connect_client(project, client_info=Implementation(name=name, version="1.0"), tools="all")


async def store(client: Client, content: str, **fields: Any) -> str:
    out = await call(client, "store_memory", content=content, **fields)
    memory_id: str = out["memory"]["id"]
    return memory_id


def compact_twice(project: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reports of two compactions in a row, by a fresh service on the project."""
    service = reopen(project)
    try:
        return service.compact(), service.compact()
    finally:
        service.close()


def lines_of(root: Path) -> list[bytes]:
    """Every line of every segment (journal and archive)."""
    return [
        line
        for folder in ("journal", "archive")
        for path in sorted((root / ".eventmem" / folder).glob("*.jsonl"))
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]


def ids(results: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in results]


# -- the memory model -----------------------------------------------------------------------------


async def test_every_lifecycle_tool_is_listed_with_a_description_and_annotations(project: Path) -> None:
    async with connect(project) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= LIFECYCLE_TOOLS
    for name in LIFECYCLE_TOOLS:
        assert tools[name].description and tools[name].annotations is not None, name
    for name in ("search_memories", "get_related_memories", "get_context"):
        assert tools[name].annotations.read_only_hint is True, name  # type: ignore[union-attr]
    assert tools["search_memories"].input_schema.get("required", []) == []
    assert tools["create_relationship"].input_schema["required"] == ["source_id", "target_id"]


async def test_a_memory_has_type_scope_title_content_summary_tags_importance_ttl_agent_times_and_access_count(
    project: Path,
) -> None:
    async with connect(project) as client:
        out = await call(
            client,
            "store_memory",
            content="Retry the payment webhook with exponential backoff, at most five times.",
            type="solution",
            title="Webhook retries",
            summary="Backoff, five tries",
            tags=["payments", "Webhooks"],
            importance=0.6,
            ttl_seconds=86400,
        )
    memory = out["memory"]
    assert memory["kind"] == "solution" and memory["scope"] == "project"
    assert memory["title"] == "Webhook retries" and memory["summary"] == "Backoff, five tries"
    assert memory["tags"] == ["payments", "webhooks"]
    assert memory["importance"] == 0.6 and memory["ttl_seconds"] == 86400
    assert memory["created_by"] == CLIENT.name
    assert memory["created_at"] == memory["updated_at"]
    created = datetime.fromisoformat(memory["created_at"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(memory["expires_at"].replace("Z", "+00:00"))
    assert expires - created == timedelta(seconds=86400)
    assert memory["access_count"] == 0 and memory["promoted"] is False
    assert memory["project"] == project.name


@pytest.mark.parametrize(
    "kind",
    ["solution", "problem", "code_pattern", "fix", "error", "workflow", "decision", "general", "architecture"],
)
async def test_every_memory_type_is_accepted_and_filterable(project: Path, kind: str) -> None:
    async with connect(project) as client:
        memory_id = await store(client, f"A {kind} worth keeping about the parser.", type=kind)
        await store(client, "Something else entirely about the deploy.", type="general" if kind != "general" else "fix")
        listed = await call(client, "search_memories", type=kind)
    assert ids(listed["results"]) == [memory_id]


async def test_global_memories_are_searched_alongside_the_projects_and_marked_as_such(project: Path) -> None:
    async with connect(project) as client:
        local = await store(client, "Format Python with ruff format in this project.", tags=["style"])
        shared = await store(client, "I always format Python with ruff format.", tags=["style"], scope="global")
        recalled = await call(client, "recall_memories", query="format python ruff", limit=10)
        searched = await call(client, "search_memories", query="format python ruff")
        listed = await call(client, "search_memories", tags=["style"])
        got = await call(client, "get_memory", memory_id=shared)
    for results in (recalled["results"], searched["results"], listed["results"]):
        scopes = {r["id"]: r["scope"] for r in results}
        assert scopes == {local: "project", shared: "global"}
    assert got["memory"]["scope"] == "global"
    assert got["memory"]["project"] == project.name  # the project it was saved from
    assert shared in {e.get("memory") for e in journal_events(global_dir(project))}


# -- TTL and expiry -------------------------------------------------------------------------------


async def test_an_expired_memory_is_never_returned_even_before_compaction_writes_it(project: Path) -> None:
    gone = old_memory("The staging database is read-only during the migration.", days=1, tags=["staging"])
    write_events(project, [gone])
    async with connect(project) as client:
        live = await store(client, "The staging database accepts writes again.", tags=["staging"])
        recalled = await call(client, "recall_memories", query="staging database read-only migration", limit=10)
        searched = await call(client, "search_memories", query="staging database read-only", limit=10)
        listed = await call(client, "search_memories", tags=["staging"])
        context = await call(client, "get_context")
        error = await call_error(client, "get_memory", memory_id=gone.memory)
        update_error = await call_error(client, "update_memory", memory_id=gone.memory, importance=0.9)
        link_error = await call_error(client, "create_relationship", source_id=live, target_id=gone.memory)
    for results in (recalled["results"], searched["results"], listed["results"]):
        assert ids(results) == [live]
    assert gone.memory not in context["text"]
    assert "expired" in error and "expired" in update_error and "expired" in link_error


async def test_an_expired_memory_is_not_reached_through_its_links(project: Path) -> None:
    gone = old_memory("Use the v1 billing API.", days=1)
    write_events(project, [gone])
    async with connect(project) as client:
        live = await store(client, "Billing goes through the v2 API.")
        write_events(
            project,
            [LinkAdded(id=new_id(), ts=ago(days=1), link=new_id(), source=live, target=gone.memory)],
        )
        related = await call(client, "get_related_memories", memory_id=live, depth=2)
    assert related["related"] == []


async def test_compaction_writes_one_expired_event_per_memory_past_its_ttl(project: Path) -> None:
    due = old_memory("Temporary: CI is flaky today.", days=1, ttl=600)
    fresh = old_memory("Temporary: the release freeze lasts a week.", days=1, ttl=30 * 86400)
    forever = old_memory("We deploy on Tuesdays.", days=1, ttl=None)
    write_events(project, [due, fresh, forever])
    report, again = compact_twice(project)
    assert report["expired"] == [due.memory]
    assert again["expired"] == []
    expired = [e for e in journal_events(project) if e["type"] == "expired"]
    assert [e["memory"] for e in expired] == [due.memory]
    assert expired[0]["expires_at"].startswith(ago(days=1)[:10])
    async with connect(project) as client:
        listed = await call(client, "search_memories")
    assert set(ids(listed["results"])) == {fresh.memory, forever.memory}


async def test_two_processes_compacting_at_once_write_each_expiry_once(project: Path) -> None:
    memories = [old_memory(f"Temporary note {i} about the build cache.", days=1, ttl=60) for i in range(5)]
    write_events(project, memories)
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "eventmem", "compact", "--json", "--root", str(project)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in range(3)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    expired = [e["memory"] for e in journal_events(project) if e["type"] == "expired"]
    assert sorted(expired) == sorted(m.memory for m in memories)
    assert sorted(m for r in reports for m in r["expired"]) == sorted(expired)


def test_two_processes_that_both_write_an_expiry_still_fold_to_one_consistent_state(project: Path) -> None:
    from eventmem.service.lifecycle import plan_expiry

    memory = old_memory("Temporary: the mirror is down.", days=1, ttl=60)
    write_events(project, [memory])
    first, second = reopen(project), reopen(project)
    try:
        now = datetime.now(UTC).timestamp()
        # both decide before either writes (the race the lock normally prevents), then both write
        plans = []
        for svc in (first, second):
            with svc.project.read() as view:
                plans.append(plan_expiry(view, now))
        assert all(len(plan) == 1 for plan in plans)
        first.project.append(list(plans[0]))
        second.project.append(list(plans[1]))
        for svc in (first, second):
            svc.catch_up()
            record = svc.project.derived.state.memories[memory.memory]
            assert record.status == "expired"
        assert first.project.derived.state.memories[memory.memory].expired_stamp == (
            second.project.derived.state.memories[memory.memory].expired_stamp
        )
    finally:
        first.close()
        second.close()
    rebuilt = reopen(project)
    try:
        rebuilt.project.rebuild()
        assert rebuilt.project.derived.state.memories[memory.memory].status == "expired"
        assert rebuilt.search() == []
    finally:
        rebuilt.close()


# -- access counts and promotion ------------------------------------------------------------------


async def test_reads_count_accesses_in_a_local_gitignored_stream_and_never_touch_the_journal(
    project: Path,
) -> None:
    async with connect(project) as client:
        memory_id = await store(client, "The API paginates with opaque cursors.", ttl_seconds=3600)
        journal = {p: p.read_bytes() for p in (project / ".eventmem" / "journal").glob("*.jsonl")}
        await call(client, "get_memory", memory_id=memory_id)
        await call(client, "recall_memories", query="api cursor pagination")
        await call(client, "search_memories", query="opaque cursors")
        got = await call(client, "get_memory", memory_id=memory_id)
        after = {p: p.read_bytes() for p in (project / ".eventmem" / "journal").glob("*.jsonl")}
    assert after == journal
    assert got["memory"]["access_count"] == 3  # the view is taken before this read is counted
    usage = project / ".eventmem" / "local" / "usage.jsonl"
    accesses = [json.loads(line) for line in usage.read_text(encoding="utf-8").splitlines()]
    assert [a["memory"] for a in accesses] == [memory_id] * 4
    ignored = subprocess.run(["git", "check-ignore", "-q", str(usage)], cwd=project, check=False)
    assert ignored.returncode == 0, "the usage stream must be gitignored"


async def test_a_call_appends_all_its_accesses_in_one_write(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import eventmem.journal.usage

    async with connect(project) as client:
        for i in range(4):
            await store(client, f"Logging note {i}: structured logs go to stdout as JSON.")
        writes: list[bytes] = []
        real_write = eventmem.journal.usage.os.write

        def counting_write(fd: int, data: bytes) -> int:
            if bytes(data).startswith(b'{"memory":'):  # (os.write is global: other files are written too)
                writes.append(bytes(data))
            return real_write(fd, data)

        monkeypatch.setattr(eventmem.journal.usage.os, "write", counting_write)
        out = await call(client, "recall_memories", query="structured logs stdout json", limit=4)
    assert len(out["results"]) == 4
    assert len(writes) == 1 and writes[0].count(b"\n") == 4


async def test_each_access_extends_the_expiry_by_half_the_original_ttl(project: Path) -> None:
    async with connect(project) as client:
        memory_id = await store(client, "Feature flag rollout is at 10%.", ttl_seconds=1000, importance=0.3)
        seen = [(await call(client, "get_memory", memory_id=memory_id))["memory"] for _ in range(3)]
    expiries = [datetime.fromisoformat(m["expires_at"].replace("Z", "+00:00")) for m in seen]
    assert [m["access_count"] for m in seen] == [0, 1, 2]
    assert expiries[1] - expiries[0] == timedelta(seconds=500)
    assert expiries[2] - expiries[1] == timedelta(seconds=500)
    assert all(m["ttl_seconds"] == 1000 for m in seen)


async def test_an_access_keeps_a_memory_from_expiring_at_its_original_time(project: Path) -> None:
    memory = old_memory("Temporary: use the backup registry.", days=0, ttl=3600)
    write_events(project, [memory])
    async with connect(project) as client:
        await call(client, "get_memory", memory_id=memory.memory)  # +1800 s
    service = reopen(project)
    try:
        now = datetime.now(UTC).timestamp()
        assert service.compact(now=now + 3600 + 60, dry_run=True)["would_expire"] == []
        assert service.compact(now=now + 3600 + 1800 + 60, dry_run=True)["would_expire"] == [memory.memory]
    finally:
        service.close()


async def test_a_memory_saved_with_importance_at_least_0_8_is_promoted_to_long_term(project: Path) -> None:
    async with connect(project) as client:
        important = await call(
            client, "store_memory", content="Never force-push main.", importance=0.8, ttl_seconds=600
        )
        ordinary = await call(client, "store_memory", content="Lunch is at noon.", importance=0.79, ttl_seconds=600)
    assert important["memory"]["promoted"] is True
    assert important["memory"]["ttl_seconds"] is None and important["memory"]["expires_at"] is None
    assert ordinary["memory"]["promoted"] is False and ordinary["memory"]["expires_at"] is not None
    promoted = [e for e in journal_events(project) if e["type"] == "promoted"]
    assert [e["memory"] for e in promoted] == [important["memory"]["id"]]
    assert promoted[0]["by"] == CLIENT.name and "importance" in promoted[0]["reason"]


async def test_a_memory_accessed_five_times_is_promoted_once(project: Path) -> None:
    async with connect(project) as client:
        memory_id = await store(client, "Run migrations with `make migrate`.", ttl_seconds=600)
        views = [(await call(client, "get_memory", memory_id=memory_id))["memory"] for _ in range(7)]
    assert [v["promoted"] for v in views] == [False] * 5 + [True] * 2
    assert views[-1]["ttl_seconds"] is None and views[-1]["expires_at"] is None
    promoted = [e for e in journal_events(project) if e["type"] == "promoted"]
    assert [e["memory"] for e in promoted] == [memory_id]
    assert "accessed 5 times" in promoted[0]["reason"]


async def test_two_servers_sharing_a_clone_promote_a_much_used_memory_once(project: Path) -> None:
    async with connect(project, "agent-one") as one, connect(project, "agent-two") as two:
        memory_id = await store(one, "The cache key includes the tenant id.", ttl_seconds=600)
        for i in range(8):
            await call(one if i % 2 else two, "get_memory", memory_id=memory_id)
        got = await call(one, "get_memory", memory_id=memory_id)
    assert got["memory"]["promoted"] is True
    assert [e["memory"] for e in journal_events(project) if e["type"] == "promoted"] == [memory_id]


async def test_promotion_thresholds_are_configurable(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMEM_PROMOTE_IMPORTANCE", "0.95")
    monkeypatch.setenv("EVENTMEM_PROMOTE_ACCESSES", "2")
    async with connect(project) as client:
        high = await call(client, "store_memory", content="Rotate keys monthly.", importance=0.9, ttl_seconds=60)
        used = high["memory"]["id"]
        await call(client, "get_memory", memory_id=used)
        once = await call(client, "get_memory", memory_id=used)
        twice = await call(client, "get_memory", memory_id=used)
    assert high["memory"]["promoted"] is False
    assert once["memory"]["promoted"] is False and twice["memory"]["promoted"] is True


async def test_promote_memory_makes_a_memory_long_term_by_hand(project: Path) -> None:
    async with connect(project) as client:
        memory_id = await store(client, "The on-call rota lives in the wiki.", ttl_seconds=600)
        out = await call(client, "promote_memory", memory_id=memory_id, reason="everyone asks")
        again = await call(client, "promote_memory", memory_id=memory_id)
    assert out["promoted"] is True and out["memory"]["expires_at"] is None and out["memory"]["promoted"] is True
    assert again["promoted"] is False
    promoted = [e for e in journal_events(project) if e["type"] == "promoted"]
    assert [(e["memory"], e["reason"]) for e in promoted] == [(memory_id, "everyone asks")]


# -- dedup ----------------------------------------------------------------------------------------


async def test_saving_text_that_normalises_to_a_live_memorys_returns_it_and_counts_an_access(project: Path) -> None:
    async with connect(project) as client:
        first = await call(client, "store_memory", content="Use tabs for indentation.", type="convention")
        again = await call(client, "store_memory", content="  use TABS for\nindentation ", type="decision")
        other = await call(client, "store_memory", content="Use spaces for indentation.")
        got = await call(client, "get_memory", memory_id=first["memory"]["id"])
    assert again["deduplicated"] is True
    assert again["memory"]["id"] == first["memory"]["id"] and again["memory"]["kind"] == "convention"
    assert "deduplicated" not in first and "deduplicated" not in other
    assert other["memory"]["id"] != first["memory"]["id"]
    assert got["memory"]["access_count"] == 1
    assert [e["type"] for e in journal_events(project)] == ["saved", "saved"]


async def test_text_of_a_deleted_memory_is_saved_anew(project: Path) -> None:
    async with connect(project) as client:
        first = await store(client, "The build uses make.")
        await call(client, "delete_memory", memory_id=first)
        again = await call(client, "store_memory", content="The build uses make.")
    assert again["memory"]["id"] != first and "deduplicated" not in again


# -- relationships --------------------------------------------------------------------------------


async def test_create_relationship_records_a_typed_link_with_strength_and_context(project: Path) -> None:
    async with connect(project) as client:
        problem = await store(client, "Login fails after the session cookie rename.", type="problem")
        fix = await store(client, "Read both cookie names during the transition.", type="solution")
        out = await call(
            client,
            "create_relationship",
            source_id=fix,
            target_id=problem,
            relation="SOLVES",
            strength=0.9,
            context="shipped in 2.4.1",
        )
    link = out["relationship"]
    assert out["created"] is True
    assert (link["source"], link["target"], link["relation"]) == (fix, problem, "solves")
    assert link["strength"] == 0.9 and link["context"] == "shipped in 2.4.1"
    assert link["created_by"] == CLIENT.name
    linked = [e for e in journal_events(project) if e["type"] == "linked"]
    assert [(e["source"], e["target"], e["relation"], e["strength"]) for e in linked] == [(fix, problem, "solves", 0.9)]


@pytest.mark.parametrize("relation", ["CAUSES", "related_to", "Depends_On", "supersedes", "fixed_by", "blocks-release"])
async def test_well_known_and_free_form_relations_are_accepted(project: Path, relation: str) -> None:
    async with connect(project) as client:
        a = await store(client, "Memory A about the queue.")
        b = await store(client, "Memory B about the worker.")
        out = await call(client, "create_relationship", source_id=a, target_id=b, relation=relation)
    assert out["relationship"]["relation"] == relation.lower().replace("-", "_")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"relation": "solves!"}, "relation"),
        ({"relation": "9lives"}, "relation"),
        ({"strength": 1.5}, "strength"),
        ({"target_id": "01JZZZZZZZZZZZZZZZZZZZZZZZ"}, "no memory with id"),
        ({"target_id": "{source}"}, "itself"),
    ],
)
async def test_a_bad_relationship_is_refused_clearly_and_writes_nothing(
    project: Path, arguments: dict[str, Any], message: str
) -> None:
    async with connect(project) as client:
        a = await store(client, "Memory A about the queue.")
        b = await store(client, "Memory B about the worker.")
        before = journal_events(project)
        args = {"source_id": a, "target_id": b, **arguments}
        args = {k: a if v == "{source}" else v for k, v in args.items()}
        error = await call_error(client, "create_relationship", **args)
    assert message in error
    assert journal_events(project) == before


async def test_creating_the_same_relationship_again_updates_it_instead_of_duplicating(project: Path) -> None:
    async with connect(project) as client:
        a = await store(client, "The importer times out on large files.", type="error")
        b = await store(client, "Stream the file instead of loading it.", type="fix")
        first = await call(client, "create_relationship", source_id=b, target_id=a, relation="solves", strength=0.5)
        same = await call(client, "create_relationship", source_id=b, target_id=a, relation="solves", strength=0.5)
        stronger = await call(client, "create_relationship", source_id=b, target_id=a, relation="solves", strength=1)
        related = await call(client, "get_related_memories", memory_id=a)
    assert first["created"] is True and same["created"] is False and stronger["created"] is False
    assert first["relationship"]["id"] == same["relationship"]["id"] == stronger["relationship"]["id"]
    assert [r["strength"] for r in related["related"]] == [1.0]
    assert len([e for e in journal_events(project) if e["type"] == "linked"]) == 2


async def chain(client: Client, n: int) -> list[str]:
    """n memories linked m0 -depends_on-> m1 -depends_on-> ... ."""
    memories = [await store(client, f"Chain link number {i} of the service graph.") for i in range(n)]
    for a, b in itertools.pairwise(memories):
        await call(client, "create_relationship", source_id=a, target_id=b, relation="depends_on")
    return memories


async def test_get_related_memories_follows_links_to_the_given_depth(project: Path) -> None:
    async with connect(project) as client:
        m = await chain(client, 7)
        by_depth = [
            [
                (r["id"], r["depth"])
                for r in (await call(client, "get_related_memories", memory_id=m[0], depth=d))["related"]
            ]
            for d in (1, 2, 3, 5)
        ]
        middle = await call(client, "get_related_memories", memory_id=m[3], depth=1)
        error = await call_error(client, "get_related_memories", memory_id=m[0], depth=6)
    assert by_depth[0] == [(m[1], 1)]
    assert by_depth[1] == [(m[1], 1), (m[2], 2)]
    assert by_depth[2] == [(m[1], 1), (m[2], 2), (m[3], 3)]
    assert by_depth[3] == [(m[i], i) for i in range(1, 6)]
    assert {(r["id"], r["direction"]) for r in middle["related"]} == {(m[4], "out"), (m[2], "in")}
    first = middle["related"][0]
    assert {"relation", "strength", "context", "link", "from", "kind", "title", "summary"} <= first.keys()
    assert "depth" in error


async def test_get_related_memories_filters_by_relation_and_direction(project: Path) -> None:
    async with connect(project) as client:
        error = await store(client, "Deploy fails: the disk is full.", type="error")
        cause = await store(client, "Old build artifacts are never cleaned.", type="problem")
        fix = await store(client, "A nightly job prunes artifacts older than a week.", type="fix")
        note = await store(client, "Disk alerts fire at 90%.", type="general")
        await call(client, "create_relationship", source_id=cause, target_id=error, relation="causes")
        await call(client, "create_relationship", source_id=fix, target_id=cause, relation="solves")
        await call(client, "create_relationship", source_id=error, target_id=note, relation="related_to")
        causes = await call(client, "get_related_memories", memory_id=error, relations=["CAUSES"])
        both = await call(client, "get_related_memories", memory_id=error, depth=2, relations="causes,solves")
        outgoing = await call(client, "get_related_memories", memory_id=error, depth=3, direction="out")
        incoming = await call(client, "get_related_memories", memory_id=error, depth=3, direction="in")
    assert ids(causes["related"]) == [cause]
    assert ids(both["related"]) == [cause, fix]
    assert ids(outgoing["related"]) == [note]
    assert ids(incoming["related"]) == [cause, fix]


async def test_deleting_a_memory_removes_its_links_as_unlinked_events_in_the_same_append(project: Path) -> None:
    async with connect(project) as client:
        a = await store(client, "The queue is RabbitMQ.")
        b = await store(client, "Consumers ack after processing.")
        c = await store(client, "Dead letters go to the dlq exchange.")
        ab = (await call(client, "create_relationship", source_id=a, target_id=b))["relationship"]["id"]
        ca = (await call(client, "create_relationship", source_id=c, target_id=a))["relationship"]["id"]
        await call(client, "create_relationship", source_id=b, target_id=c)
        segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
        size = segment.stat().st_size
        await call(client, "delete_memory", memory_id=a, reason="moved to Kafka")
        from_b = await call(client, "get_related_memories", memory_id=b)
    appended = [json.loads(line) for line in segment.read_bytes()[size:].splitlines()]
    assert [e["type"] for e in appended] == ["deleted", "unlinked", "unlinked"]
    assert {e["link"] for e in appended[1:]} == {ab, ca}
    assert appended[0]["ts"] == appended[1]["ts"] == appended[2]["ts"]
    assert ids(from_b["related"]) == [c]


# -- supersede ------------------------------------------------------------------------------------


async def test_supersede_replaces_a_wrong_memory_keeping_its_history_and_a_supersedes_link(project: Path) -> None:
    async with connect(project) as client:
        old = await store(
            client, "The API rate limit is 100 requests per minute.", type="decision", tags=["api"], importance=0.7
        )
        out = await call(
            client,
            "supersede",
            memory_id=old,
            content="The API rate limit is 600 requests per minute since March.",
            reason="the limit was raised",
        )
        new = out["memory"]["id"]
        recalled = await call(client, "recall_memories", query="API rate limit requests per minute", limit=10)
        searched = await call(client, "search_memories", tags=["api"])
        context = await call(client, "get_context")
        with_old = await call(client, "search_memories", tags=["api"], include_superseded=True)
        got_old = await call(client, "get_memory", memory_id=old)
        related = await call(client, "get_related_memories", memory_id=new, include_superseded=True)
        hidden = await call(client, "get_related_memories", memory_id=new)
    assert out["superseded"] == old
    assert out["relationship"]["relation"] == "supersedes"
    assert (out["relationship"]["source"], out["relationship"]["target"]) == (new, old)
    assert out["memory"]["kind"] == "decision" and out["memory"]["tags"] == ["api"]
    assert out["memory"]["importance"] == 0.7
    assert ids(recalled["results"]) == [new]
    assert ids(searched["results"]) == [new]
    assert old not in context["text"] and new in context["text"]
    assert set(ids(with_old["results"])) == {old, new}
    assert got_old["memory"]["superseded"] is True and got_old["memory"]["status"] == "live"
    assert [(r["id"], r["relation"]) for r in related["related"]] == [(old, "supersedes")]
    assert hidden["related"] == []
    written = journal_events(project)[-2:]
    assert [e["type"] for e in written] == ["saved", "linked"]
    assert written[1]["context"] == "the limit was raised"


# -- structured search ----------------------------------------------------------------------------


async def seed_search(client: Client, project: Path) -> dict[str, str]:
    old = MemorySaved(
        id=new_id(),
        ts="2025-01-15T10:00:00.000000Z",
        memory=new_id(),
        kind="decision",
        content="Postgres is the primary database.",
        tags=("db",),
        importance=0.9,
    )
    write_events(project, [old])
    return {
        "old": old.memory,
        "fix": await store(
            client, "Fixed the flaky db connection pool test.", type="fix", tags=["db", "tests"], importance=0.4
        ),
        "error": await store(
            client, "Deadlock when two migrations run at once.", type="error", tags=["db"], importance=0.7
        ),
        "style": await store(client, "Prefer early returns.", type="convention", tags=["style"], importance=0.2),
        "global": await store(
            client,
            "I keep db credentials in the keychain.",
            type="workflow",
            tags=["db"],
            importance=0.6,
            scope="global",
        ),
    }


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"tags": ["db"]}, ["old", "error", "global", "fix"]),
        ({"tags": "db,tests"}, ["fix"]),
        ({"type": "error"}, ["error"]),
        ({"type": ["fix", "convention"]}, ["fix", "style"]),
        ({"min_importance": 0.6}, ["old", "error", "global"]),
        ({"max_importance": 0.5}, ["fix", "style"]),
        ({"min_importance": 0.5, "max_importance": 0.8}, ["error", "global"]),
        ({"scope": "global"}, ["global"]),
        ({"scope": "project", "tags": ["db"]}, ["old", "error", "fix"]),
        ({"created_before": "2026-01-01"}, ["old"]),
        ({"created_after": "2026-01-01", "tags": ["db"]}, ["error", "global", "fix"]),
        ({"updated_before": "2025-06-01T00:00:00Z"}, ["old"]),
        ({"project": "{project}", "scope": "global"}, ["global"]),
        ({"project": "some-other-project"}, []),
    ],
)
async def test_search_memories_filters_without_a_query_list_by_importance(
    project: Path, filters: dict[str, Any], expected: list[str]
) -> None:
    async with connect(project) as client:
        seeded = await seed_search(client, project)
        args = {k: project.name if v == "{project}" else v for k, v in filters.items()}
        out = await call(client, "search_memories", **args)
    assert ids(out["results"]) == [seeded[name] for name in expected]


async def test_a_project_name_nothing_is_of_answers_nothing_and_says_so(project: Path) -> None:
    async with connect(project) as client:
        seeded = await seed_search(client, project)
        typo = await call(client, "recall_memories", query="deadlock migrations", project="bakcend")
        listed = await call(client, "search_memories", project="bakcend")
        own = await call(client, "recall_memories", query="deadlock migrations", project=project.name.upper())
        misread = await call(client, "search_memories", project="Global")
    assert typo["results"] == [] and listed["results"] == []
    for answer in (typo, listed):
        assert any("no memory here is of a project called 'bakcend' (this project is" in w for w in answer["warnings"])
    assert seeded["error"] in ids(own["results"]) and "warnings" not in own
    assert misread["results"] == [] and any("asked with scope 'global'" in w for w in misread["warnings"])


async def test_search_memories_without_a_query_can_list_newest_first(project: Path) -> None:
    async with connect(project) as client:
        seeded = await seed_search(client, project)
        out = await call(client, "search_memories", sort="recent", limit=3)
        error = await call_error(client, "search_memories", sort="relevance")
    assert ids(out["results"]) == [seeded["global"], seeded["style"], seeded["error"]]
    assert "needs a query" in error


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
async def test_search_memories_with_a_query_ranks_by_keywords_and_vectors(project: Path, mode: str) -> None:
    async with connect(project) as client:
        seeded = await seed_search(client, project)
        out = await call(client, "search_memories", query="deadlock migrations db", mode=mode, limit=2)
        filtered = await call(client, "search_memories", query="deadlock migrations db", mode=mode, type="fix")
    assert out["results"][0]["id"] == seeded["error"]
    assert ids(filtered["results"]) == [seeded["fix"]]
    if mode == "keyword":
        assert out["results"][0]["keyword_score"] > 0 and out["results"][0]["vector_score"] == 0
    if mode == "vector":
        assert out["results"][0]["vector_score"] > 0 and out["results"][0]["keyword_score"] == 0


# -- ranking --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("boost", "first"), [("0", "plain"), ("1.0", "important")])
async def test_ranking_adds_a_configurable_importance_boost(
    project: Path, monkeypatch: pytest.MonkeyPatch, boost: str, first: str
) -> None:
    monkeypatch.setenv("EVENTMEM_IMPORTANCE_BOOST", boost)
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", "0")
    async with connect(project) as client:
        plain = await store(client, "Redis cache keys expire after ten minutes.", importance=0.5)
        important = await store(client, "Redis cache keys expire after ten minutes in staging.", importance=1.0)
        out = await call(client, "recall_memories", query="redis cache keys expire after ten minutes", limit=2)
    assert out["results"][0]["id"] == {"plain": plain, "important": important}[first]


@pytest.mark.parametrize(("boost", "first"), [("0", "old"), ("1.0", "new")])
async def test_ranking_adds_a_configurable_recency_boost(
    project: Path, monkeypatch: pytest.MonkeyPatch, boost: str, first: str
) -> None:
    monkeypatch.setenv("EVENTMEM_RECENCY_BOOST", boost)
    old = MemorySaved(
        id=new_id(), ts=ago(days=400), memory=new_id(), content="Redis cache keys expire after ten minutes."
    )
    write_events(project, [old])
    async with connect(project) as client:
        new = await store(client, "Redis cache keys expire after ten minutes in staging.")
        out = await call(client, "recall_memories", query="redis cache keys expire after ten minutes", limit=2)
    assert out["results"][0]["id"] == {"old": old.memory, "new": new}[first]


# -- the session-start bundle ---------------------------------------------------------------------


async def test_get_context_gives_the_most_important_and_most_recent_of_each_type_within_the_budget(
    project: Path,
) -> None:
    async with connect(project) as client:
        by_kind: dict[str, list[str]] = {}
        for kind in ("decision", "fix", "convention"):
            for i, importance in enumerate((0.9, 0.2, 0.5, 0.3)):
                memory_id = await store(
                    client, f"{kind} number {i} about the service.", type=kind, importance=importance
                )
                by_kind.setdefault(kind, []).append(memory_id)
        shared = await store(client, "I review my own diffs before pushing.", type="workflow", scope="global")
        roomy = await call(client, "get_context", max_chars=20000)
        tight = await call(client, "get_context", max_chars=1000)
        tiny_error = await call_error(client, "get_context", max_chars=10)
        only = await call(client, "get_context", types=["fix"], include_global=False)
    assert roomy["chars"] == len(roomy["text"]) <= 20000 and roomy["omitted"] == 0
    assert tight["chars"] == len(tight["text"]) <= 1000 and tight["omitted"] > 0
    included = ids(tight["memories"])
    for memory_ids in by_kind.values():
        important, recent = memory_ids[0], memory_ids[-1]
        assert important in included, "the most important of each type comes first"
        assert recent in included, "then the most recent"
        assert memory_ids[1] not in included  # least important and oldest: left out when space is tight
    assert tight["text"].startswith(f"# Project memory: {project.name}")
    for heading in ("## Decision", "## Fix", "## Convention"):
        assert heading in roomy["text"]
    assert f"global) `{shared}`" in roomy["text"]
    assert roomy["counts"] == {"decision": 4, "fix": 4, "convention": 4, "workflow": 1}
    assert {m["kind"] for m in only["memories"]} == {"fix"} and shared not in only["text"]
    assert "max_chars" in tiny_error


async def test_get_context_does_not_count_as_an_access(project: Path) -> None:
    async with connect(project) as client:
        memory_id = await store(client, "The docs site builds with mkdocs.")
        await call(client, "get_context")
        got = await call(client, "get_memory", memory_id=memory_id)
    assert got["memory"]["access_count"] == 0


# -- guards ---------------------------------------------------------------------------------------


async def test_saves_that_fill_a_segment_go_on_in_the_next_one(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMEM_MAX_SEGMENT_BYTES", "1048576")  # (the floor)
    monkeypatch.setenv("EVENTMEM_MAX_MEMORY_BYTES", "65536")
    async with connect(project) as client:
        saved = [await store(client, f"Note {i}: " + f"word{i} " * 8000) for i in range(25)]
        linked = await call(client, "create_relationship", source_id=saved[0], target_id=saved[-1])
        got = await call(client, "get_memory", memory_id=saved[-1])
    assert linked["created"] is True and got["memory"]["content"].startswith("Note 24: ")
    segments = sorted((project / ".eventmem" / "journal").glob("*.jsonl"))
    assert len(segments) >= 2 and all(path.stat().st_size <= 1048576 for path in segments)


async def test_a_memory_over_the_size_limit_is_refused_with_what_to_do(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_MAX_MEMORY_BYTES", "100")
    async with connect(project) as client:
        memory_id = await store(client, "short")
        error = await call_error(client, "store_memory", content="x" * 101)
        sup_error = await call_error(client, "supersede", memory_id=memory_id, content="y" * 101)
    for message in (error, sup_error):
        assert "max_memory_bytes" in message and "split" in message


SECRETS = [
    ("aws-access-key", "deploy with AKIAIOSFODNN7EXAMPLE as the key id", "AKIAIOSFODNN7EXAMPLE"),
    ("github-token", "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "ghp_a1B2"),
    ("slack-token", "bot token xoxb-123456789012-abcdefghijkl", "xoxb-1234"),
    ("openai-key", "OPENAI: sk-proj-abcdefghijklmnopqrstuvwxyz123456", "sk-proj-abc"),
    ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
    ("url-password", "connect to postgres://app:s3cretPass@db.internal/app", "s3cretPass"),
    ("password", "DB_PASSWORD=hunter2hunter2 in the env", "hunter2hunter2"),
    ("jwt", "bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop", "eyJzdWIi"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
async def test_a_secret_is_scrubbed_before_it_reaches_the_journal(
    project: Path, kind: str, text: str, secret: str
) -> None:
    async with connect(project) as client:
        out = await call(client, "store_memory", content=f"Note: {text}. <private>my home is 12 Elm St</private>done")
    assert secret not in out["memory"]["content"] and f"[REDACTED:{kind}]" in out["memory"]["content"]
    assert "Elm St" not in out["memory"]["content"]
    raw = b"".join(lines_of(project))
    assert secret.encode() not in raw and b"Elm St" not in raw


async def test_with_secrets_refuse_a_secret_is_refused_and_nothing_is_written(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECRETS", "refuse")
    async with connect(project) as client:
        error = await call_error(client, "store_memory", content="key AKIAIOSFODNN7EXAMPLE")
    assert "aws-access-key" in error
    assert not (project / ".eventmem" / "journal").exists() or lines_of(project) == []


# -- archive --------------------------------------------------------------------------------------


def seed_archive(project: Path) -> dict[str, Any]:
    """A live memory linked to one deleted 40 days ago, one expired 40 days ago, one deleted
    yesterday; plus a line of an unknown event type about the long-deleted one."""
    long_deleted = MemorySaved(id=new_id(), ts=ago(days=45), memory=new_id(), content="Use Jenkins for CI.")
    long_expired = old_memory("Temporary: CI runs on the old runners.", days=45, ttl=3600)
    recent = MemorySaved(id=new_id(), ts=ago(days=2), memory=new_id(), content="Use Travis for CI.")
    live = MemorySaved(id=new_id(), ts=ago(days=45), memory=new_id(), content="CI runs on GitHub Actions.")
    link = LinkAdded(id=new_id(), ts=ago(days=44), link=new_id(), source=live.memory, target=long_deleted.memory)
    events: list[Any] = [
        long_deleted,
        long_expired,
        recent,
        live,
        link,
        MemoryDeleted(id=new_id(), ts=ago(days=40), memory=long_deleted.memory, reason="moved off Jenkins"),
        LinkRemoved(id=new_id(), ts=ago(days=40), link=link.link, reason="memory deleted"),
        MemoryDeleted(id=new_id(), ts=ago(days=1), memory=recent.memory),
        # what a compaction 40 days ago wrote
        MemoryExpired(id=new_id(), ts=ago(days=40), memory=long_expired.memory, expires_at=ago(days=44.9)),
    ]
    write_events(project, events)
    segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
    unknown = b'{"type":"reacted","id":"01UNKNOWNEVENT00000000000A","ts":"2026-01-01T00:00:00.000000Z","memory":"%s"}\n'
    with open(segment, "ab") as handle:
        handle.write(unknown % long_deleted.memory.encode())
    return {
        "deleted": long_deleted.memory,
        "expired": long_expired.memory,
        "recent": recent.memory,
        "live": live.memory,
        "link": link.link,
        "segment": segment,
    }


def answers(project: Path) -> dict[str, Any]:
    service = reopen(project)
    try:
        state = service.project.derived.state
        return {
            "memories": {m: (r.status, r.content, r.created_at) for m, r in state.memories.items()},
            "links": {lk: (r.source, r.target, r.alive) for lk, r in state.links.items()},
            "unknown": dict(state.unknown),
            "search": [h.id for h in service.search(limit=100)],
        }
    finally:
        service.close()


def test_compaction_moves_the_history_of_long_dead_memories_into_an_archive_segment(project: Path) -> None:
    seeded = seed_archive(project)
    before_lines = lines_of(project)
    before = answers(project)
    report, again = compact_twice(project)
    (archived,) = report["archived"]
    assert again["archived"] == []
    archive_files = list((project / ".eventmem" / "archive").glob("*.jsonl"))
    assert [f"archive/{p.name}" for p in archive_files] == [archived["segment"]]
    writer = ProjectPaths(project).writer_id()
    assert archive_files[0].name.startswith(f"{writer}.main.") and archive_files[0].name.endswith(".1.jsonl")
    moved = [json.loads(line) for line in archive_files[0].read_bytes().splitlines()]
    moved_about = {e.get("memory") or e.get("link") for e in moved}
    assert moved_about == {seeded["deleted"], seeded["expired"], seeded["link"]}
    assert archived["memories"] == 2 and archived["events"] == len(moved) == 6
    live_events = journal_events(project)
    assert {e.get("memory") for e in live_events} & {seeded["deleted"], seeded["expired"]} == {seeded["deleted"]}
    assert [e["type"] for e in live_events if e.get("memory") == seeded["deleted"]] == ["reacted"]  # unknown kept
    marker = [e for e in live_events if e["type"] == "archived"]
    assert len(marker) == 1 and marker[0]["segment"] == archived["segment"]
    assert sorted(marker[0]["memories"]) == sorted([seeded["deleted"], seeded["expired"]])
    assert marker[0]["events"] == 6
    # nothing lost: every line is still there, byte for byte, plus the archived event
    after_lines = lines_of(project)
    assert sorted(after_lines) == sorted([*before_lines, json.dumps(marker[0], separators=(",", ":")).encode()])
    # and replaying archive + journal gives the same state
    assert answers(project) == before
    shutil.rmtree(project / ".eventmem" / "cache")
    assert answers(project) == before


def test_replay_at_a_time_or_a_revision_before_the_compaction_gives_what_it_gave_before(project: Path) -> None:
    from conftest import git

    from eventmem.journal.history import as_of

    seeded = seed_archive(project)
    git(project, "add", ".eventmem")
    git(project, "commit", "-q", "-m", "memory before compaction")
    moments = [ago(days=d) for d in (44.5, 41, 39, 1.5, 0)]

    def replay(when: str) -> dict[str, Any]:
        state = as_of(project, when).state
        return {m: (r.status, r.content) for m, r in state.memories.items() if r.exists} | {
            "links": {lk: r.alive for lk, r in state.links.items()}
        }

    before = [replay(t) for t in moments]
    service = reopen(project)
    try:
        assert service.compact()["archived"]
    finally:
        service.close()
    assert [replay(t) for t in moments] == before
    assert replay("HEAD") == before[-1]  # the committed, uncompacted journal
    assert before[0][seeded["deleted"]] == ("live", "Use Jenkins for CI.")
    assert before[2][seeded["deleted"]][0] == "deleted"


def test_the_scheduler_archives_at_most_once_a_day_and_the_command_line_any_time(project: Path) -> None:
    seed_archive(project)
    service = reopen(project)
    try:
        first = service.compact(archive="daily")
        late = MemorySaved(id=new_id(), ts=ago(days=50), memory=new_id(), content="Use Buildkite for CI.")
        service.project.append([late, MemoryDeleted(id=new_id(), ts=ago(days=35), memory=late.memory)])
        second = service.compact(archive="daily")
        forced = service.compact()
    finally:
        service.close()
    assert len(first["archived"]) == 1
    assert second["archived"] == []  # already archived today: a rewrite makes other processes rebuild
    assert forced["archived"][0]["memories"] == 1
    assert forced["archived"][0]["segment"].endswith(".2.jsonl")


def test_compaction_only_rewrites_this_clones_segment_for_this_branch(project: Path) -> None:
    seeded = seed_archive(project)
    journal = project / ".eventmem" / "journal"
    other_clone = journal / "0therc1o.main.jsonl"
    other_branch = journal / f"{ProjectPaths(project).writer_id()}.feature.jsonl"
    restore = b'{"type":"updated","id":"%s","ts":"%s","memory":"%s","title":"old CI"}\n'
    for path in (other_clone, other_branch):
        path.write_bytes(restore % (new_id().encode(), ago(days=43).encode(), seeded["deleted"].encode()))
    frozen = {path: path.read_bytes() for path in (other_clone, other_branch)}
    service = reopen(project)
    try:
        report = service.compact()
    finally:
        service.close()
    assert report["archived"][0]["rewritten"] == f"journal/{seeded['segment'].name}"
    assert {path: path.read_bytes() for path in frozen} == frozen


def test_another_process_sees_the_same_memory_after_a_compaction_rewrote_the_journal(project: Path) -> None:
    seeded = seed_archive(project)
    watcher = reopen(project)
    try:
        before = [h.id for h in watcher.search(limit=100)]
        compactor = reopen(project)
        try:
            compactor.compact()
            saved = compactor.save("Written after the compaction.")
        finally:
            compactor.close()
        rebuilds = watcher.project.rebuilds
        after = [h.id for h in watcher.search(limit=100)]
        assert watcher.project.rebuilds == rebuilds + 1  # the rewrite was detected
        assert after == [*before, saved.id] or sorted(after) == sorted([*before, saved.id])
        assert watcher.project.derived.state.memories[seeded["deleted"]].status == "deleted"
    finally:
        watcher.close()


def test_a_crash_between_writing_the_archive_and_rewriting_the_journal_only_leaves_duplicates(project: Path) -> None:
    from eventmem.review.audit import audit
    from eventmem.service.lifecycle import archive_candidates, split_lines

    seed_archive(project)
    before = answers(project)
    service = reopen(project)
    try:
        state = service.project.derived.state
        dead = set(archive_candidates(state, datetime.now(UTC).timestamp() - 30 * 86400))
        links = {lk for m in dead for lk in state.adjacency.get(m, ())}
    finally:
        service.close()
    segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
    _, moved, _ = split_lines(segment.read_bytes(), dead, links)
    archive = project / ".eventmem" / "archive"
    archive.mkdir()
    (archive / "crashed.main.20260101.1.jsonl").write_bytes(b"".join(moved))  # ...and then the crash
    assert answers(project) == before
    report = audit(ProjectPaths(project))
    assert report.ok, report
    assert report.duplicate_ids and all(d.identical and d.severity == "warning" for d in report.duplicate_ids)


def test_the_archive_mechanism_can_archive_live_memories_for_other_policies(project: Path) -> None:
    from eventmem.service.lifecycle import archive_memories

    service = reopen(project)
    try:
        changes = [service.save(f"Recent change {i}: bumped the parser.", kind="recent_change") for i in range(5)]
        keep = 3

        def older_changes(state: Any) -> list[str]:
            records = [r for r in state.memories.values() if r.kind == "recent_change" and r.status == "live"]
            records.sort(key=lambda r: r.created_stamp, reverse=True)
            return [r.id for r in records[keep:]]

        result = archive_memories(service.project, older_changes, now=datetime.now(UTC).timestamp(), by="test")
        assert sorted(result.memories) == sorted(m.id for m in changes[:2])
        assert all(service.project.derived.state.memories[m.id].archived for m in changes[:2])
        assert {h.id for h in service.search(limit=10)} == {m.id for m in changes}  # still live, history moved
    finally:
        service.close()


def test_eventmem_compact_on_the_command_line_reports_what_it_did(project: Path) -> None:
    seeded = seed_archive(project)
    earlier = to_iso(datetime.now(UTC) - timedelta(minutes=1))  # a time later than the clock needs --dry-run
    result = eventmem(project.parent, "compact", "--now", earlier, "--json", "--root", str(project))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "success" and report["expired"] == []
    assert report["archived"][0]["memories"] == 2
    human = eventmem(project.parent, "compact", "--root", str(project))
    assert human.returncode == 0 and "nothing to archive" in human.stdout
    assert seeded["deleted"] not in seeded["segment"].read_text(encoding="utf-8").split('"type":"reacted"')[0]


def _cli_json(project: Path, *args: str) -> Any:
    result = eventmem(project.parent, *args, "--json", "--root", str(project))  # (in process: tests/cli_runner.py)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("complete", [True, False], ids=["an-event-without-its-newline", "half-a-line"])
def test_the_last_line_of_a_segment_is_read_the_same_way_by_the_log_the_replay_and_compaction(
    project: Path, complete: bool
) -> None:
    from eventmem.core.codec import encode_event
    from eventmem.core.events import MemoryUpdated

    seeded = seed_archive(project)
    update = MemoryUpdated(id=new_id(), ts=ago(days=0.5), memory=seeded["live"], title="CI on Actions")
    line = encode_event(update)
    tail = line[:-1] if complete else line[: len(line) // 2]
    with open(seeded["segment"], "ab") as handle:
        handle.write(tail)

    def seen() -> tuple[bool, bool]:
        logged = {event["id"] for event in _cli_json(project, "log", "--limit", "10000")}
        replayed = {entry["event"] for entry in _cli_json(project, "replay", "log", seeded["live"])["events"]}
        return update.id in logged, update.id in replayed

    assert seen() == (complete, complete)
    report = _cli_json(project, "compact")
    assert report["archived"][0]["memories"] == 2
    assert seen() == (complete, complete)  # compaction kept what the readers read, and only that
    live = seeded["segment"].read_bytes()
    assert live.endswith(b"\n") and live.count(line) == (1 if complete else 0)
    quarantined = list((project / ".eventmem" / "cache" / "quarantine").glob("*.bin"))
    assert [path.read_bytes() for path in quarantined] == ([] if complete else [tail])
