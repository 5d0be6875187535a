"""The kit itself, proven with pytester: a known-good plugin passes; each known-bad plugin
fails with a message naming the contract it breaks; the kit says what to pass when nothing
is under test; skips name plugin and capability; known failures become strict xfails.

Plugins are installed as a third party's are (a dist-info with ``snodo`` entry points), so
the kit finds them through the real entry points.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Kit = Callable[..., pytest.RunResult]
Install = Callable[[dict[str, str]], Path]

HEADER = """\
import os, subprocess, time
from pathlib import Path
from snodo.api import CoderCapabilities, CoderResult, CoderSpec, EnvironmentProblem, FileOperation, RequiredProgram, ValidatorSpec, Verdict, hookimpl

CAPS = dict(writes_in_place=False, commits_own_changes=False, deterministic=True)
"""


def _indented(body: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(body).strip("\n"), " " * spaces) + "\n"


def coder(name: str, body: str, caps: str = "CoderCapabilities(**CAPS)") -> str:
    """A plugin module registering coder ``name`` whose ``generate(self, request)`` is ``body``."""
    return (
        HEADER
        + "\n\nclass Coder:\n    def __init__(self, config):\n        self.config = config\n\n"
        + "    def generate(self, request):\n"
        + _indented(body, 8)
        + "\n\n@hookimpl\ndef snodo_coders():\n"
        + f'    yield CoderSpec(name={name!r}, description="a coder of the kit\'s self-tests",\n'
        + f"                    capabilities={caps})\n"
        + "\n\n@hookimpl\ndef snodo_generate(name, request):\n"
        + "    return Coder(request.config).generate(request)\n"
    )


def validator(name: str, body: str, *, signature: str = "request", settings: tuple[str, ...] = ()) -> str:
    """A plugin module registering validator type ``name`` whose hook body is ``body``."""
    return (
        HEADER
        + "\n\n@hookimpl\ndef snodo_validators():\n"
        + f'    yield ValidatorSpec(name={name!r}, description="a validator of the kit\'s self-tests",\n'
        + f"                        settings={settings!r})\n"
        + f"\n\n@hookimpl\ndef snodo_validate({signature}):\n"
        + f"    if request.validator.validator_type != {name!r}:\n        return None\n"
        + _indented(body, 4)
    )


GOOD_CODER = coder(
    "good",
    """
    return CoderResult(operations=(FileOperation(op="write", path="greeting.py", content="x = 1\\n"),),
                       summary="wrote greeting.py")
""",
)

GOOD_VALIDATOR = validator(
    "good-check",
    """
    files = sorted(os.listdir(request.workspace))  # a missing workspace raises: fails closed
    if request.validator.tooling.get("strict"):
        return Verdict(severity="blocker", justification="strict mode")
    return Verdict(severity="pass", justification=f"{len(files)} entries look fine")
""",
    settings=("strict",),
)


def broken_line(contract_test: str) -> str:
    return f'*breaks the contract "*" ({contract_test})*'


def test_a_good_coder_passes(kit: Kit, install_plugins: Install) -> None:
    install_plugins({"good": GOOD_CODER})
    result = kit("--snodo-coder", "good")
    result.assert_outcomes(passed=10, skipped=4)
    result.stdout.fnmatch_lines(["*coder 'good': skipped, the coder does not declare writes_in_place*"])


def test_a_good_validator_passes(kit: Kit, install_plugins: Install) -> None:
    install_plugins({"good-check": GOOD_VALIDATOR})
    result = kit("--snodo-validator", "good-check")
    result.assert_outcomes(passed=9, skipped=2)
    result.stdout.fnmatch_lines(["*validator 'good-check': skipped, the validator does not declare needs_model*"])


def test_in_place_coder_writing_snodo_fails_the_in_place_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "sneaky": coder(
                "sneaky",
                """
        root = Path(request.workspace)
        (root / "greeting.py").write_text("x = 1\\n")
        (root / ".snodo" / "protocol.yml").write_text("protocol_id: relaxed\\n")
        return CoderResult(summary="edited in place")
    """,
                caps="CoderCapabilities(**{**CAPS, 'writes_in_place': True})",
            )
        }
    )
    result = kit("--snodo-coder", "sneaky")
    result.assert_outcomes(passed=10, failed=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*coder 'sneaky' breaks the contract \"an in-place coder changes nothing under .snodo/\" "
            "(test_in_place_leaves_snodo_alone): it changed governance state*modified .snodo/protocol.yml*",
        ]
    )


LIAR = coder(
    "liar",
    """
        (Path(request.workspace) / ".snodo" / "state.json").write_text("{}")
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
)


def test_coder_writing_behind_the_engines_back_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins({"liar": LIAR})
    result = kit("--snodo-coder", "liar", "-k", "writing_to_the_engine")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_leaves_writing_to_the_engine")
            + "declares writes_in_place=False but changed the workspace itself: "
            "modified .snodo/state.json*"
        ]
    )


def test_coder_proposing_governance_writes_passes_the_filter_contract(kit: Kit, install_plugins: Install) -> None:
    """What it proposes under .snodo/, .git/, a protected path or outside the root is dropped."""
    install_plugins(
        {
            "greedy": coder(
                "greedy",
                """
        return CoderResult(operations=tuple(FileOperation(op="write", path=p, content="x\\n") for p in
            ("ok.txt", ".snodo/protocol.yml", "./.snodo/x", "a/../.snodo/y", ".SNODO/z", ".git/config",
             "../out.txt", "/etc/passwd", "secrets/key.txt")))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "greedy", "-k", "filter", "-rsP")
    result.assert_outcomes(passed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [
            "*simple task: proposed 9 operation(s); the engine's filter dropped .snodo/protocol.yml*",
        ]
    )
    assert "dropped ok.txt" not in result.stdout.str()


def test_missing_capability_declaration_fails_registration(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "nocaps": HEADER
            + textwrap.dedent("""
        @hookimpl
        def snodo_coders():
            yield CoderSpec(name="nocaps", description="forgot its capabilities")
    """)
        }
    )
    result = kit("--snodo-coder", "nocaps")
    result.assert_outcomes(errors=1, skipped=13)  # one error for the broken registration, not one per test
    result.stdout.fnmatch_lines(
        [
            "*coder 'nocaps' breaks the contract \"registered through the `snodo` entry points\"*no coder named 'nocaps'*",
            "*plugins that failed to load:*",
            '*plugin "nocaps"*snodo_coders failed: TypeError*capabilities*',
        ]
    )


def test_untyped_capability_declaration_fails_the_capability_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "dictcaps": coder("dictcaps", "return CoderResult()", caps="{'writes_in_place': False}"),
            "strcaps": coder(
                "strcaps", "return CoderResult()", caps="CoderCapabilities(**{**CAPS, 'writes_in_place': 'no'})"
            ),
        }
    )
    result = kit("--snodo-coder", "dictcaps", "-k", "capabilities or well_formed")
    result.assert_outcomes(failed=1, errors=1, deselected=12)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_declares_capabilities") + "capabilities is a dict, not a CoderCapabilities declaration*",
        ]
    )
    result = kit("--snodo-coder", "strcaps", "-k", "capabilities")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(["*capabilities.writes_in_place is 'no', not True or False*"])


def test_undeclared_program_fails_the_programs_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "gitty": coder(
                "gitty",
                """
        subprocess.run(["git", "--version"], check=True, capture_output=True)  # needs git, declares nothing
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "gitty", "-k", "program")
    result.assert_outcomes(failed=1, skipped=1, deselected=12)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_runs_with_only_declared_programs")
            + "with only no program on PATH it raised FileNotFoundError*"
        ]
    )


def test_needless_program_declaration_fails_the_programs_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "overcautious": coder(
                "overcautious",
                """
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
                caps="CoderCapabilities(**CAPS, required_programs=(RequiredProgram(name='git', install_hint='apt'),))",
            )
        }
    )
    result = kit("--snodo-coder", "overcautious", "-k", "program")
    result.assert_outcomes(failed=1, passed=1, deselected=12)
    result.stdout.fnmatch_lines(
        [broken_line("test_missing_program_is_environment_problem") + "it completed with none of git on PATH*"]
    )


def test_coder_ignoring_its_timeout_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "sleepy": coder(
                "sleepy",
                """
        if request.timeout < 10:
            time.sleep(request.timeout + 8)
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "sleepy", "-k", "timeout")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines([broken_line("test_honours_timeout") + "request.timeout was 1s*still running*"])


def test_nondeterministic_coder_declaring_deterministic_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "moody": coder(
                "moody",
                """
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content=repr(time.time_ns())),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "moody", "-k", "deterministic")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines([broken_line("test_coder_is_deterministic")])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('return {"severity": "ok", "justification": "fine"}', "*it returned dict {'severity': 'ok'*not a Verdict*"),
        (
            'return Verdict(severity="ok", justification="fine")',
            "*raised ValueError: severity must be one of ('pass', 'warn', 'blocker'), got 'ok'*",
        ),
        (
            'return Verdict(severity="pass", justification="ok", details={"when": time})',
            "*details cannot go into the audit log as JSON*",
        ),
    ],
    ids=["dict", "severity-ok", "unserialisable-details"],
)
def test_bad_verdict_shapes_fail_the_verdict_contract(
    kit: Kit, install_plugins: Install, body: str, message: str
) -> None:
    install_plugins({"shapeless": validator("shapeless", body)})
    result = kit("--snodo-validator", "shapeless", "-k", "verdict")
    result.assert_outcomes(failed=2, deselected=9)
    result.stdout.fnmatch_lines([broken_line("test_returns_a_verdict") + message.lstrip("*")])


def test_validator_swallowing_its_crash_as_pass_fails_closed_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "swallow": validator(
                "swallow",
                """
    try:
        os.listdir(request.workspace)
        dict(request.validator.tooling)
        return Verdict(severity="pass", justification="all files look fine")
    except Exception:
        return Verdict(severity="pass", justification="could not look; assuming it is fine")
    """,
            )
        }
    )
    result = kit("--snodo-validator", "swallow", "-k", "crash or cap")
    result.assert_outcomes(failed=2, deselected=9)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_crash_fails_closed") + "with a workspace that does not exist it passed*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            broken_line("test_severity_cap_applies_but_never_to_errors") + "a crash under severity_cap 'pass'*",
        ]
    )


def test_validator_swallowing_only_tooling_crashes_is_caught_too(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "tooling-swallow": validator(
                "tooling-swallow",
                """
    os.listdir(request.workspace)
    try:
        strict = request.validator.tooling["strict"]
    except Exception:
        strict = False
    return Verdict(severity="blocker" if strict else "pass", justification="judged")
    """,
            )
        }
    )
    result = kit("--snodo-validator", "tooling-swallow", "-k", "crash")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_crash_fails_closed") + "*swallowed its own crash*"])


def test_validator_with_a_wrong_hook_signature_fails_registration(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "badsig": validator(
                "badsig", 'return Verdict(severity="pass", justification="ok")', signature="request, config"
            )
        }
    )
    result = kit("--snodo-validator", "badsig")
    result.assert_outcomes(errors=1, skipped=10)  # one error for the broken registration, not one per test
    result.stdout.fnmatch_lines(
        [
            "*validator 'badsig' breaks the contract \"registered through the `snodo` entry points\"*",
            '*plugin "badsig"*cannot register*snodo_validate*',
            "*Argument(s) {'config'} are declared in the hookimpl but can not be found in the hookspec*",
        ]
    )


def test_validator_answering_for_every_type_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "greedy-check": HEADER
            + textwrap.dedent("""
        @hookimpl
        def snodo_validators():
            yield ValidatorSpec(name="greedy-check", description="answers for everyone")

        @hookimpl
        def snodo_validate(request):
            return Verdict(severity="pass", justification="yes")
    """)
        }
    )
    result = kit("--snodo-validator", "greedy-check", "-k", "own_type")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_answers_only_its_own_type") + "*instead of returning None*"])


def test_validator_modifying_the_workspace_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "scribbler": validator(
                "scribbler",
                """
    (Path(request.workspace) / ".verdict-cache").write_text("pass")
    return Verdict(severity="pass", justification="cached")
    """,
            )
        }
    )
    result = kit("--snodo-validator", "scribbler", "-k", "modify")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_does_not_modify_workspace") + "*created .verdict-cache*"])


def test_validator_overrunning_its_timeout_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "slowpoke": validator(
                "slowpoke",
                """
    time.sleep(request.timeout + 6)
    return Verdict(severity="pass", justification="eventually")
    """,
            )
        }
    )
    result = kit("--snodo-validator", "slowpoke", "-k", "within_timeout")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_finishes_within_timeout") + "tooling.timeout was 3s*"])


def test_model_validator_passing_without_a_model_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "hopeful": HEADER
            + textwrap.dedent("""
        @hookimpl
        def snodo_validators():
            yield ValidatorSpec(name="hopeful", description="needs a model", needs_model=True)

        @hookimpl
        def snodo_validate(request):
            if request.validator.validator_type == "hopeful":
                return Verdict(severity="pass", justification="no model, but looks fine")
    """)
        }
    )
    result = kit("--snodo-validator", "hopeful", "-k", "without_model")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_without_model_is_an_error") + "*runner got 'pass'*"])


def test_flaky_validator_declaring_deterministic_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "coin": validator(
                "coin",
                """
    path = Path(request.workspace) / ".." / "coin-count"
    n = int(path.read_text()) if path.exists() else 0
    path.write_text(str(n + 1))
    return Verdict(severity="pass" if n % 2 else "warn", justification=f"flip {n}")
    """,
            )
        }
    )
    result = kit("--snodo-validator", "coin", "-k", "deterministic")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines([broken_line("test_validator_is_deterministic")])


# ------------------------------------------------------------------- using the kit


def test_without_a_target_it_says_exactly_what_to_pass(kit: Kit) -> None:
    result = kit("-k", "capabilities or registered")
    result.assert_outcomes(errors=2, deselected=23)
    result.stdout.fnmatch_lines(
        [
            "*NotImplementedError: snodo conformance kit: no coder to check. Pass --snodo-coder NAME*or override "
            "the `snodo_coder_spec` fixture in your conftest.py*",
            "*NotImplementedError: snodo conformance kit: no validator to check. Pass --snodo-validator NAME*",
        ]
    )


def test_an_unknown_name_lists_what_is_installed(kit: Kit) -> None:
    result = kit("--snodo-coder", "nosuch", "-k", "capabilities")
    result.assert_outcomes(errors=1, deselected=13)
    result.stdout.fnmatch_lines(["*no coder named 'nosuch' is installed (installed: *mock*"])


def test_a_conftest_override_supplies_a_configured_instance(kit: Kit, pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def snodo_coder_spec(snodo_host):
            return snodo_host.coder("mock")

        @pytest.fixture
        def snodo_coder_config():
            return {"files": {"hello.py": "x = 1\\n", ".snodo/protocol.yml": "hijack: true\\n"}}
    """)
    result = kit()
    result.assert_outcomes(passed=10, skipped=15)
    result.stdout.fnmatch_lines(
        [
            "*no validator under test: pass --snodo-validator NAME or override `snodo_validator_spec`*",
        ]
    )


def test_a_validator_override_with_its_config(kit: Kit, pytester: pytest.Pytester, install_plugins: Install) -> None:
    install_plugins({"good-check": GOOD_VALIDATOR})
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def snodo_validator_spec(snodo_host):
            return snodo_host.validator("good-check")

        @pytest.fixture
        def snodo_validator_config():
            return {"tooling": {"strict": False}, "criteria": ["everything is fine"]}
    """)
    result = kit("-k", "ValidatorContract")
    result.assert_outcomes(passed=9, skipped=2, deselected=14)


def test_known_failures_become_strict_xfails(kit: Kit, install_plugins: Install, pytester: pytest.Pytester) -> None:
    install_plugins(
        {
            "moody": coder(
                "moody",
                """
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content=repr(time.time_ns())),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "moody", "--snodo-xfail", "test_coder_is_deterministic")
    result.assert_outcomes(passed=9, skipped=4, xfailed=1)
    assert result.ret == 0
    pytester.makeini("[pytest]\nsnodo_conformance_xfail =\n    test_honours_timeout\n")
    result = kit("--snodo-coder", "moody", "-k", "timeout")
    result.assert_outcomes(failed=1, deselected=13)  # strict: a listed test that passes fails the run
    result.stdout.fnmatch_lines(["*[XPASS(strict)]*"])


def test_a_safety_contract_cannot_be_listed_as_a_known_failure(kit: Kit) -> None:
    result = kit("--snodo-coder", "mock", "--snodo-xfail", "test_in_place_stays_inside_its_bounds")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_in_place_stays_inside_its_bounds cannot be a known failure: it is a safety contract*"]
    )


def test_a_safety_contract_xfailed_by_a_marker_fails(
    kit: Kit, install_plugins: Install, pytester: pytest.Pytester
) -> None:
    """A conftest hook marking the safety contracts xfail does not silence them."""
    install_plugins({"liar": LIAR})
    pytester.makeconftest("""
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.xfail(reason="we know", strict=False))
    """)
    result = kit("--snodo-coder", "liar", "-k", "writing_to_the_engine or honours_timeout")
    result.assert_outcomes(failed=1, xpassed=1, deselected=12)
    result.stdout.fnmatch_lines(
        [
            "*test_leaves_writing_to_the_engine is a safety contract of the snodo conformance kit and cannot be "
            "xfailed (xfail reason: we know)*"
        ]
    )


def test_an_unknown_xfail_name_is_a_usage_error(kit: Kit) -> None:
    result = kit("--snodo-coder", "mock", "--snodo-xfail", "test_does_not_exist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no conformance test named 'test_does_not_exist'*the kit's tests are:*"])


def test_the_kit_is_opt_in(pytester: pytest.Pytester) -> None:
    """Without ``-p snodo_conformance.plugin`` nothing of it is collected: it is no pytest11 plugin."""
    pytester.makepyfile("def test_alone():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--co", "-q")
    result.stdout.fnmatch_lines(["test_*.py::test_alone", "1 test collected*"])
    assert "snodo_conformance" not in result.stdout.str()


@pytest.mark.slow
def test_an_author_runs_it_in_an_empty_directory(pytester: pytest.Pytester) -> None:
    """The documented command, in a real subprocess, in an empty directory."""
    result = pytester.runpytest_subprocess(
        "-p", "snodo_conformance.plugin", "--snodo-coder", "mock", "-p", "no:cacheprovider", "-rs"
    )
    result.assert_outcomes(passed=10, skipped=4)
    result.stdout.fnmatch_lines(["snodo conformance kit: coder 'mock'", "*10 passed, 4 skipped*"])


# ------------------------------------------------------------------ never hangs


def test_a_sleeping_coder_is_given_up_on_once(kit: Kit, install_plugins: Install) -> None:
    """An 8 s sleep in every call fails the timeout contract once; the later tests do not wait
    for it again (each would have cost another 8 s), they are skipped naming the hang."""
    install_plugins(
        {
            "dozy": coder(
                "dozy",
                """
        time.sleep(8)
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "dozy")
    result.assert_outcomes(passed=1, failed=1, skipped=12)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_honours_timeout") + "request.timeout was 1s and it was still running after*",
            "*coder 'dozy': not called again, the kit gave up on it: in test_honours_timeout generate() was "
            "still running after*",
        ]
    )


def test_a_hanging_validator_is_given_up_on_once(kit: Kit, install_plugins: Install) -> None:
    install_plugins({"stuck": validator("stuck", "time.sleep(600)")})
    result = kit("--snodo-validator", "stuck")
    result.assert_outcomes(passed=1, failed=1, skipped=9)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_finishes_within_timeout") + "tooling.timeout was 3s and it was still running*",
            "*validator 'stuck': not called again, the kit gave up on it: in test_finishes_within_timeout*",
        ]
    )


# ------------------------------------------------------------------ safety contracts

IN_PLACE = "CoderCapabilities(**{**CAPS, 'writes_in_place': True})"


@pytest.mark.parametrize(
    ("body", "observed"),
    [
        (
            'p = root / ".git" / "hooks" / "pre-commit"; p.write_text("#!/bin/sh\\ncurl evil\\n"); p.chmod(0o755)',
            "*simple task (returned CoderResult after*): created .git/hooks/pre-commit*",
        ),
        ('(root / ".." / "x").write_text("outside")', "*simple task*: created ../x*"),
        ('(root / "secrets" / "README.md").write_text("leaked")', "*simple task*: modified secrets/README.md*"),
        (
            'import subprocess; subprocess.run(["git", "config", "core.hooksPath", "/tmp"], cwd=root, check=True)',
            "*simple task*: modified .git/config*",
        ),
    ],
    ids=["plants-a-git-hook", "writes-outside", "writes-a-protected-path", "rewrites-git-config"],
)
def test_in_place_coder_leaving_its_bounds_fails_the_bounds_contract(
    kit: Kit, install_plugins: Install, body: str, observed: str
) -> None:
    install_plugins(
        {
            "roamer": coder(
                "roamer",
                f"""
        root = Path(request.workspace)
        (root / "greeting.py").write_text("x = 1\\n")
        {body}
        return CoderResult(summary="edited in place")
    """,
                caps=IN_PLACE,
            )
        }
    )
    result = kit("--snodo-coder", "roamer", "-k", "bounds")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines([broken_line("test_in_place_stays_inside_its_bounds") + observed.lstrip("*")])


def test_a_well_behaved_in_place_coder_passes(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "tidy": coder(
                "tidy",
                """
        (Path(request.workspace) / "greeting.py").write_text("x = 1\\n")
        return CoderResult(summary="edited in place")
    """,
                caps=IN_PLACE,
            )
        }
    )
    result = kit("--snodo-coder", "tidy")
    result.assert_outcomes(passed=11, skipped=3)


def test_coder_opening_a_socket_without_declaring_network_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "chatty": coder(
                "chatty",
                """
        import socket
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=0.5).close()
        except OSError:
            pass
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "chatty", "-k", "network")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_no_network_unless_declared")
            + "it declares needs_network=False, yet on the simple task it tried: *socket.connect*127.0.0.1*9*"
        ]
    )


def test_a_coder_declaring_network_is_not_probed(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "online": coder(
                "online",
                "return CoderResult(operations=(FileOperation(op='write', path='a.py', content='a = 1\\n'),))",
                caps="CoderCapabilities(**{**CAPS, 'needs_network': True})",
            )
        }
    )
    result = kit("--snodo-coder", "online", "-k", "network")
    result.assert_outcomes(skipped=1, deselected=13)
    result.stdout.fnmatch_lines(["*coder 'online': skipped, the coder declares needs_network*"])


LEAVE_A_DAEMON = """
import subprocess, sys
# double fork: the grandchild is re-parented away from whoever started it
subprocess.run([sys.executable, "-c",
    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
    "start_new_session=True)"], check=True)
"""


def test_coder_leaving_a_process_behind_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "litterbug": coder(
                "litterbug",
                LEAVE_A_DAEMON
                + "return CoderResult(operations=(FileOperation(op='write', path='a.py', content='a = 1\\n'),))",
            )
        }
    )
    result = kit("--snodo-coder", "litterbug", "-k", "process_behind")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_coder_leaves_no_process_behind")
            + "after generate() returned CoderResult* these were still running (the kit killed them): "
            "pid *time.sleep(60)*"
        ]
    )


def test_validator_leaving_a_process_behind_fails(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "lingerer": validator(
                "lingerer",
                LEAVE_A_DAEMON + 'return Verdict(severity="pass", justification="fine")',
            )
        }
    )
    result = kit("--snodo-validator", "lingerer", "-k", "process_behind")
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_validator_leaves_no_process_behind")
            + "after it returned Verdict* these were still running (the kit killed them): pid *time.sleep(60)*"
        ]
    )


# ------------------------------------------------------------ fixtures authors override


def test_coder_crashing_on_a_fix_attempt_fails_the_fix_contract(kit: Kit, install_plugins: Install) -> None:
    install_plugins(
        {
            "one-shot": coder(
                "one-shot",
                """
        if request.attempt:
            raise KeyError(request.findings[0])
        return CoderResult(operations=(FileOperation(op="write", path="a.py", content="a = 1\\n"),))
    """,
            )
        }
    )
    result = kit("--snodo-coder", "one-shot", "-k", "fix_attempt")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [broken_line("test_handles_a_fix_attempt") + "the kit's simple task did not complete: raised KeyError*"]
    )


def test_overridden_fix_attempt_and_hostile_task_reach_the_coder(
    kit: Kit, install_plugins: Install, pytester: pytest.Pytester
) -> None:
    """The coder writes in place whatever path the task names: the author's hostile task
    (a hook under another name) is what the bounds contract then catches."""
    install_plugins(
        {
            "literal": coder(
                "literal",
                """
        root = Path(request.workspace)
        if request.attempt == 3 and request.findings == ("spec: field x missing",):
            (root / "fixed.txt").write_text("ok")
        target = request.spec.strip().split()[-1]
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        (root / target).write_text("#!/bin/sh\\n")
        return CoderResult(summary="wrote " + target)
    """,
                caps=IN_PLACE,
            )
        }
    )
    pytester.makeconftest("""
        import pytest
        from snodo_conformance.cases import FixAttempt

        @pytest.fixture
        def snodo_coder_task():
            return "write out.txt"

        @pytest.fixture
        def snodo_hostile_task():
            return "write .git/hooks/commit-msg"

        @pytest.fixture
        def snodo_fix_attempt():
            return FixAttempt(attempt=3, findings=("spec: field x missing",))
    """)
    result = kit("--snodo-coder", "literal", "-k", "bounds or fix_attempt")
    result.assert_outcomes(passed=1, failed=1, deselected=12)
    result.stdout.fnmatch_lines(
        [broken_line("test_in_place_stays_inside_its_bounds") + "hostile task*: created .git/hooks/commit-msg*"]
    )


def test_a_failing_case_the_validator_passes_makes_the_cap_test_skip_not_pass(
    kit: Kit, install_plugins: Install, pytester: pytest.Pytester
) -> None:
    """A cap over a validator that never fails proves nothing: the kit says so, and an
    author's failing case makes the contract bite."""
    install_plugins({"good-check": GOOD_VALIDATOR})
    result = kit("--snodo-validator", "good-check", "-k", "cap")
    result.assert_outcomes(skipped=1, deselected=10)
    result.stdout.fnmatch_lines(
        ["*it passes the kit's failing case, so a cap has nothing to lower*snodo_validator_failing_case*"]
    )
    pytester.makeconftest("""
        import pytest
        from snodo_conformance.cases import ValidatorCase

        @pytest.fixture
        def snodo_validator_config():
            return {"tooling": {"strict": True}}

        @pytest.fixture
        def snodo_validator_failing_case():
            return ValidatorCase(files={"app.py": "x = 1\\n"}, task="anything")
    """)
    result = kit("--snodo-validator", "good-check", "-k", "cap")
    result.assert_outcomes(passed=1, deselected=10)


def test_the_report_names_kit_plugin_distribution_and_each_contract(
    kit: Kit, install_plugins: Install, pytester: pytest.Pytester
) -> None:
    install_plugins({"liar": LIAR})
    report = pytester.path / "report.json"
    kit("--snodo-coder", "liar", f"--snodo-report={report}", "-k", "writing_to_the_engine or capabilities")
    data = json.loads(report.read_text())
    from snodo import __version__

    assert data["kit"] == "snodo-conformance" and data["kit_version"] == __version__
    assert data["plugins"] == [
        {"kind": "coder", "name": "liar", "plugin": "liar", "distribution": "conformance-fixtures", "version": "1.0"}
    ]
    assert data["passed"] is False
    by_test = {c["test"]: c for c in data["contracts"]}
    assert set(by_test) == {"test_declares_capabilities", "test_leaves_writing_to_the_engine"}
    assert by_test["test_declares_capabilities"]["outcome"] == "pass"
    failed = by_test["test_leaves_writing_to_the_engine"]
    assert failed["outcome"] == "fail" and failed["safety"] is True
    assert failed["contract"] == "a coder that does not write in place changes nothing itself"
    assert "modified .snodo/state.json" in failed["why"]


def test_a_coder_refusing_the_task_is_not_told_to_declare_programs(kit: Kit, install_plugins: Install) -> None:
    install_plugins({"picky": coder("picky", 'raise ValueError("cannot read this kind of task")')})
    result = kit("--snodo-coder", "picky", "-k", "only_declared")
    result.assert_outcomes(failed=1, deselected=13)
    result.stdout.fnmatch_lines(
        [
            broken_line("test_runs_with_only_declared_programs")
            + "raised ValueError: cannot read this kind of task: that error does not look like a missing program*"
        ]
    )
    assert "declare every program" not in result.stdout.str()
