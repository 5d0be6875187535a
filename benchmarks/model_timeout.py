"""How close a stuck provider ends to the configured timeout, over the real litellm HTTP path.

Starts the tests' local OpenAI-compatible server and calls it through the shared model client
(plugins/_model.py) with ``timeout`` 2 s and ``max_retries`` 3, in three shapes:

- ``hang``: the server accepts the request and says nothing (plain and streaming);
- ``drip``: a stream that sends one chunk every 1.9 s, so no single read ever times out;
- ``cold``: a hang in a fresh interpreter where litellm is not imported yet (snodo is, as in
  any run): litellm's import (seconds on a loaded machine) comes before the clock, so the
  request is sent and waited for the whole timeout; measured from the request's arrival at
  the server.

Target: every call ends within timeout + 0.5 s of its start, and the cold one's request is
waited for at least timeout - 0.5 s (the deadline is wall-clock, the SDK's hidden retries are
off, a timeout is never retried).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/model_timeout.py [--smoke]

``--smoke``: one run of each shape; exits non-zero only when a call overruns its timeout by
more than 5 s (a noisy CI machine must not fail on the 0.5 s target; the full run judges it).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parents[1] / "tests" / "plugins"
sys.path.insert(0, str(HERE))

from model_server import ModelServer  # noqa: E402  (found through the path set above)

TIMEOUT = 2.0
SLACK = 0.5
RUNS = 5

_COLD = """
import os, sys, time
from snodo_plugins import _model
from snodo_plugins._model_settings import ModelSettings
from snodo.base.errors import EnvironmentProblem
assert "litellm" not in sys.modules  # imported by the call, before its clock starts
settings = ModelSettings(model="hosted_vllm/bench", api_base=sys.argv[1], max_retries=3)
try:
    _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=float(sys.argv[2]))
except EnvironmentProblem:
    pass
print(time.monotonic())  # CLOCK_MONOTONIC: the same clock as the server's in this process
"""


def timed(reply: dict[str, object], stream: bool) -> float:
    from snodo_plugins import _model
    from snodo_plugins._model_settings import ModelSettings

    from snodo.base.errors import EnvironmentProblem

    with ModelServer([reply]) as server:
        settings = ModelSettings(model="hosted_vllm/bench", api_base=server.base_url, max_retries=3, stream=stream)
        started = time.monotonic()
        with contextlib.suppress(EnvironmentProblem):
            _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=TIMEOUT)
        return time.monotonic() - started


def cold() -> float:
    """Seconds from the request's arrival at the server to the end of the call (0: never sent)."""
    with ModelServer([{"hang": 60}]) as server:
        out = subprocess.run(
            [sys.executable, "-c", _COLD, server.base_url, str(TIMEOUT)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        server.hung.set()
        if not server.requests:
            return 0.0
        return float(out.stdout.strip().splitlines()[-1]) - float(server.requests[0]["at"])


def main(smoke: bool) -> int:
    from snodo_plugins import _model
    from snodo_plugins._model_settings import ModelSettings

    # litellm imports its provider modules on the first call: warm up outside the timed region
    with ModelServer([{"content": "warm"}]) as server:
        _model.complete(
            ModelSettings(model="hosted_vllm/bench", api_base=server.base_url), [{"role": "user", "content": "hi"}]
        )
    runs = 1 if smoke else RUNS
    shapes = [
        ("hang, stream=False", lambda: timed({"hang": 60}, False)),
        ("hang, stream=True", lambda: timed({"hang": 60}, True)),
        ("drip 1.9s, stream=True", lambda: timed({"content": "x" * 80, "drip": 1.9}, True)),
        ("cold hang (request waited)", cold),
    ]
    failed = 0
    for name, measure in shapes:
        times = [measure() for _ in range(runs)]
        worst = max(times)
        met = worst <= TIMEOUT + SLACK
        if measure is cold:  # the request must have had (about) the whole timeout
            met = met and min(times) >= TIMEOUT - SLACK
            failed += (min(times) <= 0 or worst > TIMEOUT + 5) if smoke else not met
        else:
            # --smoke runs in CI on a shared machine: it fails only when the bound is plainly gone
            failed += (worst > TIMEOUT + 5) if smoke else not met
        print(
            f"{name:<28} timeout {TIMEOUT:.1f}s  median {statistics.median(times):.2f}s  worst {worst:.2f}s  "
            f"{'target met' if met else 'target NOT met'}  (all: {', '.join(f'{t:.2f}' for t in times)})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main("--smoke" in sys.argv[1:]))
