"""The MCP front door: ``snodo serve`` exposes one mode's tools to an agent (SPEC §4, ADR 047).

:mod:`snodo.mcp.catalog` (tool definitions, instructions) and :mod:`snodo.mcp.host` (the
handlers) do not import the MCP SDK; only :mod:`snodo.mcp.server` does, and only
``snodo serve`` imports it.
"""
