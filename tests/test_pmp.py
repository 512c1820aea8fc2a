"""The project-memory protocol's pure side: rendering, parsing, placeholders, duplicates, the plan;
and the parsing of git's output for the working-tree summary."""

from __future__ import annotations

import pytest

from eventmem.context.optimization import plan_optimization, tidy
from eventmem.context.parse import dedupe_key, entry_key, import_id, parse_section
from eventmem.context.render import is_placeholder, render_section
from eventmem.core.sections import SECTIONS, Entry, section_named
from eventmem.journal.worktree import diff_summary, parse_numstat, parse_porcelain

DECISIONS = section_named("decisions")
CHANGES = section_named("recentChanges")
TODO = section_named("todo")
PROJECT = section_named("project")
TASK = section_named("currentTask")
assert DECISIONS and CHANGES and TODO and PROJECT and TASK


def keys(entries: list[Entry]) -> list[str]:
    return [entry_key(e.title, e.content) for e in entries]


@pytest.mark.parametrize(
    "entries",
    [
        [Entry("a", "2026-01-02 — Use SQLite", "Because it is one file.\n\nRationale: no server.")],
        [Entry("a", "", "2026-01-02: Added X"), Entry("b", "", "Multi\n\n    code block\nend")],
        [Entry("a", "", "[ ] Write docs"), Entry("b", "", "[x] Set up CI")],
        [Entry("a", "Titled", "Body"), Entry("b", "", "Untitled first line\nand more")],
    ],
    ids=["titled", "bullets", "todo", "mixed"],
)
def test_parsing_a_rendered_list_section_gives_back_the_same_entries(entries: list[Entry]) -> None:
    for section in (DECISIONS, CHANGES, TODO):
        parsed = parse_section(section, render_section(section, entries))
        assert [entry_key(t, c) for t, c in parsed.entries] == keys(entries)


def test_a_singleton_renders_under_its_title_and_parses_back_without_it() -> None:
    text = render_section(TASK, [Entry("section:current-task", "", "Ship the export.\n\n- step one")])
    assert text == "# Current task\n\nShip the export.\n\n- step one\n"
    assert parse_section(TASK, text).entries == [("", "Ship the export.\n\n- step one")]
    own_heading = "# Tidewater\n\nA tide service."
    assert render_section(PROJECT, [Entry("section:project", "", own_heading)]) == own_heading + "\n"
    assert parse_section(PROJECT, own_heading + "\n").entries == [("", own_heading)]


def test_an_empty_section_renders_a_placeholder_that_parses_as_nothing() -> None:
    for section in SECTIONS:
        parsed = parse_section(section, render_section(section, []))
        assert parsed.entries == [] and parsed.placeholders == 1, section.key


def test_a_file_written_newest_first_is_read_in_created_order() -> None:
    text = "# Recent Changes\n\n- 2025-03-05: c\n- 2025-03-04: b\n- 2025-03-01: a\n"
    parsed = parse_section(CHANGES, text)
    assert [c for _, c in parsed.entries] == ["2025-03-01: a", "2025-03-04: b", "2025-03-05: c"]
    assert parsed.reversed


def test_comments_and_placeholder_entries_are_dropped_on_parse() -> None:
    text = "# Decisions\n\n<!-- newest last -->\n\n_No decisions yet._\n\n## 2025-01-01 — Real one\n\nBody.\n"
    parsed = parse_section(DECISIONS, text)
    assert parsed.entries == [("2025-01-01 — Real one", "Body.")]
    assert parsed.placeholders == 1


@pytest.mark.parametrize(
    ("text", "placeholder"),
    [
        ("", True),
        ("TBD", True),
        ("_Describe the project here._", True),
        ("<!-- fill me --> TODO", True),
        ("{{PROJECT_NAME}} does {{WHAT}}", True),
        ("## Stack\n- TBD\n## Goals\n- TODO", True),
        ("_No decisions recorded yet._", True),
        ("_Not written yet: the conventions._", True),
        ("Add retries to the upload client", False),
        ("Describe endpoints with OpenAPI; the spec lives in api/openapi.yaml.", False),
        ("- [ ] Write the README", False),
    ],
)
def test_placeholder_text_is_recognised_and_real_text_is_not(text: str, placeholder: bool) -> None:
    assert is_placeholder(text) is placeholder


def test_duplicates_ignore_leading_dates_layout_and_case() -> None:
    a = Entry("1", "2026-01-01 — Use SQLite", "We use  SQLite.")
    b = Entry("2", "2026-02-03 — use sqlite", "we use sqlite")
    c = Entry("3", "2026-02-03 — Use Postgres", "We use Postgres.")
    assert dedupe_key(a) == dedupe_key(b) != dedupe_key(c)


def test_import_ids_depend_on_the_text_and_its_occurrence_only() -> None:
    one = import_id(TODO, "", "[ ] a", 0)
    assert one == import_id(TODO, "", "[ ]  A", 0)
    assert one != import_id(TODO, "", "[ ] a", 1)
    assert one != import_id(CHANGES, "", "[ ] a", 0)
    assert one.startswith("pmp:todo:")


def test_tidy_removes_trailing_spaces_and_runs_of_blank_lines() -> None:
    assert tidy("\n\na  \n\n\n\nb\t\n\n") == "a\n\nb"


def test_the_plan_creates_missing_sections_removes_duplicates_tidies_and_keeps_three_recent_changes() -> None:
    sections = {
        "project": [Entry("section:project", "", "TBD")],
        "currentTask": [Entry("section:current-task", "", "Ship it.\n\n\n\nSoon.")],
        "decisions": [
            Entry("d1", "2026-01-01 — Use SQLite", "We use SQLite."),
            Entry("d2", "2026-01-05 — Use SQLite", "We use SQLite."),
        ],
        "recentChanges": [
            Entry(f"r{i}", "", f"2026-01-0{i}: change {i}", created_at=f"2026-01-0{i}") for i in range(1, 6)
        ],
    }
    plan = plan_optimization(sections, limit=256 * 1024)
    assert plan.needed
    by_kind = {kind: [a.id for a in plan.of(kind)] for kind in ("create", "flag_placeholder", "remove_duplicate")}
    assert by_kind == {
        "create": ["section:architecture", "section:coding-style"],
        "flag_placeholder": ["section:project"],
        "remove_duplicate": ["d2"],
    }
    assert [(a.id, a.content) for a in plan.of("tidy")] == [("section:current-task", "Ship it.\n\nSoon.")]
    assert [a.id for a in plan.of("archive")] == ["r1", "r2"]
    assert {a.month for a in plan.of("archive")} == {"2026-01"}
    assert plan.of("remove_duplicate")[0].duplicate_of == "d1"


def test_a_list_section_near_its_limit_is_planned_down_to_half_of_it() -> None:
    entries = [Entry(f"d{i}", f"Decision {i}", "x" * 90) for i in range(40)]
    limit = 4000
    plan = plan_optimization({"decisions": entries}, limit=limit)
    archived = [a.id for a in plan.of("archive")]
    assert archived == [f"d{i}" for i in range(len(archived))]  # the oldest first
    assert plan.sizes["decisions"] <= limit // 2
    kept = [e for e in entries if e.id not in archived]
    assert plan.sizes["decisions"] == len(render_section(DECISIONS, kept).encode())
    assert not plan_optimization({"decisions": kept}, limit=limit).of("archive")


def test_git_porcelain_and_numstat_output_is_parsed_with_renames_and_binaries() -> None:
    status = " M src/app.py\0A  docs/a.md\0R  new.py\0old.py\0?? logo.png\0UU merge.txt\0"
    files = parse_porcelain(status)
    assert [(f.path, f.status, f.renamed_from) for f in files] == [
        ("src/app.py", "modified", ""),
        ("docs/a.md", "added", ""),
        ("new.py", "renamed", "old.py"),
        ("logo.png", "untracked", ""),
        ("merge.txt", "conflicted", ""),
    ]
    numstat = parse_numstat("2\t1\tsrc/app.py\0-\t-\timg.bin\0" + "0\t0\t\0old.py\0new.py\0")
    assert numstat == {"src/app.py": (2, 1), "img.bin": (None, None), "new.py": (0, 0)}
    files[0].added, files[0].deleted = 2, 1
    files[3].added = 4
    assert diff_summary(files[:1] + files[3:4]) == "2 files changed (+6 −1): src/app.py (+2 −1), logo.png (new)"
    assert diff_summary([]) == "No changes in the working tree."
