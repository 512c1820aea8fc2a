#!/usr/bin/env python
"""eventmem many-processes benchmark: durability, propagation and start-up with real processes.

Prints one JSON object on stdout (progress on stderr). Every figure is measured next to a baseline
in the same run and given as a ratio to it, because absolute numbers depend on the machine and on
whatever else runs on it (the machine's load average is recorded at every section).

Sections:

1. ``save_throughput``: 1, 2 and 4 concurrent ``eventmem serve`` processes on one project, each
   driven by its own client process (the SDK's ``stdio_client`` + ``ClientSession``) saving N
   memories as fast as it can. Total saves/s per level and the scaling ratio vs 1 process.
   Baseline: the same number of processes appending lines of the same size to one file with
   ``O_APPEND`` + ``fsync`` (no lock, no MCP: the raw disk ceiling). The journal is checked after
   each level (every acknowledged save present once, no corrupt line).
2. ``propagation``: two servers A and B on one project of each size.
   (a) ``catch_up_on_call``: A saves; B's ``retrieve_context`` issued right after A's save returns
   must find it. B's latency with one new event to catch up vs with none (ratio).
   (b) ``watcher_push``: B subscribes to ``memory://summary``; time from A's save returning to B's
   client receiving ``notifications/resources/updated``. Baseline: raw ``watchfiles.awatch``
   latency (same debounce/step) for a line appended and fsynced by another process.
3. ``cold_start``: spawn ``eventmem serve`` to ``initialize`` answered and to the first
   ``retrieve_context`` answered, with a valid snapshot, with the snapshot deleted (rebuild,
   embedding cache kept) and with the whole cache deleted; each run paired with the no-op MCP server
   (``tools/noop_server.py``, same SDK).
4. ``crash_recovery``: a journal with a torn tail (half a line appended, as a SIGKILL'd writer
   leaves it): time for a new process to open the service and complete its first save (which cuts
   the tail under the lock), vs the same on a clean journal.
5. ``durability_modes``: saves/s through a real server with ``EVENTMEM_DURABILITY=fsync`` and
   ``flush``, next to raw appends with and without ``fsync``.

Projects are pre-populated by writing ``MemorySaved`` lines straight into the writer's segment
(varied texts), then warmed once in-process (embedding cache and snapshot written). Everything lives
in a temporary directory removed at the end; every process started is killed (by process group) on
exit.

Usage::

    python tools/bench_processes.py                  # sizes 1000,10000,100000 (about 15 minutes)
    python tools/bench_processes.py --sizes 1000,10000
    python tools/bench_processes.py --quick          # tiny sizes, few iterations (< 1 minute)
    python tools/bench_processes.py --out procs.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_json import emit

SCRIPT = Path(__file__).resolve()
NOOP_SERVER = SCRIPT.parent / "noop_server.py"
DEFAULT_SIZES = (1000, 10_000, 100_000)
QUICK_SIZES = (200,)
STARTED = time.perf_counter()
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def log(message: str) -> None:
    sys.stderr.write(f"[bench_processes {time.perf_counter() - STARTED:7.1f}s] {message}\n")
    sys.stderr.flush()


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# -- statistics -------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stats(samples: list[float]) -> dict[str, Any]:
    """Latency summary in milliseconds of samples given in seconds."""
    if not samples:
        return {"n": 0}
    ms = [s * 1000.0 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
    }


def median(values: list[float]) -> float:
    return round(percentile(values, 50), 4) if values else math.nan


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return round(a / b, 3)


# -- texts ------------------------------------------------------------------------------------------

WORDS = (
    "cache index query journal segment snapshot vector sqlite python function class method module import "
    "async await thread lock retry timeout error exception handler request response server client token "
    "parser build deploy docker config yaml json schema migration database table column commit branch "
    "merge rebase test fixture mock refactor rename variable loop iterator decorator endpoint route "
    "middleware session cookie header payload serializer validator model field queue worker scheduler "
    "batch stream buffer socket pipe signal process memory leak profile latency throughput regression "
    "flaky pipeline lint typecheck coverage release version dependency package wheel lockfile upgrade "
    "api cli flag option default env secret credential auth permission role tenant webhook event "
    "listener callback coroutine deadline cancel shutdown startup healthcheck metric trace alert "
    "incident rollback hotfix patch bug fix issue review convention naming docstring frontend backend "
    "component state render layout form redirect url path file directory storage bucket upload encoding "
    "unicode transaction deadlock replica shard partition checksum compression archive compaction "
    "retention expiry eviction warmup bottleneck allocation interface protocol factory adapter "
    "repository service controller template plugin container image registry proxy gateway certificate"
).split()
FILLER = "the a to of and in is for on with that this when we from be as not after before if so but or".split()
TEMPLATES = (
    "Decided to use {a} for the {b} because the {c} was too slow under load.",
    "Fixed a {a} bug in src/{b}/{c}.py: the {d} was read before the lock was taken.",
    "Convention: every {a} goes through the {b} {c}; never call the {d} directly.",
    "Error {a}Error in {b}_{c}() when the {d} is empty; cause was a missing {a} check.",
    "The {a} {b} must be restarted after a {c} upgrade, otherwise the {d} stays stale.",
    "Current task: move the {a} {b} to the new {c} and delete the old {d} code path.",
)
TAGS = "backend frontend database ci testing performance security auth api infra docs bug decision".split()
KINDS = ("decision", "fix", "error", "convention", "workflow", "general", "solution", "code_pattern")


class Texts:
    """Varied memory texts: a template sentence, then 20-45 words from a skewed vocabulary."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.weights = [1.0 / (rank + 1) ** 0.8 for rank in range(len(WORDS))]

    def text(self, extra: str = "") -> str:
        rng = self.rng
        a, b, c, d = rng.sample(WORDS, 4)
        head = rng.choice(TEMPLATES).format(a=a, b=b, c=c, d=d)
        body = rng.choices(WORDS, weights=self.weights, k=rng.randint(12, 30))
        for _ in range(rng.randint(6, 15)):
            body.insert(rng.randrange(len(body) + 1), rng.choice(FILLER))
        sentence = " ".join(body)
        return f"{head} {sentence[:1].upper()}{sentence[1:]}.{(' ' + extra) if extra else ''}"

    def tags(self) -> list[str]:
        return sorted(self.rng.sample(TAGS, self.rng.randint(1, 3)))


# -- processes --------------------------------------------------------------------------------------

_SPAWNED: list[subprocess.Popen[bytes]] = []


def spawn(args: list[str], env: dict[str, str], errlog: Any, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A child in its own process group (killed as a group on exit), stdin/stdout piped."""
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    _SPAWNED.append(proc)
    return proc


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The next stdout line of a child, or an error if it exits or times out first."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise TimeoutError(f"no output from {proc.args!r} within {timeout:.0f} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{proc.args!r} exited ({proc.wait()}) without answering")
    return line.decode().strip()


def finish(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    for pipe in (proc.stdin,):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """Every live process started (directly or not) by ``pid`` (Linux ``/proc``; empty elsewhere)."""
    try:
        children = _children()
    except OSError:
        return []
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def server_memory() -> dict[str, list[float]]:
    """Resident memory of the eventmem and no-op servers this process runs now (via stdio clients)."""
    out: dict[str, list[float]] = {"eventmem": [], "noop": []}
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except OSError:
            continue
        name = "eventmem" if b"eventmem" in args and b"serve" in args else "noop" if b"noop" in b" ".join(args) else ""
        size = rss_mb(pid)
        if name and size is not None:
            out[name].append(size)
    return out


def kill_group(pid: int) -> None:
    """SIGKILL a process we started, with its process group when it leads its own."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid and pid != os.getpgid(0):
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def kill_everything_we_started() -> int:
    """Kill the whole tree of processes this benchmark started (servers spawned by the SDK's stdio
    client and by client processes included). Returns how many were still alive."""
    stray = descendants(os.getpid())  # collected first: a killed parent orphans its children
    stray += [p.pid for p in _SPAWNED if p.poll() is None and p.pid not in stray]
    for pid in stray:
        kill_group(pid)
    for proc in _SPAWNED:
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
    return len(stray)


# -- environment ------------------------------------------------------------------------------------


class Bench:
    """Shared settings of one run: the temporary directory, environments and the server log."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.errlog_path = tmp / "processes.stderr.log"
        self.errlog = open(self.errlog_path, "ab")  # closed in close()
        self.global_dir = tmp / "global"
        self.noop_script, self.noop_source = NOOP_SERVER, "tools/noop_server.py"

    def close(self) -> None:
        self.errlog.close()

    def env(self, root: Path | None = None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_") and k != "PROJECT_MEMORY_ROOT"}
        env |= {"EVENTMEM_GLOBAL_DIR": str(self.global_dir), "EVENTMEM_LOG_LEVEL": "WARNING"}
        if root is not None:
            env["EVENTMEM_ROOT"] = str(root)
        return env | extra

    def eventmem_params(self, root: Path, **extra: str) -> Any:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=sys.executable, args=["-m", "eventmem", "serve"], env=self.env(root, **extra), cwd=str(root)
        )

    def noop_params(self, root: Path) -> Any:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=sys.executable, args=[str(self.noop_script)], env=self.env(root), cwd=str(root)
        )

    def tail(self) -> str:
        self.errlog.flush()
        return self.errlog_path.read_text(encoding="utf-8", errors="replace")[-3000:]


# -- projects ---------------------------------------------------------------------------------------


def sample_lines(count: int, seed: int) -> list[bytes]:
    """Journal lines as eventmem writes them for a save_context (the raw appenders' payload)."""
    from eventmem.core.codec import encode_event
    from eventmem.core.events import MemorySaved
    from eventmem.core.ids import new_id, now_iso

    texts = Texts(seed)
    lines = []
    for _ in range(count):
        content = texts.text()
        event = MemorySaved(
            id=new_id(),
            ts=now_iso(),
            by="bench",
            memory=new_id(),
            content=content,
            summary=content.split(". ", 1)[0],
            tags=tuple(texts.tags()),
        )
        lines.append(encode_event(event))
    return lines


def populate(root: Path, count: int, seed: int) -> dict[str, Any]:
    """Write ``count`` MemorySaved lines into the segment this clone's writers append to."""
    from datetime import UTC, datetime

    from eventmem.core.codec import encode_event
    from eventmem.core.events import MemorySaved
    from eventmem.core.ids import new_id, to_iso
    from eventmem.journal.project import ProjectPaths

    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    paths = ProjectPaths(root)
    paths.ensure()
    segment = paths.journal_dir / paths.segment_name()
    texts = Texts(seed)
    rng = random.Random(seed)
    now = time.time()
    with open(segment, "wb") as handle:
        for first in range(0, count, 10_000):
            lines = []
            for _ in range(first, min(count, first + 10_000)):
                content = texts.text()
                summary = content.split(". ", 1)[0]
                lines.append(
                    encode_event(
                        MemorySaved(
                            id=new_id(),
                            ts=to_iso(datetime.fromtimestamp(now - rng.random() * 180 * 86400, UTC)),
                            by=rng.choice(("claude-code", "cursor", "cli", "codex")),
                            memory=new_id(),
                            kind=rng.choice(KINDS),
                            title=" ".join(rng.sample(WORDS, rng.randint(3, 6))),
                            content=content,
                            summary=summary[:240],
                            tags=tuple(texts.tags()),
                            importance=rng.choice((0.3, 0.5, 0.5, 0.7, 0.9)),
                        )
                    )
                )
            handle.write(b"".join(lines))
    return {
        "memories": count,
        "segment_bytes": segment.stat().st_size,
        "write_journal_s": round(time.perf_counter() - started, 3),
    }


def open_in_process(bench: Bench, root: Path) -> Any:
    from eventmem.journal.project import RootChoice
    from eventmem.service import open_service

    return open_service(RootChoice(root, "bench"), environ=bench.env(root))


def ensure_snapshot(bench: Bench, root: Path) -> float:
    """Open in-process (loading or rebuilding), write a snapshot covering everything, close."""
    import gc

    started = time.perf_counter()
    service = open_in_process(bench, root)
    try:
        service.project.save_snapshot()
    finally:
        service.close()
    del service
    gc.collect()
    return round(time.perf_counter() - started, 3)


def check_journal(root: Path) -> dict[str, Any]:
    """Saved events, duplicates and corrupt lines in a project's journal."""
    from eventmem.core.events import MemorySaved
    from eventmem.journal.journal import Journal
    from eventmem.journal.project import ProjectPaths

    ids: list[str] = []
    corrupt = torn = 0
    for _segment, result in Journal(ProjectPaths(root)).iter_all():
        corrupt += len(result.corrupt)
        torn += result.torn_tail
        ids += [e.memory for e in result.events if isinstance(e, MemorySaved)]
    return {"saved_events": len(ids), "duplicates": len(ids) - len(set(ids)), "corrupt": corrupt, "torn_bytes": torn}


# -- MCP helpers -------------------------------------------------------------------------------------


async def connect(stack: contextlib.AsyncExitStack, params: Any, errlog: Any, **session_kwargs: Any) -> Any:
    from mcp import ClientSession, stdio_client

    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write, **session_kwargs))
    await session.initialize()
    return session


async def call(session: Any, name: str, arguments: dict[str, Any], timeout: float = 120.0) -> Any:
    """One tool call; a tool error stops the benchmark. Returns the structured result."""
    result = await session.call_tool(name, arguments, read_timeout_seconds=timeout)
    if getattr(result, "is_error", False):
        texts = [getattr(block, "text", "") for block in getattr(result, "content", [])]
        raise RuntimeError(f"tool {name} failed: {' '.join(texts)[:500]}")
    return result.structured_content


# -- 1 and 5: save throughput ------------------------------------------------------------------------


def client_main(config: dict[str, Any]) -> None:
    """A client process: its own ``eventmem serve``; ``ready`` once warm, saves on ``go``."""
    import anyio
    from mcp import StdioServerParameters

    texts = Texts(config["seed"])
    payloads = [{"context_text": texts.text(), "tags": texts.tags()} for _ in range(config["count"] + config["warm"])]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "eventmem", "serve"], env=dict(os.environ), cwd=config["root"]
    )

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            session = await connect(stack, params, sys.stderr)
            await call(session, "retrieve_context", {"query": "warm up"}, timeout=600)
            for payload in payloads[: config["warm"]]:
                await call(session, "save_context", payload)
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await anyio.to_thread.run_sync(sys.stdin.readline)
            latencies: list[float] = []
            ids: list[str] = []
            started = time.perf_counter()
            for payload in payloads[config["warm"] :]:
                before = time.perf_counter()
                result = await call(session, "save_context", payload)
                latencies.append(time.perf_counter() - before)
                ids.append(result["id"])
            ended = time.perf_counter()
            sys.stdout.write(json.dumps({"start": started, "end": ended, "latencies": latencies, "ids": ids}) + "\n")
            sys.stdout.flush()

    anyio.run(run)


def raw_append_main(path: str, lines_file: str, count: int, durable: bool) -> None:
    """A raw appender: ``O_APPEND`` writes of whole lines (+ ``fsync``), no lock, no MCP."""
    lines = Path(lines_file).read_bytes().splitlines(keepends=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    latencies = []
    started = time.perf_counter()
    for i in range(count):
        before = time.perf_counter()
        os.write(fd, lines[i % len(lines)])
        if durable:
            os.fsync(fd)
        latencies.append(time.perf_counter() - before)
    ended = time.perf_counter()
    os.close(fd)
    sys.stdout.write(json.dumps({"start": started, "end": ended, "latencies": latencies}) + "\n")
    sys.stdout.flush()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of live processes (Linux ``/proc``; 0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def run_group(procs: list[subprocess.Popen[bytes]], ready_timeout: float) -> list[dict[str, Any]]:
    """Wait until every child says ``ready``, say ``go`` to all, collect their JSON results (with
    the CPU time the children and their own children, the servers, spent meanwhile)."""
    for proc in procs:
        line = read_line(proc, ready_timeout)
        if line != "ready":
            raise RuntimeError(f"unexpected output from a child: {line[:200]}")
    clients = [proc.pid for proc in procs]
    servers = [pid for proc in procs for pid in descendants(proc.pid)]
    cpu_before = cpu_seconds(clients), cpu_seconds(servers)
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    results = [json.loads(read_line(proc, 900)) for proc in procs]
    cpu_after = cpu_seconds(clients), cpu_seconds(servers)
    for proc in procs:
        finish(proc)
    results[0]["cpu_s"] = {
        "clients": cpu_after[0] - cpu_before[0],
        "servers": cpu_after[1] - cpu_before[1],
    }
    return results


def summarize_group(results: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(len(r["latencies"]) for r in results)
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    cpu = results[0]["cpu_s"]
    cpu_ms = {k: round(1000 * v / total, 3) for k, v in cpu.items()}
    return {
        "processes": len(results),
        "operations": total,
        "wall_s": round(wall, 3),
        "per_s": round(total / wall, 1),
        "latency": stats(latencies),
        "cpu_ms_per_operation": cpu_ms | {"total": round(sum(cpu_ms.values()), 3)},
    }


def eventmem_savers(
    bench: Bench, root: Path, processes: int, count: int, warm: int, seed: int, durability: str = "fsync"
) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    env = bench.env(root, EVENTMEM_DURABILITY=durability)
    procs = []
    for i in range(processes):
        config = {"root": str(root), "count": count, "warm": warm, "seed": seed * 100 + i}
        procs.append(spawn([sys.executable, str(SCRIPT), "_client", json.dumps(config)], env, bench.errlog, root))
    results = run_group(procs, ready_timeout=300)
    out = summarize_group(results)
    journal = check_journal(root)
    acknowledged = [i for r in results for i in r["ids"]]
    expected = processes * (count + warm)
    out["journal_check"] = journal | {
        "expected_saved_events": expected,
        "ok": journal["saved_events"] == expected
        and journal["duplicates"] == 0
        and journal["corrupt"] == 0
        and len(set(acknowledged)) == len(acknowledged),
    }
    return out


def raw_appenders(bench: Bench, lines_file: Path, processes: int, count: int, durable: bool) -> dict[str, Any]:
    target = bench.tmp / f"raw-{processes}-{int(durable)}.jsonl"
    target.unlink(missing_ok=True)
    procs = [
        spawn(
            [sys.executable, str(SCRIPT), "_raw_append", str(target), str(lines_file), str(count), str(int(durable))],
            bench.env(),
            bench.errlog,
        )
        for _ in range(processes)
    ]
    results = run_group(procs, ready_timeout=60)
    out = summarize_group(results)
    data = target.read_bytes()
    lines = data.split(b"\n")[:-1]
    bad = 0
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            bad += 1
    out["file_check"] = {"lines": len(lines), "unparsable": bad, "ok": len(lines) == processes * count and not bad}
    target.unlink()
    return out


def save_throughput(bench: Bench, lines_file: Path, per_process: int, rounds: int) -> dict[str, Any]:
    levels = (1, 2, 4)
    em_runs: dict[int, list[dict[str, Any]]] = {k: [] for k in levels}
    raw_runs: dict[int, list[dict[str, Any]]] = {k: [] for k in levels}
    for round_ in range(rounds):
        for k in levels:
            log(f"save throughput: round {round_ + 1}/{rounds}, {k} eventmem server(s) x {per_process} saves")
            root = bench.tmp / f"throughput-{round_}-{k}"
            em_runs[k].append(eventmem_savers(bench, root, k, per_process, 2, seed=round_ * 10 + k))
            shutil.rmtree(root, ignore_errors=True)
            log(f"save throughput: round {round_ + 1}/{rounds}, {k} raw appender(s) with fsync")
            raw_runs[k].append(raw_appenders(bench, lines_file, k, per_process, durable=True))

    def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return max(runs, key=lambda r: r["per_s"])

    out: dict[str, Any] = {
        "saves_per_process": per_process,
        "rounds": rounds,
        "reported_round": "the round with the highest saves/s per level (least disturbed by other load)",
        "levels": {},
    }
    em1, raw1 = best(em_runs[1])["per_s"], best(raw_runs[1])["per_s"]
    for k in levels:
        em, raw = best(em_runs[k]), best(raw_runs[k])
        out["levels"][str(k)] = {
            "eventmem_saves_per_s": em["per_s"],
            "eventmem_save_latency": em["latency"],
            "eventmem_scaling_vs_1_process": ratio(em["per_s"], em1),
            "eventmem_cpu_ms_per_save": em["cpu_ms_per_operation"],
            "cpu_bound_ceiling_saves_per_s": round(CORES * 1000 / em["cpu_ms_per_operation"]["total"], 1)
            if em["cpu_ms_per_operation"]["total"]
            else None,
            "raw_appends_per_s": raw["per_s"],
            "raw_append_latency": raw["latency"],
            "raw_scaling_vs_1_process": ratio(raw["per_s"], raw1),
            "ratio": ratio(em["per_s"], raw["per_s"]),
            "ratio_is": f"eventmem saves/s with {k} server(s) / raw O_APPEND+fsync appends/s with {k} process(es)",
            "ratio_vs_single_raw_appender": ratio(em["per_s"], raw1),
            "all_rounds_saves_per_s": [r["per_s"] for r in em_runs[k]],
            "all_rounds_raw_per_s": [r["per_s"] for r in raw_runs[k]],
            "journal_checks_ok": all(r["journal_check"]["ok"] for r in em_runs[k]),
            "raw_file_checks_ok": all(r["file_check"]["ok"] for r in raw_runs[k]),
        }
    out["baseline_single_raw_appender_per_s"] = raw1
    out["journal_check_example"] = em_runs[levels[-1]][-1]["journal_check"]
    return out


def durability_modes(bench: Bench, lines_file: Path, count: int, rounds: int) -> dict[str, Any]:
    em: dict[str, list[dict[str, Any]]] = {"fsync": [], "flush": []}
    raw: dict[str, list[dict[str, Any]]] = {"fsync": [], "flush": []}
    for round_ in range(rounds):
        order = ("fsync", "flush") if round_ % 2 == 0 else ("flush", "fsync")
        for mode in order:
            log(f"durability: round {round_ + 1}/{rounds}, {mode}: 1 server x {count} saves, then raw appends")
            root = bench.tmp / f"durability-{round_}-{mode}"
            em[mode].append(eventmem_savers(bench, root, 1, count, 2, seed=500 + round_, durability=mode))
            shutil.rmtree(root, ignore_errors=True)
            raw[mode].append(raw_appenders(bench, lines_file, 1, count, durable=mode == "fsync"))

    def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return max(runs, key=lambda r: r["per_s"])

    out: dict[str, Any] = {"saves": count, "rounds": rounds, "processes": 1}
    for mode in ("fsync", "flush"):
        e, r = best(em[mode]), best(raw[mode])
        out[mode] = {
            "eventmem_saves_per_s": e["per_s"],
            "eventmem_save_latency": e["latency"],
            "eventmem_cpu_ms_per_save": e["cpu_ms_per_operation"],
            "raw_appends_per_s": r["per_s"],
            "raw_append_latency": r["latency"],
            "ratio": ratio(e["per_s"], r["per_s"]),
            "ratio_is": f"eventmem saves/s ({mode}) / raw O_APPEND appends/s ({'with' if mode == 'fsync' else 'no'}"
            " fsync)",
            "all_rounds_saves_per_s": [x["per_s"] for x in em[mode]],
            "journal_checks_ok": all(x["journal_check"]["ok"] for x in em[mode]),
        }
    out["ratio"] = ratio(out["flush"]["eventmem_saves_per_s"], out["fsync"]["eventmem_saves_per_s"])
    out["ratio_is"] = "eventmem flush saves/s / eventmem fsync saves/s"
    out["baseline_ratio"] = ratio(out["flush"]["raw_appends_per_s"], out["fsync"]["raw_appends_per_s"])
    out["baseline_ratio_is"] = "raw appends/s without fsync / with fsync (the most flush could ever gain)"
    fsync_p50 = out["fsync"]["eventmem_save_latency"].get("p50_ms")
    flush_p50 = out["flush"]["eventmem_save_latency"].get("p50_ms")
    gain = out["ratio"]
    out["notes"] = (
        "fsync (the default) makes every acknowledged save durable against power loss and kernel crashes: "
        "the line is on the disk before the client hears 'success'. flush writes the line into the OS page "
        "cache only: a killed server (SIGKILL, crash, OOM) still loses nothing, because the kernel owns the "
        "bytes once write(2) returns, but a power cut or kernel panic can lose the last few seconds of "
        f"acknowledged saves. Measured here: save p50 {fsync_p50} ms with fsync vs {flush_p50} ms with flush "
        f"(flush/fsync throughput x{gain}); raw appends gain x{out['baseline_ratio']} from dropping fsync, so "
        "the share of a save spent in fsync is what flush can win. At a few saves per minute per agent, "
        "fsync costs nothing noticeable; flush only pays off for bulk imports."
    )
    return out


# -- 2: propagation -------------------------------------------------------------------------------------


def cue_append_main(path: str, line: str) -> None:
    """Raw watch baseline: append (+fsync) one line per ``go``; print the time the write returned."""
    data = (line + "\n").encode()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while sys.stdin.readline():
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        sys.stdout.write(f"{time.perf_counter()!r}\n")
        sys.stdout.flush()


async def raw_watch_baseline(bench: Bench, iterations: int, gap: float) -> dict[str, Any]:
    """``watchfiles.awatch`` with eventmem's settings on a folder; another process appends lines."""
    import anyio
    from watchfiles import awatch

    from eventmem.journal import watcher

    base = bench.tmp / "rawwatch" / ".eventmem"
    (base / "journal").mkdir(parents=True)
    segment = base / "journal" / "w.main.jsonl"
    segment.touch()
    proc = spawn(
        [sys.executable, str(SCRIPT), "_cue_append", str(segment), sample_lines(1, 3)[0].decode().strip()],
        bench.env(),
        bench.errlog,
    )
    assert read_line(proc, 60) == "ready"
    stop = anyio.Event()
    arrivals: list[float] = []
    latencies: list[float] = []
    missed = 0
    holder = {"fired": anyio.Event()}

    async def watch() -> None:
        async for _ in awatch(
            base,
            watch_filter=lambda _c, p: p.endswith(".jsonl"),
            debounce=watcher.DEBOUNCE_MS,
            step=watcher.STEP_MS,
            stop_event=stop,
            poll_delay_ms=watcher.POLL_DELAY_MS,
            rust_timeout=1000,
        ):
            arrivals.append(time.perf_counter())
            holder["fired"].set()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            await anyio.sleep(0.5)  # the watch is set up
            for _ in range(iterations):
                arrivals.clear()
                holder["fired"] = anyio.Event()
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
                written = float(await anyio.to_thread.run_sync(read_line, proc, 30))
                with anyio.move_on_after(5):
                    await holder["fired"].wait()
                if arrivals:
                    latencies.append(arrivals[0] - written)
                else:
                    missed += 1
                await anyio.sleep(gap)
            stop.set()
    finally:
        finish(proc)
    shutil.rmtree(base.parent, ignore_errors=True)
    return {
        "latency_from_append": stats(latencies),
        "missed": missed,
        "settings": {"debounce_ms": watcher.DEBOUNCE_MS, "step_ms": watcher.STEP_MS},
    }


async def propagation(
    bench: Bench, root: Path, catch_up_iterations: int, push_iterations: int, gap: float
) -> dict[str, Any]:
    import anyio
    import mcp.types as types

    arrivals: list[float] = []
    holder = {"fired": anyio.Event()}

    async def on_message(message: Any) -> None:
        notification = getattr(message, "root", message)
        if isinstance(notification, types.ResourceUpdatedNotification):
            if str(notification.params.uri) == "memory://summary":
                arrivals.append(time.perf_counter())
                holder["fired"].set()

    texts = Texts(7)
    async with contextlib.AsyncExitStack() as stack:
        started = time.perf_counter()
        writer = await connect(stack, bench.eventmem_params(root), bench.errlog)
        reader = await connect(stack, bench.eventmem_params(root), bench.errlog, message_handler=on_message)
        noop = await connect(stack, bench.noop_params(root), bench.errlog)
        await call(noop, "retrieve", {"query": "warm up"})
        await call(writer, "retrieve_context", {"query": "warm up"}, timeout=900)
        await call(reader, "retrieve_context", {"query": "warm up"}, timeout=900)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await reader.subscribe_resource("memory://summary")
        ready_s = time.perf_counter() - started
        await anyio.sleep(1.0)  # the watchers' first catch-up and pushes are over

        # (a) catch-up on call: right after A's save returns, B's retrieve must find it; the same
        # retrieve again at once (nothing new) is the baseline. B's first call after an idle gap
        # is timed too (cold caches and thread wake-ups cost more than catching up).
        idle: list[float] = []
        one: list[float] = []
        none: list[float] = []
        writes: list[float] = []
        found = 0
        for i in range(catch_up_iterations):
            token = f"qzx{i}marker{random.randrange(10**6)}"
            before = time.perf_counter()
            await call(reader, "retrieve_context", {"query": f"{token}idle", "limit": 1})
            idle.append(time.perf_counter() - before)
            before = time.perf_counter()
            saved = await call(writer, "save_context", {"context_text": texts.text(f"The {token} flag is on.")})
            writes.append(time.perf_counter() - before)
            before = time.perf_counter()
            result = await call(reader, "retrieve_context", {"query": token, "limit": 1})
            one.append(time.perf_counter() - before)
            if result["results"] and result["results"][0]["id"] == saved["id"]:
                found += 1
            before = time.perf_counter()
            await call(reader, "retrieve_context", {"query": token, "limit": 1})
            none.append(time.perf_counter() - before)
            await anyio.sleep(gap)
        # (b) watcher push: A saves, B's client is told
        from_return: list[float] = []
        from_issue: list[float] = []
        missed = 0
        for i in range(push_iterations):
            arrivals.clear()
            holder["fired"] = anyio.Event()
            issued = time.perf_counter()
            await call(writer, "save_context", {"context_text": texts.text(f"push marker {i}"), "tags": ["bench"]})
            returned = time.perf_counter()
            with anyio.move_on_after(5):
                await holder["fired"].wait()
            fresh = [t for t in arrivals if t >= issued]
            if fresh:
                from_return.append(fresh[0] - returned)
                from_issue.append(fresh[0] - issued)
            else:
                missed += 1
            await anyio.sleep(gap)
        memory = server_memory()

    none_s, one_s = stats(none[1:]), stats(one[1:])
    push = stats(from_return)
    em_rss, noop_rss = memory["eventmem"], memory["noop"]
    return {
        "servers_ready_s": round(ready_s, 3),
        "server_memory": {
            "eventmem_rss_mb": em_rss,
            "noop_rss_mb": noop_rss,
            "ratio": ratio(max(em_rss), max(noop_rss)) if em_rss and noop_rss else None,
            "ratio_is": "largest eventmem server RSS / no-op server RSS, after both loops",
        },
        "catch_up_on_call": {
            "retrieve_with_one_new_event": one_s,
            "retrieve_with_nothing_new": none_s,
            "retrieve_after_idle_gap": stats(idle[1:]),
            "writer_save": stats(writes[1:]),
            "first_iteration_ms": {
                "one_new_event": round(one[0] * 1000, 3),
                "nothing_new": round(none[0] * 1000, 3),
                "writer_first_save": round(writes[0] * 1000, 3),
                "note": "A's first save after start and B's first catch-up of another process's event; "
                "left out of the statistics",
            },
            "found_by_the_other_process": f"{found}/{catch_up_iterations}",
            "ratio": ratio(one_s.get("p50_ms"), none_s.get("p50_ms")),
            "ratio_is": "B's retrieve p50 right after A's save / the same retrieve repeated at once (nothing new)",
            "extra_ms_p50": round(one_s["p50_ms"] - none_s["p50_ms"], 3) if one_s["n"] and none_s["n"] else None,
        },
        "watcher_push": {
            "latency_from_save_return": push,
            "latency_from_save_issue": stats(from_issue),
            "missed": missed,
        },
    }


# -- 3: cold start -------------------------------------------------------------------------------------


async def spawn_to_first_answer(bench: Bench, params: Any, noop: bool, text: str) -> tuple[float, float, float]:
    """Spawn to ``initialize`` answered, spawn to the first retrieve answered, and the first save
    after that (its own round trip: what an agent's first save in a new session costs)."""
    from mcp import ClientSession, stdio_client

    started = time.perf_counter()
    async with stdio_client(params, errlog=bench.errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            initialized = time.perf_counter() - started
            tool = "retrieve" if noop else "retrieve_context"
            await call(session, tool, {"query": "how do we retry the journal lock"}, timeout=1800)
            answered = time.perf_counter() - started
            before = time.perf_counter()
            if noop:
                await call(session, "save", {"text": text}, timeout=1800)
            else:
                await call(session, "save_context", {"context_text": text, "tags": ["bench"]}, timeout=1800)
            first_save = time.perf_counter() - before
    return initialized, answered, first_save


def cold_start(bench: Bench, root: Path, repetitions: dict[str, int], share_noop: bool = False) -> dict[str, Any]:
    """Each eventmem start is paired with a no-op server start (alternating which goes first);
    with ``share_noop`` (``--quick``) the no-op server is started once and used for every mode."""
    import anyio

    from eventmem.journal.project import ProjectPaths

    cache = ProjectPaths(root).cache_dir
    texts = Texts(11)
    out: dict[str, Any] = {}
    shared: list[tuple[float, float, float]] = []
    for mode in ("valid_snapshot", "snapshot_deleted_embeddings_kept", "cache_deleted"):
        runs: dict[str, list[tuple[float, float, float]]] = {"eventmem": [], "noop": []}
        for rep in range(repetitions[mode]):
            if mode == "snapshot_deleted_embeddings_kept":
                (cache / "snapshot.bin").unlink(missing_ok=True)
            elif mode == "cache_deleted":
                shutil.rmtree(cache, ignore_errors=True)
            order = ["eventmem", "noop"] if rep % 2 == 0 else ["noop", "eventmem"]
            if share_noop and shared:
                order.remove("noop")
                runs["noop"] = shared
            for name in order:
                params = bench.noop_params(root) if name == "noop" else bench.eventmem_params(root)
                runs[name].append(anyio.run(spawn_to_first_answer, bench, params, name == "noop", texts.text()))
        shared = shared or runs["noop"]
        em = [median([r[i] for r in runs["eventmem"]]) for i in range(3)]
        no = [median([r[i] for r in runs["noop"]]) for i in range(3)]
        out[mode] = {
            "repetitions": len(runs["eventmem"]),
            "eventmem_spawn_to_initialize_s": em[0],
            "eventmem_spawn_to_first_retrieve_s": em[1],
            "eventmem_first_save_s": em[2],
            "noop_spawn_to_initialize_s": no[0],
            "noop_spawn_to_first_answer_s": no[1],
            "noop_first_save_s": no[2],
            "initialize_ratio": ratio(em[0], no[0]),
            "ratio": ratio(em[1], no[1]),
            "ratio_is": "eventmem spawn-to-first-retrieve / no-op server spawn-to-first-answer (medians)",
            "difference_s": round(em[1] - no[1], 3),
            "first_save_ratio": ratio(em[2], no[2]),
            "first_save_ratio_is": "eventmem's first save_context after start / the no-op server's first save",
            "samples_s": {name: [[round(x, 3) for x in r] for r in items] for name, items in runs.items()},
            "samples_are": "[spawn to initialize, spawn to first retrieve, first save] per run",
        }
    return out


# -- 4: crash recovery ---------------------------------------------------------------------------------


def recover_main(root: str, text: str) -> None:
    """The next process after a crash: open the service, save once; print the timings."""
    started = time.perf_counter()
    from eventmem.journal.project import RootChoice
    from eventmem.service import open_service

    imported = time.perf_counter()
    service = open_service(RootChoice(Path(root), "bench"))
    opened = time.perf_counter()
    service.save(text, tags=["bench", "recovery"])
    saved = time.perf_counter()
    sys.stdout.write(
        json.dumps({"import_s": imported - started, "open_s": opened - imported, "first_save_s": saved - opened}) + "\n"
    )
    sys.stdout.flush()
    service.close()


def _is_event(line: bytes) -> bool:
    try:
        return bool(json.loads(line).get("type"))
    except ValueError:
        return False


def crash_recovery(bench: Bench, root: Path, repetitions: int) -> dict[str, Any]:
    from eventmem.journal.project import ProjectPaths

    paths = ProjectPaths(root)
    segment = paths.journal_dir / paths.segment_name()
    texts = Texts(99)
    normal = sample_lines(1, 5)[0]
    big = sample_lines(1, 6)[0].replace(b'"content":"', b'"content":"' + b"long payload " * 1300, 1)
    tails = {"clean": b"", "torn_half_line": normal[: len(normal) // 2], "torn_half_16k_line": big[: len(big) // 2]}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in tails}
    checks: dict[str, bool] = dict.fromkeys(tails, True)
    for rep in range(repetitions):
        order = list(tails) if rep % 2 == 0 else list(reversed(tails))
        for name in order:
            clean_size = segment.stat().st_size
            with open(segment, "ab") as handle:
                handle.write(tails[name])
                handle.flush()
                os.fsync(handle.fileno())
            began = time.perf_counter()
            proc = spawn(
                [sys.executable, str(SCRIPT), "_recover", str(root), texts.text()], bench.env(root), bench.errlog
            )
            result = json.loads(read_line(proc, 900))
            result["process_wall_s"] = time.perf_counter() - began
            finish(proc)
            runs[name].append(result)
            # the torn bytes are gone and the new save is one whole line right after the clean end
            with open(segment, "rb") as handle:
                handle.seek(clean_size - 1)
                rest = handle.read()
            checks[name] = checks[name] and rest[:1] == b"\n" and rest[1:].count(b"\n") == 1 and _is_event(rest[1:])
    out: dict[str, Any] = {"events": check_journal(root)["saved_events"], "repetitions": repetitions}
    for name, items in runs.items():
        out[name] = {
            "open_s": median([r["open_s"] for r in items]),
            "first_save_s": median([r["first_save_s"] for r in items]),
            "open_plus_first_save_s": median([r["open_s"] + r["first_save_s"] for r in items]),
            "import_s": median([r["import_s"] for r in items]),
            "process_wall_s": median([r["process_wall_s"] for r in items]),
        }
        if name != "clean":
            out[name]["torn_bytes"] = len(tails[name])
            out[name]["tail_cut_and_save_whole"] = checks[name]
            out[name]["ratio"] = ratio(out[name]["open_plus_first_save_s"], out["clean"]["open_plus_first_save_s"])
            out[name]["ratio_is"] = "open + first save with the torn tail / the same on a clean journal (medians)"
    final = check_journal(root)
    out["journal_after"] = final
    out["clean_run_journal_ok"] = checks["clean"]
    return out


# -- main ------------------------------------------------------------------------------------------------


def machine(tmp: Path) -> dict[str, Any]:
    from importlib import metadata

    versions = {}
    for name in ("mcp", "watchfiles", "msgspec", "faiss-cpu", "eventmem"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    fs = "unknown"
    best = ""
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 3 and str(tmp).startswith(parts[1]) and len(parts[1]) > len(best):
                best, fs = parts[1], parts[2]
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "tmp_filesystem": fs,
        "libraries": versions,
        "load_average_at_start": load(),
    }


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The headline ratios and the correctness checks of the run, in one place."""
    out: dict[str, Any] = {}
    levels = result.get("save_throughput", {}).get("levels", {})
    out["saves_per_s_by_processes"] = {k: v["eventmem_saves_per_s"] for k, v in levels.items()}
    out["raw_fsync_appends_per_s_by_processes"] = {k: v["raw_appends_per_s"] for k, v in levels.items()}
    out["scaling_vs_1_process"] = {k: v["eventmem_scaling_vs_1_process"] for k, v in levels.items()}
    out["raw_scaling_vs_1_process"] = {k: v["raw_scaling_vs_1_process"] for k, v in levels.items()}
    out["server_cpu_ms_per_save_by_processes"] = {
        k: v["eventmem_cpu_ms_per_save"]["servers"] for k, v in levels.items()
    }
    prop = result.get("propagation", {})
    out["catch_up_ratio_by_size"] = {k: v["ratio"] for k, v in prop.get("catch_up_on_call", {}).items()}
    pushes = {k: v for k, v in prop.get("watcher_push", {}).items() if k != "baseline_raw_watchfiles"}
    out["push_p50_ms_by_size"] = {k: v["latency_from_save_return"].get("p50_ms") for k, v in pushes.items()}
    out["push_p95_ms_by_size"] = {k: v["latency_from_save_return"].get("p95_ms") for k, v in pushes.items()}
    baseline = prop.get("watcher_push", {}).get("baseline_raw_watchfiles", {}).get("latency_from_append", {})
    out["raw_watch_p50_p95_ms"] = [baseline.get("p50_ms"), baseline.get("p95_ms")]
    out["push_ratio_by_size"] = {k: v["ratio"] for k, v in pushes.items()}
    out["cold_start_first_retrieve_s_by_size"] = {
        k: {mode: v[mode]["eventmem_spawn_to_first_retrieve_s"] for mode in v}
        for k, v in result.get("cold_start", {}).items()
    }
    out["cold_start_ratio_by_size"] = {
        k: {mode: v[mode]["ratio"] for mode in v} for k, v in result.get("cold_start", {}).items()
    }
    out["first_save_after_start_s_by_size"] = {
        k: v["valid_snapshot"]["eventmem_first_save_s"] for k, v in result.get("cold_start", {}).items()
    }
    out["crash_recovery_ratio_by_size"] = {
        k: {t: v[t]["ratio"] for t in v if isinstance(v[t], dict) and "ratio" in v[t]}
        for k, v in result.get("crash_recovery", {}).items()
    }
    durability = result.get("durability_modes", {})
    out["flush_vs_fsync_ratio"] = durability.get("ratio")
    checks = [level["journal_checks_ok"] and level["raw_file_checks_ok"] for level in levels.values()]
    checks += [durability.get(mode, {}).get("journal_checks_ok", True) for mode in ("fsync", "flush")]
    for crash in result.get("crash_recovery", {}).values():
        checks += [
            crash[t]["tail_cut_and_save_whole"] for t in crash if isinstance(crash[t], dict) and "ratio" in crash[t]
        ]
        checks.append(crash["journal_after"]["corrupt"] == 0 and crash["journal_after"]["torn_bytes"] == 0)
    found = [v["found_by_the_other_process"] for v in prop.get("catch_up_on_call", {}).values()]
    checks += [f.split("/")[0] == f.split("/")[1] for f in found]
    out["every_acknowledged_save_kept_and_seen"] = all(checks)
    out["push_notifications_missed"] = sum(v.get("missed", 0) for v in pushes.values())
    return out


def source_tree() -> dict[str, Any]:
    """The commit benchmarked and whether eventmem's files had uncommitted changes."""
    repo = SCRIPT.parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30)
        return done.stdout.rstrip("\n") if done.returncode == 0 else ""

    try:
        changed = [line[3:] for line in git("status", "--porcelain", "--", "eventmem").splitlines() if line]
        return {"commit": git("rev-parse", "--short", "HEAD") or None, "uncommitted_eventmem_files": changed}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "uncommitted_eventmem_files": None}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated memory counts (default 1000,10000,100000)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few iterations (under a minute)")
    parser.add_argument("--out", help="also write the JSON to this file")
    return parser.parse_args(argv)


@contextlib.contextmanager
def section(result: dict[str, Any], name: str, bench: Bench) -> Iterator[None]:
    """Time a section and record the load around it. A failure (eventmem changing under the run,
    say) is recorded under ``errors`` with the servers' last log lines, and the run goes on."""
    before = load()
    started = time.perf_counter()
    try:
        yield
    except Exception as exc:
        log(f"{name} FAILED: {exc!r}")
        killed = kill_everything_we_started()
        result.setdefault("errors", {})[name] = {
            "error": repr(exc)[:2000],
            "processes_killed": killed,
            "server_log_tail": bench.tail()[-2000:],
        }
    result["machine"].setdefault("sections", {})[name] = {
        "s": round(time.perf_counter() - started, 1),
        "load_average_before": before,
        "load_average_after": load(),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import anyio

    if args.sizes:
        sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    else:
        sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if not sizes or sizes[0] < 10:
        raise SystemExit("sizes must be at least 10")
    quick = args.quick
    per_process = 10 if quick else 300
    tp_rounds = 1 if quick else 2
    dur_count = 10 if quick else 300
    dur_rounds = 1 if quick else 2
    catch_iters = 5 if quick else 40
    push_iters = 5 if quick else 50
    gap = 0.1 if quick else 0.15
    crash_sizes = [n for n in sizes if quick or n >= 10_000]

    def cold_reps(n: int) -> dict[str, int]:
        if quick:
            return {"valid_snapshot": 1, "snapshot_deleted_embeddings_kept": 1, "cache_deleted": 1}
        heavy = n >= 100_000
        return {
            "valid_snapshot": 3,
            "snapshot_deleted_embeddings_kept": 2 if heavy else 3,
            "cache_deleted": 1 if heavy else 2,
        }

    tmp = Path(tempfile.mkdtemp(prefix="eventmem-bench-procs-"))
    bench = Bench(tmp)
    result: dict[str, Any] = {
        "benchmark": "eventmem tools/bench_processes.py",
        "machine": machine(tmp),
        "source": source_tree(),
        "settings": {
            "sizes": sizes,
            "quick": quick,
            "saves_per_process": per_process,
            "throughput_rounds": tp_rounds,
            "durability_saves": dur_count,
            "catch_up_iterations": catch_iters,
            "push_iterations": push_iters,
            "gap_between_iterations_s": gap,
            "cold_start_repetitions": {str(n): cold_reps(n) for n in sizes},
            "crash_recovery_sizes": crash_sizes,
            "noop_server": bench.noop_source,
            "clients": "mcp stdio_client + ClientSession; section 1 and 5: one client process per server",
        },
        "population": {},
        "propagation": {"catch_up_on_call": {}, "watcher_push": {}},
        "cold_start": {},
        "crash_recovery": {},
    }
    try:
        lines_file = tmp / "lines.jsonl"
        lines_file.write_bytes(b"".join(sample_lines(200, 1)))

        with section(result, "save_throughput", bench):
            result["save_throughput"] = save_throughput(bench, lines_file, per_process, tp_rounds)

        baseline: dict[str, Any] = {"latency_from_append": {}}
        with section(result, "watcher_baseline", bench):
            log("propagation: raw watchfiles baseline")
            baseline = anyio.run(raw_watch_baseline, bench, push_iters, gap)
            result["propagation"]["watcher_push"]["baseline_raw_watchfiles"] = baseline

        for n in sizes:
            root = tmp / f"project-{n}"
            with section(result, f"population_{n}", bench):
                log(f"size {n}: writing the journal")
                population = populate(root, n, seed=n)
                log(f"size {n}: warming up in-process (embeddings and snapshot)")
                population["warm_s"] = ensure_snapshot(bench, root)
                result["population"][str(n)] = population

            with section(result, f"cold_start_{n}", bench):
                log(f"size {n}: cold starts (valid snapshot, snapshot deleted, cache deleted) vs the no-op server")
                result["cold_start"][str(n)] = cold_start(bench, root, cold_reps(n), share_noop=quick)
            with contextlib.suppress(Exception):
                ensure_snapshot(bench, root)

            with section(result, f"propagation_{n}", bench):
                log(f"size {n}: propagation between two servers (push, then catch-up on call)")
                prop = anyio.run(propagation, bench, root, catch_iters, push_iters, gap)
                base_p50 = baseline["latency_from_append"].get("p50_ms")
                push = prop["watcher_push"]
                push["baseline_raw_watchfiles_p50_ms"] = base_p50
                push["ratio"] = ratio(push["latency_from_save_return"].get("p50_ms"), base_p50)
                push["ratio_is"] = "B notified p50 (from A's save returning) / raw awatch p50 (from the append)"
                push["p95_ratio"] = ratio(
                    push["latency_from_save_return"].get("p95_ms"), baseline["latency_from_append"].get("p95_ms")
                )
                result["propagation"]["catch_up_on_call"][str(n)] = prop["catch_up_on_call"] | {
                    "servers_ready_s": prop["servers_ready_s"]
                }
                result.setdefault("server_memory", {})[str(n)] = prop["server_memory"]
                result["propagation"]["watcher_push"][str(n)] = push

            if n in crash_sizes:
                with section(result, f"crash_recovery_{n}", bench):
                    log(f"size {n}: crash recovery (torn tail vs clean journal)")
                    ensure_snapshot(bench, root)
                    result["crash_recovery"][str(n)] = crash_recovery(bench, root, 1 if quick else 3)
            shutil.rmtree(root, ignore_errors=True)

        with section(result, "durability_modes", bench):
            result["durability_modes"] = durability_modes(bench, lines_file, dur_count, dur_rounds)
    finally:
        result["machine"]["stray_processes_killed"] = kill_everything_we_started()
        bench.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result["machine"]["load_average_at_end"] = load()
    result["total_s"] = round(time.perf_counter() - STARTED, 1)
    result["summary"] = summary(result)
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_client":
        client_main(json.loads(argv[1]))
        return 0
    if argv and argv[0] == "_raw_append":
        raw_append_main(argv[1], argv[2], int(argv[3]), argv[4] == "1")
        return 0
    if argv and argv[0] == "_cue_append":
        cue_append_main(argv[1], argv[2])
        return 0
    if argv and argv[0] == "_recover":
        recover_main(argv[1], argv[2])
        return 0

    args = parse_args(argv)

    def on_signal(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        result = run(args)
    finally:
        kill_everything_we_started()
    emit(result, args.out)
    if result.get("errors"):
        log(f"done, with failed sections: {', '.join(result['errors'])}")
        return 1
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
