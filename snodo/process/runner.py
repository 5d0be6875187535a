"""Run a child process the way governance needs: no shell, its own process group, bounded; whatever
ends the run (snodo too: :func:`terminate_all`) kills the group: nothing spawned outlives the verdict."""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import IO

from attrs import evolve, frozen

from snodo.base.errors import EnvironmentProblem
from snodo.process import callscope
from snodo.process.output import BoundedOutput, collect, drain
from snodo.sandbox import Prepared, SandboxPolicy, choose_backend
from snodo.sandbox.base import hold_adoption, reap_adopted
from snodo.sandbox.cgroup import pid_group, release
from snodo.sandbox.choose import distrust_bwrap
from snodo.sandbox.environ import confined_environment, discard_private_dir, make_private_dir
from snodo.sandbox.policy import resolved


@frozen(kw_only=True)
class ProcessResult:
    argv: tuple[str, ...]
    returncode: int | None
    output: str
    timed_out: bool
    silent_too_long: bool
    duration: float
    stopped: bool = False  # ``stop_if`` matched a line

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.silent_too_long and not self.stopped

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


#: Reentrant: a signal handler (run by the main thread between any two bytecodes, this lock held
#: or not) calls :func:`live_processes` and :func:`terminate_all`.
_LIVE_LOCK = threading.RLock()
#: Each live child: its process, its sandbox's preparation, its argv (before confinement).
_LIVE: dict[int, tuple[subprocess.Popen[bytes], Prepared, tuple[str, ...]]] = {}
#: Starts under way (not yet in ``_LIVE``) by thread, which :func:`terminate_all` waits for (at most
#: 5 s) unless they are its own thread's (a signal handler cannot wait for the code it interrupted).
_STARTING: collections.Counter[int] = collections.Counter()
_STARTED = threading.Condition(_LIVE_LOCK)


def _other_leaders(pid: int) -> frozenset[int]:
    with _LIVE_LOCK:
        return frozenset(_LIVE) - {pid}


def live_processes() -> list[tuple[str, ...]]:
    """The argv (before confinement) of every child tree running now."""
    with _LIVE_LOCK:
        return [argv for _, _, argv in _LIVE.values()]


def terminate_all() -> int:
    """Kill every live child tree of :func:`run_process`, those being started included; how many."""
    with _LIVE_LOCK:
        me = threading.get_ident()
        _STARTED.wait_for(lambda: not any(n for thread, n in _STARTING.items() if thread != me), timeout=5.0)
        live = list(_LIVE.values())
    for proc, prepared, _ in live:
        with contextlib.suppress(Exception):
            _sweep(proc, prepared)
    return len(live)


atexit.register(terminate_all)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    silence_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    stdin_text: str | None = None,
    max_output: int = 2_000_000,
    sandbox: SandboxPolicy | None = None,
    stop_if: Callable[[str], bool] | None = None,
    pass_env: Sequence[str] = (),
) -> ProcessResult:
    """Run ``argv`` in ``cwd`` (documented at :func:`snodo.api.run_process`)."""
    start = time.monotonic()
    with contextlib.ExitStack() as cleanups:
        prepared = prepare_child(argv, cwd, env, sandbox, pass_env, cleanups)
        call = callscope.current()  # an MCP call that may be cancelled
        if call is not None:
            call.check()
        proc = _spawn(argv, prepared, cwd=cwd, stdin=stdin_text)
        if call is not None:
            call.add(proc.pid, lambda: _kill_group(proc))
        try:
            take = BoundedOutput(max_output, on_line, stop_if)
            why = _wait(proc, prepared, take, start + timeout, silence_timeout)
            result = ProcessResult(
                argv=tuple(argv),
                returncode=proc.returncode if why == "exited" and not take.stopped else None,
                output=take.text(),
                timed_out=why == "timeout",
                silent_too_long=why == "silent",
                stopped=take.stopped,
                duration=time.monotonic() - start,
            )
        except BaseException:  # interrupted while waiting: nothing it spawned may keep running
            _sweep(proc, prepared)
            raise
        finally:
            _finish(proc, prepared, call)
        _check_sandbox_started(argv, prepared, result)
        return result


def shown(path: object, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def prepare_child(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxPolicy | None,
    pass_env: Sequence[str],
    cleanups: contextlib.ExitStack,
) -> Prepared:
    """How to start ``argv`` (``backend`` empty: unconfined); each undoing goes on ``cleanups`` at once."""
    if not argv:
        raise EnvironmentProblem("cannot run a process: the command is empty")
    _check_cwd(argv[0], cwd)
    child_env = dict(env) if env is not None else dict(os.environ)
    child_env["PWD"] = os.path.abspath(cwd)
    if sandbox is None or sandbox.mode == "off":
        if sandbox is not None and sandbox.on_unconfined is not None:
            sandbox.on_unconfined(tuple(argv), Path(cwd))
        return Prepared(backend="", argv=tuple(argv), env=child_env)
    # Inside bubblewrap a missing program is only an exit status: say so here (no verdict).
    if "/" not in argv[0] and shutil.which(argv[0], path=child_env.get("PATH", os.defpath)) is None:
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r}: program not found", hint="install it or fix the command"
        )
    return _confine(argv, Path(cwd), child_env, sandbox, pass_env, cleanups)


def _confine(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    policy: SandboxPolicy,
    pass_env: Sequence[str],
    cleanups: contextlib.ExitStack,
) -> Prepared:
    real, workspace = resolved(cwd), resolved(policy.workspace)
    inside_workspace = real == workspace or str(real).startswith(f"{workspace}/")
    if not inside_workspace and any(h == real or str(real).startswith(f"{h}/") for h in policy.hidden_paths()):
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r} confined: its working directory {shown(cwd)} is hidden from "
            f"confined processes (it is in snodo's state directory, outside the workspace {shown(workspace)})"
        )
    backend = choose_backend()
    if policy.on_confined is not None:
        policy.on_confined(backend.name)
    tmpdir = make_private_dir()
    cleanups.callback(discard_private_dir, tmpdir)
    # Until the run is over snodo is the child subreaper: a confined orphan is snodo's to sweep.
    cleanups.callback(hold_adoption())
    env = confined_environment(env, named=(*policy.env, *pass_env), tmpdir=tmpdir)
    prepared = backend.prepare(argv, cwd=cwd, env=env, policy=policy, tmpdir=tmpdir, cleanups=cleanups)
    group = pid_group(policy.limits.processes)  # limited, and killed as a whole
    if group is None:
        return prepared
    cleanups.callback(release, group)
    reap = prepared.reap

    def reap_all(leader: int, others: Collection[int]) -> None:
        group.kill()
        if reap is not None:
            reap(leader, others)

    return evolve(prepared, reap=reap_all, spawning=group.spawning)


def _check_cwd(program: str, cwd: Path) -> None:
    try:
        is_dir = Path(cwd).is_dir()
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(
            f"cannot run {shown(program)!r}: the working directory {shown(cwd)} is unusable: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None
    if not is_dir:
        raise EnvironmentProblem(f"cannot run {shown(program)!r}: the working directory {shown(cwd)} does not exist")


def _spawn(argv: Sequence[str], prepared: Prepared, *, cwd: Path, stdin: str | None) -> subprocess.Popen[bytes]:
    how = f" confined by {prepared.backend}" if prepared.backend else ""
    what = f"{shown(argv[0])!r}{how}"
    proc: subprocess.Popen[bytes] | None = None
    me = threading.get_ident()
    with _LIVE_LOCK:
        _STARTING[me] += 1
    try:
        with prepared.spawning():
            proc = subprocess.Popen(
                list(prepared.argv),
                cwd=cwd,
                env=prepared.env,
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=prepared.pass_fds,
                preexec_fn=prepared.preexec_fn,  # noqa: PLW1509
            )
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"cannot run {what}: program not found", hint="install it or fix the command"
        ) from None
    except subprocess.SubprocessError as exc:  # preexec_fn failed: the sandbox did not start
        raise EnvironmentProblem(f"cannot run {what}: the sandbox did not start ({exc})") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {what}: {exc.strerror or exc}") from None
    finally:
        with _LIVE_LOCK:  # live before no longer starting: a handler between the two sees it either way
            if proc is not None:
                _LIVE[proc.pid] = (proc, prepared, tuple(argv))
            _STARTING[me] -= 1
            if not _STARTING[me]:
                del _STARTING[me]
            _STARTED.notify_all()
    if stdin is not None and proc.stdin is not None:  # written aside: the output is read meanwhile
        threading.Thread(target=_feed, args=(proc.stdin, stdin.encode()), daemon=True).start()
    return proc


def _sweep(proc: subprocess.Popen[bytes], prepared: Prepared) -> None:
    """Kill the child's process group and whatever of the run escaped it."""
    _kill_group(proc)
    if prepared.reap is not None:
        prepared.reap(proc.pid, _other_leaders(proc.pid))


def _finish(proc: subprocess.Popen[bytes], prepared: Prepared, call: callscope.CallScope | None) -> None:
    _kill_group(proc)
    with contextlib.suppress(Exception):
        proc.kill()
    proc.wait()
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)
    if call is not None:
        call.discard(proc.pid)
    if prepared.backend:
        reap_adopted(_other_leaders(proc.pid))


def _check_sandbox_started(argv: Sequence[str], prepared: Prepared, result: ProcessResult) -> None:
    """bubblewrap that could not set the sandbox up exits 1 saying so: no verdict."""
    if prepared.backend == "bwrap" and result.returncode == 1 and result.output.startswith("bwrap: "):
        distrust_bwrap()  # a remembered probe may be stale
        raise EnvironmentProblem(
            f"cannot run {shown(argv[0])!r} confined by bwrap: the sandbox did not start "
            f"({result.output.splitlines()[0]})",
            hint="`snodo doctor` shows whether confinement works here; see docs/security.md",
        )


def _feed(stdin: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError), stdin:  # the child may end without reading it all
        stdin.write(data)


def _wait(
    proc: subprocess.Popen[bytes], prepared: Prepared, take: BoundedOutput, deadline: float, silence: float | None
) -> str:
    """Read the output until the leader ends (``collect``'s reason why), then sweep the run."""
    why = collect(proc, take, deadline=deadline, silence_timeout=silence)
    if why != "exited":
        _kill_group(proc)
        proc.wait()
    _sweep(proc, prepared)  # the leader exited: nothing it spawned may keep the pipe open
    drain(proc, take, 5)
    if proc.stdout is not None:
        proc.stdout.close()
    return why
