"""A model's verdict: the JSON the judges ask for, read strictly.

A governance check that did not run must never look like one that passed, so anything
that is not a well-formed verdict raises :class:`~snodo.api.ValidatorFault`.
"""

from __future__ import annotations

import json
import re
from typing import Any, get_args

from snodo.api import Severity, ValidatorFault, Verdict

from . import _model
from ._model_settings import ModelSettings, excerpt

SEVERITIES: tuple[str, ...] = get_args(Severity)

_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)```", re.DOTALL)

VERDICT_FORMAT = (
    "Answer with only a JSON object, no other text: "
    '{"severity": "pass" | "warn" | "blocker", "justification": "<one or two sentences>"}. '
    "pass: every criterion is met. warn: you are unsure or something is doubtful; a human "
    "should look. blocker: a criterion is clearly not met."
)


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON value found")


def parse_verdict(text: str | None, *, who: str) -> Verdict:
    """A strict verdict from a model reply; anything malformed raises :class:`ValidatorFault`."""
    if not text or not text.strip():
        raise ValidatorFault(f"{who}: the model returned an empty reply; no verdict")
    try:
        data = extract_json(text)
    except ValueError:
        raise ValidatorFault(f"{who}: the model's reply is not a JSON verdict: {excerpt(text)!r}") from None
    if not isinstance(data, dict):
        raise ValidatorFault(f"{who}: the model's verdict is not a JSON object: {excerpt(text)!r}")
    severity, justification = data.get("severity"), data.get("justification")
    if severity not in SEVERITIES:
        raise ValidatorFault(
            f"{who}: the model's verdict has severity {severity!r}, expected one of {', '.join(SEVERITIES)}"
        )
    if not isinstance(justification, str) or not justification.strip():
        raise ValidatorFault(f"{who}: the model's verdict has no justification")
    return Verdict(severity=severity, justification=justification.strip())


def judge(*, settings: ModelSettings, system: str, prompt: str, timeout: float, who: str) -> Verdict:
    """Ask the model for a verdict on ``prompt``; raises when no verdict can be read.

    The verdict's details hold ``usage`` (requests, tokens, cost when known), which the
    engine records as the judge's usage. A reply that is no verdict keeps its usage on the
    :class:`ValidatorFault` it raises.
    """
    reply = _model.complete(
        settings,
        [
            {"role": "system", "content": f"{system}\n\n{VERDICT_FORMAT}"},
            {"role": "user", "content": prompt},
        ],
        timeout=timeout,
    )
    usage = {"model": settings.model, **reply.usage}
    try:
        verdict = parse_verdict(reply.content, who=who)
    except ValidatorFault as exc:
        _model.carry_usage(exc, usage)
        raise
    return Verdict(severity=verdict.severity, justification=verdict.justification, details={"usage": usage})
