"""MCP tool families; ``EVENTMEM_TOOLS`` / ``serve --tools`` choose which are exposed."""
