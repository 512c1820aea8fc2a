"""Versioned schema: ``NNNN_name.sql`` files here, applied in order on start, each in its own
transaction with its version recorded; concurrent starters wait on an advisory lock."""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING

from eventmem.core.errors import EventmemError

if TYPE_CHECKING:
    import psycopg

__all__ = ["LATEST", "SchemaTooNew", "applied_version", "migrate", "migrations"]

_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x6576_656E_746D  # "eventm": one advisory lock for every eventmem migrator


class SchemaTooNew(EventmemError):
    """The database was migrated by a newer eventmem."""


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every migration shipped, in order."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


LATEST = migrations()[-1][0]


def applied_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The schema version of the database (0: none yet)."""
    with conn.transaction():
        row = conn.execute("SELECT to_regclass('eventmem_schema') IS NOT NULL").fetchone()
        if row is None or not row[0]:
            return 0
        version = conn.execute("SELECT coalesce(max(version), 0) FROM eventmem_schema").fetchone()
    return int(str(version[0])) if version is not None else 0


def migrate(conn: psycopg.Connection[tuple[object, ...]], target: int | None = None) -> int:
    """Apply the migrations not yet applied, up to ``target`` (default: all); returns the version."""
    goal = LATEST if target is None else target
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        conn.execute(
            "CREATE TABLE IF NOT EXISTS eventmem_schema ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
    version = applied_version(conn)
    if version > LATEST:
        raise SchemaTooNew(f"the database's eventmem schema is version {version}; this eventmem knows {LATEST}")
    for number, name, sql in migrations():
        if number <= version or number > goal:
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
            done = conn.execute("SELECT 1 FROM eventmem_schema WHERE version = %s", [number]).fetchone()
            if done is None:
                conn.execute(sql.encode("utf-8"))
                conn.execute("INSERT INTO eventmem_schema (version, name) VALUES (%s, %s)", [number, name])
        version = number
    return version
