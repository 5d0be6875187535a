"""What a run checks before any token is issued: the coder's programs and settings, and the
plugins' credentials and endpoints (``snodo_preflight``); a failure halts as
``environment_error`` in the ``governance`` phase, having cost nothing."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from snodo.base.errors import CoderError, EnvironmentProblem
from snodo.engine.results import Halt
from snodo.git.runner import pin
from snodo.governance.service import Project
from snodo.plugin.records import CoderSpec
from snodo.rules.settings import coder_config_problems


def check_before_run(p: Project, spec: CoderSpec, config: Mapping[str, Any]) -> None:
    """Undeclared ``coder_config`` keys are refused: a typo must not run the coder on its defaults."""
    for prog in spec.capabilities.required_programs:
        if shutil.which(prog.name) is None:
            raise Halt(
                "environment_error",
                "governance",
                f"coder {spec.name!r} needs the program {prog.name!r} on PATH; install it: {prog.install_hint}",
            )
    if problems := coder_config_problems(spec.name, spec.capabilities.settings, config):
        raise Halt(
            "environment_error",
            "governance",
            f"mode {p.mode_id!r}: {'; '.join(m for _k, m in problems)}; fix coder_config in "
            ".snodo/protocol.yml (see docs/plugins.md)",
        )
    pin(p.root)  # the repository every later git command names, found before any agent ran
    validators = tuple(v for phase in ("pre_execute", "post_execute") for v in p.protocol.validators_for(p.mode, phase))
    try:
        p.host.pm.hook.snodo_preflight(mode=p.mode, coder=spec.name, coder_config=config, validators=validators)
    except (EnvironmentProblem, CoderError) as exc:
        raise Halt("environment_error", "governance", f"preflight: {exc}") from None
