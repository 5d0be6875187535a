"""Trees read from git's object store (no ``.gitattributes`` or filter applies) and laid out
as private copies; a path below a symbolic link of the copy, or that leaves it, is never written."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import GitObject, git_out, read_objects, run_git

#: A file's git mode: regular, executable, symbolic link (gitlinks are never exported).
REGULAR, EXECUTABLE, SYMLINK = "100644", "100755", "120000"
FILE_MODES = frozenset({REGULAR, EXECUTABLE, SYMLINK})


@frozen
class Entry:
    mode: str
    sha: str


def resolve(repo: Path, rev: str) -> str:
    """The commit id ``rev`` names in ``repo`` (an :class:`EnvironmentProblem` if none)."""
    if not rev or rev.startswith("-") or "\n" in rev:
        raise EnvironmentProblem(f"{rev!r} is not a revision")
    return git_out(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def tree_of(repo: Path, rev: str) -> str:
    return git_out(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{tree}}")


def entries(repo: Path, tree: str) -> dict[str, Entry]:
    """Every file of ``tree`` (recursively), by path; submodules are left out."""
    found = run_git(repo, "ls-tree", "-r", "-z", "--full-tree", tree)
    if not found.ok:
        raise EnvironmentProblem(f"cannot list tree {tree} in {repo}: {found.detail()}")
    out: dict[str, Entry] = {}
    for record in found.stdout.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind == "blob" and mode in (REGULAR, EXECUTABLE, SYMLINK):
            out[path] = Entry(mode, sha)
    return out


def tree_names(data: bytes, oid_len: int = 20) -> list[str]:
    """The names of a tree object's entries (``<mode> <name>\\0<id>`` each)."""
    names, at = [], 0
    while at < len(data):
        end = data.index(b"\0", at)
        names.append(data[at:end].partition(b" ")[2].decode("utf-8", "surrogateescape"))
        at = end + 1 + oid_len
    return names


class Blobs:
    """Blob contents by id, read from ``repo`` in batches and kept for the copies of one judgement."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._data: dict[str, bytes] = {}

    def load(self, shas: Iterable[str]) -> None:
        wanted = [s for s in dict.fromkeys(shas) if s not in self._data]
        for start in range(0, len(wanted), 2000):
            self.put(read_objects(self.repo, wanted[start : start + 2000]))

    def put(self, objects: Mapping[str, GitObject | None]) -> None:
        """Keep blobs read elsewhere (an :class:`EnvironmentProblem` for one missing)."""
        for sha, obj in objects.items():
            if obj is None or obj.kind != "blob":
                raise EnvironmentProblem(f"blob {sha} is missing from {self.repo}")
            self._data[sha] = obj.data

    def size(self) -> int:
        return sum(len(d) for d in self._data.values())

    def __getitem__(self, sha: str) -> bytes:
        if sha not in self._data:
            self.load([sha])
        return self._data[sha]


def safe_path(path: str) -> bool:
    """Whether ``path`` is plain and relative (no ``..``, no empty or ``.`` part, no NUL)."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\0" not in path


def write_copy(dest: Path, files: Mapping[str, Entry], blobs: Blobs) -> None:
    """Lay ``files`` out under the empty directory ``dest`` (by the module's rules)."""
    blobs.load(e.sha for e in files.values())
    links = {p for p, e in files.items() if e.mode == SYMLINK}
    made: set[str] = {""}
    for path, entry in sorted(files.items()):
        if not safe_path(path):
            continue
        parents = path.split("/")[:-1]
        if any("/".join(parents[: i + 1]) in links for i in range(len(parents))):
            continue
        for i in range(len(parents)):
            sub = "/".join(parents[: i + 1])
            if sub not in made:
                os.mkdir(dest / sub)  # fresh: fails rather than follow anything already there
                made.add(sub)
        write_file(dest / path, entry, blobs)


def write_file(target: Path, entry: Entry, blobs: Blobs) -> None:
    """Write one entry at ``target``, which must not exist (never followed if it does)."""
    data = blobs[entry.sha]
    if entry.mode == SYMLINK:
        os.symlink(os.fsdecode(data), target)
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(target, flags, 0o755 if entry.mode == EXECUTABLE else 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
