"""Confined execution of agent-written content (docs/security.md): ``run_process`` starts a
child under the current :class:`SandboxPolicy` through bubblewrap, else Landlock, else not at all."""

from snodo.sandbox.base import Prepared
from snodo.sandbox.choose import choose_backend, forget_probes
from snodo.sandbox.policy import SandboxPolicy, confined, current_policy

__all__ = ["Prepared", "SandboxPolicy", "choose_backend", "confined", "current_policy", "forget_probes"]
