"""What a fresh install costs: the base distribution against the full one (``[all]``).

The base (``pip install snodo-governance``) is what ``init``, ``protocol check``,
``validate``, ``run --mock``, ``serve``, ``authorize`` and ``verify`` need; the model stack
(litellm and everything it pulls) comes with the ``model`` extra. For each, a new venv gets
``pip install`` of a wheel built once from this checkout, its dependencies from the package
index through pip's cache (as a CI job with a cache has them); measured: wall time of the
install, size of the venv's site-packages, number of distributions. The base venv then runs
the governed life cycle without a model stack: ``snodo demo`` (the quick start: a governed
run, ``serve`` over MCP, a decision) and ``snodo verify`` of a governed run's commit. Where
pipx is installed, ``pipx install`` of the same wheel is timed too, and its ``snodo`` run.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/install_size.py [--smoke]

Target (issue 43): the base installs in under 30 s and 80 MB here.

``--smoke`` (no venv, no network): the extras in pyproject.toml put litellm in ``model`` only,
and the dependency closure of the installed base, read from this environment's metadata,
holds no model-stack distribution; prints that closure's size as installed here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIST = "snodo-governance"
#: Distributions only model access needs: none may be in the base's closure.
MODEL_STACK = {"litellm", "openai", "tiktoken", "tokenizers", "huggingface-hub", "aiohttp"}
TARGET_SECONDS, TARGET_MB = 30.0, 80.0


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, extras: tuple[str, ...] = ()) -> set[str]:
    """``root`` and every distribution its requirements (with ``extras``) pull, as installed here."""
    from packaging.requirements import Requirement

    names: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        key = canonical(dist.metadata["Name"])
        if (key, wanted) in visited:
            continue
        visited.add((key, wanted))
        names.add(key)
        for line in dist.requires or ():
            req = Requirement(line)
            environments = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((req.name, frozenset(req.extras)))
    return names


def installed_mb(names: set[str]) -> float:
    """What ``names`` occupy on disk in this environment (their RECORD's files)."""
    total = 0
    for name in names:
        try:
            files = metadata.distribution(name).files or ()
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            try:
                total += Path(str(f.locate())).stat().st_size
            except OSError:
                continue
    return total / 2**20


def smoke() -> int:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base_names = {canonical(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    problems = []
    if project["name"] != DIST:
        problems.append(f"the distribution is {project['name']!r}, not {DIST!r}")
    if base_names & MODEL_STACK:
        problems.append(f"the base requires {sorted(base_names & MODEL_STACK)}")
    if not any(r.startswith("litellm") for r in extras.get("model", ())):
        problems.append("the model extra does not bring litellm")
    base = closure(DIST)
    full = closure(DIST, ("all",))
    if base & MODEL_STACK:
        problems.append(f"the installed base pulls {sorted(base & MODEL_STACK)}")
    if "litellm" not in full:
        problems.append("[all] does not pull litellm here")
    print(f"base closure (installed here)  {len(base):3d} distributions  {installed_mb(base):7.1f} MB")
    print(f"full closure [all]             {len(full):3d} distributions  {installed_mb(full):7.1f} MB")
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def fresh_install(tmp: Path, label: str, requirement: str) -> tuple[float, float, int, Path]:
    """(seconds, site-packages MB, distributions) of ``pip install requirement`` into a new venv."""
    venv = tmp / label
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # a current pip, as CI images and the README's quick start have (the venv's bundled one
    # can be years older and much slower to resolve); not timed
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-U", "pip"],
        check=True,
        capture_output=True,
    )
    empty = du_mb(site)  # pip (and setuptools) of the bare venv, not the install's
    before = {p.name for p in site.glob("*.dist-info")}
    started = time.perf_counter()
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pip install {requirement} failed:\n{done.stderr[-2000:]}")
    added = {p.name for p in site.glob("*.dist-info")} - before
    return seconds, du_mb(site) - empty, len(added), venv


def life_cycle(venv: Path, tmp: Path) -> list[str]:
    """The base venv runs the quick start and the merge gate with no model stack: failures, if any."""
    env = {**os.environ, "SNODO_HOME": str(tmp / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "200"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env.pop("PYTHONPATH", None)
    failed = []
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import litellm"], capture_output=True, env=env).returncode == 0:
        failed.append("litellm is importable in the base venv")
    demo = subprocess.run(["snodo", "demo", "--dir", str(tmp / "demo")], env=env, capture_output=True, text=True)
    if demo.returncode != 0 or "demo complete" not in demo.stdout:
        failed.append(f"snodo demo exited {demo.returncode}: {(demo.stdout + demo.stderr)[-800:]}")
    repo = tmp / "repo"
    repo.mkdir()

    def sh(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), cwd=repo, env=env, capture_output=True, text=True)

    sh("git", "init", "-q", "-b", "main")
    sh("git", "config", "user.email", "bench@example.com")
    sh("git", "config", "user.name", "bench")
    sh("snodo", "init", "--template", "solo")
    (repo / ".snodo" / "allowed_signers").write_text(sh("snodo", "keys", "show", "--name", "bench").stdout)
    sh("git", "add", ".snodo")
    sh("git", "commit", "-q", "-m", "protocol")
    run = sh("snodo", "run", "add a hello module", "--mock", "--json")
    branch = next((ln.split('"')[3] for ln in run.stdout.splitlines() if ln.strip().startswith('"branch"')), None)
    verify = sh("snodo", "verify", f"main..{branch}") if branch else None
    if verify is None or verify.returncode != 0:
        failed.append(f"run --mock then verify failed: {run.stdout[-400:]} {verify.stdout if verify else ''}")
    return failed


def full() -> int:
    with tempfile.TemporaryDirectory(prefix="snodo-install-") as raw:
        tmp = Path(raw)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "wheel"), str(REPO)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wheel = next((tmp / "wheel").glob("snodo_governance-*.whl"))
        # one warm-up install fills pip's cache with every wheel both measured installs use
        fresh_install(tmp, "warm", f"{wheel}[all]")
        shutil.rmtree(tmp / "warm")
        rows = []
        for label, requirement in (("base", str(wheel)), ("full [all]", f"{wheel}[all]")):
            seconds, mb, count, venv = fresh_install(tmp, label.split()[0], requirement)
            rows.append((label, seconds, mb, count, venv))
            print(f"{label:<12} install {seconds:6.1f}s  site-packages {mb:7.1f} MB  {count:3d} distributions")
        _, seconds, mb, _, base_venv = rows[0]
        met = seconds < TARGET_SECONDS and mb < TARGET_MB
        print(f"base target (< {TARGET_SECONDS:g} s, < {TARGET_MB:g} MB): {'met' if met else 'NOT met'}")
        failed = life_cycle(base_venv, tmp)
        print("base venv: snodo demo, run --mock and verify " + ("work" if not failed else "FAILED"))
        for line in failed:
            print(f"  {line}")
        piped = pipx(tmp, wheel)
        return 1 if failed or not met or piped is False else 0


def pipx(tmp: Path, wheel: Path) -> bool | None:
    """``pipx install`` of the wheel into a private pipx home: whether its ``snodo`` runs (None: no pipx)."""
    if subprocess.run([sys.executable, "-m", "pipx", "--version"], capture_output=True).returncode != 0:
        print("pipx: not installed here, not measured")
        return None
    env = {**os.environ, "PIPX_HOME": str(tmp / "pipx"), "PIPX_BIN_DIR": str(tmp / "pipx-bin")}
    env.pop("PYTHONPATH", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipx", "install", str(wheel)], env=env, capture_output=True)
    seconds = time.perf_counter() - started
    version = subprocess.run(
        [str(tmp / "pipx-bin" / "snodo"), "--version"], env=env, capture_output=True, text=True, check=False
    )
    ok = done.returncode == 0 and version.returncode == 0 and "0." in version.stdout
    print(f"pipx install {seconds:6.1f}s  `snodo --version`: {version.stdout.strip() or version.stderr[-200:]}")
    return ok


if __name__ == "__main__":
    sys.exit(smoke() if "--smoke" in sys.argv[1:] else full())
