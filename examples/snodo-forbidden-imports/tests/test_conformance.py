"""The snodo conformance kit against the installed ``forbidden-imports`` validator, exactly as an
author runs it: ``pytest -p snodo_conformance.plugin --snodo-validator forbidden-imports`` in an
empty directory, with the tooling it needs. The type is found through its entry point, so this
also proves the packaging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CONFIG = {"tooling": {"forbidden": ["subprocess"]}}


def test_the_installed_validator_passes_the_kit(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "snodo_conformance.plugin",
            "--snodo-validator",
            "forbidden-imports",
            "--snodo-validator-config",
            json.dumps(CONFIG),
            "-p",
            "no:cacheprovider",
            "-W",
            "error",
            "-rs",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout and "failed" not in proc.stdout
