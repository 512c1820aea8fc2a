"""Embedding servers over HTTP: Ollama's ``/api/embed`` and OpenAI-compatible ``/embeddings``."""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np

from eventmem.core.errors import InvalidInput
from eventmem.core.provider_spec import OLLAMA_URL, OPENAI_URL, EmbedderUnavailable, ProviderError, ProviderSpec
from eventmem.embedders.embedder import Vectors, normalize_rows

__all__ = ["OLLAMA_DIMS", "OPENAI_DIMS", "HttpEmbedder", "OllamaEmbedder", "OpenAIEmbedder"]

log = logging.getLogger("eventmem.embedders.providers")

#: Output sizes of common models, so that a spec does not have to give ``dim``.
OLLAMA_DIMS: Final = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
    "bge-m3": 1024,
    "bge-large": 1024,
    "embeddinggemma": 768,
}
OPENAI_DIMS: Final = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


Sleep = Callable[[float], None]


class HttpEmbedder:
    """Shared by the HTTP providers: batching, retries with exponential backoff, clear errors."""

    kind: str = ""
    service: str = ""
    default_batch: int = 32
    max_chars: int = 16000
    """Inputs are clipped to this many characters (a long memory would exceed the model's context)."""

    def __init__(
        self,
        model: str,
        *,
        url: str,
        dim: int,
        batch: int | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.model = model
        self.url = url.rstrip("/")
        self._dim = dim
        self.batch = batch or self.default_batch
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self._loaded = False
        self.requests = 0
        """Requests sent (for tests and benchmarks)."""

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"{self.kind}-{self.model}-{self._dim}"

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def endpoint(self) -> str:
        raise NotImplementedError

    def load(self) -> None:
        """Check that the server answers with vectors of the expected size (one tiny request)."""
        if not self._loaded:
            self._request_batch(["eventmem"])
            self._loaded = True

    def embed(self, texts: list[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = [t[: self.max_chars] or " " for t in texts[start : start + self.batch]]
            out[start : start + len(chunk)] = self._request_batch(chunk)
        if texts:
            self._loaded = True
        return out

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json"}

    def body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, data: Any, count: int) -> list[list[float]]:
        raise NotImplementedError

    def _request_batch(self, texts: list[str]) -> Vectors:
        payload = json.dumps(self.body(texts)).encode("utf-8")
        data = self._post(payload)
        try:
            rows = self.parse(data, len(texts))
            matrix = np.asarray(rows, dtype=np.float32)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ProviderError(f"{self.service} at {self.endpoint} sent an unexpected answer: {exc}") from None
        if matrix.shape != (len(texts), self._dim):
            got = matrix.shape[1] if matrix.ndim == 2 else "?"
            if matrix.ndim == 2 and matrix.shape[0] == len(texts):
                raise ProviderError(
                    f"{self.service} model {self.model!r} gives {got}-dimensional vectors, not {self._dim}: "
                    f"set ?dim={got} in the embedder spec"
                )
            raise ProviderError(f"{self.service} sent {matrix.shape[0]} vectors for {len(texts)} texts")
        if not np.isfinite(matrix).all():
            raise ProviderError(f"{self.service} sent vectors with NaN or infinite values")
        return normalize_rows(matrix)

    def _post(self, payload: bytes) -> Any:
        attempt = 0
        while True:
            attempt += 1
            request = urllib.request.Request(self.endpoint, data=payload, headers=self.headers(), method="POST")
            self.requests += 1
            retry_after: float | None = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
                try:
                    return json.loads(raw)
                except ValueError:
                    raise ProviderError(f"{self.service} at {self.endpoint} did not answer with JSON") from None
            except urllib.error.HTTPError as exc:
                message = _error_message(exc)
                if exc.code not in (408, 429) and exc.code < 500:
                    raise ProviderError(self.client_error(exc.code, message)) from None
                failure = f"HTTP {exc.code}: {message}"
                retry_after = _retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                failure = str(reason)
                if attempt > self.retries:
                    raise EmbedderUnavailable(self.unreachable(failure)) from None
            if attempt > self.retries:
                raise ProviderError(f"{self.service} at {self.endpoint} failed {attempt} times; last: {failure}")
            delay = retry_after if retry_after is not None else self.backoff * 2 ** (attempt - 1)
            log.warning("%s request failed (%s); retrying in %.1fs", self.service, failure, delay)
            self.sleep(min(delay, 30.0))

    def client_error(self, code: int, message: str) -> str:
        return f"{self.service} at {self.endpoint} refused the request (HTTP {code}): {message}"

    def unreachable(self, reason: str) -> str:
        return f"cannot reach {self.service} at {self.url} ({reason})"


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read()
    except OSError:
        return exc.reason or ""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:300] or str(exc.reason)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or data)[:300]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None


def _dim_for(spec: ProviderSpec, table: Mapping[str, int], service: str) -> int:
    if "dim" in spec.options:
        return spec.option_int("dim", 0)
    if "dimensions" in spec.options:
        return spec.option_int("dimensions", 0)
    base = spec.model.split(":", 1)[0].split("/")[-1]
    dim = table.get(base)
    if dim is None:
        raise InvalidInput(
            f"eventmem does not know the vector size of {service} model {spec.model!r}: "
            f"add it to the spec, for example {spec.kind}:{spec.model}?dim=768"
        )
    return dim


class OllamaEmbedder(HttpEmbedder):
    """Ollama's ``POST /api/embed`` (``{"model", "input": [...]}`` → ``{"embeddings": [[...]]}``)."""

    kind = "ollama"
    service = "Ollama"
    default_batch = 32

    @classmethod
    def from_spec(cls, spec: ProviderSpec) -> OllamaEmbedder:
        return cls(
            spec.model,
            url=spec.url or OLLAMA_URL,
            dim=_dim_for(spec, OLLAMA_DIMS, "Ollama"),
            batch=spec.option_int("batch", cls.default_batch),
            timeout=spec.option_float("timeout", 120.0),
            retries=spec.option_int("retries", 3, minimum=0),
            backoff=spec.option_float("backoff", 0.5),
        )

    @property
    def model_id(self) -> str:
        name = self.model if ":" in self.model else self.model + ":latest"
        return f"ollama-{name}-{self._dim}"

    @property
    def endpoint(self) -> str:
        return self.url + "/api/embed"

    def body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts, "truncate": True}

    def parse(self, data: Any, count: int) -> list[list[float]]:
        rows = data["embeddings"]
        if not isinstance(rows, list):
            raise TypeError("'embeddings' is not a list")
        return rows

    def client_error(self, code: int, message: str) -> str:
        if code == 404:
            return f"Ollama has no model {self.model!r} ({message}): run `ollama pull {self.model}`"
        return super().client_error(code, message)

    def unreachable(self, reason: str) -> str:
        return (
            f"cannot reach Ollama at {self.url} ({reason}). Is it running? Start it with `ollama serve` "
            f'(and `ollama pull {self.model}`), or set embedder = "hashing" in .eventmem/config.toml'
        )


class OpenAIEmbedder(HttpEmbedder):
    """``POST {base}/embeddings`` as OpenAI documents it, for OpenAI and compatible servers."""

    kind = "openai"
    service = "the embeddings endpoint"
    default_batch = 128
    max_chars = 24000

    def __init__(
        self,
        model: str,
        *,
        url: str = OPENAI_URL,
        dim: int,
        api_key: str | None = None,
        dimensions: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, url=url, dim=dim, **kwargs)
        self.api_key = api_key
        self.dimensions = dimensions

    @classmethod
    def from_spec(cls, spec: ProviderSpec, environ: Mapping[str, str] | None = None) -> OpenAIEmbedder:
        env = os.environ if environ is None else environ
        key_env = spec.options.get("key_env")
        names = [key_env] if key_env else ["OPENAI_API_KEY", "EVENTMEM_API_KEY"]
        api_key = next((env[n] for n in names if env.get(n, "").strip()), None)
        url = spec.url or OPENAI_URL
        if api_key is None and url == OPENAI_URL:
            raise InvalidInput(f"embedder openai:{spec.model} needs an API key in {' or '.join(names)}")
        dimensions = spec.option_int("dimensions", 0) if "dimensions" in spec.options else None
        return cls(
            spec.model,
            url=url,
            dim=_dim_for(spec, OPENAI_DIMS, "OpenAI-compatible"),
            api_key=api_key,
            dimensions=dimensions,
            batch=spec.option_int("batch", cls.default_batch),
            timeout=spec.option_float("timeout", 60.0),
            retries=spec.option_int("retries", 3, minimum=0),
            backoff=spec.option_float("backoff", 0.5),
        )

    @property
    def endpoint(self) -> str:
        return self.url + "/embeddings"

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    def parse(self, data: Any, count: int) -> list[list[float]]:
        items = sorted(data["data"], key=lambda item: int(item["index"]))
        if [int(item["index"]) for item in items] != list(range(count)):
            raise ValueError("the answer's indexes do not match the inputs")
        return [item["embedding"] for item in items]

    def unreachable(self, reason: str) -> str:
        return f"cannot reach the embeddings endpoint {self.endpoint} ({reason}); check the URL in the embedder spec"
