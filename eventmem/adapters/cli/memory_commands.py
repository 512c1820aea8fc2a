"""The commands that serve, create and change memories: serve, init, save, search, show, update, delete, restore."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from eventmem.adapters.cli.roots import chosen_root, close_service, open_service_of
from eventmem.adapters.command_line import warn
from eventmem.core.errors import InvalidInput
from eventmem.core.query_rules import Filters
from eventmem.core.terminal import print_json, printable
from eventmem.journal.config import config_template
from eventmem.journal.files import atomic_write
from eventmem.journal.project import ProjectPaths

__all__ = [
    "UPDATE_FLAGS",
    "cmd_delete",
    "cmd_init",
    "cmd_restore",
    "cmd_save",
    "cmd_search",
    "cmd_show",
    "cmd_update",
]


def _show_memory(memory: Any) -> None:
    print(f"{memory.id}  [{memory.kind}] {memory.status}  importance {memory.importance}")
    if memory.title:
        print(f"title:    {printable(memory.title)}")
    print(f"summary:  {printable(memory.summary)}")
    if memory.tags:
        print(f"tags:     {printable(', '.join(memory.tags))}")
    print(f"created:  {memory.created_at} by {printable(memory.created_by or '-')}")
    print(f"updated:  {memory.updated_at} by {printable(memory.updated_by or '-')}")
    if memory.expires_at:
        print(f"expires:  {memory.expires_at}")
    if memory.source:
        print(f"source:   {printable(memory.source)}")
    for key, value in sorted((memory.metadata or {}).items()):
        print(f"meta:     {printable(key)} = {printable(value)}")
    print()
    print(printable(memory.content, multiline=True))


def cmd_init(args: argparse.Namespace) -> int:
    root = chosen_root(args.root, create=True)
    paths = ProjectPaths(root.root)
    paths.ensure()
    paths.inside(paths.archive_dir, kind="folder", create=True)
    if not os.path.lexists(paths.config_file):
        atomic_write(paths.config_file, config_template().encode(), durable=False)
    result: dict[str, Any] = {"root": str(root.root), "root_source": root.source, "memory_dir": str(paths.base)}
    if args.git_drivers:
        from eventmem.journal.gitdrivers import install

        result["git"] = install(paths)
    if args.git_hooks:
        from eventmem.journal.gitdrivers import install_pre_push

        result["pre_push_hook"] = install_pre_push(root.root)
    if args.json:
        print_json(result)
    else:
        print(f"eventmem memory ready in {paths.base} (root chosen by {root.source})")
        print("Commit .eventmem/ with your code; its cache/ is ignored.")
        if args.git_drivers:
            where = "this clone's .git/config" if result["git"]["git_config"] else "nowhere (not a git repository)"
            print(f"git: diff=eventmem in .eventmem/.gitattributes; the driver is configured in {where}")
        if args.git_hooks:
            print(f"git: pre-push hook {result['pre_push_hook']}")
    return 0


def _listed(values: list[str] | None) -> list[str] | None:
    """Repeated options, each of which may also hold comma-separated values, as one list."""
    if values is None:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _metadata(entries: list[str] | None) -> dict[str, str] | None:
    """``--meta KEY=VALUE`` options as one mapping (the service checks keys, values and sizes)."""
    if entries is None:
        return None
    metadata: dict[str, str] = {}
    for entry in entries:
        key, equals, value = entry.partition("=")
        if not equals:
            raise InvalidInput(f"--meta takes KEY=VALUE, got {printable(entry)!r}")
        metadata[key.strip()] = value
    return metadata


def _stdin_text() -> str:
    """The text on standard input, which must be UTF-8 (refused in one line, exit 2, if it is not)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the text on standard input is not UTF-8 (byte {exc.start + 1} of {len(data)})") from None


def cmd_save(args: argparse.Namespace) -> int:
    text = args.text if args.text != "-" else _stdin_text()
    service = open_service_of(args)
    saved = service.save_result(
        text,
        title=args.title or "",
        summary=args.summary,
        tags=_listed(args.tag),
        kind=args.type,
        importance=args.importance,
        ttl_seconds=args.ttl,
        scope=args.scope,
        by=args.by or os.environ.get("USER", "cli"),
        metadata=_metadata(args.meta),
    )
    memory = saved.memory
    close_service(service, done="saved", wrote=memory)
    if args.json:
        print_json({"status": "success", "memory": memory} | ({"section": saved.section} if saved.section else {}))
    elif saved.section:
        print(f"updated the project-context section {saved.section} ({memory.id}): {printable(memory.summary)}")
    else:
        print(f"saved {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    service = open_service_of(args)
    filters = Filters(
        kinds=tuple(_listed(args.type) or ()),
        tags=tuple(_listed(args.tag) or ()),
        scope=args.scope,
        min_importance=args.min_importance,
    )
    hits = service.recall(
        " ".join(args.query), limit=args.limit, filters=filters, mode=args.mode, include_content=args.json
    )
    if args.json:
        print_json({"status": "success", "results": hits})
    elif not hits:
        print("no memories match")
    else:
        for hit in hits:
            tags = f"  #{' #'.join(hit.tags)}" if hit.tags else ""
            print(f"{hit.score:6.3f}  {hit.id}  [{hit.kind}] {printable(hit.summary + tags)}")
    for warning in service.warnings():
        warn(warning)
    close_service(service)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    service = open_service_of(args)
    memory = service.get(service.resolve_id(args.id, prefix=True))
    close_service(service)
    if args.json:
        print_json({"status": "success", "memory": memory})
    else:
        _show_memory(memory)
    return 0


UPDATE_FLAGS = ("content", "title", "summary", "tag", "type", "importance", "ttl", "meta")


def cmd_update(args: argparse.Namespace) -> int:
    if all(getattr(args, name) is None for name in UPDATE_FLAGS):
        flags = ", ".join(f"--{name}" for name in UPDATE_FLAGS)
        raise InvalidInput(f"nothing to update: give at least one of {flags}")
    service = open_service_of(args)
    ttl: Any = "unchanged"
    if args.ttl is not None:
        ttl = None if args.ttl == 0 else args.ttl
    memory = service.update(
        service.resolve_id(args.id, prefix=True),
        content=args.content,
        title=args.title,
        summary=args.summary,
        tags=_listed(args.tag),
        kind=args.type,
        importance=args.importance,
        ttl_seconds=ttl,
        by=args.by or os.environ.get("USER", "cli"),
        metadata=_metadata(args.meta),
    )
    close_service(service, done="updated", wrote=memory)
    if args.json:
        print_json({"status": "success", "memory": memory})
    else:
        print(f"updated {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    service = open_service_of(args)
    memory = service.delete(
        service.resolve_id(args.id, prefix=True), reason=args.reason or "", by=args.by or os.environ.get("USER", "cli")
    )
    close_service(service, done="deleted", wrote=memory)
    if args.json:
        print_json({"status": "success", "id": memory.id, "deleted": True})
    else:
        print(f"deleted {memory.id}: {printable(memory.summary)}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    service = open_service_of(args)
    memory, restored = service.restore(
        service.resolve_id(args.id, prefix=True), reason=args.reason or "", by=args.by or os.environ.get("USER", "cli")
    )
    close_service(service, done="restored", wrote=memory)
    if args.json:
        print_json({"status": "success", "memory": memory, "restored": restored})
    elif restored:
        print(f"restored {memory.id}: {printable(memory.summary)}")
    else:
        print(f"{memory.id} is live: nothing to restore")
    return 0
