"""Secrets never reach the journal: scrubbed (or refused), and <private> spans dropped.

The fake secrets below are assembled from pieces so that no scanner mistakes this file for a leak.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import secret_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from eventmem.core.errors import SecretRefused
from eventmem.core.limits import limit
from eventmem.core.redact import find_secrets, scrub
from eventmem.journal.project import RootChoice
from eventmem.service import MemoryService, open_service

ALNUM = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0"  # 40 characters


def assert_redacted(text: str, secret: str, kind: str) -> str:
    out = scrub(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert kind in find_secrets(text)
    return out


def test_an_aws_access_key_id_is_redacted() -> None:
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    out = assert_redacted(f"the key is {key} for staging", key, "aws-access-key")
    assert out == "the key is [REDACTED:aws-access-key] for staging"


def test_an_aws_secret_access_key_assignment_keeps_the_name_and_drops_the_value() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
    out = assert_redacted(f'aws_secret_access_key = "{secret}"', secret, "aws-secret-key")
    assert out.startswith('aws_secret_access_key = "[REDACTED:aws-secret-key]')


def test_github_classic_tokens_are_redacted() -> None:
    for prefix in ("ghp_", "gho_", "ghs_"):
        token = prefix + ALNUM[:36]
        assert_redacted(f"export GH={token}", token, "github-token")


def test_github_fine_grained_tokens_are_redacted() -> None:
    token = "github_pat_" + "11ABCDEFG0" + "_" + ALNUM + "xyz"
    assert_redacted(f"token: {token}", token, "github-token")


def test_a_gitlab_token_is_redacted() -> None:
    token = "glpat-" + ALNUM[:20]
    assert_redacted(f"use {token} to push", token, "gitlab-token")


def test_a_slack_token_is_redacted() -> None:
    token = "xoxb-" + "123456789012-" + ALNUM[:24]
    assert_redacted(f"bot {token}", token, "slack-token")


def test_openai_keys_are_redacted() -> None:
    for token in ("sk-" + ALNUM[:32], "sk-proj-" + ALNUM + "_-x" + ALNUM[:10]):
        assert_redacted(f"OPENAI key {token} here", token, "openai-key")


def test_an_anthropic_key_is_redacted_as_such() -> None:
    token = "sk-ant-" + "api03-" + ALNUM + ALNUM[:20]
    out = assert_redacted(f"key {token}", token, "anthropic-key")
    assert out == "key [REDACTED:anthropic-key]"


def test_a_google_api_key_is_redacted() -> None:
    token = "AIza" + "Sy" + ALNUM[:33]
    assert_redacted(f"maps key={token}", token, "google-api-key")


def test_stripe_keys_are_redacted() -> None:
    for token in ("sk_" + "live_" + ALNUM[:24], "rk_" + "test_" + ALNUM[:24]):
        assert_redacted(f"stripe {token}", token, "stripe-key")


def test_a_jwt_is_redacted() -> None:
    header, claims = "eyJ" + "hbGciOiJIUzI1NiJ9", "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIn0"
    token = f"{header}.{claims}.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    assert_redacted(f"Authorization: Bearer {token}", token, "jwt")


@pytest.mark.parametrize("kind", ["RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "PGP PRIVATE KEY BLOCK"])
def test_a_pem_private_key_block_is_redacted_whole(kind: str) -> None:
    body = "MIIEowIBAAKCAQEA" + ALNUM + "\n" + ALNUM + ALNUM
    text = f"before\n-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\nafter"
    out = assert_redacted(text, body, "private-key")
    assert out == "before\n[REDACTED:private-key]\nafter"


def test_an_unterminated_private_key_block_is_redacted_to_the_end() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + ALNUM
    assert scrub(text) == "[REDACTED:private-key]"


def test_a_password_in_a_url_is_dropped_keeping_user_and_host() -> None:
    password = "s3cr3t" + "Pa55"
    out = assert_redacted(f"DATABASE_URL=postgres://admin:{password}@db.example.com:5432/app", password, "url-password")
    assert "postgres://admin:[REDACTED:url-password]@db.example.com:5432/app" in out


def test_a_url_without_a_password_is_left_alone() -> None:
    for text in ("https://user@example.com/path", "https://example.com:8443/x", "git@github.com:org/repo.git"):
        assert scrub(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('password = "correct-horse-battery"', 'password = "'),
        ("passwd: hunter2hunter2", "passwd: "),
        ("secret=abcdef123456", "secret="),
        ("api_key: abcdef123456", "api_key: "),
        ("DB_PASSWORD=hunter2hunter2", "DB_PASSWORD="),
        ("export OPENAI_API_KEY=abcdef123456", "export OPENAI_API_KEY="),
        ('{"password": "hunter2hunter2"}', '{"password": "'),
    ],
)
def test_password_assignments_keep_the_name_and_drop_the_value(text: str, kept: str) -> None:
    out = scrub(text)
    assert out.startswith(kept + "[REDACTED:password]")
    assert "hunter2" not in out and "abcdef" not in out and "correct-horse" not in out


def test_private_spans_are_dropped() -> None:
    assert scrub("keep <private>my home address</private> this") == "keep  this"
    assert scrub("a <PRIVATE>x</PRIVATE> b <private>y</private> c") == "a  b  c"


def test_a_multi_line_private_span_is_dropped() -> None:
    assert scrub("start\n<private>line one\nline two\n</private>\nend") == "start\n\nend"


def test_an_unterminated_private_span_drops_everything_after_it() -> None:
    assert scrub("public part <private>secret\nand more\nto the end") == "public part "


def test_a_secret_inside_a_private_span_is_not_reported() -> None:
    token = "ghp_" + ALNUM[:36]
    assert find_secrets(f"<private>{token}</private>") == []
    assert scrub(f"<private>{token}</private>", refuse=True) == ""


def test_refuse_mode_raises_naming_the_kind_of_secret() -> None:
    token = "ghp_" + ALNUM[:36]
    with pytest.raises(SecretRefused, match="github-token") as caught:
        scrub(f"token {token}", refuse=True, field="content")
    assert "content" in str(caught.value)
    assert token not in str(caught.value)


def test_refuse_mode_passes_clean_text_through() -> None:
    assert scrub("nothing to see here", refuse=True) == "nothing to see here"


@pytest.mark.parametrize(
    "text",
    [
        "Implement the password reset flow with an emailed link.",
        "Use sk-learn style estimators; see scikit-learn docs.",
        "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b on main.",
        "The secret sauce is caching embeddings by content hash.",
        "password: str = Field(min_length=12)",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "password = getpass.getpass()",
        "token_count = 4096; max_tokens=8192",
        "See https://example.com/docs/auth#passwords for the policy.",
        "def check_password(raw: str) -> bool: ...",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "base64 data: aGVsbG8gd29ybGQgdGhpcyBpcyBub3QgYSBzZWNyZXQ=",
    ],
)
def test_ordinary_code_text_is_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert scrub(text) == text


def test_a_saved_token_never_reaches_the_journal_file(service: MemoryService, project: Path) -> None:
    token = "ghp_" + ALNUM[:36]
    password = "hunter2" + "hunter2"
    memory = service.save(
        f"CI uses {token} to push tags. <private>my notes</private>",
        title=f"CI token password={password}",
        tags=["ci"],
    )
    assert token not in memory.content and "my notes" not in memory.content
    journal = b"".join(path.read_bytes() for path in (project / ".eventmem" / "journal").glob("*.jsonl"))
    assert memory.id.encode() in journal
    assert b"REDACTED:github-token" in journal
    for leaked in (token, password, "my notes"):
        assert leaked.encode() not in journal
    (hit,) = service.recall("CI push tags")
    assert token not in hit.summary


def test_refuse_mode_writes_nothing_to_the_journal(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTMEM_SECRETS", "refuse")
    service = open_service(RootChoice(project, "test"))
    try:
        token = "ghp_" + ALNUM[:36]
        with pytest.raises(SecretRefused, match="github-token"):
            service.save(f"token {token}")
        journal_dir = project / ".eventmem" / "journal"
        assert not journal_dir.exists() or all(p.stat().st_size == 0 for p in journal_dir.glob("*.jsonl"))
    finally:
        service.close()


FRAGMENTS = [
    "Deploy the api.",
    "password=",
    "PASSWORD: ",
    "Pwd=",
    "secret_key=",
    "SECRET=",
    "secret: ",
    "AWS_SECRET_ACCESS_KEY=",
    "aws_secret_key: ",
    "Api_Key=",
    "AUTH_TOKEN=",
    "https://user:",
    "HTTPS://root:",
    "@db.example.com/app ",
    "AK" + "IA",
    "gh" + "p_",
    "github" + "_pat_",
    "gl" + "pat-",
    "xo" + "xb-",
    "sk" + "-ant-",
    "sk" + "-proj-",
    "AI" + "za",
    "sk_" + "live_",
    "rk_" + "test_",
    "ey" + "J",
    ".ey" + "J",
    "-----BEGIN RSA PRIVATE " + "KEY-----",
    "-----END RSA PRIVATE " + "KEY-----",
    "<PRIVATE>",
    "</private>",
    ALNUM,
    ALNUM[:24],
    "_-",
    " ",
    "\n",
    "ſecret=",
    "é",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
def test_skipping_a_pattern_whose_needles_are_missing_changes_no_answer(pieces: list[str]) -> None:
    from eventmem.core import redact

    text = "".join(pieces)
    without_private = redact.PRIVATE.sub("", text)
    expected = [kind for kind, pattern in redact.PATTERNS if pattern.search(without_private)]
    assert find_secrets(text) == expected
    scrubbed = without_private
    if expected:
        for kind, pattern in redact.PATTERNS:
            scrubbed = pattern.sub(lambda m, kind=kind: redact.redaction(kind, m), scrubbed)
    assert scrub(text) == scrubbed


def test_every_secret_of_the_corpus_is_removed_and_every_look_alike_is_left_unchanged() -> None:
    corpus, lookalike_lines = secret_corpus.secrets(), secret_corpus.lookalikes()
    missed = [s for s in corpus if s.secret in scrub(s.line)]
    misnamed = [s for s in corpus if s.kind != "private" and f"[REDACTED:{s.kind}]" not in scrub(s.line)]
    touched = [line for line in lookalike_lines if scrub(line) != line or find_secrets(line)]
    print(
        f"secrets removed: {len(corpus) - len(missed)}/{len(corpus)}; "
        f"look-alikes untouched: {len(lookalike_lines) - len(touched)}/{len(lookalike_lines)}"
    )
    assert len(corpus) >= 40 and len(lookalike_lines) >= 40
    assert missed == [] and misnamed == [] and touched == []


def test_refuse_mode_refuses_every_secret_of_the_corpus_and_no_look_alike() -> None:
    for secret in secret_corpus.secrets():
        if secret.kind == "private":
            assert secret.secret not in scrub(secret.line, refuse=True)
            continue
        with pytest.raises(SecretRefused, match=secret.kind):
            scrub(secret.line, refuse=True)
    for line in secret_corpus.lookalikes():
        assert scrub(line, refuse=True) == line


@pytest.mark.parametrize("tag", ["< private >x</ private>", "<private >x</private >", "<  PRIVATE>x< /private>"])
def test_private_tags_with_spaces_inside_are_dropped_too(tag: str) -> None:
    assert scrub(f"a {tag} b") == "a  b"


def test_a_secret_rule_finds_its_secret_whatever_the_case_of_the_text_around_it() -> None:
    # the pre-filter looks for needles in the folded text; non-ASCII letters that fold to ASCII
    # ones (ſ, K, ı, İ) must not hide a secret from a rule that ignores case
    assert "password" in find_secrets("PAſſWORD=hunter2hunter2")
    assert "aws-secret-key" in find_secrets(
        "aws_ſecret_access_key = " + "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
    )


def test_scrub_event_cleans_every_free_text_field_and_keeps_ids() -> None:
    from eventmem.core.events import LinkAdded, MemoryDeleted, MemorySaved
    from eventmem.core.redact import scrub_event

    token = "ghp_" + ALNUM[:36]
    saved = MemorySaved(
        id="01J0000000000000000000000A",
        ts="2026-01-01T00:00:00.000000Z",
        by=f"agent {token}",
        memory="m1",
        title=f"t {token}",
        content=f"c {token}",
        summary=f"s {token}",
        tags=("ci", token),
        project=f"p {token}",
    )
    clean = scrub_event(saved)
    assert token not in repr(clean)
    assert (clean.id, clean.memory, clean.tags[0]) == (saved.id, "m1", "ci")
    deleted = scrub_event(MemoryDeleted(id="e", ts="t", memory="m1", reason=f"leaked {token}"))
    assert deleted.reason == "leaked [REDACTED:github-token]"
    link = scrub_event(LinkAdded(id="e", ts="t", link="l", source="a", target="b", context=token))
    assert link.context == "[REDACTED:github-token]"
    untouched = MemoryDeleted(id="e", ts="t", memory="m1", reason="duplicate")
    assert scrub_event(untouched) is untouched
    with pytest.raises(SecretRefused, match="reason"):
        scrub_event(MemoryDeleted(id="e", ts="t", memory="m1", reason=token), refuse=True)


def test_scrub_event_cleans_metadata_values_and_a_memorys_source_and_keeps_metadata_keys() -> None:
    from eventmem.core.events import MemorySaved, MemoryUpdated
    from eventmem.core.redact import scrub_event

    token = "ghp_" + ALNUM[:36]
    saved = MemorySaved(
        id="e",
        ts="t",
        memory="m1",
        content="c",
        metadata={"author": "ann", "note": f"pushed with {token}"},
        source=f"server-memory:{token}",
    )
    clean = scrub_event(saved)
    assert clean.metadata == {"author": "ann", "note": "pushed with [REDACTED:github-token]"}
    assert clean.source == "server-memory:[REDACTED:github-token]"
    updated = scrub_event(MemoryUpdated(id="e", ts="t", memory="m1", metadata={"note": token}))
    assert updated.metadata == {"note": "[REDACTED:github-token]"}
    with pytest.raises(SecretRefused, match=r"metadata\.note"):
        scrub_event(saved, refuse=True)


def test_refuse_mode_refuses_a_delete_whose_reason_holds_a_secret_and_writes_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTMEM_SECRETS", "refuse")
    service = open_service(RootChoice(project, "test"))
    try:
        memory = service.save("The release job signs tags.")
        journal = b"".join(p.read_bytes() for p in (project / ".eventmem" / "journal").glob("*.jsonl"))
        with pytest.raises(SecretRefused, match="reason"):
            service.delete(memory.id, reason="rotated " + "ghp_" + ALNUM[:36])
        after = b"".join(p.read_bytes() for p in (project / ".eventmem" / "journal").glob("*.jsonl"))
        assert after == journal
        assert service.get(memory.id).status == "live"
    finally:
        service.close()


def test_the_writer_name_and_tags_are_scrubbed_and_the_service_returns_what_it_stored(service: MemoryService) -> None:
    token, key = "npm_" + ALNUM[:36], "AKIA" + "IOSFODNN7EXAMPLE"
    memory = service.save("Publishing needs a token.", tags=["npm", key, token], by=f"ci {token}")
    assert token not in repr(memory) and key.lower() not in repr(memory).lower()
    # (a tag is scrubbed before it is lower-cased, which would hide the key's shape)
    assert memory.tags == ["npm", "[redacted:aws-access-key]", "[redacted:npm-token]"]
    assert memory.created_by == "ci [REDACTED:npm-token]"
    assert service.get(memory.id).created_by == memory.created_by


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=6).map("".join), min_size=4, max_size=4))
def test_scrub_event_gives_each_field_what_scrub_gives_it(texts: list[str]) -> None:
    from eventmem.core.events import MemorySaved
    from eventmem.core.redact import scrub_event

    content, title, by, tag = texts
    event = MemorySaved(id="e", ts="t", memory="m", content=content, title=title, by=by, tags=(tag,))
    clean = scrub_event(event)
    assert (clean.content, clean.title, clean.by, clean.tags) == (
        scrub(content),
        fitted(scrub(title), "title"),
        fitted(scrub(by), "by"),
        (fitted(scrub(tag), "tag"),),
    )


def fitted(text: str, field: str) -> str:
    """A text cut to its field's limit, as the stored event holds it (a redaction marker can be
    longer than the secret it replaces)."""
    most = int(limit(field).high)
    return text if len(text) <= most else text[: most - 1] + "…"


def test_a_redaction_that_pushes_a_text_past_its_limit_is_cut_to_the_limit() -> None:
    from eventmem.core.events import MemorySaved
    from eventmem.core.redact import scrub_event

    key = "AKIA" + "Q" * 16
    title = ("deploy key " + key + " ").ljust(200, "x")[:200]
    clean = scrub_event(MemorySaved(id="e", ts="t", memory="m", content="c", title=title))
    assert key not in clean.title and len(clean.title) == 200 and clean.title.endswith("…")


def test_every_rule_has_lower_case_needles_and_a_kind_of_its_own() -> None:
    from eventmem.core import redact

    kinds = [kind for kind, _ in redact.PATTERNS]
    assert len(kinds) == len(set(kinds)) >= 40
    needles = [needle for groups in redact.NEEDLES.values() for group in groups for needle in group]
    assert needles and all(needle == needle.lower() and needle for needle in needles)
    assert all(redact.NEEDLES[kind] and all(redact.NEEDLES[kind]) for kind in kinds)


def test_scrub_event_does_not_scan_again_a_text_that_scrub_just_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    from eventmem.core import redact
    from eventmem.core.events import MemorySaved

    content = redact.scrub("A long note about the cache. " * 100)
    scanned: list[str] = []
    real = redact.needles_in
    monkeypatch.setattr(redact, "needles_in", lambda text: scanned.append(text) or real(text))
    event = MemorySaved(id="e", ts="t", memory="m", content=content, title="Cache")
    assert redact.scrub_event(event) is event
    assert scanned == ["Cache"]  # the title only: the content is the very string scrub returned
    copy = MemorySaved(id="e", ts="t", memory="m", content="".join(list(content)), title="Cache")
    redact.scrub_event(copy)
    assert content in scanned[-1]  # an equal text that scrub did not return is scanned
