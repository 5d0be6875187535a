"""Which ``.snodo/`` is in force at each commit: the one trust rule (docs/protocol.md, "The
protocol in force"), asked by ``run``, ``serve``, ``validate`` and ``snodo verify`` alike. With
no list, a change is taken as is; a merge keeps what is in force at whichever parent has its
``.snodo/``; git checks signatures only for commits whose ``.snodo/`` differs from what is in force."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from snodo.base.errors import EnvironmentProblem
from snodo.git.runner import OBJECTS_ONLY, GitObject, read_objects, run_git
from snodo.protocol.loader import SIGNERS_NAME, blob_text
from snodo.state.signers import parse_allowed_signers

GOVERNANCE_DIR = ".snodo"

#: No configuration of the repository may pick a program to check a signature with.
_NO_PROGRAMS = (
    "gpg.ssh.program=ssh-keygen",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.defaultKeyCommand=",
    "gpg.ssh.revocationFile=/dev/null",
)

_STATUS = {
    "N": "not signed",
    "B": "bad signature",
    "U": "signed by a key not in the list for namespace git",
    "X": "expired signature",
    "Y": "signed by an expired key",
    "R": "signed by a revoked key",
    "E": "the signature could not be checked",
}


@frozen(kw_only=True)
class State:
    """A ``.snodo/`` in force: the commit that put it there (``None``: the base's, or none), its tree and list."""

    commit: str | None
    tree: str | None
    signers: str | None


@frozen(kw_only=True)
class Step:
    """One commit under the rule: what was in force at its parent and at it; ``changed``: its ``.snodo/``
    differs from ``before``; ``signed_by``: whose signature put it in force; ``why``: why it was refused."""

    sha: str
    before: State
    after: State
    changed: bool
    signed_by: str = ""
    why: str = ""

    @property
    def refused(self) -> bool:
        return bool(self.why)


class Walk:
    """The rule applied to every commit of ``revisions`` (git rev-list syntax) from ``base``
    (``None``: from the first commit, where nothing is in force)."""

    def __init__(
        self, top: Path, revisions: Sequence[str], base: str | None, *, directory: str = GOVERNANCE_DIR
    ) -> None:
        self.top = top
        self.directory = directory
        self.signers_rel = f"{directory}/{SIGNERS_NAME}"
        self.steps: dict[str, Step] = {}
        self._statuses: dict[str, dict[str, tuple[str, str]]] = {}
        what = f"the commits of {' '.join(revisions)}"
        listing = self._rev_list(what, "--reverse", "--topo-order", "--parents", *revisions, "--")
        self._order = [(line.split()[0], tuple(line.split()[1:])) for line in listing.splitlines()]
        self.parents = dict(self._order)
        changing = self._rev_list(f"the commits changing {directory}/", "--full-history", *revisions, "--", directory)
        self._touching = set(changing.split())
        #: each commit's own ``.snodo/`` tree and list (in force or not)
        self.trees, self.texts = self._read(_to_read(self._order, self._touching, base))
        tree = self.trees[base] if base else None
        self.base = State(commit=base if tree else None, tree=tree, signers=self.texts[base] if base else None)
        for at, (sha, parents) in enumerate(self._order):
            if sha not in self.trees:  # unchanged from its (only) parent
                self.trees[sha] = self.trees[parents[0]] if parents else None
                self.texts[sha] = self.texts[parents[0]] if parents else None
            self.steps[sha] = self._judge(sha, parents, at)

    def _read(self, commits: list[str]) -> tuple[dict[str, str | None], dict[str, str | None]]:
        names = [f"{c}:{self.directory}" for c in commits] + [f"{c}:{self.signers_rel}" for c in commits]
        found = read_objects(self.top, names, env=OBJECTS_ONLY) if names else {}
        trees = {c: _tree(found.get(f"{c}:{self.directory}")) for c in commits}
        return trees, {c: blob_text(found.get(f"{c}:{self.signers_rel}")) for c in commits}

    def _judge(self, sha: str, parents: tuple[str, ...], at: int) -> Step:
        befores = [self.after(p) for p in parents] or [self.base]
        before = befores[0]
        for state in befores:
            if state.tree == self.trees[sha]:
                return Step(sha=sha, before=before, after=state, changed=False)
        mine = State(commit=sha, tree=self.trees[sha], signers=self.texts[sha])
        judge_with = before.signers if before.signers is not None else mine.signers
        if judge_with is None:
            return Step(sha=sha, before=before, after=mine, changed=True)  # nobody asked for signatures yet
        status, principal = self._status(sha, judge_with, at)
        if status == "G":
            return Step(sha=sha, before=before, after=mine, changed=True, signed_by=principal)
        why = self._refusal(sha, status, principal, first_list=before.signers is None)
        return Step(sha=sha, before=before, after=before, changed=True, why=why)

    def _refusal(self, sha: str, status: str, principal: str, *, first_list: bool) -> str:
        parents = self.parents.get(sha, ())
        if parents and parents[0] in self.steps and self.trees[parents[0]] == self.trees[sha]:
            # it only carries the .snodo/ of a change refused before it: the refusal names that one
            earlier = self.pending(parents[0])
            if earlier is not None:
                return earlier.why
        what = (
            f"brings the first {self.signers_rel} without a good signature by a principal it lists"
            if first_list
            else f"changes {self.directory}/ without a good signature by a principal listed in the "
            f"{self.signers_rel} in force"
        )
        detail = _STATUS.get(status, f"signature status {status}") + (f", signed as {principal}" if principal else "")
        return f"commit {sha[:12]} {what} ({detail}), so its {self.directory}/ is not in force"

    def _status(self, sha: str, signers: str, at: int) -> tuple[str, str]:
        known = self._statuses.setdefault(signers, {})
        if sha not in known:  # ask once for the later commits that may need this list (all, while one waits)
            later = [s for s, _ in self._order[at:] if s not in known]
            batch = later if sha not in self._touching else [s for s in later if s in self._touching]
            for commit, (status, key, principal) in signature_checks(
                self.top, signers, batch, source=self.signers_rel
            ).items():
                gpg = status == "G" and not key.startswith("SHA256:")  # only SSH signatures by listed keys count
                known[commit] = ("E" if gpg else status, principal)
        return known.get(sha, ("N", ""))

    def after(self, sha: str) -> State:
        """What is in force at ``sha`` (the base's state for a commit outside the walk)."""
        step = self.steps.get(sha)
        return step.after if step is not None else self.base

    def pending(self, sha: str) -> Step | None:
        """The refused commit that brought ``sha``'s own ``.snodo/`` (the latest refusal back through
        first parents with the same ``.snodo/``); ``None`` when it is in force."""
        step = self.steps.get(sha)
        if step is None or step.after.tree == self.trees[sha]:
            return None
        tree, at = self.trees[sha], step
        while True:
            if at.refused:
                return at
            parents = self.parents.get(at.sha, ())
            parent = self.steps.get(parents[0]) if parents else None
            if parent is None or self.trees[parent.sha] != tree:
                return step
            at = parent

    def _rev_list(self, what: str, *args: str) -> str:
        result = run_git(self.top, "rev-list", *args, env=OBJECTS_ONLY)
        if not result.ok:
            raise EnvironmentProblem(f"cannot list {what}: {result.detail()}")
        return result.stdout


def _to_read(order: list[tuple[str, tuple[str, ...]]], touching: set[str], base: str | None) -> list[str]:
    """The commits whose ``.snodo/`` is read: those touching it, merges, parents outside the walk, the base."""
    outside = {p for _, parents in order for p in parents} - {sha for sha, _ in order}
    merges = {sha for sha, parents in order if len(parents) > 1}
    return sorted(touching | merges | outside | ({base} if base else set()))


def _tree(obj: GitObject | None) -> str | None:
    return obj.sha if obj is not None and obj.kind == "tree" else None


def signature_checks(top: Path, signers: str, shas: Sequence[str], *, source: str) -> dict[str, tuple[str, str, str]]:
    """``sha -> (git's %G?, key fingerprint, principal)``: git's own check against ``signers`` only (a list
    that does not parse fails closed), with no signing program the repository's configuration names."""
    parse_allowed_signers(signers, source)
    if not shas:
        return {}
    marker = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="snodo-signatures-") as scratch:
        allowed = Path(scratch, "allowed_signers")
        allowed.write_text(signers if signers.endswith("\n") else signers + "\n", encoding="utf-8")
        config = [
            part
            for pair in (f"gpg.ssh.allowedSignersFile={allowed}", *_NO_PROGRAMS, *_draining_keygen(Path(scratch)))
            for part in ("-c", pair)
        ]
        result = run_git(
            top,
            *config,
            "log",
            "--no-walk=unsorted",
            "--stdin",
            f"--format={marker}%H %G? %GK%n%GS",
            stdin="".join(s + "\n" for s in shas),
            env=OBJECTS_ONLY,
        )
    if not result.ok:
        raise EnvironmentProblem(f"cannot check commit signatures in {top}: {result.detail()}")
    out: dict[str, tuple[str, str, str]] = {}
    for chunk in result.stdout.split(marker)[1:]:
        head, _, principal = chunk.partition("\n")
        sha, status, *fingerprint = head.split()
        out[sha] = (status, fingerprint[0] if fingerprint else "", principal.strip())
    return out


def _draining_keygen(scratch: Path) -> tuple[str, ...]:
    """``gpg.ssh.program`` set to ``ssh-keygen`` behind a script that reads what it left of its input.

    For a signature by no listed principal git pipes the commit to ``ssh-keygen -Y check-novalidate``
    without ignoring SIGPIPE: a signature that program cannot parse makes it exit unread, and git dies
    (every commit on a large one, by timing on a small one). Where scratch files cannot be executed
    (a ``noexec`` temporary directory), ``ssh-keygen`` itself stays the program."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return ()
    script = scratch / "ssh-keygen"
    script.write_text(f'#!/bin/sh\n{shlex.quote(keygen)} "$@"\nstatus=$?\ncat >/dev/null\nexit "$status"\n')
    script.chmod(0o700)
    return (f"gpg.ssh.program={script}",) if os.access(script, os.X_OK) else ()
