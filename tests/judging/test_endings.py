"""Every way a test process can end early or lie about its end: none passes.

Each change breaks ``calc.add`` (two tests that pass at the base fail) and then tries to
hide it; the honest change next to them passes."""

from __future__ import annotations

import pytest

from .conftest import Library

BROKEN = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"

ENDINGS = {
    "atexit forces status 0": "import atexit, os\natexit.register(lambda: os._exit(0))\n" + BROKEN,
    "os._exit(0) while a test runs": "import os\n\n\ndef add(a, b):\n    os._exit(0)\n\n\ndef mul(a, b):\n    return a * b\n",
    "the process kills itself": (
        "import os, signal\n\n\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n\n\n"
        "def mul(a, b):\n    return a * b\n"
    ),
    "a signal handler exits 0": (
        "import os, signal\nsignal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n\n\n"
        "def add(a, b):\n    os.kill(os.getpid(), signal.SIGTERM)\n\n\ndef mul(a, b):\n    return a * b\n"
    ),
    "a fake summary is printed": 'print("\\n==== 3 passed in 0.01s ====")\n' + BROKEN,
    "sys.exit is replaced": "import sys\nsys.exit = lambda *a: None\n" + BROKEN,
    "pytest's reports are rewritten from the package": (
        "import _pytest.reports as _r\n_init = _r.TestReport.__init__\n\n\n"
        "def _passing(self, *a, **k):\n    _init(self, *a, **k)\n    self.outcome = 'passed'\n\n\n"
        "_r.TestReport.__init__ = _passing\n" + BROKEN
    ),
    "the tests and a conftest are rewritten on disk while they run": (
        "import pathlib\n_tests = pathlib.Path(__file__).resolve().parents[2] / 'tests'\n"
        "(_tests / 'conftest.py').write_text('collect_ignore_glob = [\"*\"]\\n')\n"
        "(_tests / 'test_calc.py').write_text('def test_fine():\\n    pass\\n')\n" + BROKEN
    ),
    "the record is written to by a second writer": (
        "import glob\nfor _p in glob.glob('/tmp/**/record', recursive=True):\n"
        '    open(_p, \'a\').write(\'0\' * 64 + \' {"k":"end","exit":0,"seq":99}\\n\')\n' + BROKEN
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENDINGS))
def test_a_process_that_ends_early_or_lies_does_not_pass(library: Library, name: str) -> None:
    library.commit({"src/calc/__init__.py": ENDINGS[name]})
    status, result = library.judged()
    assert status in ("blocker", "escalate"), result
    if status == "escalate":  # only where the change steers the harness: shown, with the lines, to a person
        assert result["escalate"] is True
        assert any("steers the test harness" in e["what"] for e in result["details"]["escalations"]), result


@pytest.mark.slow
def test_the_honest_change_passes(library: Library) -> None:
    library.commit({"src/calc/__init__.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"})
    status, result = library.judged()
    assert status == "pass", result
    assert "2 of 2 base-passing test(s) pass, 1 more pass now" in result["justification"]


@pytest.mark.slow
def test_a_hang_is_a_blocker_not_a_validator_error(tmp_path, snodo_cli) -> None:
    from .conftest import make_library

    lib = make_library(tmp_path / "lib", snodo_cli, tooling="{timeout: 20}")
    lib.commit(
        {
            "src/calc/__init__.py": "import time\n\n\ndef add(a, b):\n    time.sleep(10**6)\n\n\ndef mul(a, b):\n    return a * b\n"
        }
    )
    status, result = lib.judged()
    assert status == "blocker", result
    assert "did not finish" in result["justification"]
