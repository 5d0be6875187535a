"""Which protocol is in force: ``.snodo/protocol.yml`` as committed at ``HEAD`` and admitted by the
trust rule (:mod:`snodo.protocol.trust`), never whatever is on disk (docs/protocol.md)."""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any

from attrs import frozen

from snodo.base.errors import EnvironmentProblem, ProtocolError
from snodo.cachefiles import cached
from snodo.git.runner import GitContext, pin_at_head, read_objects, run_git
from snodo.protocol.loader import SIGNERS_NAME, blob_text, no_protocol, read_protocol_text

#: What to do about a refused change, said by every refusal (run, serve, validate, verify).
REMEDY = (
    "if the change is yours to make, run `snodo protocol sign` (it signs the .snodo/ at HEAD with your "
    "decision key and puts it in force; your key must be listed in the allowed_signers in force — for a "
    "first list, in that list: `snodo keys show >> .snodo/allowed_signers`), or restore the .snodo/ in force"
)


@frozen(kw_only=True)
class InForce:
    """The protocol text that judges, where it came from, and how the working tree differs."""

    text: str
    commit: str | None  # the commit that made this version; None when read from the working tree
    digest: str  # sha256 of the text
    drift: str | None = None  # summary of how the working-tree copy differs, None when identical
    not_in_force: str | None = None  # why a committed change does not count (unsigned, unlisted)
    warning: str | None = None  # one line when the working tree is used (never committed, no git)
    signers: str | None = None  # the ``allowed_signers`` in force (whose decisions count), never the file on disk


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def summarize_drift(committed: str, working: str | None, rel: str) -> str:
    """A few lines a person can act on: how much changed and the first changed lines."""
    if working is None:
        return f"{rel} is missing from the working tree"
    diff = difflib.unified_diff(committed.splitlines(), working.splitlines(), lineterm="", n=0)
    changed = [d for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    added = sum(d[0] == "+" for d in changed)
    lines = [f"{rel} differs from the version in force: {added} line(s) added, {len(changed) - added} removed"]
    lines += [f"  {d[:120]}" for d in changed[:6]]
    if len(changed) > 6:
        lines.append(f"  … ({len(changed) - 6} more)")
    return "\n".join(lines)


def resolve(path: Path, *, cache_dir: Path | None = None) -> InForce:
    """The protocol in force for the file at ``path``; ``cache_dir`` keeps git's answers per ``HEAD``."""
    path = path.absolute()
    working = read_protocol_text(path)
    found, head = pin_at_head(path.parent) if path.parent.is_dir() else (None, None)
    if found is None:
        return _from_worktree(path, working, f"{path} is not in a git repository; the working-tree copy is in force")
    top = found.work_tree
    rel = path.resolve().relative_to(top.resolve()).as_posix()
    signers_rel = (Path(rel).parent / SIGNERS_NAME).as_posix()
    changes = _changes(_history(found, head, rel, signers_rel, cache_dir))
    if (quick := _unchanged_copy(changes, rel, signers_rel, working)) is not None:
        return quick
    never = f"{rel} was never committed; the working-tree copy is in force until you commit .snodo/"
    if not changes:
        return _from_worktree(path, working, never)
    at = head or _head(top)
    summary = _judged(found, at, Path(rel).parent.as_posix(), cache_dir)
    if summary["head_tree"] is None or _text_at(top, at, rel) is None:
        return _from_worktree(path, working, never)
    return _from_history(top, rel, signers_rel, summary, working)


def _from_history(top: Path, rel: str, signers_rel: str, summary: dict[str, Any], working: str | None) -> InForce:
    """The version the trust rule put in force (``summary``: :func:`_judged`'s answer)."""
    commit, why, signers = summary["commit"], summary["why"], summary["signers"]
    if signers is not None and signers not in lists_in_force:  # a long `serve` resolves again and again
        lists_in_force.append(signers)
    text = _text_at(top, commit, rel) if commit else None
    if text is None:
        raise ProtocolError(
            f"{rel}: no committed version of the protocol is in force"
            + (f": {why}" if why else " (it was deleted by the commit in force)"),
            hint=REMEDY if why else f"restore {rel} in a commit signed by a principal listed in {signers_rel}",
        )
    drift = summarize_drift(text, working, rel) if working != text else None
    return InForce(text=text, commit=commit, digest=digest(text), drift=drift, not_in_force=why, signers=signers)


#: Every ``allowed_signers`` text found in force by this process (to say once when the home's keys are not listed).
lists_in_force: list[str] = []


def _head(top: Path) -> str:
    result = run_git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if not result.ok:
        raise EnvironmentProblem(f"cannot read HEAD in {top}: {result.detail()}")
    return result.stdout.strip()


def _text_at(top: Path, commit: str, rel: str) -> str | None:
    return blob_text(read_objects(top, [f"{commit}:{rel}"])[f"{commit}:{rel}"])


def _judged(found: GitContext, head: str, directory: str, cache_dir: Path | None) -> dict[str, Any]:
    """The trust rule's answer at ``head``: the commit in force, its list, and why ``head``'s own is not."""

    def walk() -> str:
        from snodo.protocol.trust import Walk  # noqa: PLC0415 the trust rule loads only where a list may be in force

        judged = Walk(found.work_tree, [head], None, directory=directory)
        pending, after = judged.pending(head), judged.after(head)
        why = pending.why if pending is not None else None
        return json.dumps(
            {"commit": after.commit, "signers": after.signers, "why": why, "head_tree": judged.trees.get(head)}
        )

    key = _history_key(cache_dir, found, head, directory, "", "trust-v1")
    try:
        summary: dict[str, Any] = json.loads(cached(cache_dir, key, walk) or "")
    except ValueError:  # a kept answer that does not parse counts as absent
        summary = json.loads(walk())
    return summary


def _history(found: GitContext, head: str | None, rel: str, signers_rel: str, cache_dir: Path | None) -> str:
    """``git log --raw -z`` of the commits changing ``rel`` or ``signers_rel`` (empty: git cannot tell)."""

    def log() -> str | None:
        args = ("--reverse", "--format=%x01%H", "--raw", "--no-abbrev", "--no-renames", "-z", head or "HEAD")
        result = run_git(found.work_tree, "log", *args, "--", rel, signers_rel)
        return result.stdout if result.ok else None

    return cached(cache_dir, _history_key(cache_dir, found, head, rel, signers_rel, "history-v1"), log) or ""


def _history_key(
    cache_dir: Path | None, found: GitContext, head: str | None, first: str, second: str, kind: str
) -> str | None:
    """The cache key of an answer about the history: ``HEAD``, the paths and the files that can cut or graft it."""
    if head is None or cache_dir is None:
        return None
    hasher = hashlib.sha256("\0".join((kind, str(found.common_dir()), head, first, second)).encode())
    for name in ("shallow", "info/grafts"):
        try:
            hasher.update(b"\0" + (found.common_dir() / name).read_bytes())
        except FileNotFoundError:
            hasher.update(b"\0-")
        except OSError:
            return None
    return hasher.hexdigest()


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
    """The usual case without reading a blob: no list ever committed, and the working copy is the last change's blob."""
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
        raise no_protocol(path)
    return InForce(text=working, commit=None, digest=digest(working), warning=warning)


def refuse_drift(path: Path, in_force: InForce) -> None:
    """Refuse a working tree that differs from the rules in force, or a ``.snodo/`` at ``HEAD`` not in force."""
    if in_force.drift is None and in_force.not_in_force is None:
        return
    rel = f"{path.parent.name}/{path.name}"
    if in_force.not_in_force is not None:
        raise ProtocolError(
            f"{path}: the .snodo/ committed at HEAD is not in force (the version in force is commit "
            f"{str(in_force.commit)[:12]}); refusing to serve rules nobody trusted signed",
            problems=(in_force.not_in_force, *((in_force.drift,) if in_force.drift else ())),
            hint=REMEDY,
        )
    raise ProtocolError(
        f"{path}: the working-tree protocol is not the one in force "
        f"(commit {str(in_force.commit)[:12]}); refusing to serve rules nobody committed",
        problems=(str(in_force.drift),),
        hint=(
            f"commit it (`git add {rel} && git commit`; with an allowed_signers in force, `snodo protocol sign`), "
            f"or restore the version in force (`git checkout -- {rel}`); "
            "`snodo protocol check` shows the difference"
        ),
    )
