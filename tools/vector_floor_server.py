"""The benchmark's second baseline: eventmem's vector path alone, behind the same SDK as the no-op.

``tools/bench.py`` times this server's ``retrieve`` beside the no-op's and eventmem's own
``retrieve_context``. It opens the project's memory as ``eventmem serve`` does (the snapshot, the
exact float16 codes and the approximate index kept beside them), waits for the approximate index,
and answers a query with the least a recall of the required quality does: the question embedded,
the 4-bit codes scanned for 500 candidates, those re-ranked exactly (so
recall@10 against an exact scan stays at least 0.99), and the best five as eventmem's hits. No
keyword side, fusion, boosts, filters, catch-up with other processes, global memory or access
counts: what its round trip costs over the no-op's is a floor under ``retrieve_context``'s at this
size, on this machine.

Like the no-op, its one tool is a plain (sync) function returning a dict, so both take the same
path through the SDK and its worker thread.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp.server import MCPServer

from eventmem.journal.project import RootChoice
from eventmem.service.app import open_service
from eventmem.service.queries import hit_of

DEPTH = 50
"""Candidates asked of the vector index, as a hybrid recall asks for a limit of five."""
LIMIT = 5

ROOT = Path(os.environ.get("EVENTMEM_ROOT", ".")).resolve()
service = open_service(RootChoice(ROOT, "floor"), environ=dict(os.environ))
store = service.stores()[0]
if not store.derived.vectors.settle(900):
    print("vector floor: the approximate index was not ready after 900 s", file=sys.stderr)
    raise SystemExit(1)

server: MCPServer[Any] = MCPServer("vector-floor", version="0", log_level="WARNING")


@server.tool()
def retrieve(query: str) -> dict[str, Any]:
    """The five memories nearest the query by the vector path alone."""
    with store.read() as view:
        found, scores = view.vector_search(view.embed_query(query), DEPTH)
        memories = view.memories()
        results = []
        for slot, score in zip(found[:LIMIT].tolist(), scores[:LIMIT].tolist(), strict=True):
            hit = hit_of(memories[view.id_at(slot)], score, score, 0.0, include_content=False)
            results.append(
                {
                    "id": hit.id,
                    "summary": hit.summary,
                    "score": hit.score,
                    "kind": hit.kind,
                    "tags": hit.tags,
                    "created_at": hit.created_at,
                    "scope": hit.scope,
                }
            )
    return {"status": "success", "results": results}


if __name__ == "__main__":
    try:
        server.run("stdio")
    finally:
        service.close()
