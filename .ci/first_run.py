"""Drive a freshly installed ``eventmem serve`` as a user's MCP client does: initialize, list the
tools, save a memory, retrieve it. Run by ``.ci/run`` with the Python of a virtual environment made
exactly as the README's first line says (no extras), so a bare install that cannot serve is a red CI.

    python .ci/first_run.py PATH/TO/eventmem [PROJECT_DIR]

Uses only what a bare install brings (the MCP SDK); exits 1 with the reason on any failure.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

EXPECTED_TOOLS = {"save_context", "retrieve_context", "store_memory", "recall_memories"}


def _text(result: object) -> str:
    return "\n".join(b.text for b in getattr(result, "content", []) if isinstance(b, TextContent))


class FirstRunFailed(Exception):
    """What a user would have seen go wrong."""


async def drive(executable: str, project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
    env["EVENTMEM_GLOBAL_DIR"] = str(project / ".global-memory")
    params = StdioServerParameters(command=executable, args=["serve"], cwd=project, env=env)
    started = time.perf_counter()
    errlog = project / "serve.stderr"
    with errlog.open("w", encoding="utf-8") as stderr:
        async with stdio_client(params, errlog=stderr) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                initialized = time.perf_counter() - started
                tools = {tool.name for tool in (await session.list_tools()).tools}
                missing = EXPECTED_TOOLS - tools
                if missing:
                    raise FirstRunFailed(f"first run: the server lacks the tools {sorted(missing)}")
                saved = await session.call_tool(
                    "save_context", {"context_text": "We deploy with blue-green releases behind the load balancer."}
                )
                if saved.is_error:
                    raise FirstRunFailed(f"first run: save_context failed: {_text(saved)}")
                found = await session.call_tool("retrieve_context", {"query": "how do we deploy"})
                if found.is_error or "blue-green" not in _text(found) + str(found.structured_content):
                    raise FirstRunFailed(f"first run: retrieve_context did not return the saved memory: {_text(found)}")
    log = errlog.read_text(encoding="utf-8")
    if "Traceback" in log:
        raise FirstRunFailed(f"first run: the server wrote a traceback:\n{log}")
    print(
        f"first run: initialize in {initialized:.2f} s, {len(tools)} tools, save and retrieve answered "
        f"({time.perf_counter() - started:.2f} s in all)"
    )


def main() -> None:
    executable = sys.argv[1]
    if os.sep in executable:  # (the server starts in the project folder: a relative path would not be found)
        executable = str(Path(executable).resolve())
    if len(sys.argv) > 2:
        project = Path(sys.argv[2])
        project.mkdir(parents=True, exist_ok=True)
        run(executable, project)
        return
    with tempfile.TemporaryDirectory(prefix="eventmem-first-run-") as folder:
        run(executable, Path(folder))


def run(executable: str, project: Path) -> None:
    try:
        anyio.run(drive, executable, project)
    except* FirstRunFailed as failed:
        raise SystemExit("\n".join(str(e) for e in failed.exceptions)) from None
    except* Exception as failed:
        log = project / "serve.stderr"
        shown = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log.exists() else ""
        reasons = "; ".join(f"{type(e).__name__}: {e}" for e in failed.exceptions)
        raise SystemExit(f"first run: the MCP client could not use the server ({reasons})\n{shown}") from None


if __name__ == "__main__":
    main()
