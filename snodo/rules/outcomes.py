"""The four outcomes (and the halt outcomes of a run that stops early) and everything snodo
*says* about them to the agent and to the person at a terminal (docs/protocol.md,
"Outcomes"); callers only fill in the ``{fields}``."""

from __future__ import annotations

from typing import Final, Literal, get_args

Outcome = Literal["pass", "escalate", "blocker", "validator_error"]
HaltOutcome = Literal[
    "escalate", "blocker", "validator_error", "coder_failed", "environment_error", "internal_error", "interrupted"
]
OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)
HALT_OUTCOMES: Final[tuple[HaltOutcome, ...]] = get_args(HaltOutcome)

# To an agent reading the server instructions.
MEANING: Final[dict[Outcome, str]] = {
    "pass": "the validators approve; a single-use token is recorded for exactly that task and spec",
    "escalate": "a human must decide. Nothing is issued. Ask the user to run `snodo authorize "
    "<decision_id>` in a terminal (out of band), then validate the same task and spec again.",
    "blocker": "the work is blocked and no human decision can override it. Fix the work and validate "
    "again; if fixes are exhausted, revise the task spec. Nothing is issued.",
    "validator_error": "a validator could not reach a verdict (crash, timeout, missing program or "
    "model). Nothing is wrong with the task and there is nothing to decide: retry, or ask the "
    "operator to fix the validator setup and inspect the logs. Nothing is issued.",
}

# The ``instruction`` of a validation reply, to the agent that asked.
AGENT_INSTRUCTION: Final[dict[Outcome, str]] = {
    "pass": "Validation passed and a single-use token was recorded for this task and spec. "
    "Call dispatch_task with the same task_spec (and task_id) to run it.",
    "escalate": "A human must decide: run `snodo authorize {decision_id}` out of band (approve or reject), "
    "then validate this task again. No token was issued.",
    "blocker": "A validator blocked this task; no human decision can override it. Fix the work and "
    "validate again; if fixes are exhausted, revise the task spec.",
    "validator_error": "A validator could not reach a verdict (crash, timeout, missing plugin or model). "
    "Nothing is wrong with the task itself and there is nothing to decide: fix the validator setup or "
    "retry, and inspect the results' errors and the audit log.",
}
# A pass that issued no token must not claim one.
AGENT_INSTRUCTION_PASSED_AFTER_THE_WORK: Final = (
    "Validation passed: the work passed its post_execute validators. No token is issued after the work "
    "(a token only lets work be dispatched, at pre_execute)."
)
AGENT_INSTRUCTION_PASSED_UNISSUED: Final = (
    "Validation passed; no token was issued for this request, so nothing can be dispatched with it."
)


def agent_instruction(status: Outcome, *, phase: str, token_issued: bool, decision_id: str | None = None) -> str:
    """The ``instruction`` of a validation reply: what is true of this phase and its token."""
    if status == "pass" and not token_issued:
        return AGENT_INSTRUCTION_PASSED_AFTER_THE_WORK if phase == "post_execute" else AGENT_INSTRUCTION_PASSED_UNISSUED
    return AGENT_INSTRUCTION[status].format(decision_id=decision_id)


# A pass in a mode that cannot dispatch must not invite a call to a tool it lacks.
AGENT_INSTRUCTION_NO_DISPATCH: Final = (
    "Validation passed and a single-use token was recorded for this task and spec. This mode cannot "
    "dispatch work: a mode that holds the dispatch capability, or a person running `snodo run`, executes it."
)

# What the person does after ``snodo run`` ends (``completed``) or halts.
RUN_NEXT_STEP: Final[dict[str, str]] = {
    "completed": "review the task branch and merge it",
    "blocker": AGENT_INSTRUCTION["blocker"],
    "escalate": "a human runs `snodo authorize {decision_id}`, then `snodo run --resume {task_id}`",
    "validator_error": AGENT_INSTRUCTION["validator_error"],
    "coder_failed": "the coder could not do the work (its message is above): clarify or split the task spec, "
    "or try another coder, then run it again; no token was spent on work that did not run",
    "environment_error": "fix the environment (coder program, model credentials, network, time limits) and "
    "run again; no token was spent on work that did not run",
    "internal_error": "this is a bug in snodo or a plugin: run again with -v and report the traceback",
    "interrupted": "the run was stopped before it finished; run it again with `snodo run --resume {task_id}`",
}

# What the person does after ``snodo validate`` (``{again}`` validates again, ``{run}`` runs the task).
VALIDATE_NEXT_STEP: Final[dict[Outcome, str]] = {
    "pass": "next: `{run}` runs the task (add --mock to try it without a model).",
    "escalate": "next: a person reviews and decides with `snodo authorize {decision_id}` "
    "(approve or --reject), then `{again}`.",
    "blocker": "next: fix the work or revise the spec, then `{again}`. No decision can override a blocker.",
    "validator_error": "next: a validator could not judge (see its justification above); fix its setup — "
    "`snodo plugins` and `snodo protocol check` help — then `{again}`.",
}
# For a person reading ``--help``, and ``snodo validate``'s exit codes (4 is "could not run").
PERSON_SUMMARY: Final[dict[Outcome, str]] = {
    "pass": "a single-use token was recorded for this task and spec",
    "blocker": "fix the work; no human can override it",
    "escalate": "a human runs `snodo authorize <decision_id>`, then validate again",
    "validator_error": "a validator could not judge; fix the setup or retry",
}
EXIT_CODE: Final[dict[Outcome, int]] = {"pass": 0, "blocker": 1, "escalate": 2, "validator_error": 3}

# After a post_execute validation (``snodo validate --changed``) the change already exists.
VALIDATE_POST_NEXT_STEP: Final[dict[Outcome, str]] = {
    **VALIDATE_NEXT_STEP,
    "pass": "next: the change passed its post-execute validators.",
    "escalate": "next: review and sign with `snodo authorize {decision_id}`, then `{again}`.",
}
