"""Which protocol is in force: ``.snodo/protocol.yml`` as committed, not whatever is on disk.

Anything that can write the working tree — a host's own editor, a script, a careless edit —
could otherwise change the rules for the next session, and nothing would record which
version judged which task. So the rules come from history:

* the version in force is the one committed at ``HEAD`` (the commit that last changed it
  and the digest of its text are recorded with every validation and run);
* with ``.snodo/allowed_signers`` in force, a commit changing the protocol (or the list
  itself) counts only if git verifies its SSH signature against that list (``%G?`` is
  ``G``: good signature, listed principal); otherwise the last such version stays in force
  and :attr:`InForce.not_in_force` says why;
* a working-tree copy that differs from the version in force is *drift*: ``serve`` and
  ``run`` refuse it (:func:`refuse_drift`), ``validate`` and ``protocol check`` report it;
* a protocol never committed (right after ``snodo init``), or a project outside git, is
  read from the working tree with a one-line warning, so the quick start keeps working.

Every git process goes through :mod:`snodo.gitrun`.
"""

from __future__ import annotations

import difflib
import hashlib
import tempfile
from pathlib import Path

from snodo.attrsbase import frozen
from snodo.cachefiles import read_entry, write_entry
from snodo.errors import EnvironmentProblem, ProtocolError
from snodo.gitrun import GitContext, pin_at_head, read_objects, run_git
from snodo.protocol.loader import MAX_BYTES, read_protocol_file

SIGNERS_NAME = "allowed_signers"


@frozen(kw_only=True)
class InForce:
    """The protocol text that judges, where it came from, and how the working tree differs."""

    text: str
    commit: str | None  # the commit that made this version; None when read from the working tree
    digest: str  # sha256 of the text
    drift: str | None = None  # summary of how the working-tree copy differs, None when identical
    not_in_force: str | None = None  # why a committed change does not count (unsigned, unlisted)
    warning: str | None = None  # one line when the working tree is used (never committed, no git)

    def provenance(self) -> dict[str, str | None]:
        """What every validation and run records about the rules that judged it."""
        return {"protocol_commit": self.commit, "protocol_sha256": self.digest}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_worktree(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            read_protocol_file(path)  # refuses it with the loader's own words, before reading it
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{path}: cannot read the protocol: {exc}") from None


class _Blobs:
    """The protocol's and the signers list's text at each commit of their history and at
    ``HEAD``, read in one ``cat-file --batch`` process (a later miss asks git again)."""

    def __init__(self, top: Path, names: list[str]) -> None:
        self.top = top
        self.found = read_objects(top, names) if names else {}

    def __call__(self, commit: str, rel: str) -> str | None:
        name = f"{commit}:{rel}"
        if name not in self.found:
            self.found.update(read_objects(self.top, [name]))
        obj = self.found[name]
        if obj is None or obj.kind != "blob":
            return None
        return obj.data.decode("utf-8", "replace")


def summarize_drift(committed: str, working: str | None, rel: str) -> str:
    """A few lines a person can act on: how much changed and the first changed lines."""
    if working is None:
        return f"{rel} is missing from the working tree"
    diff = list(difflib.unified_diff(committed.splitlines(), working.splitlines(), lineterm="", n=0))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    shown = [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))][:6]
    lines = [f"{rel} differs from the version in force: {added} line(s) added, {removed} removed"]
    lines += [f"  {d[:120]}" for d in shown]
    if len(shown) < added + removed:
        lines.append(f"  … ({added + removed - len(shown)} more)")
    return "\n".join(lines)


def _signed_history(top: Path, rel: str, signers_rel: str, commits: list[str], blob: _Blobs) -> tuple[str, str | None]:
    """Walk the commits touching the protocol or the signers list, oldest first; a change
    counts while no list is in force, afterwards only with a good signature by a listed
    principal (verified against the list in force before that change). Returns the commit
    in force and, when a later change was not accepted, why."""
    in_force = ""
    why: str | None = None
    signers: str | None = None
    statuses: dict[str, tuple[str, str]] = {}
    judged_by: str | None = None
    for i, commit in enumerate(commits):
        if signers is None:
            in_force, why = commit, None
            signers = blob(commit, signers_rel)
            continue
        if judged_by != signers:  # one `git log` per list in force, not one per commit
            _check_signers(signers, f"{in_force[:12]}:{signers_rel}")
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".allowed_signers") as fh:
                fh.write(signers)
                fh.flush()
                statuses = _signature_statuses(top, fh.name, commits[i:])
            judged_by = signers
        status, principal = statuses.get(commit, ("N", ""))
        if status == "G":
            in_force, why = commit, None
            signers = blob(commit, signers_rel)
        else:
            why = (
                f"commit {commit[:12]} changed {rel} or {signers_rel} without a good signature by a principal "
                f"listed in {signers_rel} ({_STATUS.get(status, 'signature status ' + status)}"
                f"{', signed as ' + principal if principal else ''}), so it is not in force"
            )
    return in_force, why


_STATUS = {
    "N": "not signed",
    "B": "bad signature",
    "U": "signed by a key not in the list",
    "X": "expired signature",
    "Y": "signed by an expired key",
    "R": "signed by a revoked key",
    "E": "the signature could not be checked",
}


def _signature_statuses(top: Path, signers_file: str, commits: list[str]) -> dict[str, tuple[str, str]]:
    result = run_git(
        top,
        "-c",
        f"gpg.ssh.allowedSignersFile={signers_file}",
        "-c",
        "gpg.ssh.program=ssh-keygen",
        "log",
        "--no-walk=unsorted",
        "--format=%H%x1f%G?%x1f%GS",
        *commits,
    )
    if not result.ok:
        raise EnvironmentProblem(f"cannot verify the signatures of the protocol's history: {result.detail()}")
    out: dict[str, tuple[str, str]] = {}
    for line in result.stdout.splitlines():
        parts = line.split("\x1f")
        if len(parts) == 3:
            out[parts[0]] = (parts[1], parts[2])
    return out


def _check_signers(text: str, source: str) -> None:
    """The list must parse as the decision records' list does: a typo fails closed."""
    from snodo.state.signers import parse_allowed_signers

    parse_allowed_signers(text, source)


def resolve(path: Path, *, cache_dir: Path | None = None) -> InForce:
    """The protocol in force for the file at ``path`` (normally ``<project>/.snodo/protocol.yml``).

    ``cache_dir`` (:mod:`snodo.cachefiles`) keeps the protocol's history per ``HEAD`` commit
    (and the repository's configuration, :func:`snodo.gitrun.pin_at_head`): a repeat at the
    same ``HEAD`` asks git nothing more than where the repository is."""
    path = path.absolute()
    working = _read_worktree(path)
    found, head = pin_at_head(path.parent, cache_dir=cache_dir) if path.parent.is_dir() else (None, None)
    if found is None:
        return _from_worktree(path, working, f"{path} is not in a git repository; the working-tree copy is in force")
    top = found.work_tree
    rel = path.resolve().relative_to(top.resolve()).as_posix()
    signers_rel = (Path(rel).parent / SIGNERS_NAME).as_posix()
    changes = _changes(_history(found, head, rel, signers_rel, cache_dir))
    commits = list(changes)
    quick = _unchanged_copy(changes, rel, signers_rel, working)
    if quick is not None:
        return quick
    # Every text the walk below may need, in one process: the history is short.
    wanted = [f"{c}:{name}" for c in commits for name in (rel, signers_rel)]
    at = head or "HEAD"  # the commit the history was read from, when pinning read it
    blob = _Blobs(top, [f"{at}:{rel}", *wanted] if commits else [])
    head_text = blob(at, rel) if commits else None
    if head_text is None:
        return _from_worktree(
            path, working, f"{rel} was never committed; the working-tree copy is in force until you commit .snodo/"
        )
    commit, why = _signed_history(top, rel, signers_rel, commits, blob)
    text = blob(commit, rel) if commit else None
    if text is None:
        raise ProtocolError(
            f"{rel}: no committed version of the protocol is in force"
            + (f": {why}" if why else " (it was deleted by the commit in force)"),
            hint=f"restore {rel} in a commit signed by a principal listed in {signers_rel}",
        )
    drift = summarize_drift(text, working, rel) if working != text else None
    return InForce(text=text, commit=commit, digest=digest(text), drift=drift, not_in_force=why)


def _history(found: GitContext, head: str | None, rel: str, signers_rel: str, cache_dir: Path | None) -> str:
    """``git log --raw -z`` of the commits from ``HEAD`` changing ``rel`` or ``signers_rel``
    (empty when git cannot tell), kept in ``cache_dir`` under what fixes it: ``HEAD``'s commit
    id, the two paths and the files that can cut or graft history (``shallow``, ``info/grafts``;
    replacement refs are off for every snodo git)."""
    key = None
    if head is not None and cache_dir is not None:
        hasher = hashlib.sha256("\0".join(("history-v1", str(found.common_dir()), head, rel, signers_rel)).encode())
        for name in ("shallow", "info/grafts"):
            try:
                hasher.update(b"\0" + (found.common_dir() / name).read_bytes())
            except FileNotFoundError:
                hasher.update(b"\0-")
            except OSError:
                return _ask_history(found.work_tree, rel, signers_rel, head) or ""
        key = hasher.hexdigest()
        kept = read_entry(cache_dir, key)
        if kept is not None:
            return kept
    log = _ask_history(found.work_tree, rel, signers_rel, head)
    if key is not None and log is not None:
        write_entry(cache_dir, key, log)
    return log or ""


def _ask_history(top: Path, rel: str, signers_rel: str, head: str | None = None) -> str | None:
    """The listing from git (``None``: git failed, e.g. no commit yet)."""
    args = ("--reverse", "--format=%x01%H", "--raw", "--no-abbrev", "--no-renames", "-z")
    log = run_git(top, "log", *args, head or "HEAD", "--", rel, signers_rel)
    return log.stdout if log.ok else None


def _changes(listing: str) -> dict[str, dict[str, tuple[str, str]]]:
    """``git log --raw -z`` as {commit: {path: (new blob id, status letter)}}, oldest first."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for chunk in listing.split("\x01")[1:]:
        fields = chunk.split("\0")
        files: dict[str, tuple[str, str]] = {}
        for meta, name in zip(fields[1::2], fields[2::2], strict=False):
            parts = meta.strip().split()
            if len(parts) == 5 and parts[0].startswith(":"):
                files[name] = (parts[3], parts[4][:1])
        out[fields[0]] = files
    return out


def _unchanged_copy(
    changes: dict[str, dict[str, tuple[str, str]]], rel: str, signers_rel: str, working: str | None
) -> InForce | None:
    """The usual case without reading a blob: no signers list was ever committed (so the last
    change is in force) and the working-tree copy is byte for byte that version (its git
    blob id is the one the last change wrote). ``None``: take the long way."""
    if not changes or working is None or any(signers_rel in files for files in changes.values()):
        return None
    last = list(changes)[-1]
    blob, status = changes[last].get(rel, ("", "D"))
    data = working.encode("utf-8")
    algorithm = {40: "sha1", 64: "sha256"}.get(len(blob))
    if status == "D" or algorithm is None:
        return None
    if hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest() != blob:
        return None
    return InForce(text=working, commit=last, digest=digest(working))


def _from_worktree(path: Path, working: str | None, warning: str) -> InForce:
    if working is None:
        raise ProtocolError(
            f"{path}: no protocol file here", hint="run `snodo init` in the project, or pass --protocol PATH"
        )
    return InForce(text=working, commit=None, digest=digest(working), warning=warning)


def refuse_drift(path: Path, in_force: InForce) -> None:
    """``serve`` and ``run``: a working tree that differs from the rules in force is refused."""
    if in_force.drift is None:
        return
    rel = f"{path.parent.name}/{path.name}"
    reason = f"\n{in_force.not_in_force}" if in_force.not_in_force else ""
    raise ProtocolError(
        f"{path}: the working-tree protocol is not the one in force "
        f"(commit {str(in_force.commit)[:12]}); refusing to serve rules nobody committed",
        problems=(in_force.drift + reason,),
        hint=(
            f"commit it (`git add {rel} && git commit`"
            + (", signed by a listed principal with -S" if in_force.not_in_force else "")
            + f"), or restore the version in force (`git checkout -- {rel}`); "
            "`snodo protocol check` shows the difference"
        ),
    )
