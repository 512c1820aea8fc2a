"""The in-process store at scale for ``tools/bench_scale.py``: search latency and the vector search's
recall@10 against exact on a project journal, the memory of a serving ``eventmem serve`` and the
size of its cache; then what a merged git branch costs it: the time a running server's next call
and a CLI read take to take the merge in, and ``eventmem sync`` to project it into PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench import Servers, call, connect  # noqa: E402
from scale_journal import Project, directory_bytes, git  # noqa: E402
from scale_postgres import FILTER, FILTER_TAG, p50_ms  # noqa: E402

from eventmem.core.query_rules import Filters  # noqa: E402
from eventmem.embedders.embedder import HashingEmbedder  # noqa: E402
from eventmem.journal.project import RootChoice  # noqa: E402
from eventmem.service import open_service  # noqa: E402

Log = Callable[[str], None]


def environment(tmp: Path) -> dict[str, str]:
    """What every eventmem process of the run gets: a global memory of its own, quiet logs."""
    return {"EVENTMEM_GLOBAL_DIR": str(tmp / "global"), "EVENTMEM_LOG_LEVEL": "WARNING"}


def child_env(tmp: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_") and k != "PROJECT_MEMORY_ROOT"}
    return env | environment(tmp) | {"EVENTMEM_ROOT": str(root)}


def in_process(project: Project, tmp: Path, texts: list[str], log: Log) -> dict[str, Any]:
    """Build the cache (timed), then p50 of the service's hybrid search and of the vector index's top
    10 (through the store's read view, as PostgreSQL's is timed through ``queries.vector_hits``), and
    that top 10's recall against an exact scan of the same vectors, without and with the filter the
    PostgreSQL tiers use."""
    os.environ.update(environment(tmp))
    count = len(project.live)
    started = time.perf_counter()
    service = open_service(RootChoice(project.root, "bench"))
    service.search("warm up", limit=10)
    build_s = time.perf_counter() - started
    log(f"in-process {count}: cache built in {build_s:.0f}s")
    embedder = HashingEmbedder()
    out: dict[str, Any] = {"memories": count, "queries": len(texts), "filter": f"tags={FILTER_TAG}"}
    out["first_open_builds_cache_s"] = round(build_s, 2)
    try:
        ids, vectors, tagged = _exact_inputs(project)
        store = service.project
        for label, filters in (("", Filters()), ("filtered_", FILTER)):
            hybrid, vector_only, recalls = [], [], []
            for text in texts:
                t0 = time.perf_counter()
                service.search(text, limit=10, filters=filters)
                hybrid.append(time.perf_counter() - t0)
                query = embedder.embed([text])[0]
                t0 = time.perf_counter()
                with store.read() as view:  # (the vector projector's own top 10, as vector_hits is PostgreSQL's)
                    found, _ = view.vector_search(query, 10, view.mask(tags=filters.tags))
                    hits = {view.id_at(int(position)) for position in found}
                vector_only.append(time.perf_counter() - t0)
                scores = vectors @ query
                if filters.tags:
                    scores = np.where(tagged, scores, -np.inf)
                truth = {ids[i] for i in np.argpartition(-scores, 10)[:10]}
                recalls.append(len(truth & hits) / len(truth))
            out[f"{label}search_p50_ms"] = p50_ms(hybrid)
            out[f"{label}vector_search_p50_ms"] = p50_ms(vector_only)
            out[f"{label}vector_recall_at_10"] = round(statistics.mean(recalls), 4)
            log(f"in-process {count}: {label or 'unfiltered '}recall {out[f'{label}vector_recall_at_10']}")
    finally:
        service.close()
    cache = project.paths.cache_dir
    out["cache_bytes_per_memory"] = round(directory_bytes(cache) / count, 1)
    out["journal_bytes_per_memory"] = round(directory_bytes(project.paths.journal_dir) / count, 1)
    return out


def _exact_inputs(project: Project) -> tuple[list[str], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Ids, vectors (read from the embedding cache the store filled) and whether each carries the
    filter's tag, for every memory the project was created with."""
    import bench

    cached = bench.Project(project.root, {})
    cached.records = list(project.records)
    ids = [r[0] for r in project.records]
    return ids, cached.vectors(HashingEmbedder().dim), np.array([FILTER_TAG in r[3] for r in project.records])


def rss_bytes(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, every thread) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pid() -> int:
    """The ``eventmem serve`` this process started."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and b"serve" in command:
                return int(entry.name)
    raise RuntimeError("no eventmem serve started by this process")


def cli(tmp: Path, root: Path, *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "eventmem", "--json", *args],
        capture_output=True,
        text=True,
        env=child_env(tmp, root),
        cwd=root,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def sync(tmp: Path, project: Project, uri: str) -> float:
    """One ``eventmem sync`` of the project into ``uri``; its wall time."""
    seconds, _ = cli(tmp, project.root, "sync", "--to", uri, "--project", f"bench={project.root}")
    return seconds


def merge(project: Project, branch: str) -> float:
    started = time.perf_counter()
    git(project.root, "merge", "-q", "--no-ff", "-m", f"merge {branch}", branch)
    return time.perf_counter() - started


SETTLE_SECONDS = 8.0
"""How long a server is left before its memory is read again (its start's threads done)."""


async def first_call(session: Any, started: float, query: str) -> dict[str, Any]:
    """The first ``retrieve_context`` of a server spawned at ``started`` (its ``initialize`` answered):
    the seconds to its answer and the server's CPU seconds by then, what the answer warned of
    (vectors still being made: keyword matches only), how many memories it held, and the seconds
    from the spawn until an answer no longer warns."""
    result = await session.call_tool("retrieve_context", {"query": query}, read_timeout_seconds=900)
    out: dict[str, Any] = {"first_call_s": round(time.perf_counter() - started, 3)}
    # the server's CPU time (every thread) until it answered: far less moved by other work on the
    # machine than the wall time
    out["server_cpu_s_at_first_call"] = round(cpu_seconds(server_pid()), 3)
    answer = json.loads(result.content[0].text)
    out["first_call_warnings"] = answer.get("warnings", [])
    out["first_call_results"] = len(answer.get("results", []))
    await vectors_complete(session, answer)
    out["vectors_complete_s"] = round(time.perf_counter() - started, 3)
    return out


async def vectors_complete(session: Any, answer: dict[str, Any]) -> None:
    """Return once an answer (``answer`` first) no longer warns that vectors are being made: every
    0.1 s a ``retrieve_context`` that matches nothing (so no access is counted), for at most 900 s."""
    started = time.perf_counter()
    while "warnings" in answer and time.perf_counter() - started < 900:
        await asyncio.sleep(0.1)
        result = await session.call_tool("retrieve_context", {"query": "qqxnohitqqx"}, read_timeout_seconds=900)
        answer = json.loads(result.content[0].text)


async def serving(
    project: Project,
    tmp: Path,
    texts: list[str],
    branch_events: int,
    uri: str | None,
    log: Log,
    *,
    restart: bool = False,
    fresh_only: bool = False,
) -> dict[str, Any]:
    """A serving ``eventmem serve``: its first call, retrieve p50, memory; then a branch of
    ``branch_events`` merged under it: the time until its next call answers with the merge. With
    ``restart``, a second server started from the snapshot the first left: its first call, p50, memory.
    With ``fresh_only``, the first call alone (see :func:`first_call`)."""
    servers = Servers(tmp, environment(tmp))
    out: dict[str, Any] = {}
    try:
        async with AsyncExitStack() as stack:
            started = time.perf_counter()
            session = await connect(stack, servers.eventmem(project.root), servers.errlog)
            out |= await first_call(session, started, texts[0])
            if fresh_only:
                return out
            samples = [await call(session, "retrieve_context", {"query": text}) for text in texts]
            out["retrieve_p50_ms"] = p50_ms(samples)
            pid = server_pid()
            out["rss_bytes"] = rss_bytes(pid).get("VmRSS", 0)
            out["rss_peak_bytes"] = rss_bytes(pid).get("VmHWM", 0)
            out["rss_bytes_per_memory"] = round(out["rss_bytes"] / len(project.live), 1)
            out["rss_peak_bytes_per_memory"] = round(out["rss_peak_bytes"] / len(project.live), 1)
            # the same a moment later, with the threads the start left (postings, snapshot) done
            await asyncio.sleep(SETTLE_SECONDS)
            await call(session, "retrieve_context", {"query": texts[0]})
            out["settled_rss_bytes_per_memory"] = round(rss_bytes(pid).get("VmRSS", 0) / len(project.live), 1)
            events, counts, marked = project.mixed_events(branch_events, 101, "mergemarkerone")
            project.branch("feature1", events)
            out["merged_branch"] = {"events": len(events), "by_type": counts}
            out["load_average_at_merge"] = [round(x, 2) for x in os.getloadavg()]
            cpu = cpu_seconds(pid)
            out["git_merge_s"] = round(merge(project, "feature1"), 3)
            started = time.perf_counter()
            result = await session.call_tool("retrieve_context", {"query": "mergemarkerone"}, read_timeout_seconds=900)
            out["next_call_after_merge_s"] = round(time.perf_counter() - started, 3)
            # the server's CPU time (every thread) from the merge to the answer: less moved by the
            # machine's other work than the wall time
            out["server_cpu_s_until_next_call_answered"] = round(cpu_seconds(pid) - cpu, 3)
            answer = json.loads(result.content[0].text)
            out["next_call_sees_merge"] = marked in {hit["id"] for hit in answer.get("results", [])}
            out["next_call_warnings"] = answer.get("warnings", [])
            # until the merged memories are embedded (in the background), answers say so
            started = time.perf_counter()
            await vectors_complete(session, answer)
            out["vectors_complete_after_next_call_s"] = round(time.perf_counter() - started, 3)
            after = [await call(session, "retrieve_context", {"query": text}) for text in texts[:50]]
            out["retrieve_p50_ms_after_merge"] = p50_ms(after)
            log(f"serving: next call after a merge of {len(events)} events: {out['next_call_after_merge_s']}s")
            out["rss_bytes_per_memory_after_merge"] = round(rss_bytes(pid).get("VmRSS", 0) / len(project.live), 1)
            await asyncio.sleep(SETTLE_SECONDS)  # (the snapshot the merge made due, written)
            await call(session, "retrieve_context", {"query": texts[0]})
            settled = rss_bytes(pid).get("VmRSS", 0)
            out["settled_rss_bytes_per_memory_after_merge"] = round(settled / len(project.live), 1)
        if restart:  # a server started again, from the snapshot the first one left
            await asyncio.sleep(SETTLE_SECONDS)  # (its snapshot written)
            async with AsyncExitStack() as stack:
                started = time.perf_counter()
                session = await connect(stack, servers.eventmem(project.root), servers.errlog)
                await call(session, "retrieve_context", {"query": "warm up"}, timeout=900)
                out["restart_first_call_s"] = round(time.perf_counter() - started, 3)
                samples = [await call(session, "retrieve_context", {"query": text}) for text in texts]
                out["restart_retrieve_p50_ms"] = p50_ms(samples)
                await asyncio.sleep(SETTLE_SECONDS)
                await call(session, "retrieve_context", {"query": texts[0]})
                sizes = rss_bytes(server_pid())
                out["restart_rss_bytes_per_memory"] = round(sizes.get("VmRSS", 0) / len(project.live), 1)
                out["restart_rss_peak_bytes_per_memory"] = round(sizes.get("VmHWM", 0) / len(project.live), 1)
    finally:
        servers.close()
    if uri is not None:
        out["sync_after_merge_s"] = round(sync(tmp, project, uri), 3)
        out["sync_after_merge_events_per_s"] = round(branch_events / out["sync_after_merge_s"], 1)
    return out


def cli_after_merge(project: Project, tmp: Path, branch_events: int, uri: str | None) -> dict[str, Any]:
    """No server running: a CLI read before and after a second branch is merged."""
    out: dict[str, Any] = {}
    out["cli_read_before_merge_s"] = round(cli(tmp, project.root, "search", "warm up", "--limit", "5")[0], 3)
    events, counts, marked = project.mixed_events(branch_events, 202, "mergemarkertwo")
    project.branch("feature2", events)
    out["merged_branch"] = {"events": len(events), "by_type": counts}
    out["git_merge_s"] = round(merge(project, "feature2"), 3)
    seconds, text = cli(tmp, project.root, "search", "mergemarkertwo", "--limit", "5")
    out["cli_read_after_merge_s"] = round(seconds, 3)
    out["cli_read_sees_merge"] = marked in text
    if uri is not None:
        out["sync_after_merge_s"] = round(sync(tmp, project, uri), 3)
        out["sync_after_merge_events_per_s"] = round(branch_events / out["sync_after_merge_s"], 1)
    return out


def first_and_incremental_sync(project: Project, tmp: Path, uri: str, log: Log) -> dict[str, Any]:
    """``eventmem sync`` of the whole journal into an empty database, then of 1,000 new events."""
    count = len(project.live)
    first = sync(tmp, project, uri)
    log(f"sync: first sync of {count} events in {first:.1f}s")
    events, counts, _ = project.mixed_events(1000, 303, "syncmarker")
    project.append(project.root, "writer-local.main.jsonl", events)
    incremental = sync(tmp, project, uri)
    noop = sync(tmp, project, uri)
    return {
        "first_sync_events": count,
        "first_sync_s": round(first, 3),
        "first_sync_events_per_s": round(count / first, 1),
        "incremental_events": len(events),
        "incremental_by_type": counts,
        "incremental_sync_s": round(incremental, 3),
        "incremental_events_per_s": round(len(events) / incremental, 1),
        "sync_with_nothing_new_s": round(noop, 3),
        "note": "wall time of the `eventmem sync` command, its start included (see sync_with_nothing_new_s); "
        "vectors from the project's embedding cache, which the in-process store filled",
    }
