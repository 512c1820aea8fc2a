"""Adapters: the ways in to the memory service (MCP over stdio and HTTP, the CLI, REST)."""
