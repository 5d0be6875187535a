"""A fake of the ``opencode`` CLI that behaves like the real one where the coder depends on it.

Like ``opencode run`` (checked against opencode-ai 1.18 on a local model server): it works in
the directory given by ``--dir``, else in ``$PWD`` (never in the process's working directory,
which it ignores), prints one JSON event per line with ``--format json`` (``step_start``,
``text``, ``tool_use``, ``step_finish``, ``error``, in the real shapes), exits 0 when its
permission rules auto-reject a tool call, exits 1 after an unretryable provider error, and
keeps going (silently retrying, or looping on empty replies) on a retryable one.

``OPENCODE_FAKE`` picks the behaviour: ``good`` (default: writes ``greeting.py`` and its
test), ``hang`` (with a child; pids in ``OPENCODE_FAKE_PIDS``), ``silent``, ``crash``,
``snodo`` (edits ``.snodo/protocol.yml``), ``reject`` (a write outside the project,
auto-rejected), ``error401``, ``error500`` (error event, then hangs like the real CLI),
``storm`` (a 429 retried in silence, logged on stderr only with ``--print-logs``),
``loop`` (empty replies forever), ``ansi`` (colour codes on stderr). ``OPENCODE_FAKE_DELAY``
(seconds) makes it slow; ``OPENCODE_FAKE_RECORD`` (a path) receives its argv, cwd and PWD.

``python tests/conformance/fake_opencode.py BIN_DIR`` installs it as ``BIN_DIR/opencode``
(tox's conformance-opencode env does this); the shebang names this interpreter, so the fake
needs nothing else on PATH.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = r"""#!{python}
import json, os, subprocess, sys, time
from pathlib import Path

args = sys.argv[1:]
if args[:1] != ["run"]:
    print("usage: opencode run [--format json] [--dir DIR] [--model M] PROMPT", file=sys.stderr)
    sys.exit(2)
as_json = "--format" in args and args[args.index("--format") + 1] == "json"
target = Path(args[args.index("--dir") + 1]) if "--dir" in args else Path(os.environ.get("PWD") or "/")
if os.environ.get("OPENCODE_FAKE_RECORD"):
    Path(os.environ["OPENCODE_FAKE_RECORD"]).write_text(
        json.dumps({{"argv": args, "cwd": os.getcwd(), "pwd": os.environ.get("PWD")}})
    )
behaviour = os.environ.get("OPENCODE_FAKE", "good")
session = "ses_fake0001"
now = lambda: int(time.time() * 1000)

def emit(kind, **fields):
    if as_json:
        print(json.dumps({{"type": kind, "timestamp": now(), "sessionID": session, **fields}}), flush=True)
    elif kind == "text":
        print(fields["part"]["text"], flush=True)

def step_start(n):
    emit("step_start", part={{"id": f"prt_s{{n}}", "messageID": f"msg_{{n}}", "sessionID": session,
                              "snapshot": "0" * 40, "type": "step-start"}})

def step_finish(n, reason, tokens=(11, 7)):
    inp, out = tokens
    emit("step_finish", part={{"id": f"prt_f{{n}}", "reason": reason, "snapshot": "0" * 40, "messageID": f"msg_{{n}}",
                               "sessionID": session, "type": "step-finish",
                               "tokens": {{"total": inp + out, "input": inp, "output": out, "reasoning": 0,
                                          "cache": {{"write": 0, "read": 0}}}}, "cost": 0.0001}})

def tool(n, name, path, content=None, error=None):
    state = {{"status": "error" if error else "completed", "input": {{"filePath": str(path), "content": content}},
              "time": {{"start": now(), "end": now()}}}}
    if error:
        state["error"] = error
    else:
        state.update(output="Wrote file successfully.", title=path.name, metadata={{"filepath": str(path)}})
    emit("tool_use", part={{"type": "tool", "tool": name, "callID": f"call_{{n}}", "state": state, "id": f"prt_t{{n}}",
                            "sessionID": session, "messageID": f"msg_{{n}}"}})

def text(n, words):
    emit("text", part={{"id": f"prt_x{{n}}", "messageID": f"msg_{{n}}", "sessionID": session, "type": "text",
                        "text": words, "time": {{"start": now(), "end": now()}}}})

def write(n, rel, content):
    path = target / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    tool(n, "write", path, content)

def api_error(status, message, retryable):
    emit("error", error={{"name": "APIError", "data": {{"message": message, "statusCode": status,
                                                    "isRetryable": retryable, "responseBody": "{{}}"}}}})

time.sleep(float(os.environ.get("OPENCODE_FAKE_DELAY", "0")))
if behaviour in ("good", "ansi"):
    if behaviour == "ansi":
        print("\x1b[93m\x1b[1m! \x1b[0mloading \x1b[31mmodels\x1b[0m", file=sys.stderr, flush=True)
    step_start(1)
    write(1, "greeting.py", 'def greet() -> str:\n    return "hello"\n')
    write(1, "tests/test_greeting.py",
          'from greeting import greet\n\n\ndef test_greet() -> None:\n    assert greet() == "hello"\n')
    step_finish(1, "tool-calls")
    step_start(2)
    text(2, "Added greeting.py and tests/test_greeting.py.")
    step_finish(2, "stop")
elif behaviour == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["OPENCODE_FAKE_PIDS"]).write_text(f"{{os.getpid()}} {{child.pid}}")
    n = 0
    while True:
        n += 1
        text(n, "thinking...")
        time.sleep(0.2)
elif behaviour == "silent":
    step_start(1)
    time.sleep(120)
elif behaviour == "crash":
    print("fatal: the runtime could not start", file=sys.stderr, flush=True)
    sys.exit(3)
elif behaviour == "snodo":
    step_start(1)
    write(1, ".snodo/protocol.yml", "protocol_id: hijacked\n")
    step_finish(1, "tool-calls")
    step_start(2)
    text(2, "adjusted the protocol")
    step_finish(2, "stop")
elif behaviour == "reject":
    step_start(1)
    print("\x1b[93m\x1b[1m! \x1b[0mpermission requested: external_directory (/elsewhere/*); auto-rejecting",
          file=sys.stderr, flush=True)
    tool(1, "write", Path("/elsewhere/outside.py"), "x = 1\n",
         error="The user rejected permission to use this specific tool call.")
    step_finish(1, "tool-calls")
    sys.exit(0)
elif behaviour == "error401":
    api_error(401, "Incorrect API key provided", False)
    sys.exit(1)
elif behaviour == "error500":
    api_error(500, "upstream connect error", True)
    time.sleep(120)  # the real CLI lingers after a retryable error
elif behaviour == "storm":
    # opencode-ai 1.18 on a 429/5xx: no JSON event at all, five silent retries over ~90 s;
    # with --print-logs --log-level ERROR it logs each failed request on stderr
    if "--print-logs" in args:
        print('timestamp=2026-01-01T00:00:00.000Z level=ERROR run=fake message="stream error" providerID=local '
              'modelID=test-model error.error="AI_APICallError: error 429"', file=sys.stderr, flush=True)
    time.sleep(120)
elif behaviour == "loop":
    n = 0
    while True:
        n += 1
        step_start(n)
        step_finish(n, "unknown", tokens=(0, 0))
        time.sleep(0.02)
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
