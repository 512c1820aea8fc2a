#!/usr/bin/env python
"""Distil static word-piece vectors from all-MiniLM-L6-v2 for the built-in embedder.

The default embedder (``hashing-v2``) adds a small semantic part to its hashed n-gram features: one
vector per word piece of MiniLM's vocabulary, averaged over a text's word pieces (the idea of
model2vec). This script makes those vectors, once, from the int8 ONNX model of the ``onnx`` extra:

1. every one of the 30,522 word pieces goes through the model alone (``[CLS] piece [SEP]``); its
   output vector at the piece's position is kept;
2. the vectors are centred and reduced by PCA to ``--dim`` components;
3. each row is weighted by ``log(1 + id)``: BERT's vocabulary is roughly in order of frequency, so
   this damps frequent pieces the way IDF would (model2vec's Zipf weighting);
4. rows are quantised to int8 with one float32 scale per row.

The result, ``eventmem/data/static-minilm-<dim>.npz`` (about 4 MB for 128 dimensions), is committed:
the embedder itself needs only numpy and the vendored tokenizer.json. Deterministic for a given model
file; run it again only to change the recipe (and then bump the embedder's version).

Usage: python tools/distill_static.py [--dim 128]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eventmem.providers import OnnxEmbedder  # noqa: E402

FIRST_WORD = 1996
"""In BERT's uncased vocabulary the pieces before this id are padding, unused slots and characters."""


def distil(dim: int, batch: int = 1024) -> tuple[np.ndarray, np.ndarray, str]:
    model = OnnxEmbedder("minilm")
    model.load()
    session = model._session
    vocab = model._tokenizer.get_vocab_size()
    out = np.zeros((vocab, model.dim), np.float32)
    started = time.perf_counter()
    for start in range(0, vocab, batch):
        ids = np.arange(start, min(vocab, start + batch))
        inputs = np.stack([np.full(len(ids), 101), ids, np.full(len(ids), 102)], axis=1).astype(np.int64)
        mask = np.ones_like(inputs)
        hidden = session.run(
            None, {"input_ids": inputs, "attention_mask": mask, "token_type_ids": np.zeros_like(inputs)}
        )
        out[start : start + len(ids)] = hidden[0][:, 1, :]
    print(f"embedded {vocab} word pieces in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    centred = out - out[FIRST_WORD:].mean(axis=0)
    _, _, components = np.linalg.svd(centred[FIRST_WORD:], full_matrices=False)
    reduced = centred @ components[:dim].T
    reduced *= np.log1p(np.arange(vocab, dtype=np.float32))[:, None]
    scale = np.abs(reduced).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    quantised = np.round(reduced / scale[:, None]).astype(np.int8)
    digest = hashlib.sha256(model.weights_path().read_bytes()).hexdigest()
    return quantised, scale.astype(np.float32), digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    quantised, scale, digest = distil(args.dim)
    path = ROOT / "eventmem" / "data" / f"static-minilm-{args.dim}.npz"
    np.savez_compressed(path, vectors=quantised, scale=scale, source_sha256=np.array(digest))
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
