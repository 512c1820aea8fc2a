"""MCP over Streamable HTTP at ``/mcp``: the SDK's own client, the stdio server's tools, and the same
journal as a stdio server's on the same project (real processes on both sides)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from conftest import ProcessGroup, git
from http_server import http_server
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_client import call_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stdio_params(project: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "eventmem", "serve"], cwd=project, env=dict(os.environ)
    )


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


async def test_the_sdk_client_over_http_lists_the_stdio_tools_and_saves(processes: ProcessGroup, project: Path) -> None:
    with http_server(processes, project) as base:
        async with Client(f"{base}/mcp") as http_client, Client(stdio_params(project)) as stdio_client:
            assert await tool_names(http_client) == await tool_names(stdio_client)
            saved = await call_tool(
                http_client, "store_memory", {"content": "Saved over MCP on HTTP.", "tags": ["mcp"]}
            )
            memory = saved["memory"]
        got = httpx.get(f"{base}/api/v1/projects/project/memories/{memory['id']}")
        assert got.status_code == 200 and got.json()["content"] == "Saved over MCP on HTTP."


async def test_an_http_save_is_seen_by_a_stdio_server_and_the_other_way_round(
    processes: ProcessGroup, project: Path
) -> None:
    with http_server(processes, project) as base:
        api = f"{base}/api/v1/projects/project"
        async with Client(stdio_params(project)) as stdio:
            await call_tool(stdio, "recall_memories", {"query": "anything"})  # the stdio server is up and caught up
            over_rest = httpx.post(f"{api}/memories", json={"content": "Written through REST."}).json()["memory"]
            seen = await call_tool(stdio, "get_memory", {"memory_id": over_rest["id"]})
            assert seen["memory"]["content"] == "Written through REST."

            async with Client(f"{base}/mcp") as over_http:
                by_mcp = await call_tool(over_http, "store_memory", {"content": "Written through MCP on HTTP."})
            seen = await call_tool(stdio, "get_memory", {"memory_id": by_mcp["memory"]["id"]})
            assert seen["memory"]["content"] == "Written through MCP on HTTP."

            by_stdio = await call_tool(stdio, "store_memory", {"content": "Written through stdio."})
            got = httpx.get(f"{api}/memories/{by_stdio['memory']['id']}")
            assert got.status_code == 200 and got.json()["content"] == "Written through stdio."
            edited = httpx.put(f"{api}/memories/{by_stdio['memory']['id']}", json={"title": "Edited over REST"})
            assert edited.status_code == 200
            seen = await call_tool(stdio, "get_memory", {"memory_id": by_stdio["memory"]["id"]})
            assert seen["memory"]["title"] == "Edited over REST"


async def test_several_projects_behind_one_server_are_named_by_header_or_query(
    processes: ProcessGroup, tmp_path: Path
) -> None:
    roots = {}
    for name in ("alpha", "beta"):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        git(roots[name], "init", "-q", "-b", "main")
    options = [arg for name, root in roots.items() for arg in ("--project", f"{name}={root}")]
    with http_server(processes, tmp_path, *options) as base:
        saved: dict[str, Any] = {}
        for name in roots:
            headers = {"X-Eventmem-Project": name}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
            ):
                saved[name] = (await call_tool(client, "store_memory", {"content": f"A fact of {name}."}))["memory"]
        for name, memory in saved.items():
            other = "beta" if name == "alpha" else "alpha"
            assert httpx.get(f"{base}/api/v1/projects/{name}/memories/{memory['id']}").status_code == 200
            assert httpx.get(f"{base}/api/v1/projects/{other}/memories/{memory['id']}").status_code == 404
            assert (roots[name] / ".eventmem" / "journal").is_dir()
        async with Client(f"{base}/mcp?project=beta") as client:
            found = await call_tool(client, "recall_memories", {"query": "fact"})
            assert [m["id"] for m in found["results"]] == [saved["beta"]["id"]]
        unnamed = httpx.post(f"{base}/mcp", json={}, headers={"Accept": "application/json, text/event-stream"})
        assert unnamed.status_code == 400 and "alpha, beta" in unnamed.json()["detail"]
        unknown = httpx.post(f"{base}/mcp?project=gamma", json={}, headers={"Accept": "application/json"})
        assert unknown.status_code == 404
