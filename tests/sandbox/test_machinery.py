"""Confined code cannot reach the sandbox's own machinery, so the status snodo reads is the
command's own (SPEC §9: observed by snodo, never reported from inside).

Under bubblewrap the machinery inside the sandbox is its init (pid 1), which writes the
command's status on an eventfd that bubblewrap's monitor reads: whoever took that eventfd
(``pidfd_open`` + ``pidfd_getfd``, ``ptrace``, ``/proc/1/mem``, ``/proc/1/fd/N``) could report
exit 0 for a command that failed. Under Landlock it is snodo itself, the parent. Each attempt
is made from real confined Python code with real system calls (ctypes), under each backend,
and the status snodo reports is checked against the one the code really exited with.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from snodo.base.errors import EnvironmentProblem
from snodo.process.runner import run_process
from snodo.sandbox import SandboxPolicy
from snodo.sandbox.choose import missing
from tests.conftest import git, make_repo

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the payload's system call numbers are x86_64's")

#: The attack, as agent code would make it: every way to the status writer's descriptors or
#: memory, then the forgery itself where a descriptor was taken, then exit 1. Prints one JSON
#: object: each attempt and its errno (0: it worked).
FORGE = textwrap.dedent(
    """\
    import ctypes, json, os, struct, sys

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
    NR = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
          "pidfd_open": 434, "pidfd_getfd": 438, "process_madvise": 440}
    seen = {}
    forged = []


    class Iovec(ctypes.Structure):
        _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


    def call(label, name, *args):
        got = libc.syscall(ctypes.c_long(NR[name]), *(ctypes.c_long(a) for a in args))
        seen[label] = 0 if got >= 0 else ctypes.get_errno()
        return got


    def take(fd):
        # A descriptor of the machinery: an eventfd is the status channel, report exit 0.
        try:
            if "eventfd" in os.readlink(f"/proc/self/fd/{fd}"):
                os.write(fd, struct.pack("Q", 1))
                forged.append(fd)
        except OSError:
            pass


    own = os.getpid()
    buffer = ctypes.create_string_buffer(8)
    local = Iovec(ctypes.addressof(buffer), 8)
    remote = Iovec(ctypes.addressof(buffer), 8)
    # The filter, shown on calls the kernel alone would allow (on this process itself).
    call("pidfd_open self", "pidfd_open", own, 0)
    call("ptrace traceme", "ptrace", PTRACE_TRACEME, 0, 0, 0)
    call("process_vm_readv self", "process_vm_readv", own, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)
    call("kcmp self", "kcmp", own, own, 0, 0, 0)
    call("pidfd_getfd", "pidfd_getfd", 0, 0, 0)
    call("process_madvise", "process_madvise", 0, ctypes.addressof(local), 1, 0, 0)
    # The machinery: bubblewrap's init is pid 1 and the command's parent; under Landlock the
    # parent is snodo.
    for target in sorted({1, os.getppid()}):
        pidfd = call(f"pidfd_open {target}", "pidfd_open", target, 0)
        if pidfd >= 0:
            for n in range(64):
                fd = call(f"pidfd_getfd {target} {n}", "pidfd_getfd", pidfd, n, 0)
                if fd >= 0:
                    take(fd)
        if call(f"ptrace attach {target}", "ptrace", PTRACE_ATTACH, target, 0, 0) >= 0:
            os.waitpid(target, 0)
        call(f"ptrace seize {target}", "ptrace", PTRACE_SEIZE, target, 0, 0)
        call(f"process_vm_writev {target}", "process_vm_writev", target, ctypes.addressof(local), 1,
             ctypes.addressof(remote), 1, 0)
        call(f"process_vm_readv {target}", "process_vm_readv", target, ctypes.addressof(local), 1,
             ctypes.addressof(remote), 1, 0)
        for path in (f"/proc/{target}/mem", f"/proc/{target}/task/{target}/mem"):
            try:
                os.close(os.open(path, os.O_RDWR))
                seen[f"open {path}"] = 0
            except OSError as exc:
                seen[f"open {path}"] = exc.errno
        for n in range(64):
            for where in (f"/proc/{target}/fd/{n}", f"/proc/{target}/task/{target}/fd/{n}"):
                try:
                    fd = os.open(where, os.O_RDWR)
                except OSError as exc:
                    seen.setdefault(f"open /proc/{target}/fd/N", exc.errno)
                else:
                    seen[f"open {where}"] = 0
                    take(fd)
    print(json.dumps({"seen": seen, "forged": forged}), flush=True)
    sys.exit(1)
    """
)

#: A system call through another ABI, in a child: the i386 entry (``int 0x80``, getpid), and
#: the x32 numbers (getpid with bit 30). Prints how each child ended.
ABI = textwrap.dedent(
    """\
    import ctypes, mmap, os

    def in_child(label, action):
        pid = os.fork()
        if pid == 0:
            try:
                action()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        ended = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        print(label, ended, flush=True)

    def i386():
        code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        code.write(b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3")  # mov eax, 20 (getpid); int 0x80; ret
        address = ctypes.addressof(ctypes.c_char.from_buffer(code))
        ctypes.CFUNCTYPE(ctypes.c_int)(address)()

    def x32():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(ctypes.c_long(0x40000000 | 39))

    in_child("i386", i386)
    in_child("x32", x32)
    """
)

EPERM, SIGSYS = 1, 31


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "forge.py").write_text(FORGE)
    (ws / "abi.py").write_text(ABI)
    return ws


def _attempts(output: str) -> tuple[dict[str, int], list[int]]:
    said = json.loads(output.strip().splitlines()[-1])
    return said["seen"], said["forged"]


def _check_refused(seen: dict[str, int]) -> None:
    worked = sorted(label for label, err in seen.items() if err == 0)
    assert worked == [], f"reached the sandbox's machinery: {worked}"
    # The seccomp filter itself: calls the kernel allows a process on itself are refused.
    for label in ("pidfd_open self", "ptrace traceme", "process_vm_readv self", "kcmp self"):
        assert seen[label] == EPERM, (label, seen[label])
    assert seen["pidfd_getfd"] == EPERM  # the kernel alone says EBADF: 0 is no pidfd
    assert seen["process_madvise"] == EPERM


def test_confined_code_cannot_reach_the_machinery_nor_forge_its_status(backend: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    result = run_process([sys.executable, "forge.py"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
    seen, forged = _attempts(result.output)
    _check_refused(seen)
    assert forged == []
    # The status snodo reports is the one the code exited with.
    assert result.returncode == 1 and not result.ok, result


#: In a user and mount namespace of its own (where it holds every capability), the command
#: tries to take the cover off bubblewrap's init and to mount a ``/proc`` of its own.
UNCOVER = textwrap.dedent(
    """\
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, CLONE_NEWUSER, MNT_DETACH = 0x00020000, 0x10000000, 2
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        print("unshare", ctypes.get_errno())
    for target in (b"/proc/1", b"/proc"):
        done = libc.umount2(target, MNT_DETACH)
        print("umount", target.decode(), done, ctypes.get_errno() if done else 0)
    done = libc.mount(b"proc", b"/tmp", b"proc", 0, None)
    print("mount proc", done, ctypes.get_errno() if done else 0)
    for path in ("/proc/1/mem", "/proc/1/fd/0", "/tmp/1/mem"):
        try:
            os.close(os.open(path, os.O_RDONLY))
            print("opened", path)
        except OSError as exc:
            print("refused", path, exc.errno)
    """
)


def test_the_cover_on_bubblewraps_init_stays_in_a_namespace_of_the_commands_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mounts inherited from bubblewrap's namespace are locked: a command with every
    capability in a user namespace of its own cannot unmount them, nor mount a ``/proc``
    that shows pid 1 (the kernel refuses a new proc while the old one is partly covered)."""
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", "bwrap")
    ws = _workspace(tmp_path)
    (ws / "uncover.py").write_text(UNCOVER)
    result = run_process([sys.executable, "uncover.py"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
    assert result.returncode == 0, result.output
    lines = result.output.splitlines()
    assert [line for line in lines if line.startswith("umount") and line.split()[2] == "0"] == [], lines
    assert [line for line in lines if line.startswith(("opened", "mount proc 0"))] == [], lines
    assert sum(line.startswith("refused") for line in lines) == 3, lines


def test_without_a_filter_for_the_machine_nothing_runs(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine whose system call numbers the filter does not know, a confined call is an
    environment problem naming the filter, and the command never runs unfiltered."""
    ws = _workspace(tmp_path)
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    with pytest.raises(EnvironmentProblem, match="riscv64: snodo's seccomp filter"):
        run_process(["sh", "-c", "touch ran"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
    assert not (ws / "ran").exists()
    assert any("seccomp filter" in gap for gap in missing(backend))


def test_a_system_call_through_another_abi_kills_the_process(backend: str, tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    unconfined = run_process([sys.executable, "abi.py"], cwd=ws, timeout=60)
    confined = run_process([sys.executable, "abi.py"], cwd=ws, timeout=60, sandbox=SandboxPolicy(workspace=ws))
    assert confined.returncode == 0, confined.output
    ended = dict(line.split(" ", 1) for line in confined.output.splitlines())
    without = dict(line.split(" ", 1) for line in unconfined.output.splitlines())
    # Where the kernel runs the i386 entry at all, unconfined it answers (exit 0); confined
    # the filter kills the caller, as it does for the x32 numbers (unconfined: ENOSYS, or an
    # answer on a kernel built with x32).
    if without["i386"] == "exit 0":
        assert ended["i386"] == f"signal {SIGSYS}"
    assert without["x32"] == "exit 0"
    assert ended["x32"] == f"signal {SIGSYS}"


#: The project's pre-commit hook judges the work (the ``git-hooks`` validator, post_execute).
PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [scope, hooks]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  - {validator_id: hooks, validator_type: git-hooks, evaluation_phase: post_execute}
execution: {max_recovery_depth: 0}
"""


def test_a_failing_hook_that_attempts_the_forgery_is_a_blocker(backend: str, tmp_path: Path) -> None:
    """The hook attempts every way to the status writer, then exits 1: a blocker, the run
    halted, not a hook skipped and a run completed."""
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    (repo / "forge.py").write_text(FORGE)
    hook = repo / ".git" / "hooks" / "pre-commit"
    # exec: the hook is the forger itself, its parent the sandbox's machinery
    hook.write_text(f'#!/bin/sh\nexec {sys.executable} "$(git rev-parse --show-toplevel)/forge.py"\n')
    hook.chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project", "--no-verify")
    done = subprocess.run(
        [sys.executable, "-I", "-m", "snodo", "run", "add a hello module", "--mock", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=180,
    )
    payload = json.loads(done.stdout)
    assert payload.get("status") == "halted" and payload["outcome"] == "blocker", done.stdout + done.stderr
    hooks = next(v for v in payload["validators"] if v["validator_id"] == "hooks")
    assert hooks["severity"] == "blocker" and hooks["details"]["exit_code"] == 1, hooks
    seen, forged = _attempts(hooks["details"]["output"])
    _check_refused(seen)
    assert forged == []
