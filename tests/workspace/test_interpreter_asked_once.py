"""A named interpreter is asked its version once per process, and again once it changes.

The question costs a (confined) interpreter start; a serve session or a run asks it for
every validator call, so the answer is kept for the exact file that gave it (#26).
"""

from __future__ import annotations

import sys
from pathlib import Path

from snodo.workspace.pysetup import python_setup

WRAPPER = '#!/bin/sh\necho asked >> "{log}"\nexec "{python}" "$@"\n'


def test_the_version_question_is_asked_once_until_the_interpreter_changes(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / ".venv" / "bin").mkdir(parents=True)
    log = tmp_path / "asked.log"
    python = root / ".venv" / "bin" / "python"
    python.write_text(WRAPPER.format(log=log, python=sys.executable))
    python.chmod(0o755)

    def asked() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    for _ in range(3):
        assert python_setup(root, python=".venv/bin/python").python == str(python)
    assert asked() == 1
    python.write_text(WRAPPER.format(log=log, python=sys.executable) + "# replaced\n")
    python_setup(root, python=".venv/bin/python")
    assert asked() == 2
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python_setup(root, python=".venv/bin/python")
    assert asked() == 3
