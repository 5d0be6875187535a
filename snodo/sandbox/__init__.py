"""Confined execution of agent-written content (see docs/security.md).

``SandboxPolicy`` says what a child may touch, ``confined(policy)`` makes it the current
policy, and ``snodo.process.runner.run_process(..., sandbox=policy)`` starts the child through the
backend that works here (bubblewrap, else Landlock), failing closed without one.
"""

from snodo.sandbox.base import Backend, Prepared
from snodo.sandbox.choose import BACKENDS, FORCE_ENV, BackendStatus, choose_backend, forget_probes, statuses
from snodo.sandbox.policy import SandboxPolicy, UnconfinedCallback, configured_home, confined, current_policy

__all__ = [
    "BACKENDS",
    "FORCE_ENV",
    "Backend",
    "BackendStatus",
    "Prepared",
    "SandboxPolicy",
    "UnconfinedCallback",
    "choose_backend",
    "configured_home",
    "confined",
    "current_policy",
    "forget_probes",
    "statuses",
]
