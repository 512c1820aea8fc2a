"""The web UI in a real browser (Debian's chromium driven by Playwright) against a real server.

Screenshots of every page go to ``EVENTMEM_SCREENSHOTS`` when set, else to a temporary folder (the
documentation's, of a realistic project, are made by ``python tools/screenshots.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ProcessGroup, eventmem_command, write_events
from http_server import WAIT, http_server

from eventmem.core.events import LinkAdded, MemorySaved
from eventmem.core.ids import new_id, now_iso

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)"),
    pytest.mark.browser,
]
SCREENSHOTS = os.environ.get("EVENTMEM_SCREENSHOTS")  # read before the fixtures clear EVENTMEM_*
TIMEOUT_MS = WAIT * 1000
PAGES = {
    "dashboard": "#/",
    "memories": "#/memories",
    "detail": "#/memory/{id}",
    "search": "#/search",
    "graph": "#/graph",
    "timeline": "#/timeline",
    "settings": "#/settings",
}
VIEW = {"memories": "browser"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One browser for the UI suite; closed with this module, since Playwright's synchronous driver
    keeps an event loop running in the main thread (the asyncio tests of later modules need it free)."""
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Page:
    """A browser tab on the server, collecting console errors."""

    def __init__(self, browser: Any, base: str, **options: Any) -> None:
        self.context = browser.new_context(**options)
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.base = base
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, hash_: str, view: str) -> Any:
        self.page.goto(f"{self.base}/{hash_}")
        self.page.wait_for_selector(f"main .view[data-view={view}]")
        return self.page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def site(processes: ProcessGroup, project: Path, browser: Any) -> Iterator[tuple[Page, str]]:
    with http_server(processes, project) as base:
        page = Page(browser, base)
        yield page, f"{base}/api/v1/projects/project"
        page.close()
        assert page.errors == []


def seed(api: str) -> dict[str, dict[str, Any]]:
    def save(content: str, **fields: Any) -> dict[str, Any]:
        memory: dict[str, Any] = httpx.post(f"{api}/memories", json={"content": content, **fields}).json()["memory"]
        return memory

    made = {
        "deploy": save(
            "We deploy with blue-green switches.", title="Blue-green deploys", type="decision", tags=["ops"]
        ),
        "staging": save("The staging cluster mirrors production.", tags=["ops", "env"], importance=0.8),
        "style": save("Python code is formatted by ruff, lines of 120.", type="convention", tags=["style"]),
    }
    link = {"source": made["deploy"]["id"], "target": made["staging"]["id"], "relation": "depends_on"}
    assert httpx.post(f"{api}/relationships", json=link).status_code == 201
    return made


def test_every_page_loads_without_console_errors_on_a_laptop_and_a_phone(
    processes: ProcessGroup, project: Path, browser: Any, tmp_path: Path
) -> None:
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    with http_server(processes, project) as base:
        made = seed(f"{base}/api/v1/projects/project")
        for device, options in (
            ("laptop", {"viewport": {"width": 1280, "height": 800}}),
            ("phone", {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}),
        ):
            tab = Page(browser, base, **options)
            for name, hash_ in PAGES.items():
                page = tab.open(hash_.format(id=made["deploy"]["id"]), VIEW.get(name, name))
                assert page.locator("main h2").first.is_visible()
                page.screenshot(path=str(folder / f"{name}-{device}.png"), full_page=True)
            if device == "phone":  # nothing wider than the screen but tables, which scroll in their box
                assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1
            tab.close()
            assert tab.errors == [], (device, tab.errors)
    assert len(list(folder.glob("*.png"))) == 2 * len(PAGES)


def test_a_search_shows_each_hit_and_why_it_matched(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/search", "search")
    page.get_by_label("Query").fill("blue-green deploy")
    page.get_by_role("button", name="Search").click()
    first = page.locator("ol.results li").first
    first.wait_for()
    assert first.get_attribute("data-id") == made["deploy"]["id"]
    assert "keyword" in first.locator(".why").inner_text() and "vector" in first.locator(".why").inner_text()


def test_a_query_being_typed_is_kept_when_a_change_arrives_and_the_results_then_follow_changes(
    site: tuple[Page, str],
) -> None:
    tab, api = site
    seed(api)
    page = tab.open("#/search", "search")
    page.get_by_label("Query").fill("blue-green deploy")
    checked = int(page.locator("main").get_attribute("data-checked") or 0)
    httpx.post(f"{api}/memories", json={"content": "Another note saved while the query is typed."})
    page.wait_for_function("n => Number(document.querySelector('main').dataset.checked || 0) > n", arg=checked)
    assert page.get_by_label("Query").input_value() == "blue-green deploy"  # (not pulled from under the user)

    page.get_by_role("button", name="Search").click()
    page.locator("ol.results li").first.wait_for()
    httpx.post(f"{api}/memories", json={"content": "A blue-green deploy runbook, saved after the search."})
    page.wait_for_selector("ol.results li:has-text('A blue-green deploy runbook')")  # (a live refresh asks again)


def test_an_edit_is_saved_and_shows_in_the_history_then_delete_and_restore(site: tuple[Page, str]) -> None:
    tab, api = site
    memory = seed(api)["style"]
    page = tab.open(f"#/memory/{memory['id']}", "detail")
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Title").fill("Formatting rule")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_selector("main h2:has-text('Formatting rule')")
    assert httpx.get(f"{api}/memories/{memory['id']}").json()["title"] == "Formatting rule"
    history = page.locator("tr.history-line")
    assert history.count() == 2 and "Formatting rule" in history.nth(1).inner_text()

    page.get_by_label("Reason").fill("outdated")
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Restore").wait_for()
    assert httpx.get(f"{api}/memories/{memory['id']}").status_code == 410
    page.get_by_role("button", name="Restore").click()
    page.get_by_role("button", name="Edit").wait_for()
    assert httpx.get(f"{api}/memories/{memory['id']}").json()["status"] == "live"
    assert page.locator("tr.history-line").count() == 4


def test_a_live_refresh_that_ends_after_a_delete_leaves_the_deleted_page_and_logs_no_error(
    site: tuple[Page, str],
) -> None:
    tab, api = site
    memory = seed(api)["style"]
    page = tab.open(f"#/memory/{memory['id']}", "detail")
    renders_checked = "n => Number(document.querySelector('main').dataset.checked || 0) >= n"
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/related*", hold)  # the live refresh's last request waits until the delete is on screen
    httpx.post(f"{api}/memories", json={"content": "Another agent's note arrives."})
    while not held:
        page.wait_for_timeout(50)
    checked = page.evaluate("Number(document.querySelector('main').dataset.checked || 0)")
    page.get_by_label("Reason").fill("outdated")
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Restore").wait_for()
    page.wait_for_function(renders_checked, arg=checked + 2)  # the click's render and the delete's live one
    held[0].continue_()
    page.unroute("**/related*", hold)
    page.wait_for_function(renders_checked, arg=checked + 3)  # the held refresh, begun before the delete
    assert page.get_by_role("button", name="Restore").is_visible()
    page.get_by_role("button", name="Restore").click()
    page.get_by_role("button", name="Edit").wait_for()


def test_the_edit_form_sets_and_clears_a_lifetime_and_the_detail_shows_metadata(site: tuple[Page, str]) -> None:
    tab, api = site
    made = httpx.post(
        f"{api}/memories", json={"content": "Rotate the signing key monthly.", "metadata": {"ticket": "SEC-7"}}
    )
    memory = made.json()["memory"]
    page = tab.open(f"#/memory/{memory['id']}", "detail")
    assert "SEC-7" in page.locator("dl.fields").inner_text()
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Lifetime in seconds (empty: long-term)").fill("3600")
    page.get_by_role("button", name="Save changes").click()
    page.locator("tr.history-line").nth(1).wait_for()
    stored = httpx.get(f"{api}/memories/{memory['id']}").json()
    assert stored["ttl_seconds"] == 3600 and stored["expires_at"]
    page.get_by_role("button", name="Edit").click()
    assert page.get_by_label("Lifetime in seconds (empty: long-term)").input_value() == "3600"
    page.get_by_label("Title").fill("Key rotation")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_selector("main h2:has-text('Key rotation')")
    assert httpx.get(f"{api}/memories/{memory['id']}").json()["expires_at"] == stored["expires_at"]
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Lifetime in seconds (empty: long-term)").fill("")
    page.get_by_role("button", name="Save changes").click()
    page.locator("tr.history-line").nth(3).wait_for()
    cleared = httpx.get(f"{api}/memories/{memory['id']}").json()
    assert cleared["ttl_seconds"] is None and cleared["expires_at"] is None


def test_the_graph_draws_each_link_as_an_arrow_with_its_relation_and_a_node_leads_to_its_memory(
    site: tuple[Page, str],
) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/graph", "graph")
    assert page.locator("svg.graph a.node").count() == 2
    edge = page.locator("svg.graph path.edge")
    assert edge.count() == 1
    assert edge.get_attribute("data-source") == made["deploy"]["id"]
    assert edge.get_attribute("data-target") == made["staging"]["id"]
    assert edge.get_attribute("marker-end") == "url(#graph-arrow)"
    assert page.locator("svg.graph marker#graph-arrow path").count() == 1
    relation = page.locator("svg.graph text.edge-label")
    assert relation.is_visible() and relation.text_content() == "depends on"
    fills = {
        page.locator(f"svg.graph a.node[data-id='{m['id']}'] circle").get_attribute("fill")
        for m in (made["deploy"], made["staging"])
    }
    assert len(fills) == 2  # a decision and a general memory, in two colours
    assert page.locator(".legend li").all_inner_texts() == ["decision 1", "general 1"]
    page.locator(f"svg.graph a.node[data-id='{made['staging']['id']}'] circle").click()
    page.wait_for_selector("main .view[data-view=detail]")
    assert made["staging"]["content"] in page.locator("pre.content").inner_text()


def circle_boxes(page: Any) -> list[dict[str, float]]:
    """Where each memory's circle is on the screen, and (first) the graph's own box: read at once, so a
    live re-render in between cannot mix two drawings."""
    boxes: list[dict[str, float]] = page.evaluate(
        """() => [document.querySelector('svg.graph'), ...document.querySelectorAll('svg.graph a.node circle')]
             .map((c) => {
               const b = c.getBoundingClientRect();
               return { id: c.parentElement.dataset.id, x: b.x, y: b.y, right: b.right, bottom: b.bottom };
             })"""
    )
    return boxes


def test_the_graph_zooms_pans_and_lets_a_node_be_dragged_without_leaving_the_page(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/graph", "graph")
    graph = page.locator("svg.graph")
    assert graph.get_attribute("data-scale") == "1.000"
    page.get_by_role("button", name="Zoom in").click()
    assert graph.get_attribute("data-scale") == "1.250"
    page.get_by_role("button", name="Fit").click()
    assert graph.get_attribute("data-scale") == "1.000"
    box = graph.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -200)
    page.wait_for_function("document.querySelector('svg.graph').dataset.scale > '1.000'")

    node = page.locator(f"svg.graph a.node[data-id='{made['staging']['id']}'] circle")
    edge = page.locator("svg.graph path.edge").first
    before, path = (node.get_attribute("cx"), node.get_attribute("cy")), edge.get_attribute("d")
    circle = node.bounding_box()
    assert circle is not None
    x, y = circle["x"] + circle["width"] / 2, circle["y"] + circle["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y + 30, steps=5)
    page.mouse.up()
    page.wait_for_function("d => document.querySelector('svg.graph path.edge').getAttribute('d') !== d", arg=path)
    assert (node.get_attribute("cx"), node.get_attribute("cy")) != before
    assert page.evaluate("location.hash") == "#/graph"  # the drag did not follow the node's link

    start = (box["x"] + 5, box["y"] + box["height"] - 5)  # the background: a drag pans every memory
    where = circle_boxes(page)[1:]
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(start[0] + 60, start[1] - 20, steps=5)
    page.mouse.up()
    # moves are drawn once a frame: wait for the frame that drew the last one, not the first that moved
    page.wait_for_function(
        "x => Math.round(document.querySelector('svg.graph a.node circle').getBoundingClientRect().x - x) === 60",
        arg=where[0]["x"],
        timeout=3000,
    )
    moved = circle_boxes(page)[1:]
    assert all(
        round(b["x"] - a["x"]) == 60 and round(b["y"] - a["y"]) == -20 for a, b in zip(where, moved, strict=True)
    )


def test_a_live_refresh_keeps_the_graphs_zoom_until_the_graph_itself_changes(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/graph", "graph")
    page.get_by_role("button", name="Zoom in").click()
    page.evaluate("document.querySelector('svg.graph').dataset.mark = 'seen'")
    checked = int(page.locator("main").get_attribute("data-checked") or 0)

    httpx.post(f"{api}/memories", json={"content": "An unlinked note: not in the graph."})
    page.wait_for_function("n => Number(document.querySelector('main').dataset.checked || 0) > n", arg=checked)
    graph = page.locator("svg.graph")
    assert graph.get_attribute("data-mark") == "seen" and graph.get_attribute("data-scale") == "1.250"

    link = {"source_id": made["style"]["id"], "target_id": made["deploy"]["id"], "relation": "relates_to"}
    assert httpx.post(f"{api}/relationships", json=link).status_code == 201
    page.wait_for_function("() => document.querySelectorAll('svg.graph a.node').length === 3")
    assert page.locator("svg.graph").get_attribute("data-mark") is None


def linked_project(project: Path, count: int) -> tuple[list[MemorySaved], int]:
    """``count`` memories of four types in ten clusters, each linked to two before it in its cluster and
    every cluster to the next: written to the journal as another process of the clone would."""
    kinds = ("decision", "fix", "error", "convention")
    ts = now_iso()
    saved = [
        MemorySaved(
            id=new_id(),
            ts=ts,
            memory=new_id(),
            kind=kinds[i % 4],
            title=f"Memory {i} of cluster {i % 10}",
            content=f"Note {i} about part {i % 10} of the system.",
            importance=(i % 5) / 5,
        )
        for i in range(count)
    ]
    relations = ("depends_on", "fixes")
    links = [
        LinkAdded(
            id=new_id(),
            ts=ts,
            link=new_id(),
            source=saved[i].memory,
            target=saved[i - back].memory,
            relation=relations[i % 2],
        )
        for i in range(10, count)
        for back in (10, 20)
        if i - back >= 0
    ]
    links += [
        LinkAdded(
            id=new_id(), ts=ts, link=new_id(), source=saved[c].memory, target=saved[c + 1].memory, relation="related_to"
        )
        for c in range(9)
    ]
    write_events(project, [*saved, *links])
    return saved, len(links)


@pytest.mark.parametrize("device", ["laptop", "phone"])
def test_a_graph_of_500_linked_memories_settles_inside_the_view_and_a_click_opens_a_memory(
    processes: ProcessGroup, project: Path, browser: Any, device: str
) -> None:
    saved, edges = linked_project(project, 500)
    options = {
        "laptop": {"viewport": {"width": 1280, "height": 800}},
        "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
    }
    with http_server(processes, project) as base:
        tab = Page(browser, base, **options[device])
        page = tab.open("#/graph", "graph")
        if SCREENSHOTS:
            page.screenshot(path=str(Path(SCREENSHOTS) / f"graph-500-{device}.png"))
        frame, *boxes = circle_boxes(page)
        assert len(boxes) == 500
        outside = [
            b
            for b in boxes
            if b["x"] < frame["x"]
            or b["y"] < frame["y"]
            or b["right"] > frame["right"]
            or b["bottom"] > frame["bottom"]
        ]
        assert outside == []
        # spread out, not piled up: most memories have a free circle's width around them
        centres = [((b["x"] + b["right"]) / 2, (b["y"] + b["bottom"]) / 2) for b in boxes]
        nearest = sorted(
            min(((x - u) ** 2 + (y - v) ** 2) ** 0.5 for j, (u, v) in enumerate(centres) if j != i)
            for i, (x, y) in enumerate(centres)
        )
        assert nearest[len(nearest) // 10] >= 4, nearest[:60]
        # every link an arrow with its relation; names for the most linked ones, not for all 500
        assert page.locator("svg.graph path.edge[marker-end='url(#graph-arrow)']").count() == edges
        assert page.locator("svg.graph text.edge-label").count() == edges
        names = page.evaluate(
            """() => [...document.querySelectorAll('svg.graph text.name')].filter((t) => t.getBBox().width > 0)
                 .map((t) => t.getBoundingClientRect()).map((b) => [b.left, b.top, b.right, b.bottom])"""
        )
        assert 5 <= len(names) <= 60
        overlapping = [
            (a, b)
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
        ]
        assert overlapping == []
        assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
        # a click on a memory's circle (the one drawn on top where circles touch) opens that memory
        x, y, target = page.evaluate(
            """(id) => {
                 const b = document.querySelector(`svg.graph a.node[data-id='${id}'] circle`).getBoundingClientRect();
                 const x = b.x + b.width / 2, y = b.y + b.height / 2;
                 return [x, y, document.elementFromPoint(x, y).closest('a.node').dataset.id];
               }""",
            saved[250].memory,
        )
        page.mouse.click(x, y)
        page.wait_for_selector("main .view[data-view=detail]")
        assert page.evaluate("location.hash") == f"#/memory/{target}"
        titles = {m.memory: m.title for m in saved}
        assert page.locator("main h2").inner_text() == titles[target]
        tab.close()
        assert tab.errors == []


def test_the_dashboards_activity_names_the_memories_and_links_to_them(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    link = httpx.post(
        f"{api}/relationships",
        json={"source": made["style"]["id"], "target": made["deploy"]["id"], "relation": "solves"},
    ).json()
    page = tab.open("#/", "dashboard")
    first = page.locator("tr.activity").first
    assert first.locator("td").nth(1).inner_text() == "linked · solves"
    links = first.locator("td.memories a")
    assert links.all_inner_texts() == ["Python code is formatted by ruff, lines of 120.", "Blue-green deploys"]
    hrefs = [links.nth(i).get_attribute("href") for i in range(2)]
    assert hrefs == [f"#/memory/{made['style']['id']}", f"#/memory/{made['deploy']['id']}"]
    assert link["link"]["id"] not in page.locator("tr.activity").first.inner_html()
    saves = page.locator("tr.activity:has(td:text-is('saved')) td.memories a")
    assert "Blue-green deploys" in saves.all_inner_texts()
    links.nth(1).click()
    page.wait_for_selector("main .view[data-view=detail]")
    assert page.locator("main h2").inner_text() == "Blue-green deploys"

    # a delete removes the memory's links: each unlink names the two memories it joined, the deleted one struck,
    # also when nothing else in the recent activity names them
    for n in range(20):
        httpx.post(f"{api}/memories", json={"content": f"Filler note {n} between the link and its removal."})
    deleted = httpx.delete(f"{api}/memories/{made['staging']['id']}", headers={"Content-Type": "application/json"})
    assert deleted.status_code == 200
    page = tab.open("#/", "dashboard")
    unlinked = page.locator("tr.activity:has(td:text-is('unlinked · depends on')) td.memories a")
    assert unlinked.all_inner_texts() == ["Blue-green deploys", made["staging"]["summary"]]
    assert unlinked.nth(1).get_attribute("class") == "gone"


def test_a_memorys_history_names_the_memories_its_links_joined_and_a_strength_change(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)  # deploy depends_on staging, at strength 1
    again = {"source_id": made["deploy"]["id"], "target_id": made["staging"]["id"], "relation": "depends_on"}
    assert httpx.post(f"{api}/relationships", json={**again, "strength": 0.4}).status_code in (200, 201)
    deleted = httpx.delete(f"{api}/memories/{made['staging']['id']}", headers={"Content-Type": "application/json"})
    assert deleted.status_code == 200
    page = tab.open(f"#/memory/{made['deploy']['id']}", "detail")
    rows = page.locator("tr.history-line")
    types = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]
    assert types == ["saved", "linked", "linked", "unlinked"], types
    staging = made["staging"]["summary"]
    for i in (1, 2, 3):  # each names the other memory by its title, linked to it, and never by an id
        named = rows.nth(i).locator("td").nth(3)
        assert named.locator("a").all_inner_texts() == [staging], named.inner_html()
        assert named.locator("a").get_attribute("href") == f"#/memory/{made['staging']['id']}"
        assert made["staging"]["id"] not in named.inner_text()
    assert "(strength 1 → 0.4)" in rows.nth(2).inner_text()
    assert rows.nth(3).locator("a").get_attribute("class") == "gone"


def test_a_memory_opens_by_a_unique_prefix_of_its_id_in_any_case(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open(f"#/memory/{made['deploy']['id'][:20].lower()}", "detail")  # (ten random characters in it)
    assert page.locator("main h2").inner_text() == "Blue-green deploys"
    assert made["deploy"]["id"] in page.locator("main dl.fields").inner_text()


def test_a_memory_id_that_names_nothing_sends_a_person_to_the_search_page(site: tuple[Page, str]) -> None:
    tab, _ = site
    page = tab.open("#/memory/01M8TRZZZZZZZZZZZZZZZZZZZZ", "detail")
    alert = page.locator("main .alert").inner_text()
    assert "No memory has the id 01M8TRZZZZZZZZZZZZZZZZZZZZ" in alert and "Search page" in alert
    assert "/api/v1" not in alert and "POST" not in alert
    assert page.locator("main a[href='#/search']").count() == 1
    tab.errors.clear()  # (the browser logs the 404 it was answered)


def test_on_a_phone_the_memories_and_the_dashboard_fit_the_screen(
    processes: ProcessGroup, project: Path, browser: Any
) -> None:
    kinds = ("decision", "conversation_summary", "code_pattern", "recent_change", "coding_style")
    write_events(
        project,
        [
            MemorySaved(
                id=new_id(),
                ts=now_iso(),
                memory=new_id(),
                kind=kinds[i % 5],
                tags=("infrastructure-migration",),
                title=f"Memory {i}: src/billing/adapters/stripe_webhook_idempotency_handler_{i}.py",
                content="See https://internal.example.invalid/runbooks/payments/webhooks/idempotency?step=4",
            )
            for i in range(30)
        ],
    )
    with http_server(processes, project) as base:
        for width, options in ((390, {"is_mobile": True, "has_touch": True}), (1280, {})):
            tab = Page(browser, base, viewport={"width": width, "height": 844}, **options)
            page = tab.open("#/memories", "browser")
            assert page.locator("main tr[data-id]").count() == 30
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            table = page.locator("main .scroll").first
            assert table.evaluate("e => e.scrollWidth <= e.clientWidth")  # nothing hidden to scroll to
            rows = page.locator("main tr[data-id]").evaluate_all("rs => rs.map((r) => r.getBoundingClientRect().right)")
            assert max(rows) <= width
            page = tab.open("#/", "dashboard")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            spills = page.evaluate(
                """() => [...document.querySelectorAll('.card:has(table)')].filter((card) => {
                     const c = card.getBoundingClientRect(), t = card.querySelector('table').getBoundingClientRect();
                     return t.right > c.right + 0.5 || t.left < c.left - 0.5;
                   }).length"""
            )
            assert spills == 0
            tab.close()
            assert tab.errors == []


def test_the_timeline_shows_what_as_of_answers(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    httpx.delete(f"{api}/memories/{made['style']['id']}", headers={"Content-Type": "application/json"})
    page = tab.open("#/timeline", "timeline")
    slider = page.locator("#timeline-slider")
    for position in (0, 2, int(slider.get_attribute("max") or 0)):
        slider.fill(str(position))
        shown = page.locator("#timeline-when").inner_text()
        page.wait_for_function(
            "ts => document.querySelector('#timeline-result p')?.textContent.startsWith('as of ' + ts)", arg=shown
        )
        rows = page.locator("#timeline-result tr[data-id]")
        in_page = {rows.nth(i).get_attribute("data-id"): rows.nth(i).locator("td").nth(2).inner_text()
                   for i in range(rows.count())}  # fmt: skip
        answer = httpx.get(f"{api}/as_of", params={"when": shown}).json()["memories"]
        assert in_page == {m["id"]: m["status"] for m in answer}


def test_a_save_by_another_process_appears_without_reload(site: tuple[Page, str], project: Path) -> None:
    tab, _ = site
    page = tab.open("#/memories", "browser")
    rendered = page.locator("main").get_attribute("data-rendered")
    subprocess.run(
        eventmem_command("save", "Saved by another process on the command line."),
        cwd=project,
        check=True,
        capture_output=True,
        timeout=WAIT,
    )
    page.wait_for_selector("main td:has-text('Saved by another process')")
    assert page.locator("main").get_attribute("data-rendered") != rendered
    assert int(page.locator("#live").get_attribute("data-changes") or 0) >= 1


@pytest.mark.browser
def test_a_memory_a_lifecycle_hook_recorded_is_marked_in_the_list_and_the_detail(
    site: tuple[Page, str], project: Path
) -> None:
    tab, _ = site
    for text, by in (("Recorded at the end of a session.", "hook:claude-code@s-1"), ("Saved by hand.", "ana")):
        subprocess.run(
            eventmem_command("save", text, "--by", by), cwd=project, check=True, capture_output=True, timeout=WAIT
        )
    page = tab.open("#/memories", "browser")
    hooked = page.locator("main tr", has_text="Recorded at the end of a session.")
    assert hooked.locator(".hook-mark").inner_text() == "hook"
    assert "hook:claude-code@s-1" in (hooked.locator(".hook-mark").get_attribute("title") or "")
    assert page.locator("main tr", has_text="Saved by hand.").locator(".hook-mark").count() == 0
    hooked.locator("a").first.click()
    page.wait_for_selector("main .view[data-view=detail]")
    assert page.locator("main h2 .hook-mark").inner_text() == "hook"
