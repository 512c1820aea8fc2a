"""The README and docs/ name only what exists: every ``eventmem …`` command (and the ``replay`` command,
the import or export format it names) is one the real command line offers, and every MCP tool written
as a call, ``tool(arg, …)``, is one a real ``eventmem serve`` lists, with those arguments. The lists
come from the command line's own help and errors and from a real MCP client's ``tools/list``; the
settings page has a row for every setting a real HTTP server reports; links between pages hold."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_runner import eventmem
from http_server import http_server_in_process
from mcp_client import serve, server_env

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
GLOBAL_OPTIONS = {"--json": 0, "--root": 1}
CALL = re.compile(r"\b([a-z]+(?:_[a-z]+)+)\(([^()`]*)\)")
"""A tool written as a call: ``store_memory(content, type, title?, …)``."""
NOT_TOOLS = {"to_tsvector", "vector_cosine_ops", "archive_memories"}
"""Functions the docs name that are not tools (PostgreSQL's, and one of eventmem's own)."""


def code(text: str) -> list[str]:
    """The code of a markdown page: each line of its fenced blocks, and each inline code span outside them."""
    pieces: list[str] = []
    for i, part in enumerate(re.split(r"^```.*$", text, flags=re.MULTILINE)):
        if i % 2:
            pieces += part.splitlines()
        else:
            pieces += re.findall(r"`([^`\n]+)`", part)
    return pieces


def commands(piece: str) -> list[list[str]]:
    """Each ``eventmem`` command line in a piece of code, as its words from the command on."""
    words = piece.split()
    found = []
    for i, word in enumerate(words):
        if word != "eventmem" and not word.endswith("/eventmem"):
            continue
        rest = words[i + 1 :]
        while rest and rest[0] in GLOBAL_OPTIONS:
            rest = rest[1 + GLOBAL_OPTIONS[rest[0]] :]
        if rest and re.fullmatch(r"[a-z][a-z-]*", rest[0]):
            found.append(rest)
    return found


def named_in_docs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The commands the pages name (the words after ``eventmem``, by page) and the tools called, with
    the arguments written, by tool."""
    named: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for page in PAGES:
        for piece in code(page.read_text(encoding="utf-8")):
            for words in commands(piece):
                named.setdefault(" ".join(words[:2]), set()).add(page.relative_to(REPO).as_posix())
            for name, arguments in CALL.findall(piece):
                given = {re.split(r"[?=]", a.strip())[0] for a in arguments.split(",")}
                calls.setdefault(name, set()).update(a for a in given if re.fullmatch(r"[a-zA-Z_]+", a))
    return named, calls


def choices(help_text: str) -> set[str]:
    match = re.search(r"\{([a-z,-]+)\}", help_text)
    assert match, help_text
    return set(match.group(1).split(","))


@pytest.fixture(scope="module")
def command_line(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """What the real command line offers: its commands, replay's, and the import and export formats."""
    cwd = tmp_path_factory.mktemp("cli")
    top = eventmem(cwd, "--help")
    replay = eventmem(cwd, "replay", "--help")
    offered = {"": choices(top.stdout), "replay": set(re.findall(r"^    ([a-z-]+)\s", replay.stdout, re.MULTILINE))}
    for direction in ("import", "export"):
        refused = eventmem(cwd, direction, "no-such-format", "x")
        assert refused.returncode == 2
        offered[direction] = set(refused.stderr.split("choose one of: ", 1)[1].strip().split(", "))
    assert {"serve", "save", "search"} <= offered[""] and {"log", "at"} <= offered["replay"]
    return offered


def test_every_eventmem_command_the_readme_and_docs_name_exists(command_line: dict[str, set[str]]) -> None:
    named, _ = named_in_docs()
    assert {"serve", "save", "search", "import pmp", "replay log"} <= {" ".join(n.split()[:2]) for n in named}
    wrong = []
    for words, pages in sorted(named.items()):
        command, _, argument = words.partition(" ")
        if command not in command_line[""]:
            wrong.append(f"eventmem {command} ({', '.join(sorted(pages))})")
        elif command in ("replay", "import", "export") and re.fullmatch(r"[a-z][a-z-]*", argument):
            if argument not in command_line[command]:
                wrong.append(f"eventmem {words} ({', '.join(sorted(pages))})")
    assert wrong == []


async def tool_list(project: Path, profile: str) -> dict[str, dict[str, Any]]:
    async with serve(project, server_env(), project.parent / f"{profile}.log", args=["--tools", profile]) as session:
        await session.initialize()
        return {tool.name: tool.input_schema for tool in (await session.list_tools()).tools}


@pytest.mark.anyio
async def test_every_tool_the_docs_call_exists_with_the_arguments_written(project: Path) -> None:
    tools = await tool_list(project, "all")
    _, calls = named_in_docs()
    assert {"store_memory", "recall_memories", "bootstrap_project_context"} <= set(calls)
    unknown = sorted(set(calls) - set(tools) - NOT_TOOLS)
    assert unknown == []
    wrong = {
        name: sorted(given - set(tools[name].get("properties", {})))
        for name, given in calls.items()
        if name in tools and given - set(tools[name].get("properties", {}))
    }
    assert wrong == {}


TOOL_LIKE = re.compile(r"`+([a-z]+(?:_[a-z]+)*_(?:memories|memory|relationship|relationships))`+")
"""A name in backticks that reads as a tool's (``link_memories``): it must be one."""
NOT_TOOL_NAMES = NOT_TOOLS | {"archived_memories"}  # (an event's field)


@pytest.mark.anyio
async def test_every_tool_the_docs_and_the_openapi_document_name_in_backticks_exists(project: Path) -> None:
    tools = await tool_list(project, "all")
    texts = {page.relative_to(REPO).as_posix(): page.read_text(encoding="utf-8") for page in PAGES}
    texts["schema/openapi.json"] = (REPO / "schema" / "openapi.json").read_text(encoding="utf-8")
    named = {(name, where) for where, text in texts.items() for name in TOOL_LIKE.findall(text)}
    assert {"store_memory", "recall_memories"} <= {name for name, _ in named}
    assert sorted((name, where) for name, where in named if name not in tools and name not in NOT_TOOL_NAMES) == []


@pytest.mark.anyio
async def test_the_tools_reference_lists_the_default_profile_counts_and_names_every_tool(project: Path) -> None:
    core, everything = await tool_list(project, "core"), await tool_list(project, "all")
    page = (REPO / "docs" / "tools.md").read_text(encoding="utf-8")
    table = page.split("## The default profile, `core`", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"^\| `([a-z_]+)\(", table, re.MULTILINE))
    assert listed == set(core)
    words = {11: "eleven"}
    assert f"`core` by default, {words.get(len(core), len(core))} tools" in page
    assert f"exposes the whole of every family, {len(everything)} tools" in page
    everywhere = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    assert sorted(name for name in everything if f"`{name}" not in everywhere) == []
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / link).is_file(), link


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_leads_to_a_page_and_a_heading_that_exist() -> None:
    broken = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s:]*)(?:#([\w-]+))?\)", text):
            linked = (page.parent / target).resolve() if target else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.MULTILINE)
                if anchor not in {slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(REPO)}: {target}#{anchor}")
    assert broken == []


def test_the_settings_page_has_a_row_for_every_setting_a_server_reports(project: Path) -> None:
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {
        key
        for line in page.splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", line.split(" | ")[0])
    }
    with http_server_in_process(project) as base:
        reported = httpx.get(f"{base}/api/v1/projects/project/settings").json()["settings"]
    keys = {setting["key"] for setting in reported}
    assert len(keys) > 15
    assert sorted(keys - rows) == []
