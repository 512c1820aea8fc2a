"""The embedder spec string of the config (``kind[:model][@url][?option=value&...]``), parsed, and the
errors every embedding provider raises. The spec syntax is described in :mod:`eventmem.embedders.providers`."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from eventmem.core.errors import EventmemError, InvalidInput
from eventmem.core.extras import require

__all__ = [
    "KINDS",
    "OLLAMA_URL",
    "OPENAI_URL",
    "OPTIONS",
    "OPTION_CEILINGS",
    "EmbedderUnavailable",
    "ProviderError",
    "ProviderSpec",
    "parse_spec",
    "require_extra",
]

OLLAMA_URL: Final = "http://127.0.0.1:11434"
OPENAI_URL: Final = "https://api.openai.com/v1"


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
        if value > OPTION_CEILINGS.get(name, value):
            raise InvalidInput(f"embedder option {name}={raw!r} must be at most {OPTION_CEILINGS[name]:g}")
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
        if value > OPTION_CEILINGS.get(name, value):
            raise InvalidInput(f"embedder option {name}={raw!r} must be at most {OPTION_CEILINGS[name]:g}")
        return value

    def check_numbers(self) -> None:
        """Raise :class:`InvalidInput` for a numeric option out of its range (each is read the same way
        when the embedder is made)."""
        for name in self.options.keys() & OPTION_CEILINGS.keys():
            if name in ("timeout", "backoff"):
                self.option_float(name, 1.0)
            else:
                self.option_int(name, 1, minimum=0 if name in ("retries", "dim", "dimensions") else 1)


OPTION_CEILINGS: Final[dict[str, float]] = {
    "dim": 16_384,
    "dimensions": 16_384,
    "batch": 4_096,
    "threads": 256,
    "timeout": 3_600,
    "retries": 20,
    "backoff": 60,
}
"""The largest value of each numeric embedder option (its floor is where it is read)."""
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


ONNX_LIBRARIES: Final = ("onnxruntime", "tokenizers")
"""What a model file of one's own (``onnx:/path/model.onnx``) needs of the onnx extra (not its weights)."""


def require_extra(spec: ProviderSpec) -> None:
    """Raise :class:`~eventmem.core.errors.MissingExtra` (one line naming the extra to install) unless
    what the provider of ``spec`` imports is installed. The HTTP providers need nothing beyond a bare
    install (they speak HTTP with the standard library)."""
    if spec.kind == "onnx":
        model = spec.model or "minilm"
        own_file = model.endswith(".onnx")
        require("onnx", f"the embedder onnx:{'…' if own_file else model}", ONNX_LIBRARIES if own_file else None)
