"""The compaction scheduler of ``eventmem serve``, in a real subprocess over stdio.

The server is told to compact often; a memory whose TTL ran out a day ago is then written into the
journal by another process. The test waits for the server's own ``resources/updated`` pushes (no
sleeping) until the journal holds the ``expired`` event the scheduler wrote.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from conftest import WAIT, journal_events, old_memory, write_events
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_client import assert_clean_stderr, serve

from eventmem.core.ids import to_iso


def expired_events(project: Path) -> list[dict[str, Any]]:
    return [event for event in journal_events(project) if event["type"] == "expired"]


def test_the_server_expires_memories_on_its_own_schedule(project: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "EVENTMEM_GLOBAL_DIR", "SYSTEMROOT")}
    env["EVENTMEM_ROOT"] = str(project)
    env["EVENTMEM_COMPACT_INTERVAL_SECONDS"] = "1"  # (the floor of the setting)
    errlog = tmp_path / "stderr.log"
    memory = old_memory("Temporary: the staging cluster is being rebuilt.", days=1, by="another-process")
    done = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification) and expired_events(project):
            done.set()

    async def main() -> None:
        async with serve(project, env, errlog, message_handler=on_message) as client:
            await client.initialize()
            with pytest.warns(MCPDeprecationWarning):
                await client.subscribe_resource("memory://summary")
            await client.call_tool("retrieve_context", {"query": "warm up"})  # the memory is loaded
            write_events(project, [memory])
            with anyio.fail_after(WAIT):
                await done.wait()
            found = await client.call_tool("recall_memories", {"query": "staging cluster rebuilt"})
            assert found.structured_content is not None
            assert found.structured_content["results"] == []

    anyio.run(main)
    assert_clean_stderr(errlog)
    (event,) = expired_events(project)
    assert event["memory"] == memory.memory and event["by"] == "eventmem"
    assert event["expires_at"] == to_iso(datetime.fromisoformat(memory.ts.replace("Z", "+00:00")) + timedelta(hours=1))
