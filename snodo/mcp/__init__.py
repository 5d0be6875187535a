"""The MCP front door: ``snodo serve`` exposes one mode's tools to an agent (SPEC §4, ADR 047).

Only :mod:`snodo.mcp.server` imports the MCP SDK.
"""
