"""The small interface every confinement backend implements (bubblewrap, Landlock; a macOS
Seatbelt profile would be a third)."""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import field, frozen

from snodo.sandbox.policy import SandboxPolicy

if TYPE_CHECKING:
    from snodo.sandbox.launcher import Launched


@frozen(kw_only=True)
class Prepared:
    """How to start one confined child: the argv and environment to hand to ``Popen``, a
    ``preexec_fn`` (Landlock restricts the child there), and what to do once it ended."""

    backend: str
    argv: tuple[str, ...]
    env: dict[str, str]
    preexec_fn: Callable[[], None] | None = None
    #: After the child's process group is gone: kill whatever escaped it
    #: (``leader_pid``, the leaders of the other live runs, which it must spare).
    reap: Callable[[int, Collection[int]], object] | None = field(default=None, eq=False)
    #: Always called last: closes descriptors, removes the private temporary directory.
    cleanup: Callable[[], None] | None = field(default=None, eq=False)
    #: Entered around the spawn (the thread joins the run's pids cgroup, :mod:`.cgroup`).
    spawning: Callable[[], AbstractContextManager[None]] | None = field(default=None, eq=False)
    #: Instead of ``Popen``: start the command through a running launcher
    #: (:mod:`.launcher`); the argument says whether it gets a stdin pipe.
    launch: Callable[[bool], Launched] | None = field(default=None, eq=False)


class Backend(abc.ABC):
    """One way to confine a child process on this platform."""

    name: str = ""

    @abc.abstractmethod
    def probe(self) -> str | None:
        """Start a trivial confined process; ``None`` when that worked, else why not."""

    @abc.abstractmethod
    def prepare(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], policy: SandboxPolicy, tmpdir: Path
    ) -> Prepared:
        """Turn ``argv`` into a confined start; raises ``EnvironmentProblem`` if it cannot."""
