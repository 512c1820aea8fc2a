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

Usage::

    python tools/make_hard_eval.py            # writes tests/eval/hard/
    python tools/make_hard_eval.py --out DIR  # elsewhere
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "eval" / "hard"
PROJECT = "workspace"
START = datetime(2025, 12, 1, tzinfo=UTC)
END = datetime(2026, 6, 30, 18, tzinfo=UTC)
NOW = datetime(2026, 7, 1, 9, tzinfo=UTC)
"""The moment questions are asked unless they state another."""
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip

PRODUCTS = {
    "ledgerly": ("invoices", "payments", "tax", "dunning", "exports", "webhooks", "ledger"),
    "tidepool": ("ingestion", "partitions", "backfills", "schemas", "scheduler", "warehouse", "lineage"),
    "harbor": ("push", "offline", "sync", "login", "onboarding", "crash", "deep links"),
    "quillpad": ("editor", "comments", "presence", "search", "exports", "permissions", "history"),
}
SPEAKERS = ("priya", "marco", "aiko", "dmitri", "fatima", "lucas", "agent:claude", "agent:codex", "agent:review-bot")
VERBS = ("fixed", "reviewed", "looked at", "paired on", "rewrote", "profiled", "tested", "documented", "split up")
STATES = ("is green again", "still flaky", "blocked on review", "ready for QA", "needs a second look", "merged",
          "waiting on staging", "rolled back", "behind a flag")  # fmt: skip
NOUNS = ("retry", "timeout", "cache", "queue", "worker", "migration", "index", "rollout", "test", "config", "deploy",
         "alert", "dashboard", "schema", "endpoint", "batch", "job", "handler", "client", "token")  # fmt: skip
STOP = set(
    """a an the and or of to in on for with by at from is are was were be been it its this that these those
what which who whom how why when where do does did we our us you your i me my they their them there here as
into over under about after before again then than so if not no can could should would will just any some
all more most much many one two get got has have had one's someone something anything""".split()
)


def stems(text: str) -> set[str]:
    """Content words of ``text``, cut to five letters (a crude stem: "deploys" and "deployment" meet)."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 2}


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
        return self.rng.choice(SPEAKERS)


def ident(rng: random.Random, product: str) -> str:
    verbs = ("reconcile", "sync", "render", "flush", "compact", "refresh", "validate", "enqueue", "resolve", "merge")
    parts = ("batch", "lines", "cursor", "snapshot", "window", "token", "payload", "schedule", "digest", "index")
    return f"{rng.choice(verbs)}_{rng.choice(PRODUCTS[product]).replace(' ', '_')}_{rng.choice(parts)}"


def filler(b: Builder, count: int) -> None:
    """Stand-up and pairing turns, progress notes and small conventions that share every word."""
    for _ in range(count):
        product = b.rng.choice(list(PRODUCTS))
        area = b.rng.choice(PRODUCTS[product])
        noun, noun2 = b.rng.sample(NOUNS, 2)
        who = b.speaker()
        at = b.when()
        day = at.strftime("%Y-%m-%d")
        shape = b.rng.randrange(6)
        if shape == 0:
            verb = b.rng.choice(VERBS)
            text = f"{who} (stand-up {day}): {verb} the {area} {noun} in {product}; it {b.rng.choice(STATES)}."
            b.save("conversation_summary", f"stand-up: {product} {area} {noun}", text, at, (product, "standup"))
        elif shape == 1:
            name = ident(b.rng, product)
            text = (
                f"{who}: while pairing on {product} we {b.rng.choice(VERBS)} {name}; the {noun} around it "
                f"{b.rng.choice(STATES)} and the {noun2} path was left alone."
            )
            b.save("conversation_summary", f"pairing notes on {name}", text, at, (product,))
        elif shape == 2:
            text = (
                f"Progress on {product} {area}: the {noun} change {b.rng.choice(STATES)}, the {noun2} follow-up "
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
                f"it {b.rng.choice(STATES)} on main right now ({day})."
            )
            b.save("workflow", f"{product} {area} before {noun2}", text, at, (product,))


ERRORS = (
    ("psycopg.errors.UniqueViolation", 'duplicate key value violates unique constraint "{c}"', "uq_{a}_org_number"),
    ("sqlalchemy.exc.TimeoutError", "QueuePool limit of size {n} overflow 10 reached, connection timed out", ""),
    ("KeyError", "'{c}'", "{a}_external_id"),
    ("redis.exceptions.ConnectionError", "Error 111 connecting to {c}:6379. Connection refused.", "{a}-cache"),
    ("botocore.exceptions.ClientError", "An error occurred (SlowDown) when calling the PutObject operation on {c}", "s3://{a}-exports"),
    ("TypeError", "Object of type {c} is not JSON serializable", "{A}Decimal"),
    ("pydantic_core.ValidationError", "1 validation error for {c}: field required", "{A}Payload"),
    ("ssl.SSLCertVerificationError",
     "certificate verify failed: unable to get local issuer certificate ({c})", "{a}.internal"),
    ("FATAL", "remaining connection slots are reserved for non-replication superuser connections ({c})", "{a}-primary"),
    ("java.lang.IllegalStateException", "Fragment {c} not attached to a context.", "{A}Fragment"),
)  # fmt: skip
FIXES = (
    "moved the call behind a retry with jitter",
    "raised the pool size and added pool_pre_ping",
    "guarded the lookup and logged the missing key",
    "pointed the client at the sidecar instead of localhost",
    "batched the uploads and backed off on 503",
    "converted the value with a custom encoder hook",
    "made the field optional with a default",
    "installed the internal CA bundle in the image",
    "put pgbouncer in front in transaction mode",
    "checked isAdded() before touching the view",
)


def identifiers(b: Builder) -> None:
    """Functions, config keys and tickets with near-twins, and errors with their exact text."""
    used: set[str] = set()
    for product in PRODUCTS:
        for _ in range(9):
            name = ident(b.rng, product)
            while name in used:
                name = ident(b.rng, product)
            used.add(name)
            twin = name.rsplit("_", 1)[0] + "_" + b.rng.choice(("v2", "async", "legacy", "all"))
            what = b.rng.choice(("double-counts", "skips", "holds a lock on", "re-sends", "drops"))
            noun = b.rng.choice(NOUNS)
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
            area = b.rng.choice(PRODUCTS[product]).replace(" ", "_")
            noun = b.rng.choice(NOUNS)
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
                f"{b.rng.choice(NOUNS)} back up.",
                b.when(),
                (product, "config"),
            )
            b.ask("identifier", f"what value does {key} have in production and why", [answer], split)
    for index, (kind, template, slot) in enumerate(ERRORS):
        for product in b.rng.sample(list(PRODUCTS), 3):
            area = b.rng.choice(PRODUCTS[product]).replace(" ", "_")
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
                f"{b.speaker()}: the {kind.rsplit('.', 1)[-1]} in {product} {area} is gone: we {FIXES[index]}.",
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
                f"{ticket}: {b.rng.choice(VERBS)} the {area.replace('_', ' ')} {b.rng.choice(NOUNS)} in {product}; "
                f"{b.speaker()} owns it, estimate {b.rng.randrange(1, 8)} days.",
                b.when(),
                (product, "tickets"),
            )
            b.ask("identifier", f"who owns {ticket}?", [answer], b.group())


PARAPHRASES = (
    ("Session cookies are invalidated whenever an account's role changes, so stale admin rights never linger.",
     "what happens to logged-in users once their permissions get modified?",
     "do people keep elevated access after being demoted"),
    ("Postgres autovacuum falls behind on the events table during bulk imports; we schedule VACUUM ANALYZE nightly.",
     "why does the database bloat when we load lots of rows at once",
     "cleanup of dead tuples lagging while ingesting big files"),
    ("Uploaded avatars are resized to 256 pixels in a Lambda before they reach the CDN bucket.",
     "how are profile pictures shrunk ahead of serving?",
     "where do user photos get scaled down"),
    ("Feature flags older than ninety days must be deleted or promoted; the linter fails the build otherwise.",
     "what is the rule for toggles that have lingered for a quarter?",
     "can switches stay around forever in our code"),
    ("Monetary amounts are kept as integer cents alongside an ISO currency code, never floats.",
     "how do we represent prices so rounding doesn't bite",
     "which numeric type holds money values"),
    ("The mobile app caches the last fifty screens so people can browse without connectivity.",
     "what still works when a phone loses signal?",
     "can customers read content on a plane"),
    ("Password reset links expire after fifteen minutes and can be used only once.",
     "how long is a forgotten-credential email valid",
     "recovery URLs: lifetime and reuse?"),
    ("Nightly warehouse loads run at 02:00 UTC so they finish before European business hours.",
     "when do the overnight analytics imports kick off?",
     "timing of the batch that feeds reporting tables"),
    ("Webhook deliveries are signed with HMAC-SHA256; receivers verify the header before parsing the body.",
     "how can a partner be sure a callback really came from us",
     "authenticity check for outbound notifications to integrators"),
    ("Stale pull requests are closed automatically after three weeks without activity.",
     "what happens to code reviews nobody touches for a while?",
     "do abandoned merge proposals get swept away"),
    ("Database migrations must be backward compatible for one release so rollbacks stay safe.",
     "can a schema change break the previous version of the service?",
     "rule for altering tables while old pods still run"),
    ("Crash reports are symbolicated server-side using dSYM uploads from the release pipeline.",
     "how do we turn iOS stack traces into readable function names",
     "where do we map raw addresses in app failures back to method names"),
    ("Tenant data is separated with Postgres row-level security policies keyed by org_id.",
     "what stops one customer from seeing another customer's records?",
     "isolation between companies sharing a single database"),
    ("Exports larger than ten thousand rows are produced asynchronously and emailed as a link.",
     "why does downloading a huge spreadsheet arrive in my inbox instead",
     "big CSV downloads: synchronous or queued?"),
    ("API keys are hashed with SHA-256 at rest; only the prefix is displayed in the dashboard.",
     "do we store integration secrets in plain text?",
     "how are access credentials for developers persisted"),
    ("Typing indicators are throttled to one broadcast every two seconds per document.",
     "how often do we tell collaborators that somebody is writing?",
     "rate of the 'someone is writing' pings"),
    ("Search results are ranked by BM25 with a small boost for recently edited pages.",
     "how does the lookup decide which documents appear first?",
     "ordering logic for find-in-workspace hits"),
    ("Push notifications are batched into a single digest if more than five arrive within a minute.",
     "do users get spammed when lots of alerts fire together on their phone?",
     "grouping of mobile pings during bursts"),
    ("Backfills run with a concurrency limit of four partitions to protect the source replicas.",
     "how many historical reloads can go in parallel",
     "throttle on reprocessing old data so read copies survive"),
    ("Every public endpoint enforces a limit of 100 requests per minute per key, with a Retry-After header.",
     "how much traffic may one integration send us?",
     "throttling policy for third-party callers"),
    ("Soft-deleted documents stay recoverable for thirty days, then a janitor job purges them.",
     "can someone restore a page they trashed by mistake last month?",
     "how long before removed files are gone for good"),
    ("Invoice PDFs are rendered with WeasyPrint in a separate worker pool to keep web latency flat.",
     "what generates the printable bills and where does it run",
     "producing downloadable billing documents without slowing pages"),
    ("Access tokens live fifteen minutes; refresh tokens rotate on every use and are bound to the device.",
     "how long can a bearer credential be replayed",
     "lifetime of auth grants on phones and laptops"),
    ("Schema changes to the warehouse go through a pull request against the dbt project, never ad hoc.",
     "who approves altering analytics table structures?",
     "process for modifying reporting models"),
    ("Localization strings are extracted at build time; missing translations fall back to English.",
     "what do French speakers get when a label has no version in their language yet",
     "behaviour for untranslated UI text"),
    ("The editor autosaves every ten seconds and on blur, keeping the last twenty revisions.",
     "how often is a draft persisted while someone writes?",
     "risk of losing typing if the tab crashes"),
    ("Dunning retries a failed card charge on days 1, 3, 7 and 14, then cancels the subscription.",
     "what do we do when a customer's payment bounces",
     "schedule for chasing declined plans before ending them"),
    ("Load tests run weekly against staging with k6 and fail the pipeline if p95 latency regresses by 20%.",
     "how do we catch performance slowdowns before customers do?",
     "automated benchmarking of response times"),
    ("Secrets come from Vault through the sidecar; nothing sensitive is baked into container images.",
     "where do services obtain their passwords at runtime",
     "how are credentials injected into pods"),
    ("Onboarding shows a three-step checklist that disappears once the first project is created.",
     "what do brand-new users see right after signing up?",
     "initial guidance for newcomers"),
    ("Deep links are verified through the apple-app-site-association file hosted on the marketing domain.",
     "how does tapping a URL open the iPhone application directly",
     "universal linking setup for iOS"),
    ("Lineage graphs are computed from parsed SQL and refreshed after every successful dbt run.",
     "how do we know which upstream tables feed a dashboard?",
     "tracing dependencies between datasets"),
    ("Comment threads are resolved by the author or an editor; resolved threads collapse but are kept.",
     "who can close a discussion on a page, and is it deleted afterwards",
     "fate of finished annotation conversations"),
    ("Sales tax is calculated through Avalara at checkout and cached per address for a day.",
     "how is the levy on purchases computed for each buyer location?",
     "where does VAT and GST math come from"),
    ("Flaky tests are quarantined with a marker and a ticket; quarantine longer than two weeks pages the owner.",
     "what do we do with checks that fail randomly in CI",
     "policy for intermittent suite failures"),
    ("Background jobs carry an idempotency key so a retried job never charges twice.",
     "how do we avoid billing someone two times if a task reruns?",
     "protection against duplicate side effects in queued work"),
    ("Partition pruning requires the event_date filter; queries without it are rejected by the gateway.",
     "why does the analytics proxy refuse my select over all history",
     "mandatory day predicate on big fact tables"),
    ("Release builds are signed on a dedicated Mac mini; signing certificates never leave that machine.",
     "where do store-ready app binaries get their code signature",
     "custody of Apple distribution keys"),
    ("Read replicas lag at most two seconds; anything that must see its own write reads the primary.",
     "can a user get outdated data right after saving something",
     "consistency of follower databases after an update"),
    ("Audit log entries are append-only and shipped hourly to a locked S3 bucket with object lock.",
     "can an administrator erase the trail of who changed what?",
     "tamper resistance of the activity history"),
    ("Presence cursors are colored by a hash of the user id, so colors stay stable across sessions.",
     "why does a collaborator always get the same highlight hue",
     "consistent tint per person in shared docs"),
    ("Offline edits queue locally and are replayed in order once the device reconnects; conflicts keep both versions.",
     "what happens to changes made on a phone without internet?",
     "merging modifications after regaining network"),
    ("The scheduler skips a DAG run if the previous one is still going instead of stacking them.",
     "do pipelines pile up when one takes too long?",
     "overlap handling for periodic workflows"),
    ("Email sending goes through Postmark with a separate message stream for transactional mail.",
     "which provider delivers receipts and account notices",
     "outbound provider for system letters"),
    ("Large file uploads go straight to object storage with presigned URLs; the app server only gets metadata.",
     "do big attachments pass through our web tier?",
     "direct browser transfer of heavy files"),
    ("Error budgets: if the monthly availability drops under 99.9%, feature work pauses for reliability.",
     "when do we stop shipping new things to focus on uptime?",
     "consequence of missing our SLO"),
    ("Code owners must approve changes in their directories; two approvals are needed for anything under infra.",
     "who has to sign off before merging platform work",
     "review requirements per folder"),
    ("Customer-visible timestamps are stored in UTC and converted using the organization's configured zone.",
     "why do dates show up in local time for a team in Tokyo?",
     "handling of clocks across regions in the UI"),
    ("Rate-limited partners get a 429 with exponential backoff guidance in the response body.",
     "what do integrators receive when they call too fast",
     "reply to callers exceeding quota"),
    ("The ingestion service deduplicates events by a content hash within a 24-hour window.",
     "do repeated identical records get stored twice",
     "handling of resent payloads arriving during one day"),
)  # fmt: skip
TRAPS = (
    "{who}: heads-up, {w1} and {w2} came up in the {product} retro again; nothing decided, parking it.",
    "Support ticket mentions {w1} {w2} for a {product} customer; could not reproduce, closed.",
    "{who} asked in chat whether {w1} affects {w2}; answer was 'not in {product}', see thread.",
)


def paraphrases(b: Builder) -> None:
    """Questions sharing no content word with their memory, beside notes that share the question's."""
    for memory, *questions in PARAPHRASES:
        for question in questions:
            shared = stems(memory) & stems(question)
            if shared:
                raise SystemExit(f"paraphrase shares {sorted(shared)}: {question!r}")
        product = b.rng.choice(list(PRODUCTS))
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
            words = sorted(w for w in re.findall(r"[a-z]+", question.lower()) if w not in STOP and len(w) > 3)
            for template in b.rng.sample(TRAPS, 2):
                w1, w2 = b.rng.sample(words, 2) if len(words) >= 2 else (words[0], words[0])
                text = template.format(who=b.speaker(), w1=w1, w2=w2, product=b.rng.choice(list(PRODUCTS)))
                b.save("general", f"{w1} {w2}", text, b.when(), ())
            b.ask("paraphrase", question, [answer], split)


TEAMS = ("payments squad", "data platform squad", "mobile guild", "editor crew", "growth pod", "infra team",
         "trust and safety group", "search squad")  # fmt: skip
SERVICES = ("invoice-renderer", "ledger-sync", "tax-oracle", "card-vault", "event-funnel", "partition-keeper",
            "schema-registry", "push-relay", "sync-gateway", "auth-bridge", "doc-indexer", "presence-hub",
            "export-forge", "dunning-clock", "lineage-crawler", "thumbnail-mill", "mail-courier", "audit-shipper",
            "flag-service", "quota-keeper")  # fmt: skip
PEOPLE = ("Priya", "Marco", "Aiko", "Dmitri", "Fatima", "Lucas", "Noor", "Tomasz", "Elena", "Kwame")


def multi_hop(b: Builder) -> None:
    """Two memories per answer: the first names a thing the second describes."""
    channel = {t: f"#{t.split()[0][:6]}-oncall" for t in TEAMS}
    window = {t: b.rng.choice(("Tuesdays and Thursdays 10:00-12:00 UTC", "any weekday before 15:00 UTC",
                               "only after the Monday change board", "Wednesdays after the freeze lifts"))
              for t in TEAMS}  # fmt: skip
    team_notes: dict[str, list[str]] = {}
    for team in TEAMS:
        lead = b.rng.choice(PEOPLE)
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
    for service in SERVICES:
        team = b.rng.choice(TEAMS)
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
    for product in PRODUCTS:
        for _ in range(6):
            ticket = f"{product[:3].upper()}-{b.rng.randrange(1000, 9999)}"
            area = b.rng.choice(PRODUCTS[product]).replace(" ", "_")
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
            folder = f"{product}/{b.rng.choice(PRODUCTS[product]).replace(' ', '_')}"
            reviewer = b.rng.choice(PEOPLE)
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


TOPICS = (
    ("search reindex",
     ("a full rebuild", "incremental updates", "a shadow index", "a nightly job", "per-tenant shards")),
    ("billing cutover",
     ("a big-bang switch", "a per-plan rollout", "dual writes", "a read-only weekend", "a manual reconcile")),
    ("push provider", ("FCM only", "OneSignal", "our own relay", "APNs direct", "a vendor trial")),
    ("warehouse vendor", ("Snowflake", "BigQuery", "Postgres with cstore", "Redshift", "DuckDB files")),
    ("auth library", ("Authlib", "our own OIDC client", "Keycloak", "Ory Kratos", "Auth0")),
    ("editor engine", ("ProseMirror", "Slate", "Lexical", "a CRDT with Yjs", "TipTap")),
    ("queue backend", ("Celery with Redis", "RQ", "SQS", "Dramatiq", "Postgres SKIP LOCKED")),
    ("mobile release cadence",
     ("weekly trains", "biweekly trains", "continuous TestFlight", "monthly drops", "feature-gated builds")),
    ("export format", ("CSV only", "Parquet", "XLSX and CSV", "JSON lines", "a zipped bundle")),
    ("tax engine", ("Avalara", "TaxJar", "in-house tables", "Stripe Tax", "a fixed rate per region")),
    ("schema registry", ("Confluent", "Apicurio", "plain JSON Schema in git", "protobuf descriptors", "no registry")),
    ("observability stack",
     ("Datadog", "Grafana Cloud", "self-hosted Prometheus", "Honeycomb", "OpenTelemetry to Tempo")),
    ("comment storage",
     ("a comments table", "event-sourced threads", "a document sidecar", "Firestore", "the CRDT itself")),
)  # fmt: skip
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def temporal(b: Builder) -> None:
    """A topic noted every ten days or so in the same words; questions pick notes by their time."""
    for topic, options in TOPICS:
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
                call = f"{said.day} {MONTHS[said.month - 1]}"
                text = f"{who}: in the {call} planning call we settled the {topic} on {option}, for now."
                kind, title = "decision", f"{topic} decision"
            else:
                text = f"{who}: {topic} update — leaning towards {option}; {b.rng.choice(STATES)} on the prototype."
                kind, title = "decision", f"{topic} update"
            notes.append((at, b.save(kind, title, text, at, ("planning",))))
        split = b.group()
        for month in b.rng.sample((12, 1, 2, 3, 4, 5, 6), 2):
            inside = [mid for at, mid in notes if at.month == month]
            b.ask("temporal", f"what did we say about the {topic} in {MONTHS[month - 1]}?", inside, split)
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
            "temporal", f"the {topic} update from {NUMBERS[days]} days ago", [mid], split, now=at + timedelta(days=days)
        )
        b.ask("temporal", f"what did we want for the {topic} before the migration?", [notes[migrated - 1][1]], split)


PURPOSES = (
    ("feature flags", ("LaunchDarkly", "Unleash", "a flags table", "Flagsmith")),
    ("error tracking", ("Sentry", "Rollbar", "Bugsnag", "Honeybadger")),
    ("HTTP client", ("requests", "httpx", "aiohttp", "urllib3 directly")),
    ("background jobs", ("Celery", "RQ", "Dramatiq", "arq")),
    ("package manager", ("pip-tools", "Poetry", "uv", "PDM")),
    ("date handling", ("pendulum", "arrow", "the standard datetime", "whenever")),
    ("CI runner", ("GitHub Actions", "CircleCI", "Buildkite", "GitLab CI")),
    ("logging format", ("plain text", "JSON lines", "logfmt", "OpenTelemetry logs")),
)  # fmt: skip


def superseded(b: Builder) -> None:
    """A choice replaced later; half linked with ``supersedes``, half only said in words."""
    for purpose, tools in PURPOSES:
        for product in PRODUCTS:
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
                    f"{b.speaker()}: {tool} for {purpose} in {product} {b.rng.choice(STATES)}; "
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


CUSTOMERS = ("Brauhaus GmbH", "Kestrel Logistics", "Maple Dental", "Oduya Foods", "Pinecrest Schools",
             "Quokka Travel", "Rivetworks", "Sundial Health", "Tamarind Studio", "Umbra Security", "Vantage Realty",
             "Wrenfield Farms")  # fmt: skip
ISSUES = (
    ("invoices show the wrong VAT rate after the address change", "tax on their bills is off since they moved"),
    ("CSV export times out above 50k rows", "their big spreadsheet download never finishes"),
    ("SSO login loops back to the sign-in page", "single sign-on keeps bouncing them to the start"),
    ("webhooks arrive twice for every payment", "duplicate callbacks per charge"),
    ("push notifications stopped on Android 14", "phone alerts went silent after an OS upgrade"),
    ("shared documents lose comments on save", "annotations vanish when pages are stored"),
    ("nightly sync skips archived projects", "the overnight copy ignores closed work"),
    ("dashboard totals differ from the exported numbers", "figures on screen don't match the downloaded report"),
)


def distractors(b: Builder) -> None:
    """Each customer's issues among the same issues of every other customer."""
    for customer in CUSTOMERS:
        split = b.group()
        asked = b.rng.sample(range(len(ISSUES)), 5)
        for _ in range(6):
            b.save(
                "conversation_summary",
                f"{customer} account call",
                f"{b.speaker()}: call with {customer} — renewal, seats and "
                f"{b.rng.choice(ISSUES)[0].split(' ')[0]} came up; "
                f"they {b.rng.choice(('are happy', 'want a discount', 'asked for a roadmap', 'escalated twice'))}.",
                b.when(),
                ("support",),
            )
        for index, (memory, question) in enumerate(ISSUES):
            product = b.rng.choice(list(PRODUCTS))
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
