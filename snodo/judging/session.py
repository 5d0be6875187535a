"""One pytest session in a judged copy: started isolated, confined, read from its record."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path

from attrs import evolve, frozen

from snodo.process.runner import run_process
from snodo.sandbox import current_policy
from snodo.workspace.pysetup import PythonSetup

from .record import Dishonest, Session, read

BOOT = Path(__file__).resolve().parent / "inproc" / "snodo_judged_pytest.py"
#: Output kept for a person (the verdict never reads it).
MAX_OUTPUT = 400_000


@frozen(kw_only=True)
class Outcome:
    """The session the record proves, or why there is none."""

    session: Session | None
    problem: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    duration: float = 0.0
    tail: str = ""


def run_session(
    copy: Path,
    setup: PythonSetup,
    args: Sequence[str],
    *,
    timeout: float,
    hidden: Sequence[Path] = (),
    checkout: Path | None = None,
    tail: int = 40,
) -> Outcome:
    """Run pytest with ``args`` in ``copy``, confined, the copy its only writable tree."""
    key = secrets.token_bytes(32)
    text: str | None = None
    with tempfile.TemporaryDirectory(prefix="snodo-record-") as scratch:
        record = Path(scratch) / "record"
        record.touch(mode=0o600)
        task = {
            "key": key.hex(),
            "record": str(record),
            "root": str(copy),
            "path": list(setup.pythonpath),
            "modules": list(setup.modules),
            "args": list(args),
            "checkout": str(checkout) if checkout is not None and Path(checkout) != Path(copy) else "",
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_"))}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        policy = current_policy()
        if policy is not None:  # moved onto the copy (unless it is the workspace), the record writable, held-out hidden
            if os.path.realpath(copy) != os.path.realpath(policy.workspace):
                policy = evolve(policy, workspace=copy, read_only=())
            policy = evolve(policy, hidden=(*policy.hidden, *hidden)).with_writable([Path(scratch)])
        result = run_process(
            [setup.python, "-I", "-B", str(BOOT)],
            cwd=copy,
            timeout=timeout,
            env=env,
            stdin_text=json.dumps(task) + "\n",
            sandbox=policy,
            max_output=MAX_OUTPUT,
        )
        with contextlib.suppress(OSError):
            text = record.read_text(encoding="utf-8", errors="replace")
    seen = Outcome(
        session=None,
        exit_code=result.returncode,
        timed_out=result.timed_out,
        duration=result.duration,
        tail=result.tail(tail),
    )
    if result.timed_out:
        return evolve(seen, problem=f"the tests did not finish within {timeout:g} s")
    if text is None:
        return evolve(seen, problem="the test run left no record")
    try:
        return evolve(seen, session=read(text, key, result.returncode))
    except Dishonest as exc:
        return evolve(seen, problem=f"the test run did not report honestly: {exc}")
