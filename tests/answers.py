"""What a merge must preserve, in comparable form: the folded state and the answers to queries.

Used by the git merge tests and the merge property test. Dict and set order never matter here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventmem.core.state import State
from eventmem.service import MemoryService

QUERIES = (
    "keyword search engine",
    "database connection pool",
    "job queue",
    "tests are flaky",
    "deploy release",
)


def canonical(state: State) -> dict[str, Any]:
    """Everything the fold knows about memories and links."""
    return {
        "memories": {
            memory_id: msgspec.to_builtins(record)
            | {"status": record.status, "visible": state.visible(memory_id) is not None}
            for memory_id, record in state.memories.items()
        },
        "links": {link_id: msgspec.to_builtins(link) | {"alive": link.alive} for link_id, link in state.links.items()},
        "links_of": {memory_id: [link.id for link in state.links_of(memory_id)] for memory_id in state.memories},
        "seen": state.seen,
        "unknown": state.unknown,
    }


def answers(service: MemoryService, queries: tuple[str, ...] = QUERIES) -> dict[str, Any]:
    """What a client sees: recall results (ids and scores) for each query, and every live memory."""
    service.catch_up()
    state = service.project.derived.state
    visible = sorted(memory_id for memory_id in state.memories if state.visible(memory_id) is not None)
    return {
        "recall": {query: [(hit.id, hit.score) for hit in service.recall(query, limit=10)] for query in queries},
        "keyword": {query: [hit.id for hit in service.recall(query, limit=10, mode="keyword")] for query in queries},
        "memories": {memory_id: _view(service, memory_id) for memory_id in visible},
    }


def _view(service: MemoryService, memory_id: str) -> dict[str, Any]:
    view: dict[str, Any] = msgspec.to_builtins(service.get(memory_id))
    view.pop("project", None)  # a project memory shows the clone's folder name, which differs by design
    return view
