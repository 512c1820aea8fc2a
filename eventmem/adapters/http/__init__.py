"""One HTTP server for every agent and person: MCP over Streamable HTTP at ``/mcp``, a REST API at
``/api/v1`` and a web UI at ``/``, all over the same :class:`~eventmem.service.MemoryService`."""
