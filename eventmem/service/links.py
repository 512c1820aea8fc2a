"""The link command: a typed relation between two live memories, created once and updated in place."""

from __future__ import annotations

import msgspec

from eventmem.core.errors import InvalidInput
from eventmem.core.events import AnyEvent, LinkAdded
from eventmem.core.ids import new_id, now_iso
from eventmem.core.records import LinkRecord
from eventmem.core.validation import check_number
from eventmem.service.inputs import check_by, check_relation
from eventmem.service.lookups import link_of
from eventmem.service.models import Link, link_view
from eventmem.service.part import Part

__all__ = ["Links"]


class Links(Part):
    """Links between memories; one between a project and a global memory is kept in the project journal."""

    def link(
        self,
        source_id: str,
        target_id: str,
        relation: str = "related_to",
        *,
        strength: float = 1.0,
        context: str = "",
        by: str = "",
    ) -> tuple[Link, bool]:
        """A typed link between two live memories. The same (source, target, relation) again
        returns the existing link, updated if strength or context differ. Returns (link, created)."""
        relation = check_relation(relation)
        strength = check_number(strength, "strength")
        context = self._clean_text(context or "", "context", required=False)
        check_by(by)
        source_store, source = self._find(source_id)
        target_store, target = self._find(target_id)
        if source.id == target.id:
            raise InvalidInput("a memory cannot be linked to itself")
        # a link between a project and a global memory is kept in the project journal
        store = source_store if source_store is target_store else self.project
        event = LinkAdded(
            id=new_id(),
            ts=now_iso(),
            by=by,
            link=new_id(),
            source=source.id,
            target=target.id,
            relation=relation,
            strength=strength,
            context=context,
        )
        found: list[LinkRecord] = []

        def plan() -> list[AnyEvent]:
            with store.read() as view:
                existing_links = view.links_of(source.id)
            for existing in existing_links:
                if (existing.source, existing.target, existing.relation) == (source.id, target.id, relation):
                    found.append(existing)
                    if (existing.strength, existing.context) == (strength, context):
                        return []
                    return [msgspec.structs.replace(event, link=existing.id, prev=existing.head)]
            return [event]

        store.append_planned(plan)
        link_id = found[0].id if found else event.link
        return link_view(link_of(store, link_id)), not found
