"""Resource limits of a confined process (``execution.limits``): under bubblewrap through
``prlimit`` inside the sandbox (no slow ``preexec_fn``), under Landlock in its ``preexec_fn``."""

from __future__ import annotations

import functools
import resource
import shutil
from collections.abc import Callable

from snodo.base.errors import EnvironmentProblem
from snodo.sandbox.policy import Limits


@functools.cache
def _prlimit() -> str | None:
    return shutil.which("prlimit")


def _clamped(res: int, value: int) -> int:
    """``value``, or the current hard limit when that is lower (raising it is not allowed)."""
    hard = resource.getrlimit(res)[1]
    return value if hard == resource.RLIM_INFINITY or value <= 0 else min(value, hard)


def _pairs(limits: Limits) -> list[tuple[int, str, int]]:
    return [
        (resource.RLIMIT_FSIZE, "--fsize", _clamped(resource.RLIMIT_FSIZE, limits.file_size)),
        (resource.RLIMIT_NPROC, "--nproc", _clamped(resource.RLIMIT_NPROC, limits.processes)),
        (resource.RLIMIT_AS, "--as", _clamped(resource.RLIMIT_AS, limits.memory)),
    ]


def limit_prefix(limits: Limits) -> tuple[str, ...]:
    """The ``prlimit … --`` prefix that applies ``limits`` to the command after it."""
    wanted = [(flag, value) for _, flag, value in _pairs(limits) if value > 0]
    if not wanted:
        return ()
    program = _prlimit()
    if program is None:
        raise EnvironmentProblem(
            "cannot apply execution.limits: the util-linux program prlimit is not installed",
            hint="install util-linux, or set every execution.limits entry to 0",
        )
    return (program, *(f"{flag}={value}" for flag, value in wanted), "--")


def limit_setter(limits: Limits) -> Callable[[], None]:
    """For a ``preexec_fn``: sets ``limits``, everything bound in advance."""
    wanted = [(res, (value, value)) for res, _, value in _pairs(limits) if value > 0]
    setrlimit = resource.setrlimit

    def apply() -> None:
        for res, pair in wanted:
            setrlimit(res, pair)

    return apply
