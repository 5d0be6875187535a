"""The one way snodo runs ``git``: hardened, pinned, no shell, no prompt, a time limit.

The work tree is the agent's and nothing here is confined, so no program git would start may
be chosen by it: the repository is pinned (:func:`pin`), the environment scrubbed
(:func:`clean_env`), every key naming a program overridden (:data:`HARDENING`) and the
configured drivers neutralised (:func:`neutralise`). docs/security.md says what remains.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import EnvironmentProblem

GIT_TIMEOUT = 120.0

#: Who commits when the repository names nobody (engine commits, the empty base commit).
FALLBACK_IDENTITY = {"user.name": "snodo", "user.email": "snodo@localhost"}

#: Configuration overrides on every command: no key may name a program git would start.
HARDENING: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.sshCommand=false",
    "core.askPass=",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "diff.external=",
    "diff.ignoreSubmodules=all",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    # a signature shown or checked (``%G?``) starts its format's program: each is pinned
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=ssh-keygen",
    "gpg.ssh.defaultKeyCommand=",
    "gpg.ssh.allowedSignersFile=/dev/null",
    "gpg.ssh.revocationFile=/dev/null",
    "protocol.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.recurseSubmodules=false",
)

#: For ``snodo push``: the transports a remote in the repository's config may use (never ``ext::``).
PUSH_TRANSPORTS: tuple[str, ...] = tuple(
    arg for proto in ("file", "git", "ssh", "http", "https") for arg in ("-c", f"protocol.{proto}.allow=always")
)

#: Options added right after a subcommand (git 2.39 knows each of them there).
_SUBCOMMAND_FLAGS: Mapping[str, tuple[str, ...]] = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=all"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "show": ("--no-ext-diff", "--no-textconv"),
    "status": ("--ignore-submodules=all",),
    "commit": ("--no-verify",),
    "merge": ("--no-verify", "--no-stat"),
}

#: Variables of the caller's environment git may see; every other one (all ``GIT_*``) is dropped.
_KEPT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME")
_QUARANTINE_ENV = ("GIT_QUARANTINE_PATH", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")
_FIXED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": ":",
    "GIT_PAGER": "cat",
    "GIT_NO_REPLACE_OBJECTS": "1",
}


@frozen(kw_only=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def detail(self) -> str:
        """git's own explanation of a failure (stderr, else stdout, else the exit code)."""
        text = "\n".join(filter(None, (self.stderr.strip(), self.stdout.strip())))
        return text or f"exit code {self.returncode}"


class GitTimeout(EnvironmentProblem):
    """A git command overran :data:`GIT_TIMEOUT` and was killed."""


@frozen(kw_only=True)
class GitContext:
    """A repository as snodo found it before any agent ran: ``neutral`` switches off its
    configuration's filter and merge drivers, ``identity`` is which of ``user.name``/``user.email`` it sets."""

    work_tree: Path
    git_dir: Path
    neutral: tuple[str, ...] = ()
    identity: frozenset[str] = frozenset()

    def options(self) -> list[str]:
        return [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}", *_config(self.neutral)]

    def common_dir(self) -> Path:
        try:
            text = (self.git_dir / "commondir").read_text(encoding="utf-8").strip()
        except OSError:
            return self.git_dir
        return Path(os.path.realpath(self.git_dir / text))


_PINNED: dict[Path, GitContext] = {}
_PIN_LOCK = threading.Lock()


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git process: :data:`_KEPT_ENV`, ``LC_*``, :data:`_FIXED_ENV` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k in _KEPT_ENV or k.startswith("LC_")}
    if os.environ.get("GIT_QUARANTINE_PATH"):
        # in a pre-receive hook (`snodo verify` as the merge gate) the pushed objects wait in
        # a quarantine these name; they only add where objects are read from
        env.update({k: os.environ[k] for k in _QUARANTINE_ENV if k in os.environ})
    return {**env, **_FIXED_ENV, **(extra or {})}


def _config(pairs: Sequence[str]) -> list[str]:
    return [part for pair in pairs for part in ("-c", pair)]


def _with_flags(args: Sequence[str]) -> list[str]:
    """``args`` with :data:`_SUBCOMMAND_FLAGS` after the subcommand (the first word not an option or ``-c``'s value)."""
    out, i = list(args), 0
    while i < len(out) and out[i].startswith("-"):
        i += 2 if out[i] == "-c" else 1
    if i >= len(out) or {"--abort", "--continue", "--quit"}.intersection(out[i + 1 :]):  # an ending takes no flag
        return out
    return [*out[: i + 1], *_SUBCOMMAND_FLAGS.get(out[i], ()), *out[i + 1 :]]


#: Found once at import: a plugin narrowing ``PATH`` later must not take snodo's own git away.
GIT_PROGRAM = shutil.which("git") or "git"


def _spawn(
    repo: Path,
    context: GitContext | None,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: str | bytes | None = None,
    timeout: float = GIT_TIMEOUT,
) -> subprocess.CompletedProcess[Any]:
    """``git -C repo args``, hardened, pinned to ``context``; text unless ``stdin`` is bytes."""
    where = context.options() if context is not None else []
    argv = [GIT_PROGRAM, "-C", str(repo), *_config(HARDENING), *where, *_with_flags(args)]
    text = not isinstance(stdin, bytes)
    try:
        return subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=text,
            encoding="utf-8" if text else None,
            errors="replace" if text else None,
            env=clean_env(env),
            timeout=timeout,
            check=False,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise EnvironmentProblem("cannot run 'git': program not found", hint="install git") from None
    except subprocess.TimeoutExpired:
        raise GitTimeout(
            f"git {' '.join(args[:2])} did not finish within {timeout:g} s in {repo}",
            hint="check for a lock file, then run again",
        ) from None


def pinned(path: Path) -> GitContext | None:
    """The pinned repository ``path`` lies in (the deepest one), or ``None``."""
    real = Path(os.path.realpath(path))
    with _PIN_LOCK:
        holding = [context for top, context in _PINNED.items() if real.is_relative_to(top)]
        best = max(holding, key=lambda context: len(context.work_tree.parts), default=None)
        if best is not None and not best.git_dir.is_dir():  # a removed worktree: forget it
            _PINNED.pop(best.work_tree, None)
            return None
    if best is not None and real != best.work_tree and _own_worktree(real, best.git_dir):
        return None  # a linked worktree of the same repository below it: pinned on its own
    return best


def _own_worktree(path: Path, git_dir: Path) -> bool:
    """Whether ``path``'s ``.git`` file points into ``<git_dir>/worktrees/`` (where agents cannot write)."""
    try:
        text = (path / ".git").read_text(errors="replace").strip() if (path / ".git").is_file() else ""
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    return Path(os.path.realpath(path / text.removeprefix("gitdir:").strip())).parent == git_dir / "worktrees"


def pin(path: Path) -> GitContext | None:
    """The repository holding ``path`` (``None``: none), found once before an agent runs, to pin later commands to."""
    return pin_at_head(path)[0]


def pin_at_head(path: Path) -> tuple[GitContext | None, str | None]:
    """:func:`pin`, and ``HEAD``'s commit as pinning read it (``None``: no commit, or pinned before)."""
    known = pinned(path)
    if known is not None:
        return known, None
    # `--revs-only HEAD`: the commit, or nothing at all when HEAD has none yet (no error)
    probe = _spawn(
        path, None, ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--revs-only", "HEAD"]
    )
    lines = probe.stdout.splitlines()
    if probe.returncode != 0 or len(lines) not in (2, 3):
        return None, None
    top, git_dir = (Path(os.path.realpath(line)) for line in lines[:2])
    head = lines[2].strip() if len(lines) == 3 else ""
    context = _read_config(top, git_dir)
    with _PIN_LOCK:
        _PINNED[top] = context
    return context, head if is_commit_id(head) else None


def is_commit_id(text: str) -> bool:
    """Whether ``text`` is a full object id (SHA-1 or SHA-256), as git prints one."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _read_config(top: Path, git_dir: Path) -> GitContext:
    """The drivers and identity keys ``git_dir``'s configuration defines, as git answers."""
    keys = r"^(filter|merge)\.|^user\.(name|email)$"
    listing = _spawn(top, None, [f"--git-dir={git_dir}", "config", "-z", "--get-regexp", keys]).stdout
    values = dict(record.partition("\n")[::2] for record in listing.split("\0") if record)
    identity = frozenset(k for k, v in values.items() if k in FALLBACK_IDENTITY and v.strip())
    return GitContext(work_tree=top, git_dir=git_dir, neutral=neutralise(values), identity=identity)


def neutralise(keys: Iterable[str]) -> tuple[str, ...]:
    """Overrides switching off every filter and merge driver named in ``keys``."""
    out: list[str] = []
    for key in keys:
        section, _, rest = key.partition(".")
        name = rest.rpartition(".")[0]
        if not name:
            continue
        if section == "filter":
            out += [f"filter.{name}.{k}=" for k in ("clean", "smudge", "process")] + [f"filter.{name}.required=false"]
        elif section == "merge":
            out.append(f"merge.{name}.driver=false")
    return tuple(dict.fromkeys(out))


def adopt(work_tree: Path, git_dir: Path, like: GitContext) -> GitContext | None:
    """Pin a working copy snodo linked itself (a pool slot) without asking git, as ``like``; ``None``
    (pin it the usual way) when a per-worktree configuration could differ or it is no worktree of ``like``'s."""
    top, own = Path(os.path.realpath(work_tree)), Path(os.path.realpath(git_dir))
    if any(os.path.lexists(d / "config.worktree") for d in (own, like.git_dir)):
        return None
    context = GitContext(work_tree=top, git_dir=own, neutral=like.neutral, identity=like.identity)
    if own.parent != like.common_dir() / "worktrees" or context.common_dir() != like.common_dir():
        return None
    with _PIN_LOCK:
        _PINNED[top] = context
    return context


def run_git(
    repo: Path, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None, timeout: float = GIT_TIMEOUT
) -> GitResult:
    """Run ``git -C repo args``, hardened and pinned (unless the caller names ``--git-dir``);
    raises only when git cannot start or overruns ``timeout`` (:class:`GitTimeout`)."""
    names_dir = any(a.startswith("--git-dir") for a in args)
    context = None if names_dir else pin(repo)
    proc = _spawn(repo, context, args, env=env, stdin=stdin, timeout=timeout)
    return GitResult(returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def git_out(repo: Path, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """stdout of a git command that must succeed, else an :class:`EnvironmentProblem`."""
    result = run_git(repo, *args, stdin=stdin, env=env)
    if not result.ok:
        raise EnvironmentProblem(f"git {' '.join(args[:3])} failed in {repo}: {result.detail()}")
    return result.stdout.strip()


def _unset_identity(repo: Path) -> list[str]:
    """The keys of :data:`FALLBACK_IDENTITY` the repository leaves unset."""
    context = pin(repo)
    return [key for key in FALLBACK_IDENTITY if context is None or key not in context.identity]


def identity_args(repo: Path) -> list[str]:
    """``-c`` options naming snodo as author only for what the repository leaves unset."""
    return _config([f"{key}={FALLBACK_IDENTITY[key]}" for key in _unset_identity(repo)])


_IDENTITY_VARS = tuple(f"GIT_{role}_{var}" for role in ("AUTHOR", "COMMITTER") for var in ("NAME", "EMAIL", "DATE"))


def identity_env(repo: Path) -> dict[str, str]:
    """The author and committer of a commit snodo makes, as git would take them: the user's
    ``GIT_AUTHOR_*``/``GIT_COMMITTER_*``, else the configuration, else ``EMAIL``, else snodo's fallback."""
    env = {name: os.environ[name] for name in _IDENTITY_VARS if os.environ.get(name)}
    for key in _unset_identity(repo):
        var = key.removeprefix("user.").upper()
        fallback = (os.environ.get("EMAIL") if var == "EMAIL" else None) or FALLBACK_IDENTITY[key]
        for role in ("AUTHOR", "COMMITTER"):
            env.setdefault(f"GIT_{role}_{var}", fallback)
    return env


@frozen
class GitObject:
    sha: str
    kind: str
    data: bytes


#: The history as the object store holds it, no replace ref or graft rewriting a commit.
OBJECTS_ONLY: Mapping[str, str] = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


def read_objects(
    repo: Path, names: Sequence[str], *, env: Mapping[str, str] | None = None
) -> dict[str, GitObject | None]:
    """Each object ``names`` names (``rev:path``, a sha…) from one ``cat-file --batch``; ``None``: no such object."""
    wanted = list(dict.fromkeys(names))
    batch = "".join(f"{name}\n" for name in wanted)
    if not wanted or batch.count("\n") != len(wanted):  # a name holding a newline would be two
        raise EnvironmentProblem(f"cannot read {len(wanted)} object name(s) in one batch in {repo}")
    proc = _spawn(repo, pin(repo), ["cat-file", "--batch"], env=env, stdin=batch.encode("utf-8"))
    out, at = proc.stdout, 0
    found: dict[str, GitObject | None] = {}
    for name in wanted:
        end = out.find(b"\n", at)
        header = out[at:end].decode("utf-8", "replace").split(" ") if proc.returncode == 0 and end >= 0 else []
        if len(header) < 2:  # git failed, or its answer is out of step
            raise EnvironmentProblem(f"git cat-file --batch failed in {repo}: {proc.stderr.decode(errors='replace')}")
        if len(header) != 3 or not header[2].isdigit():  # "<name> missing", "<name> ambiguous"
            found[name], at = None, end + 1
            continue
        size = int(header[2])
        found[name] = GitObject(header[0], header[1], out[end + 1 : end + 1 + size])
        at = end + 2 + size
    return found
