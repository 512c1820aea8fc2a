"""Benchmark of the HTTP server: REST next to the stdio path and a no-op Starlette route, in one run.

    python tools/bench_http.py --quick          # few iterations (under a minute)
    python tools/bench_http.py --out http.json

Prints JSON: p50/p95 of a REST save and a REST recall, the same through an MCP stdio server
(``store_memory``, ``recall_memories``) and a no-op Starlette route served by uvicorn (the floor:
HTTP, JSON and the ASGI stack, no memory), with ratios; and 4 concurrent HTTP clients saving at
once: saves per second, and how many were lost (0: every acknowledged save is in the journal); and
the web UI in headless chromium on a project of 10,000 memories (200 with ``--quick``): first
contentful paint, the memory table's first page, and the next page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from bench_json import emit

WAIT = 60.0


def http_client() -> httpx.Client:
    """A keep-alive client, as an agent would hold one."""
    return httpx.Client(timeout=WAIT)


def noop_server() -> None:
    """``--noop-server``: a Starlette app with one route doing nothing, on a free port (printed)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def noop(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/noop", noop, methods=["POST"])])
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as eventmem's server does
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"serving http://127.0.0.1:{sock.getsockname()[1]}/ (projects: noop)", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])


def start(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors
        )
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = re.search(r"serving (http://\S+?)/ \(projects", log.read_text(encoding="utf-8", errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start: " + log.read_text(encoding="utf-8", errors="replace")[-2000:])


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 3),
        "n": len(ordered),
    }


def timed(fn: Any, count: int) -> list[float]:
    out = []
    for i in range(count):
        began = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - began)
    return out


def rest_latency(api: str, count: int) -> dict[str, Any]:
    with http_client() as client:
        client.post(f"{api}/memories", json={"content": "warm-up save"}).raise_for_status()
        saves = timed(lambda i: client.post(f"{api}/memories", json={"content": f"REST fact {i} of the bench"}), count)
        recalls = timed(lambda i: client.post(f"{api}/memories/recall", json={"query": f"fact {i} bench"}), count)
    return {"save": percentiles(saves), "recall": percentiles(recalls)}


def noop_latency(base: str, count: int) -> dict[str, Any]:
    with http_client() as client:
        client.post(f"{base}/noop", json={"content": "warm-up"})
        return percentiles(timed(lambda i: client.post(f"{base}/noop", json={"content": f"fact {i}"}), count))


def stdio_latency(project: Path, env: dict[str, str], count: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "eventmem", "serve"], cwd=project, env=env)
        async with Client(params) as client:
            await client.call_tool("store_memory", {"content": "stdio warm-up"})
            saves, recalls = [], []
            for i in range(count):
                began = time.perf_counter()
                await client.call_tool("store_memory", {"content": f"stdio fact {i} of the bench"})
                saves.append(time.perf_counter() - began)
            for i in range(count):
                began = time.perf_counter()
                await client.call_tool("recall_memories", {"query": f"fact {i} bench"})
                recalls.append(time.perf_counter() - began)
        return {"save": percentiles(saves), "recall": percentiles(recalls)}

    return asyncio.run(run())


def concurrent_saves(api: str, clients: int, each: int) -> dict[str, Any]:
    acknowledged: list[list[str]] = [[] for _ in range(clients)]
    errors: list[str] = []

    def client_run(n: int) -> None:
        with http_client() as client:
            for i in range(each):
                response = client.post(f"{api}/memories", json={"content": f"client {n} save {i}: a distinct fact"})
                if response.status_code == 201:
                    acknowledged[n].append(response.json()["memory"]["id"])
                else:
                    errors.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=client_run, args=(n,)) for n in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    ids = {m for batch in acknowledged for m in batch}
    with http_client() as client:
        missing = [m for m in ids if client.get(f"{api}/memories/{m}").status_code != 200]
    return {
        "clients": clients,
        "saves_each": each,
        "acknowledged": len(ids),
        "refused": len(errors),
        "lost": len(missing),
        "seconds": round(elapsed, 3),
        "saves_per_second": round(len(ids) / elapsed, 1),
    }


def seed(project: Path, env: dict[str, str], count: int) -> None:
    """``count`` memories written straight through the service (flush durability: a setup, not a measure)."""
    code = (
        "import sys; from pathlib import Path; from eventmem.journal.project import RootChoice; "
        "from eventmem.service import open_service; s = open_service(RootChoice(Path(sys.argv[1]), 'bench')); "
        "[s.save(f'memory {i} about topic {i % 97}, with words {i * 7}', tags=[f't{i % 13}'], "
        "importance=(i % 10) / 10) for i in range(int(sys.argv[2]))]; s.close()"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(project), str(count)],
        env={**env, "EVENTMEM_DURABILITY": "flush"},
        check=True,
        timeout=3600,
    )


def ui_timings(base: str, project: str) -> dict[str, Any]:
    """First contentful paint of the UI, and the time until the memory table shows its first page."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        return {"skipped": "needs chromium and playwright"}
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        began = time.perf_counter()
        page.goto(f"{base}/?project={project}#/memories")
        page.wait_for_selector("main .view[data-view=browser] tr[data-id]", timeout=WAIT * 1000)
        table_ms = (time.perf_counter() - began) * 1000
        paint = page.evaluate("performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)[0] || null")
        began = time.perf_counter()
        page.get_by_role("button", name="Next").click()
        page.wait_for_selector("text=51–100 of")
        next_page_ms = (time.perf_counter() - began) * 1000
        browser.close()
    return {
        "project": project,
        "first_contentful_paint_ms": round(paint, 1) if paint else None,
        "table_first_page_ms": round(table_ms, 1),
        "table_next_page_ms": round(next_page_ms, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations (under a minute)")
    parser.add_argument("--out", help="also write the JSON to this file")
    parser.add_argument("--noop-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.noop_server:
        noop_server()
        return 0
    count, each, ui_count = (20, 50, 200) if args.quick else (300, 500, 10_000)
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-http-") as tmp:
        base_dir = Path(tmp)
        project = base_dir / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        env = {**os.environ, "EVENTMEM_GLOBAL_DIR": str(base_dir / "global"), "HOME": str(base_dir)}
        env.pop("EVENTMEM_ROOT", None)
        big = base_dir / "big"
        big.mkdir()
        subprocess.run(["git", "init", "-q", str(big)], check=True)
        seed(big, env, ui_count)
        server, base = start(
            [sys.executable, "-m", "eventmem", "serve", "--http", "--port", "0", "--rate-limit", "0",
             "--project", f"project={project}", "--project", f"big={big}"],
            project, env, base_dir / "http.log",
        )  # fmt: skip
        noop, noop_base = start([sys.executable, __file__, "--noop-server"], base_dir, env, base_dir / "noop.log")
        try:
            api = f"{base}/api/v1/projects/project"
            rest = rest_latency(api, count)
            floor = noop_latency(noop_base, count)
            stdio = stdio_latency(project, env, count)
            concurrent = concurrent_saves(api, 4, each)
            ui = ui_timings(base, "big") | {"memories": ui_count}
        finally:
            for proc in (server, noop):
                proc.terminate()
                proc.wait(timeout=WAIT)
    ratio = lambda a, b: round(a / b, 2) if b else None  # noqa: E731
    result = {
        "settings": {"quick": args.quick, "iterations": count, "cpus": os.cpu_count()},
        "rest": rest,
        "stdio": stdio,
        "noop_starlette": floor,
        "ratios": {
            "rest_save_vs_stdio_save": ratio(rest["save"]["p50_ms"], stdio["save"]["p50_ms"]),
            "rest_recall_vs_stdio_recall": ratio(rest["recall"]["p50_ms"], stdio["recall"]["p50_ms"]),
            "rest_save_vs_noop_route": ratio(rest["save"]["p50_ms"], floor["p50_ms"]),
            "rest_recall_vs_noop_route": ratio(rest["recall"]["p50_ms"], floor["p50_ms"]),
        },
        "concurrent_saves": concurrent,
        "ui": ui,
    }
    emit(result, args.out)
    return 0 if concurrent["lost"] == 0 and concurrent["refused"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
