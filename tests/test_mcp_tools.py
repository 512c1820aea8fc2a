"""The MCP tools through a real MCP client, connected in-process to the server (no subprocess).

Each tool is called the way a model calls it: JSON arguments in, a result with structured content
out. Mistakes the model can fix come back as tool errors (``is_error``) with a message that says
what to change, and they never touch the journal.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import global_dir, journal_events, journal_files, reopen
from mcp import Client
from mcp_client import DEFAULT_TOOLS, call, call_error, text_of
from mcp_client import PYTEST_CLIENT as CLIENT
from mcp_client import connect as connect_client

from eventmem.adapters.mcp.server import build_server
from eventmem.core.errors import InvalidInput
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService

pytestmark = pytest.mark.anyio

connect = partial(connect_client, client_info=CLIENT, mode="auto")


async def seed_for_filters(client: Client) -> tuple[list[str], str]:
    """Six memories that match 'database migrations' strongly, and one that matches weakly but
    is the only fix, tagged 'tests', important, and global. Returns (strong ids, weak id)."""
    strong = []
    for i in range(6):
        out = await call(
            client,
            "store_memory",
            content=f"Database migrations run with alembic; database migrations take the lock (step {i}).",
            type="decision",
            tags=["db", "migrations"],
            importance=0.3,
        )
        strong.append(out["memory"]["id"])
    weak = await call(
        client,
        "store_memory",
        content="Fixed a flaky helper in the test suite that touched the database.",
        type="fix",
        tags=["db", "tests"],
        importance=0.9,
        scope="global",
    )
    return strong, weak["memory"]["id"]


# -- save_context / retrieve_context ----------------------------------------------------------


async def test_save_context_returns_success_and_an_id_that_get_memory_finds(project: Path) -> None:
    async with connect(project) as client:
        result = await client.call_tool(
            "save_context",
            {"context_text": "The API uses cursor pagination.", "summary": "Cursor pagination", "tags": ["api"]},
        )
        assert not result.is_error, text_of(result)
        saved = result.structured_content
        assert saved is not None
        assert saved["status"] == "success"
        assert isinstance(saved["id"], str) and saved["id"]
        assert json.loads(text_of(result)) == saved  # the text content carries the same JSON

        got = await call(client, "get_memory", memory_id=saved["id"])
        assert got["memory"]["id"] == saved["id"]
        assert got["memory"]["content"] == "The API uses cursor pagination."
        assert got["memory"]["summary"] == "Cursor pagination"
        assert got["memory"]["tags"] == ["api"]


async def test_save_context_without_a_summary_gets_one_extracted_from_the_text(project: Path) -> None:
    text = (
        "The deploy pipeline failed because the staging database password rotated overnight. "
        "We now read the password from the vault at deploy time instead of baking it into the image. "
        "Remember that the vault token itself expires every thirty days and must be renewed by the on-call. "
        "The runbook in docs/deploy.md describes the renewal step by step, with screenshots of the console."
    )
    async with connect(project) as client:
        saved = await call(client, "save_context", context_text=text)
        got = await call(client, "get_memory", memory_id=saved["id"])
    summary = got["memory"]["summary"]
    assert summary == saved["summary"]
    assert summary.strip()
    assert len(summary) < len(text)
    assert summary.split()[0] in text


async def test_retrieve_context_returns_scored_results_best_first(project: Path) -> None:
    async with connect(project) as client:
        target = await call(
            client,
            "save_context",
            context_text="Redis cache keys expire after ten minutes; the redis cache is flushed on deploy.",
            tags=["redis", "cache"],
            kind="convention",
        )
        await call(client, "save_context", context_text="The frontend is written in TypeScript with React.")
        await call(client, "save_context", context_text="Logs are shipped to the central log store nightly.")
        out = await call(client, "retrieve_context", query="redis cache expiry", limit=3)
    results = out["results"]
    assert results, out
    assert results[0]["id"] == target["id"]
    for hit in results:
        assert {"id", "summary", "score", "kind", "tags", "created_at"} <= hit.keys()
    assert results[0]["kind"] == "convention"
    assert results[0]["tags"] == ["redis", "cache"]
    scores = [hit["score"] for hit in results]
    assert scores == sorted(scores, reverse=True)


async def test_retrieve_context_honours_the_limit(project: Path) -> None:
    async with connect(project) as client:
        for i in range(4):
            await call(client, "save_context", context_text=f"Note {i} about the build cache.")
        out = await call(client, "retrieve_context", query="build cache", limit=2)
    assert len(out["results"]) == 2


# -- store / recall / get / update / delete ---------------------------------------------------


async def test_store_memory_keeps_type_tags_importance_ttl_and_scope(project: Path) -> None:
    async with connect(project) as client:
        out = await call(
            client,
            "store_memory",
            content="Run `make lint` before pushing.",
            type="workflow",
            title="Lint first",
            tags=["CI", "lint"],
            importance=0.7,  # below promote_importance (0.8), which would make it long-term at once
            ttl_seconds=3600,
        )
        memory = out["memory"]
        assert memory["kind"] == "workflow"
        assert memory["title"] == "Lint first"
        assert memory["tags"] == ["ci", "lint"]
        assert memory["importance"] == 0.7
        assert memory["ttl_seconds"] == 3600
        assert memory["expires_at"] is not None
        assert memory["scope"] == "project"
        assert memory["status"] == "live"
        assert memory["created_by"] == CLIENT.name

        shared = await call(client, "store_memory", content="I prefer tabs.", type="coding_style", scope="global")
        assert shared["memory"]["scope"] == "global"
        assert shared["memory"]["expires_at"] is None
        got = await call(client, "get_memory", memory_id=shared["memory"]["id"])
        assert got["memory"]["content"] == "I prefer tabs."

    project_ids = {e.get("memory") for e in journal_events(project)}
    global_ids = {e.get("memory") for e in journal_events(global_dir(project))}
    assert memory["id"] in project_ids and memory["id"] not in global_ids
    assert shared["memory"]["id"] in global_ids and shared["memory"]["id"] not in project_ids


@pytest.mark.parametrize("type_filter", ["fix", "FIX", ["fix"], ["fix", "error"], "fix, error"])
async def test_recall_memories_filters_by_type_before_the_limit(project: Path, type_filter: object) -> None:
    async with connect(project) as client:
        strong, weak = await seed_for_filters(client)
        unfiltered = await call(client, "recall_memories", query="database migrations", limit=1)
        assert unfiltered["results"][0]["id"] in strong
        out = await call(client, "recall_memories", query="database migrations", limit=1, type=type_filter)
    assert [hit["id"] for hit in out["results"]] == [weak]


@pytest.mark.parametrize(
    ("tags", "expect_weak"),
    [(["tests"], True), ("db,tests", True), (["DB", "tests"], True), (["db", "nope"], False)],
)
async def test_recall_memories_filters_by_tags_all_of_which_must_match(
    project: Path, tags: object, expect_weak: bool
) -> None:
    async with connect(project) as client:
        _, weak = await seed_for_filters(client)
        out = await call(client, "recall_memories", query="database migrations", limit=1, tags=tags)
    assert [hit["id"] for hit in out["results"]] == ([weak] if expect_weak else [])


async def test_recall_memories_filters_by_scope(project: Path) -> None:
    async with connect(project) as client:
        strong, weak = await seed_for_filters(client)
        only_global = await call(client, "recall_memories", query="database migrations", limit=1, scope="global")
        only_project = await call(client, "recall_memories", query="database migrations", limit=10, scope="project")
        everything = await call(client, "recall_memories", query="database migrations", limit=10, scope="all")
    assert [hit["id"] for hit in only_global["results"]] == [weak]
    assert only_global["results"][0]["scope"] == "global"
    assert {hit["id"] for hit in only_project["results"]} == set(strong)
    assert {hit["id"] for hit in everything["results"]} == {*strong, weak}
    # every hit names its project: this one's, and for a global memory the one it was saved from
    assert {hit["project"] for hit in everything["results"]} == {project.name}


async def test_recall_memories_filters_by_min_importance_before_the_limit(project: Path) -> None:
    async with connect(project) as client:
        _, weak = await seed_for_filters(client)
        out = await call(client, "recall_memories", query="database migrations", limit=1, min_importance=0.8)
    assert [hit["id"] for hit in out["results"]] == [weak]
    assert out["results"][0]["importance"] >= 0.8


async def test_recall_memories_filters_by_creation_time(project: Path) -> None:
    async with connect(project) as client:
        ids = [
            (await call(client, "store_memory", content=f"Release note {i} for the parser."))["memory"]["id"]
            for i in range(3)
        ]
        middle = (await call(client, "get_memory", memory_id=ids[1]))["memory"]["created_at"]
        after = await call(client, "recall_memories", query="release parser", limit=10, created_after=middle)
        before = await call(client, "recall_memories", query="release parser", limit=10, created_before=middle)
    assert {hit["id"] for hit in after["results"]} == set(ids[1:])
    assert {hit["id"] for hit in before["results"]} == {ids[0]}


async def test_recall_memories_returns_content_unless_asked_not_to(project: Path) -> None:
    async with connect(project) as client:
        await call(client, "store_memory", content="Feature flags live in flags.yaml.")
        full = await call(client, "recall_memories", query="feature flags")
        brief = await call(client, "recall_memories", query="feature flags", include_content=False)
    assert full["results"][0]["content"] == "Feature flags live in flags.yaml."
    assert brief["results"][0]["content"] is None


async def test_get_memory_returns_the_full_memory_with_times_and_status(project: Path) -> None:
    async with connect(project) as client:
        stored = await call(client, "store_memory", content="Use UTC everywhere.", type="convention", tags=["time"])
        got = await call(client, "get_memory", memory_id=stored["memory"]["id"])
    memory = got["memory"]
    assert memory == stored["memory"]
    assert memory["status"] == "live"
    assert memory["created_at"] == memory["updated_at"]
    assert memory["expires_at"] is None


async def test_update_memory_changes_only_the_given_fields_and_history_keeps_both_versions(project: Path) -> None:
    async with connect(project) as client:
        stored = await call(
            client,
            "store_memory",
            content="Tests run with pytest -x.",
            type="workflow",
            title="Running tests",
            tags=["tests"],
            importance=0.4,
        )
        memory_id = stored["memory"]["id"]
        updated = await call(client, "update_memory", memory_id=memory_id, importance=0.9, tags=["tests", "ci"])
        got = await call(client, "get_memory", memory_id=memory_id)

    before, after = stored["memory"], got["memory"]
    assert after == updated["memory"]
    assert after["importance"] == 0.9
    assert after["tags"] == ["tests", "ci"]
    for unchanged in ("content", "title", "summary", "kind", "scope", "ttl_seconds", "created_at", "created_by"):
        assert after[unchanged] == before[unchanged], unchanged
    assert after["updated_at"] > before["updated_at"]

    service = reopen(project)
    try:
        history = service.history(memory_id)
    finally:
        service.close()
    assert [event["type"] for event in history] == ["saved", "updated"]
    assert history[0]["importance"] == 0.4
    assert history[0]["content"] == "Tests run with pytest -x."
    assert history[1]["importance"] == 0.9
    assert "content" not in history[1] and "title" not in history[1]


async def test_update_memory_with_new_content_resummarizes_it(project: Path) -> None:
    async with connect(project) as client:
        stored = await call(client, "store_memory", content="The cache is Redis.")
        memory_id = stored["memory"]["id"]
        await call(client, "update_memory", memory_id=memory_id, content="The cache is Memcached now.")
        got = await call(client, "get_memory", memory_id=memory_id)
        hits = await call(client, "retrieve_context", query="memcached")
    assert got["memory"]["content"] == "The cache is Memcached now."
    assert got["memory"]["summary"] == "The cache is Memcached now."
    assert hits["results"][0]["id"] == memory_id


async def test_update_memory_with_ttl_zero_makes_a_memory_long_term(project: Path) -> None:
    async with connect(project) as client:
        stored = await call(client, "store_memory", content="Temporary: staging is down.", ttl_seconds=600)
        assert stored["memory"]["expires_at"] is not None
        memory_id = stored["memory"]["id"]
        updated = await call(client, "update_memory", memory_id=memory_id, ttl_seconds=0)
        got = await call(client, "get_memory", memory_id=memory_id)
    assert updated["memory"]["ttl_seconds"] is None
    assert got["memory"]["ttl_seconds"] is None
    assert got["memory"]["expires_at"] is None


async def test_delete_memory_hides_it_from_get_and_retrieve(project: Path) -> None:
    async with connect(project) as client:
        doomed = await call(client, "store_memory", content="The queue is RabbitMQ.", tags=["queue"])
        kept = await call(client, "store_memory", content="The queue consumer retries three times.", tags=["queue"])
        memory_id = doomed["memory"]["id"]
        out = await call(client, "delete_memory", memory_id=memory_id, reason="we moved to Kafka")
        assert out == {"status": "success", "id": memory_id, "deleted": True}

        error = await call_error(client, "get_memory", memory_id=memory_id)
        assert memory_id in error
        retrieved = await call(client, "retrieve_context", query="queue RabbitMQ", limit=10)
        recalled = await call(client, "recall_memories", query="queue RabbitMQ", limit=10)
        again = await call_error(client, "delete_memory", memory_id=memory_id)
    assert [hit["id"] for hit in retrieved["results"]] == [kept["memory"]["id"]]
    assert [hit["id"] for hit in recalled["results"]] == [kept["memory"]["id"]]
    assert memory_id in again
    deleted = [e for e in journal_events(project) if e["type"] == "deleted"]
    assert [(e["memory"], e.get("reason")) for e in deleted] == [(memory_id, "we moved to Kafka")]


# -- errors the model can fix -------------------------------------------------------------------

UNKNOWN = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
LIMIT = 200  # EVENTMEM_MAX_MEMORY_BYTES in the error tests
VISIBLE = "expected a text with a visible character"
UNIT = "importance: expected a number from 0 to 1"
ONE_TO_100 = "limit: expected a whole number from 1 to 100"

# (case, tool, arguments, fragments of the message separated by "|"); "{id}" is an existing memory's id
ERROR_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("unknown-id-get", "get_memory", {"memory_id": UNKNOWN}, "no memory with id"),
    ("unknown-id-update", "update_memory", {"memory_id": UNKNOWN, "importance": 0.2}, "no memory with id"),
    ("unknown-id-delete", "delete_memory", {"memory_id": UNKNOWN}, "no memory with id"),
    ("empty-id", "get_memory", {"memory_id": " "}, "memory id must be a non-empty string"),
    ("empty-text-save", "save_context", {"context_text": ""}, "context_text: " + VISIBLE),
    ("empty-text-store", "store_memory", {"content": ""}, "content: " + VISIBLE),
    ("whitespace-text-save", "save_context", {"context_text": "  \n\t "}, "context_text: " + VISIBLE),
    ("whitespace-text-store", "store_memory", {"content": "   "}, "content: " + VISIBLE),
    ("whitespace-text-update", "update_memory", {"memory_id": "{id}", "content": " \n "}, "content: expected a text"),
    ("too-big-save", "save_context", {"context_text": "x" * (LIMIT + 1)}, "max_memory_bytes"),
    ("too-big-store", "store_memory", {"content": "é" * LIMIT}, "max_memory_bytes"),
    ("too-big-update", "update_memory", {"memory_id": "{id}", "content": "y" * (LIMIT + 1)}, "max_memory_bytes"),
    ("bad-type-store", "store_memory", {"content": "a", "type": "opinion"}, "unknown type"),
    ("bad-type-save", "save_context", {"context_text": "a", "kind": "opinion"}, "unknown type"),
    ("bad-type-update", "update_memory", {"memory_id": "{id}", "type": "opinion"}, "unknown type"),
    ("bad-type-recall", "recall_memories", {"query": "a", "type": ["fix", "opinion"]}, "unknown type"),
    ("importance-above-1", "store_memory", {"content": "a", "importance": 1.5}, UNIT + ", got 1.5"),
    ("importance-below-0", "store_memory", {"content": "a", "importance": -0.1}, UNIT),
    ("importance-update", "update_memory", {"memory_id": "{id}", "importance": 2}, UNIT),
    ("min-importance", "recall_memories", {"query": "a", "min_importance": 1.5}, "min_importance"),
    ("negative-ttl-store", "store_memory", {"content": "a", "ttl_seconds": -5}, "ttl_seconds"),
    ("negative-ttl-update", "update_memory", {"memory_id": "{id}", "ttl_seconds": -1}, "ttl_seconds"),
    ("limit-0-retrieve", "retrieve_context", {"query": "a", "limit": 0}, ONE_TO_100 + ", got 0"),
    ("limit-1000-retrieve", "retrieve_context", {"query": "a", "limit": 1000}, ONE_TO_100),
    ("limit-0-recall", "recall_memories", {"query": "a", "limit": 0}, ONE_TO_100 + ", got 0"),
    ("limit-1000-recall", "recall_memories", {"query": "a", "limit": 1000}, ONE_TO_100),
    ("empty-query", "retrieve_context", {"query": "  "}, "query: " + VISIBLE),
    ("bad-scope-store", "store_memory", {"content": "a", "scope": "team"}, "scope"),
    ("bad-scope-recall", "recall_memories", {"query": "a", "scope": "team"}, "scope"),
    ("bad-date-after", "recall_memories", {"query": "a", "created_after": "last tuesday"}, "created_after"),
    ("bad-date-before", "recall_memories", {"query": "a", "created_before": "2024-13-45"}, "created_before"),
    ("missing-text", "save_context", {}, "context_text is required"),
    ("missing-content", "store_memory", {"type": "fix"}, "content is required"),
    ("missing-id", "get_memory", {}, "memory_id is required"),
    ("missing-query", "recall_memories", {"limit": 3}, "query is required"),
    ("wrong-type-importance", "store_memory", {"content": "a", "importance": "high"}, UNIT + ", got 'high'"),
    ("wrong-type-tags", "save_context", {"context_text": "a", "tags": 7}, "tags: expected a list of at most 32|got 7"),
    ("wrong-type-limit", "retrieve_context", {"query": "a", "limit": "many"}, ONE_TO_100 + ", got 'many'"),
    ("wrong-type-text", "store_memory", {"content": ["a", "b"]}, "content: expected a string|got 2 items"),
    ("unknown-tool", "forget_everything", {}, "unknown tool|forget_everything"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"), [case[1:] for case in ERROR_CASES], ids=[case[0] for case in ERROR_CASES]
)
async def test_a_mistake_the_model_can_fix_is_a_clear_tool_error_and_leaves_the_journal_untouched(
    project: Path, monkeypatch: pytest.MonkeyPatch, tool: str, arguments: dict[str, Any], message: str
) -> None:
    monkeypatch.setenv("EVENTMEM_MAX_MEMORY_BYTES", str(LIMIT))
    async with connect(project) as client:
        existing = await call(client, "store_memory", content="An existing memory.", scope="project")
        await call(client, "store_memory", content="An existing global memory.", scope="global")
        before = journal_files(project, global_dir(project))
        assert len(before) == 2
        args = {k: v.format(id=existing["memory"]["id"]) if v == "{id}" else v for k, v in arguments.items()}
        error = await call_error(client, tool, **args)
        after = journal_files(project, global_dir(project))
        still = await call(client, "get_memory", memory_id=existing["memory"]["id"])
    for fragment in message.split("|"):
        assert fragment.lower() in error.lower(), error
    assert error.strip() != f"Error executing tool {tool}", "the message must say what is wrong"
    assert after == before
    assert still["memory"] == existing["memory"]


async def test_a_memory_that_cannot_be_opened_fails_every_call_with_a_clear_message(project: Path) -> None:
    def broken(root: RootChoice) -> MemoryService:
        raise InvalidInput(f"config.toml in {root.root.name}: not valid TOML")

    async with Client(build_server(RootChoice(project, "test"), opener=broken), client_info=CLIENT) as client:
        error = await call_error(client, "retrieve_context", query="anything")
        again = await call_error(client, "save_context", context_text="anything")
    assert "could not be opened" in error and "not valid TOML" in error
    assert "could not be opened" in again
    assert not (project / ".eventmem").exists()


# -- metadata and identity ----------------------------------------------------------------------


async def test_every_tool_has_a_description_annotations_and_an_output_schema(project: Path) -> None:
    async with connect(project) as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) >= DEFAULT_TOOLS
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 20, name
        assert tool.title, name
        assert tool.annotations is not None, name
        assert tool.output_schema is not None and tool.output_schema.get("type") == "object", name
        assert tool.input_schema.get("type") == "object", name
    for name in ("retrieve_context", "recall_memories", "get_memory"):
        assert tools[name].annotations.read_only_hint is True, name  # type: ignore[union-attr]
        assert tools[name].annotations.destructive_hint is False, name  # type: ignore[union-attr]
    for name in ("update_memory", "delete_memory"):
        assert tools[name].annotations.read_only_hint is False, name  # type: ignore[union-attr]
        assert tools[name].annotations.destructive_hint is True, name  # type: ignore[union-attr]
    for name in ("save_context", "store_memory"):
        assert tools[name].annotations.read_only_hint is False, name  # type: ignore[union-attr]
        assert tools[name].annotations.destructive_hint is False, name  # type: ignore[union-attr]
    assert tools["save_context"].input_schema["required"] == ["context_text"]
    assert tools["store_memory"].input_schema["required"] == ["content"]
    assert "created_after" in tools["recall_memories"].input_schema["properties"]


async def test_the_server_introduces_itself_with_instructions(project: Path) -> None:
    async with connect(project, mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.name == "eventmem"
        assert client.instructions and "retrieve_context" in client.instructions


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_client_name_from_the_handshake_is_recorded_as_by_in_the_journal(project: Path, mode: str) -> None:
    async with connect(project, mode=mode) as client:
        saved = await call(client, "save_context", context_text="Who wrote this?")
        await call(client, "update_memory", memory_id=saved["id"], importance=0.7)
        stored = await call(client, "store_memory", content="And this?")
        await call(client, "delete_memory", memory_id=stored["memory"]["id"])
        got = await call(client, "get_memory", memory_id=saved["id"])
    events = journal_events(project)
    assert [e["type"] for e in events] == ["saved", "updated", "saved", "deleted"]
    assert {e["by"] for e in events} == {CLIENT.name}
    assert got["memory"]["created_by"] == got["memory"]["updated_by"] == CLIENT.name


async def test_store_memory_keeps_metadata_and_update_memory_replaces_it_within_its_bounds(project: Path) -> None:
    async with connect(project) as client:
        saved = await call(
            client,
            "store_memory",
            content="The nightly export runs at 02:00 UTC.",
            metadata={"owner": "ops", "ticket": "OPS-12"},
        )
        memory_id = saved["memory"]["id"]
        assert saved["memory"]["metadata"] == {"owner": "ops", "ticket": "OPS-12"}
        updated = await call(client, "update_memory", memory_id=memory_id, metadata={"owner": "data"})
        assert updated["memory"]["metadata"] == {"owner": "data"}
        too_many = await call_error(
            client, "update_memory", memory_id=memory_id, metadata={f"k{n}": "v" for n in range(65)}
        )
        bad_key = await call_error(client, "store_memory", content="Another fact.", metadata={"../x": "v"})
        got = await call(client, "get_memory", memory_id=memory_id)
    assert "metadata" in too_many and "metadata" in bad_key
    assert got["memory"]["metadata"] == {"owner": "data"}
    assert [e.get("metadata") for e in journal_events(project) if e["type"] in ("saved", "updated")] == [
        {"owner": "ops", "ticket": "OPS-12"},
        {"owner": "data"},
    ]
