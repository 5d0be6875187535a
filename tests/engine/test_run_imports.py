"""What `snodo run --mock` imports before its first validator starts (#26: import only what
the command uses).

A third-party validator, installed the way any plugin is (a dist-info with a ``snodo`` entry
point), records ``sys.modules`` the moment it is first asked for a verdict. The snodo modules
loaded by then are pinned here: a module added to the run path fails this test until it is
added to the list on purpose, and the heavy or unrelated ones must never be among them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import TRIVIAL_PROTOCOL, git, make_repo

PROBE = """
import json, os, sys
from snodo.api import ValidatorSpec, Verdict, hookimpl

@hookimpl
def snodo_validators():
    yield ValidatorSpec(name="import-probe", description="records what is imported")

@hookimpl
def snodo_validate(request):
    out = os.environ["SNODO_TEST_IMPORTS_OUT"]
    if not os.path.exists(out):
        with open(out, "w") as f:
            json.dump(sorted(sys.modules), f)
    return Verdict(severity="pass", justification="recorded")
"""

PROTOCOL = """\
protocol_id: t
name: t
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [probe, after]
    coder: mock
validators:
  - {validator_id: probe, validator_type: import-probe}
  - {validator_id: after, validator_type: import-probe, evaluation_phase: post_execute}
"""

#: The snodo modules a mock run has loaded when its first validator starts.
EXPECTED = {
    "snodo",
    "snodo.api",
    "snodo.base",
    "snodo.git",
    "snodo.plugin",
    "snodo.process",
    "snodo.rules",
    "snodo.process.callscope",
    "snodo.cli",
    "snodo.cli.common",
    "snodo.cli.main",
    "snodo.cli.output",
    "snodo.cli.run_cmd",
    "snodo.base.convert",
    "snodo.base.frozen",
    "snodo.plugin.core",
    "snodo.engine",
    "snodo.engine.change",
    "snodo.engine.checks",
    "snodo.engine.checkout",
    "snodo.engine.disposal",
    "snodo.engine.execute",
    "snodo.engine.inplace",
    "snodo.engine.interrupt",
    "snodo.engine.jobs",
    "snodo.engine.lifecycle",
    "snodo.engine.loop",
    "snodo.engine.pool",
    "snodo.engine.poolmodes",
    "snodo.engine.refused",
    "snodo.engine.results",
    "snodo.engine.snapshot",
    "snodo.engine.worktree",
    "snodo.base.errors",
    "snodo.evidence",
    "snodo.evidence.attest",
    "snodo.evidence.notes",
    "snodo.evidence.statement",
    "snodo.cachefiles",
    "snodo.git.runner",
    "snodo.governance",
    "snodo.governance.policy",
    "snodo.governance.runner",
    "snodo.governance.service",
    "snodo.plugin.hookspecs",
    "snodo.judging",
    "snodo.judging.cache",
    "snodo.judging.copies",
    "snodo.judging.judge",
    "snodo.judging.layout",
    "snodo.judging.record",
    "snodo.judging.request",
    "snodo.judging.scan",
    "snodo.judging.session",
    "snodo.judging.tree",
    "snodo.judging.tooling",
    "snodo.rules.outcomes",
    "snodo.plugin.planning",
    "snodo.plugin.host",
    "snodo.process.runner",
    "snodo.process.output",
    "snodo.protocol",
    "snodo.protocol.capabilities",
    "snodo.protocol.committed",
    "snodo.protocol.loader",
    "snodo.protocol.models",
    "snodo.protocol.wellformed",
    "snodo.protocol.yamldoc",
    "snodo.plugin.records",
    "snodo.rules.authorisation",
    "snodo.sandbox",
    "snodo.sandbox.base",
    "snodo.sandbox.bwrap",
    "snodo.sandbox.cgroup",
    "snodo.sandbox.choose",
    "snodo.sandbox.environ",
    "snodo.sandbox.harden",
    "snodo.sandbox.landlock",
    "snodo.sandbox.layout",
    "snodo.sandbox.policy",
    "snodo.sandbox.refusals",
    "snodo.rules.settings",
    "snodo.state",
    "snodo.state.atomic",
    "snodo.state.audit",
    "snodo.state.audit_chain",
    "snodo.state.audit_key",
    "snodo.state.decisions",
    "snodo.state.home",
    "snodo.state.jws",
    "snodo.state.keys",
    "snodo.state.runtime",
    "snodo.state.sessions",
    "snodo.state.signers",
    "snodo.state.tokens",
    "snodo.rules.taskids",
    "snodo.base.text",
    "snodo.workspace",
    "snodo.workspace.changes",
    "snodo.workspace.files",
    "snodo.workspace.git",
    "snodo.workspace.gitmeta",
    "snodo.rules.guard",
    "snodo.workspace.interpreter",
    "snodo.workspace.pysetup",
}

#: Never on the run path of a mock run: model and MCP SDKs, the server, planning, the kit.
NEVER = (
    "litellm",
    "openai",
    "mcp",
    "snodo.mcp",
    "snodo.engine.plans",
    "snodo_conformance",
    "snodo.cli.serve_cmd",
    "snodo.cli.signing",
)


def test_mock_run_imports_only_the_pinned_modules_before_the_first_validator(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    site = tmp_path / "site"
    info = site / "import_probe-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: import-probe\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[snodo]\nimport-probe = import_probe_plugin\n")
    (site / "import_probe_plugin.py").write_text(PROBE)
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    out = tmp_path / "imports.json"
    env = {"PYTHONPATH": path, "SNODO_TEST_IMPORTS_OUT": str(out)}
    r = snodo_cli("run", "add a hello module", "--mock", "--json", cwd=repo, env=env)
    assert r.returncode == 0, r
    loaded = json.loads(out.read_text())
    assert not [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NEVER)]
    ours = {m for m in loaded if m == "snodo" or m.startswith("snodo.")}
    added, gone = sorted(ours - EXPECTED), sorted(EXPECTED - ours)
    assert (added, gone) == ([], []), f"newly imported: {added}; no longer imported: {gone}"


TRIVIAL = TRIVIAL_PROTOCOL

#: Never imported by a whole governed run whose validators run ``true``: pytest (its exit
#: codes are named without it), securesystemslib's signers (they import every cloud SDK
#: installed, boto3 among them; the attestation is signed without them), PyJWT (snodo.state.jws
#: signs the token), rich (output that goes to a pipe is written plain), asyncio (~20 ms; only a server awaits its workers),
#: model and MCP SDKs.
NEVER_IN_A_RUN = (
    "rich",
    "asyncio",
    "pytest",
    "_pytest",
    "securesystemslib.signer",
    "boto3",
    "botocore",
    "jwt",
    *NEVER,
)


def test_a_whole_trivial_run_never_imports_the_heavy_libraries(tmp_path: Path, snodo_cli) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    (repo / ".snodo").mkdir()
    (repo / ".snodo" / "protocol.yml").write_text(TRIVIAL)
    git(repo, "add", ".snodo")
    git(repo, "commit", "-q", "-m", "protocol")
    r = snodo_cli("run", "add a hello module", "--mock", cwd=repo, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0, r
    loaded = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "snodo.engine.loop" in loaded  # the profile did record the run's imports
    assert sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NEVER_IN_A_RUN)) == []
    # piped, the result and the progress are still there for a person, as plain text
    assert r.stdout.splitlines()[0] == "completed", r.stdout
    assert "  next    review the task branch and merge it" in r.stdout.splitlines(), r.stdout
    assert [line.split()[:2] for line in r.stdout.splitlines() if line.startswith("post ")] == [["post", "pass"]]
    assert "pre_execute: pre → pass" in r.stderr


def test_the_exit_code_named_without_importing_pytest_is_pytests() -> None:
    """The run_tests tool names pytest's "no tests collected" itself rather than import pytest."""
    import pytest

    from snodo.judging.testrun import NO_TESTS_COLLECTED

    assert NO_TESTS_COLLECTED == pytest.ExitCode.NO_TESTS_COLLECTED
