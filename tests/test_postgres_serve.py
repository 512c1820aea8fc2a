"""``eventmem serve --store postgresql://…``: reads answered from the database, writes appended to the
journal first and projected before the reply, across processes and projects; the address taken only
from the command line, the environment or an untracked file; never its password in any output; a
database unreachable at start answered from the journal, and caught up once it can be reached."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from conftest import ProcessGroup, eventmem_command, git, global_dir
from http_server import http_server
from mcp import ClientSession
from mcp_client import assert_clean_stderr, call, serve, server_env
from pg_answers import answers
from test_postgres_sync import global_name, ids_now, ids_of, new_project, rows, run, save

from eventmem.projectors.postgres.runner import PROJECT_LOCK_CLASS

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
SECRET = "s3cret-Pw-7781"
UNREACHABLE = f"postgresql://eventmem:{SECRET}@127.0.0.1:1/memory"
"""A database no server listens for (port 1 refuses at once), with a password that must never show."""
DEADLINE_S = 60.0


@asynccontextmanager
async def served(root: Path, log: Path, *args: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session on ``eventmem serve *args`` in ``root``."""
    async with serve(root, server_env(), log, args=["--tools", "all", *args]) as session:
        await session.initialize()
        yield session


async def recall(session: ClientSession, query: str, **arguments: Any) -> dict[str, Any]:
    return await call(session, "recall_memories", query=query, **arguments)


def titles(result: dict[str, Any]) -> list[str]:
    return [hit["title"] for hit in result["results"]]


async def store(session: ClientSession, content: str, title: str, **arguments: Any) -> str:
    saved = await call(session, "store_memory", content=content, title=title, **arguments)
    memory_id: str = saved["memory"]["id"]
    return memory_id


async def until(condition: Callable[[], Any], what: str) -> Any:
    """Ask again until ``condition()`` is truthy (the server retries the database on a later call,
    a few seconds after the last failure), bounded."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = await condition()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.2)


async def test_a_save_through_one_server_is_recalled_at_once_by_a_server_of_another_project(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    async with (
        served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as in_alpha,
        served(beta, tmp_path / "beta.log", "--store", pg_uri, "--project-name", "team-beta") as in_beta,
    ):
        await store(in_alpha, "Alpha pins the compiler to version 17.", "compiler pin")
        assert titles(await recall(in_beta, "compiler version", project="*")) == ["compiler pin"]
        assert titles(await recall(in_beta, "compiler version", project="alpha")) == ["compiler pin"]
        assert titles(await recall(in_beta, "compiler version")) == []  # (by default: beta and the global memory)
        await store(in_beta, "Beta pins the linter.", "linter pin")
        found = await call(in_alpha, "search_memories", query="pins", project="*")
        assert sorted(h["title"] for h in found["results"]) == ["compiler pin", "linter pin"]
        assert sorted((h["title"], h["project"]) for h in found["results"]) == [
            ("compiler pin", "alpha"),
            ("linter pin", "team-beta"),
        ]  # (each hit names the project it is of, as the database names it)
        listed = await call(in_alpha, "search_memories", project="*")
        assert {(h["title"], h["project"]) for h in listed["results"]} >= {("linter pin", "team-beta")}
        assert titles(await recall(in_alpha, "linter", project="team-beta")) == ["linter pin"]
        await store(in_beta, "Everyone writes changelog entries.", "changelog rule", scope="global")
        shared = await recall(in_alpha, "changelog entries", project="*")
        assert [(h["title"], h["scope"], h["project"]) for h in shared["results"]] == [
            ("changelog rule", "global", "beta")
        ]  # (a global memory names the project it was saved from)
    assert_clean_stderr(tmp_path / "alpha.log")
    assert {r[0] for r in rows(pg_uri, "SELECT project FROM eventmem_projects")} >= {"alpha", "team-beta"}


async def test_related_context_and_stats_answer_from_the_database(tmp_path: Path, pg_uri: str) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    other = save(beta, "Beta keeps its secrets in a vault.", "--title", "vault")
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global")
    async with served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as session:
        first = await store(session, "The API gateway rate-limits per token.", "rate limits", type="decision")
        second = await store(session, "Raise the gateway limit for batch jobs.", "batch limits")
        await call(session, "create_relationship", source_id=second, target_id=first, relation="depends_on")
        related = await call(session, "get_related_memories", memory_id=first)
        assert [step["id"] for step in related["related"]] == [second]
        bundle = await call(session, "get_context")
        assert {m["title"] for m in bundle["memories"]} == {"rate limits", "batch limits"}
        listed = await call(session, "search_memories", project="beta")
        assert [h["id"] for h in listed["results"]] == [other]
    assert_clean_stderr(tmp_path / "alpha.log")
    database = stats_of(alpha, pg_uri)["database"]
    assert database["reachable"] is True
    assert database["memories"] == 2 and database["links"] == 1
    assert database["projects"] == {"alpha": 2, "beta": 1, global_name(): 0}


async def test_two_users_global_memories_stay_apart_in_one_database(
    tmp_path: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    mine = save(alpha, "I prefer ripgrep over grep for searching code.", "--title", "my tools", "--scope", "global")
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # (one global memory for everyone, as before)
        run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--no-global")
        conn.execute(
            "INSERT INTO eventmem_projects (project, root, branch, projector_version) "
            "VALUES ('global', '/x', 'main', 1)"
        )
    run("sync", "--to", pg_uri, "--project", f"alpha={alpha}")
    ours = global_name()
    monkeypatch.setenv("EVENTMEM_GLOBAL_DIR", str(tmp_path / "another-users-global"))  # (another user)
    theirs = save(beta, "I search code with ack, never grep.", "--title", "their tools", "--scope", "global")
    other = global_name()
    run("sync", "--to", pg_uri, "--project", f"beta={beta}")
    assert other != ours
    projects = [r[0] for r in rows(pg_uri, "SELECT project FROM eventmem_projects ORDER BY project")]
    assert projects == sorted(["alpha", "beta", ours, other])  # (the one for everyone dropped)
    assert ids_of(pg_uri, ours) == {mine} and ids_of(pg_uri, other) == {theirs}
    async with served(beta, tmp_path / "beta.log", "--store", pg_uri) as session:  # (the other user's server)
        assert titles(await recall(session, "which tool searches code")) == ["their tools"]
        everywhere = await recall(session, "which tool searches code", project="*")
        assert titles(everywhere) == ["their tools"]  # (every project, and of the global memories theirs)
        assert titles(await recall(session, "which tool searches code", scope="global")) == ["their tools"]
    assert_clean_stderr(tmp_path / "beta.log")
    assert set(stats_of(beta, pg_uri)["database"]["projects"]) == {"alpha", "beta", other}
    monkeypatch.setenv("EVENTMEM_GLOBAL_DIR", str(global_dir(alpha)))
    again = run("sync", "--to", pg_uri, "--project", f"alpha={alpha}", "--json")
    assert json.loads(again.stdout)["projects"][ours] == {"events": 0, "memories": 1}  # (not projected again)


async def test_a_recall_naming_a_project_the_database_does_not_hold_says_which_it_holds(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    save(beta, "Beta rotates its keys monthly.", "--title", "key rotation")
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global")
    with psycopg.connect(pg_uri, autocommit=True) as other:  # (a name no sync gives, written by hand)
        other.execute(
            "INSERT INTO eventmem_projects (project, root, branch, projector_version) VALUES (%s, '/x', 'main', 1)",
            ["0 bad\nname"],
        )
    async with served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as session:
        typo = await recall(session, "key rotation", project="bet")
        listed = await call(session, "search_memories", project="bet")
        found = await recall(session, "key rotation", project="BETA")
    assert typo["results"] == [] and listed["results"] == []
    for answer in (typo, listed):
        assert any(
            "no memory here is of a project called 'bet' (the database holds alpha, beta)" in w
            for w in answer["warnings"]
        ), answer
    assert titles(found) == ["key rotation"] and "warnings" not in found
    assert_clean_stderr(tmp_path / "alpha.log")


async def test_a_server_whose_project_another_sync_dropped_projects_it_again_whole(tmp_path: Path, pg_uri: str) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    first = save(alpha, "The job queue takes advisory locks.", "--title", "queue locks")
    async with served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as session:
        assert titles(await recall(session, "queue locks")) == ["queue locks"]
        save(beta, "Beta keeps its secrets in a vault.")
        run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global", "--prune")  # (alpha dropped)
        second = await store(session, "Queue workers restart on failure.", "worker restarts")
        found = await recall(session, "queue locks workers")
        assert {hit["id"] for hit in found["results"]} == {first, second}
        assert {hit["project"] for hit in found["results"]} == {"alpha"}
    assert_clean_stderr(tmp_path / "alpha.log")
    assert ids_of(pg_uri, "alpha") == {first, second}


async def test_a_link_between_a_global_memory_and_this_projects_is_related_from_both_ends_in_the_database(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha = new_project(tmp_path, "alpha")
    async with served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as session:
        personal = await store(session, "I review pull requests before lunch.", "review habit", scope="global")
        own = await store(session, "Pull requests here need two approvals.", "two approvals")
        await call(session, "create_relationship", source_id=personal, target_id=own, relation="relates_to")
        from_personal = await call(session, "get_related_memories", memory_id=personal)
        from_own = await call(session, "get_related_memories", memory_id=own)
    assert [step["id"] for step in from_personal["related"]] == [own]
    assert [step["id"] for step in from_own["related"]] == [personal]
    assert_clean_stderr(tmp_path / "alpha.log")


async def test_a_project_synced_under_another_name_is_served_under_that_name_not_projected_again(
    tmp_path: Path, pg_uri: str
) -> None:
    backend = new_project(tmp_path, "backend")
    saved = save(backend, "The backend retries webhooks three times.", "--title", "webhook retries")
    run("sync", "--to", pg_uri, "--project", f"api={backend}", "--no-global")
    with psycopg.connect(pg_uri, autocommit=True) as other:  # (a name no project may take, on the same folder)
        other.execute(
            "INSERT INTO eventmem_projects (project, root, branch, projector_version) VALUES (%s, %s, 'main', 1)",
            ["0 bad\nname", str(backend)],
        )
    async with served(backend, tmp_path / "backend.log", "--store", pg_uri) as session:
        found = await recall(session, "webhook retries")
        assert [(hit["id"], hit["project"]) for hit in found["results"]] == [(saved, "api")]
        second = await store(session, "Webhooks time out after ten seconds.", "webhook timeout")
    assert_clean_stderr(tmp_path / "backend.log")
    held = rows(pg_uri, "SELECT project, id FROM eventmem_memories WHERE project <> %s ORDER BY id", global_name())
    assert held == sorted([("api", saved), ("api", second)], key=lambda row: row[1])
    held = [r[0] for r in rows(pg_uri, "SELECT project FROM eventmem_projects ORDER BY project")]
    assert held == ["0 bad\nname", "api", global_name()]
    assert stats_of(backend, pg_uri)["database"]["project"] == "api"  # (the command line's reads too)
    run("sync", "--to", pg_uri, "--no-global", cwd=backend)  # (a sync named after the folder, too)
    held = [r[0] for r in rows(pg_uri, "SELECT project FROM eventmem_projects ORDER BY project")]
    assert held == ["0 bad\nname", "api", global_name()]  # (no second copy; the others are not this sync's)
    run("sync", "--to", pg_uri, "--no-global", "--prune", cwd=backend)
    assert [r[0] for r in rows(pg_uri, "SELECT project FROM eventmem_projects")] == ["api"]
    # a name given is the name used: the folder's own name is projected beside the other
    async with served(backend, tmp_path / "named.log", "--store", pg_uri, "--project-name", "backend") as session:
        found = await recall(session, "webhook retries")
        assert {hit["project"] for hit in found["results"]} == {"backend"}
    assert ids_of(pg_uri, "backend") == {saved, second}


async def test_two_typed_links_between_the_same_memories_are_both_read_from_the_database(
    tmp_path: Path, pg_uri: str
) -> None:
    root = new_project(tmp_path, "alpha")
    async with served(root, tmp_path / "alpha.log", "--store", pg_uri) as session:
        fix = await store(session, "Quote the path in the build script.", "quote the path", type="fix")
        bug = await store(session, "The build breaks on paths with spaces.", "spaces break", type="problem")
        for relation in ("solves", "has_spaces"):
            await call(session, "create_relationship", source_id=fix, target_id=bug, relation=relation)
        related = await call(session, "get_related_memories", memory_id=fix)
    assert sorted((step["id"], step["relation"]) for step in related["related"]) == [
        (bug, "has_spaces"),
        (bug, "solves"),
    ]
    assert_clean_stderr(tmp_path / "alpha.log")


def stats_of(root: Path, store: str) -> dict[str, Any]:
    """``eventmem stats --json`` with ``EVENTMEM_STORE``; its stderr must not hold the password."""
    result = subprocess.run(
        eventmem_command("stats", "--json"),
        cwd=root,
        env={**os.environ, "EVENTMEM_STORE": store},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stderr
    stats: dict[str, Any] = json.loads(result.stdout)
    return stats


async def test_a_tracked_store_setting_is_ignored_with_a_warning_and_nothing_reaches_the_database(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha = new_project(tmp_path, "alpha")
    (alpha / ".eventmem").mkdir()
    (alpha / ".eventmem" / "config.toml").write_text(f'store = "{pg_uri}"\n', encoding="utf-8")
    git(alpha, "add", ".eventmem/config.toml")
    git(alpha, "commit", "-q", "-m", "a store chosen by a commit")
    async with served(alpha, tmp_path / "alpha.log") as session:
        await store(session, "Nothing of this may leave the machine.", "private note")
        answer = await recall(session, "private note")
        assert titles(answer) == ["private note"]
        assert any("store = (a database address)" in w and "ignored" in w for w in answer["warnings"])
        assert pg_uri not in json.dumps(answer)
    tables = rows(pg_uri, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'eventmem%%'")
    assert tables == [(0,)]


def test_an_address_that_is_not_postgresql_is_refused_in_one_line_without_its_password(tmp_path: Path) -> None:
    alpha = new_project(tmp_path, "alpha")
    for args, env in (
        (["serve", "--store", f"mysql://root:{SECRET}@db/memory"], {}),
        (["serve"], {"EVENTMEM_STORE": f"mysql://root:{SECRET}@db/memory"}),
        (["serve", "--store", "postgresql://db/memory", "--project-name", "../up"], {}),
    ):
        result = subprocess.run(
            eventmem_command(*args),
            cwd=alpha,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert SECRET not in result.stderr


async def test_unreachable_at_start_the_server_answers_from_the_journal_and_catches_up_once_reachable(
    tmp_path: Path, pg_server: Any
) -> None:
    alpha = new_project(tmp_path, "alpha")
    name = f"eventmem_later_{os.getpid()}"
    uri = pg_server.uri_of(name)  # a database that does not exist yet: every connection is refused
    try:
        async with served(alpha, tmp_path / "alpha.log", "--store", uri) as session:
            memory = await store(session, "Deploys wait for the smoke tests.", "smoke tests")
            answer = await recall(session, "smoke tests")
            assert titles(answer) == ["smoke tests"]
            assert any("PostgreSQL is not used" in w for w in answer["warnings"])
            with pg_server.admin() as admin:
                admin.execute(f"CREATE DATABASE {name}")

            async def from_database() -> bool:
                answer = await recall(session, "smoke tests", project="*")
                return not any("PostgreSQL" in w for w in answer.get("warnings", ()))

            await until(from_database, "the server to reach the database")
            assert ids_now(uri, "alpha") == {memory}
    finally:
        pg_server.drop_database(name)
    assert "cannot reach PostgreSQL" in (tmp_path / "alpha.log").read_text(encoding="utf-8")
    assert_clean_stderr(tmp_path / "alpha.log")


async def test_a_server_whose_database_is_still_taking_the_journal_in_answers_from_the_journal_meanwhile(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha = new_project(tmp_path, "alpha")
    first = save(alpha, "The nightly job rotates the logs.", "--title", "log rotation")
    log = tmp_path / "alpha.log"
    with psycopg.connect(pg_uri, autocommit=True) as holder:
        # another process projecting the project holds it (as a first projection of a large journal
        # does, for a minute at 100,000 memories): the server's start waits for it in the background
        holder.execute("SELECT pg_advisory_lock(%s, hashtext('alpha'))", [PROJECT_LOCK_CLASS])
        async with served(alpha, log, "--store", pg_uri) as session:
            with anyio.fail_after(DEADLINE_S):  # (not held up until the other process is done)
                answer = await recall(session, "log rotation")
            assert [hit["id"] for hit in answer["results"]] == [first]
            assert any("PostgreSQL is still taking the journals in" in w for w in answer["warnings"])
            second = await store(session, "Rotated logs are kept for a week.", "log retention")
            assert titles(await recall(session, "rotated logs kept"))[0] == "log retention"
            holder.execute("SELECT pg_advisory_unlock(%s, hashtext('alpha'))", [PROJECT_LOCK_CLASS])

            async def from_database() -> bool:
                answer = await recall(session, "logs", project="*")
                return not any("PostgreSQL" in w for w in answer.get("warnings", ()))

            await until(from_database, "the server's start to take the journal in")
            assert ids_now(pg_uri, "alpha") == {first, second}
    text = log.read_text(encoding="utf-8")
    assert "still taking the journals in" in text and "has taken the journals in" in text
    assert_clean_stderr(log)


async def test_the_password_of_the_store_never_shows_in_warnings_stats_or_logs(tmp_path: Path) -> None:
    alpha = new_project(tmp_path, "alpha")
    log = tmp_path / "alpha.log"
    async with served(alpha, log, "--store", UNREACHABLE) as session:
        await store(session, "The cache is warmed at boot.", "cache warm-up")
        answer = await recall(session, "cache")
        assert titles(answer) == ["cache warm-up"]
    stats = stats_of(alpha, UNREACHABLE)
    shown = json.dumps([answer, stats])
    assert stats["database"]["store"] == "postgresql://eventmem:***@127.0.0.1:1/memory"
    assert stats["database"]["reachable"] is False
    assert SECRET not in shown
    assert SECRET not in log.read_text(encoding="utf-8")
    assert "cannot reach PostgreSQL" in log.read_text(encoding="utf-8")


async def test_a_database_lost_mid_session_is_answered_around_then_caught_up(tmp_path: Path, pg_uri: str) -> None:
    alpha = new_project(tmp_path, "alpha")
    async with served(alpha, tmp_path / "alpha.log", "--store", pg_uri) as session:
        await store(session, "Backups run nightly.", "backups")
        rows(pg_uri, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'eventmem serve'")
        later = await store(session, "Restores are tested monthly.", "restores")
        answer = await recall(session, "restores tested")
        assert titles(answer)[:1] == ["restores"]  # (from the journal, while the database is lost)

        async def caught_up() -> bool:
            await recall(session, "restores", project="*")
            return later in ids_now(pg_uri, "alpha")

        await until(caught_up, "the save made while the connection was lost to reach the database")
    assert_clean_stderr(tmp_path / "alpha.log")


def test_serve_http_with_a_store_answers_a_rest_recall_from_the_database(
    tmp_path: Path, pg_uri: str, processes: ProcessGroup
) -> None:
    alpha, beta = new_project(tmp_path, "alpha"), new_project(tmp_path, "beta")
    save(beta, "Beta's staging database is reset every Monday.", "--title", "staging reset")
    run("sync", "--to", pg_uri, "--project", f"beta={beta}", "--no-global")
    with http_server(processes, alpha, "--store", pg_uri) as base:
        api = f"{base}/api/v1/projects/alpha/memories"
        saved = httpx.post(api, json={"content": "Alpha's staging is never reset.", "title": "alpha staging"})
        assert saved.status_code == 201, saved.text
        found = httpx.post(f"{api}/recall", json={"query": "staging reset", "project": "*", "limit": 5}).json()
        assert {h["title"] for h in found["hits"]} == {"staging reset", "alpha staging"}
        own = httpx.post(f"{api}/recall", json={"query": "staging reset"}).json()
        assert [h["title"] for h in own["hits"]] == ["alpha staging"]
        stats = httpx.get(f"{base}/api/v1/projects/alpha/stats").json()
        assert stats["database"]["projects"] == {"alpha": 1, "beta": 1, global_name(): 0}
    assert saved.json()["memory"]["id"] in ids_now(pg_uri, "alpha")


async def test_two_servers_on_one_project_keep_the_database_equal_to_a_rebuild(
    tmp_path: Path, pg_uri: str, pg_server: Any
) -> None:
    alpha = new_project(tmp_path, "alpha")
    async with (
        served(alpha, tmp_path / "one.log", "--store", pg_uri) as one,
        served(alpha, tmp_path / "two.log", "--store", pg_uri) as two,
    ):
        for n in range(6):
            writer, reader = (one, two) if n % 2 else (two, one)
            await store(writer, f"Step {n} of the release checklist.", f"step {n}")
            assert f"step {n}" in titles(await recall(reader, f"step {n} release checklist", limit=10))
    name = pg_server.new_database()
    try:
        rebuilt = pg_server.uri_of(name)
        run("sync", "--to", rebuilt, "--project", f"alpha={alpha}", "--no-global")
        with psycopg.connect(pg_uri) as served_db, psycopg.connect(rebuilt) as fresh:
            assert answers(served_db, "alpha") == answers(fresh, "alpha")
    finally:
        pg_server.drop_database(name)


def test_the_store_comes_from_an_untracked_settings_file_and_never_from_an_allowed_tracked_one(
    tmp_path: Path, pg_uri: str
) -> None:
    alpha = new_project(tmp_path, "alpha")
    save(alpha, "Releases are cut on Thursdays.", "--title", "release day")
    tracked = alpha / ".eventmem" / "config.toml"
    tracked.write_text(f'store = "{pg_uri}"\n', encoding="utf-8")
    git(alpha, "add", ".eventmem/config.toml")
    git(alpha, "commit", "-q", "-m", "a store chosen by a commit")
    run("allow", cwd=alpha)
    stats = json.loads(run("stats", "--json", cwd=alpha).stdout)
    assert "database" not in stats
    assert rows(pg_uri, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'eventmem%%'") == [(0,)]
    (alpha / ".eventmem" / "config.local.toml").write_text(f'store = "{pg_uri}"\n', encoding="utf-8")
    stats = json.loads(run("stats", "--json", cwd=alpha).stdout)
    assert stats["database"]["reachable"] is True
    assert stats["database"]["projects"]["alpha"] == 1
