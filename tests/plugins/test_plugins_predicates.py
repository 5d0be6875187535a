"""The built-in predicates, positive and negative, on real project trees; and the secret
pattern list documented exactly as coded."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from snodo_plugins.predicates import SECRET_PATTERNS

from snodo.api import PredicateContext, PredicateResult
from snodo.plugin.host import PluginHost

DOCS = Path(__file__).resolve().parents[2] / "docs" / "predicates.md"

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # split so this file does not trip secret scanners
GH_TOKEN = "ghp_" + "a1B2" * 9
PEM = "-----BEGIN RSA " + "PRIVATE KEY-----"


def check(
    host: PluginHost,
    name: str,
    root: Path,
    changed: tuple[str, ...] = (),
    diff: str = "",
    params: Mapping[str, Any] | None = None,
) -> PredicateResult:
    ctx = PredicateContext(
        workspace=root, task_id="t", task_spec="s", phase="post_execute", changed_files=changed, diff=diff
    )
    return host.check_predicate(name, ctx, params or {})


def test_files_in_scope(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project({})
    allowed = {"allowed": ["src/**", "tests/", "*.md"]}
    ok = check(
        host,
        "files_in_scope",
        root,
        ("src/a.py", "src/deep/b.py", "tests/t.py", "./README.md"),
        params=allowed,
    )
    assert ok.ok, ok.message
    bad = check(host, "files_in_scope", root, ("src/a.py", "setup.py", "docs/x.md"), params=allowed)
    assert not bad.ok
    assert "setup.py, docs/x.md" in bad.message and "src/a.py" not in bad.message.split(": ", 1)[1]
    assert check(host, "files_in_scope", root, (), params=allowed).ok


@pytest.mark.parametrize("params", [{}, {"allowed": []}, {"allowed": "src/**"}, {"allowed": [3]}])
def test_files_in_scope_misconfigured_fails_closed(
    host: PluginHost, project: Callable[..., Path], params: dict[str, Any]
) -> None:
    result = check(host, "files_in_scope", project({}), ("a.py",), params=params)
    assert not result.ok and "params.allowed" in result.message


def test_tests_exist_for_modified(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project(
        {
            "pkg/core.py": "x = 1\n",
            "tests/unit/test_core.py": "",
            "util.py": "y = 2\n",
            "test_util.py": "",
            "lonely.py": "z = 3\n",
            "pkg/__init__.py": "",
            "tests/helpers.py": "",
        }
    )
    ok = check(
        host,
        "tests_exist_for_modified",
        root,
        ("pkg/core.py", "util.py", "pkg/__init__.py", "tests/helpers.py", "gone.py", "README.md"),
    )
    assert ok.ok, ok.message
    bad = check(host, "tests_exist_for_modified", root, ("pkg/core.py", "lonely.py"))
    assert not bad.ok and "lonely.py" in bad.message and "core" not in bad.message
    (root / "new.py").write_text("n = 0\n")
    (root / "tests" / "test_new.py").write_text("")
    assert check(host, "tests_exist_for_modified", root, ("new.py", "tests/test_new.py")).ok


def test_no_secrets_in_the_diff(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project({})
    diff = (
        "diff --git a/app/settings.py b/app/settings.py\n"
        "--- a/app/settings.py\n+++ b/app/settings.py\n"
        "@@ -1,2 +1,3 @@\n import os\n"
        f"-OLD = '{GH_TOKEN}'\n"
        f"+AWS_KEY = '{AWS_KEY}'\n"
        " DEBUG = False\n"
        '+db_password = "correct-horse-battery"\n'
    )
    result = check(host, "no_secrets_in_diff", root, ("app/settings.py",), diff=diff)
    assert not result.ok
    assert "app/settings.py:2: matches the AWS access key id pattern" in result.message
    assert "app/settings.py:4: matches the password assignment pattern" in result.message
    assert "GitHub" not in result.message  # the removed token is not flagged
    assert AWS_KEY not in result.message and "correct-horse" not in result.message

    clean = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1 @@\n+password = os.environ['DB_PASSWORD']\n"
    assert check(host, "no_secrets_in_diff", root, ("x.py",), diff=clean).ok


def test_no_secrets_scans_changed_files_without_a_diff(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project(
        {"deploy/key.pem": f"{PEM}\nMIIE...\n", "ok.py": "print('hi')\n", "bot.py": f"TOKEN = '{GH_TOKEN}'\n"}
    )
    result = check(host, "no_secrets_in_diff", root, ("deploy/key.pem", "ok.py", "bot.py"))
    assert not result.ok
    assert "deploy/key.pem:1: matches the private key block pattern" in result.message
    assert "bot.py:1: matches the GitHub token pattern" in result.message
    assert GH_TOKEN not in result.message
    assert check(host, "no_secrets_in_diff", root, ("ok.py",)).ok


@pytest.mark.parametrize(
    "line",
    [
        "xoxb-" + "1234567890-abcdef",
        "https://hooks.slack.com/services/" + "T000/B000/XXXXXXXX",
        "key = 'sk-" + "proj-" + "A" * 30 + "'",
        "aws_secret_access_key = " + "a" * 40,
        "github_pat_" + "A" * 30,
    ],
)
def test_each_documented_family_is_caught(host: PluginHost, project: Callable[..., Path], line: str) -> None:
    diff = f"+++ b/conf.txt\n@@ -0,0 +1 @@\n+{line}\n"
    assert not check(host, "no_secrets_in_diff", project({}), ("conf.txt",), diff=diff).ok


def test_docs_list_every_pattern_exactly() -> None:
    text = DOCS.read_text()
    for name, pattern in SECRET_PATTERNS:
        assert f"| {name} | `{pattern.pattern.replace('|', chr(92) + '|')}` |" in text, name
