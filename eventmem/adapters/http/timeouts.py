"""A bound on how long a client may take to send one request: uvicorn's HTTP/1.1 protocol with a deadline.

uvicorn closes a connection idle between two requests (its keep-alive timeout) but waits without end
for a request that arrives slowly: a client that opens a connection and sends nothing, or sends its
headers a byte at a time, holds a connection (and its memory) as long as it likes, and a few hundred
such clients hold them all. Here a request must arrive whole, head and body, within ``request_timeout``
seconds of its first byte (of the connection, for the first one); a client that takes longer is
disconnected. A response, however long it streams (``/mcp``, the change stream), is not bounded.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "bounded_protocol"]

DEFAULT_REQUEST_TIMEOUT = 20.0
"""Seconds a client has to send one request whole (a 2 MiB body needs 100 KB/s)."""
_RECEIVING = (h11.IDLE, h11.SEND_BODY)
"""The client's states while a request is still on its way (``IDLE`` once its first bytes came)."""


def bounded_protocol(request_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, each request bounded by ``request_timeout`` seconds."""

    class BoundedProtocol(H11Protocol):
        deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                self._disarm()
            elif self.conn.their_state in _RECEIVING:
                self._arm()  # (a request under way keeps the deadline of its first byte)
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self.deadline is None:
                self.deadline = self.loop.call_later(request_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _too_slow(self) -> None:
            self.deadline = None
            if self.conn.their_state in _RECEIVING and not self.transport.is_closing():
                self.logger.info("closing a connection whose request took over %s s to arrive", request_timeout)
                self.transport.close()

    return BoundedProtocol
