"""A public conversational benchmark through eventmem's own MCP tools: ``python tools/eval.py --locomo PATH``.

The file is a LoCoMo conversation set (Maharana et al., ACL 2024; CC BY-NC 4.0) in its original
format; it is read from where it lies and never copied into the project. For each conversation and
each configuration, a new project in a temporary git repository is served by the MCP server
(in process, the same tools an agent calls) and every dialog turn is saved with ``save_context``,
in dialog order, as ``"[<session date>] <speaker>: <text>"`` (a photo's caption appended as
``[shares a photo: <caption>]``). Once a model embedder has embedded every turn (its answers no
longer say "keyword matches only"), each question of categories 1-4 is asked with
``retrieve_context(query, limit=10)`` (``keyword``: ``search_memories(query, mode="keyword",
limit=10)``); a hit counts when its id is one of the question's evidence turns.

Reported per configuration, overall and per category (multi-hop, temporal, open-domain,
single-hop): recall@5, recall@10 (evidence turns found / evidence turns), hit@10 (a question with
at least one evidence turn in the top 10), MRR (within the top 10), and the p50 time of one tool
call as the client sees it. ``misses`` keeps, per configuration, the questions whose evidence is
not in the top 5 (for reading, with ``--misses``; they quote the data set, so they are printed,
never written into the project).
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from eval_common import scores, summary
from mcp import Client

from eventmem.adapters.mcp.server import build_server
from eventmem.journal.project import RootChoice
from eventmem.service import open_service

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories that have an answer in the dialog (5, adversarial, has none)."""
READY_SECONDS = 900.0


@dataclass(frozen=True)
class Configuration:
    name: str
    embedder: str
    keyword_only: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    """Further ``EVENTMEM_*`` variables for the server (none by default)."""


def configurations(embedders: list[str]) -> list[Configuration]:
    """``keyword``, then the default (``hashing``) and each model embedder through ``retrieve_context``."""
    return [
        Configuration("keyword", "hashing", keyword_only=True),
        *(
            Configuration("default (hashing)" if embedder == "hashing" else embedder, embedder)
            for embedder in embedders
        ),
    ]


def turns(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dia_id, text)`` of every turn of a conversation, in dialog order."""
    conversation = sample["conversation"]
    sessions = sorted(
        (int(key.split("_")[1]), key)
        for key, value in conversation.items()
        if key.startswith("session_") and not key.endswith("date_time") and isinstance(value, list)
    )
    out: list[tuple[str, str]] = []
    for _, key in sessions:
        date = conversation.get(f"{key}_date_time", "")
        for turn in conversation[key]:
            text = f"[{date}] {turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            out.append((turn["dia_id"], text))
    return out


def questions(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions of categories 1-4 that name at least one evidence turn."""
    return [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]


def load(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(isinstance(s, dict) and "conversation" in s for s in data):
        raise SystemExit(f"{path}: not a LoCoMo conversation list")
    return data


@contextlib.contextmanager
def project() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="eventmem-locomo-") as tmp:
        root = Path(tmp) / "conversation"
        root.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        yield root, Path(tmp) / "global"


def _structured(result: Any) -> dict[str, Any]:
    if result.is_error:
        raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content))
    content: dict[str, Any] = result.structured_content or {}
    return content


async def _conversation(sample: dict[str, Any], setting: Configuration) -> tuple[list[dict[str, Any]], float]:
    """Save the conversation, wait for the vectors, ask its questions: one row per question."""
    with project() as (root, global_dir):
        environ = {
            "EVENTMEM_GLOBAL_DIR": str(global_dir),
            "EVENTMEM_DURABILITY": "flush",
            "EVENTMEM_EMBEDDER": setting.embedder,
            **setting.settings,
        }
        opener = functools.partial(open_service, environ=environ, background_vectors=True)
        server = build_server(RootChoice(root, "eval"), opener=opener, tools="context,memory")
        async with Client(server) as client:
            ids: dict[str, str] = {}
            for dia_id, text in turns(sample):
                saved = _structured(await client.call_tool("save_context", {"context_text": text}))
                ids[saved["id"]] = dia_id
            started = time.perf_counter()
            while not setting.keyword_only:
                answer = _structured(await client.call_tool("retrieve_context", {"query": "ready?", "limit": 1}))
                if not any("keyword matches only" in w for w in answer.get("warnings", [])):
                    break
                if time.perf_counter() - started > READY_SECONDS:
                    raise RuntimeError(f"{setting.embedder} did not embed the conversation in {READY_SECONDS} s")
                await anyio.sleep(0.2)
            waited = time.perf_counter() - started
            rows = []
            for question in questions(sample):
                asked = time.perf_counter()
                if setting.keyword_only:
                    arguments = {"query": question["question"], "mode": "keyword", "limit": 10}
                    answer = _structured(await client.call_tool("search_memories", arguments))
                else:
                    arguments = {"query": question["question"], "limit": 10}
                    answer = _structured(await client.call_tool("retrieve_context", arguments))
                elapsed = (time.perf_counter() - asked) * 1000
                ranked = [ids.get(r["id"], "?") for r in answer["results"]]
                relevant = set(question["evidence"])
                rows.append(
                    {
                        **scores(ranked, relevant),
                        "ms": elapsed,
                        "category": CATEGORIES[question["category"]],
                        "conversation": sample.get("sample_id", "?"),
                        "question": question["question"],
                        "evidence": sorted(relevant),
                        "top5": ranked[:5],
                    }
                )
    return rows, waited


def evaluate(data: list[dict[str, Any]], setting: Configuration) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    waits: list[float] = []
    for sample in data:
        found, waited = anyio.run(_conversation, sample, setting)
        rows += found
        waits.append(waited)
    return {
        "setting": setting.name,
        "embedder": setting.embedder,
        **summary(rows),
        "by_category": {c: summary([r for r in rows if r["category"] == c]) for c in CATEGORIES.values()},
        "vectors_ready_seconds": round(sum(waits), 2),
        "misses": [
            {k: r[k] for k in ("conversation", "category", "question", "evidence", "top5")} for r in rows if r["r5"] < 1
        ],
    }


def run(path: Path, embedders: list[str], *, keyword: bool = True) -> dict[str, Any]:
    data = load(path)
    results = [evaluate(data, setting) for setting in configurations(embedders) if keyword or not setting.keyword_only]
    return {
        "conversations": [s.get("sample_id", "?") for s in data],
        "turns": sum(len(turns(s)) for s in data),
        "questions": sum(len(questions(s)) for s in data),
        "results": results,
    }


def table(report: dict[str, Any]) -> str:
    cats = list(CATEGORIES.values())
    lines = [
        "| configuration | " + " | ".join(cats) + " | recall@5 | recall@10 | hit@10 | MRR | p50 ms |",
        "|---|" + "---:|" * (len(cats) + 5),
    ]
    for row in report["results"]:
        cells = " | ".join(f"{row['by_category'][c].get('recall@5', 0):.3f}" for c in cats)
        lines.append(
            f"| {row['setting']} | {cells} | {row['recall@5']:.3f} | {row['recall@10']:.3f} | "
            f"{row['hit@10']:.3f} | {row['mrr']:.3f} | {row['p50_ms']:.1f} |"
        )
    return "\n".join(lines)


def without_misses(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the questions it quotes (what may be written down)."""
    return report | {"results": [{k: v for k, v in r.items() if k != "misses"} for r in report["results"]]}
