"""The web UI in a real browser (Debian's chromium driven by Playwright) against a real server.

Screenshots of every page go to ``EVENTMEM_SCREENSHOTS`` when set (the README's are made with
``EVENTMEM_SCREENSHOTS=docs/screenshots``), else to a temporary folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ProcessGroup, eventmem_command
from http_server import WAIT, http_server

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
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


def test_the_graph_renders_the_links_and_a_node_leads_to_its_memory(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/graph", "graph")
    assert page.locator("svg.graph a.node").count() == 2
    assert page.locator("svg.graph line").count() == 1
    page.locator(f"svg.graph a.node[data-id='{made['staging']['id']}']").click()
    page.wait_for_selector("main .view[data-view=detail]")
    assert made["staging"]["content"] in page.locator("pre.content").inner_text()


def test_the_graph_zooms_pans_and_lets_a_node_be_dragged_without_leaving_the_page(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    page = tab.open("#/graph", "graph")
    viewport = page.locator("svg.graph g.viewport")
    page.get_by_role("button", name="Zoom in").click()
    assert "scale(1.25)" in (viewport.get_attribute("transform") or "")
    page.get_by_role("button", name="Reset view").click()
    assert "scale(1)" in (viewport.get_attribute("transform") or "")
    box = page.locator("svg.graph").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -200)
    assert "scale(1.2)" in (viewport.get_attribute("transform") or "")
    node = page.locator(f"svg.graph a.node[data-id='{made['staging']['id']}'] circle")
    line = page.locator("svg.graph line").first
    before = (node.get_attribute("cx"), node.get_attribute("cy"))
    ends = [line.get_attribute(name) for name in ("x1", "y1", "x2", "y2")]
    circle = node.bounding_box()
    assert circle is not None
    x, y = circle["x"] + circle["width"] / 2, circle["y"] + circle["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y + 30, steps=5)
    page.mouse.up()
    after = (node.get_attribute("cx"), node.get_attribute("cy"))
    assert after != before
    assert [line.get_attribute(name) for name in ("x1", "y1", "x2", "y2")] != ends
    assert page.evaluate("location.hash") == "#/graph"  # the drag did not follow the node's link


def test_the_timeline_shows_what_as_of_answers(site: tuple[Page, str]) -> None:
    tab, api = site
    made = seed(api)
    httpx.delete(f"{api}/memories/{made['style']['id']}")
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
