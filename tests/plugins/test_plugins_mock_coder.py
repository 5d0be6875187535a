"""The mock coder: a real module whose real test passes, reproducible per spec and attempt,
or exactly the operations the protocol dictates (``.snodo/`` included: filtering is the
engine's job)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hooked import HookedCoder

from snodo.api import CoderError, CoderRequest, CoderResult, FileOperation
from snodo.plugin.host import PluginHost


def generate(
    host: PluginHost, workspace: Path, spec: str, config: dict[str, object] | None = None, attempt: int = 0
) -> CoderResult:
    coder = HookedCoder(host, "mock", config or {})
    request = CoderRequest(task_id="t1", spec=spec, workspace=workspace, mode_id="dev", attempt=attempt)
    return coder.generate(request)


def apply(root: Path, ops: tuple[FileOperation, ...]) -> None:
    for op in ops:
        assert op.op == "write" and op.content is not None
        (root / op.path).parent.mkdir(parents=True, exist_ok=True)
        (root / op.path).write_text(op.content)


def test_default_output_is_a_module_with_a_passing_test(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project({"README.md": "# demo\n"})
    result = generate(host, root, "add a hello module")
    assert [op.path for op in result.operations] == ["hello.py", "tests/test_hello.py"]
    apply(root, result.operations)
    assert "import hello" in (root / "tests/test_hello.py").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_named_functions_and_module_names(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project({})
    result = generate(host, root, "Add a module named greet with a function `wave` and `bow()`")
    module, test = result.operations
    assert module.path == "greet.py"
    assert module.content is not None and "def wave()" in module.content and "def bow()" in module.content
    assert test.content is not None and "greet.wave()" in test.content
    # A standard-library name would shadow the real module for the tests run from the root.
    assert generate(host, root, "add a json module").operations[0].path == "json_feature.py"
    assert generate(host, root, "implement `string.py`").operations[0].path == "string_feature.py"
    assert generate(host, root, "Fizzbuzz please").operations[0].path == "fizzbuzz.py"


def test_fix_attempts_differ_and_each_is_reproducible(host: PluginHost, project: Callable[..., Path]) -> None:
    root = project({})
    first = generate(host, root, "add a hello module")
    second = generate(host, root, "add a hello module", attempt=1)
    third = generate(host, root, "add a hello module", attempt=2)
    assert first.operations != second.operations != third.operations
    assert "attempt 2" in (third.operations[0].content or "")
    assert generate(host, root, "add a hello module", attempt=2).operations == third.operations


def test_dictated_operations_are_emitted_exactly(host: PluginHost, project: Callable[..., Path]) -> None:
    config = {
        "files": {"b.txt": "b\n", ".snodo/protocol.yml": "hacked\n", "a.txt": "a\n"},
        "delete": ["old.txt", ".snodo/state.json"],
    }
    result = generate(host, project({}), "anything at all", config)
    assert result.operations == (
        FileOperation(op="write", path="b.txt", content="b\n"),
        FileOperation(op="write", path=".snodo/protocol.yml", content="hacked\n"),
        FileOperation(op="write", path="a.txt", content="a\n"),
        FileOperation(op="delete", path="old.txt"),
        FileOperation(op="delete", path=".snodo/state.json"),
    )
    assert generate(host, project({}, name="p2"), "x", {"delete": ["only.txt"]}).operations == (
        FileOperation(op="delete", path="only.txt"),
    )


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"file": {"a": "b"}}, "file"),
        (
            {"files": {"a": "b"}, "colour": 1, "size": 2},
            "key 'colour'; the mock coder honours: files, delete; coder 'mock': unknown coder_config key 'size'",
        ),
        ({"files": ["a.txt"]}, "coder_config.files"),
        ({"files": {"a.txt": 3}}, "coder_config.files"),
        ({"delete": "a.txt"}, "coder_config.delete"),
    ],
)
def test_config_is_validated_strictly(host: PluginHost, config: dict[str, object], needle: str) -> None:
    with pytest.raises(CoderError, match=needle.replace(".", r"\.")):
        HookedCoder(host, "mock", config)
