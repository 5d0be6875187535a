"""One snapshot per validation, one private copy of it per validator (docs/security.md,
"One snapshot"): written from git's object store into a private directory (mode 0700) per
snapshot, each copy a git work tree whose ``.git`` snodo writes itself (objects through
``alternates``, the judged tree in its index, the base as ``HEAD``, the project's hooks and
nothing else of its configuration)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import pin, run_git

from .tree import Blobs, Entry, index_entries, write_copy

#: Python environments at the top of a checkout (never part of a judged tree): linked into
#: each copy, so a check naming ``.venv/bin/tool`` finds it (read-only to confined code).
ENVIRONMENTS = (".venv", "venv")

_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class Snapshot:
    """The judged ``tree`` of ``repo``, ready to be laid out once per validator.

    One ``read-tree`` into a private index file (the checkout's own index is never touched)
    gives both the copies' index and the tree's listing; the blobs are read once, in one
    batch, and shared by every copy."""

    def __init__(
        self,
        repo: Path,
        tree: str,
        *,
        base: str | None,
        project_root: Path | None = None,
    ) -> None:
        self.repo = repo
        self.tree = tree
        self.base = base
        self.project_root = project_root or repo
        context = pin(repo)
        if context is None:
            raise EnvironmentProblem(f"{repo} is not in a git repository: no snapshot of {tree} can be made")
        self._common = context.common_dir()
        self.root = Path(tempfile.mkdtemp(prefix="snodo-snapshot-"))
        self._lock = threading.RLock()  # `shared` makes its copy while holding it
        self._count = 0
        self._shared: Path | None = None
        try:
            self._index = self._read_index()
            self.files: dict[str, Entry] = index_entries(self._index, len(tree) // 2)
            self.blobs = _blobs_for(repo, self._common)
            self.blobs.load(e.sha for e in self.files.values())
            self._hooks_path = self._hooks_setting()
            self._hooks = self._project_hooks() if not self._hooks_path else {}
            #: the checkout's Python environments each copy links to (kept read-only by the sandbox)
            self.environments: dict[str, Path] = {
                env: Path(os.path.realpath(self.project_root / env))
                for env in ENVIRONMENTS
                if env not in self.files and (self.project_root / env / "pyvenv.cfg").is_file()
            }
        except BaseException:
            self.close()
            raise

    def _read_index(self) -> bytes:
        index = self.root / "index"
        made = run_git(
            self.repo,
            *("-c", "index.version=2", "-c", "core.splitIndex=false", "-c", "index.sparse=false"),
            "read-tree",
            self.tree,
            env={"GIT_INDEX_FILE": str(index)},
        )
        if not made.ok:
            raise EnvironmentProblem(f"cannot read tree {self.tree} into an index in {self.repo}: {made.detail()}")
        data = index.read_bytes()
        index.unlink()
        return data

    def _hooks_setting(self) -> str:
        """``core.hooksPath`` as the repository's own configuration sets it (the last value of
        any scope but snodo's command-line overrides, which pin it for snodo's own git)."""
        found = run_git(self.repo, "config", "--show-scope", "--get-all", "core.hooksPath")
        values = [line.partition("\t")[2] for line in found.stdout.splitlines() if not line.startswith("command\t")]
        return values[-1].strip() if found.ok and values else ""

    def _project_hooks(self) -> dict[str, tuple[bytes, int]]:
        """The repository's own hook scripts (``<git dir>/hooks``, samples left out)."""
        out: dict[str, tuple[bytes, int]] = {}
        hooks = self._common / "hooks"
        with contextlib.suppress(OSError):
            for entry in os.scandir(hooks):
                if entry.name.endswith(".sample") or not entry.is_file(follow_symlinks=True):
                    continue
                with contextlib.suppress(OSError):
                    mode = entry.stat().st_mode & 0o755
                    out[entry.name] = (Path(entry.path).read_bytes(), mode)
        return out

    def copy(self, name: str) -> Path:
        """A fresh private copy of the tree, as a git work tree (see the module docstring)."""
        with self._lock:
            self._count += 1
            dest = self.root / f"{self._count}-{_NAME.sub('_', name)[:60]}" / "work"
        dest.parent.mkdir(mode=0o700)
        dest.mkdir()
        write_copy(dest, self.files, self.blobs)
        self._git_dir(dest)
        for env, real in self.environments.items():
            if not os.path.lexists(dest / env):
                os.symlink(real, dest / env)
        return dest

    def _git_dir(self, dest: Path) -> None:
        git = dest / ".git"
        if os.path.lexists(git):  # the tree holds a `.git` entry of its own: never trusted, replaced
            if git.is_dir() and not git.is_symlink():
                shutil.rmtree(git)
            else:
                git.unlink()
        for sub in ("objects/info", "refs/heads", "refs/tags", "hooks", "info"):
            (git / sub).mkdir(parents=True)
        (git / "objects" / "info" / "alternates").write_text(f"{self._common / 'objects'}\n", encoding="utf-8")
        sha256 = len(self.tree) == 64
        config = [
            "[core]",
            f"\trepositoryformatversion = {1 if sha256 else 0}",
            "\tfilemode = true",
            "\tbare = false",
        ]
        if self._hooks_path:
            config.append(f"\thooksPath = {_quoted(self._hooks_path)}")
        if sha256:
            config += ["[extensions]", "\tobjectformat = sha256"]
        (git / "config").write_text("\n".join(config) + "\n", encoding="utf-8")
        (git / "HEAD").write_text(f"{self.base}\n" if self.base else "ref: refs/heads/main\n", encoding="utf-8")
        (git / "index").write_bytes(self._index)
        for hook, (data, mode) in self._hooks.items():
            target = git / "hooks" / hook
            target.write_bytes(data)
            target.chmod(mode)

    def shared(self) -> Path:
        """The one copy validators that only read share (made on the first ask)."""
        with self._lock:
            if self._shared is None:
                self._shared = self.copy("shared")
            return self._shared

    def empty(self) -> Path:
        """An empty private directory: the confined workspace of a validator that declared it
        runs no code, so a process it starts anyway cannot write the copy it shares."""
        with self._lock:
            self._count += 1
            path = self.root / f"{self._count}-empty"
        path.mkdir(mode=0o700)
        return path

    def remove(self, copy: Path) -> None:
        """Throw ``copy`` away (in the background: the verdict does not wait for the disk)."""
        _discard(copy.parent)

    def close(self) -> None:
        _discard(self.root)
        blobs = getattr(self, "blobs", None)
        if blobs is not None and blobs.size() > _KEEP_BYTES:
            with _CACHE_LOCK:
                if _LAST_BLOBS.get(self._common) is blobs:
                    del _LAST_BLOBS[self._common]


_CACHE_LOCK = threading.Lock()
#: The blobs the last snapshot read, by repository: blobs are named by their content, so the
#: next snapshot of the same repository (the post_execute phase after the pre_execute one)
#: reads only the ones it lacks. Kept while they hold at most :data:`_KEEP_BYTES`.
_LAST_BLOBS: dict[Path, Blobs] = {}
_KEEP_BYTES = 64 << 20


def _blobs_for(repo: Path, common: Path) -> Blobs:
    with _CACHE_LOCK:
        kept = _LAST_BLOBS.pop(common, None)
        _LAST_BLOBS.clear()
        blobs = kept if kept is not None and kept.size() <= _KEEP_BYTES else Blobs(repo)
        blobs.repo = repo
        _LAST_BLOBS[common] = blobs
    return blobs


def _discard(path: Path) -> None:
    """Remove ``path`` on a thread of its own; the process waits for it before it exits
    (not a daemon), so nothing is left behind in the temporary directory."""
    threading.Thread(target=shutil.rmtree, args=(path,), kwargs={"ignore_errors": True}, name="snodo-discard").start()


def _quoted(value: str) -> str:
    """A value as git's configuration format reads it back unchanged."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'
