#!/usr/bin/env python
"""eventmem performance benchmark: every figure is measured next to a baseline in the same run.

Prints one JSON object on stdout; progress goes to stderr. Absolute numbers depend on the machine
and on whatever else runs on it, so each figure also carries its baseline, the ratio between the
two, the target and whether it was met.

Figures (for each size unless said otherwise):

- ``mcp_round_trip``: save_context / retrieve_context through a real stdio MCP client against
  ``python -m eventmem serve``, interleaved call by call with the same calls to
  ``tools/noop_server.py`` (same SDK, a list append). Targets: save p50 <= 1.5x and retrieve p50
  <= 2x the no-op's. ``retrieve_filtered``: ``recall_memories`` with a type filter (``decision``,
  about 23% of the memories; ``error``, about 9%), summaries only, against the no-op's retrieve:
  the same 2x target. ``retrieve_vector_floor``: ``tools/vector_floor_server.py`` (the same SDK
  and eventmem's store, answering with the vector path alone: embedding, scan, exact re-rank, the
  best five) against the no-op: what a retrieve of the required recall costs at the least, as a
  ratio to the no-op's, in a rotation of its own (not a target; it tells how much of the 2x the rest
  of a recall can have). ``baseline_code`` (with ``--baseline-code DIR``): the same save, retrieve
  and filtered recall answered by another checkout's eventmem (``python -m eventmem serve`` with
  ``DIR`` first on ``PYTHONPATH``, on a copy of the warmed project), in the same rotations, against
  the no-op and against this code's server.
- ``save_vs_journal_size``: save p50 at each size (saving must not slow down as the journal grows).
- ``recall_in_process``: ``MemoryService.recall`` p50/p95 (no filter, a type filter, vector-only,
  keyword-only) next to a plain numpy scan of the same vectors (query embedding, matrix-vector
  product, top 50). Target at 100k: p50 < 10 ms.
- ``naive_sqlite_blob``: the seeds' design (vectors as SQLite blobs, loaded and compared row by
  row in Python per query) versus eventmem's recall at the same size.
- ``rebuild`` (largest size): ``Store.rebuild()`` with cached embeddings (target < 3 s, snapshot
  written; the time when answers are ready is given beside it) and with an empty embedding cache,
  next to a bare decode of the journal.
- ``cold_start`` (largest size): spawn to ``initialize`` answered and to the first retrieve
  answered, versus the no-op server. Target: first answer within 0.5 s of the no-op's.
- ``save_throughput``: in-process saves/s with ``durability = fsync`` and ``flush``, next to bare
  journal appends in the same mode.

Memories are pre-populated by writing ``MemorySaved`` events straight into journal segments (varied
text from a Zipf-distributed vocabulary of coding words, 30-60 words each); the project is then
warmed by one service open/close (embedding cache and snapshot written) before anything is timed.
All data lives in a temporary directory that is removed at the end.

Usage::

    python tools/bench.py                       # sizes 1000,10000,100000 (about 6 minutes on 2 cores)
    python tools/bench.py --sizes 1000,10000
    python tools/bench.py --quick               # tiny sizes, few iterations (smoke test)
    python tools/bench.py --out bench.json      # also write the JSON to a file
    python tools/bench.py --sizes 100000 --ann-from 1000000 --postings-from 1000000   # exact scan, FTS5 ranking
    python tools/bench.py --sizes 100000 --baseline-code ../base-main   # another checkout's server beside this one
"""

from __future__ import annotations

import argparse
import gc
import heapq
import itertools
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import faiss
import numpy as np
from bench_json import emit

import eventmem
from eventmem.core.codec import encode_event
from eventmem.core.events import KINDS, MemorySaved
from eventmem.core.ids import new_id, to_iso
from eventmem.core.query_rules import Filters
from eventmem.core.records import MemoryRecord
from eventmem.embedders.embedcache import content_hash
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths, RootChoice
from eventmem.projectors.vectors import embed_text
from eventmem.runner.tuning import Tuning
from eventmem.service import MemoryService, open_service

faiss.omp_set_num_threads(1)  # as eventmem's server does

HERE = Path(__file__).resolve().parent
NOOP_SERVER = HERE / "noop_server.py"
FLOOR_SERVER = HERE / "vector_floor_server.py"
SEGMENT_EVENTS = 25_000
"""Pre-populated events per journal segment (a few writers' segments, each under max_segment_bytes)."""
DEFAULT_SIZES = (1000, 10_000, 100_000)
QUICK_SIZES = (200, 1000)
NAIVE_BUDGET_S = 60.0

STARTED = time.perf_counter()


def log(message: str) -> None:
    sys.stderr.write(f"[bench {time.perf_counter() - STARTED:7.1f}s] {message}\n")
    sys.stderr.flush()


# -- statistics -----------------------------------------------------------------------------------


def stats(samples: list[float]) -> dict[str, Any]:
    """Latency summary in milliseconds of samples given in seconds."""
    ms = np.asarray(samples, dtype=np.float64) * 1000.0
    if len(ms) == 0:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(float(np.median(ms)), 3),
        "p95_ms": round(float(np.percentile(ms, 95)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "min_ms": round(float(ms.min()), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


def check(value: float | None, target: float, *, below: bool = True) -> bool | None:
    if value is None:
        return None
    return value <= target if below else value >= target


# -- text corpus ------------------------------------------------------------------------------------

FUNCTION_WORDS = (
    "the a to of and in is for on with that this it when we by from be as not after before if so but "
    "or are was should must can now only also all then use instead because"
).split()

CODE_WORDS = (
    "cache index query journal segment snapshot vector faiss sqlite python function class method "
    "module import async await thread lock mutex retry timeout error exception handler request "
    "response server client token parser lexer compile build deploy docker kubernetes config yaml "
    "json schema migration database table column row commit branch merge rebase test fixture mock "
    "assert refactor rename variable constant loop iterator generator decorator closure lambda "
    "endpoint route middleware session cookie header payload serializer validator model field "
    "queue worker scheduler cron job batch stream buffer socket pipe signal process subprocess "
    "memory leak profile benchmark latency throughput regression flaky ci pipeline lint format "
    "typecheck mypy ruff pytest coverage release version tag changelog dependency package wheel "
    "venv pip poetry lockfile upgrade pin api sdk cli flag option argument default env variable "
    "secret key credential auth oauth jwt permission role user admin tenant account billing invoice "
    "payment webhook event listener callback promise future coroutine loop deadline cancel shutdown "
    "startup healthcheck metric log trace span alert dashboard grafana prometheus sentry incident "
    "outage rollback hotfix patch bug fix issue ticket review approve reviewer convention style "
    "naming docstring comment readme docs tutorial example frontend backend react component state "
    "props hook render css layout grid modal button form input submit redirect url path file "
    "directory folder storage bucket upload download s3 blob object bytes encoding utf8 unicode "
    "parse dump load save store fetch update delete insert select join where order limit offset "
    "pagination cursor transaction isolation deadlock replica primary shard partition hash "
    "checksum digest compression gzip zstd archive compaction retention ttl expiry eviction lru "
    "warmup cold hot path fast slow bottleneck hotspot allocation copy clone borrow lifetime "
    "generic trait interface protocol abstract concrete inheritance composition factory singleton "
    "adapter facade repository service controller view template macro plugin extension hookup "
    "windows linux macos arm x86 container image registry helm terraform ansible nginx proxy "
    "gateway load balancer dns tls certificate https grpc protobuf graphql rest websocket sse"
).split()

TAGS = (
    "backend frontend database ci testing performance security auth api infra docs bug decision "
    "convention refactor release deps config logging monitoring storage search memory cli ux"
).split()


class Corpus:
    """Deterministic, varied memory texts and queries drawn from a Zipf-distributed vocabulary."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        rng = random.Random(1234)  # the vocabulary is the same for every corpus
        identifiers: set[str] = set()
        while len(identifiers) < 1500:
            a, b = rng.sample(CODE_WORDS, 2)
            shape = rng.randrange(4)
            if shape == 0:
                identifiers.add(a + b.capitalize())
            elif shape == 1:
                identifiers.add(f"{a}_{b}")
            elif shape == 2:
                identifiers.add(f"src/{a}/{b}.py")
            else:
                identifiers.add(f"{a}.{b}()")
        content = list(dict.fromkeys(CODE_WORDS)) + sorted(identifiers)
        rng.shuffle(content)
        self.vocab = FUNCTION_WORDS + content
        weights = [1.0 / (rank + 1) ** 1.0 for rank in range(len(self.vocab))]
        self.cum_weights = list(itertools.accumulate(weights))
        self.content_words = content

    def _sentences(self, words: list[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(words):
            length = self.rng.randint(6, 14)
            sentence = words[i : i + length]
            i += length
            first = sentence[0]
            out.append(" ".join([first[:1].upper() + first[1:], *sentence[1:]]) + ".")
        return " ".join(out)

    def memories(self, count: int) -> list[tuple[str, str, tuple[str, ...], str, float]]:
        """(title, content, tags, kind, importance) for ``count`` memories."""
        rng = self.rng
        lengths = [rng.randint(30, 60) for _ in range(count)]
        words = rng.choices(self.vocab, cum_weights=self.cum_weights, k=sum(lengths))
        out = []
        position = 0
        kinds = KINDS[:10]
        for length in lengths:
            chunk = words[position : position + length]
            position += length
            title = " ".join(rng.sample(self.content_words, rng.randint(3, 6)))
            tags = tuple(sorted(rng.sample(TAGS, rng.randint(1, 3))))
            kind = kinds[min(int(rng.expovariate(0.45)), len(kinds) - 1)]
            importance = rng.choice((0.3, 0.5, 0.5, 0.5, 0.7, 0.9))
            out.append((title, self._sentences(chunk), tags, kind, importance))
        return out

    def text(self) -> str:
        return self.memories(1)[0][1]

    def queries(self, count: int) -> list[str]:
        templates = (
            "how do we {a} the {b}",
            "{a} {b} {c}",
            "why does {a} fail with {b}",
            "{a} error in {b}",
            "decision about {a} and {b}",
            "where is {a} configured",
            "{a}",
        )
        out = []
        for _ in range(count):
            a, b, c = (self.rng.choice(self.content_words) for _ in range(3))
            out.append(self.rng.choice(templates).format(a=a, b=b, c=c))
        return out


def saved_event(memory: tuple[str, str, tuple[str, ...], str, float], ts: str, by: str) -> MemorySaved:
    """The ``saved`` event of one of :meth:`Corpus.memories`; its summary is its first sentence."""
    title, content, tags, kind, importance = memory
    summary = content.split(". ", 1)[0]
    return MemorySaved(
        id=new_id(),
        ts=ts,
        by=by,
        memory=new_id(),
        kind=kind,
        title=title,
        content=content,
        summary=summary if len(summary) <= 240 else summary[:239] + "…",
        tags=tags,
        importance=importance,
    )


# -- projects ----------------------------------------------------------------------------------------


class Project:
    """One pre-populated project in the temporary directory."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.paths = ProjectPaths(root)
        self.env = env
        self.records: list[tuple[str, str, str, tuple[str, ...]]] = []
        """(memory id, title, content, tags) of every pre-populated memory."""

    def open(self, *, load: bool = True, extra_env: dict[str, str] | None = None) -> MemoryService:
        return open_service(RootChoice(self.root, "bench"), environ=self.env | (extra_env or {}), load=load)

    def populate(self, count: int, corpus: Corpus) -> dict[str, Any]:
        started = time.perf_counter()
        self.paths.ensure()
        now = time.time()
        rng = random.Random(count)
        segments = 0
        total_bytes = 0
        memories = corpus.memories(count)
        for first in range(0, count, SEGMENT_EVENTS):
            lines = []
            for memory in memories[first : first + SEGMENT_EVENTS]:
                moment = datetime.fromtimestamp(now - rng.random() * 180 * 86400, UTC)
                event = saved_event(memory, to_iso(moment), rng.choice(("claude-code", "cursor", "cli", "codex")))
                self.records.append((event.memory, event.title, event.content, event.tags))
                lines.append(encode_event(event))
            data = b"".join(lines)
            (self.paths.journal_dir / f"seed{segments:02d}.main.jsonl").write_bytes(data)
            segments += 1
            total_bytes += len(data)
        return {
            "memories": count,
            "segments": segments,
            "journal_bytes": total_bytes,
            "write_journal_s": round(time.perf_counter() - started, 3),
        }

    def vectors(self, dim: int) -> np.ndarray:
        """The cached embedding of every pre-populated memory, in population order."""
        record = np.dtype([("hash", "V16"), ("vector", np.float32, (dim,))])
        rows: dict[bytes, np.ndarray] = {}
        for path in sorted((self.paths.cache_dir / "embeddings").glob("*.bin")):
            data = np.fromfile(path, dtype=record)
            hashes = data["hash"].tobytes()
            rows.update((hashes[i * 16 : (i + 1) * 16], data["vector"][i]) for i in range(len(data)))
        out = np.zeros((len(self.records), dim), np.float32)
        for i, (memory_id, title, content, tags) in enumerate(self.records):
            text = embed_text(MemoryRecord(id=memory_id, title=title, content=content, tags=tags))
            out[i] = rows[content_hash(text)]
        return out


# -- MCP ---------------------------------------------------------------------------------------------


def background_indexes(memories: int) -> list[str]:
    """The log lines of the indexes a server of this many memories makes in the background after a
    start (the keyword postings, made or read from the snapshot; the approximate vector index)."""
    tuning = Tuning()
    lines = []
    if memories >= tuning.postings_from:
        lines.append("keyword postings of")
    if memories >= tuning.ann_from:
        lines.append("approximate vector index of")
    return lines


class Servers:
    """Spawn parameters for eventmem and the no-op server, with their stderr kept in a file."""

    def __init__(self, tmp: Path, base_env: dict[str, str], baseline_code: Path | None = None) -> None:
        self.tmp = tmp
        self.base_env = base_env
        self.baseline_code = baseline_code
        """Another checkout whose eventmem :meth:`baseline` runs (``--baseline-code``)."""
        self.baseline_name = baseline_code.name if baseline_code else ""
        """The checkout's folder name, for the JSON (not its path on this machine)."""
        self.errlog_path = tmp / "servers.stderr.log"
        self.errlog = open(self.errlog_path, "a", encoding="utf-8")  # closed in close()

    def close(self) -> None:
        self.errlog.close()

    def _env(self, root: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_") and k != "PROJECT_MEMORY_ROOT"}
        return env | self.base_env | {"EVENTMEM_ROOT": str(root)}

    def eventmem(self, root: Path, *, log_level: str | None = None) -> Any:
        from mcp import StdioServerParameters

        env = self._env(root) | ({"EVENTMEM_LOG_LEVEL": log_level} if log_level else {})
        return StdioServerParameters(command=sys.executable, args=["-m", "eventmem", "serve"], env=env, cwd=str(root))

    def baseline(self, root: Path, *, log_level: str | None = None) -> Any:
        """eventmem of :attr:`baseline_code` (first on ``PYTHONPATH``) serving ``root``."""
        from mcp import StdioServerParameters

        assert self.baseline_code is not None
        env = self._env(root) | ({"EVENTMEM_LOG_LEVEL": log_level} if log_level else {})
        path = os.pathsep.join(p for p in (str(self.baseline_code), env.get("PYTHONPATH", "")) if p)
        return StdioServerParameters(
            command=sys.executable, args=["-m", "eventmem", "serve"], env=env | {"PYTHONPATH": path}, cwd=str(root)
        )

    async def ready(self, since: int, lines: list[str], timeout: float = 600.0) -> float:
        """Wait until the servers' stderr, past byte ``since``, holds every one of ``lines``; the seconds waited."""
        started = time.perf_counter()
        while True:
            self.errlog.flush()
            with open(self.errlog_path, "rb") as handle:
                handle.seek(since)
                text = handle.read().decode("utf-8", errors="replace")
            if all(line in text for line in lines):
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"the server did not log {lines} within {timeout:.0f} s")
            await anyio.sleep(0.2)

    def noop(self, root: Path) -> Any:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=sys.executable, args=[str(NOOP_SERVER)], env=self._env(root), cwd=str(root)
        )

    def floor(self, root: Path) -> Any:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=sys.executable, args=[str(FLOOR_SERVER)], env=self._env(root), cwd=str(root)
        )

    def tail(self) -> str:
        self.errlog.flush()
        return self.errlog_path.read_text(encoding="utf-8", errors="replace")[-3000:]


async def connect(stack: AsyncExitStack, params: Any, errlog: Any) -> Any:
    from mcp import ClientSession, stdio_client

    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def call(session: Any, name: str, arguments: dict[str, Any], timeout: float = 60.0) -> float:
    """One tool call; returns its round-trip time. A tool error stops the benchmark."""
    started = time.perf_counter()
    result = await session.call_tool(name, arguments, read_timeout_seconds=timeout)
    elapsed = time.perf_counter() - started
    if getattr(result, "is_error", False):
        texts = [getattr(block, "text", "") for block in getattr(result, "content", [])]
        raise RuntimeError(f"tool {name} failed: {' '.join(texts)[:500]}")
    return elapsed


async def round_trips(
    servers: Servers, project: Project, corpus: Corpus, iterations: int, warmup: int
) -> dict[str, Any]:
    """Interleave the same calls to eventmem and to the no-op server, call by call."""
    async with AsyncExitStack() as stack:
        started = time.perf_counter()
        servers.errlog.flush()
        since = servers.errlog_path.stat().st_size
        # the indexes a server makes in the background after a start (the approximate vector index,
        # the keyword postings) are waited for, so that what is timed is a server in its steady state
        background = background_indexes(len(project.records))
        em = await connect(
            stack, servers.eventmem(project.root, log_level="INFO" if background else None), servers.errlog
        )
        await call(em, "retrieve_context", {"query": "warm up the memory"}, timeout=900)
        first_call_s = time.perf_counter() - started
        background_s = await servers.ready(since, background) if background else 0.0
        base: Any = None
        if servers.baseline_code is not None:
            # on a copy of the warmed project: its saves and its cache are its own
            copy = project.root.with_name(project.root.name + "-baseline")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(project.root, copy, symlinks=True)
            servers.errlog.flush()
            since = servers.errlog_path.stat().st_size
            level = "INFO" if background else None
            base = await connect(stack, servers.baseline(copy, log_level=level), servers.errlog)
            await call(base, "retrieve_context", {"query": "warm up the memory"}, timeout=900)
            if background:
                await servers.ready(since, background)
        noop = await connect(stack, servers.noop(project.root), servers.errlog)
        floor = await connect(stack, servers.floor(project.root), servers.errlog)
        await call(floor, "retrieve", {"query": "warm up the memory"}, timeout=900)
        samples: dict[str, Any] = {}
        done: list[tuple[float, ...]] = []

        async def rotate(i: int, *calls: Callable[[], Awaitable[float]]) -> None:
            """The same call to each server; which one goes first rotates."""
            times = [0.0] * len(calls)
            for k in range(len(calls)):
                j = (i + k) % len(calls)
                times[j] = await calls[j]()
            done.append(tuple(times))

        def based(name: str, arguments: dict[str, Any]) -> list[Callable[[], Awaitable[float]]]:
            """The same call to the baseline code's server, if there is one (last in the rotation's list)."""
            return [] if base is None else [lambda: call(base, name, arguments)]

        def saves(text: str, tags: list[str]) -> list[Callable[[], Awaitable[float]]]:
            return [
                lambda: call(em, "save_context", {"context_text": text, "tags": tags}),
                lambda: call(noop, "save", {"text": text}),
                lambda: call(noop, "save_context", {"context_text": text, "tags": tags}),
                *based("save_context", {"context_text": text, "tags": tags}),
            ]

        def retrieves(query: str) -> list[Callable[[], Awaitable[float]]]:
            return [
                lambda: call(em, "retrieve_context", {"query": query}),
                lambda: call(noop, "retrieve", {"query": query}),
                lambda: call(noop, "retrieve_context", {"query": query}),
                *based("retrieve_context", {"query": query}),
            ]

        def filtered(query: str, kind: str) -> list[Callable[[], Awaitable[float]]]:
            arguments = {"query": query, "type": kind, "include_content": False}
            return [
                lambda: call(em, "recall_memories", arguments),
                lambda: call(noop, "retrieve", {"query": query}),
                *based("recall_memories", arguments),
            ]

        def floors(query: str) -> list[Callable[[], Awaitable[float]]]:
            return [lambda: call(floor, "retrieve", {"query": query}), lambda: call(noop, "retrieve", {"query": query})]

        for i in range(warmup):
            await rotate(i, *saves(corpus.text(), ["bench", "warmup"]))
            await rotate(i, *retrieves(corpus.queries(1)[0]))
            await rotate(i, *filtered(corpus.queries(1)[0], FILTER_KINDS[i % len(FILTER_KINDS)]))
            await rotate(i, *floors(corpus.queries(1)[0]))
        done.clear()
        for i in range(iterations):
            await rotate(i, *saves(corpus.text(), sorted(corpus.rng.sample(TAGS, 2))))
        samples["em_save"], samples["noop_save"], samples["sig_save"], *samples["base_save"] = (
            list(x) for x in zip(*done, strict=True)
        )
        done.clear()
        for i, query in enumerate(corpus.queries(iterations)):
            await rotate(i, *retrieves(query))
        samples["em_retrieve"], samples["noop_retrieve"], samples["sig_retrieve"], *samples["base_retrieve"] = (
            list(x) for x in zip(*done, strict=True)
        )
        for kind in FILTER_KINDS:
            done.clear()
            for i, query in enumerate(corpus.queries(iterations)):
                await rotate(i, *filtered(query, kind))
            samples[f"em_{kind}"], samples[f"noop_{kind}"], *samples[f"base_{kind}"] = (
                list(x) for x in zip(*done, strict=True)
            )
        done.clear()
        for i, query in enumerate(corpus.queries(iterations)):
            await rotate(i, *floors(query))
        samples["floor_retrieve"], samples["noop_floor"] = (list(x) for x in zip(*done, strict=True))
    em_save, noop_save = stats(samples["em_save"]), stats(samples["noop_save"])
    em_ret, noop_ret = stats(samples["em_retrieve"]), stats(samples["noop_retrieve"])
    sig_save, sig_ret = stats(samples["sig_save"]), stats(samples["sig_retrieve"])
    floor_ret, noop_floor = stats(samples["floor_retrieve"]), stats(samples["noop_floor"])
    floor_ratio = ratio(floor_ret["p50_ms"], noop_floor["p50_ms"])
    save_ratio = ratio(em_save["p50_ms"], noop_save["p50_ms"])
    retrieve_ratio = ratio(em_ret["p50_ms"], noop_ret["p50_ms"])
    out: dict[str, Any] = {
        "eventmem": {"save_context": em_save, "retrieve_context": em_ret},
        "noop": {"save": noop_save, "retrieve": noop_ret},
        "noop_same_signature": {
            "save_context": sig_save,
            "retrieve_context": sig_ret,
            "is": "the no-op server's tools with eventmem's parameters: what the SDK spends on the signature",
            "save_ratio": ratio(em_save["p50_ms"], sig_save["p50_ms"]),
            "retrieve_ratio": ratio(em_ret["p50_ms"], sig_ret["p50_ms"]),
        },
        "spawn_to_first_retrieve_s": round(first_call_s, 3),
        "background_indexes_waited_s": round(background_s, 3),
        "save": {
            "eventmem_p50_ms": em_save["p50_ms"],
            "eventmem_p95_ms": em_save["p95_ms"],
            "noop_p50_ms": noop_save["p50_ms"],
            "ratio": save_ratio,
            "target": "save p50 / no-op save p50 <= 1.5",
            "meets_target": check(save_ratio, 1.5),
        },
        "retrieve": {
            "eventmem_p50_ms": em_ret["p50_ms"],
            "eventmem_p95_ms": em_ret["p95_ms"],
            "noop_p50_ms": noop_ret["p50_ms"],
            "ratio": retrieve_ratio,
            "target": "retrieve p50 / no-op retrieve p50 <= 2",
            "meets_target": check(retrieve_ratio, 2.0),
        },
        "retrieve_filtered": {kind: filtered_figures(samples, kind) for kind in FILTER_KINDS},
        "retrieve_vector_floor": {
            "is": "tools/vector_floor_server.py: eventmem's store answering with the vector path alone "
            "(embedding, scan, exact re-rank, five hits), on the same SDK: the least a retrieve of the "
            "required recall costs",
            "floor_p50_ms": floor_ret["p50_ms"],
            "floor_p95_ms": floor_ret["p95_ms"],
            "noop_p50_ms": noop_floor["p50_ms"],
            "ratio": floor_ratio,
            "retrieve_ratio_less_floor_ratio": round(retrieve_ratio - floor_ratio, 3),
        },
    }
    if base is not None:
        out["baseline_code"] = baseline_figures(samples, servers.baseline_name)
    return out


def baseline_figures(samples: dict[str, Any], code: str) -> dict[str, Any]:
    """The baseline code's server beside this code's and the no-op, call for call in the same rotations."""
    out: dict[str, Any] = {
        "code": code,
        "is": "the same calls to another checkout's eventmem, on a copy of the project",
    }
    for figure, mine, noop in [
        ("save_context", "em_save", "noop_save"),
        ("retrieve_context", "em_retrieve", "noop_retrieve"),
        *((f"recall_memories_{kind}", f"em_{kind}", f"noop_{kind}") for kind in FILTER_KINDS),
    ]:
        base = stats(samples["base_" + mine[3:]][0])
        this, idle = stats(samples[mine]), stats(samples[noop])
        out[figure] = {
            "baseline_p50_ms": base["p50_ms"],
            "baseline_p95_ms": base["p95_ms"],
            "this_p50_ms": this["p50_ms"],
            "noop_p50_ms": idle["p50_ms"],
            "baseline_ratio_to_noop": ratio(base["p50_ms"], idle["p50_ms"]),
            "this_ratio_to_noop": ratio(this["p50_ms"], idle["p50_ms"]),
            "this_over_baseline": ratio(this["p50_ms"], base["p50_ms"]),
        }
    return out


FILTER_KINDS = ("decision", "error")
"""Types a filtered recall asks for: about 23% and 9% of the benchmark's memories."""


def filtered_figures(samples: dict[str, list[float]], kind: str) -> dict[str, Any]:
    """``recall_memories`` with a type filter (summaries only, like the no-op's answer) against the no-op's retrieve."""
    em, noop = stats(samples[f"em_{kind}"]), stats(samples[f"noop_{kind}"])
    figure = ratio(em["p50_ms"], noop["p50_ms"])
    return {
        "eventmem_p50_ms": em["p50_ms"],
        "eventmem_p95_ms": em["p95_ms"],
        "noop_p50_ms": noop["p50_ms"],
        "ratio": figure,
        "target": "filtered recall p50 / no-op retrieve p50 <= 2",
        "meets_target": check(figure, 2.0),
    }


async def cold_start(servers: Servers, project: Project, repetitions: int) -> dict[str, Any]:
    from mcp import ClientSession, stdio_client

    async def once(params: Any, tool: str) -> tuple[float, float]:
        started = time.perf_counter()
        async with stdio_client(params, errlog=servers.errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                initialized = time.perf_counter() - started
                await call(session, tool, {"query": "how do we retry the journal lock"}, timeout=900)
                answered = time.perf_counter() - started
        return initialized, answered

    runs: dict[str, list[tuple[float, float]]] = {"eventmem": [], "noop": []}
    for _ in range(repetitions):
        runs["noop"].append(await once(servers.noop(project.root), "retrieve"))
        runs["eventmem"].append(await once(servers.eventmem(project.root), "retrieve_context"))

    def median(values: list[float]) -> float:
        return round(float(np.median(values)), 3)

    em_init, em_first = median([a for a, _ in runs["eventmem"]]), median([b for _, b in runs["eventmem"]])
    noop_init, noop_first = median([a for a, _ in runs["noop"]]), median([b for _, b in runs["noop"]])
    difference = round(em_first - noop_first, 3)
    return {
        "memories": len(project.records),
        "repetitions": repetitions,
        "eventmem": {"spawn_to_initialize_s": em_init, "spawn_to_first_retrieve_s": em_first},
        "noop": {"spawn_to_initialize_s": noop_init, "spawn_to_first_retrieve_s": noop_first},
        "samples_s": {k: [[round(a, 3), round(b, 3)] for a, b in v] for k, v in runs.items()},
        "initialize_difference_s": round(em_init - noop_init, 3),
        "difference_s": difference,
        "ratio": ratio(em_first, noop_first),
        "target": "eventmem first retrieve answered within 0.5 s of the no-op server's first answer",
        "meets_target": difference <= 0.5,
    }


# -- in process ----------------------------------------------------------------------------------------


def timed(fn: Callable[[], object], count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def in_process(project: Project, corpus: Corpus, iterations: int, target_applies: bool) -> dict[str, Any]:
    started = time.perf_counter()
    service = project.open()
    open_s = time.perf_counter() - started
    try:
        service.recall("warm up")  # (opens the stores), then the indexes made in the background
        for store in service.stores():
            if len(store.derived.keywords) >= store.tuning.postings_from:
                store.derived.keywords.ranked_in_memory(600)
            store.derived.vectors.settle(600)
        queries = corpus.queries(iterations)
        for query in queries[:20]:
            service.recall(query)

        def run(**kwargs: Any) -> list[float]:
            it = iter(queries)
            return timed(lambda: service.recall(next(it), **kwargs), iterations)

        unfiltered = stats(run())
        filtered = stats(run(filters=Filters(kinds=("decision",))))
        vector_only = stats(run(mode="vector"))
        keyword_only = stats(run(mode="keyword"))

        # a plain exact-search baseline: embed the query, one numpy matrix-vector product, top 50
        embedder = HashingEmbedder(service.project.embedder.dim)
        matrix = project.vectors(embedder.dim)
        it = iter(queries)

        def scan() -> None:
            q = embedder.embed([next(it)])[0]
            scores = matrix @ q
            top = np.argpartition(-scores, min(50, len(scores) - 1))[:50]
            top[np.argsort(-scores[top])]

        floor = stats(timed(scan, iterations))

        texts = [corpus.text() for _ in range(iterations + 10)]
        for text in texts[:10]:
            service.save(text, tags=["bench"])
        it_text = iter(texts[10:])
        saves = stats(timed(lambda: service.save(next(it_text), tags=["bench", "in-process"]), iterations))
    finally:
        service.close()
    out: dict[str, Any] = {
        "memories": len(project.records),
        "open_s": round(open_s, 3),
        "recall": unfiltered,
        "recall_filtered_type": filtered,
        "recall_vector_only": vector_only,
        "recall_keyword_only": keyword_only,
        "numpy_scan_baseline": floor,
        "ratio": ratio(unfiltered["p50_ms"], floor["p50_ms"]),
        "ratio_is": "recall p50 / (query embedding + numpy scan + top-50) p50",
        "save": saves,
        "save_durability": "fsync (the default)",
        "target": "recall p50 < 10 ms at 100k memories (384-dim)",
    }
    out["meets_target"] = unfiltered["p50_ms"] < 10.0 if target_applies else None
    return out


def naive_design(project: Project, tmp: Path, queries: list[str], dim: int) -> dict[str, Any]:
    """The seeds' design: vectors as SQLite blobs, all loaded and compared in Python per query."""
    db_path = tmp / f"naive-{len(project.records)}.sqlite"
    vectors = project.vectors(dim)
    started = time.perf_counter()
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE memories (id TEXT PRIMARY KEY, content TEXT, embedding BLOB)")
    db.executemany(
        "INSERT INTO memories VALUES (?, ?, ?)",
        ((rec[0], rec[2], vectors[i].tobytes()) for i, rec in enumerate(project.records)),
    )
    db.commit()
    build_s = time.perf_counter() - started
    embedder = HashingEmbedder(dim)

    def query(text: str, k: int = 5) -> list[tuple[float, str]]:
        q = embedder.embed([text])[0]
        q_norm = float(np.linalg.norm(q))
        scored = []
        for memory_id, content, blob in db.execute("SELECT id, content, embedding FROM memories"):
            v = np.frombuffer(blob, dtype=np.float32)
            scored.append((float(np.dot(v, q)) / (float(np.linalg.norm(v)) * q_norm or 1.0), memory_id))
            del content
        return heapq.nlargest(k, scored)

    query(queries[0])
    it = iter(queries[1:])
    samples = timed(lambda: query(next(it)), len(queries) - 1)
    db.close()
    db_path.unlink()
    return {"memories": len(project.records), "build_s": round(build_s, 3), "query": stats(samples)}


def rebuild(project: Project) -> dict[str, Any]:
    journal = Journal(project.paths)
    gc.collect()
    started = time.perf_counter()
    events = sum(len(Journal.scan(s.path).events) for s in journal.segments())
    decode_s = time.perf_counter() - started

    service = project.open(load=False)
    try:
        gc.collect()
        started = time.perf_counter()
        count = service.project.rebuild(wait=False)
        ready_s = time.perf_counter() - started
        service.project.wait_snapshot()
        rebuild_s = time.perf_counter() - started
        started = time.perf_counter()
        service.project.save_snapshot()
        snapshot_s = time.perf_counter() - started
    finally:
        service.close()

    shutil.rmtree(project.paths.cache_dir / "embeddings")
    service = project.open(load=False)
    try:
        gc.collect()
        started = time.perf_counter()
        service.project.rebuild()
        cold_s = time.perf_counter() - started
    finally:
        service.close()
    return {
        "memories": len(project.records),
        "events": count,
        "cached_embeddings_s": round(rebuild_s, 3),
        "cached_embeddings_answers_ready_s": round(ready_s, 3),
        "of_which_snapshot_write_s": round(snapshot_s, 3),
        "of_which_is": "a separate save_snapshot() (encode and write) after the rebuild; the rebuild "
        "writes its snapshot from a thread once answers are ready, and cached_embeddings_s waits for it",
        "empty_embedding_cache_s": round(cold_s, 3),
        "baseline_journal_decode_s": round(decode_s, 3),
        "baseline_events": events,
        "ratio": ratio(rebuild_s, decode_s),
        "ratio_is": "rebuild with cached embeddings / bare decode of every segment",
        "target": "rebuild with cached embeddings < 3 s at 100k events",
        "meets_target": rebuild_s < 3.0 if len(project.records) >= 100_000 else None,
    }


def save_throughput(tmp: Path, env: dict[str, str], corpus: Corpus, count: int, block: int = 25) -> dict[str, Any]:
    """Saves/s with fsync and with flush, next to bare journal appends in the same mode. The four are
    run in alternating blocks, so a burst of load from other processes hits all of them alike."""
    modes = ("fsync", "flush")
    texts = [corpus.text() for _ in range(count)]
    events = [MemorySaved(id=new_id(), ts=to_iso(datetime.now(UTC)), memory=new_id(), content=t) for t in texts]
    services = {m: Project(tmp / f"throughput-{m}", env).open(extra_env={"EVENTMEM_DURABILITY": m}) for m in modes}
    journals = {m: Journal(ProjectPaths(tmp / f"journal-{m}"), durable=m == "fsync") for m in modes}
    spent = {(kind, m): 0.0 for kind in ("service", "journal") for m in modes}
    try:
        for m in modes:
            for text in corpus.memories(5):
                services[m].save(text[1], tags=["warmup"])
        for start in range(0, count, block):
            for m in modes:
                started = time.perf_counter()
                for text in texts[start : start + block]:
                    services[m].save(text, tags=["bench", "throughput"])
                spent["service", m] += time.perf_counter() - started
                started = time.perf_counter()
                for event in events[start : start + block]:
                    journals[m].append([event])
                spent["journal", m] += time.perf_counter() - started
    finally:
        for service in services.values():
            service.close()
        for m in modes:
            shutil.rmtree(tmp / f"throughput-{m}", ignore_errors=True)
            shutil.rmtree(tmp / f"journal-{m}", ignore_errors=True)
    out: dict[str, Any] = {"saves": count}
    for m in modes:
        rate, bare = count / spent["service", m], count / spent["journal", m]
        out[m] = {
            "saves_per_s": round(rate, 1),
            "baseline_journal_appends_per_s": round(bare, 1),
            "ratio": ratio(rate, bare),
            "ratio_is": "service saves/s / bare journal appends/s (same durability)",
        }
    out["ratio"] = ratio(out["flush"]["saves_per_s"], out["fsync"]["saves_per_s"])
    out["ratio_is"] = "flush saves/s / fsync saves/s"
    out["target"] = "none set; fsync (the default) is the durable mode"
    return out


# -- machine ---------------------------------------------------------------------------------------------


def filesystem_of(path: Path) -> str:
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) >= 3 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                    best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


def machine(tmp: Path) -> dict[str, Any]:
    versions = {}
    for name in ("mcp", "faiss-cpu", "numpy", "msgspec"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "faiss_threads": faiss.omp_get_max_threads(),
        "tmp_filesystem": filesystem_of(tmp),
        "eventmem": eventmem.__version__,
        "libraries": versions,
    }


# -- main ------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated memory counts (default 1000,10000,100000)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few iterations (smoke test)")
    parser.add_argument("--out", help="also write the JSON to this file")
    parser.add_argument(
        "--baseline-code",
        type=Path,
        help="another checkout of eventmem whose server answers the same calls in the same rotations",
    )
    parser.add_argument(
        "--ann-from",
        type=int,
        help="EVENTMEM_ANN_FROM for every server and store of the run (above the largest size: the exact scan only)",
    )
    parser.add_argument(
        "--postings-from",
        type=int,
        help="EVENTMEM_POSTINGS_FROM for every server and store of the run (above the largest size: FTS5 ranks)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.sizes:
        sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    else:
        sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if not sizes or sizes[0] < 10:
        raise SystemExit("sizes must be at least 10")
    largest = sizes[-1]

    def iterations(n: int) -> int:
        if args.quick:
            return 30
        return 200 if n <= 10_000 else 100

    baseline_code = args.baseline_code.resolve() if args.baseline_code else None
    if baseline_code is not None and not (baseline_code / "eventmem" / "__init__.py").is_file():
        raise SystemExit(f"--baseline-code {args.baseline_code}: no eventmem package there")
    tmp = Path(tempfile.mkdtemp(prefix="eventmem-bench-"))
    env = {"EVENTMEM_GLOBAL_DIR": str(tmp / "global"), "EVENTMEM_LOG_LEVEL": "WARNING"}
    if args.ann_from is not None:
        env["EVENTMEM_ANN_FROM"] = os.environ["EVENTMEM_ANN_FROM"] = str(args.ann_from)  # (in-process stores too)
    if args.postings_from is not None:
        env["EVENTMEM_POSTINGS_FROM"] = os.environ["EVENTMEM_POSTINGS_FROM"] = str(args.postings_from)
    result: dict[str, Any] = {
        "benchmark": "eventmem tools/bench.py",
        "machine": machine(tmp),
        "settings": {
            "sizes": sizes,
            "quick": args.quick,
            "iterations": {str(n): iterations(n) for n in sizes},
            "embedder": HashingEmbedder().model_id,
            "text": "30-60 words per memory from a Zipf-distributed vocabulary of coding words and identifiers",
            "segment_events": SEGMENT_EVENTS,
            "ann_from": args.ann_from,
            "postings_from": args.postings_from,
            "baseline_code": str(args.baseline_code) if args.baseline_code else None,  # (as given: no machine path)
        },
        "population": {},
        "mcp_round_trip": {},
        "recall_in_process": {},
        "naive_sqlite_blob": {},
    }
    servers = Servers(tmp, env, baseline_code)
    try:
        naive_last: tuple[int, float] | None = None
        for n in sizes:
            log(f"size {n}: writing the journal")
            project = Project(tmp / f"project-{n}", env)
            corpus = Corpus(seed=n)
            population = project.populate(n, corpus)
            log(f"size {n}: warming up (service open/close: embeddings and snapshot)")
            started = time.perf_counter()
            project.open().close()
            population["warmup_open_close_s"] = round(time.perf_counter() - started, 3)
            result["population"][str(n)] = population

            log(f"size {n}: MCP round trips, eventmem and the no-op server interleaved")
            try:
                result["mcp_round_trip"][str(n)] = anyio.run(
                    round_trips, servers, project, corpus, iterations(n), 5 if args.quick else 20
                )
            except Exception:
                sys.stderr.write(servers.tail())
                raise

            log(f"size {n}: in-process recall and save")
            result["recall_in_process"][str(n)] = in_process(project, corpus, iterations(n), n >= 100_000)

            budget = (naive_last[1] * n / naive_last[0]) * (21 if n <= 10_000 else 6) if naive_last else 0.0
            eventmem_p50 = result["recall_in_process"][str(n)]["recall"]["p50_ms"]
            if n <= 10_000 or budget < NAIVE_BUDGET_S:
                log(f"size {n}: the naive SQLite-blob design")
                queries = corpus.queries(5 if args.quick else (21 if n <= 10_000 else 6))
                naive = naive_design(project, tmp, queries, HashingEmbedder().dim)
                naive["extrapolated"] = False
                naive_last = (n, naive["query"]["p50_ms"] / 1000.0)
            else:
                assert naive_last is not None
                estimate_ms = naive_last[1] * 1000.0 * n / naive_last[0]
                naive = {
                    "memories": n,
                    "extrapolated": True,
                    "note": f"not run (estimated over {NAIVE_BUDGET_S:.0f} s); linear from {naive_last[0]} memories",
                    "query": {"p50_ms": round(estimate_ms, 3)},
                }
            naive["eventmem_recall_p50_ms"] = eventmem_p50
            naive["ratio"] = ratio(naive["query"]["p50_ms"], eventmem_p50)
            naive["ratio_is"] = "naive query p50 / eventmem in-process recall p50 (how many times faster eventmem is)"
            naive["target"] = "none set; for comparison"
            result["naive_sqlite_blob"][str(n)] = naive

            if n == largest:
                log(f"size {n}: cold start, eventmem and the no-op server alternated")
                try:
                    result["cold_start"] = anyio.run(cold_start, servers, project, 1 if args.quick else 3)
                except Exception:
                    sys.stderr.write(servers.tail())
                    raise
                log(f"size {n}: rebuild, with cached embeddings and with an empty cache")
                result["rebuild"] = rebuild(project)
            shutil.rmtree(project.root, ignore_errors=True)
            gc.collect()

        rounds = result["mcp_round_trip"]
        first, last = rounds[str(sizes[0])], rounds[str(largest)]
        raw_growth = ratio(last["save"]["eventmem_p50_ms"], first["save"]["eventmem_p50_ms"])
        normalized = ratio(last["save"]["ratio"] or 0.0, first["save"]["ratio"] or 0.0)
        result["save_vs_journal_size"] = {
            "save_p50_ms": {k: v["save"]["eventmem_p50_ms"] for k, v in rounds.items()},
            "noop_save_p50_ms": {k: v["save"]["noop_p50_ms"] for k, v in rounds.items()},
            "in_process_save_p50_ms": {k: v["save"]["p50_ms"] for k, v in result["recall_in_process"].items()},
            "raw_growth": raw_growth,
            "ratio": normalized,
            "ratio_is": f"(save/no-op p50 at {largest}) / (save/no-op p50 at {sizes[0]})",
            "target": "<= 1.2: saving does not get slower as the journal grows",
            "meets_target": check(normalized, 1.2),
        }

        log("save throughput, fsync and flush durability")
        result["save_throughput"] = save_throughput(tmp, env, Corpus(seed=7), 40 if args.quick else 300)
    finally:
        servers.close()
        shutil.rmtree(tmp, ignore_errors=True)

    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["total_s"] = round(time.perf_counter() - STARTED, 1)
    result["verdicts"] = verdicts(result, largest)
    emit(result, args.out)
    log("done")
    return 0


def verdicts(result: dict[str, Any], largest: int) -> dict[str, Any]:
    """Every target in one place: true, false, or null where it does not apply to these sizes."""
    key = str(largest)
    out: dict[str, Any] = {}
    for size, block in result["mcp_round_trip"].items():
        out[f"mcp_save_ratio_{size}"] = block["save"]["meets_target"]
        out[f"mcp_retrieve_ratio_{size}"] = block["retrieve"]["meets_target"]
        for kind, figures in block["retrieve_filtered"].items():
            out[f"mcp_retrieve_{kind}_ratio_{size}"] = figures["meets_target"]
    out["save_flat_with_journal_size"] = result["save_vs_journal_size"]["meets_target"]
    out["recall_p50_under_10ms_at_100k"] = result["recall_in_process"][key]["meets_target"]
    out["rebuild_under_3s_at_100k"] = result["rebuild"]["meets_target"]
    out["cold_start_within_0.5s_of_noop"] = result["cold_start"]["meets_target"]
    return out


if __name__ == "__main__":
    sys.exit(main())
