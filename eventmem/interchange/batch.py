"""The one service-level write of an import: its whole plan appended as one batch, or nothing.

The plan is made under the journal lock after catching up (see ``Store.append_planned``), so two
imports of the same store at once take turns and the second finds everything unchanged; the
events go out in one append, all with the writer ``import:FORMAT@BATCH``, so ``eventmem diff`` and
``eventmem pr-summary`` show one import as one change by one writer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventmem.core.events import AnyEvent
from eventmem.core.ids import new_id
from eventmem.core.validation import check_length
from eventmem.interchange.mapping import Bundle
from eventmem.interchange.plan import Plan, make_plan

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["import_bundle", "writer_of"]


def writer_of(format_name: str) -> str:
    """The writer of one import's events: the format and a fresh batch id."""
    return check_length(f"import:{format_name}@{new_id()}", "by")


def import_bundle(service: MemoryService, bundle: Bundle, *, dry_run: bool = True, project: str | None = None) -> Plan:
    """Plan ``bundle`` against the project's memory and, unless ``dry_run``, append the plan.

    ``project``: leave out items whose metadata names another project (stores shared by projects)."""
    store = service.project
    by = writer_of(bundle.format)
    config = service.config

    def plan_now() -> Plan:
        with store.read() as view:
            return make_plan(
                view.fold,
                bundle,
                by=by,
                summarizer=service.summarizer,
                max_bytes=config.max_memory_bytes,
                refuse_secrets=config.secrets == "refuse",
                project=project,
            )

    if dry_run:
        store.catch_up()
        return plan_now()
    made: list[Plan] = []

    def events() -> list[AnyEvent]:
        made.append(plan_now())
        return made[-1].events

    store.append_planned(events)
    plan = made[-1]
    plan.dry_run = False
    return plan
