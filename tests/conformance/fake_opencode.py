"""A small fake of the ``opencode`` CLI, so the kit can check the opencode coder offline.

It behaves like a well-mannered in-place coder: ``opencode run [...] PROMPT`` writes
``greeting.py`` and its test in the working directory and prints what it did; it never
touches ``.snodo/`` or ``.git/``. ``FAKE_OPENCODE_DELAY`` (seconds) makes it slow, to see
the coder's timeout kill it.

``python tests/conformance/fake_opencode.py BIN_DIR`` installs it as ``BIN_DIR/opencode``
(tox's conformance-opencode env does this); the shebang names this interpreter, so the fake
needs nothing else on PATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = """#!{python}
import os, sys, time
from pathlib import Path

if sys.argv[1:2] != ["run"]:
    print("usage: opencode run [--model M] PROMPT", file=sys.stderr)
    sys.exit(2)
time.sleep(float(os.environ.get("FAKE_OPENCODE_DELAY", "0")))
Path("tests").mkdir(exist_ok=True)
Path("greeting.py").write_text('def greet() -> str:\\n    return "hello"\\n')
Path("tests/test_greeting.py").write_text(
    'from greeting import greet\\n\\n\\ndef test_greet() -> None:\\n    assert greet() == "hello"\\n'
)
print("edited greeting.py and tests/test_greeting.py", flush=True)
"""


def install(bin_dir: Path, python: str = sys.executable) -> Path:
    """Write the fake as ``bin_dir/opencode`` and return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "opencode"
    exe.write_text(SCRIPT.format(python=python))
    exe.chmod(0o755)
    return exe


if __name__ == "__main__":
    print(install(Path(sys.argv[1])))
