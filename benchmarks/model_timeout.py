"""How close a hung provider ends to the configured timeout, over the real litellm HTTP path.

Starts the tests' local OpenAI-compatible server in "hang" mode and calls it through the
shared model client (plugins/_model.py) with ``timeout`` 2 s and ``max_retries`` 3, streaming
and not. Target: every call ends within timeout + 1 s (the SDK's hidden retries are off and
a timeout is never retried).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/model_timeout.py [--smoke]
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "plugins"))

from model_server import ModelServer
from snodo_plugins import _model

from snodo.errors import EnvironmentProblem

TIMEOUT = 2.0
RUNS = 5


def main() -> None:
    runs = 1 if "--smoke" in sys.argv[1:] else RUNS  # --smoke: one quick iteration (CI)
    # litellm imports its provider modules on the first call: warm up outside the timed region
    with ModelServer([{"content": "warm"}]) as server:
        _model.complete(
            _model.ModelSettings(model="hosted_vllm/bench", api_base=server.base_url),
            [{"role": "user", "content": "hi"}],
        )
    for stream in (False, True):
        times = []
        for _ in range(runs):
            with ModelServer([{"hang": 60}]) as server:
                settings = _model.ModelSettings(
                    model="hosted_vllm/bench", api_base=server.base_url, max_retries=3, stream=stream
                )
                started = time.monotonic()
                with contextlib.suppress(EnvironmentProblem):
                    _model.complete(settings, [{"role": "user", "content": "hi"}], timeout=TIMEOUT)
                times.append(time.monotonic() - started)
        worst = max(times)
        verdict = "target met" if worst <= TIMEOUT + 1 else "target NOT met"
        if runs == 1 and worst > TIMEOUT + 5:
            raise SystemExit(f"smoke: a hung provider took {worst:.1f}s with a {TIMEOUT:.0f}s timeout")
        print(
            f"hang, stream={stream!s:5}  timeout {TIMEOUT:.1f}s  median {statistics.median(times):.2f}s  "
            f"worst {worst:.2f}s  {verdict}  (all: {', '.join(f'{t:.2f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
