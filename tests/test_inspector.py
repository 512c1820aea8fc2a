"""A third-party MCP client, the MCP Inspector's CLI, drives `eventmem serve` over stdio.

`.ci/run` installs the Inspector with npm into `.ci/inspector/`; elsewhere set MCP_INSPECTOR to
its `mcp-inspector` binary. Without it these tests are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def inspector() -> str:
    candidates = [
        os.environ.get("MCP_INSPECTOR", ""),
        str(REPO / ".ci" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and shutil.which("node"):
            return candidate
    pytest.skip("the MCP Inspector is not installed (.ci/run installs it with npm)")


def run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # the Inspector starts the server with only the variables given by -e, in the --cwd given
    server_env = [f"EVENTMEM_ROOT={project}", f"EVENTMEM_GLOBAL_DIR={os.environ['EVENTMEM_GLOBAL_DIR']}"]
    command = [inspector(), "--cli", "--cwd", str(project)]
    for assignment in server_env:
        command += ["-e", assignment]
    command += [sys.executable, "-m", "eventmem", "serve", *args]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=project, timeout=120)


def call(project: Path, *args: str) -> dict[str, Any]:
    result = run(project, *args)
    assert result.stdout.strip(), result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


def test_the_inspector_lists_the_tools_with_schemas_and_annotations(project: Path) -> None:
    tools = {tool["name"]: tool for tool in call(project, "--method", "tools/list")["tools"]}
    assert {"save_context", "retrieve_context", "store_memory", "recall_memories"} <= tools.keys()
    assert tools["retrieve_context"]["annotations"]["readOnlyHint"] is True
    assert tools["save_context"]["inputSchema"]["required"] == ["context_text"]
    assert all("outputSchema" in tool for tool in tools.values())


def test_the_inspector_saves_retrieves_and_reads_the_summary(project: Path) -> None:
    text = "The staging deploy needs the VPN; run make deploy-staging from the repo root."
    saved = call(project, "--method", "tools/call", "--tool-name", "save_context", "--tool-arg", f"context_text={text}")
    assert saved["isError"] is False
    memory_id = saved["structuredContent"]["id"]
    found = call(
        project, "--method", "tools/call", "--tool-name", "retrieve_context", "--tool-arg", "query=staging deploy"
    )
    assert found["structuredContent"]["results"][0]["id"] == memory_id
    summary = call(project, "--method", "resources/read", "--uri", "memory://summary")
    assert "staging deploy" in summary["contents"][0]["text"]
    journal = "".join(p.read_text() for p in (project / ".eventmem" / "journal").glob("*.jsonl"))
    assert memory_id in journal and '"by":"inspector-cli"' in journal


def test_the_inspector_sees_a_clear_tool_error_for_an_unknown_id(project: Path) -> None:
    result = run(project, "--method", "tools/call", "--tool-name", "get_memory", "--tool-arg", "memory_id=nope")
    # the Inspector prints the tool's result, then its own error line, and exits non-zero
    reply = json.loads(result.stdout.split("\n}\n")[0] + "\n}")
    assert result.returncode != 0
    assert reply["isError"] is True
    assert "no memory with id 'nope'" in reply["content"][0]["text"]
