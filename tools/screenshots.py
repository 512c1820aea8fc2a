"""Screenshots of every page of the web UI, on a laptop (1280x800) and a phone (390x844), of a realistic
project: a few hundred memories of a team's invoicing product over six weeks (decisions, errors and their
fixes, problems and solutions, conventions, code patterns, workflows, tasks), linked as a team links them,
and a few minutes of live activity through the REST API.

    python tools/screenshots.py                      # writes docs/screenshots/<page>-<device>.png
    python tools/screenshots.py --out /tmp/shots --keep /tmp/harbor   # keep the seeded project

Needs Playwright (the ``test`` extra) and Debian's ``chromium``. Deterministic but for the event ids."""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eventmem.core.codec import encode_event  # noqa: E402
from eventmem.core.events import AnyEvent, LinkAdded, MemoryDeleted, MemorySaved, MemoryUpdated  # noqa: E402
from eventmem.core.ids import to_iso  # noqa: E402
from eventmem.journal.project import ProjectPaths  # noqa: E402

PAGES = {
    "dashboard": ("#/", "dashboard"),
    "memories": ("#/memories", "browser"),
    "detail": ("#/memory/{id}", "detail"),
    "search": ("#/search", "search"),
    "graph": ("#/graph", "graph"),
    "timeline": ("#/timeline", "timeline"),
    "settings": ("#/settings", "settings"),
}
DEVICES: dict[str, dict[str, Any]] = {
    "laptop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "device_scale_factor": 2,
    },
}
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# -- the project --------------------------------------------------------------------------------------

AREAS = {
    "billing": ("invoice numbering", "proration", "tax rounding", "credit notes", "dunning emails"),
    "payments": ("Stripe webhooks", "card retries", "refunds", "payout reports", "3-D Secure"),
    "auth": ("session cookies", "OAuth login", "API tokens", "password resets", "SSO with Okta"),
    "api": ("rate limiting", "pagination", "idempotency keys", "error bodies", "API versioning"),
    "search": ("the invoice index", "customer lookup", "fuzzy matching", "reindexing", "search filters"),
    "frontend": ("the invoice editor", "form validation", "the date picker", "bundle size", "dark mode"),
    "database": ("migrations", "connection pooling", "the orders table", "read replicas", "backups"),
    "deploy": ("blue-green switches", "the staging cluster", "feature flags", "rollbacks", "the release train"),
    "reporting": ("the revenue dashboard", "CSV exports", "monthly statements", "currency totals", "the MRR chart"),
    "notifications": ("email templates", "the webhook outbox", "Slack alerts", "SMS receipts", "digest emails"),
}
TECH = (
    "PostgreSQL advisory locks",
    "a Redis queue",
    "SQLAlchemy 2",
    "pydantic models",
    "Celery beat",
    "Terraform",
    "OpenTelemetry",
    "a nightly cron",
    "HTMX",
    "server-sent events",
    "pgbouncer",
    "feature flags in LaunchDarkly",
)
ERRORS = (
    "IntegrityError",
    "TimeoutError",
    "KeyError 'currency'",
    "HTTP 502 from the gateway",
    "deadlock detected",
    "DecimalException",
    "401 after token refresh",
    "OOMKilled pod",
    "duplicate webhook delivery",
    "UnicodeDecodeError",
    "stale cache read",
    "race between two workers",
)
PEOPLE = ("claude-code", "cursor", "codex", "cli", "vscode", "http")


def ulid_at(moment: datetime, rng: random.Random) -> str:
    value, chars = int(moment.timestamp() * 1000), []
    for _ in range(10):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    tail = "".join(rng.choice(ALPHABET) for _ in range(16))
    return "".join(reversed(chars)) + tail


class Seed:
    """Events of a project over ``days`` days, written to one journal segment."""

    def __init__(self, days: int = 42, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.start = datetime.now(UTC) - timedelta(days=days)
        self.days = days
        self.events: list[AnyEvent] = []
        self.memories: list[dict[str, Any]] = []
        self.heads: dict[str, str] = {}

    def when(self, fraction: float) -> datetime:
        jitter = self.rng.random() * 0.8 / self.days
        return self.start + timedelta(days=self.days * min(fraction + jitter, 0.999))

    def save(self, fraction: float, kind: str, area: str, title: str, content: str, importance: float) -> str:
        moment = self.when(fraction)
        memory = ulid_at(moment, self.rng)
        tags = (area, *self.rng.sample(("backend", "ux", "ops", "security", "perf", "data"), self.rng.randint(0, 2)))
        event = MemorySaved(
            id=ulid_at(moment, self.rng),
            ts=to_iso(moment),
            by=self.rng.choice(PEOPLE),
            memory=memory,
            kind=kind,
            title=title,
            content=content,
            summary=content.split(". ")[0][:200],
            tags=tags,
            importance=round(importance, 2),
        )
        self.events.append(event)
        self.heads[memory] = event.id
        self.memories.append({"id": memory, "kind": kind, "area": area, "at": moment, "title": title})
        return memory

    def link(self, source: str, target: str, relation: str) -> None:
        at = max(m["at"] for m in self.memories if m["id"] in (source, target)) + timedelta(minutes=3)
        self.events.append(
            LinkAdded(
                id=ulid_at(at, self.rng),
                ts=to_iso(at),
                by=self.rng.choice(PEOPLE),
                link=ulid_at(at, self.rng),
                source=source,
                target=target,
                relation=relation,
                strength=round(self.rng.uniform(0.5, 1.0), 2),
            )
        )

    def build(self) -> None:
        rng = self.rng
        decisions: dict[str, list[str]] = {area: [] for area in AREAS}
        everything: list[str] = []
        for a, (area, topics) in enumerate(AREAS.items()):
            for t, topic in enumerate(topics):
                f = (t * 0.18 + a * 0.013) % 0.9
                tech = TECH[(a * 5 + t) % len(TECH)]
                decision = self.save(
                    f,
                    "decision",
                    area,
                    f"Use {tech} for {topic}",
                    f"We use {tech} for {topic} in {area}. It keeps {topic} simple to operate and the "
                    f"team already knows it; the alternatives were measured in the {area} spike.",
                    rng.uniform(0.6, 0.95),
                )
                if decisions[area]:
                    self.link(decision, rng.choice(decisions[area]), "depends_on")
                decisions[area].append(decision)
                pattern = self.save(
                    f + 0.02,
                    "code_pattern",
                    area,
                    f"Pattern: {topic} through one helper",
                    f"Every caller goes through one helper for {topic} in {area}/; it wraps {tech} "
                    "and logs the request id.",
                    rng.uniform(0.4, 0.8),
                )
                self.link(pattern, decision, "implements")
                everything += [decision, pattern]
                for e in range(2):
                    error_name = ERRORS[(a * 3 + t * 2 + e) % len(ERRORS)]
                    error = self.save(
                        f + 0.04 + e * 0.05,
                        "error",
                        area,
                        f"{error_name} in {topic}",
                        f"{error_name} raised in {area} while handling {topic} under load. Seen in the "
                        f"logs of the {area} service since the last release.",
                        rng.uniform(0.3, 0.7),
                    )
                    fix = self.save(
                        f + 0.06 + e * 0.05,
                        "fix",
                        area,
                        f"Fix {error_name.split(' ')[0]} in {topic}",
                        f"Fixed {error_name} in {topic}: retry once inside the transaction and make the "
                        f"{area} handler idempotent.",
                        rng.uniform(0.5, 0.9),
                    )
                    self.link(fix, error, "fixes")
                    self.link(error, pattern, "caused_by")
                    everything += [error, fix]
                problem = self.save(
                    f + 0.08,
                    "problem",
                    area,
                    f"{topic.capitalize()} is slow on big accounts",
                    f"Accounts with more than 10k invoices wait seconds for {topic}; p95 is 4 s.",
                    rng.uniform(0.4, 0.8),
                )
                solution = self.save(
                    f + 0.1,
                    "solution",
                    area,
                    f"Batch {topic} per account",
                    f"Batching {topic} per account brought p95 from 4 s to 300 ms.",
                    rng.uniform(0.5, 0.9),
                )
                self.link(solution, problem, "solves")
                self.link(problem, decision, "related_to")
                everything += [problem, solution]
                if t % 2 == 0:
                    task = self.save(
                        f + 0.12,
                        "task",
                        area,
                        f"Follow up: document {topic}",
                        f"Write down how {topic} works in {area} before the next release train.",
                        rng.uniform(0.2, 0.5),
                    )
                    self.link(task, solution, "related_to")
                    everything.append(task)
            convention = self.save(
                0.05 + a * 0.05,
                "convention",
                area,
                f"{area.capitalize()}: one module per topic",
                f"Code of {area} lives in {area}/<topic>.py, tests beside it, no cross imports.",
                rng.uniform(0.5, 0.8),
            )
            workflow = self.save(
                0.1 + a * 0.05,
                "workflow",
                area,
                f"How to release {area}",
                f"Merge to main, wait for CI, run the {area} smoke test on staging, then switch.",
                rng.uniform(0.4, 0.7),
            )
            for d in decisions[area][:2]:
                self.link(convention, d, "related_to")
            self.link(workflow, convention, "depends_on")
            everything += [convention, workflow]
        areas = list(AREAS)
        for a, area in enumerate(areas):  # the areas lean on each other
            other = areas[(a + 1) % len(areas)]
            self.link(decisions[area][0], decisions[other][rng.randrange(5)], "depends_on")
            self.link(decisions[area][2], decisions[areas[(a + 3) % len(areas)]][1], "related_to")
        for _ in range(12):  # notes nothing links to yet
            area = rng.choice(areas)
            everything.append(
                self.save(
                    rng.random() * 0.95,
                    "general",
                    area,
                    f"Note on {rng.choice(AREAS[area])}",
                    f"Meeting note: {area} owners agreed to revisit this next quarter.",
                    0.3,
                )
            )
        for memory in rng.sample(everything, 25):  # later edits
            moment = self.when(0.95)
            event = MemoryUpdated(
                id=ulid_at(moment, rng),
                ts=to_iso(moment),
                by=rng.choice(PEOPLE),
                prev=self.heads[memory],
                memory=memory,
                importance=round(rng.uniform(0.5, 1), 2),
            )
            self.heads[memory] = event.id
            self.events.append(event)
        for memory in rng.sample(everything, 6):
            moment = self.when(0.97)
            self.events.append(
                MemoryDeleted(
                    id=ulid_at(moment, rng),
                    ts=to_iso(moment),
                    by="cli",
                    prev=self.heads[memory],
                    memory=memory,
                    reason="no longer true",
                )
            )
            self.heads.pop(memory)
        self.events.sort(key=lambda e: (e.ts, e.id))

    def write(self, root: Path) -> None:
        journal = ProjectPaths(root).journal_dir
        journal.mkdir(parents=True, exist_ok=True)
        (journal / "seed.main.jsonl").write_bytes(b"".join(encode_event(e) for e in self.events))


def live_activity(api: str, seed: Seed) -> str:
    """A few calls through the REST API, as agents make them: saves, a link, an edit; the memory to show."""
    client = httpx.Client(base_url=api, timeout=60)

    def save(**body: Any) -> str:
        answer = client.post("/memories", json=body)
        answer.raise_for_status()
        return str(answer.json()["memory"]["id"])

    webhook = save(
        title="Stripe webhooks arrive twice during failover",
        content="During the gateway failover Stripe retried webhooks that had already been processed, so some "
        "invoices were marked paid twice. The webhook outbox now stores the event id and skips a delivery it "
        "has seen; see the idempotency-key decision.",
        type="error",
        tags=["payments", "webhooks", "ops"],
        importance=0.8,
    )
    fix = save(
        title="Deduplicate Stripe webhooks by event id",
        content="The webhook handler checks the processed_events table (unique on the Stripe event id) inside "
        "the same transaction as the invoice update; a second delivery is a no-op and answers 200.",
        type="fix",
        tags=["payments", "webhooks"],
        importance=0.9,
    )
    client.post("/relationships", json={"source": fix, "target": webhook, "relation": "fixes"}).raise_for_status()
    idempotency = next(m["id"] for m in seed.memories if m["kind"] == "decision" and "idempotency" in m["title"])
    client.post(
        "/relationships", json={"source": fix, "target": idempotency, "relation": "depends_on"}
    ).raise_for_status()
    task = save(
        title="Current task: ship the webhook dedup",
        content="Ship the webhook dedup behind a flag, then "
        "watch duplicate deliveries on the payments dashboard for a day.",
        type="task",
        tags=["payments"],
    )
    client.post("/relationships", json={"source": task, "target": fix, "relation": "related_to"}).raise_for_status()
    client.put(f"/memories/{fix}", json={"importance": 0.95, "tags": ["payments", "webhooks", "idempotency"]})
    return fix


# -- the server and the browser -------------------------------------------------------------------------


@contextmanager
def server(root: Path) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTMEM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventmem", "serve", "--http", "--port", "0"],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            text = line.decode("utf-8", "replace")
            if not found and (match := re.search(r"serving (http://\S+?)/ \(projects", text)):
                found.append(match.group(1).replace("0.0.0.0", "127.0.0.1"))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(120) or not found:
            raise SystemExit("the server did not start")
        yield found[0]
    finally:
        proc.terminate()
        proc.wait(30)


def shoot(base: str, memory: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Debian's chromium")
    made: list[Path] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for device, options in DEVICES.items():
            context = browser.new_context(**options)
            page = context.new_page()
            page.set_default_timeout(60_000)
            errors: list[str] = []

            def failed(error: Exception, errors: list[str] = errors) -> None:
                errors.append(str(error))

            page.on("pageerror", failed)
            for name, (hash_, view) in PAGES.items():
                page.goto(f"{base}/{hash_.format(id=memory)}")
                page.wait_for_selector(f"main .view[data-view={view}]")
                if name == "search":
                    page.get_by_label("Query").fill("duplicate webhook deliveries")
                    page.get_by_role("button", name="Search").click()
                    page.locator("ol.results li").first.wait_for()
                if name == "timeline":
                    page.locator("#timeline-result p").wait_for()
                path = out / f"{name}-{device}.png"
                whole = device == "laptop" and name not in ("graph", "timeline")  # else one screen
                page.screenshot(path=str(path), full_page=whole)
                made.append(path)
                if name == "graph":  # zoomed in: every relation named on its arrow, the memories by title
                    for _ in range(5):
                        page.get_by_role("button", name="Zoom in").click()
                    page.wait_for_selector("svg.graph.all-relations")
                    path = out / f"graph-zoomed-{device}.png"
                    page.screenshot(path=str(path))
                    made.append(path)
            if errors:
                raise SystemExit(f"{device}: {errors}")
            context.close()
        browser.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--keep", type=Path, help="seed the project here and keep it (must not exist)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eventmem-screens-") as tmp:
        root = args.keep or Path(tmp) / "harbor"
        root.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
        subprocess.run([sys.executable, "-m", "eventmem", "init"], cwd=root, check=True, capture_output=True)
        seed = Seed()
        seed.build()
        seed.write(root)
        started = time.monotonic()
        with server(root) as base:
            memory = live_activity(f"{base}/api/v1/projects/{root.name}", seed)
            args.out.mkdir(parents=True, exist_ok=True)
            made = shoot(base, memory, args.out)
        saved = sum(1 for e in seed.events if isinstance(e, MemorySaved))
        links = sum(1 for e in seed.events if isinstance(e, LinkAdded))
        print(
            f"{len(made)} screenshots of a project of {saved} memories and {links} links "
            f"in {time.monotonic() - started:.0f} s: {args.out}"
        )


if __name__ == "__main__":
    main()
