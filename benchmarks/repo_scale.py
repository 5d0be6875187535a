"""A governed run on a large repository against the same run on a small one (issue 27).

Builds two repositories with ``git fast-import`` (plumbing: no file is written by Python,
the user's checkout is made by one ``git reset --hard``): a small one (30 files) and a large
one (``--files``, default 30,000). The layout is a real project's (``--layout nested``, the
default): 15 files per directory, directories nested three levels with ten subdirectories
each (``pkg<n>/m<n>/d<n>/``: ~2,200 directories for 30,000 files); ``--layout flat`` is the
earlier one, 100 files per directory (330 directories), which hides the cost of a walk per
directory. Both get the same protocol: the mock coder and validators that run ``true``.
Each repository gets one warm-up run per installation (the first run makes the pooled
working copy), then runs alternate between them and the medians are compared.

``--other PYTHON`` (repeatable) measures another installation's ``snodo`` (e.g. main's
venv) on the same repositories in the same run, alternating with this one (each with a home
of its own), and prints every ratio side by side.

``--protected`` adds ``protected_paths: ["**/secrets/**", "**/*.lock"]`` with a
``secrets/`` directory and a ``poetry.lock`` in every tenth top-level package (1,500 files
each; 1,000 flat), and makes the
post_execute validator try to write them, create a file among them and rename their parent
(all must fail: the run completes only if they stay read-only, confined).

Target: the large repository's median is at most 1.5x the small one's (wall time). The CPU
time of each run (snodo and the children it waited for) is printed beside it: it swings
less with the machine's load, and shows the work a second core absorbed.

    python benchmarks/repo_scale.py [--files 30000] [--runs 5] [--layout nested|flat]
        [--other PYTHON] [--protected] [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import compile_bytecode

TARGET = 1.5
#: files per directory: ``nested`` as in real repositories (10-20), ``flat`` as before
PER_DIR = {"nested": 15, "flat": 100}
#: ``flat``: files per top-level package
PER_PACKAGE = 1000
#: ``nested``: subdirectories per directory (three levels below the top)
FAN_OUT = 10
#: One package in this many gets a ``secrets/`` directory and a ``poetry.lock`` (each is a
#: bind mount of its own, and so is its parent: see docs/security.md on the mount bound).
PROTECTED_EVERY = 10

PROTOCOL = """\
protocol_id: bench
name: bench
{protected}modes:
  - mode_id: producer
    tools: [read, edit, validate, dispatch, commit]
    validators: [pre, post]
    coder: mock
validators:
  - {{validator_id: pre, validator_type: command, tooling: {{command: "true"}}}}
  - {{validator_id: post, validator_type: command, evaluation_phase: post_execute, tooling: {{command: "{post}"}}}}
"""

#: The post_execute check of ``--protected``: every write to a protected path must fail.
CHECK = """\
for f in pkg0/secrets/key.txt pkg0/poetry.lock; do
  [ -e "$f" ] || { echo "MISSING $f"; exit 1; }
  if (echo x >> "$f") 2>/dev/null; then echo "WROTE $f"; exit 1; fi
done
if (echo x > pkg0/secrets/new.txt) 2>/dev/null; then echo "CREATED pkg0/secrets/new.txt"; exit 1; fi
if mv pkg0 pkg0.orig 2>/dev/null; then echo "RENAMED pkg0"; exit 1; fi
echo ok > scratch.txt && rm scratch.txt || { echo "workspace not writable"; exit 1; }
echo "protected paths are read-only"
"""


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, input=stdin)


def file_path(i: int, layout: str) -> str:
    """Where file ``i`` goes: ``pkg<p>/m<m>/d<d>/f<i>.txt`` (``nested``) or
    ``pkg<p>/d<d>/f<i>.txt`` (``flat``); either way ``pkg<p>`` is its top-level package."""
    leaf = i // PER_DIR[layout]
    if layout == "flat":
        return f"pkg{i // PER_PACKAGE}/d{leaf % (PER_PACKAGE // PER_DIR['flat'])}/f{i}.txt"
    return f"pkg{leaf // FAN_OUT**2}/m{leaf // FAN_OUT % FAN_OUT}/d{leaf % FAN_OUT}/f{i}.txt"


def packages(files: int, layout: str) -> int:
    """How many top-level packages ``files`` files make."""
    return len({file_path(i, layout).split("/", 1)[0] for i in range(0, files, PER_DIR[layout])})


def build(repo: Path, files: int, *, protected: bool, layout: str = "nested") -> None:
    """A repository of ``files`` small distinct files, one commit, checked out."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.com")
    _git(repo, "config", "user.name", "bench")
    extra: dict[str, bytes] = {"README.md": b"bench\n"}
    if protected:
        spec = 'protected_paths: ["**/secrets/**", "**/*.lock"]\n'
        extra[".snodo/protocol.yml"] = PROTOCOL.format(protected=spec, post="sh check.sh").encode()
        extra["check.sh"] = CHECK.encode()
        for pkg in range(0, packages(files, layout), PROTECTED_EVERY):
            extra[f"pkg{pkg}/secrets/key.txt"] = b"not a real key\n"
            extra[f"pkg{pkg}/poetry.lock"] = b"# lock\n"
    else:
        extra[".snodo/protocol.yml"] = PROTOCOL.format(protected="", post="true").encode()
    chunks: list[bytes] = []
    paths: list[tuple[str, int]] = []
    for i in range(files):
        data = f"file {i}\n".encode()
        chunks.append(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(data), data))
        paths.append((file_path(i, layout), i + 1))
    for n, (name, data) in enumerate(extra.items(), start=files + 1):
        chunks.append(b"blob\nmark :%d\ndata %d\n%s\n" % (n, len(data), data))
        paths.append((name, n))
    message = b"bench repository"
    chunks.append(
        b"commit refs/heads/main\ncommitter bench <bench@example.com> 1700000000 +0000\ndata %d\n%s\n"
        % (len(message), message)
    )
    chunks.extend(b"M 100644 :%d %s\n" % (mark, name.encode()) for name, mark in paths)
    _git(repo, "fast-import", "--quiet", stdin=b"".join(chunks) + b"\n")
    _git(repo, "reset", "-q", "--hard", "main")
    settle_index(repo)


def settle_index(repo: Path) -> None:
    """Leave the checkout's index as a user's is once their own git has looked at it.

    ``reset --hard`` writes the files and the index in the same second, so git must take
    each such entry for "racily clean" and read the file's content to compare, every time.
    The user's first ``git status`` (or any command that refreshes the index) records
    that they match. snodo reads the checkout with ``--no-optional-locks`` and never writes
    its index, so without this every run of the benchmark re-read all 30,000 files of the
    checkout (~0.2 s of CPU here), which a user's checkout does not make it do.
    """
    index = repo / ".git" / "index"
    while int(time.time()) <= int(index.stat().st_mtime):
        time.sleep(0.05)
    _git(repo, "update-index", "-q", "--refresh")


#: The run's steps, each ending with the first progress line starting with the marker
#: (the last ends with the process): where a run's time goes, side by side.
STEPS = (
    ("startup + protocol", "project interpreter"),
    ("working copy", "working copy"),
    ("pre_execute", "coder "),
    ("coder + commit", "post_execute validation"),
    ("post_execute", None),
    ("branch + notes + exit", ""),
)


def governed_run(
    repo: Path, env: dict[str, str], n: int, python: str = sys.executable
) -> tuple[float, dict[str, float], float]:
    """One ``snodo run`` by ``python``: its wall time, each step's (progress lines stamped as
    they come) and the CPU time (user + system) of the process and the children it waited for."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [python, "-I", "-m", "snodo", "run", f"add a hello module number {n}", "--json"],
            cwd=repo,
            env={**env, "COLUMNS": "1000"},
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        stamps = [(time.perf_counter(), line.split("·", 1)[-1].strip()) for line in proc.stderr]
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = {}
    if payload.get("status") != "completed":
        shown = json.dumps({k: payload.get(k) for k in ("status", "outcome", "message", "validators")})[:2000]
        raise SystemExit(f"run on {repo.name} did not complete: {shown}\n" + "\n".join(m for _, m in stamps[-20:]))
    return elapsed, _steps(started, stamps, started + elapsed), usage.ru_utime + usage.ru_stime


def _steps(started: float, stamps: list[tuple[float, str]], ended: float) -> dict[str, float]:
    steps: dict[str, float] = {}
    at = started
    for name, marker in STEPS:
        if marker is None:  # post_execute ends with its last progress line
            end = stamps[-1][0] if stamps else at
        elif marker == "":
            end = ended
        else:
            end = next((t for t, msg in stamps if msg.startswith(marker) and t >= at), at)
        steps[name], at = max(0.0, end - at), max(at, end)
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=30_000)
    parser.add_argument("--small", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--layout", choices=sorted(PER_DIR), default="nested")
    parser.add_argument(
        "--other",
        action="append",
        default=[],
        help="another installation's Python, measured alongside (e.g. main's venv); may be repeated",
    )
    parser.add_argument("--protected", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="2,000 files, one run each, no target")
    parser.add_argument("--keep", type=Path, help="build in (and reuse) this directory instead of a temporary one")
    args = parser.parse_args()
    compile_bytecode()  # as an installed snodo has it (see _common.compile_bytecode)
    if args.smoke:
        args.files, args.runs = 2_000, 1
    others = {f"other{n}" if len(args.other) > 1 else "other": python for n, python in enumerate(args.other, 1)}
    sides = {"ours": sys.executable, **others}
    with contextlib.ExitStack() as stack:
        root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        envs = {
            side: {**os.environ, "SNODO_HOME": str(root / f"home-{side}"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            for side in sides
        }
        repos = {}
        for label, count in (("small", args.small), ("large", args.files)):
            started = time.perf_counter()
            name = f"{label}-{args.layout}{'-protected' if args.protected else ''}"
            if (root / name).is_dir():  # --keep: built by an earlier invocation
                repos[label] = root / name
                continue
            build(root / name, count, protected=args.protected, layout=args.layout)
            dirs = int(
                subprocess.run(
                    ["find", str(root / name), "-path", "*/.git", "-prune", "-o", "-type", "d", "-print"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.count("\n")
            )
            print(
                f"built {label:<5} {count:>8} files in {dirs:>6} directories ({args.layout}) in "
                f"{time.perf_counter() - started:6.1f}s",
                flush=True,
            )
            repos[label] = root / name
        series = [(side, label) for label in repos for side in sides]
        for side, label in series:  # warm-up: makes each project's pooled copy
            own_keys = root / "home-ours" / "keys"
            if side != "ours" and own_keys.is_dir() and not (root / f"home-{side}" / "keys").exists():
                # one identity (the project's audit log is signed by it), a pool of its own
                shutil.copytree(own_keys, root / f"home-{side}" / "keys")
            print(
                f"warm-up {side:<5} {label:<5} {governed_run(repos[label], envs[side], 0, sides[side])[0]:8.3f}s",
                flush=True,
            )
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in series}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in series}
        steps: dict[tuple[str, str], dict[str, list[float]]] = {key: {name: [] for name, _ in STEPS} for key in series}
        for n in range(1, args.runs + 1):  # alternating: the machine's load falls on every series alike
            for side, label in series:
                elapsed, parts, used = governed_run(repos[label], envs[side], n, sides[side])
                samples[side, label].append(elapsed)
                cpu[side, label].append(used)
                for name, seconds in parts.items():
                    steps[side, label][name].append(seconds)
        ratios = {}
        for side, python in sides.items():
            print(f"== {side}: {python}")
            medians = {label: statistics.median(samples[side, label]) for label in repos}
            for label in repos:
                s = samples[side, label]
                count = args.small if label == "small" else args.files
                spread = f"min {min(s):7.3f}s  max {max(s):7.3f}s"
                print(f"governed run, {count:>8} files   median {medians[label]:7.3f}s  {spread}")
            extra = medians["large"] - medians["small"]
            print(f"{'step (medians)':<24}{'small':>9}{'large':>9}{'large-small':>13}  share of the difference")
            for name, _ in STEPS:
                small, large = (statistics.median(steps[side, label][name]) for label in ("small", "large"))
                share = f"{100 * (large - small) / extra:5.0f}%" if extra > 0 else "    -"
                print(f"{name:<24}{small:9.3f}{large:9.3f}{large - small:+13.3f}  {share}")
            cpu_small, cpu_large = (statistics.median(cpu[side, label]) for label in ("small", "large"))
            # the target is wall time; CPU time swings less with the machine's load (not with its clock)
            print(f"cpu time (medians): {cpu_small:.3f}s vs {cpu_large:.3f}s, x{cpu_large / cpu_small:.2f}")
            ratios[side] = medians["large"] / medians["small"]
        load = os.getloadavg()[0]
        print(f"== {args.files} vs {args.small} files, {args.layout} layout, {args.runs} runs, load {load:.1f}")
        for side, ratio in ratios.items():
            met = "target met" if ratio <= TARGET else "target NOT met"
            print(f"{side:<6} large / small = x{ratio:.2f}  (target <= x{TARGET})  {met}")
        if args.protected:
            print("protected paths: read-only in every run (the post_execute check passed)")
        return 0 if ratios["ours"] <= TARGET or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
