"""The engine path: coder output runs inside the post_execute pytest validator (an added test
module, in a judged copy of the commit). From there it tries to edit the user's checkout's
``.snodo/``, drop a file and plant a hook; the checkout must stay exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import git, make_repo

pytestmark = pytest.mark.slow

#: The coder's test module: at import it tries to edit the user's checkout (whose path an
#: agent can learn from the task or its tools), then its test reports what went through.
TEST = """\
from pathlib import Path

checkout = Path({checkout!r})
report = ["checkout " + str(checkout)]
for label, target in (("protocol", checkout / ".snodo" / "protocol.yml"), ("drop", checkout / "pwned.txt"),
                      ("hook", checkout / ".git" / "hooks" / "pre-commit")):
    try:
        target.write_text("pwned\\n")
        report.append(label + ": DONE")
    except OSError as exc:
        report.append(label + ": FAILED " + type(exc).__name__)


def test_ok():
    assert not any("DONE" in line for line in report), report
"""


def _protocol(repo: Path, sandbox: str = "auto") -> None:
    doc = {
        "protocol_id": "t",
        "name": "t",
        "modes": [
            {
                "mode_id": "producer",
                "tools": ["read", "edit", "validate", "dispatch"],
                "validators": ["scope", "tests"],
                "coder": "mock",
                "coder_config": {"files": {"tests/test_ok.py": TEST.format(checkout=str(repo))}},
            }
        ],
        "validators": [
            {"validator_id": "scope", "validator_type": "protocol"},
            {"validator_id": "tests", "validator_type": "pytest", "evaluation_phase": "post_execute"},
        ],
        "execution": {"max_recovery_depth": 0, "sandbox": sandbox},
    }
    (repo / ".snodo").mkdir(exist_ok=True)
    (repo / ".snodo" / "protocol.yml").write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_coder_output_cannot_edit_the_users_checkout(tmp_path: Path, snodo_cli, backend: str) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    _protocol(repo)
    git(repo, "add", ".snodo/protocol.yml")
    git(repo, "commit", "-q", "-m", "protocol")
    before = (repo / ".snodo" / "protocol.yml").read_text()
    r = snodo_cli("run", "add a module", "--json", cwd=repo, env={"SNODO_SANDBOX_BACKEND": backend})
    payload = r.json()
    # The added test asserts that every write was refused: a completed run is its own
    # report that the confinement held.
    assert payload["status"] == "completed", r
    assert (repo / ".snodo" / "protocol.yml").read_text() == before
    assert not (repo / "pwned.txt").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(repo, "status", "--porcelain", "--", ".", ":(exclude).snodo").strip() == ""
    assert snodo_cli("audit", "verify", cwd=repo).returncode == 0


def test_the_same_attack_unconfined_reaches_the_checkout_and_is_audited(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    """``sandbox: off``: the threat above is real, and each unconfined execution is on record."""
    repo = make_repo(tmp_path / "repo")
    _protocol(repo, sandbox="off")
    git(repo, "add", ".snodo/protocol.yml")
    git(repo, "commit", "-q", "-m", "protocol")
    r = snodo_cli("run", "add a module", "--json", cwd=repo)
    assert r.json()["status"] == "halted", r  # the test's report shows writes that went through
    assert (repo / "pwned.txt").read_text() == "pwned\n"
    events = [json.loads(line) for line in (repo / ".git" / "snodo" / "audit.log").read_text().splitlines()]
    unconfined = [e for e in events if e["event"] == "unconfined_execution"]
    assert any("pytest" in " ".join(e["data"]["argv"]) for e in unconfined), [e["event"] for e in events]
