"""Rules that hold on every surface: the MCP tools (a real client), the command line (a real
process) and the REST API (a real server). Each test drives the surface a user would."""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_runner import eventmem, ok_json, save
from conftest import eventmem_command, journal_bytes, reopen
from http_server import http_server_in_process
from mcp_client import PYTEST_CLIENT, call, call_error
from mcp_client import connect as connect_client

pytestmark = pytest.mark.anyio

connect = partial(connect_client, client_info=PYTEST_CLIENT, mode="auto")


# -- a project-context section is long-term on every path -----------------------------------------


async def test_a_project_context_section_cannot_be_given_a_ttl_by_the_update_tool(project: Path) -> None:
    async with connect(project, tools="all") as client:
        await call(client, "update_context_section", section="project", content="Tidewater: tide tables.")
        before = journal_bytes(project)
        error = await call_error(client, "update_memory", memory_id="section:project", ttl_seconds=60)
        assert "section:project" in error and "TTL" in error
        assert journal_bytes(project) == before
        out = await call(client, "bootstrap_project_context")
        assert out["coreContext"]["project"] == "Tidewater: tide tables."


def test_a_project_context_section_cannot_be_given_a_ttl_on_the_command_line(project: Path) -> None:
    save(project, "Tidewater: tide tables for harbours.", "--type", "project")
    before = journal_bytes(project)
    refused = eventmem(project, "update", "section:project", "--ttl", "60")
    assert refused.returncode == 2 and "cannot be given a TTL" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert journal_bytes(project) == before


def test_a_project_context_section_cannot_be_given_a_ttl_over_rest(project: Path) -> None:
    with http_server_in_process(project) as base, httpx.Client(base_url=f"{base}/api/v1") as api:
        made = api.post("/memories", json={"content": "Tidewater: tide tables.", "type": "project"})
        assert made.status_code == 201, made.text
        refused = api.put("/memories/section:project", json={"ttl_seconds": 60})
        assert refused.status_code == 400 and "TTL" in refused.json()["detail"]
        assert api.get("/memories/section:project").json()["ttl_seconds"] is None
        missing = api.get("/memories/01ARZ3NDEKTSV4RRFFQ69G5FAV")  # an id no memory has
        assert missing.status_code == 404 and "POST /api/v1/memories/search" in missing.json()["detail"]
        assert "recall_memories" not in missing.json()["detail"]


# -- text that is not UTF-8 -----------------------------------------------------------------------


def test_text_that_is_not_utf8_is_refused_in_one_line_with_exit_2(project: Path) -> None:
    bad = b"bad \xff\xfe"
    result = subprocess.run(
        [*(part.encode() for part in eventmem_command("save")), bad], cwd=project, capture_output=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0] and "Traceback" not in lines[0]
    assert not (project / ".eventmem" / "journal").exists() or not journal_bytes(project)
    piped = subprocess.run(eventmem_command("save", "-"), cwd=project, input=bad, capture_output=True, timeout=120)
    assert piped.returncode == 2 and b"not UTF-8" in piped.stderr and b"Traceback" not in piped.stderr


# -- a file that is not what its format expects ----------------------------------------------------


def test_import_markdown_of_a_jsonl_file_is_refused_and_writes_nothing(project: Path, tmp_path: Path) -> None:
    jsonl = tmp_path / "notes.jsonl"
    jsonl.write_text('{"type": "entity", "name": "Alice", "entityType": "person", "observations": []}\n')
    refused = eventmem(project, "import", "markdown", str(jsonl))
    assert refused.returncode == 2 and "not a markdown note" in refused.stderr, refused.stderr
    assert not (project / ".eventmem" / "journal").exists() or not journal_bytes(project)


@pytest.mark.parametrize("name", ["memory.jsonl", "dump.json", "memory.db"])
def test_import_instructions_of_a_data_file_is_refused_and_writes_nothing(
    project: Path, tmp_path: Path, name: str
) -> None:
    data = tmp_path / name
    data.write_text('{"type": "entity", "name": "Alice", "entityType": "person", "observations": []}\n')
    refused = eventmem(project, "import", "instructions", str(data))
    assert refused.returncode == 2 and "is not an instruction file" in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert not (project / ".eventmem" / "journal").exists() or not journal_bytes(project)
    rules = tmp_path / ".cursorrules"  # (plain text without a suffix is one)
    rules.write_text("Use tabs in Makefiles.\n")
    assert eventmem(project, "import", "instructions", str(rules)).returncode == 0


# -- tool arguments --------------------------------------------------------------------------------


async def test_a_bad_metadata_key_is_named_with_why(project: Path) -> None:
    async with connect(project) as client:
        error = await call_error(client, "store_memory", content="A fact.", metadata={"bad key": "x"})
    assert "'bad key'" in error and "letters, digits" in error and "a dict" not in error


async def test_importance_true_and_unknown_arguments_are_refused_naming_the_argument(project: Path) -> None:
    async with connect(project) as client:
        error = await call_error(client, "store_memory", content="A fact.", importance=True)
        assert "importance: expected a number from 0 to 1, got true" in error
        error = await call_error(client, "store_memory", content="A fact.", tag=["typo"])
        assert "unknown argument 'tag'" in error and "tags" in error
        error = await call_error(client, "recall_memories", query="fact", limt=3)
        assert "'limt'" in error
    assert not (project / ".eventmem" / "journal").exists() or not journal_bytes(project)


async def test_ttl_zero_means_long_term_in_the_update_tool(project: Path) -> None:
    async with connect(project) as client:
        made = await call(client, "store_memory", content="A passing note about the runner.", ttl_seconds=600)
        updated = await call(client, "update_memory", memory_id=made["memory"]["id"], ttl_seconds=0)
    assert updated["memory"]["ttl_seconds"] is None


# -- two typed links between the same two memories --------------------------------------------------


async def test_two_typed_links_between_the_same_memories_are_both_shown(project: Path) -> None:
    async with connect(project, tools="all") as client:
        fix = (await call(client, "store_memory", content="Quote the path in the build script.", type="fix"))["memory"]
        bug = (await call(client, "store_memory", content="The build breaks on paths with spaces.", type="problem"))[
            "memory"
        ]
        await call(client, "create_relationship", source_id=fix["id"], target_id=bug["id"], relation="solves")
        await call(client, "create_relationship", source_id=fix["id"], target_id=bug["id"], relation="has_spaces")
        related = (await call(client, "get_related_memories", memory_id=fix["id"]))["related"]
    assert sorted((r["id"], r["relation"]) for r in related) == sorted(
        [(bug["id"], "solves"), (bug["id"], "has_spaces")]
    )


# -- the .ai view after the command line's writes -------------------------------------------------------


def test_the_command_line_renders_the_ai_view_after_its_writes_and_a_rebuild(project: Path) -> None:
    (project / ".eventmem").mkdir()
    (project / ".eventmem" / "config.toml").write_text('render_ai_dir = ".ai"\n', encoding="utf-8")
    made = save(project, "We chose PostgreSQL for the ledger.", "--type", "decision", "--title", "Ledger store")
    decisions = project / ".ai" / "decisions.md"
    assert "PostgreSQL for the ledger" in decisions.read_text(encoding="utf-8")
    ok_json(project, "update", made["id"], "--content", "We chose SQLite for the ledger.")
    assert "SQLite for the ledger" in decisions.read_text(encoding="utf-8")
    ok_json(project, "delete", made["id"])
    assert "ledger" not in decisions.read_text(encoding="utf-8")
    decisions.unlink()
    ok_json(project, "rebuild")
    assert decisions.exists()


# -- ids in any case, and by prefix -------------------------------------------------------------------


def test_the_command_line_takes_an_id_in_any_case_or_a_unique_prefix(project: Path) -> None:
    first = save(project, "Deploys go out on Tuesdays.")
    second = save(project, "Hotfixes may go out any day.")
    assert ok_json(project, "show", first["id"].lower())["memory"]["id"] == first["id"]
    common = next(n for n in range(26) if first["id"][n] != second["id"][n])
    prefix = first["id"][: max(6, common + 1)]
    assert ok_json(project, "show", prefix.lower())["memory"]["id"] == first["id"]
    if common >= 6:  # (two ids made in one millisecond differ late)
        ambiguous = eventmem(project, "show", first["id"][:common])
        assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    short = eventmem(project, "show", first["id"][:5])
    assert short.returncode == 2 and "eventmem search" in short.stderr and "recall_memories" not in short.stderr


async def test_the_tools_take_an_id_in_any_case(project: Path) -> None:
    async with connect(project) as client:
        made = (await call(client, "store_memory", content="Backups run nightly at two."))["memory"]
        got = await call(client, "get_memory", memory_id=made["id"].lower())
    assert got["memory"]["id"] == made["id"]


def test_the_rest_routes_take_an_id_in_any_case_or_a_unique_prefix(project: Path) -> None:
    service = reopen(project)
    memory_id = service.save("The API is versioned under /v1.").id
    service.close()
    with http_server_in_process(project) as base, httpx.Client(base_url=f"{base}/api/v1") as api:
        assert api.get(f"/memories/{memory_id.lower()}").json()["id"] == memory_id
        assert api.get(f"/memories/{memory_id[:8]}").json()["id"] == memory_id
        history: Any = api.get(f"/memories/{memory_id[:8].lower()}/history").json()
        assert history["memory"] == memory_id and history["history"][0]["type"] == "saved"
        assert json.loads(api.get(f"/memories/{memory_id[:5]}").text)["status"] == 404
