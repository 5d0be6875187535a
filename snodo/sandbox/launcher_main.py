"""The program of the confined launcher (:mod:`snodo.sandbox.launcher`): it runs *inside*
bubblewrap as ``python -I -S -c <this file's text> <fd> <config>`` and starts each confined
command snodo asks for, so a command costs a fork and an exec instead of a whole sandbox.

Self-contained on purpose: it imports only the standard library and nothing of snodo or of
the workspace (``-I -S``: no current directory on ``sys.path``, no ``PYTHON*`` variables, no
``site``/``.pth``), so nothing an agent wrote can steer it. It keeps its capabilities (in the
sandbox's user namespace only) to set up each command, is not dumpable (a confined process
of the same uid cannot ptrace it or read its ``/proc`` files), and talks only over the
``SOCK_SEQPACKET`` socket snodo handed it (close-on-exec here).

Each command gets its own ``B``: pid 1 of fresh PID, mount and IPC namespaces, cloned
ahead of time while no command runs, with a fresh ``/proc`` (only the command's own
processes are visible), a fresh empty ``TMPDIR`` and ``/dev/shm``, every capability
dropped. ``B`` waits on a socket of its own for one request (JSON plus three descriptors:
stdin, output, status), starts the command ``C`` (its limits, descriptors, working
directory, a new session, ``no_new_privs``), reaps orphans until ``C`` ends, kills whatever
is left in the namespace (a daemonised child dies with its command) and writes
``<status>\n<why it could not start>`` on the status descriptor.

The launcher hands each ``B``'s request socket to snodo (``{"op": "spare"}``), so a
request goes straight to it, one process hop fewer; snodo then tells the launcher which
request that ``B`` took (``{"op": "used"}``, with a copy of the status descriptor, kept
open until ``B`` is gone, so snodo sees the status pipe end only once the whole namespace
is). A request snodo sends the launcher itself (``{"op": "run"}``, when it holds no
spare) goes to a ``B`` made for it. ``{"op": "kill"}`` SIGKILLs a request's ``B`` (its
namespace dies with it). When snodo closes the channel the launcher kills every ``B``,
reaps each and exits, so each command's CPU time reaches snodo's children's time.
"""

import contextlib
import ctypes
import errno
import json
import os
import resource
import selectors
import signal
import socket
import sys

_PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 4, 24
_PR_SET_SECUREBITS, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 28, 38, 47
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80  # no root magic, all locked
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MAX_MESSAGE = 4 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)
#: ``clone`` must run holding the interpreter lock, as ``fork`` does (the child goes on
#: running Python code).
_PYLIBC = ctypes.PyDLL(None, use_errno=True)
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
_ZEROS = (ctypes.c_ulong(0),) * 4
_DEFAULT_SIGNALS = tuple(s for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _prctl(option: int, arg: int) -> int:
    return int(_LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), *_ZEROS[:3]))


def _mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    done = _LIBC.mount(source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(flags), data.encode() or None)
    _check(done, f"mount {target}")


def _fresh_mounts(config: dict[str, object]) -> None:
    """In the command's init: a ``/proc`` of its own PID namespace (its files kept as
    read-only as bubblewrap made them), a fresh empty private directory, ``/dev/shm`` and
    ``/dev/pts``."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for path in config["proc_read_only"]:  # type: ignore[attr-defined]
        if os.path.exists(path):
            _mount(path, path, "", _MS_BIND | _MS_REC)
            _mount(path, path, "", _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for path, mode in ((str(config["tmpdir"]), "mode=0700"), ("/dev/shm", "mode=1777")):  # noqa: S108
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, mode)
    if os.path.isdir("/dev/pts"):  # its own terminals: none of another command's ptys
        _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")


def _drop_privileges(last_cap: int) -> None:
    """No capability can be kept or regained (bounding set, ambient, securebits), and no
    new privileges through exec."""
    _check(_prctl(_PR_SET_SECUREBITS, _SECUREBITS), "securebits")
    for cap in range(last_cap + 1):
        _check(_prctl(_PR_CAPBSET_DROP, cap), "dropping the bounding set")
    _check(_prctl(_PR_CAP_AMBIENT, 4), "clearing ambient capabilities")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(_LIBC.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")


def _program(name: str, env: dict[str, str]) -> str:
    """``name`` found on the command's own ``PATH`` (as ``execvp`` would)."""
    if "/" in name:
        return name
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise OSError(errno.ENOENT, "program not found")


def _command(request: dict[str, object], fds: list[int]) -> int:
    """In ``B``, for its one request: start the command, and once it ended kill and reap
    whatever is left in the namespace; its exit status."""
    os.chdir(str(request["cwd"]))
    for res, value in request["limits"]:  # type: ignore[attr-defined]
        resource.setrlimit(res, (value, value))
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
    pid = os.posix_spawn(
        _program(argv[0], env),
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, to) for fd, to in ((fds[0], 0), (fds[1], 1), (fds[1], 2))],
        setsid=True,
        setsigmask=(),
        setsigdef=_DEFAULT_SIGNALS,
    )
    os.close(fds[0])
    os.close(fds[1])
    code = -1
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return code
        if done == pid:
            code = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if code >= 0:  # from pid 1: everything else in the namespace, again until none is left
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)


def _init(requests: socket.socket, config: dict[str, object]) -> None:
    """``B``, pid 1 of fresh namespaces, made before its command is asked for: sets them up
    and drops every privilege (the command inherits that), then waits for its one request
    (JSON and the stdin, output and status descriptors), runs it and reports
    ``<status>\n<why it could not start>`` on the status descriptor."""
    failed: BaseException | None = None
    # No handler of its own (Python's SIGINT one would do): a signal the command sends its
    # pid 1 is then dropped by the kernel, it cannot end its init early.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        _fresh_mounts(config)
        _drop_privileges(int(config["last_cap"]))  # type: ignore[call-overload]
    except BaseException as exc:  # reported with the request it cannot serve
        failed = exc
    try:
        message, fds, _flags, _addr = socket.recv_fds(requests, _MAX_MESSAGE, 3)
    except OSError:
        return
    for fd in fds:  # close-on-exec: the command gets them only as 0, 1 and 2
        os.set_inheritable(fd, False)
    if len(fds) != 3:
        return
    report = "127\n"
    try:
        if failed is not None:
            raise failed
        report = f"{_command(json.loads(message), fds)}\n"
    except BaseException as exc:  # every failure before exec is reported
        report = f"127\n{getattr(exc, 'strerror', None) or exc or type(exc).__name__}"
    finally:
        os.write(fds[2], report.encode()[:4000])


def _spare(config: dict[str, object]) -> tuple[int, int, socket.socket]:
    """Clone the next ``B`` (the launcher's memory, copied on write) into a new PID, mount
    and IPC namespace, ready for a request: its pid, pidfd and request socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _MAX_MESSAGE)
    flags = ctypes.c_ulong(_CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | signal.SIGCHLD)
    pid = int(_PYLIBC.syscall(ctypes.c_long(_SYS_CLONE), flags, *_ZEROS))
    if pid == 0:
        try:  # nothing of the launcher's (its channel above all) stays open in ``B``
            os.closerange(0, theirs.fileno())
            os.closerange(theirs.fileno() + 1, 1 << 16)
            _init(theirs, config)
        finally:
            os._exit(0)
    theirs.close()
    if pid < 0:
        ours.close()
        raise OSError(ctypes.get_errno(), "clone failed")
    return pid, os.pidfd_open(pid), ours


def _setup(config: dict[str, object]) -> None:
    """Once: what every command's namespaces need (the read-only mounts below ``/proc``
    bubblewrap made, the last capability), and no mount shared with the launcher's own (a
    command's fresh ``/proc`` must not show up in the launcher or in another command)."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        config["last_cap"] = int(fh.read())
    covered, shared = [], False
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split(" - ")[0].split()
            point = fields[4].replace("\\040", " ")
            shared |= any(f.startswith("shared:") for f in fields[6:])
            if point.startswith("/proc/") and point not in covered:
                covered.append(point)
    config["proc_read_only"] = covered
    if shared:
        _mount("none", "/", "", _MS_REC | _MS_PRIVATE)


def _ready(
    config: dict[str, object], inits: dict[int, tuple[int, int, int]], selector: selectors.BaseSelector
) -> tuple[int, int, socket.socket] | None:
    try:
        spare = _spare(config)
    except OSError:
        return None
    inits[spare[1]] = (spare[0], -1, 0)
    selector.register(spare[1], selectors.EVENT_READ)
    return spare


def _offer(
    config: dict[str, object],
    inits: dict[int, tuple[int, int, int]],
    selector: selectors.BaseSelector,
    channel: socket.socket,
    number: int,
) -> int | None:
    """Make the next ``B`` and hand its request socket to snodo as spare ``number``; its
    pidfd (``None`` if it could not be made)."""
    spare = _ready(config, inits, selector)
    if spare is None:
        return None
    _pid, pidfd, requests = spare
    try:
        with contextlib.suppress(OSError):  # snodo is gone: the loop ends on the channel's end
            socket.send_fds(channel, [json.dumps({"op": "spare", "spare": number}).encode()], [requests.fileno()])
    finally:
        requests.close()  # snodo's now: if snodo closes it unused, ``B`` reads the end and exits
    return pidfd


def _end(inits: dict[int, tuple[int, int, int]]) -> None:
    """Kill each ``B`` (its namespace dies with it) and reap it: the CPU time of every
    command is then in the launcher's children's time, and so in snodo's."""
    for pidfd in inits:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    for pidfd, (pid, status, _ident) in inits.items():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if status >= 0:
            os.close(status)
        os.close(pidfd)
    inits.clear()


def main() -> None:
    channel_fd, config = int(sys.argv[1]), json.loads(sys.argv[2])
    _check(_prctl(_PR_SET_DUMPABLE, 0), "not dumpable")
    os.closerange(3, channel_fd)
    os.closerange(channel_fd + 1, 1 << 16)
    os.set_inheritable(channel_fd, False)
    channel = socket.socket(fileno=channel_fd)
    _setup(config)
    # pidfd -> (pid, status descriptor or -1, request id) of each ``B``: the status
    # descriptor is closed only once ``B`` is gone, and with it its whole namespace.
    inits: dict[int, tuple[int, int, int]] = {}
    # spare number -> pidfd of each ``B`` handed to snodo that snodo has not said it used
    offered: dict[int, int] = {}
    numbers = 0
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    # The largest request it can hand on (the kernel caps a socket's buffer at net.core.wmem_max).
    probe = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    probe[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _MAX_MESSAGE)
    room = probe[0].getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
    for end in probe:
        end.close()
    channel.send(json.dumps({"ready": True, "max_request": room}).encode())
    while True:
        # The next command's init is made while no command runs (not to take the CPU from
        # one), and only once snodo used the last one it was handed.
        idle = all(status < 0 for _pid, status, _ident in inits.values())
        if not offered and idle:
            numbers += 1
            pidfd = _offer(config, inits, selector, channel, numbers)
            if pidfd is not None:
                offered[numbers] = pidfd
        for key, _ in selector.select():
            if key.fileobj is not channel:  # an init ended: reaped only now (its pid stays ours)
                selector.unregister(key.fd)
                pid, status, _ident = inits.pop(key.fd)
                os.waitpid(pid, 0)
                if status >= 0:
                    os.close(status)
                for number in [n for n, fd in offered.items() if fd == key.fd]:
                    del offered[number]  # snodo's socket to it is dead: a new one is offered
                os.close(key.fd)
                continue
            try:
                message, fds, _flags, _addr = socket.recv_fds(channel, _MAX_MESSAGE, 3)
            except ConnectionError:
                message, fds = b"", []
            if not message:  # snodo closed the channel: nothing more to start
                _end(inits)
                return
            for fd in fds:
                os.set_inheritable(fd, False)
            try:
                request = json.loads(message)
                op = request.get("op")
            except (ValueError, AttributeError):
                op = None
            if op == "kill":
                for pidfd, (_pid, _status, ident) in inits.items():
                    if ident == int(request["id"]):
                        with contextlib.suppress(ProcessLookupError):
                            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                continue
            if op == "used" and len(fds) == 1:  # snodo sent request ``id`` to spare ``spare``
                pidfd = offered.pop(int(request["spare"]), -1)
                if pidfd in inits and inits[pidfd][1] < 0:
                    inits[pidfd] = (inits[pidfd][0], fds[0], int(request["id"]))
                else:  # that init is gone already: so is its namespace
                    os.close(fds[0])
                continue
            if op != "run" or len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                continue
            handed = False
            spare = _ready(config, inits, selector)  # snodo held no spare: one for this request
            if spare is not None:
                with contextlib.suppress(OSError):
                    socket.send_fds(spare[2], [message], fds)
                    handed = True
                spare[2].close()
                if spare[1] in inits:
                    inits[spare[1]] = (spare[0], fds[2] if handed else -1, int(request["id"]))
            if not handed:  # no init ready (or it is gone): the status pipe says so at once
                os.close(fds[2])
            for fd in fds[:2]:
                os.close(fd)


if __name__ == "__main__":
    main()
