"""Opening the database: a clear one-line error when it cannot be reached, never its password."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from eventmem.core.errors import EventmemError, InvalidInput

if TYPE_CHECKING:
    import psycopg

__all__ = ["DatabaseFull", "DatabaseUnavailable", "connect", "is_connection_lost", "is_disk_full", "shown_uri"]

CONNECT_TIMEOUT_S = 10
_SECRET_PARAM = re.compile(r"(password|passfile|sslpassword)=[^&\s]*", re.IGNORECASE)
_KEYWORD_SECRET = re.compile(r"(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


class DatabaseUnavailable(EventmemError):
    """The database cannot be reached or the driver is not installed."""


class DatabaseFull(DatabaseUnavailable):
    """The database's disk is full: the batch was rolled back, and a sync goes on once there is space."""


def shown_uri(uri: str) -> str:
    """The connection string as it may be shown: the password (in the address, a parameter or a
    ``key=value`` string) replaced by ``***``."""
    if "://" not in uri:
        return _KEYWORD_SECRET.sub(r"\1=***", uri)
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "(an unreadable connection string)"
    netloc = parts.netloc
    if "@" in netloc:
        credentials, _, host = netloc.rpartition("@")
        user = credentials.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in credentials else f"{user}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, _SECRET_PARAM.sub(r"\1=***", parts.query), ""))


def _hide(text: str, uri: str) -> str:
    """``text`` (a driver's message) with any secret of ``uri`` taken out."""
    parts = urlsplit(uri) if "://" in uri else None
    secret = parts.password if parts is not None else None
    out = text.replace(uri, shown_uri(uri))
    if secret:
        out = out.replace(secret, "***")
    return " ".join(_SECRET_PARAM.sub(r"\1=***", out).split())


def check_uri(uri: str, option: str = "--to") -> str:
    """A PostgreSQL connection string, or a refusal that does not echo it (``option``: what gave it)."""
    if not isinstance(uri, str) or not uri.startswith(("postgresql://", "postgres://")):
        raise InvalidInput(f"{option} must be a PostgreSQL address: postgresql://user@host/database")
    if len(uri) > 4096 or any(ord(c) < 32 for c in uri):
        raise InvalidInput("the PostgreSQL address is too long or holds control characters")
    return uri


def connect(
    uri: str, *, autocommit: bool = False, application_name: str = "eventmem"
) -> psycopg.Connection[tuple[object, ...]]:
    """A connection to ``uri``; :class:`DatabaseUnavailable` (one line, no password) if there is none.
    ``application_name`` names it in ``pg_stat_activity``."""
    try:
        import psycopg
    except ImportError:
        raise DatabaseUnavailable("PostgreSQL support is not installed: pip install 'eventmem[postgres]'") from None
    check_uri(uri)
    try:
        return psycopg.connect(
            uri, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S, application_name=application_name
        )
    except psycopg.Error as exc:
        reason = _hide(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, uri)
        raise DatabaseUnavailable(f"cannot reach PostgreSQL at {shown_uri(uri)}: {reason}") from None


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection or its transaction is gone (try again on a new one)."""
    import psycopg

    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) or (
        isinstance(exc, psycopg.errors.AdminShutdown)
    )


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is the server failing to grow a file (SQLSTATE 53100: no space left)."""
    import psycopg

    return isinstance(exc, psycopg.errors.DiskFull)


def describe(exc: BaseException, uri: str) -> str:
    """A driver error in one line without the connection's secrets."""
    text = str(exc).strip()
    return _hide(text.splitlines()[0] if text else type(exc).__name__, uri)
