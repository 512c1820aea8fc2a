#!/usr/bin/env python
"""Writes the hard retrieval evaluation: ``tests/eval/hard/memories.jsonl`` and ``queries.jsonl``.

Deterministic (one seeded ``random.Random``, no network, no model): running it again writes the
same files. The memories are what coding agents and their people leave in a shared project memory
over seven months (December 2025 to June 2026) of four software products worked on in one
repository: stand-up and pairing turns by several speakers, decisions that get replaced, errors
with their exact text and their fixes, identifiers (functions, config keys, tickets), conventions,
and many notes that share vocabulary with the ones a question is about. Each question names the
memories that answer it (``relevant``), a ``category``, the moment it is asked (``now``), and a
``split``: ``dev`` to tune on, ``test`` held out (whole groups of related questions go to one
side, so a concept tuned on never answers a held-out question).

Categories:

- ``identifier``: a function, config key, ticket id or the exact text of an error, among notes
  naming near-identical ones;
- ``paraphrase``: a question sharing no content word (nor word stem) with its memory, written
  from hand-made pairs of phrasings, beside notes that do share its words;
- ``multi_hop``: the answer needs two memories (a service's owning team, then that team's pager
  channel; a ticket's flag, then the flag's rollout…); both are relevant;
- ``temporal``: a topic noted many times in the same words, asked "in May", "last week",
  "yesterday", "on 2026-03-14", "before the migration": only the note of that time is relevant;
- ``superseded``: a decision replaced by a later one, linked with ``supersedes`` (the old one must
  never be returned) or not linked (``stale`` lists it: the current one must rank above it);
- ``distractor``: one customer's issue among many notes about the same customers and issues.

The phrasings are in ``tools/hard_eval_vocabulary.py``, the id, date and split bookkeeping and the
filler notes in ``tools/hard_eval_builder.py``.

Usage::

    python tools/make_hard_eval.py            # writes tests/eval/hard/
    python tools/make_hard_eval.py --out DIR  # elsewhere
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import hard_eval_vocabulary as vocab
from hard_eval_builder import END, START, Builder, filler, ident, stems

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "eval" / "hard"


def identifiers(b: Builder) -> None:
    """Functions, config keys and tickets with near-twins, and errors with their exact text."""
    used: set[str] = set()
    for product in vocab.PRODUCTS:
        for _ in range(9):
            name = ident(b.rng, product)
            while name in used:
                name = ident(b.rng, product)
            used.add(name)
            twin = name.rsplit("_", 1)[0] + "_" + b.rng.choice(("v2", "async", "legacy", "all"))
            what = b.rng.choice(("double-counts", "skips", "holds a lock on", "re-sends", "drops"))
            noun = b.rng.choice(vocab.NOUNS)
            at = b.when()
            split = b.group()
            answer = b.save(
                "fix",
                f"{name} {what} rows on retry",
                f"{b.speaker()}: found it — {name} in {product} {what} the last {noun} when the worker is retried; "
                f"fixed by making it idempotent on the {noun} id.",
                at,
                (product, "bugs"),
            )
            b.save(
                "code_pattern",
                f"{twin} usage",
                f"{twin} is the {product} helper to call from handlers; it wraps the {noun} in a transaction "
                f"and never retries on its own.",
                b.when(),
                (product,),
            )
            b.ask("identifier", f"what was wrong with {name} on retry?", [answer], split)
            area = b.rng.choice(vocab.PRODUCTS[product]).replace(" ", "_")
            noun = b.rng.choice(vocab.NOUNS)
            setting = b.rng.choice(("ttl_seconds", "max_attempts", "batch_size", "enabled", "timeout_ms"))
            key = f"{product}.{area}.{noun}_{setting}"
            if key in used:
                continue
            used.add(key)
            value = b.rng.choice(("30", "5", "500", "false", "2500", "120"))
            answer = b.save(
                "decision",
                f"setting for {key}",
                f"We set {key} = {value} in config/production.toml after the load test; lower values made the "
                f"{b.rng.choice(vocab.NOUNS)} back up.",
                b.when(),
                (product, "config"),
            )
            b.ask("identifier", f"what value does {key} have in production and why", [answer], split)
    for index, (kind, template, slot) in enumerate(vocab.ERRORS):
        for product in b.rng.sample(list(vocab.PRODUCTS), 3):
            area = b.rng.choice(vocab.PRODUCTS[product]).replace(" ", "_")
            filled = slot.format(a=area, A=area.title().replace("_", ""))
            message = template.format(c=filled, n=b.rng.choice((5, 10, 20)))
            split = b.group()
            error = b.save(
                "error",
                f"{kind} in {product} {area}",
                f"{b.speaker()} hit this in {product} ({area}):\n{kind}: {message}\nSeen on "
                f"{b.rng.choice(('staging', 'CI', 'production', 'a laptop'))}.",
                b.when(),
                (product, "errors"),
            )
            fix = b.save(
                "solution",
                f"fix for the {product} {area} {kind.rsplit('.', 1)[-1]}",
                f"{b.speaker()}: the {kind.rsplit('.', 1)[-1]} in {product} {area} is gone: we {vocab.FIXES[index]}.",
                b.when(),
                (product, "errors"),
            )
            cut = message.split(" ")
            quoted = " ".join(cut[: max(4, len(cut) * 2 // 3)])
            b.ask("identifier", f"{kind}: {quoted}", [error, fix], split)
            ticket = f"{product[:3].upper()}-{b.rng.randrange(1000, 9999)}"
            answer = b.save(
                "task",
                f"{ticket}",
                f"{ticket}: {b.rng.choice(vocab.VERBS)} the {area.replace('_', ' ')} "
                f"{b.rng.choice(vocab.NOUNS)} in {product}; "
                f"{b.speaker()} owns it, estimate {b.rng.randrange(1, 8)} days.",
                b.when(),
                (product, "tickets"),
            )
            b.ask("identifier", f"who owns {ticket}?", [answer], b.group())


def paraphrases(b: Builder) -> None:
    """Questions sharing no content word with their memory, beside notes that share the question's."""
    for memory, *questions in vocab.PARAPHRASES:
        for question in questions:
            shared = stems(memory) & stems(question)
            if shared:
                raise SystemExit(f"paraphrase shares {sorted(shared)}: {question!r}")
        product = b.rng.choice(list(vocab.PRODUCTS))
        who = b.speaker()
        answer = b.save(
            b.rng.choice(("decision", "convention", "general")),
            memory.split(";")[0].split(",")[0][:70],
            f"{who}: {memory}",
            b.when(),
            (product,),
        )
        split = b.group()
        for question in questions:
            words = sorted(w for w in re.findall(r"[a-z]+", question.lower()) if w not in vocab.STOP and len(w) > 3)
            for template in b.rng.sample(vocab.TRAPS, 2):
                w1, w2 = b.rng.sample(words, 2) if len(words) >= 2 else (words[0], words[0])
                text = template.format(who=b.speaker(), w1=w1, w2=w2, product=b.rng.choice(list(vocab.PRODUCTS)))
                b.save("general", f"{w1} {w2}", text, b.when(), ())
            b.ask("paraphrase", question, [answer], split)


def multi_hop(b: Builder) -> None:
    """Two memories per answer: the first names a thing the second describes."""
    channel = {t: f"#{t.split()[0][:6]}-oncall" for t in vocab.TEAMS}
    window = {t: b.rng.choice(("Tuesdays and Thursdays 10:00-12:00 UTC", "any weekday before 15:00 UTC",
                               "only after the Monday change board", "Wednesdays after the freeze lifts"))
              for t in vocab.TEAMS}  # fmt: skip
    team_notes: dict[str, list[str]] = {}
    for team in vocab.TEAMS:
        lead = b.rng.choice(vocab.PEOPLE)
        team_notes[team] = [
            b.save(
                "workflow",
                f"{team} on-call",
                f"The {team} takes pages through {channel[team]}; escalate to {lead} "
                "if nobody acknowledges in 30 minutes.",
                b.when(),
                ("oncall",),
            ),
            b.save(
                "convention",
                f"{team} release window",
                f"Releases owned by the {team} go out {window[team]}; anything else needs a written exception.",
                b.when(),
                ("releases",),
            ),
        ]
    for service in vocab.SERVICES:
        team = b.rng.choice(vocab.TEAMS)
        split = b.group()
        owner = b.save(
            "general",
            f"{service} ownership",
            f"{b.speaker()}: after the reorg, {service} belongs to the {team}; the old owners only advise.",
            b.when(),
            ("ownership",),
        )
        b.ask("multi_hop", f"which channel do I page when {service} is down?", [owner, team_notes[team][0]], split)
        b.ask("multi_hop", f"when am I allowed to ship a change to {service}?", [owner, team_notes[team][1]], split)
    owners: dict[str, str] = {}
    for product in vocab.PRODUCTS:
        for _ in range(6):
            ticket = f"{product[:3].upper()}-{b.rng.randrange(1000, 9999)}"
            area = b.rng.choice(vocab.PRODUCTS[product]).replace(" ", "_")
            variant = b.rng.choice(("v2", "beta", "rework", "fast_path", "new_ui"))
            flag = f"ff_{area}_{variant}_{b.rng.randrange(10, 99)}"
            split = b.group()
            first = b.save(
                "task",
                f"{ticket} rollout plan",
                f"{ticket} ships dark behind {flag}; {b.speaker()} will ramp it after QA signs off.",
                b.when(),
                (product, "flags"),
            )
            percent = b.rng.choice((1, 5, 10, 25, 50, 100))
            second = b.save(
                "recent_change",
                f"{flag} ramp",
                f"{flag} is now on for {percent}% of organizations; error rate flat, next step in a week.",
                b.when(),
                (product, "flags"),
            )
            b.ask("multi_hop", f"how far along is the rollout for {ticket}?", [first, second], split)
            function = ident(b.rng, product)
            folder = f"{product}/{b.rng.choice(vocab.PRODUCTS[product]).replace(' ', '_')}"
            reviewer = b.rng.choice(vocab.PEOPLE)
            split = b.group()
            first = b.save(
                "code_pattern",
                f"where {function} lives",
                f"{function} is defined in {folder}/core.py and called from the nightly job only.",
                b.when(),
                (product,),
            )
            if folder not in owners:
                owners[folder] = b.save(
                    "convention",
                    f"CODEOWNERS for {folder}",
                    f"CODEOWNERS: {folder}/ requires a review from {reviewer}; agents must request it explicitly.",
                    b.when(),
                    (product, "review"),
                )
            b.ask("multi_hop", f"whose review do I need to change {function}?", [first, owners[folder]], split)


def temporal(b: Builder) -> None:
    """A topic noted every ten days or so in the same words; questions pick notes by their time."""
    for topic, options in vocab.TOPICS:
        notes: list[tuple[datetime, str]] = []
        migrated = b.rng.randrange(8, 18)  # the index of the note that reports the migration
        for index in range(21):
            at = b.when(START + timedelta(days=index * 10 + 1), START + timedelta(days=index * 10 + 8))
            option = b.rng.choice(options)
            who = b.speaker()
            if index == migrated:
                text = (
                    f"{who}: the {topic} migration happened today; we are now on {option}, the old path is read-only."
                )
                kind, title = "recent_change", f"{topic} migration done"
            elif b.rng.random() < 0.35:
                said = at - timedelta(days=b.rng.randrange(0, 3))
                call = f"{said.day} {vocab.MONTHS[said.month - 1]}"
                text = f"{who}: in the {call} planning call we settled the {topic} on {option}, for now."
                kind, title = "decision", f"{topic} decision"
            else:
                text = (
                    f"{who}: {topic} update — leaning towards {option}; {b.rng.choice(vocab.STATES)} on the prototype."
                )
                kind, title = "decision", f"{topic} update"
            notes.append((at, b.save(kind, title, text, at, ("planning",))))
        split = b.group()
        for month in b.rng.sample((12, 1, 2, 3, 4, 5, 6), 2):
            inside = [mid for at, mid in notes if at.month == month]
            b.ask("temporal", f"what did we say about the {topic} in {vocab.MONTHS[month - 1]}?", inside, split)
        for index in b.rng.sample(range(21), 2):
            at, mid = notes[index]
            monday = datetime(at.year, at.month, at.day, 9, tzinfo=UTC) - timedelta(days=at.weekday())
            asked = monday + timedelta(days=7 + b.rng.randrange(0, 5), hours=b.rng.randrange(0, 8))
            b.ask("temporal", f"where did the {topic} stand last week?", [mid], split, now=asked)
        at, mid = notes[b.rng.randrange(21)]
        b.ask("temporal", f"what was the {topic} news yesterday", [mid], split, now=at + timedelta(days=1, hours=2))
        at, mid = notes[b.rng.randrange(21)]
        b.ask("temporal", f"{topic} note from {at.strftime('%Y-%m-%d')}", [mid], split)
        at, mid = notes[b.rng.randrange(21)]
        days = b.rng.randrange(2, 6)
        b.ask(
            "temporal",
            f"the {topic} update from {vocab.NUMBERS[days]} days ago",
            [mid],
            split,
            now=at + timedelta(days=days),
        )
        b.ask("temporal", f"what did we want for the {topic} before the migration?", [notes[migrated - 1][1]], split)


def superseded(b: Builder) -> None:
    """A choice replaced later; half linked with ``supersedes``, half only said in words."""
    for purpose, tools in vocab.PURPOSES:
        for product in vocab.PRODUCTS:
            old, new = b.rng.sample(tools, 2)
            first = b.when(START, START + timedelta(days=90))
            then = b.when(first + timedelta(days=20), END)
            before = b.save(
                "decision",
                f"{product}: {purpose} with {old}",
                f"Decision ({b.speaker()}): {product} uses {old} for {purpose}; revisit if it gets in the way.",
                first,
                (product, "decisions"),
            )
            for _ in range(3):
                tool = b.rng.choice((old, new))
                b.save(
                    "conversation_summary",
                    f"{product} {purpose} chatter",
                    f"{b.speaker()}: {tool} for {purpose} in {product} {b.rng.choice(vocab.STATES)}; "
                    f"{b.rng.choice(('someone should write it up', 'see the thread', 'no action yet'))}.",
                    b.when(),
                    (product,),
                )
            linked = b.rng.random() < 0.5
            after = b.save(
                "decision",
                f"{product}: {purpose} moves to {new}",
                f"Decision ({b.speaker()}): {product} replaces {old} with {new} for {purpose}; "
                f"{old} is gone once the last call site is ported.",
                then,
                (product, "decisions"),
                **({"supersedes": before} if linked else {}),
            )
            extra = {} if linked else {"stale": [before]}
            b.ask("superseded", f"what do we use for {purpose} in {product}?", [after], b.group(), **extra)


def distractors(b: Builder) -> None:
    """Each customer's issues among the same issues of every other customer."""
    for customer in vocab.CUSTOMERS:
        split = b.group()
        asked = b.rng.sample(range(len(vocab.ISSUES)), 5)
        for _ in range(6):
            b.save(
                "conversation_summary",
                f"{customer} account call",
                f"{b.speaker()}: call with {customer} — renewal, seats and "
                f"{b.rng.choice(vocab.ISSUES)[0].split(' ')[0]} came up; "
                f"they {b.rng.choice(('are happy', 'want a discount', 'asked for a roadmap', 'escalated twice'))}.",
                b.when(),
                ("support",),
            )
        for index, (memory, question) in enumerate(vocab.ISSUES):
            product = b.rng.choice(list(vocab.PRODUCTS))
            answer = b.save(
                "problem",
                f"{customer}: {memory}",
                f"{b.speaker()}: {customer} reports {memory} ({product}); workaround sent, fix scheduled.",
                b.when(),
                ("support", product),
            )
            if index in asked:
                b.ask("distractor", f"{question} at {customer}", [answer], split)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write (default: tests/eval/hard)")
    out = parser.parse_args(argv).out
    b = Builder()
    identifiers(b)
    paraphrases(b)
    multi_hop(b)
    temporal(b)
    superseded(b)
    distractors(b)
    filler(b, max(0, 2400 - len(b.memories)))
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("memories.jsonl", b.memories), ("queries.jsonl", b.queries)):
        (out / name).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    counts: dict[str, int] = {}
    for query in b.queries:
        counts[f"{query['category']}/{query['split']}"] = counts.get(f"{query['category']}/{query['split']}", 0) + 1
    print(f"{len(b.memories)} memories, {len(b.queries)} queries: {dict(sorted(counts.items()))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
