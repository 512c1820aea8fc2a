"""What the evaluation tools share (``tools/eval.py``, ``tools/eval_hard.py``, ``tools/eval_locomo.py``):
one module that imports none of them, so none imports another to reach it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file (a dataset of the evaluations)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def scores(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    """One question's recall@5, recall@10, hit@10 and reciprocal rank (of the first relevant in the top 10)."""
    first = next((i for i, h in enumerate(ranked[:10]) if h in relevant), None)
    return {
        "r5": len(relevant & set(ranked[:5])) / len(relevant),
        "r10": len(relevant & set(ranked[:10])) / len(relevant),
        "hit10": 0.0 if first is None else 1.0,
        "rr": 0.0 if first is None else 1.0 / (first + 1),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means of :func:`scores` rows (and the p50 of their ``ms`` where they carry one)."""
    if not rows:
        return {"n": 0}
    out: dict[str, Any] = {
        "n": len(rows),
        "recall@5": round(statistics.fmean(r["r5"] for r in rows), 4),
        "recall@10": round(statistics.fmean(r["r10"] for r in rows), 4),
        "hit@10": round(statistics.fmean(r["hit10"] for r in rows), 4),
        "mrr": round(statistics.fmean(r["rr"] for r in rows), 4),
    }
    if all("ms" in r for r in rows):
        out["p50_ms"] = round(statistics.median(r["ms"] for r in rows), 2)
    return out
