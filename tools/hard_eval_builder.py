"""The memories and questions of the hard evaluation as they are made (``tools/make_hard_eval.py``):
one seeded random source, ids in order, a split per group of questions, and the filler notes that
share every word with the rest."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import hard_eval_vocabulary as vocab

PROJECT = "workspace"
START = datetime(2025, 12, 1, tzinfo=UTC)
END = datetime(2026, 6, 30, 18, tzinfo=UTC)
NOW = datetime(2026, 7, 1, 9, tzinfo=UTC)
"""The moment questions are asked unless they state another."""


def stems(text: str) -> set[str]:
    """Content words of ``text``, cut to five letters (a crude stem: "deploys" and "deployment" meet)."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in vocab.STOP and len(w) > 2}


@dataclass
class Builder:
    rng: random.Random = field(default_factory=lambda: random.Random(19))
    memories: list[dict[str, Any]] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    groups: int = 0

    def when(self, low: datetime = START, high: datetime = END) -> datetime:
        seconds = int((high - low).total_seconds())
        return low + timedelta(seconds=self.rng.randrange(max(seconds, 1)))

    def save(self, kind: str, title: str, content: str, at: datetime, tags: tuple[str, ...] = (), **extra: Any) -> str:
        mid = f"H{len(self.memories) + 1:04d}"
        importance = round(self.rng.choice((0.3, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8)), 1)
        self.memories.append(
            {
                "id": mid,
                "project": PROJECT,
                "kind": kind,
                "title": title,
                "content": content,
                "tags": list(tags),
                "importance": importance,
                "created_at": at.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                **extra,
            }
        )
        return mid

    def group(self) -> str:
        """A split for a new group of related questions: ``test`` (held out) or ``dev``, evenly."""
        self.groups += 1
        return "test" if self.rng.random() < 0.5 else "dev"

    def ask(self, category: str, text: str, relevant: list[str], split: str, now: datetime = NOW, **extra: Any) -> None:
        self.queries.append(
            {
                "id": f"HQ{len(self.queries) + 1:04d}",
                "category": category,
                "query": text,
                "relevant": relevant,
                "now": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "split": split,
                **extra,
            }
        )

    def speaker(self) -> str:
        return self.rng.choice(vocab.SPEAKERS)


def ident(rng: random.Random, product: str) -> str:
    verbs = ("reconcile", "sync", "render", "flush", "compact", "refresh", "validate", "enqueue", "resolve", "merge")
    parts = ("batch", "lines", "cursor", "snapshot", "window", "token", "payload", "schedule", "digest", "index")
    return f"{rng.choice(verbs)}_{rng.choice(vocab.PRODUCTS[product]).replace(' ', '_')}_{rng.choice(parts)}"


def filler(b: Builder, count: int) -> None:
    """Stand-up and pairing turns, progress notes and small conventions that share every word."""
    for _ in range(count):
        product = b.rng.choice(list(vocab.PRODUCTS))
        area = b.rng.choice(vocab.PRODUCTS[product])
        noun, noun2 = b.rng.sample(vocab.NOUNS, 2)
        who = b.speaker()
        at = b.when()
        day = at.strftime("%Y-%m-%d")
        shape = b.rng.randrange(6)
        if shape == 0:
            verb = b.rng.choice(vocab.VERBS)
            text = f"{who} (stand-up {day}): {verb} the {area} {noun} in {product}; it {b.rng.choice(vocab.STATES)}."
            b.save("conversation_summary", f"stand-up: {product} {area} {noun}", text, at, (product, "standup"))
        elif shape == 1:
            name = ident(b.rng, product)
            text = (
                f"{who}: while pairing on {product} we {b.rng.choice(vocab.VERBS)} {name}; the {noun} around it "
                f"{b.rng.choice(vocab.STATES)} and the {noun2} path was left alone."
            )
            b.save("conversation_summary", f"pairing notes on {name}", text, at, (product,))
        elif shape == 2:
            text = (
                f"Progress on {product} {area}: the {noun} change {b.rng.choice(vocab.STATES)}, the {noun2} follow-up "
                f"is ticketed as {product[:3].upper()}-{b.rng.randrange(100, 999)}."
            )
            b.save("task", f"{product} {area} progress", text, at, (product, area.replace(" ", "_")))
        elif shape == 3:
            text = (
                f"Convention in {product}: every {noun} in the {area} code gets a {noun2} test next to it; "
                f"{who} will flag the ones that don't in review."
            )
            b.save("convention", f"{product} {area} {noun} tests", text, at, (product, "conventions"))
        elif shape == 4:
            text = (
                f"{who}: the {area} {noun} alert fired again overnight in {product}, "
                f"{b.rng.choice(('false positive', 'real but harmless', 'same as last time', 'under investigation'))}; "
                f"the {noun2} dashboard shows nothing unusual."
            )
            b.save("problem", f"{product} {area} {noun} alert", text, at, (product, "alerts"))
        else:
            text = (
                f"Note for the next agent: in {product}, run the {area} {noun} suite before touching the {noun2}; "
                f"it {b.rng.choice(vocab.STATES)} on main right now ({day})."
            )
            b.save("workflow", f"{product} {area} before {noun2}", text, at, (product,))
