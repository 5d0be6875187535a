"""The MCP front door: ``snodo serve`` exposes one mode's tools to an agent (SPEC §4, ADR 047).

Only :mod:`snodo.mcp.server` and :mod:`snodo.mcp.stdio` import the MCP SDK.
"""
