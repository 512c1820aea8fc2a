"""Every input bounded, every refusal one line: the table of limits through the tools, the CLI, the
service, the tool schemas and the tools' reference (docs/tools.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from cli_runner import eventmem, ok_json, save
from conftest import REPO, journal_bytes, journal_files
from mcp import Client
from mcp_client import PYTEST_CLIENT, call, call_error, connect, serve, server_env, text_of

from eventmem.adapters.mcp.server import build_server
from eventmem.core.errors import InvalidInput
from eventmem.core.limits import (
    CONTENT_BYTES_CEILING,
    LIMITS,
    MAX_TTL_SECONDS,
    SETTING_LIMITS,
    markdown_table,
    settings_table,
)
from eventmem.journal.config import Config
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService

pytestmark = pytest.mark.anyio

LAST_MOMENT = "9999-12-31T23:59:59.999999Z"


def connect_all(project: Path) -> AbstractAsyncContextManager[Client]:
    """A client of a server exposing every tool family."""
    return connect(project, client_info=PYTEST_CLIENT, tools="all")


def tool_schemas() -> dict[str, dict[str, Any]]:
    """The input schema of every tool, as the server lists them."""
    server = build_server(RootChoice(REPO, "test"), tools="all")
    return {tool.name: tool.input_schema for tool in anyio.run(server.list_tools)}


TOOL_SCHEMAS = tool_schemas()


# -- the docs and the schemas show the table -----------------------------------------------------------


def test_the_security_docs_settings_table_is_the_one_generated_from_the_limits() -> None:
    docs = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    start, end = "<!-- settings:start -->\n", "<!-- settings:end -->"
    shown = docs[docs.index(start) + len(start) : docs.index(end)]
    assert shown == settings_table()
    for name in SETTING_LIMITS:
        assert f"| `{name}` |" in shown


def test_every_numeric_setting_has_a_floor_and_a_ceiling() -> None:
    numeric = {f.name for f in msgspec.structs.fields(Config) if f.type in (int, float)}
    assert numeric == set(SETTING_LIMITS)
    for entry in SETTING_LIMITS.values():
        assert entry.low <= entry.high < 1e12


def test_the_documented_limits_table_is_the_one_generated_from_the_table() -> None:
    readme = (REPO / "docs" / "tools.md").read_text(encoding="utf-8")
    start, end = "<!-- limits:start -->\n", "<!-- limits:end -->"
    assert start in readme and end in readme
    shown = readme[readme.index(start) + len(start) : readme.index(end)]
    assert shown == markdown_table()
    for name in LIMITS:
        assert f"| `{name}` |" in shown


#: which limit bounds a tool parameter (the same name unless listed)
PARAMETER_LIMITS = {
    "context_text": "content",
    "min_importance": "importance",
    "max_importance": "importance",
    "source_id": "memory_id",
    "target_id": "memory_id",
    "created_after": "time",
    "created_before": "time",
    "updated_after": "time",
    "updated_before": "time",
}
#: parameters of the project-context tools, whose texts are bounded like a memory's content
CONTEXT_PARAMETERS = {
    "task": "content",
    "content": "content",
    "decision": "content",
    "rationale": "content",
    "summary": "content",
    "currentTask": "content",
    "title": "title",
    "recentChanges": "entries",
    "decisions": "entries",
}
CONTEXT_TOOLS = {
    "update_current_task",
    "update_context_section",
    "add_decision",
    "record_conversation_summary",
    "suggest_context_updates",
    "run_conversation_end_workflow",
}
BOUNDED_TOOLS = {
    "store_memory",
    "recall_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "search_memories",
    "get_context",
    "create_relationship",
    "get_related_memories",
    "promote_memory",
    "supersede",
    "save_context",
    "retrieve_context",
}


def _arm(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null alternative of an optional parameter."""
    arms = [arm for arm in schema.get("anyOf", [schema]) if arm.get("type") != "null"]
    assert len(arms) == 1, schema
    return arms[0]


async def test_every_tool_schema_shows_the_bounds_of_the_table(project: Path) -> None:
    async with connect_all(project) as client:
        tools = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
    assert BOUNDED_TOOLS | CONTEXT_TOOLS <= set(tools)
    checked: set[tuple[str, str]] = set()
    for tool in sorted(BOUNDED_TOOLS | CONTEXT_TOOLS):
        for parameter, schema in tools[tool]["properties"].items():
            name = "related_limit" if (tool, parameter) == ("get_related_memories", "limit") else parameter
            name = PARAMETER_LIMITS.get(name, name)
            if tool in CONTEXT_TOOLS:
                name = CONTEXT_PARAMETERS.get(parameter, "")
            if name not in LIMITS or ("anyOf" in schema and len(schema["anyOf"]) > 2):  # (str or list filters)
                continue
            entry, arm = LIMITS[name], _arm(schema)
            checked.add((tool, parameter))
            if entry.unit in ("number", "whole number"):
                low = 0 if (tool, parameter) == ("update_memory", "ttl_seconds") else entry.low  # 0: long-term
                assert (arm["minimum"], arm["maximum"]) == (low, entry.high), (tool, parameter, arm)
            elif entry.unit == "items" and arm.get("type") == "object":  # a memory's metadata
                assert arm["maxProperties"] == entry.high, (tool, parameter, arm)
                assert arm["propertyNames"]["maxLength"] == LIMITS["metadata_key"].high, (tool, parameter, arm)
                (values,) = arm["patternProperties"].values()
                assert values["maxLength"] == LIMITS["metadata_value"].high, (tool, parameter, arm)
            elif entry.unit == "items":
                assert arm["maxItems"] == entry.high, (tool, parameter, arm)
                each = LIMITS["tag"].high if name == "tags" else CONTENT_BYTES_CEILING
                assert arm["items"]["maxLength"] == each, (tool, parameter, arm)
            elif name == "content":  # the setting may raise it up to the ceiling; the service checks the setting
                assert arm["maxLength"] == CONTENT_BYTES_CEILING, (tool, parameter, arm)
            else:
                assert arm["maxLength"] == entry.high, (tool, parameter, arm)
                assert arm.get("minLength", 0) == entry.low, (tool, parameter, arm)
    expected = {
        ("store_memory", "content"),
        ("store_memory", "ttl_seconds"),
        ("update_memory", "title"),
        ("update_memory", "ttl_seconds"),
        ("delete_memory", "reason"),
        ("save_context", "tags"),
        ("create_relationship", "strength"),
        ("get_related_memories", "limit"),
        ("get_context", "max_chars"),
        ("search_memories", "created_after"),
        ("retrieve_context", "query"),
        ("update_current_task", "task"),
        ("record_conversation_summary", "decisions"),
        ("add_decision", "title"),
        ("store_memory", "metadata"),
        ("update_memory", "metadata"),
    }
    assert expected <= checked
    assert len(checked) >= 70


# -- argument errors are one line ----------------------------------------------------------------------


def _one_line(text: str, tool: str) -> None:
    assert "\n" not in text, text
    assert "http" not in text.lower() and "validation error" not in text.lower(), text
    assert text.startswith(f"Error executing tool {tool}: "), text


REQUIRING = sorted(name for name, schema in TOOL_SCHEMAS.items() if schema.get("required"))
TAKING = sorted(name for name, schema in TOOL_SCHEMAS.items() if schema.get("properties"))


async def test_a_call_missing_a_required_argument_says_so_in_one_line(project: Path) -> None:
    async with connect_all(project) as client:  # (one server for every tool: a refused call writes nothing)
        for tool in REQUIRING:
            text = await call_error(client, tool)
            _one_line(text, tool)
            for name in TOOL_SCHEMAS[tool]["required"]:
                assert f"{name} is required" in text, text
            assert not (project / ".eventmem" / "journal").exists(), tool


async def test_a_wrong_typed_argument_is_named_in_one_line_with_what_was_expected_and_given(project: Path) -> None:
    async with connect_all(project) as client:  # (one server for every tool: a refused call writes nothing)
        for tool in TAKING:
            parameter = sorted(TOOL_SCHEMAS[tool]["properties"])[0]
            text = await call_error(client, tool, **{parameter: {"not": "this"}})
            _one_line(text, tool)
            assert f"{parameter}: expected " in text and ", got a dict" in text, text
            assert not (project / ".eventmem" / "journal").exists(), tool


async def test_a_wrong_typed_argument_over_stdio_is_one_line_saying_what_was_expected(
    project: Path, tmp_path: Path
) -> None:
    async with serve(project, server_env(), tmp_path / "stderr.log") as session:
        await session.initialize()
        wrong = await call_error(session, "store_memory", content="a", importance="high")
        missing = await call_error(session, "get_memory")
    assert wrong == "Error executing tool store_memory: importance: expected a number from 0 to 1, got 'high'"
    assert missing == "Error executing tool get_memory: memory_id is required"


# -- every field at and beyond its bounds, on every tool taking it -------------------------------------

ID = "{id}"
"""Replaced by the id of a memory saved just before the call."""
MAX_ID = "m" * 128


def _text(name: str, extra: int = 0) -> str:
    return "x" * (int(LIMITS[name].high) + extra)


def _tags(count: int, length: int = 5) -> list[str]:
    return [f"{i:0{length}d}" for i in range(count)]


# (field, tool, arguments at the bound, the argument beyond it)
FIELD_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    *[
        ("title", tool, base | {"title": _text("title")}, {"title": _text("title", 1)})
        for tool, base in (
            ("store_memory", {"content": "a"}),
            ("update_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
    ],
    *[
        ("summary", tool, base | {"summary": _text("summary")}, {"summary": _text("summary", 1)})
        for tool, base in (
            ("store_memory", {"content": "a"}),
            ("save_context", {"context_text": "a"}),
            ("update_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
    ],
    *[
        (field, tool, base | {"tags": ok}, {"tags": bad})
        for tool, base in (
            ("store_memory", {"content": "a"}),
            ("save_context", {"context_text": "a"}),
            ("update_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
        for field, ok, bad in (
            ("tags", _tags(32), _tags(33)),
            ("tag", ["t" * 64], ["t" * 65]),
        )
    ],
    *[
        ("importance", tool, base | {"importance": value}, {"importance": beyond})
        for tool, base in (
            ("store_memory", {"content": "a"}),
            ("update_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
        for value, beyond in ((0, -0.01), (1, 1.01))
    ],
    *[
        ("ttl_seconds", tool, base | {"ttl_seconds": MAX_TTL_SECONDS}, {"ttl_seconds": beyond})
        for tool, base in (
            ("store_memory", {"content": "a"}),
            ("update_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
        for beyond in (MAX_TTL_SECONDS + 1, 10**15, 10**30, -1)
    ],
    ("ttl_seconds", "store_memory", {"content": "a", "ttl_seconds": 1}, {"ttl_seconds": 0}),
    *[
        ("reason", tool, base | {"reason": _text("reason")}, {"reason": _text("reason", 1)})
        for tool, base in (
            ("delete_memory", {"memory_id": ID}),
            ("promote_memory", {"memory_id": ID}),
            ("supersede", {"memory_id": ID, "content": "b"}),
        )
    ],
    *[
        (field, "create_relationship", {"source_id": ID, "target_id": ID} | ok, bad)
        for field, ok, bad in (
            ("context", {"context": _text("context")}, {"context": _text("context", 1)}),
            ("relation", {"relation": "r" * 64}, {"relation": "r" * 65}),
            ("strength", {"strength": 1}, {"strength": 1.5}),
            ("strength", {"strength": 0}, {"strength": -0.5}),
        )
    ],
    *[
        (field, tool, {"query": "a"} | ok, bad)
        for tool in ("recall_memories", "search_memories", "retrieve_context")
        for field, ok, bad in (
            ("query", {"query": "q " * 2000}, {"query": "q " * 2000 + "q"}),
            ("limit", {"limit": 100}, {"limit": 101}),
            ("limit", {"limit": 1}, {"limit": 0}),
        )
    ],
    *[
        (field, tool, {"query": "a", name: ok}, {name: bad})
        for tool in ("recall_memories", "search_memories")
        for field, name, ok, bad in (
            ("importance", "min_importance", 1, 1.5),
            ("time", "created_after", "2026-01-01T00:00:00." + "0" * 43 + "Z", "2026-01-01T00:00:00." + "0" * 44 + "Z"),
        )
    ],
    ("project", "search_memories", {"project": _text("project")}, {"project": _text("project", 1)}),
    ("importance", "search_memories", {"max_importance": 0}, {"max_importance": -1}),
    ("related_limit", "get_related_memories", {"memory_id": ID, "limit": 500}, {"limit": 501}),
    ("depth", "get_related_memories", {"memory_id": ID, "depth": 5}, {"depth": 6}),
    ("depth", "get_related_memories", {"memory_id": ID, "depth": 1}, {"depth": 0}),
    ("max_chars", "get_context", {"max_chars": 200}, {"max_chars": 199}),
    ("max_chars", "get_context", {"max_chars": 200_000}, {"max_chars": 200_001}),
    ("per_type", "get_context", {"per_type": 100}, {"per_type": 101}),
    ("memory_id", "get_memory", {"memory_id": ID}, {"memory_id": MAX_ID + "m"}),
    ("memory_id", "delete_memory", {"memory_id": ID}, {"memory_id": MAX_ID + "m"}),
    ("content", "store_memory", {"content": "c" * 65_536}, {"content": "c" * (CONTENT_BYTES_CEILING + 1)}),
]


async def test_every_field_is_accepted_at_its_bound_and_refused_beyond_it_on_every_tool_taking_it(
    project: Path,
) -> None:
    async with connect_all(project) as client:  # (one server for every field: each case saves its own memories)
        for field, tool, at_bound, beyond in FIELD_CASES:
            fresh = await call(client, "store_memory", content=f"A memory for {tool} {len(str(at_bound))}.")
            other = await call(client, "store_memory", content=f"Another memory for {tool} {len(str(beyond))}.")
            ids = iter([fresh["memory"]["id"], other["memory"]["id"]])
            args = {k: next(ids) if v == ID else v for k, v in at_bound.items()}
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, text_of(result)[:300])
            await call(client, "get_current_task")  # (runs the work left after the last reply: a promotion it earned)
            before = journal_files(project)
            args |= {k: (fresh["memory"]["id"] if v == ID else v) for k, v in beyond.items()}
            text = await call_error(client, tool, **args)
            _one_line(text, tool)
            (name,) = beyond
            assert f"{name}" in text and "expected" in text, (field, tool, text)
            assert len(text) < 300, text
            assert journal_files(project) == before, (tool, beyond)


CLI_CASES: list[tuple[list[str], str]] = [
    (["save", "a", "--title", _text("title", 1)], "title: expected at most 200 characters, got 201 characters"),
    (["save", "a", "--summary", _text("summary", 1)], "summary: expected at most 1,000 characters"),
    (["save", "a", "--tags", ",".join(_tags(33))], "tags: expected at most 32 items, got 33 items"),
    (["save", "a", "--tag", "t" * 65], "tag: expected at most 64 characters, got 65 characters"),
    (["save", "a", "--importance", "1.5"], "importance: expected a number from 0 to 1, got 1.5"),
    (["save", "a", "--ttl", "253402300800"], "ttl_seconds: expected a whole number from 1 to 3,153,600,000"),
    (["save", "a", "--ttl", str(MAX_TTL_SECONDS + 1)], "ttl_seconds: expected a whole number from 1"),
    (["save", "a", "--ttl", "0"], "ttl_seconds: expected a whole number from 1"),
    (["update", ID, "--title", _text("title", 1)], "title: expected at most 200 characters"),
    (["update", ID, "--ttl", str(10**30)], "ttl_seconds: expected a whole number from 1 to 3,153,600,000"),
    (["update", ID, "--tags", ",".join(_tags(33))], "tags: expected at most 32 items"),
    (["delete", ID, "--reason", _text("reason", 1)], "reason: expected at most 2,000 characters"),
    (["search", "a", "--limit", "101"], "limit: expected a whole number from 1 to 100, got 101"),
    (["search", "q " * 2001], "query: expected at most 4,000 characters"),
    (["search", "a", "--min-importance", "2"], "min_importance: expected a number from 0 to 1, got 2"),
    (["log", "--limit", "10001"], "limit: expected a whole number from 1 to 10,000"),
    (["show", MAX_ID + "m"], "memory_id: expected at most 128 characters, got 129 characters"),
]


@pytest.mark.parametrize(("args", "message"), CLI_CASES, ids=[m.split(":")[0] + "-" + a[0] for a, m in CLI_CASES])
def test_the_cli_refuses_a_field_beyond_its_bound_in_one_line_and_writes_nothing(
    project: Path, args: list[str], message: str
) -> None:
    memory = save(project, "A memory the commands work on")
    before = journal_bytes(project)
    result = eventmem(project, *[memory["id"] if a == ID else a for a in args])
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == "", result.stderr
    assert journal_bytes(project) == before


def test_the_cli_accepts_every_field_at_its_bound(project: Path) -> None:
    memory = save(
        project,
        "At the bounds",
        "--title",
        _text("title"),
        "--summary",
        _text("summary"),
        "--tags",
        ",".join(_tags(32)),
        "--importance",
        "0",  # (1 would promote it at once: long-term)
        "--ttl",
        str(MAX_TTL_SECONDS),
    )
    assert len(memory["title"]) == 200 and len(memory["tags"]) == 32 and memory["ttl_seconds"] == MAX_TTL_SECONDS
    assert memory["expires_at"] < LAST_MOMENT
    assert ok_json(project, "search", "bounds", "--limit", "100")["results"][0]["id"] == memory["id"]
    assert ok_json(project, "delete", memory["id"], "--reason", _text("reason"))["deleted"] is True


# -- sizes are checked before any work ------------------------------------------------------------------

MILLION_TAGS = [str(i) for i in range(1_000_000)]
FIFTY_MB = "z" * 50_000_000


def test_the_service_counts_a_list_and_measures_a_text_before_working_on_them(service: MemoryService) -> None:
    """A late check would take minutes here: removing duplicates among a million tags one by one is
    quadratic, and the secret scrubber reads all of a text."""
    memory = service.save("A memory to update and delete")
    refusals: list[tuple[Callable[[], Any], str]] = [
        (lambda: service.save("x", tags=MILLION_TAGS), "tags: expected at most 32 items, got 1,000,000 items"),
        (lambda: service.update(memory.id, tags=MILLION_TAGS), "tags: expected at most 32 items"),
        (lambda: service.save(FIFTY_MB), "content is over 65536 bytes"),
        (lambda: service.save("x", title=FIFTY_MB), "title: expected at most 200 characters, got 50,000,000"),
        (lambda: service.update(memory.id, title="t" * 60_000), "title: expected at most 200 characters"),
        (lambda: service.delete(memory.id, reason=FIFTY_MB), "reason: expected at most 2,000 characters"),
        (lambda: service.recall(FIFTY_MB), "query: expected at most 4,000 characters"),
        (lambda: service.link(memory.id, memory.id, context=FIFTY_MB), "context: expected at most 2,000"),
    ]
    for attempt, message in refusals:
        with pytest.raises(InvalidInput) as refused:
            attempt()
        assert message in str(refused.value) and "\n" not in str(refused.value)
    assert service.get(memory.id).status == "live"


async def test_a_million_tags_or_a_fifty_megabyte_text_through_mcp_is_refused_in_one_line(project: Path) -> None:
    async with connect_all(project) as client:
        memory = await call(client, "store_memory", content="Still here afterwards.")
        memory_id = memory["memory"]["id"]
        before = journal_files(project)
        tags = await call_error(client, "store_memory", content="x", tags=MILLION_TAGS)
        content = await call_error(client, "save_context", context_text=FIFTY_MB)
        title = await call_error(client, "update_memory", memory_id=memory_id, title="t" * 60_000)
        reason = await call_error(client, "delete_memory", memory_id=memory_id, reason="r" * 10_000_000)
        still = await call(client, "get_memory", memory_id=memory_id)
    assert journal_files(project) == before
    assert "tags: expected a list of at most 32 strings" in tags and "got 1,000,000 items" in tags
    assert "context_text: expected a string of at most 1,048,576 characters, got 50,000,000 characters" in content
    assert "title: expected a string of at most 200 characters, got 60,000 characters" in title
    assert "reason: expected a string of at most 2,000 characters, got 10,000,000 characters" in reason
    for text in (tags, content, title, reason):
        assert "\n" not in text and len(text) < 200
    assert still["memory"]["status"] == "live"


def test_a_fifty_megabyte_text_or_tags_by_the_hundred_thousand_through_the_cli_are_refused(project: Path) -> None:
    save(project, "The one memory")
    before = journal_bytes(project)
    huge = eventmem(project, "save", "-", stdin=FIFTY_MB)
    assert huge.returncode != 0 and "content is over 65536 bytes" in huge.stderr
    chunks = [",".join(str(i) for i in range(start, start + 10_000)) for start in range(0, 150_000, 10_000)]
    many = eventmem(project, "save", "tagged", *[arg for chunk in chunks for arg in ("--tag", chunk)])
    assert many.returncode != 0 and "tags: expected at most 32 items, got 150,000 items" in many.stderr
    assert journal_bytes(project) == before


# -- required text needs a visible character ------------------------------------------------------------


async def test_required_text_of_control_characters_only_is_refused_and_text_holding_one_is_kept_as_given(
    project: Path,
) -> None:
    async with connect_all(project) as client:
        kept = await call(client, "store_memory", content="tab\there \x01 and a bell\x07")
        memory_id = kept["memory"]["id"]
        before = journal_files(project)
        errors = [
            await call_error(client, "store_memory", content="\x00"),
            await call_error(client, "save_context", context_text="\x00\x01 \t\u200b"),
            await call_error(client, "update_memory", memory_id=memory_id, content="\x7f"),
            await call_error(client, "supersede", memory_id=memory_id, content="\x00"),
            await call_error(client, "retrieve_context", query="\x00"),
        ]
        got = await call(client, "get_memory", memory_id=memory_id)
    for text in errors:
        assert "expected a text with a visible character" in text and "\n" not in text, text
    assert journal_files(project) == before
    assert got["memory"]["content"] == "tab\there \x01 and a bell\x07"
    cli = eventmem(project, "save", "\x01\x02")
    assert cli.returncode != 0 and "content: expected a text with a visible character" in cli.stderr
    assert journal_files(project) == before


# -- a stamp plus a TTL already in a journal never breaks a read ----------------------------------------


@pytest.mark.parametrize("ttl", [10**15, 2**63 - 1, 10**30, -(10**30)], ids=["1e15", "int64", "1e30", "minus-1e30"])
def test_a_huge_ttl_already_in_the_journal_breaks_no_command_and_the_memory_can_be_deleted(
    project: Path, ttl: int
) -> None:
    """A merged line the tools would have refused: shown with an expiry clamped to the year 9999 (or
    as expired), and still deletable, rebuildable and listed in the history."""
    memory = save(project, "A memory a hand edit gave a huge TTL")
    segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
    line = {
        "type": "updated",
        "id": "01M8QWM4G62HVTREZA28FN8RYZ",
        "ts": memory["created_at"][:-4] + "999Z",
        "by": "hand",
        "memory": memory["id"],
        "ttl_seconds": ttl,
    }
    with segment.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    for args in (["rebuild"], ["stats"], ["log", memory["id"]], ["search", "huge TTL"], ["search", "--json", "x"]):
        result = eventmem(project, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    shown = eventmem(project, "show", memory["id"], "--json")
    assert "Traceback" not in shown.stderr, shown.stderr
    if ttl > 0:
        assert shown.returncode == 0, shown.stderr
        expires = json.loads(shown.stdout)["memory"]["expires_at"]
        assert expires in (None, LAST_MOMENT)  # (None: a decoder that skips the line as invalid)
        deleted = eventmem(project, "delete", memory["id"])
        assert deleted.returncode == 0, deleted.stderr
        assert eventmem(project, "show", memory["id"]).returncode != 0
    else:
        assert shown.returncode in (0, 2)
        assert shown.returncode == 0 or "expired at 0001-01-01T00:00:00.000000Z" in shown.stderr


def test_a_ttl_past_the_year_9999_is_refused_before_anything_is_appended(service: MemoryService) -> None:
    for ttl in (253_402_300_800, 10**15, 10**30, 2**64):
        with pytest.raises(InvalidInput, match="ttl_seconds: expected a whole number from 1 to 3,153,600,000"):
            service.save("never written", ttl_seconds=ttl)
    assert not (service.project.paths.base / "journal").exists() or not any(
        (service.project.paths.base / "journal").glob("*.jsonl")
    )


# -- a search returns nothing rather than noise ---------------------------------------------------------


async def test_a_query_that_matches_nothing_returns_nothing_while_a_listing_still_lists(project: Path) -> None:
    for text in ("We deploy with blue-green switches.", "Invoices are numbered per organization.", "Use UTC."):
        save(project, text)
    assert eventmem(project, "search", "nothingmatcheszzz").stdout == "no memories match\n"
    assert ok_json(project, "search", "nothingmatcheszzz", "--mode", "vector")["results"] == []
    assert [h["summary"] for h in ok_json(project, "search", "invoice numbering")["results"]][:1] == [
        "Invoices are numbered per organization."
    ]
    async with connect_all(project) as client:
        for tool in ("recall_memories", "search_memories", "retrieve_context"):
            found = await call(client, tool, query="nothingmatcheszzz")
            assert found["results"] == [], (tool, found["results"])
        listing = await call(client, "search_memories")
        deployed = await call(client, "recall_memories", query="how do we deploy")
    assert len(listing["results"]) == 3
    assert deployed["results"][0]["summary"] == "We deploy with blue-green switches."
