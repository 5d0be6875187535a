"""The capability → MCP tool table (SPEC §4, INV2), in exactly one place."""

from __future__ import annotations

from collections.abc import Iterable

CAPABILITY_TOOLS: dict[str, tuple[str, ...]] = {
    "read": ("read_file", "list_files"),
    "assess": ("read_file", "list_files"),
    "edit": ("read_file", "list_files", "write_file", "delete_file", "create_directory"),
    "test": ("run_tests",),
    "validate": ("validate_task", "run_tests"),
    "dispatch": ("validate_task", "dispatch_task", "get_job_status", "list_jobs"),
    "decide": ("propose_adjudicate",),
    "resolve": ("propose_adjudicate",),
    "review": ("read_file", "list_files", "read_diff", "get_status"),
    "commit": ("stage_files", "commit"),
    "approve": ("stage_files", "commit"),
    "merge": ("create_branch", "merge_branch", "delete_branch", "stage_files", "commit"),
    "plan": ("propose_plan", "decompose", "generate_spec", "get_plan", "run_plan"),
}

#: Capabilities that at most one mode may hold (WF1); a protocol may add to these.
ALWAYS_EXCLUSIVE: tuple[str, ...] = ("approve", "merge")

#: Tools that only read; they carry ``readOnlyHint: true`` on the MCP surface.
READ_ONLY_TOOLS: frozenset[str] = frozenset(
    {"read_file", "list_files", "read_diff", "get_status", "get_job_status", "list_jobs", "get_plan"}
)

ALL_TOOLS: frozenset[str] = frozenset(t for tools in CAPABILITY_TOOLS.values() for t in tools)


def tools_for(capabilities: Iterable[str]) -> frozenset[str]:
    """The union of tools the given capabilities grant; unknown capabilities grant nothing."""
    return frozenset(t for cap in capabilities for t in CAPABILITY_TOOLS.get(cap, ()))
