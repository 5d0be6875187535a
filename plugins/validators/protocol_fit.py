"""The ``protocol`` validator: does this task belong to the current mode?

A mode's capabilities are the boundary of what may happen in it (INV2); a task asking a
reviewing mode to merge should stop before any work, naming the mode that may do it.
The spec's intent is read from the verb opening each clause (after "please", "then",
"also"; code spans ignored), through this table:

=============  ==============================================================
capability     clause-opening verbs
=============  ==============================================================
merge          merge
approve        approve, sign off
commit         commit
edit           write, add, create, implement, fix, edit, refactor, update,
               change, modify, delete, remove, rename
review         review
plan           plan, decompose, break down
test           run tests, run the tests, run the test suite, test
read           read, explain, summarise, summarize, inspect, assess,
               analyse, analyze
=============  ==============================================================

A mode holds a capability when it lists it, or, for a non-exclusive one, when its tools
cover that capability's tools (``approve`` grants what ``commit`` does). With
``validator.model`` set, a model also judges the fit from the mode profiles and the
validator's ``criteria``; its verdict can only make the result stricter. Tooling: the
provider settings every model plugin shares (``api_base``, ``api_key_env``, ``timeout``,
``max_retries``, ``temperature``, ``stream``; docs/providers.md), and ``mock_response`` — for
offline tests and demos only: litellm's canned reply. The model's usage is in the details.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from snodo.api import Mode, ValidationRequest, Validator, ValidatorSpec, Verdict, hookimpl

from . import _judging, _tooling

NAME = "protocol"
SETTINGS = _judging.JUDGE_SETTINGS

INTENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("merge", ("merge",)),
    ("approve", ("approve", "sign off")),
    ("commit", ("commit",)),
    (
        "edit",
        (
            "write",
            "add",
            "create",
            "implement",
            "fix",
            "edit",
            "refactor",
            "update",
            "change",
            "modify",
            "delete",
            "remove",
            "rename",
        ),
    ),
    ("review", ("review",)),
    ("plan", ("plan", "decompose", "break down")),
    ("test", ("run tests", "run the tests", "run the test suite", "test")),
    ("read", ("read", "explain", "summarise", "summarize", "inspect", "assess", "analyse", "analyze")),
)
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_CLAUSES = re.compile(r"[\n.;:!?,]|\band then\b|\bthen\b|\band\b", re.IGNORECASE)
_LEAD = re.compile(r"^(?:[-*+#>\s]|\d+[.)]|\[[ x]\]|please\b|also\b|now\b|first\b|finally\b|next\b)+")
_VERBS = [(cap, re.compile(rf"^{re.escape(verb)}\b")) for cap, verbs in INTENTS for verb in verbs]

_SYSTEM = (
    "A governed workflow splits work into modes; each mode may only do what its capabilities "
    "allow. Decide whether the task belongs in the current mode: blocker if it needs something "
    "the mode may not do, warn if unclear, pass if it fits."
)


@hookimpl
def snodo_validators() -> Iterator[ValidatorSpec]:
    yield ValidatorSpec(
        name=NAME,
        description="checks that the task's intent fits the current mode's capabilities",
        runs_code=False,
        needs_model=False,
        deterministic=False,  # deterministic unless `model` adds its judgement
        settings=SETTINGS,
    )


def intents(spec: str) -> dict[str, str]:
    """Capability -> the verb that asked for it, in the order the spec asks."""
    found: dict[str, str] = {}
    for clause in _CLAUSES.split(_CODE.sub(" ", spec)):
        text = _LEAD.sub("", clause.strip().lower()).strip()
        for cap, verb in _VERBS:
            match = verb.match(text)
            if match:
                found.setdefault(cap, match.group(0))
                break
    return found


def holds(tools: tuple[str, ...], capability: str, exclusive: tuple[str, ...]) -> bool:
    if capability in tools:
        return True
    if capability in exclusive:
        return False
    granted = {t for cap in tools for t in Mode.CAPABILITY_TOOLS.get(cap, ())}
    return set(Mode.CAPABILITY_TOOLS.get(capability, ())) <= granted


def _deterministic(request: ValidationRequest) -> Verdict:
    mode, protocol = request.mode, request.protocol
    exclusive = (*Mode.ALWAYS_EXCLUSIVE, *protocol.exclusive_tools)
    needed = intents(request.task_spec)
    details: dict[str, object] = {"mode": mode.mode_id, "capabilities_needed": needed}
    if not needed:
        nothing = f"no capability signals in the spec; nothing to check against mode {mode.mode_id!r}"
        return Verdict(severity="pass", details=details, justification=nothing)
    missing = [cap for cap in needed if not holds(mode.tools, cap, exclusive)]
    if not missing:
        asked = ", ".join(f"{cap} ({verb!r})" for cap, verb in needed.items())
        return Verdict(
            severity="pass",
            details=details,
            justification=f"mode {mode.mode_id!r} holds every capability the spec asks for: {asked}",
        )
    problems = []
    for cap in missing:
        others = [m.mode_id for m in protocol.modes if m.mode_id != mode.mode_id and holds(m.tools, cap, exclusive)]
        where = f"modes that have it: {', '.join(others)}" if others else "no mode of this protocol has it"
        problems.append(
            f"the spec asks to {needed[cap]} (capability {cap!r}), which mode {mode.mode_id!r} lacks; {where}"
        )
    details["missing"] = missing
    return Verdict(severity="blocker", justification="; ".join(problems), details=details)


def _prompt(request: ValidationRequest) -> str:
    """The task, the validator's own criteria and every mode's profile, the current one marked."""
    lines = [f"Task:\n{request.task_spec.strip()}"]
    if request.validator.criteria:
        lines.append("Criteria:\n" + "\n".join(f"- {c}" for c in request.validator.criteria))
    lines.append("Modes:")
    for m in request.protocol.modes:
        marker = " (CURRENT)" if m.mode_id == request.mode.mode_id else ""
        lines.append(
            f"- {m.mode_id}{marker}: {m.name or m.mode_id}. {m.description} Capabilities: "
            f"{', '.join(m.tools) or 'none'}"
        )
    return "\n".join(lines)


@hookimpl
def snodo_validate(name: str, request: ValidationRequest) -> Verdict | None:
    if name != NAME:
        return None
    tooling = _tooling.checked(request, SETTINGS)
    verdict = _deterministic(request)
    model = request.validator.model
    if model is None:
        return verdict
    judged = _judging.judge(request, tooling, system=_SYSTEM, prompt=_prompt(request))
    rank = ("pass", "warn", "blocker")
    severity = max(verdict.severity, judged.severity, key=rank.index)
    return Verdict(
        severity=severity,
        justification=f"{verdict.justification}. Model {model}: {judged.justification}",
        details={**verdict.details, "model": model, "model_severity": judged.severity, **judged.details},
    )


@hookimpl
def snodo_preflight(validators: tuple[Validator, ...]) -> None:
    _judging.preflight(validators, NAME)
