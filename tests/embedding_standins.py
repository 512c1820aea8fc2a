"""Local stand-ins for Ollama's and OpenAI's embedding APIs, as their documentation describes them.

- Ollama ``POST /api/embed``: ``{"model": str, "input": str | [str], "truncate"?: bool}`` →
  ``{"model": str, "embeddings": [[float, ...], ...]}``; an unknown model → 404
  ``{"error": "model \\"x\\" not found, try pulling it first"}``.
- OpenAI ``POST /v1/embeddings``: ``{"model": str, "input": str | [str], "encoding_format"?: "float",
  "dimensions"?: int}`` with ``Authorization: Bearer KEY`` → ``{"object": "list", "data": [{"object":
  "embedding", "index": i, "embedding": [...]}], "model": str, "usage": {"prompt_tokens": n,
  "total_tokens": n}}``; errors → ``{"error": {"message": str, "type": str, ...}}``.

The vectors come from any eventmem embedder (the hashing one by default, or the ONNX MiniLM model for
an evaluation of the HTTP path with real semantic vectors). Failures can be scripted: a list of
status codes to answer before the real answers. Binds 127.0.0.1 on an ephemeral port only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eventmem.embedders.embedder import Embedder, HashingEmbedder


@dataclass
class StandIn:
    embedder: Embedder = field(default_factory=lambda: HashingEmbedder(dim=768))
    models: tuple[str, ...] = ("nomic-embed-text", "nomic-embed-text:latest", "text-embedding-3-small")
    api_key: str | None = None
    fail_with: list[int] = field(default_factory=list)
    """Status codes to answer (one per request, in order) before answering normally."""
    retry_after: str | None = None
    shuffle: bool = False
    """OpenAI: return ``data`` in reverse order (clients must sort by ``index``)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def vectors(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed(texts)]


def _handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                self._send(400, {"error": "invalid JSON"})
                return
            with standin.lock:
                standin.requests.append(body)
                standin.headers.append(dict(self.headers.items()))
                failure = standin.fail_with.pop(0) if standin.fail_with else None
            if failure is not None:
                extra = {"Retry-After": standin.retry_after} if standin.retry_after else None
                self._send(
                    failure, {"error": {"message": f"scripted failure {failure}", "type": "server_error"}}, extra
                )
                return
            if self.path == "/api/embed":
                self._ollama(body)
            elif self.path == "/v1/embeddings":
                self._openai(body)
            else:
                self._send(404, {"error": "404 page not found"})

        def _ollama(self, body: dict[str, Any]) -> None:
            model = body.get("model")
            if model not in standin.models:
                self._send(404, {"error": f'model "{model}" not found, try pulling it first'})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self._send(200, {"model": model, "embeddings": standin.vectors(texts)})

        def _openai(self, body: dict[str, Any]) -> None:
            if standin.api_key is not None and self.headers.get("Authorization") != f"Bearer {standin.api_key}":
                self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
                return
            model = body.get("model")
            if model not in standin.models:
                message = f"The model `{model}` does not exist"
                self._send(404, {"error": {"message": message, "type": "invalid_request_error"}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = standin.vectors(texts)
            if "dimensions" in body:
                vectors = [v[: int(body["dimensions"])] for v in vectors]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            if standin.shuffle:
                data.reverse()
            tokens = sum(len(t.split()) for t in texts)
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": model,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

    return Handler


@contextmanager
def serve(standin: StandIn | None = None) -> Iterator[StandIn]:
    """Run a stand-in on 127.0.0.1 (ephemeral port) for the duration of the block."""
    standin = standin or StandIn()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="embedding-standin", daemon=True
    )
    thread.start()
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield standin
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port() -> int:
    """A local port on which nothing listens (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
