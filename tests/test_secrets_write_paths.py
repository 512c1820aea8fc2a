"""No write path lets a secret through: the corpus of tests/fixtures/secrets goes in through every
MCP tool that writes (a real client against ``eventmem serve``), the CLI and ``eventmem import pmp``;
then every file of the project (journal, cache, views) and every object git stored is searched for
each secret: none may be found."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import secret_corpus
from cli_runner import eventmem
from conftest import REPO, git
from mcp import ClientSession
from mcp_client import call, serve, server_env

from eventmem.core.redact import scrub

pytestmark = pytest.mark.anyio

CORPUS = secret_corpus.secrets()
KEY_SHAPES = ("github-token", "aws-access-key", "slack-token", "openai-key", "gitlab-token", "npm-token", "stripe-key")
"""Token shapes that are also valid metadata keys (letters, digits, ``_.-``)."""
ALL_LINES = "\n".join(secret.line for secret in CORPUS)


def chunks(limit: int, separator: str = "\n") -> Iterator[str]:
    """The corpus lines packed into texts of at most ``limit`` characters (every line fits one)."""
    current: list[str] = []
    for line in (secret.line for secret in CORPUS):
        assert len(line) <= limit, line
        if current and len(separator.join([*current, line])) > limit:
            yield separator.join(current)
            current = []
        current.append(line)
    if current:
        yield separator.join(current)


def standalone_secrets() -> list[str]:
    """Secrets that give themselves away without the line around them (tokens with a prefix): the
    ones a tag can carry."""
    return [s.secret for s in CORPUS if scrub(s.secret) != s.secret and "\n" not in s.secret and len(s.secret) <= 64]


def leaks_in(data: bytes) -> list[str]:
    """Corpus secrets (each line of a multi-line one, and its lower-cased form) found in ``data``."""
    return [
        f"{secret.kind}: {part[:24]}…"
        for secret in CORPUS
        for part in secret.secret.split("\n")
        if len(part) >= 8 and (part.encode() in data or part.lower().encode() in data)
    ]


def run_cli(project: Path, *args: str) -> str:
    result = eventmem(project, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def write_through_the_tools(session: ClientSession) -> None:
    tags = standalone_secrets()
    assert len(tags) >= 20
    saved = await call(
        session, "store_memory", content=ALL_LINES, title=CORPUS[0].line, summary=next(chunks(1000)), tags=tags[:32]
    )
    memory = saved["memory"]
    assert not leaks_in(str(memory).encode()), "the tool returned what it stored, scrubbed"
    first = memory["id"]
    for title in chunks(200, " | "):
        await call(session, "update_memory", memory_id=first, title=title)
    for summary in chunks(1000):
        await call(session, "update_memory", memory_id=first, summary=summary)
    await call(session, "update_memory", memory_id=first, tags=tags[32:] or tags[:1], content=ALL_LINES + "\nagain")
    context = await call(session, "save_context", context_text=ALL_LINES + "\ncontext", tags=tags[:8])
    second = context["id"]
    for reason in chunks(900):
        await call(session, "create_relationship", source_id=first, target_id=second, context=reason)
        temporary = await call(session, "store_memory", content=f"temporary {reason[:40]}", ttl_seconds=3600)
        await call(session, "promote_memory", memory_id=temporary["memory"]["id"], reason=reason[:500])
        await call(session, "delete_memory", memory_id=temporary["memory"]["id"], reason=reason)
    await call(session, "supersede", memory_id=second, content=ALL_LINES + "\nsuperseding", reason=next(chunks(900)))
    await call(session, "update_current_task", task=ALL_LINES)
    await call(session, "update_context_section", section="architecture", content=ALL_LINES)
    for decision in chunks(900):
        await call(session, "add_decision", decision=decision, title=decision[:80], rationale=decision)
    await call(session, "record_conversation_summary", summary=next(chunks(1500)), recentChanges=list(chunks(300)))


def write_through_the_cli(project: Path) -> None:
    for text in chunks(1900):
        saved = run_cli(
            project,
            "save",
            "--json",
            f"--title={text[:200]}",
            f"--summary={text[:1000]}",
            f"--by={text[:128]}",
            "--",
            text,
        )
        memory_id = json.loads(saved)["memory"]["id"]
        run_cli(project, "update", memory_id, f"--content={text}\nupdated", f"--summary={text[:1000]}")
        run_cli(project, "delete", memory_id, f"--reason={text}")


def write_an_ai_directory(target: Path) -> None:
    shutil.copytree(REPO / "tests" / "fixtures" / "pmp", target)
    decisions = target / "decisions.md"
    decisions.write_text(
        decisions.read_text(encoding="utf-8")
        + "".join(f"\n## 2025-04-{i + 1:02d} — Credentials {i}\n\n{text}\n" for i, text in enumerate(chunks(1500))),
        encoding="utf-8",
    )
    for name in ("current-task.md", "architecture.md"):
        path = target / name
        path.write_text(path.read_text(encoding="utf-8") + "\n" + ALL_LINES + "\n", encoding="utf-8")


async def test_no_secret_of_the_corpus_reaches_any_file_or_git_object_through_any_write_path(
    project: Path, tmp_path: Path
) -> None:
    env = server_env(EVENTMEM_TOOLS="all", EVENTMEM_ROOT=str(project))
    async with serve(project, env, tmp_path / "server.log") as session:
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {"store_memory", "supersede", "add_decision", "promote_memory"} <= tools
        await write_through_the_tools(session)
    write_through_the_cli(project)
    write_an_ai_directory(tmp_path / "ai-source")
    report = json.loads(run_cli(project, "import", "pmp", str(tmp_path / "ai-source"), "--json"))
    assert report["events"] > 0

    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "memory")
    files = [path for path in project.rglob("*") if path.is_file() and ".git" not in path.relative_to(project).parts]
    journal = b"".join(path.read_bytes() for path in (project / ".eventmem" / "journal").glob("*.jsonl"))
    assert journal.count(b"[REDACTED:") > 500, "the corpus went in (scrubbed)"
    assert any(path.suffix == ".jsonl" for path in files) and any("cache" in path.parts for path in files)
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=project, capture_output=True, check=True
    ).stdout
    leaks: dict[str, Any] = {str(path.relative_to(project)): leaks_in(path.read_bytes()) for path in files}
    leaks["git objects"] = leaks_in(objects)
    assert {where: found for where, found in leaks.items() if found} == {}


TOKEN_KEYS = [
    s.secret
    for s in CORPUS
    if s.kind in KEY_SHAPES
    and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", s.secret)
    and scrub(s.secret) != s.secret
]


async def test_a_secret_given_as_a_metadata_key_is_not_stored_as_written(project: Path, tmp_path: Path) -> None:
    assert len(TOKEN_KEYS) >= 6
    metadata = dict.fromkeys(TOKEN_KEYS, "pasted by mistake") | {"owner": "ops"}
    env = server_env(EVENTMEM_ROOT=str(project))
    async with serve(project, env, tmp_path / "server.log") as session:
        await session.initialize()
        saved = await call(session, "store_memory", content="The deploy runbook.", metadata=metadata)
        refused = await call(session, "update_memory", memory_id=saved["memory"]["id"], metadata=metadata)
    stored = {**saved["memory"]["metadata"], **refused["memory"]["metadata"]}
    assert stored["owner"] == "ops" and not set(stored) & set(TOKEN_KEYS)
    assert sum(key.startswith("redacted-") for key in saved["memory"]["metadata"]) == len(TOKEN_KEYS)
    journal = b"".join(path.read_bytes() for path in (project / ".eventmem" / "journal").glob("*.jsonl"))
    assert leaks_in(journal) == []


def test_a_password_in_an_imported_notes_observation_and_a_token_as_its_key_are_scrubbed(
    project: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    token = TOKEN_KEYS[0]
    (notes / "deploy.md").write_text(
        f"---\ntitle: Deploy\n{token}: pasted by mistake\n---\n\n## Observations\n"
        '- [config] the admin password: "winter is coming 42"\n'
        "- [ops] netrc: machine ci.example.com login bot password Vq8zK2mT4xR7\n",
        encoding="utf-8",
    )
    report = json.loads(run_cli(project, "import", "markdown", str(notes), "--json"))
    assert report["added"] == 1
    journal = b"".join(path.read_bytes() for path in (project / ".eventmem" / "journal").glob("*.jsonl"))
    assert b"winter is coming" not in journal and b"Vq8zK2mT4xR7" not in journal and token.encode() not in journal
    assert journal.count(b"[REDACTED:password]") >= 2 and b"redacted-" in journal
