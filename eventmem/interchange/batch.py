"""The one service-level write of an import: its plan appended as one block of lines.

The plan is made under the journal lock after catching up (see ``Store.append_planned_batches``),
so two imports of the same store at once take turns and the second finds everything unchanged; the
events go out in batches of :data:`~eventmem.interchange.plan.BATCH` items (each planned, appended
and indexed before the next is read, so a large store does not hold every event, line and text
at once) under that one hold of the lock, so they are one block of lines no other writer splits,
all with the writer ``import:FORMAT@BATCH`` and one time: ``eventmem diff`` and ``eventmem
pr-summary`` show one import as one change by one writer. An import stopped part way (a full disk)
leaves the batches written; importing the same store again finds them unchanged and adds the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from eventmem.core.events import AnyEvent
from eventmem.core.ids import new_id
from eventmem.core.state import State
from eventmem.core.validation import check_length
from eventmem.interchange.mapping import Bundle
from eventmem.interchange.plan import Plan, plan_batches

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
    config = service.config
    plan = Plan(bundle.format, writer_of(bundle.format), problems=list(bundle.problems))

    def state() -> State:
        with store.read() as view:
            return view.fold

    def batches() -> Iterator[list[AnyEvent]]:
        return plan_batches(
            state,
            bundle,
            plan,
            summarizer=service.summarizer,
            max_bytes=config.max_memory_bytes,
            refuse_secrets=config.secrets == "refuse",
            project=project,
        )

    if dry_run:
        store.catch_up()
        for _ in batches():  # (each batch planned on the same fold, and let go)
            pass
        return plan
    store.append_planned_batches(batches)
    plan.dry_run = False
    return plan
