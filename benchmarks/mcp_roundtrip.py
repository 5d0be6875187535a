"""MCP round trips with a real client from the official SDK against `snodo serve` (stdio).

Measures: server start → initialized, the first `validate_task`, and warm `validate_task`
round trips with a trivial validator (the deterministic `protocol` validator, no
subprocess), next to a warm `list_files` round trip, the cheapest governed call. Then, in
process, how a warm `validate_task` splits between the validators' own work, the runner and
policy, and the durable state writes (audit appends with fsync, the token row).

Targets (issue 5): initialized < 1.2 s, first validate_task < 0.2 s, warm p50 < 5 ms.

    python benchmarks/mcp_roundtrip.py [--calls 100] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

PROTOCOL = """\
protocol_id: bench
name: bench
modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch]
    validators: [scope, tests]
    coder: mock
validators:
  - {validator_id: scope, validator_type: protocol}
  # WF3: a mode holding dispatch needs a post_execute validator (not run by validate_task)
  - {validator_id: tests, validator_type: pytest, evaluation_phase: post_execute}
"""


def pct(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(q * len(samples)))]


async def measure(repo: Path, home: Path, calls: int) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "snodo", "serve"],
        cwd=str(repo),
        env={**os.environ, "SNODO_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        t_init = time.perf_counter() - t0
        t1 = time.perf_counter()
        first = await session.call_tool("validate_task", {"task_id": "t-0", "task_spec": "add a hello module"})
        t_first = time.perf_counter() - t1
        assert not first.is_error, first
        warm: list[float] = []
        for i in range(calls):
            t = time.perf_counter()
            await session.call_tool("validate_task", {"task_id": f"t-{i + 1}", "task_spec": f"add module {i}"})
            warm.append(time.perf_counter() - t)
        base: list[float] = []
        for _ in range(calls):
            t = time.perf_counter()
            await session.call_tool("list_files", {"path": "."})
            base.append(time.perf_counter() - t)
    print(
        f"server start -> initialized        {t_init:8.3f}s   (target < 1.2s: {'met' if t_init < 1.2 else 'NOT met'})"
    )
    print(
        f"first validate_task                {t_first:8.3f}s   (target < 0.2s: {'met' if t_first < 0.2 else 'NOT met'})"
    )
    p50 = statistics.median(warm)
    print(
        f"warm validate_task  p50 {p50 * 1000:7.2f} ms  p90 {pct(warm, 0.9) * 1000:7.2f} ms  (n={calls}, "
        f"target p50 < 5 ms: {'met' if p50 < 0.005 else 'NOT met'})"
    )
    b50 = statistics.median(base)
    print(f"warm list_files     p50 {b50 * 1000:7.2f} ms  p90 {pct(base, 0.9) * 1000:7.2f} ms  (baseline)")
    print(f"validate_task minus baseline: {(p50 - b50) * 1000:.2f} ms per call")


def breakdown(repo: Path, calls: int) -> None:
    """In process: where a warm validate_task's time goes."""
    from snodo.governance.policy import classify
    from snodo.governance.runner import PhaseInput, run_phase
    from snodo.governance.service import Project, validate_task
    from snodo.plugins import get_plugin_manager
    from snodo.protocol import load_protocol

    host = get_plugin_manager()
    project = Project(load_protocol(repo / ".snodo" / "protocol.yml", host), host)
    validate_task(project, spec="add a warm-up module")
    whole, runner, own = [], [], []
    for i in range(calls):
        t = time.perf_counter()
        validate_task(project, spec=f"add module {i} in process")
        whole.append(time.perf_counter() - t)
        inp = PhaseInput(
            protocol=project.protocol,
            mode=project.mode,
            phase="pre_execute",
            task_id=f"r{i}",
            task_spec=f"add module {i}",
            workspace=repo,
        )
        t = time.perf_counter()
        results = run_phase(host, inp)
        classify(results, policy=project.protocol.disagreement_policy)
        runner.append(time.perf_counter() - t)
        own.append(sum(r.duration for r in results))
    w, r, o = (statistics.median(x) * 1000 for x in (whole, runner, own))
    print(
        f"in process, p50: validate_task {w:.2f} ms = validators' own work {o:.2f} ms + runner and policy "
        f"{r - o:.2f} ms + session, token and audit writes {w - r:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="one quick iteration (CI); fails on any error")
    args = parser.parse_args()
    if args.smoke:
        args.calls = 2
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        (repo / ".snodo").mkdir()
        (repo / ".snodo" / "protocol.yml").write_text(PROTOCOL)
        os.environ["SNODO_HOME"] = str(Path(tmp) / "home")
        anyio.run(measure, repo, Path(tmp) / "home", args.calls)
        breakdown(repo, args.calls)


if __name__ == "__main__":
    main()
