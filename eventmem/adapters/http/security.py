"""The HTTP server's guard, one ASGI middleware in front of every route (``/mcp`` included).

In order: the rate limit per client address, the ``Host`` header (DNS-rebinding defence), the
``Origin`` header (only the server's own origin, scheme, host and port, or an origin the user listed
with ``--cors-origin``: a page on another port of the same machine is another origin), the
``Sec-Fetch-Site`` header (a browser's request without an ``Origin`` from another site or port), the
bearer token when one is set (constant-time comparison), ``Content-Type: application/json`` on
every REST request that changes something (a browser sends ``text/plain`` cross-site without asking
first), and the request body size (declared and actually read). Every refusal is a problem+json
answer with a clear message, no trace, no path; every route, present or future, passes through it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventmem.core.errors import InvalidInput

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "Guard",
    "GuardSettings",
    "is_loopback",
    "problem_body",
    "read_token",
    "send_problem",
]

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
"""A request body larger than this is refused (a memory's content is at most 1 MiB)."""
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
PUBLIC_PREFIXES = ("/static/",)
"""The UI's own files hold no memory: a browser loads them before it has a token to send."""
PUBLIC_PATHS = ("/", "/favicon.ico")
REST_PREFIX = "/api/"
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""A REST request with one of these methods must say ``Content-Type: application/json``."""
FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})
"""``Sec-Fetch-Site`` values of a browser request made by a page of another origin (another port of
``localhost`` is ``same-site``)."""
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | None) -> str | None:
    """The bearer token: ``EVENTMEM_TOKEN``, else the first line of ``token_file``; at least 16 characters."""
    token = os.environ.get("EVENTMEM_TOKEN", "").strip()
    if not token and token_file:
        try:
            token = Path(token_file).expanduser().read_text(encoding="utf-8").strip().splitlines()[0].strip()
        except (OSError, UnicodeError, IndexError):
            raise InvalidInput("the token file cannot be read, or is empty") from None
    if token and len(token) < 16:
        raise InvalidInput("the token must be at least 16 characters long")
    return token or None


@dataclass
class GuardSettings:
    host: str = "127.0.0.1"
    token: str | None = None
    allowed_hosts: list[str] = field(default_factory=list)
    """Host names (no port) a request may be addressed to, besides the bound address."""
    cors_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rate_per_second: float = 200.0
    """Requests per second one client address may make on average (0: no limit)."""
    rate_burst: int = 1000

    def hosts(self) -> set[str]:
        names = {h.lower().strip("[]") for h in self.allowed_hosts}
        bound = self.host.strip("[]").lower()
        if is_loopback(bound):
            names.update(LOOPBACK_NAMES)
        elif bound in ("0.0.0.0", "::", ""):
            names.update({socket.gethostname().lower(), socket.getfqdn().lower(), *LOOPBACK_NAMES})
        else:
            names.add(bound)
        return names


def problem_body(status: int, title: str, detail: str) -> bytes:
    return json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()


async def send_problem(
    send: Send, status: int, title: str, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = problem_body(status, title, detail)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


def _host_name(value: str) -> str:
    """The host of a ``Host`` header without its port (``[::1]:8420`` → ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """The checks, in front of ``app``."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = settings.hosts()
        self.token = settings.token.encode() if settings.token else None
        self.buckets: dict[str, _Bucket] = {}
        self.lock = threading.Lock()

    def _allow_rate(self, client: str) -> bool:
        rate = self.settings.rate_per_second
        if rate <= 0:
            return True
        now = time.monotonic()
        with self.lock:
            bucket = self.buckets.get(client)
            if bucket is None:
                if len(self.buckets) > 10_000:  # forget idle clients rather than grow without end
                    self.buckets.clear()
                bucket = self.buckets[client] = _Bucket(float(self.settings.rate_burst), now)
            bucket.tokens = min(float(self.settings.rate_burst), bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            if bucket.tokens < 1:
                return False
            bucket.tokens -= 1
            return True

    def origin_allowed(self, origin: str, scheme: str, host: str) -> bool:
        """Whether a request with this ``Origin`` header, made to ``host`` (the ``Host`` header, already
        checked) over ``scheme``, comes from the server's own origin or one the user listed."""
        return origin in self.settings.cors_origins or _origin_key(origin) == _origin_key(f"{scheme}://{host}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client") or ("?", 0)
        if not self._allow_rate(str(client[0])):
            await send_problem(send, 429, "Too Many Requests", "too many requests; slow down", [(b"retry-after", b"1")])
            return
        if _host_name(headers.get("host", "")) not in self.hosts:
            await send_problem(send, 421, "Misdirected Request", "this server does not answer for that Host")
            return
        origin = headers.get("origin")
        path = str(scope.get("path", ""))
        method = str(scope["method"])
        public = method == "GET" and (path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES))
        if origin is not None and not self.origin_allowed(
            origin, str(scope.get("scheme", "http")), headers.get("host", "")
        ):
            await send_problem(
                send,
                403,
                "Forbidden",
                "requests from that Origin are not accepted: only this server's own pages, or an origin "
                "given to `serve --cors-origin`",
            )
            return
        if origin is None and headers.get("sec-fetch-site") in FOREIGN_FETCH_SITES and not public:
            await send_problem(send, 403, "Forbidden", "requests made by a page of another site are not accepted")
            return
        cors = (
            [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
            if (origin and origin in self.settings.cors_origins)
            else []
        )
        if scope["method"] == "OPTIONS" and cors:
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        *cors,
                        (b"access-control-allow-methods", b"GET, POST, PUT, DELETE, OPTIONS"),
                        (b"access-control-allow-headers", b"authorization, content-type, if-match, mcp-session-id"),
                        (b"access-control-expose-headers", b"etag"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if self.token is not None and not public:
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token):
                await send_problem(
                    send, 401, "Unauthorized", "a valid bearer token is required", [(b"www-authenticate", b"Bearer")]
                )
                return
        if (
            method in CHANGING_METHODS
            and path.startswith(REST_PREFIX)
            and not _typed_or_bodyless_delete(method, headers)
        ):
            await send_problem(
                send, 415, "Unsupported Media Type", f"a {method} request must have Content-Type: application/json"
            )
            return
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not (declared.isascii() and declared.isdigit()) or int(declared) > limit):
            await send_problem(send, 413, "Content Too Large", f"the request body is over {limit} bytes")
            return
        if declared is None and "chunked" in headers.get("transfer-encoding", "").lower():
            buffered = await _read_body(receive, limit)  # no declared length: read it here, within the limit
            if buffered is None:
                await send_problem(send, 413, "Content Too Large", f"the request body is over {limit} bytes")
                return
            receive = _replay(buffered, receive)
        await self.app(scope, _bounded(receive, limit), _with_headers(send, cors))


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    """An origin's (scheme, host, port), the port given its scheme's default; ``None``: not an
    http(s) origin (``null``, a file page, garbage), which is no origin this server has."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return parts.scheme, parts.hostname, port if port is not None else DEFAULT_PORTS[parts.scheme]


def _is_json(headers: dict[str, str]) -> bool:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json"


def _typed_or_bodyless_delete(method: str, headers: dict[str, str]) -> bool:
    """A change says it is JSON, or is a DELETE with no body and no type (``curl -X DELETE``). A
    browser sends a DELETE to another origin only after a preflight, which this server refuses to
    foreign origins, so such a request cannot come from another site's page."""
    if _is_json(headers):
        return True
    bodyless = headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    return method == "DELETE" and bodyless and "content-type" not in headers


class BodyTooLarge(Exception):
    """A body read past the limit (a chunked request without a declared length)."""


async def _read_body(receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, or ``None`` as soon as they pass ``limit`` bytes."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        size += len(message.get("body", b""))
        if size > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def _bounded(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(f"the request body is over {limit} bytes")
        return message

    return wrapped


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    if not extra:
        return send

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped
