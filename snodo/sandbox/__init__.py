"""Confined execution of agent-written content (docs/security.md): ``run_process`` starts a
child under the current :class:`SandboxPolicy` through bubblewrap, else Landlock, else not at all."""

from snodo.sandbox.base import Prepared
from snodo.sandbox.choose import BACKENDS, FORCE_ENV, Backend, BackendStatus, choose_backend, forget_probes, statuses
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
