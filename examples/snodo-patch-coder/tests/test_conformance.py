"""The snodo conformance kit against the installed ``patch`` coder, exactly as an author runs it:
``pytest -p snodo_conformance.plugin --snodo-coder patch`` in an empty directory. The coder
is found through its entry point, so this also proves the packaging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_installed_patch_coder_passes_the_kit(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "snodo_conformance.plugin",
            "--snodo-coder",
            "patch",
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
