"""The REST API of ``eventmem serve --http``, driven over real HTTP against the real server, run in this
process (tests/test_http_security.py and tests/test_http_mcp.py start it as a process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import git, journal_bytes
from http_server import http_server_in_process


@pytest.fixture
def api(project: Path) -> Iterator[httpx.Client]:
    json_type = {"Content-Type": "application/json"}  # (every change must say so, a DELETE included)
    with (
        http_server_in_process(project) as base,
        httpx.Client(base_url=f"{base}/api/v1/projects/project", headers=json_type) as client,
    ):
        yield client


def save(api: httpx.Client, content: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/memories", json={"content": content, **fields})
    assert response.status_code == 201, response.text
    memory: dict[str, Any] = response.json()["memory"]
    return memory


def test_every_rest_route_answers_with_what_the_service_did(api: httpx.Client, project: Path) -> None:
    first = save(api, "We indent Python with four spaces.", tags=["style"], type="convention", by="alice")
    second = save(api, "The release checklist lives in docs/release.md.", title="Release checklist")
    assert first["created_by"] == "alice" and second["created_by"] == "http"

    got = api.get(f"/memories/{first['id']}")
    assert got.status_code == 200 and got.json()["content"] == "We indent Python with four spaces."
    assert got.headers["etag"].startswith('"')

    updated = api.put(f"/memories/{first['id']}", json={"tags": ["style", "python"]})
    assert updated.status_code == 200 and updated.json()["memory"]["tags"] == ["style", "python"]
    assert updated.headers["etag"] != got.headers["etag"]

    found = api.post("/memories/search", json={"query": "indent python"}).json()
    assert found["hits"][0]["id"] == first["id"]
    listing = api.post("/memories/search", json={"types": ["convention"], "sort": "recent"}).json()
    assert [hit["id"] for hit in listing["hits"]] == [first["id"]]
    recalled = api.post("/memories/recall", json={"query": "release checklist", "limit": 1}).json()
    assert [hit["id"] for hit in recalled["hits"]] == [second["id"]]

    link = api.post(
        "/relationships", json={"source_id": first["id"], "target_id": second["id"], "relation": "relates_to"}
    )
    assert link.status_code == 201 and link.json()["created"] is True
    related = api.get(f"/memories/{first['id']}/related").json()["related"]
    assert [r["id"] for r in related] == [second["id"]]
    graph = api.get("/graph").json()
    assert {n["id"] for n in graph["nodes"]} == {first["id"], second["id"]} and len(graph["links"]) == 1

    history = api.get(f"/memories/{first['id']}/history").json()["history"]
    assert history[0]["type"] == "saved" and sorted(line["type"] for line in history[1:]) == ["linked", "updated"]
    update = next(line for line in history if line["type"] == "updated")
    assert update["changes"]["tags"] == [["style"], ["style", "python"]] and update["by"] == "http"

    stats = api.get("/stats").json()
    assert stats["memories"] == 2 and stats["links"] == 1 and "root" not in stats
    dashboard = api.get("/dashboard").json()
    assert dashboard["by_type"] == {"convention": 1, "general": 1} and dashboard["recent"][0]["type"] == "linked"
    settings = api.get("/settings").json()
    assert {"key": "max_memory_bytes", "value": 65536, "source": "default"} in settings["settings"]

    context_url = api.base_url.copy_with(path="/api/v1/context/project")
    bundle = api.get(context_url).json()
    assert "four spaces" in bundle["text"]
    small = api.post(context_url, json={"max_chars": 200, "types": ["convention"]}).json()
    assert [m["id"] for m in small["memories"]] == [first["id"]]

    promoted = api.post(f"/memories/{second['id']}/promote", json={"reason": "kept"})
    assert promoted.status_code == 200
    replaced = api.post(f"/memories/{second['id']}/supersede", json={"content": "The checklist moved to RELEASE.md."})
    assert replaced.status_code == 201 and replaced.json()["link"]["relation"] == "supersedes"

    deleted = api.delete(f"/memories/{first['id']}", params={"reason": "wrong"})
    assert deleted.status_code == 200 and deleted.json()["memory"]["status"] == "deleted"
    gone = api.get(f"/memories/{first['id']}")
    assert gone.status_code == 410 and "restore" in gone.json()["detail"]
    assert api.get(f"/memories/{first['id']}/related").status_code == 410
    assert api.get(f"/memories/{first['id']}/related", params={"any_status": "1"}).json()["related"] == []
    restored = api.post(f"/memories/{first['id']}/restore", json={})
    assert restored.status_code == 200 and restored.json()["memory"]["status"] == "live"

    events = api.get("/events", params={"limit": 500}).json()["events"]
    segments = sorted((project / ".eventmem" / "journal").glob("*.jsonl"))
    assert len(events) == sum(len(p.read_bytes().splitlines()) for p in segments)
    projects = api.get(api.base_url.copy_with(path="/api/v1/projects")).json()
    assert projects["projects"] == ["project"] and projects["default"] == "project" and "decision" in projects["types"]


def test_an_update_against_a_stale_version_is_refused_and_the_journal_is_untouched(
    api: httpx.Client, project: Path
) -> None:
    memory = save(api, "Deploys go out on Tuesdays.")
    seen = api.get(f"/memories/{memory['id']}").headers["etag"]
    assert api.put(f"/memories/{memory['id']}", json={"title": "Deploy day"}, headers={"If-Match": seen}).is_success
    before = journal_bytes(project)

    stale = api.put(f"/memories/{memory['id']}", json={"title": "Stale edit"}, headers={"If-Match": seen})
    assert stale.status_code == 412
    assert stale.headers["content-type"] == "application/problem+json"
    assert "changed since that version" in stale.json()["detail"]
    stale_delete = api.delete(f"/memories/{memory['id']}", headers={"If-Match": seen})
    assert stale_delete.status_code == 412
    assert journal_bytes(project) == before
    assert api.get(f"/memories/{memory['id']}").json()["title"] == "Deploy day"

    current = api.get(f"/memories/{memory['id']}").headers["etag"]
    fresh = api.put(f"/memories/{memory['id']}", json={"title": "Fresh edit"}, headers={"If-Match": current})
    assert fresh.status_code == 200 and fresh.json()["memory"]["title"] == "Fresh edit"


def test_events_come_in_pages_by_cursor_filtered_by_memory_type_time_and_writer(api: httpx.Client) -> None:
    ids = [save(api, f"Fact number {n} about the build.", by="alice" if n % 2 else "bob")["id"] for n in range(7)]
    api.put(f"/memories/{ids[0]}", json={"importance": 0.9, "by": "carol"})

    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = api.get("/events", params={"limit": 3, **({"cursor": cursor} if cursor else {})}).json()
        seen += page["events"]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == 8 and len({e["id"] for e in seen}) == 8
    assert [e["ts"] for e in seen] == sorted(e["ts"] for e in seen)

    of_first = api.get("/events", params={"memory": ids[0]}).json()["events"]
    assert [e["type"] for e in of_first] == ["saved", "updated"]
    updates = api.get("/events", params={"type": "updated"}).json()["events"]
    assert [e["by"] for e in updates] == ["carol"]
    by_alice = api.get("/events", params={"by": "alice"}).json()["events"]
    assert {e["memory"] for e in by_alice} == {ids[1], ids[3], ids[5]}
    middle = seen[3]["ts"]
    after = api.get("/events", params={"since": middle}).json()["events"]
    before = api.get("/events", params={"until": middle}).json()["events"]
    assert len(after) + len(before) == 8 and after[0]["ts"] == middle

    bad = api.get("/events", params={"cursor": "%%%"})
    assert bad.status_code == 400


def test_as_of_answers_the_memory_as_it_was_then(api: httpx.Client) -> None:
    memory = save(api, "The API is versioned under /v1.")
    first_ts = api.get("/events", params={"memory": memory["id"]}).json()["events"][0]["ts"]
    api.put(f"/memories/{memory['id']}", json={"content": "The API is versioned under /v2."})
    api.delete(f"/memories/{memory['id']}")

    then = api.get(f"/memories/{memory['id']}", params={"as_of": first_ts}).json()
    assert then["memory"]["content"] == "The API is versioned under /v1." and then["memory"]["status"] == "live"
    assert then["as_of"] == f"as of {first_ts}"
    everything = api.get("/as_of", params={"when": first_ts}).json()
    assert [m["id"] for m in everything["memories"]] == [memory["id"]]
    before = api.get(f"/memories/{memory['id']}", params={"as_of": "2001-01-01"})
    assert before.status_code == 404
    nonsense = api.get(f"/memories/{memory['id']}", params={"as_of": "not-a-time-or-revision"})
    assert nonsense.status_code == 400


def test_a_request_the_service_refuses_is_a_problem_with_its_message_and_writes_nothing(
    api: httpx.Client, project: Path
) -> None:
    save(api, "Something to keep.")
    before = journal_bytes(project)
    for response in (
        api.post("/memories", json={"content": "   "}),
        api.post("/memories", json={"content": "x", "importance": 7}),
        api.post("/memories", json={"content": "x", "tags": ["t"] * 40}),
        api.post("/memories", json={"content": "x", "unknown_field": 1}),
        api.post("/memories", content=b"{not json"),
        api.post("/memories/search", json={"limit": 0}),
        api.put("/memories/01NOTTHERE", json={"title": "x"}),
        api.put("/memories/a%0Ab", json={"title": "x"}),
        api.get("/no-such-route"),
        api.patch("/memories", json={}),
    ):
        assert response.status_code in (400, 404, 405), response.text
        problem = response.json()
        assert response.headers["content-type"] == "application/problem+json"
        assert problem["detail"] and "Traceback" not in problem["detail"] and str(project) not in problem["detail"]
    assert journal_bytes(project) == before


def test_the_browser_listing_filters_by_status_type_tags_and_pages(api: httpx.Client) -> None:
    kept = [save(api, f"Kept fact {n}.", tags=["keep"], importance=n / 10)["id"] for n in range(5)]
    dropped = save(api, "A fact to delete.", type="error")["id"]
    api.delete(f"/memories/{dropped}")
    old = save(api, "An old way of doing it.")["id"]
    api.post(f"/memories/{old}/supersede", json={"content": "The new way of doing it."})

    live = api.get("/memories", params={"tag": "keep", "sort": "importance", "limit": 2}).json()
    assert live["total"] == 5 and [m["id"] for m in live["memories"]] == [kept[4], kept[3]]
    second = api.get("/memories", params={"tag": "keep", "sort": "importance", "limit": 2, "offset": 2}).json()
    assert [m["id"] for m in second["memories"]] == [kept[2], kept[1]]
    deleted = api.get("/memories", params={"status": "deleted"}).json()["memories"]
    assert [m["id"] for m in deleted] == [dropped]
    superseded = api.get("/memories", params={"status": "superseded"}).json()["memories"]
    assert [m["id"] for m in superseded] == [old]
    assert api.get("/memories", params={"status": "all", "type": "error"}).json()["total"] == 1
    assert api.get("/memories", params={"status": "nonsense"}).status_code == 400


def test_a_memorys_history_names_the_commit_of_each_line(api: httpx.Client, project: Path) -> None:
    memory = save(api, "Commits carry the journal.")
    git(project, "add", ".eventmem")
    git(project, "commit", "-q", "-m", "memory")
    head = git(project, "rev-parse", "HEAD").strip()[:12]
    api.put(f"/memories/{memory['id']}", json={"title": "After the commit"})

    history = api.get(f"/memories/{memory['id']}/history").json()["history"]
    assert [(line["type"], line["commit"]) for line in history] == [("saved", head), ("updated", "")]


def test_a_memorys_history_tells_its_events_in_the_order_they_happened_and_names_each_links_other_end(
    api: httpx.Client,
) -> None:
    """A strength update and the unlinks carry ``prev``; they are told when they happened, before a
    supersede made later (the REST history once put them after it)."""
    first = save(api, "Sessions are kept in Redis.", title="Session store")
    other = save(api, "Redis runs as a managed service.")
    link = {"source_id": first["id"], "target_id": other["id"], "relation": "depends_on"}
    assert api.post("/relationships", json={**link, "strength": 0.5}).status_code == 201
    assert api.put(f"/memories/{first['id']}", json={"title": "Session store: Redis"}).status_code == 200
    assert api.post("/relationships", json={**link, "strength": 0.8}).status_code in (200, 201)
    assert api.delete(f"/memories/{other['id']}", params={"reason": "we left it"}).status_code == 200
    supersede = api.post(f"/memories/{first['id']}/supersede", json={"content": "Sessions are kept in PostgreSQL."})
    assert supersede.status_code in (200, 201), supersede.text

    history = api.get(f"/memories/{first['id']}/history").json()["history"]
    assert [line["type"] for line in history] == ["saved", "linked", "updated", "linked", "unlinked", "linked"]
    assert [line["ts"] for line in history] == sorted(line["ts"] for line in history)
    assert "supersedes" in history[-1]["note"] and history[-1]["other"]["id"] == supersede.json()["memory"]["id"]
    assert [line["other"]["id"] for line in history[1:5] if line["type"] != "updated"] == [other["id"]] * 3
    assert history[4]["other"]["status"] == "deleted" and "other" not in history[0]
    assert "(strength 0.5 → 0.8)" in history[3]["note"]


def test_a_global_memory_has_its_history_from_the_global_journal(api: httpx.Client) -> None:
    memory = save(api, "Prefer small pull requests everywhere.", scope="global")
    api.put(f"/memories/{memory['id']}", json={"importance": 0.7})
    history = api.get(f"/memories/{memory['id']}/history").json()["history"]
    assert [line["type"] for line in history] == ["saved", "updated"]


def test_a_link_between_a_global_memory_and_a_project_one_is_in_the_graph_and_related_from_both_ends(
    api: httpx.Client,
) -> None:
    personal = save(api, "I review pull requests before lunch.", scope="global")
    own = save(api, "This project's pull requests need two approvals.")
    linked = api.post("/relationships", json={"source_id": personal["id"], "target_id": own["id"]})
    assert linked.status_code == 201, linked.text
    graph = api.get("/graph").json()
    assert {node["id"] for node in graph["nodes"]} == {personal["id"], own["id"]}
    assert [(link["source"], link["target"]) for link in graph["links"]] == [(personal["id"], own["id"])]
    for start, other in ((personal, own), (own, personal)):
        related = api.get(f"/memories/{start['id']}/related").json()["related"]
        assert [step["id"] for step in related] == [other["id"]]


def test_a_memorys_metadata_is_saved_replaced_and_bounded_over_rest(api: httpx.Client) -> None:
    memory = save(api, "The nightly export runs at 02:00 UTC.", metadata={"owner": "ops"})
    assert memory["metadata"] == {"owner": "ops"} and "source" not in memory  # (left out when empty)
    updated = api.put(f"/memories/{memory['id']}", json={"metadata": {"owner": "data", "ticket": "OPS-12"}})
    assert updated.status_code == 200 and updated.json()["memory"]["metadata"] == {"owner": "data", "ticket": "OPS-12"}
    refused = api.put(f"/memories/{memory['id']}", json={"metadata": {"note": "x" * 4097}})
    assert refused.status_code in (400, 422) and "metadata" in refused.text
    assert api.get(f"/memories/{memory['id']}").json()["metadata"] == {"owner": "data", "ticket": "OPS-12"}
    for refused in (  # a key that is no name: which one, and why, as the tools say it
        api.post("/memories", json={"content": "Keys are names.", "metadata": {"owner": "ops", "bad key": "x"}}),
        api.put(f"/memories/{memory['id']}", json={"metadata": {"bad key": "x"}}),
    ):
        detail = refused.json()["detail"]
        assert refused.status_code == 400 and "metadata key" in detail and "'bad key'" in detail, detail
        assert "letters, digits and _.-" in detail and "regex" not in detail, detail


def test_the_team_memory_routes_answer_without_a_project_on_a_single_project_server(project: Path) -> None:
    """The paths an agent without MCP is told (POST /api/v1/memories ...) need no /projects/NAME/."""
    json_type = {"Content-Type": "application/json"}  # (every change must say so, a DELETE included)
    with http_server_in_process(project) as base, httpx.Client(base_url=f"{base}/api/v1", headers=json_type) as api:
        made = api.post("/memories", json={"content": "The billing service retries three times.", "type": "fix"})
        assert made.status_code == 201, made.text
        first = made.json()["memory"]
        second = api.post("/memories", json={"content": "Retries back off exponentially."}).json()["memory"]
        assert api.get(f"/memories/{first['id']}").json()["content"] == "The billing service retries three times."
        updated = api.put(f"/memories/{first['id']}", json={"title": "Billing retries"})
        assert updated.status_code == 200 and updated.json()["memory"]["title"] == "Billing retries"
        found = api.post("/memories/search", json={"query": "billing retries"}).json()["hits"]
        assert found[0]["id"] == first["id"]
        recalled = api.post("/memories/recall", json={"query": "back off", "limit": 1}).json()["hits"]
        assert [hit["id"] for hit in recalled] == [second["id"]]
        link = api.post("/relationships", json={"source_id": first["id"], "target_id": second["id"]})
        assert link.status_code == 201, link.text
        related = api.get(f"/memories/{first['id']}/related").json()["related"]
        assert [r["id"] for r in related] == [second["id"]]
        assert [e["type"] for e in api.get(f"/memories/{first['id']}/history").json()["history"]] == [
            "saved",
            "updated",
            "linked",
        ]
        assert api.get("/stats").json()["memories"] == 2
        assert "retries" in api.get("/context").json()["text"]
        deleted = api.delete(f"/memories/{second['id']}")
        assert deleted.status_code == 200 and deleted.json()["memory"]["status"] == "deleted"
        named = api.get(f"/projects/project/memories/{first['id']}")  # the project-named routes stay
        assert named.status_code == 200 and named.json()["title"] == "Billing retries"


def test_with_several_projects_the_unprefixed_routes_are_the_default_projects_or_refused(tmp_path: Path) -> None:
    roots = {}
    for name in ("alpha", "beta"):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        git(roots[name], "init", "-q", "-b", "main")
    options = [arg for name, root in roots.items() for arg in ("--project", f"{name}={root}")]
    with http_server_in_process(tmp_path, *options) as base:
        refused = httpx.post(f"{base}/api/v1/memories", json={"content": "Which project?"})
        assert refused.status_code == 400 and "--default-project" in refused.json()["detail"]
        assert "alpha, beta" in refused.json()["detail"]
    with http_server_in_process(tmp_path, *options, "--default-project", "beta") as base:
        made = httpx.post(f"{base}/api/v1/memories", json={"content": "A fact of beta."})
        assert made.status_code == 201, made.text
        memory_id = made.json()["memory"]["id"]
        assert httpx.get(f"{base}/api/v1/projects/beta/memories/{memory_id}").status_code == 200
        assert httpx.get(f"{base}/api/v1/projects/alpha/memories/{memory_id}").status_code == 404


def test_a_link_is_named_as_the_tool_names_it_and_the_old_rest_names_still_work(api: httpx.Client) -> None:
    a, b, c = (save(api, f"Fact {n} of the link test.")["id"] for n in "abc")
    new = api.post("/relationships", json={"source_id": a, "target_id": b, "relation": "depends_on"})
    assert new.status_code == 201 and new.json()["link"]["source"] == a and new.json()["link"]["target"] == b
    old = api.post("/relationships", json={"source": a, "target": c, "relation": "depends_on"})
    assert old.status_code == 201 and old.json()["link"]["target"] == c
    missing = api.post("/relationships", json={"target_id": b})
    assert missing.status_code == 400 and "source_id is required" in missing.json()["detail"]
    clash = api.post("/relationships", json={"source_id": a, "source": c, "target_id": b})
    assert clash.status_code == 400 and "source_id" in clash.json()["detail"]


def test_a_search_and_a_recall_answer_their_memories_as_results_as_the_tools_do_and_hits_still(
    api: httpx.Client,
) -> None:
    memory = save(api, "Invoices are numbered per customer and year.", title="Invoice numbers")
    for route in ("/memories/search", "/memories/recall"):
        answer = api.post(route, json={"query": "invoice numbering"}).json()
        assert [hit["id"] for hit in answer["results"]] == [memory["id"]], answer
        assert answer["hits"] == answer["results"]  # (the old name, for one release)


def test_every_write_answers_with_the_memory_in_one_envelope(api: httpx.Client) -> None:
    memory = save(api, "Envelope test memory.")
    path = f"/memories/{memory['id']}"
    answers = [
        api.put(path, json={"title": "Enveloped"}),
        api.post(path + "/promote", json={}),
        api.delete(path),
        api.post(path + "/restore", json={}),
    ]
    for answer in answers:
        assert answer.is_success and set(answer.json()) == {"memory"}, answer.text
        assert answer.json()["memory"]["id"] == memory["id"]


def test_an_update_with_ttl_zero_makes_the_memory_long_term_as_the_tool_does(api: httpx.Client) -> None:
    memory = save(api, "A passing note about the flaky runner.", ttl_seconds=3600)
    assert memory["ttl_seconds"] == 3600
    kept = api.put(f"/memories/{memory['id']}", json={"ttl_seconds": 0})
    assert kept.status_code == 200, kept.text
    assert kept.json()["memory"]["ttl_seconds"] is None and kept.json()["memory"]["expires_at"] is None


def test_events_since_or_until_something_that_is_not_a_time_is_refused(api: httpx.Client) -> None:
    save(api, "An event to page over.")
    for name in ("since", "until"):
        refused = api.get("/events", params={name: "garbage"})
        assert refused.status_code == 400 and name in refused.json()["detail"] and "garbage" in refused.json()["detail"]
    assert len(api.get("/events", params={"since": "2001-01-01"}).json()["events"]) == 1
