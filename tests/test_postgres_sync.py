"""``eventmem sync --to postgresql://…`` through the real CLI, with real journals, real git and a real
server: many projects and the global memory in one database, a rewritten segment projected again,
untrusted arguments refused in one line, and ``--follow`` kept current by the watcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import ProcessGroup, eventmem_command, git, write_events
from pg_answers import answers

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.core.query_rules import Filters
from eventmem.embedders.embedder import HashingEmbedder
from eventmem.projectors.postgres import queries
from eventmem.projectors.postgres.projector import LOAD_CHUNK
from eventmem.projectors.postgres.runner import PROJECT_LOCK_CLASS, SyncRunner
from eventmem.projectors.postgres.targets import Target, global_target
from eventmem.service import database_search

pytestmark = pytest.mark.postgres

Run = Callable[..., subprocess.CompletedProcess[str]]
DEADLINE_S = 60.0


def run(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(eventmem_command(*args), cwd=cwd, capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def save(root: Path, text: str, *extra: str) -> str:
    out = run("save", text, "--json", *extra, cwd=root)
    memory_id: str = json.loads(out.stdout)["memory"]["id"]
    return memory_id


def new_project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def global_name() -> str:
    """The name the global memory of the test's processes (``EVENTMEM_GLOBAL_DIR``) takes in a database."""
    return global_target(Path(os.environ["EVENTMEM_GLOBAL_DIR"])).name


def rows(uri: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(uri) as conn:
        return conn.execute(sql, list(params)).fetchall()  # type: ignore[arg-type]


def ids_of(uri: str, project: str) -> set[str]:
    return {r[0] for r in rows(uri, "SELECT id FROM eventmem_memories WHERE project = %s", project)}


def ids_now(uri: str, project: str) -> set[str]:
    """The project's memory ids, or none while the sync has not made the tables yet."""
    try:
        return ids_of(uri, project)
    except psycopg.errors.UndefinedTable:
        return set()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll the database (it offers the test no change signal: the sync process writes it), bounded."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_sync_projects_every_named_project_and_the_global_memory(tmp_path: Path, pg_uri: str) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    a1 = save(alpha, "Alpha lints with ruff.", "--title", "ruff", "--tag", "tooling")
    b1 = save(beta, "Beta deploys on Tuesdays.", "--title", "deploys", "--type", "convention")
    g1 = save(alpha, "Prefer small pull requests.", "--title", "small PRs", "--scope", "global")
    out = run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--project", f"beta={beta}", "--json")
    summary = json.loads(out.stdout)["projects"]
    mine = global_name()
    assert mine.startswith("global-")
    assert summary == {
        "alpha": {"events": 1, "memories": 1},
        "beta": {"events": 1, "memories": 1},
        mine: {"events": 1, "memories": 1},
    }
    assert ids_of(pg_uri, "alpha") == {a1}
    assert ids_of(pg_uri, "beta") == {b1}
    assert rows(pg_uri, "SELECT id, scope, origin_project FROM eventmem_memories WHERE project = %s", mine) == [
        (g1, "global", "alpha")
    ]
    assert rows(pg_uri, "SELECT kind, tags, branch FROM eventmem_memories WHERE id = %s", b1) == [
        ("convention", [], "main")
    ]
    every = ("alpha", "beta", mine)
    with psycopg.connect(pg_uri) as conn:
        assert {i for _, i in queries.matching(conn, every, Filters(), project="alpha")} == {a1, g1}
        assert {i for _, i in queries.matching(conn, every, Filters(), project="BETA")} == {b1}
        assert queries.matching(conn, every, Filters(scope="global")) == [(mine, g1)]
        hits = database_search.hybrid(conn, every, HashingEmbedder(), "ruff lint", 3, Filters())
        assert (hits[0].project, hits[0].id) == ("alpha", a1)
    again = run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--project", f"beta={beta}", "--json")
    assert {name: p["events"] for name, p in json.loads(again.stdout)["projects"].items()} == {
        "alpha": 0,
        "beta": 0,
        mine: 0,
    }
    told = run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--project", f"beta={beta}").stdout
    assert f"synced {mine} (your global memory): 0 events taken, 1 memories" in told.splitlines()


def test_a_sync_of_one_project_leaves_the_projects_others_synced_and_prune_drops_them(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    theirs = save(alpha, "Alpha memory.")
    kept = save(beta, "Beta memory.")
    run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--no-global")  # (a teammate's sync)
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global")  # (another one's, beside it)
    assert rows(pg_uri, "SELECT project FROM eventmem_projects ORDER BY project") == [("alpha",), ("beta",)]
    assert ids_of(pg_uri, "alpha") == {theirs} and ids_of(pg_uri, "beta") == {kept}
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global", "--prune")
    assert rows(pg_uri, "SELECT project FROM eventmem_projects") == [("beta",)]
    assert rows(pg_uri, "SELECT count(*) FROM eventmem_events WHERE project = 'alpha'") == [(0,)]
    assert ids_of(pg_uri, "beta") == {kept}


def test_a_follow_whose_project_another_sync_dropped_projects_it_again_whole(
    tmp_path: Path, pg_uri: str, processes: ProcessGroup
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    first, second = save(alpha, "The queue uses advisory locks."), save(alpha, "Workers restart on failure.")
    proc = processes.spawn(
        eventmem_command("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--no-global", "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: ids_now(pg_uri, "alpha") == {first, second}, "the first sync")
    save(beta, "Beta memory.")
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global", "--prune")  # (alpha's rows dropped)
    assert ids_now(pg_uri, "alpha") == set()
    third = save(alpha, "Saved after the other sync dropped the project.")
    # the follow's position said it was in step: the new event alone would have left the project at
    # one memory of three, and every later sync in step with it
    wait_for(lambda: ids_now(pg_uri, "alpha") == {first, second, third}, "the project projected again, whole")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE_S) == 0
    again = run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--no-global", "--json")
    assert json.loads(again.stdout)["projects"]["alpha"] == {"events": 0, "memories": 3}


def test_a_database_holding_fewer_events_than_its_position_says_is_projected_again_by_the_next_sync(
    tmp_path: Path, pg_uri: str
) -> None:
    root = new_project(tmp_path, "p")
    first, second = save(root, "The queue uses advisory locks."), save(root, "Workers restart on failure.")
    run("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global")
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # (what a batch applied onto a dropped project left)
        conn.execute("DELETE FROM eventmem_memories WHERE project = 'p' AND id = %s", [first])
        conn.execute(
            "DELETE FROM eventmem_events WHERE project = 'p' AND id IN (SELECT id FROM eventmem_events "
            "WHERE project = 'p' ORDER BY id LIMIT 1)"
        )
    assert ids_of(pg_uri, "p") == {second}
    again = run("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global", "--json")
    assert json.loads(again.stdout)["projects"]["p"] == {"events": 2, "memories": 2}
    assert ids_of(pg_uri, "p") == {first, second}
    assert "projecting it again" in again.stderr
    steady = run("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global", "--json")
    assert json.loads(steady.stdout)["projects"]["p"] == {"events": 0, "memories": 2}


def test_a_segment_git_rewrote_is_projected_again(tmp_path: Path, pg_server: Any, pg_uri: str) -> None:
    root = new_project(tmp_path, "p")
    first = save(root, "Kept across the reset.", "--title", "kept")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    dropped = save(root, "Only in the commit the reset drops.", "--title", "dropped")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "second")
    sync = ("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global")
    run(*sync)
    assert ids_of(pg_uri, "p") == {first, dropped}
    git(root, "reset", "-q", "--hard", "HEAD~1")
    later = save(root, "Written after the reset, to a segment that now begins otherwise.", "--title", "later")
    run(*sync)
    assert ids_of(pg_uri, "p") == {first, later}
    rebuilt = pg_server.uri_of(pg_server.new_database())
    run("sync", "--to", rebuilt, "--project", f"p={root}", "--no-global")
    with psycopg.connect(pg_uri) as synced, psycopg.connect(rebuilt) as fresh:
        assert answers(synced, "p") == answers(fresh, "p")


def test_an_unreachable_database_is_one_line_without_the_password(project: Path) -> None:
    save(project, "Something.")
    result = run("sync", "--to", "postgresql://agent:s3cret-pw@127.0.0.1:9/memory", check=False, cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "cannot reach PostgreSQL at postgresql://agent:***@127.0.0.1:9/memory" in lines[0]
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("alpha", "--project takes NAME=PATH"),
        ("global={root}", "taken by the global memories"),
        ("a b={root}", "must be 1-200 letters"),
        ("-x={root}", "must be 1-200 letters"),
        ("alpha={root}/missing", "is not an existing folder"),
        ("a" * 201 + "={root}", "must be 1-200 letters"),
    ],
)
def test_a_bad_project_argument_is_refused_in_one_line(project: Path, argument: str, message: str) -> None:
    result = run(
        "sync", "--to", "postgresql://nobody@127.0.0.1:9/x", f"--project={argument.format(root=project)}", check=False
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr


def test_a_folder_without_a_journal_is_synced_with_a_warning_that_it_holds_none(tmp_path: Path, pg_uri: str) -> None:
    root = new_project(tmp_path, "p")
    save(root, "A memory in the project's root.")
    (root / "src").mkdir()
    off = run("sync", "--to", pg_uri, "--project", f"p={root / 'src'}", "--no-global", "--json")
    assert json.loads(off.stdout)["projects"]["p"] == {"events": 0, "memories": 0}
    assert "holds no eventmem journal" in off.stderr and str(root / "src") in off.stderr
    right = run("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global", "--json")
    assert json.loads(right.stdout)["projects"]["p"] == {"events": 1, "memories": 1}
    assert "holds no eventmem journal" not in right.stderr


def test_a_name_given_twice_and_a_foreign_address_are_refused(project: Path) -> None:
    twice = run(
        "sync",
        "--to",
        "postgresql://x@127.0.0.1:9/x",
        "--project",
        f"a={project}",
        "--project",
        f"a={project}",
        check=False,
    )
    assert twice.returncode == 2
    assert "given twice" in twice.stderr
    foreign = run("sync", "--to", "mysql://root:pw@db/x", check=False, cwd=project)
    assert foreign.returncode == 2
    assert "pw" not in foreign.stderr
    assert "must be a PostgreSQL address" in foreign.stderr


def test_follow_keeps_the_database_current_until_sigterm(tmp_path: Path, pg_uri: str, processes: ProcessGroup) -> None:
    root = new_project(tmp_path, "p")
    first = save(root, "Before the follow began.")
    proc = processes.spawn(
        eventmem_command("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global", "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: ids_now(pg_uri, "p") == {first}, "the first sync")
    second = save(root, "Saved while following.")
    wait_for(lambda: ids_now(pg_uri, "p") == {first, second}, "the saved memory")
    run("delete", first, cwd=root)
    wait_for(lambda: ids_now(pg_uri, "p") == {second}, "the deleted memory to go")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE_S) == 0


def test_follow_projects_again_a_segment_git_rewrote(tmp_path: Path, pg_uri: str, processes: ProcessGroup) -> None:
    root = new_project(tmp_path, "p")
    kept = save(root, "Committed before the reset.")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    dropped = save(root, "Dropped by the reset.")
    proc = processes.spawn(
        eventmem_command("sync", "--to", pg_uri, "--project", f"p={root}", "--no-global", "--follow"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: ids_now(pg_uri, "p") == {kept, dropped}, "the first sync")
    git(root, "reset", "-q", "--hard", "HEAD")
    later = save(root, "Saved after the reset.")
    wait_for(lambda: ids_now(pg_uri, "p") == {kept, later}, "the rewritten segment to be projected again")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE_S) == 0


def many_memories(root: Path, count: int) -> None:
    write_events(
        root,
        [
            MemorySaved(id=new_id(), ts=now_iso(), memory=new_id(), content=f"Queue worker note {n}")
            for n in range(count)
        ],
    )


def test_a_sync_tells_how_far_each_project_is_reading_copying_then_building_its_indexes(
    tmp_path: Path, pg_uri: str
) -> None:
    root = new_project(tmp_path, "api")
    many_memories(root, LOAD_CHUNK + 904)
    told: list[tuple[str, int, int, str]] = []
    runner = SyncRunner(pg_uri, [Target("api", root)], HashingEmbedder())
    runner.progress = lambda *step: told.append(step)
    try:
        assert runner.start() == {"api": LOAD_CHUNK + 904}
        assert runner.catch_up("api") == 0  # (told only while starting)
    finally:
        runner.close()
    total = LOAD_CHUNK + 904
    assert told == [
        ("api", 0, 0, "reading the journal"),
        ("api", 0, total, "copying the memories"),
        ("api", LOAD_CHUNK, total, "copying the memories"),
        ("api", total, total, "copying the memories"),
        ("api", total, total, "building the indexes"),
    ]


def test_a_first_sync_on_a_terminal_draws_its_progress_on_stderr_and_prints_its_summary_after(
    tmp_path: Path, pg_uri: str
) -> None:
    import pty

    root = new_project(tmp_path, "api")
    many_memories(root, 1500)
    terminal, its_end = pty.openpty()
    command = eventmem_command("sync", "--to", pg_uri, "--project", f"api={root}", "--no-global")
    with psycopg.connect(pg_uri, autocommit=True) as holder:
        # the project held by another writer until the sync has waited for it a while, so that its bar
        # (drawn for work of over half a second) is drawn whatever this machine's speed
        holder.execute("SELECT pg_advisory_lock(%s, hashtext('api'))", [PROJECT_LOCK_CLASS])
        sync = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=its_end, text=True)
        os.close(its_end)
        wait_for(
            lambda: bool(rows(pg_uri, "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")),
            "the sync to wait for the project",
        )
        time.sleep(0.6)
        holder.execute("SELECT pg_advisory_unlock(%s, hashtext('api'))", [PROJECT_LOCK_CLASS])
        stdout, _ = sync.communicate(timeout=120)
    drawn = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # (the terminal's other end is closed: all of it was read)
            break
        if not chunk:
            break
        drawn += chunk
    os.close(terminal)
    assert sync.returncode == 0
    assert stdout == "synced api: 1500 events taken, 1500 memories\n"
    text = drawn.decode()
    assert "projecting api [" in text and "100% building the indexes" in text
    assert text.endswith("\n") and "Traceback" not in text


def _names_embedder(root: Path, spec: str) -> None:
    """The project's own setting (its clone's untracked file, which may reach the network)."""
    (root / ".eventmem").mkdir(exist_ok=True)
    (root / ".eventmem" / "config.local.toml").write_text(f'embedder = "{spec}"\n', encoding="utf-8")


@pytest.mark.anyio
async def test_a_sync_without_an_embedder_given_embeds_with_the_one_its_project_names_so_serve_store_answers_from_it(
    tmp_path: Path, pg_uri: str
) -> None:
    """(the PostgreSQL page's two commands, in a project whose own settings name a model: the sync
    used to embed with the built-in embedder whatever the project named, and serve --store there
    then refused the database and answered from the journal)"""
    from embedding_standins import StandIn
    from embedding_standins import serve as serve_embeddings
    from mcp_client import serve, server_env
    from test_postgres_serve import recall

    root = new_project(tmp_path, "api")
    with serve_embeddings(StandIn()) as standin:
        _names_embedder(root, f"ollama:nomic-embed-text@{standin.url}")
        deploy = save(root, "We deploy the api with blue-green releases behind the load balancer", "--type", "decision")
        save(root, "The login bug was a stale session cookie, fixed by rotating it", "--type", "fix")
        run("sync", "--to", pg_uri, "--no-global", cwd=root)
        assert rows(pg_uri, "SELECT value FROM eventmem_meta WHERE key = 'embedder'") == [
            ("ollama-nomic-embed-text:latest-768",)
        ]
        async with serve(root, server_env(), tmp_path / "server.log", args=["--tools", "all", "--store", pg_uri]) as s:
            await s.initialize()
            answer = await recall(s, "blue-green releases of the api")
    assert not [w for w in answer.get("warnings", []) if "PostgreSQL" in w], answer
    assert answer["results"][0]["id"] == deploy and answer["results"][0]["vector_score"] > 0


def test_a_sync_of_projects_naming_different_embedders_asks_for_one_and_writes_nothing(
    tmp_path: Path, pg_uri: str
) -> None:
    api, web = new_project(tmp_path, "api"), new_project(tmp_path, "web")
    _names_embedder(web, "hashing:v1")
    for root in (api, web):
        save(root, f"the {root.name} project's first note")
    refused = run("sync", "--to", pg_uri, "--project", f"api={api}", "--project", f"web={web}", check=False)
    assert refused.returncode != 0
    line = refused.stderr.strip()
    assert "\n" not in line and "api: hashing" in line and "web: hashing:v1" in line and "--embedder" in line
    assert rows(pg_uri, "SELECT to_regclass('eventmem_memories')") == [(None,)]  # (nothing written)
    run("sync", "--to", pg_uri, "--project", f"api={api}", "--project", f"web={web}", "--embedder", "hashing")
    assert {name for (name,) in rows(pg_uri, "SELECT DISTINCT project FROM eventmem_memories")} >= {"api", "web"}
