#!/usr/bin/env python
"""Distil static word-piece vectors from all-MiniLM-L6-v2 for the built-in embedder.

The built-in embedder (``hashing``) adds a small semantic part to its hashed n-gram features: one
vector per word piece of MiniLM's vocabulary, summed over a text's content word pieces (the idea of
model2vec). This script makes those vectors, once, from the int8 ONNX model of the ``onnx`` extra.

Version 3 (``--recipe v3``, the default; ``eventmem/data/static-minilm-v3-<dim>.npz``), after
model2vec's "tokenlearn":

1. every one of the 30,522 word pieces goes through the model alone (``[CLS] piece [SEP]``); its
   output vector at the piece's position is the piece's prior vector;
2. a corpus of English technical sentences is gathered offline from the docstrings and comments
   (``.py``) and documentation (``.md``, ``.rst``, ``.txt``, package ``METADATA``) of the running
   Python's standard library and installed packages, test folders left out; sentences of 5-60 words
   that are mostly words, deduplicated, ordered by their SHA-256 and the first ``--sentences`` kept;
3. each sentence's MiniLM vector (mean-pooled over its tokens, as sentence-transformers does) is the
   target;
4. the targets are centred and the vectors reduced to their top ``--dim`` principal directions (the
   prior vectors too, with the same centre and directions);
5. a ridge regression by conjugate gradients fits the table so that the mean of a sentence's content
   word pieces (the pieces the embedder itself uses: no stop words, no punctuation) comes close to its
   target, each row pulled towards its prior with weight ``--ridge`` (a piece the corpus lacks keeps
   its prior); the fit itself learns how much a frequent, vague piece should count;
6. rows are quantised to int8 with one float32 scale per row.

Version 2 (``--recipe v2``, ``static-minilm-<dim>.npz``) was step 1, the principal directions of the
piece vectors themselves, and a weight of ``log(1 + id)`` per row (BERT's vocabulary is roughly in
order of frequency, so this damps frequent pieces the way IDF would) before step 6.

The table is committed (about 4 MB for 128 dimensions): the embedder itself needs only numpy and the
vendored tokenizer.json. The result is deterministic for a given model file, Python and set of
installed packages; the file records the model's and the corpus's SHA-256. Embedding the corpus takes
about ten CPU-minutes. Run it again only to change the recipe (and then bump the embedder's version).

Usage: python tools/distill_static.py [--recipe v3] [--dim 128] [--sentences 100000] [--ridge 3.0]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import re
import sys
import sysconfig
import time
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eventmem.embedders.embedder import WordPiece  # noqa: E402
from eventmem.embedders.providers import OnnxEmbedder  # noqa: E402

FIRST_WORD = 1996
"""In BERT's uncased vocabulary the pieces before this id are padding, unused slots and characters."""


def log(message: str) -> None:
    print(f"[distill_static {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- 1. the pieces alone -------------------------------------------------------------------------


def piece_vectors(model: OnnxEmbedder, batch: int = 1024) -> np.ndarray:
    """MiniLM's output for every word piece of its vocabulary, each alone between [CLS] and [SEP]."""
    vocab = model._tokenizer.get_vocab_size()
    out = np.zeros((vocab, model.dim), np.float32)
    started = time.perf_counter()
    for start in range(0, vocab, batch):
        ids = np.arange(start, min(vocab, start + batch))
        inputs = np.stack([np.full(len(ids), 101), ids, np.full(len(ids), 102)], axis=1).astype(np.int64)
        mask = np.ones_like(inputs)
        hidden = model._session.run(
            None, {"input_ids": inputs, "attention_mask": mask, "token_type_ids": np.zeros_like(inputs)}
        )
        out[start : start + len(ids)] = hidden[0][:, 1, :]
    log(f"embedded {vocab} word pieces in {time.perf_counter() - started:.1f}s")
    return out


# -- 2. the corpus -------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_SKIP_DIRS = frozenset({"test", "tests", "__pycache__", "idlelib", "lib2to3", "site-packages", "dist-packages"})
_SKIP_PREFIXES = (">>>", "...", ".. ", "$ ", "```")
_COMMENT_NOISE = ("!", "-*-", "type:", "noqa", "pragma", "fmt:", "pylint")


def _clean(paragraph: str) -> str:
    paragraph = re.sub(r"`+([^`]*)`+", r"\1", paragraph)  # code marks
    paragraph = re.sub(r":\w+:(?=\S)", "", paragraph)  # reST roles such as :func:
    paragraph = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", paragraph)  # Markdown links
    paragraph = re.sub(r"https?://\S+", "", paragraph)
    paragraph = re.sub(r"[*#>|=~^_]{2,}", " ", paragraph)
    return " ".join(paragraph.split())


def _is_prose(sentence: str) -> bool:
    words = sentence.split()
    if not 5 <= len(words) <= 60 or not sentence[0].isupper():
        return False
    if sum(1 for w in words if _WORD.fullmatch(w.strip(".,;:()!?\"'"))) < 0.7 * len(words):
        return False
    return sentence.count("(") <= 4 and sentence.count("=") <= 1 and "{" not in sentence and ">>>" not in sentence


def _paragraphs(text: str) -> Iterator[str]:
    current: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(_SKIP_PREFIXES):
            if current:
                yield " ".join(current)
                current = []
            continue
        if set(stripped) <= set("-=~^*#+`"):  # reST and Markdown rules and underlines
            if current:
                yield " ".join(current)
                current = []
            continue
        current.append(stripped)
    if current:
        yield " ".join(current)


def _python_text(source: str) -> Iterator[str]:
    """The docstrings' paragraphs and the comments (consecutive comment lines joined) of a module."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield from _paragraphs(doc)
    comment: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                text = token.string.lstrip("#").strip()
                if text and not text.startswith(_COMMENT_NOISE):
                    comment.append(text)
                    continue
            if token.type in (tokenize.NL, tokenize.NEWLINE) and comment and token.line.strip().startswith("#"):
                continue
            if comment:
                yield " ".join(comment)
                comment = []
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return


def corpus_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    roots = [Path(paths[k]) for k in ("stdlib", "purelib", "platlib")]
    return sorted({r.resolve() for r in roots if r.is_dir()})


def corpus(roots: list[Path]) -> list[str]:
    """Every distinct prose sentence of the files under ``roots``: test folders, the interpreter's own
    site-packages under the standard library, and eventmem itself are left out."""
    seen: set[str] = set()
    out: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            parts = path.relative_to(root).parts
            if _SKIP_DIRS & set(parts[:-1]) or parts[0].startswith(("eventmem", "__editable__")):
                continue
            if not (path.suffix in (".py", ".md", ".rst", ".txt") or path.name == "METADATA") or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for paragraph in _python_text(text) if path.suffix == ".py" else _paragraphs(text):
                for sentence in _SENTENCE_END.split(_clean(paragraph)):
                    key = sentence.lower()
                    if _is_prose(sentence) and key not in seen:
                        seen.add(key)
                        out.append(sentence)
    return out


# -- 3. the targets ------------------------------------------------------------------------------


def sentence_vectors(model: OnnxEmbedder, sentences: list[str], batch: int = 64) -> np.ndarray:
    """MiniLM's mean-pooled (not normalised) vector of each sentence, batches sorted by length."""
    tokenizer = model._tokenizer
    tokenizer.no_padding()
    tokenizer.enable_truncation(128)
    encoded = [e.ids for e in tokenizer.encode_batch(sentences)]
    order = np.argsort([len(ids) for ids in encoded], kind="stable")
    out = np.zeros((len(sentences), model.dim), np.float32)
    started = time.perf_counter()
    for start in range(0, len(sentences), batch):
        rows = order[start : start + batch]
        width = max(len(encoded[i]) for i in rows)
        ids = np.zeros((len(rows), width), np.int64)
        mask = np.zeros_like(ids)
        for r, i in enumerate(rows):
            ids[r, : len(encoded[i])] = encoded[i]
            mask[r, : len(encoded[i])] = 1
        hidden = model._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
        out[rows] = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        if start and start % (batch * 200) == 0:
            log(f"  {start} sentences, {time.perf_counter() - started:.0f}s")
    log(f"embedded {len(sentences)} sentences in {time.perf_counter() - started:.0f}s")
    return out


# -- 5. the fit ----------------------------------------------------------------------------------


class Design:
    """The sparse matrix X (sentences x pieces) whose rows average a sentence's content pieces."""

    def __init__(self, sentences: list[str], vocab: int) -> None:
        pieces = WordPiece()
        rows = [pieces.content_ids(s) for s in sentences]
        self.keep = np.array([bool(r) for r in rows])
        rows = [r for r in rows if r]
        lengths = np.array([len(r) for r in rows])
        self.vocab = vocab
        self.rows = len(rows)
        self.piece = np.concatenate([np.array(r, np.int64) for r in rows])
        self.sentence = np.repeat(np.arange(len(rows)), lengths)
        self.weight = np.repeat(1.0 / lengths, lengths).astype(np.float32)
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.by_piece = np.argsort(self.piece, kind="stable")
        self.pieces, self.piece_starts = np.unique(self.piece[self.by_piece], return_index=True)

    def times(self, table: np.ndarray) -> np.ndarray:
        """X @ table."""
        return np.add.reduceat(table[self.piece] * self.weight[:, None], self.starts, axis=0)  # type: ignore[no-any-return]

    def transposed_times(self, values: np.ndarray) -> np.ndarray:
        """(X.T @ values) on the rows of the pieces that occur (``self.pieces``)."""
        order = self.by_piece
        gathered = values[self.sentence[order]] * self.weight[order, None]
        return np.add.reduceat(gathered, self.piece_starts, axis=0)  # type: ignore[no-any-return]


def ridge_fit(design: Design, targets: np.ndarray, prior: np.ndarray, ridge: float, iterations: int) -> np.ndarray:
    """argmin_T |X T - Y|^2 + ridge |T - prior|^2 by conjugate gradients, one step size per column;
    rows of pieces that never occur stay at their prior."""
    occurring = design.pieces

    def full(delta: np.ndarray) -> np.ndarray:
        out = np.zeros((design.vocab, delta.shape[1]), np.float32)
        out[occurring] = delta
        return out

    def normal(delta: np.ndarray) -> np.ndarray:
        return design.transposed_times(design.times(full(delta))) + ridge * delta

    rhs = design.transposed_times(targets - design.times(prior))
    delta = np.zeros_like(rhs)
    residual = rhs.copy()
    direction = residual.copy()
    size = (residual * residual).sum(axis=0)
    start = float(np.sqrt(size.sum()))
    for step in range(iterations):
        product = normal(direction)
        curvature = (direction * product).sum(axis=0)
        alpha = np.divide(size, curvature, out=np.zeros_like(size), where=curvature > 0)
        delta += direction * alpha
        residual -= product * alpha
        new_size = (residual * residual).sum(axis=0)
        beta = np.divide(new_size, size, out=np.zeros_like(size), where=size > 0)
        direction = residual + direction * beta
        size = new_size
        if step % 5 == 4:
            log(f"  conjugate gradients step {step + 1}: relative residual {np.sqrt(size.sum()) / start:.4f}")
    table = prior.copy()
    table[occurring] += delta
    return table


# -- the recipes ---------------------------------------------------------------------------------


def principal_directions(vectors: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    centre = vectors.mean(axis=0)
    _, _, components = np.linalg.svd(vectors - centre, full_matrices=False)
    return centre, components[:dim].T


def distil_v2(pieces: np.ndarray, dim: int) -> np.ndarray:
    centre, directions = principal_directions(pieces[FIRST_WORD:], dim)
    return (pieces - centre) @ directions  # type: ignore[no-any-return]


def distil_v3(
    model: OnnxEmbedder, pieces: np.ndarray, dim: int, sentences: int, ridge: float, iterations: int
) -> tuple[np.ndarray, dict[str, Any]]:
    roots = corpus_roots()
    text = corpus(roots)
    text = sorted(text, key=lambda s: hashlib.sha256(s.encode()).hexdigest())[:sentences]
    digest = hashlib.sha256("\n".join(text).encode()).hexdigest()
    log(f"corpus: {len(text)} sentences (sha256 {digest[:16]}) from {len(roots)} folders")
    targets = sentence_vectors(model, text)
    centre, directions = principal_directions(targets, dim)
    design = Design(text, len(pieces))
    log(f"fitting {len(design.pieces)} pieces that occur, ridge {ridge}")
    table = ridge_fit(
        design, (targets[design.keep] - centre) @ directions, (pieces - centre) @ directions, ridge, iterations
    )
    info = {"corpus_sha256": digest, "sentences": len(text), "ridge": ridge, "iterations": iterations}
    return table, info


def quantise(table: np.ndarray, *, frequency_weight: bool) -> tuple[np.ndarray, np.ndarray]:
    weighted = table * np.log1p(np.arange(len(table), dtype=np.float32))[:, None] if frequency_weight else table
    scale = np.abs(weighted).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.round(weighted / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", choices=("v2", "v3"), default="v3")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--sentences", type=int, default=100_000, help="corpus sentences to fit on (v3)")
    parser.add_argument("--ridge", type=float, default=3.0, help="pull of each row towards its prior (v3)")
    parser.add_argument("--iterations", type=int, default=25, help="conjugate gradient steps (v3)")
    parser.add_argument("--out", type=Path, help="default: eventmem/data/static-minilm[-v3]-DIM.npz")
    args = parser.parse_args()
    model = OnnxEmbedder("minilm")
    model.load()
    pieces = piece_vectors(model)
    extra: dict[str, Any] = {}
    if args.recipe == "v2":
        table = distil_v2(pieces, args.dim)
        name = f"static-minilm-{args.dim}.npz"
    else:
        table, extra = distil_v3(model, pieces, args.dim, args.sentences, args.ridge, args.iterations)
        name = f"static-minilm-v3-{args.dim}.npz"
    quantised, scale = quantise(table, frequency_weight=args.recipe == "v2")
    digest = hashlib.sha256(model.weights_path().read_bytes()).hexdigest()
    path = args.out or ROOT / "eventmem" / "data" / name
    np.savez(  # not compressed: int8 rows hardly compress, and a plain read loads 10x faster
        path,
        vectors=quantised,
        scale=scale,
        source_sha256=np.array(digest),
        **{k: np.array(v) for k, v in extra.items()},
    )
    log(f"wrote {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
