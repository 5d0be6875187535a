"""``snodo verify``: was every commit of a range produced by a governed run, or signed by a
person the team trusts? The trust root is the *base* commit's ``.snodo/``; each commit is
judged under the list and protocol in force at its parent (:mod:`snodo.protocol.trust`).
Attestations are checked in-process; only commits none covers go to git's signature check.
A merge passes when its tree is exactly the clean merge of its parents.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path
from typing import Any

from attrs import asdict, frozen

from snodo.base.errors import EnvironmentProblem, SnodoError
from snodo.base.text import shown
from snodo.evidence.attest import PROTOCOL_PATH, digest
from snodo.evidence.notes import PLAIN_GIT, CommitEntry, list_range
from snodo.evidence.statement import EnvelopeError, UnlistedKey, Verifier, decode_envelope, signer_ids, subjects
from snodo.git.runner import run_git
from snodo.protocol.committed import REMEDY
from snodo.protocol.trust import Walk, signature_checks
from snodo.state.signers import ALLOWED_SIGNERS, ATTESTATION_NAMESPACE, Signer, parse_allowed_signers, signers_for

GOVERNANCE_DIR = ".snodo"
_RERUN = "run the task through `snodo run` (or resubmit the change as a person's signed commit)"
#: What a clean merge is "signed" by (a principal never holds a space, so no signer is it).
_CLEAN_MERGE = "(clean merge)"
_SIGN = "commit it yourself with a signing key the base's allowed_signers lists (git commit -S, gpg.format=ssh)"


class VerifyProblem(SnodoError):
    """``snodo verify`` could not decide (no such range, no trust root): exit 4."""

    exit_code = 4


@frozen(kw_only=True)
class Verdict:
    """One commit's result: ``passed`` by ``how`` (attestation, signature, merge), or why not."""

    sha: str
    subject: str
    passed: bool
    how: str = ""
    reason: str = ""
    action: str = ""
    signer: str = ""


@frozen(kw_only=True)
class Report:
    base: str
    base_commit: str
    revisions: tuple[str, ...]
    protocol_digest: str | None
    verdicts: tuple[Verdict, ...]

    @property
    def ok(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "base": self.base,
            "base_commit": self.base_commit,
            "range": list(self.revisions),
            "protocol_digest": self.protocol_digest,
            "commits": [asdict(v) for v in self.verdicts],
            "failed": sum(not v.passed for v in self.verdicts),
        }


def _rev(repo: Path, name: str) -> str:
    result = run_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}", env=PLAIN_GIT)
    if not result.ok or not result.stdout.strip():
        raise VerifyProblem(f"{name!r} names no commit in {repo}", hint="fetch it first (git fetch origin)")
    return result.stdout.strip()


def resolve(repo: Path, range_arg: str | None, base_arg: str | None) -> tuple[list[str], str]:
    """``(revisions for git log, base ref)`` for ``snodo verify [RANGE] [--base REF]``."""
    range_arg = range_arg if range_arg is not None else _default_range(repo)
    if range_arg.startswith("-"):
        raise VerifyProblem(f"{range_arg!r} is not a range", hint="e.g. snodo verify origin/main..HEAD")
    if "..." in range_arg:
        raise VerifyProblem("a symmetric range (A...B) has no single base", hint="use A..B, or give --base")
    left, dots, right = range_arg.partition("..")
    if dots:
        left, right = left or "HEAD", right or "HEAD"
        for name in (left, right):
            _rev(repo, name)
        return [right, f"^{left}"], base_arg or left
    if base_arg is None:
        raise VerifyProblem(f"{range_arg!r} is one commit, not a range: which base?", hint="give --base REF")
    _rev(repo, range_arg)
    return [range_arg, f"^{base_arg}"], base_arg


def _default_range(repo: Path) -> str:
    upstream = run_git(repo, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if not upstream.ok:
        raise VerifyProblem(
            "the current branch has no upstream, so there is no default range",
            hint="name one: snodo verify origin/main..HEAD",
        )
    return f"{upstream.stdout.strip()}..HEAD"


def _check_attestation(entry: CommitEntry, signers: str | None, digest: str | None) -> tuple[str, str]:
    """``(signer, "")`` for a valid judged attestation of this commit under ``signers``, else ``("", why not)``."""
    keys, verifier = _keys(signers)
    if not entry.note.strip():
        return "", "no attestation (no note under refs/notes/snodo)"
    try:
        envelope, body = decode_envelope(entry.note.strip())
        fingerprint = verifier.verify(envelope)
    except UnlistedKey:
        keyids = ", ".join(shown(k)[:80] for k in signer_ids(envelope)[:3]) or "none"
        return "", (
            f"attestation signed by a key ({keyids}) that the base's allowed_signers does not list for "
            "attestations. A key this change adds counts only once it is on the base: someone the base "
            "already trusts adds the line there (`snodo keys show` on the new machine prints it) and signs "
            "it (`snodo protocol sign`); then verify again"
        )
    except EnvelopeError as exc:
        return "", f"attestation rejected: {exc}"
    why = _not_a_governed_run(entry, body, digest)
    return ("", why) if why else (keys[fingerprint].name, "")


def _not_a_governed_run(entry: CommitEntry, body: dict[str, Any], digest: str | None) -> str:
    """Why a verified statement does not vouch for ``entry`` under the protocol ``digest``."""
    commit, tree = subjects(body)
    if (commit, tree) != (entry.sha, entry.tree):
        return (
            f"attestation is for commit {commit[:12] or '?'} (tree {tree[:12] or '?'}), not this commit and tree: "
            "the commit was amended or cherry-picked, or the note was moved"
        )
    predicate = body["predicate"]
    if predicate.get("judged") is not True:
        tool, mode, session = (predicate.get(k, "?") for k in ("tool", "mode", "session_id"))
        where = f"`{tool}` in mode {mode}, session {session}"
        return f"made through the tool surface ({shown(where)[:200]}): judged: false, no validator ran"
    if predicate.get("status") != "completed":
        return f"attestation is not of a completed run (status {shown(str(predicate.get('status')))[:40]})"
    if digest is None:
        return f"the base has no {PROTOCOL_PATH}, so no run can be under its protocol"
    protocol = predicate.get("protocol")
    if (protocol.get("digest") if isinstance(protocol, dict) else None) != digest:
        return "the run was governed by another protocol than the base's (protocol digest differs)"
    return ""


#: git's built-in merge and nothing else: ``bare``, so no ``.gitattributes`` is read (HEAD names no
#: commit); no commit-graph, so parents and merge bases come from the commit objects.
_STORE_CONFIG = "[core]\n\trepositoryformatversion = {version}\n\tbare = true\n\tcommitGraph = false\n"


def _object_sources(repo: Path) -> list[str]:
    result = run_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir", env=PLAIN_GIT)
    if not result.ok or not result.stdout.strip():
        raise VerifyProblem(f"cannot find the object store of {repo}: {result.detail()}")
    sources = [os.path.join(result.stdout.strip(), "objects")]
    if os.environ.get("GIT_QUARANTINE_PATH") and os.environ.get("GIT_OBJECT_DIRECTORY"):
        sources.insert(0, os.path.abspath(os.environ["GIT_OBJECT_DIRECTORY"]))
    if any("\n" in s or s.startswith('"') for s in sources):
        raise VerifyProblem(f"cannot borrow the objects of {repo}: its path cannot be written in an alternates file")
    return sources


def _scratch_store(repo: Path, scratch: Path, sha_length: int) -> tuple[Path, dict[str, str]]:
    """A scratch bare repository to recompute merges in, and git's environment there: the repository's
    configuration, attributes, rr-cache, hooks, replace refs or grafts could each make conflicting changes
    merge "cleanly"; this one has none, and borrows the objects (a push's quarantine first)."""
    sources = _object_sources(repo)
    git_dir = scratch / "objects-only.git"
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (git_dir / sub).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    extension = "[extensions]\n\tobjectFormat = sha256\n" if sha_length == 64 else ""
    (git_dir / "config").write_text(_STORE_CONFIG.format(version=1 if extension else 0) + extension)
    (git_dir / "objects" / "info" / "alternates").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    env = {
        **PLAIN_GIT,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "HOME": str(scratch),
        # Inside a quarantine git would otherwise read and write the objects there.
        "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
    }
    return git_dir, env


def _check_merge(git_dir: Path, env: dict[str, str], entry: CommitEntry) -> tuple[str, str]:
    """``(_CLEAN_MERGE, "")`` when the merge's tree is exactly what merging its two parents gives,
    else ``("", why not)``: a merge that resolved conflicts or adds changes needs a person's signature."""
    if len(entry.parents) != 2:
        return "", f"a merge of {len(entry.parents)} parents (only two-parent merges are recomputed)"
    result = run_git(
        git_dir.parent, f"--git-dir={git_dir}", "merge-tree", "--write-tree", "--no-messages", *entry.parents, env=env
    )
    tree = result.stdout.split("\n", 1)[0].strip()
    if result.returncode == 0 and tree == entry.tree:
        return _CLEAN_MERGE, ""
    if result.returncode == 1:
        return "", "a merge whose parents conflict: its resolution was judged by nobody"
    if result.returncode == 0:
        return "", "a merge whose tree differs from merging its parents: it adds changes of its own"
    return "", f"cannot recompute the merge ({result.detail()[:200]})"


def verify(repo: Path, range_arg: str | None = None, base_arg: str | None = None) -> Report:
    revisions, base = resolve(repo, range_arg, base_arg)
    base_commit = _rev(repo, base)
    walk = Walk(repo, revisions, base_commit)
    entries = list_range(repo, revisions)
    if walk.base.signers is None and not any(walk.texts.get(sha) for sha in walk.steps):  # nobody to trust
        raise VerifyProblem(
            f"the base {base} ({base_commit[:12]}) has no {GOVERNANCE_DIR}/{ALLOWED_SIGNERS}: "
            "nobody is trusted, nothing can pass",
            hint="commit one on the base branch: `snodo keys show` prints the lines to add",
        )
    checked = _attested(repo, walk, entries)
    unvouched = [e for e in entries if not walk.steps[e.sha].changed and not checked[e.sha][0]]
    signed = _signed(repo, walk, unvouched)
    verdicts = [_verdict(repo, walk, e, checked[e.sha], signed.get(e.sha)) for e in entries]
    return Report(
        base=base,
        base_commit=base_commit,
        revisions=tuple(revisions),
        protocol_digest=_digest(repo, walk.base.commit),
        verdicts=tuple(verdicts),
    )


@functools.lru_cache(maxsize=64)
def _signers(text: str | None) -> list[Signer]:
    return parse_allowed_signers(text or "", f"{GOVERNANCE_DIR}/{ALLOWED_SIGNERS} in force")


@functools.lru_cache(maxsize=64)
def _keys(text: str | None) -> tuple[dict[str, Signer], Verifier]:
    keys = signers_for(_signers(text), ATTESTATION_NAMESPACE)
    return keys, Verifier([s.key for s in keys.values() if s.key is not None])


@functools.lru_cache(maxsize=64)
def _digest(repo: Path, commit: str | None) -> str | None:
    """The digest of the protocol (UTF-8 text) in the ``.snodo/`` put in force by ``commit`` (``None``: none)."""
    if not commit:
        return None
    result = run_git(repo, "cat-file", "blob", f"{commit}:{PROTOCOL_PATH}", env=PLAIN_GIT)
    return digest(result.stdout.encode("utf-8")) if result.ok else None


def _attested(repo: Path, walk: Walk, entries: list[CommitEntry]) -> dict[str, tuple[str, str]]:
    """Each commit's attestation checked under the list and protocol in force at its parent; a merge recomputed."""
    checked: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="snodo-merge-") as scratch:
        store = None
        for e in entries:
            if len(e.parents) > 1:
                store = store or _scratch_store(repo, Path(scratch), len(e.sha))
                checked[e.sha] = _check_merge(*store, e)
            else:
                before = walk.steps[e.sha].before
                checked[e.sha] = _check_attestation(e, before.signers, _digest(repo, before.commit))
    return checked


def _signed(repo: Path, walk: Walk, entries: list[CommitEntry]) -> dict[str, tuple[str, str]]:
    """git's signature check of ``entries``, one run per list in force at their parents: ``sha ->
    (principal, "")`` for a good SSH signature by a listed principal, else ``("", why not)``."""
    by_list: dict[str, list[str]] = {}
    for e in entries:
        if (text := walk.steps[e.sha].before.signers) is not None:
            by_list.setdefault(text, []).append(e.sha)
    signed: dict[str, tuple[str, str]] = {}
    for text, shas in by_list.items():
        try:
            checked = signature_checks(
                repo, "".join(s.line + "\n" for s in _signers(text)), shas, source="allowed_signers"
            )
        except EnvironmentProblem as exc:
            raise VerifyProblem(exc.message) from None
        signed.update({sha: _signature_verdict(*check) for sha, check in checked.items()})
    return signed


def _signature_verdict(status: str, key: str, principal: str) -> tuple[str, str]:
    ssh = key.startswith("SHA256:")
    if status == "G" and ssh:
        return principal, ""
    if status == "N":
        return "", "not signed by a person"
    if status == "G":
        return "", "GPG-signed: snodo verify trusts SSH signatures by keys of the base's allowed_signers"
    if status in ("U", "E") and ssh:
        return "", f"signed with SSH key {key}, which the base's allowed_signers does not list"
    return "", f"its signature does not verify (git: {status})"


def _adopter(walk: Walk, sha: str) -> str:
    """Who signed the first later commit that put ``sha``'s ``.snodo/`` in force ("": nobody)."""
    shas = list(walk.steps)  # oldest first
    later = (walk.steps[s] for s in shas[shas.index(sha) + 1 :])
    tree = walk.trees[sha]
    return next(
        (s.signed_by for s in later if s.changed and s.signed_by and not s.refused and s.after.tree == tree), ""
    )


def _only_governance(repo: Path, entry: CommitEntry) -> bool:
    names = run_git(repo, "diff-tree", "-r", "--no-renames", "--name-only", entry.parents[0], entry.sha, env=PLAIN_GIT)
    paths = names.stdout.split() if names.ok else ["?"]
    return all(p.startswith(f"{GOVERNANCE_DIR}/") for p in paths)


def _verdict(
    repo: Path, walk: Walk, entry: CommitEntry, attested: tuple[str, str], signed: tuple[str, str] | None
) -> Verdict:
    common = {"sha": entry.sha, "subject": shown(entry.subject)[:200]}
    if walk.steps[entry.sha].changed:
        return _governance_verdict(repo, walk, entry, common)
    if signed is not None and signed[0]:
        return Verdict(**common, passed=True, how="signature", signer=signed[0])
    if attested[0] == _CLEAN_MERGE:  # its parents are in the range (judged there) or on the base
        return Verdict(**common, passed=True, how="merge")
    if attested[0]:
        return Verdict(**common, passed=True, how="attestation", signer=attested[0])
    why = f"{attested[1]}; {signed[1] if signed else 'not signed'}"
    return Verdict(**common, passed=False, reason=why, action=_SIGN if len(entry.parents) > 1 else _RERUN)


def _governance_verdict(repo: Path, walk: Walk, entry: CommitEntry, common: dict[str, str]) -> Verdict:
    """A commit changing ``.snodo/`` passes only by a listed person's signature: its own, or, when
    it is refused and changes nothing else, that of a later commit putting its ``.snodo/`` in force
    (``snodo protocol sign`` adopting it)."""
    step = walk.steps[entry.sha]
    if step.signed_by and not step.refused:
        return Verdict(**common, passed=True, how="signature", signer=step.signed_by)
    adopted_by = _adopter(walk, entry.sha) if step.refused and len(entry.parents) == 1 else ""
    if adopted_by and _only_governance(repo, entry):
        return Verdict(**common, passed=True, how="adopted", signer=adopted_by)
    why = step.why or (
        f"changes {GOVERNANCE_DIR}/ while no {ALLOWED_SIGNERS} is in force, so no person's signature vouches for it"
    )
    return Verdict(**common, passed=False, reason=why, action=REMEDY)
