"""What the MCP surface offers: one definition per tool, and the instructions for a mode.

No MCP SDK import, so a mode's surface is known without paying for it; which tools a mode
serves is :func:`snodo.protocol.capabilities.tools_for` of its capabilities (SPEC §4).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from attrs import frozen

from snodo.protocol.capabilities import ALL_TOOLS, READ_ONLY_TOOLS
from snodo.protocol.models import Mode, Protocol
from snodo.rules.outcomes import HALT_OUTCOMES, MEANING, OUTCOMES

Kind = Literal["string", "boolean", "string_list"]


@frozen
class Param:
    name: str
    description: str
    kind: Kind = "string"
    required: bool = True

    def schema(self) -> dict[str, object]:
        if self.kind == "string_list":
            return {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": self.description}
        return {"type": self.kind, "description": self.description}


@frozen(kw_only=True)
class ToolDef:
    """One tool (its name is its key in :data:`TOOLS`): its arguments and the hints a client shows or acts on."""

    title: str
    description: str
    params: tuple[Param, ...] = ()
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def input_schema(self) -> dict[str, object]:
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def annotations(self, name: str) -> dict[str, object]:
        """MCP tool annotations (wire names); read-only is membership of ``READ_ONLY_TOOLS``, so it
        cannot disagree with the capability table; destructive/idempotent mean nothing for reads."""
        read_only = name in READ_ONLY_TOOLS
        hints: dict[str, object] = {"title": self.title, "readOnlyHint": read_only, "openWorldHint": self.open_world}
        if not read_only:
            hints["destructiveHint"] = self.destructive
            hints["idempotentHint"] = self.idempotent
        return hints


def _opt(name: str, description: str, kind: Kind = "string") -> Param:
    return Param(name, description, kind, required=False)


#: Seconds ``run_tests`` may take.
TEST_TIMEOUT = 300.0

_PATH = "Path relative to the project root (POSIX separators)."
_TASK_SPEC = "The task spec: what to do, optionally with an 'Acceptance criteria:' section of bullets."

TOOLS: dict[str, ToolDef] = {
    "read_file": ToolDef(
        title="Read a file",
        description="Return the UTF-8 text of a file in the project. Reading `.snodo/` is allowed.",
        params=(Param("path", _PATH),),
    ),
    "list_files": ToolDef(
        title="List files",
        description="List the files under a directory of the project (default: the root), sorted; `.git/` is skipped.",
        params=(_opt("path", _PATH + " Default: the project root."),),
    ),
    "write_file": ToolDef(
        title="Write a file",
        destructive=True,
        idempotent=True,
        description="Create or replace a file with the given text, creating missing parent "
        "directories. Refused for `.snodo/`, `.git/`, the protocol's protected_paths and paths "
        "outside the project.",
        params=(Param("path", _PATH), Param("content", "The complete new file content.")),
    ),
    "delete_file": ToolDef(
        title="Delete a file",
        destructive=True,
        idempotent=True,
        description="Delete one file (a symlink is removed itself). Refused for protected paths.",
        params=(Param("path", _PATH),),
    ),
    "create_directory": ToolDef(
        title="Create a directory",
        idempotent=True,
        description="Create a directory and its missing parents. Refused for protected paths.",
        params=(Param("path", _PATH),),
    ),
    "run_tests": ToolDef(
        title="Run the tests",
        idempotent=True,
        description="Run the project's pytest suite (or one path of it) in a bounded child "
        "process and return the summary and the tail of the output.",
        params=(_opt("path", "Test file or directory relative to the project root. Default: the whole suite."),),
    ),
    "validate_task": ToolDef(
        title="Validate a task",
        description="Run this mode's pre_execute validators on a task and return one of four "
        f"outcomes: {', '.join(OUTCOMES[:-1])} or {OUTCOMES[-1]}, with every validator's result "
        "and an instruction saying what to do next.",
        params=(
            _opt(
                "task_spec",
                _TASK_SPEC + " May be omitted when this server already "
                "validated the task_id, to validate the same spec again.",
            ),
            _opt(
                "task_id",
                "Your id for the task; default: derived from the spec text (as dispatch_task does). "
                "Validating the same id and spec again is the same task.",
            ),
        ),
    ),
    "dispatch_task": ToolDef(
        title="Dispatch a task",
        open_world=True,
        description="Start a background job that runs the task through the governed engine with "
        "this mode's coder; the job validates the task again before anything executes. Returns "
        "{status: accepted, job_id, task_id} at once.",
        params=(
            Param("task_spec", _TASK_SPEC),
            _opt("task_id", "The task id used when validating; default: derived from the spec text."),
        ),
    ),
    "get_job_status": ToolDef(
        title="Job status",
        description="The status of a job: queued, running, completed, or halted (then `outcome` "
        f"says why: {', '.join(HALT_OUTCOMES)}).",
        params=(Param("job_id", "The job id returned when the job was dispatched."),),
    ),
    "list_jobs": ToolDef(
        title="List jobs", description="Every job of this project with its task, mode and status, oldest first."
    ),
    "propose_adjudicate": ToolDef(
        title="Propose a decision",
        description="Record a proposal for the human who decides a pending escalation. It "
        "authorises nothing: only a person running `snodo authorize <decision_id>` decides.",
        params=(
            Param("decision_id", "The decision_id of an escalate outcome."),
            Param("decision", "approve or reject."),
            Param("justification", "Why; shown to the human with the proposal."),
        ),
    ),
    "read_diff": ToolDef(
        title="Read the diff",
        description="The diff of the work tree (or of the staged changes) against a ref, the index or HEAD.",
        params=(
            _opt("ref", "Commit, branch or tag to compare against."),
            _opt("staged", "Show staged changes instead of unstaged ones.", "boolean"),
        ),
    ),
    "get_status": ToolDef(
        title="Repository status",
        description="The current branch and the staged, unstaged, untracked and conflicted paths.",
    ),
    "stage_files": ToolDef(
        title="Stage files",
        description="Stage additions, changes and deletions under the given paths; all or nothing, "
        "and refused when any change touches a protected path.",
        params=(Param("paths", "Paths relative to the project root.", "string_list"),),
    ),
    "commit": ToolDef(
        title="Commit",
        description="Commit the staged changes on the current branch and return the commit sha.",
        params=(Param("message", "The commit message."),),
    ),
    "create_branch": ToolDef(
        title="Create a branch",
        description="Create a branch without switching to it.",
        params=(Param("name", "The new branch name."), _opt("start", "Where the branch starts; default HEAD.")),
    ),
    "merge_branch": ToolDef(
        title="Merge a branch",
        destructive=True,
        description="Merge a branch into the current branch with a merge commit; refused when the "
        "branch changes a protected path, aborted (tree unchanged) when it conflicts.",
        params=(Param("name", "The branch to merge."), _opt("message", "The merge commit message.")),
    ),
    "delete_branch": ToolDef(
        title="Delete a branch",
        destructive=True,
        description="Delete a fully merged branch; unmerged work is never thrown away.",
        params=(Param("name", "The branch to delete."),),
    ),
    "propose_plan": ToolDef(
        title="Propose a plan",
        description="Break a goal into tasks with specs and store them as a plan. Executes nothing and needs nothing.",
        params=(Param("goal", "What should be achieved; bullet lines become one task each."),),
    ),
    "decompose": ToolDef(
        title="Decompose",
        description="Split a plan's goal (plan_id) into tasks again and store them in the plan, or "
        "split a spec into tasks without storing anything. Give exactly one of plan_id and spec. "
        "Executes nothing.",
        params=(_opt("plan_id", "A plan to decompose again."), _opt("spec", "Text to split into tasks.")),
    ),
    "generate_spec": ToolDef(
        title="Generate a task spec",
        description="Write a task spec for one task description, with its derived task id. "
        "Executes nothing and stores nothing.",
        params=(Param("task", "The task, in one line or a short paragraph."),),
    ),
    "get_plan": ToolDef(
        title="Get a plan",
        description="A stored plan: goal, tasks with their specs and task ids, and the status of "
        "any job started for them.",
        params=(Param("plan_id", "The plan id returned by propose_plan."),),
    ),
    "run_plan": ToolDef(
        title="Run a plan",
        open_world=True,
        description="Start a background job for every task of the plan not yet dispatched; each "
        "job validates its task again before anything executes.",
        params=(Param("plan_id", "The plan to run."),),
    ),
}

assert set(TOOLS) == set(ALL_TOOLS), "every tool of the capability table needs a definition"


def _join(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _served(tools: frozenset[str], *names: str) -> list[str]:
    return [name for name in names if name in tools]


def plan_mode(mode: Mode) -> str:
    """The mode a plan's tasks run in: the mode's declared ``on: run_plan`` transition, if the
    protocol declares one (a planner hands off to its producer), else the mode itself."""
    return next((t.to for t in mode.transitions if t.on == "run_plan"), mode.mode_id)


def build_instructions(protocol: Protocol, mode: Mode, tools: frozenset[str]) -> str:
    """The operating manual a connecting agent reads: a paragraph naming a tool is included only
    when that tool is served, so the text never invites a call refused as unknown."""
    named = f" ({mode.name})" if mode.name else ""
    described = f" The mode: {mode.description.strip().rstrip('.')}." if mode.description.strip() else ""
    about = (
        f"snodo governs this project with the protocol {protocol.name!r} ({protocol.protocol_id}, version "
        f"{protocol.version}). This server is pinned to the mode {mode.mode_id!r}{named}.{described}"
        f" It serves only this mode's tools: {_join(sorted(tools))} (your host may show them with a prefix, "
        "such as snodo_validate_task or mcp__snodo__validate_task: they are the same tools). A call of a name "
        "this server does not serve is refused as unknown. No tool needs a token from you, and no tool can "
        "authorise a decision."
    )
    evidence = " and the next dispatch of that task and spec uses it as evidence." if "dispatch_task" in tools else "."
    outcomes = "\n".join(
        [
            "Four outcomes. Work is judged by the protocol's validators under the "
            f"{protocol.disagreement_policy!r} policy; every judgement ends in exactly one of:",
            f"- pass: {MEANING['pass']}{evidence}",
            *(f"- {outcome}: {MEANING[outcome]}" for outcome in OUTCOMES if outcome != "pass"),
        ]
    )
    audited = (
        "Every call is recorded (tool name and a hash of its arguments, with this mode) in the project's "
        "hash-chained audit log."
    )
    return "\n\n".join(
        [about, outcomes, *_task_paragraphs(protocol, mode, tools), *_work_paragraphs(protocol, mode, tools), audited]
    )


def _task_paragraphs(protocol: Protocol, mode: Mode, tools: frozenset[str]) -> Iterator[str]:
    """validate_task, dispatch_task and propose_adjudicate, each if served."""
    if "validate_task" in tools:
        pre = [v.validator_id for v in protocol.validators_for(mode, "pre_execute")]
        yield (
            "validate_task(task_spec, task_id?) runs this mode's pre_execute validators"
            + (f" ({_join(pre)})" if pre else "")
            + " and returns the outcome with every validator's result, the policy tally and an `instruction`. "
            "Without task_id the id is derived from the spec; omit task_spec to validate again a task_id this "
            "server has already seen."
        )
    if "dispatch_task" in tools:
        job_tools = _served(tools, "get_job_status", "list_jobs")
        follow = (
            f" Follow it with {_join(job_tools)}: status is queued, running, completed, or halted "
            "(then `outcome` says why)."
            if job_tools
            else ""
        )
        yield (
            f"dispatch_task(task_spec, task_id) starts a background job running the governed engine with "
            f"the {mode.coder!r} coder; it returns {{status: accepted, job_id, task_id}} at once. The job "
            "validates the task again and consumes its own token before executing, and its changes land "
            f"on a task branch, never in your checkout.{follow}"
        )
    if "propose_adjudicate" in tools:
        yield (
            "propose_adjudicate(decision_id, decision, justification) records a suggestion in the "
            "project's runtime state for the human deciding an escalation; it authorises nothing. Only "
            "`snodo authorize <decision_id>`, run by a person, decides."
        )


def _work_paragraphs(protocol: Protocol, mode: Mode, tools: frozenset[str]) -> Iterator[str]:
    """The path guard of the tools that change files, then the plan tools, if served."""
    mutating = _served(tools, "write_file", "delete_file", "create_directory", "stage_files")
    if mutating:
        protected = ["`.snodo/`", "`.git/`", *(f"`{p}`" for p in protocol.protected_paths)]
        yield (
            f"{_join(mutating)} {'goes' if len(mutating) == 1 else 'go'} through one path guard: "
            f"{', '.join(protected)} and paths outside the project are refused, however spelled (./, .., "
            "absolute, case, symlinks), with an error naming the path. "
            "The governance state in `.snodo/` can be read but never changed through tools."
        )
    authoring = _served(tools, "propose_plan", "decompose", "generate_spec")
    if authoring:
        reads = "; get_plan(plan_id) reads one back" if "get_plan" in tools else ""
        target = plan_mode(mode)
        where = (
            "in this mode" if target == mode.mode_id else f"in the {target!r} mode (this mode's run_plan transition)"
        )
        runs = (
            f" run_plan(plan_id) starts a background job {where} for every task not yet "
            "dispatched; each job validates its task again before anything executes."
            if "run_plan" in tools
            else ""
        )
        yield (
            f"{_join(authoring)} author plans and task specs (plans are kept in the project's runtime state"
            f"{reads}); they execute nothing and need nothing.{runs}"
        )
