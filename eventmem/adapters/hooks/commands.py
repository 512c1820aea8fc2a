"""``eventmem hooks …`` (install, uninstall, status, review, pending, reindex) and ``eventmem hook CLIENT``,
added to the command line by :mod:`eventmem.main`."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eventmem import __version__
from eventmem.adapters.command_line import chosen_root
from eventmem.adapters.hooks import index as hook_index
from eventmem.adapters.hooks import install as wiring
from eventmem.adapters.hooks.clients import CLIENTS, INSTRUCTION_CLIENTS, Client, InstructionClient, client_named
from eventmem.adapters.hooks.clients import settings_path as client_file
from eventmem.adapters.hooks.local import HooksDir, journal_fingerprint, load_hook_settings
from eventmem.core.errors import InvalidInput
from eventmem.core.terminal import print_json, printable

__all__ = ["add_hook_commands", "run_hook_command"]

CLIENT_HELP = "a client: " + ", ".join([*CLIENTS, *INSTRUCTION_CLIENTS])


def add_hook_commands(
    sub: Any, command_options: Callable[[argparse.ArgumentParser], None], hook: Callable[[argparse.Namespace], int]
) -> None:
    """Add ``hooks`` (with its subcommands) and ``hook`` to the ``eventmem`` parser's subcommands."""
    description = "wire eventmem into AI clients' lifecycle hooks, and review what the hooks recorded"
    hooks = sub.add_parser("hooks", help=description, description=description)
    command_options(hooks)
    commands = hooks.add_subparsers(dest="hooks_command", required=True, metavar="command")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
        command_options(p)
        p.set_defaults(func=fn)
        return p

    p = add("install", cmd_install, "merge eventmem's hooks into a client's settings (idempotent)")
    p.add_argument("client", help=CLIENT_HELP)
    p.add_argument("--scope", choices=["project", "user"], default="project")
    p.add_argument("--with-tools", action="store_true", help="also the after-a-tool hook (notes on failing commands)")
    p.add_argument("--command", dest="program", metavar="PROGRAM", help="how the client runs eventmem (default: found)")
    p = add("uninstall", cmd_uninstall, "remove eventmem's hooks from a client's settings (nothing else)")
    p.add_argument("client", help=CLIENT_HELP)
    p.add_argument("--scope", choices=["project", "user"], default="project")
    add("status", cmd_status, "which clients are wired, to which events, with which eventmem; the settings")
    p = add("review", cmd_review, "what the hooks recorded (by batch), newest first")
    p.add_argument("--since", help="only since this date or time (ISO-8601, e.g. 2026-12-01)")
    p.add_argument("--limit", type=int, default=200)
    p = add("pending", cmd_pending, "captures waiting for a yes (auto_capture = suggest): list, accept or discard")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--accept", action="store_true", help="save them all, one batch per session")
    group.add_argument("--discard", action="store_true", help="drop them all")
    add("reindex", cmd_reindex, "rebuild the hooks' index in the cache (the hooks do it when it is stale)")
    description = "answer one hook event (the client's JSON on stdin) in the client's format; always exits 0"
    p = sub.add_parser("hook", help=description, description=description)
    p.add_argument("client", help=", ".join(CLIENTS))
    p.add_argument("event", nargs="?", help="the event, when the client's JSON does not name it")
    p.set_defaults(func=hook)


def _client(name: str) -> Client | InstructionClient:
    found = client_named(name)
    if found is None:
        raise InvalidInput(f"unknown client {printable(name)!r}; {CLIENT_HELP}")
    return found


def _ensure_project(root: Path) -> bool:
    """Create ``.eventmem/`` as ``eventmem init`` does, when missing; returns whether it did."""
    from eventmem.journal.config import config_template
    from eventmem.journal.files import atomic_write
    from eventmem.journal.project import ProjectPaths

    paths = ProjectPaths(root)
    made = not paths.base.exists()
    paths.ensure()
    if not os.path.lexists(paths.config_file):
        atomic_write(paths.config_file, config_template().encode(), durable=False)
    return made


def cmd_install(args: argparse.Namespace) -> int:
    client = _client(args.client)
    root = chosen_root(args.root).root
    path = client_file(client, args.scope, root, Path.home())
    created = _ensure_project(root) if args.scope == "project" else False
    if isinstance(client, InstructionClient):
        change = wiring.install_snippet(client, path)
    else:
        command = wiring.hook_command(client, args.program)
        change = wiring.install(client, path, command, with_tools=args.with_tools)
    result = {"client": client.name, "scope": args.scope, **change.as_dict(), "created_memory": created}
    if args.json:
        print_json(result)
        return 0
    if created:
        print(f"created the project memory in {root / '.eventmem'}")
    if isinstance(client, InstructionClient):
        print(f"{client.title} has no lifecycle hooks: {_verb(change)} the instructions in {path}")
        return 0
    if change.added:
        print(f"{client.title}: added eventmem's hooks for {', '.join(change.added)} to {path}")
    if change.updated:
        print(f"{client.title}: updated eventmem's command for {', '.join(change.updated)} in {path}")
    if not change.changed:
        print(f"{client.title}: eventmem's hooks are already in {path}; nothing changed")
    return 0


def _verb(change: wiring.Change) -> str:
    return "wrote" if change.added else "updated" if change.updated else "kept (unchanged)"


def cmd_uninstall(args: argparse.Namespace) -> int:
    client = _client(args.client)
    root = chosen_root(args.root).root
    path = client_file(client, args.scope, root, Path.home())
    if isinstance(client, InstructionClient):
        change = wiring.uninstall_snippet(client, path)
    else:
        change = wiring.uninstall(client, path)
    if args.json:
        print_json({"client": client.name, "scope": args.scope, **change.as_dict()})
    elif change.removed:
        print(f"{client.title}: removed eventmem's hooks for {', '.join(change.removed)} from {path}")
    else:
        print(f"{client.title}: no eventmem hooks in {path}; nothing changed")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    root = chosen_root(args.root).root
    hooks = HooksDir(root)
    settings, problems = load_hook_settings(root, os.environ)
    wired: list[dict[str, Any]] = []
    every: list[Client | InstructionClient] = [*CLIENTS.values(), *INSTRUCTION_CLIENTS.values()]
    for client in every:
        for scope in ("project", "user"):
            try:
                path = client_file(client, scope, root, Path.home())
            except ValueError:
                continue
            if isinstance(client, InstructionClient):
                if wiring.snippet_installed(path):
                    wired.append({"client": client.name, "scope": scope, "file": str(path), "events": ["instructions"]})
                continue
            found = wiring.installed(client, path)
            if found:
                commands = sorted(set(found.values()))
                wired.append(
                    {
                        "client": client.name,
                        "scope": scope,
                        "file": str(path),
                        "events": list(found),
                        "commands": commands,
                        "eventmem": [_which(command) for command in commands],
                    }
                )
    index = _index_state(root, hooks)
    pending = _pending_count(hooks)
    result = {
        "root": str(root),
        "eventmem_version": __version__,
        "clients": wired,
        "settings": settings.as_dict(),
        "settings_problems": problems,
        "index": index,
        "pending": pending,
        "log": str(hooks.log_file),
    }
    if args.json:
        print_json(result)
        return 0
    print(f"eventmem {__version__}, project {root}")
    if not wired:
        print("no client is wired; run `eventmem hooks install claude-code` (or codex, gemini, cursor)")
    for entry in wired:
        print(f"{entry['client']} ({entry['scope']}): {', '.join(entry['events'])} in {entry['file']}")
        for command, where in zip(entry.get("commands", []), entry.get("eventmem", []), strict=True):
            print(f"    runs {printable(command)}  ({where})")
    print("settings: " + ", ".join(f"{k} = {v!r}" for k, v in settings.as_dict().items()))
    for problem in problems:
        print(f"    {printable(problem)}")
    print(f"index: {index['state']}" + (f", {index['memories']} memories" if "memories" in index else ""))
    if pending:
        print(f"pending: {pending} captures wait for `eventmem hooks pending --accept` or `--discard`")
    print(f"log: {hooks.log_file}")
    return 0


def _which(command: str) -> str:
    import shlex
    import shutil

    try:
        first = shlex.split(command)[0]
    except (ValueError, IndexError):
        return "cannot read the command"
    if "-m" in command.split() and first:
        return f"{first} -m eventmem"
    found = shutil.which(first)
    return str(Path(found).resolve()) if found else f"{first}: not found on this PATH"


def _index_state(root: Path, hooks: HooksDir) -> dict[str, Any]:
    connection = hook_index.open_index(hooks.index_file)
    if connection is None:
        return {"state": "missing (built at the next session start)"}
    try:
        count = connection.execute("SELECT count(*) FROM memories").fetchone()[0]
        fresh = hook_index.fingerprint_of(connection) == journal_fingerprint(root)
    finally:
        connection.close()
    return {"state": "current" if fresh else "stale (rebuilt in the background at the next hook)", "memories": count}


def _pending_lines(hooks: HooksDir) -> list[dict[str, Any]]:
    try:
        raw = hooks.pending_file.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in raw:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("item"), dict) and isinstance(entry.get("by"), str):
            out.append(entry)
    return out


def _pending_count(hooks: HooksDir) -> int:
    return len(_pending_lines(hooks))


def _since(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--since {printable(text)!r} is not a date or time (ISO-8601, e.g. 2026-12-01)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def cmd_review(args: argparse.Namespace) -> int:
    since = _since(args.since)
    if args.limit < 1:
        raise InvalidInput("--limit must be at least 1")
    from eventmem.service import open_service

    service = open_service(chosen_root(args.root))
    try:
        rows = [
            row
            for row in service.memory_rows(content_chars=0)
            if row["created_by"].startswith("hook:") and row["created_at"] >= since
        ]
    finally:
        service.close()
    rows.sort(key=lambda row: (-row["created_at"], row["id"]))
    rows = rows[: args.limit]
    for row in rows:
        row["created"] = datetime.fromtimestamp(row.pop("created_at"), UTC).isoformat(timespec="seconds")
        row.pop("updated_at", None)
        row.pop("content", None)
    if args.json:
        print_json({"status": "success", "memories": rows})
        return 0
    if not rows:
        print("the hooks recorded nothing" + (f" since {args.since}" if args.since else ""))
        return 0
    writer = None
    for row in rows:
        if row["created_by"] != writer:
            writer = row["created_by"]
            print(f"{printable(writer)}  ({row['created']})")
        print(f"  {row['id']}  [{row['kind']}] {printable(row['summary'])}")
    return 0


def cmd_pending(args: argparse.Namespace) -> int:
    root = chosen_root(args.root).root
    hooks = HooksDir(root)
    entries = _pending_lines(hooks)
    if args.discard:
        hooks.pending_file.unlink(missing_ok=True)
        _say(args, {"status": "success", "discarded": len(entries)}, f"discarded {len(entries)} pending captures")
        return 0
    if not args.accept:
        if args.json:
            print_json({"status": "success", "pending": entries})
        elif not entries:
            print("nothing is pending")
        for entry in entries if not args.json else []:
            item = entry["item"]
            print(f"{printable(entry['by'])}: [{item.get('kind')}] {printable(str(item.get('content', ''))[:200])}")
        return 0
    from eventmem.adapters.hooks.capture import open_project, rebuild_index
    from eventmem.service.batches import items_from

    by_writer: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_writer.setdefault(entry["by"], []).append(entry["item"])
    service = open_project(root)
    written = 0
    try:
        for writer, items in by_writer.items():
            saved = service.save_batch(items_from(items), by=writer)
            written += sum(1 for one in saved if not one.deduplicated)
        hooks.pending_file.unlink(missing_ok=True)
        rebuild_index(root, service)
    finally:
        service.close()
    _say(args, {"status": "success", "accepted": len(entries), "written": written}, f"saved {written} memories")
    return 0


def _say(args: argparse.Namespace, result: dict[str, Any], line: str) -> None:
    if args.json:
        print_json(result)
    else:
        print(line)


def cmd_reindex(args: argparse.Namespace) -> int:
    import fcntl

    from eventmem.adapters.hooks.capture import rebuild_index

    root = chosen_root(args.root).root
    hooks = HooksDir(root)
    hooks.ensure_cache()
    fd = os.open(hooks.cache / "reindex.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(args, {"status": "success", "rebuilt": False}, "another process is rebuilding the index")
            return 0
        count = rebuild_index(root)
    finally:
        os.close(fd)
    _say(args, {"status": "success", "rebuilt": True, "memories": count}, f"indexed {count} memories")
    return 0


def run_hook_command(args: argparse.Namespace) -> int:
    """``eventmem hook`` reached through the full parser (the entry point normally takes the fast way)."""
    from eventmem.adapters.hooks.fastpath import main

    return main([args.client, *([args.event] if args.event else [])])
