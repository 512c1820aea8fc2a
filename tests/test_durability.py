"""Many processes on one memory, killed writers, full disks: nothing acknowledged is ever lost.

These tests drive real processes: `eventmem serve` over stdio with the SDK's client, the CLI, and a
small writer program killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from conftest import REPO, ProcessGroup, eventmem_command
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from eventmem.core.events import MemorySaved
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.service import open_service

pytestmark = pytest.mark.slow


def server_params(project: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "EVENTMEM_GLOBAL_DIR", "SYSTEMROOT")}
    env["EVENTMEM_ROOT"] = str(project)
    return StdioServerParameters(command=sys.executable, args=["-m", "eventmem", "serve"], env=env, cwd=str(project))


@contextlib.asynccontextmanager
async def session(project: Path, **kwargs: Any) -> AsyncIterator[ClientSession]:
    async with stdio_client(server_params(project)) as (read, write):
        async with ClientSession(read, write, **kwargs) as client:
            await client.initialize()
            yield client


def saved_ids(project: Path) -> list[str]:
    """Memory ids of every saved event in the journal; fails on any corrupt line."""
    ids: list[str] = []
    for segment, result in Journal(ProjectPaths(project)).iter_all():
        assert not result.corrupt, f"corrupt line in {segment.name}: {result.corrupt}"
        ids += [e.memory for e in result.events if isinstance(e, MemorySaved)]
    return ids


def test_four_servers_and_the_cli_saving_at_once_lose_no_write(project: Path, processes: ProcessGroup) -> None:
    per_server = 500
    acknowledged: list[str] = []

    async def storm(name: str) -> None:
        async with session(project) as client:
            for i in range(per_server):
                result = await client.call_tool("save_context", {"context_text": f"{name} note {i}: cache policy"})
                assert not result.is_error, result.content
                assert result.structured_content is not None
                acknowledged.append(result.structured_content["id"])

    async def cli_saves() -> None:
        for i in range(10):
            out = await anyio.run_process(
                [*eventmem_command("save", f"cli note {i}", "--json", "--root", str(project))]
            )
            assert out.returncode == 0

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for n in range(4):
                tasks.start_soon(storm, f"server{n}")
            tasks.start_soon(cli_saves)

    anyio.run(main)
    ids = saved_ids(project)
    assert len(ids) == 4 * per_server + 10
    assert len(set(ids)) == len(ids), "a line was duplicated"
    assert set(acknowledged) <= set(ids)
    fresh = open_service(RootChoice(project, "test"))
    assert fresh.stats()["memories"] == 4 * per_server + 10
    fresh.close()
    audit = subprocess.run([sys.executable, str(REPO / "tools" / "replay.py"), "audit", "--root", str(project)])
    assert audit.returncode == 0


def test_a_save_acknowledged_by_one_server_is_found_by_another_at_once(project: Path) -> None:
    async def main() -> None:
        async with session(project) as writer, session(project) as reader:
            for i in range(20):
                word = f"zebracorn{i}"
                saved = await writer.call_tool("save_context", {"context_text": f"The {word} flag is on"})
                assert saved.structured_content is not None
                found = await reader.call_tool("retrieve_context", {"query": word, "limit": 1})
                assert found.structured_content is not None
                assert found.structured_content["results"][0]["id"] == saved.structured_content["id"]

    anyio.run(main)


def test_a_subscribed_client_is_told_when_another_process_saves(project: Path) -> None:
    updated: list[str] = []
    seen = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            updated.append(str(root.params.uri))
            seen.set()

    async def main() -> None:
        async with session(project, message_handler=on_message) as client:
            with pytest.warns(MCPDeprecationWarning):
                await client.subscribe_resource("memory://summary")
            await client.call_tool("retrieve_context", {"query": "warm up"})  # loaded
            await anyio.run_process(eventmem_command("save", "pushed by another process", "--root", str(project)))
            with anyio.fail_after(20):
                await seen.wait()

    anyio.run(main)
    assert "memory://summary" in updated


def test_a_writer_killed_at_random_moments_never_loses_an_acknowledged_save(project: Path) -> None:
    rng = random.Random(20261130)
    acknowledged: list[str] = []
    segment_dir = ProjectPaths(project).journal_dir
    for round_ in range(200):
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "programs" / "crash_writer.py"), str(project), f"w{round_}"],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(rng.randrange(0, 25)):
            line = proc.stdout.readline().strip()
            if line:
                acknowledged.append(line)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        acknowledged += [line.strip() for line in proc.stdout if line.strip()]
        proc.stdout.close()
        if round_ % 7 == 3:  # a power cut mid-write: half a line, no newline
            segment = next(segment_dir.glob("*.jsonl"))
            with open(segment, "ab") as handle:
                handle.write(b'{"type":"saved","id":"01TORN","ts":"2026-')
        # readers never see a torn line, whatever state the writer died in
        ids = saved_ids(project)
        assert set(acknowledged) <= set(ids)
    ids = saved_ids(project)
    assert len(set(ids)) == len(ids)
    assert set(acknowledged) <= set(ids)
    assert len(acknowledged) > 200


def test_a_server_killed_during_a_save_storm_loses_no_acknowledged_save(project: Path, processes: ProcessGroup) -> None:
    rng = random.Random(7)
    acknowledged: list[str] = []
    for round_ in range(6):
        proc = processes.spawn(
            eventmem_command("serve", "--root", str(project)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        send = proc.stdin
        send.write(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"crash-test","version":"1"}}}\n'
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        )
        for i in range(1, 60):
            send.write(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"save_context",'
                b'"arguments":{"context_text":"round %d save %d"}}}\n' % (i, round_, i)
            )
        send.flush()
        assert read_reply(proc.stdout)["id"] == 0
        for _ in range(rng.randrange(1, 50)):
            reply = read_reply(proc.stdout)
            structured = reply["result"].get("structuredContent") or {}
            if structured.get("status") == "success":
                acknowledged.append(structured["id"])
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        send.close()
        proc.stdout.close()
        ids = saved_ids(project)
        assert set(acknowledged) <= set(ids), f"round {round_} lost an acknowledged save"
    assert acknowledged
    # a server answers before a save's text reaches the indexes: a kill in between must not leave
    # a next start (from whatever snapshot a killed server wrote) with a memory its indexes lack
    service = open_service(RootChoice(project, "test"))
    try:
        with service.project.read() as view:
            for memory_id in acknowledged:
                assert view.keyword_indexed(memory_id) and view.vector_of(memory_id) is not None, memory_id
        last = acknowledged[-1]
        hits = service.recall(service.get(last).content, mode="keyword", limit=10)
        assert last in [hit.id for hit in hits]
    finally:
        service.close()


def read_reply(stream: Any) -> dict[str, Any]:
    """The next JSON-RPC response on a server's stdout (notifications are skipped)."""
    while True:
        message: dict[str, Any] = json.loads(stream.readline())
        if "id" in message:
            return message


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return result.returncode == 0


def test_a_full_disk_fails_the_save_clearly_and_the_server_keeps_serving_reads(tmp_path: Path) -> None:
    disk = tmp_path / "small-disk"
    if not _mount_tmpfs(disk, "512k"):
        pytest.skip("cannot mount a size-limited tmpfs here (needs root)")
    try:
        project = disk / "project"
        project.mkdir()

        async def main() -> None:
            async with session(project) as client:
                first = await client.call_tool("save_context", {"context_text": "saved before the disk filled up"})
                assert not first.is_error
                filler = disk / "filler"
                with contextlib.suppress(OSError), open(filler, "wb") as handle:
                    while True:
                        handle.write(b"x" * 4096)
                        handle.flush()
                segment = next((project / ".eventmem" / "journal").glob("*.jsonl"))
                size_before = segment.stat().st_size
                failed = await client.call_tool("save_context", {"context_text": "this one cannot fit " * 200})
                assert failed.is_error
                text = failed.content[0].text  # type: ignore[union-attr]
                assert "disk is full" in text and "Nothing was saved" in text
                assert segment.stat().st_size == size_before
                found = await client.call_tool("retrieve_context", {"query": "disk filled"})
                assert not found.is_error
                assert found.structured_content is not None
                assert found.structured_content["results"][0]["summary"] == "saved before the disk filled up"
                filler.unlink()
                again = await client.call_tool("save_context", {"context_text": "saved after space came back"})
                assert not again.is_error

        anyio.run(main)
        assert len(saved_ids(project)) == 2
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_read_only_journal_fails_the_save_clearly_and_reads_keep_working(tmp_path: Path) -> None:
    disk = tmp_path / "ro-disk"
    if not _mount_tmpfs(disk, "4m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        project = disk / "project"
        project.mkdir()
        seed = open_service(RootChoice(project, "test"))
        seed.save("written while the disk was writable")
        seed.close()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

        async def main() -> None:
            async with session(project) as client:
                failed = await client.call_tool("save_context", {"context_text": "cannot be written"})
                assert failed.is_error
                assert "read-only" in failed.content[0].text  # type: ignore[union-attr]
                found = await client.call_tool("retrieve_context", {"query": "writable"})
                assert found.structured_content is not None
                assert found.structured_content["results"][0]["summary"] == "written while the disk was writable"

        anyio.run(main)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _lock_is_free(project: Path) -> bool:
    fd = os.open(ProjectPaths(project).lock_file, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("how", ["close-stdin", "sigterm"])
def test_the_server_shuts_down_cleanly_leaving_no_process_and_no_lock(
    project: Path, processes: ProcessGroup, how: str
) -> None:
    proc = processes.spawn(
        eventmem_command("serve", "--root", str(project)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"save_context",'
        b'"arguments":{"context_text":"saved just before shutdown"}}}\n'
    )
    proc.stdin.flush()
    assert read_reply(proc.stdout)["id"] == 0
    assert read_reply(proc.stdout)["result"]["structuredContent"]["status"] == "success"
    if how == "close-stdin":
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    # nothing of the server survives: no process in its group, no lock held
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
    assert _lock_is_free(project)
    assert len(saved_ids(project)) == 1
