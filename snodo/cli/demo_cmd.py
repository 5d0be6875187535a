"""``snodo demo``: the whole life cycle in a throwaway repository; each step runs the real
command as a subprocess, so the demo proves the installation too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.markup import escape

from snodo.base.errors import PathValidationError
from snodo.cli.common import dir_option, json_option
from snodo.cli.output import console, emit_json, err_console
from snodo.git.runner import git_out

FRIENDLY = """Add a greeting module.

Acceptance criteria:
- the greeting sounds friendly
"""


@click.command()
@dir_option("directory", "Where to create the throwaway repository (default: a new temp dir).")
@click.option("--keep", is_flag=True, help="Keep the repository afterwards to explore it.")
@json_option
def demo(directory: Path | None, keep: bool, as_json: bool) -> None:
    """Walk init → governed run → escalation → authorize → re-validation → refused
    .snodo/ write → audit verify, in a throwaway git repository, explaining each step."""
    out = err_console() if as_json else console()  # with --json the walk-through is progress
    base = Path(tempfile.mkdtemp(prefix="snodo-demo-")) if directory is None else directory.resolve()
    repo = base / "project"
    home = base / "snodo-home"
    repo.mkdir(parents=True, exist_ok=False)
    # each step renders at this terminal's width, and is printed as it came (not wrapped again)
    env = {**os.environ, "SNODO_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": str(out.width)}
    started = time.monotonic()
    step_no = 0

    def say(title: str, text: str) -> None:
        nonlocal step_no
        step_no += 1
        out.rule(f"[bold]{step_no}. {title}")
        out.print(text)

    def snodo(*args: str, stdin: str | None = None, expect: int = 0) -> subprocess.CompletedProcess[str]:
        shown = " ".join(a if " " not in a else repr(a) for a in args)
        out.print(f"[bold cyan]$ snodo {escape(shown)}[/]")
        proc = subprocess.run(
            [sys.executable, "-I", "-m", "snodo", *args],  # -I: the project is not on sys.path
            cwd=repo,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if "--json" not in args and proc.stdout.strip():
            out.print(escape(proc.stdout.rstrip()), soft_wrap=True)
        if proc.returncode != expect:
            out.print(escape(proc.stderr), soft_wrap=True)
            raise click.ClickException(f"demo step `snodo {shown}` exited {proc.returncode}, expected {expect}")
        return proc

    git_out(repo, "init", "-q", "-b", "main")
    git_out(repo, "config", "user.email", "demo@example.com")
    git_out(repo, "config", "user.name", "Demo")
    (repo / "README.md").write_text("# demo project\n")
    git_out(repo, "add", "README.md")
    git_out(repo, "commit", "-q", "-m", "initial commit")

    say(
        "A repository under governance",
        f"A throwaway git repository at {repo}.\n`snodo init` writes the protocol: modes, capabilities, "
        "validators and how their verdicts combine. It commits nothing.",
    )
    snodo("init", "--template", "solo")
    snodo("protocol", "check")

    say(
        "A governed run (mock coder, real validators)",
        "The pre-execute validators judge the task; a pass issues a single-use token that the engine "
        "consumes right before the coder runs. The mock coder stands in for a model (no API key); the "
        "post-execute validators then really run pytest on the result, on a task branch in a separate "
        "working copy — your checkout is never switched.",
    )
    run = snodo("run", "add a hello module", "--mock", "--json")
    result = json.loads(run.stdout)
    out.print(f"completed: {', '.join(result['files'])} committed on [bold]{result['branch']}[/]")

    say(
        "An escalation",
        "This spec has an acceptance criterion no program can check ('sounds friendly'). Judging the "
        "work after it is done (`--phase post_execute`), the acceptance validator will not pretend: it "
        "warns, the policy withholds approval, and the outcome is `escalate` — a pending decision for a human.",
    )
    esc = json.loads(snodo("validate", "-", "--phase", "post_execute", "--json", stdin=FRIENDLY, expect=2).stdout)
    decision_id = esc["decision_id"]
    out.print(f"status [yellow]{esc['status']}[/], decision {decision_id}\n{escape(esc['instruction'])}")

    say(
        "A human decides, out of band",
        "No agent tool can authorise anything. A person runs `snodo authorize`, sees the stored proposal "
        "(not text an agent supplied) and signs a decision record with their Ed25519 key.",
    )
    snodo("authorize", decision_id, "--yes", "-m", "friendly enough for a demo")

    say("Validate again", "The signed decision counts for exactly this task, this spec and the validator that warned.")
    again = json.loads(snodo("validate", "-", "--phase", "post_execute", "--json", stdin=FRIENDLY).stdout)
    out.print(
        f"status [green]{again['status']}[/]; adjudicated by a human: {', '.join(again['policy']['adjudicated'])}"
    )

    say(
        "Governance state is out of an agent's reach",
        "Every tool-surface write goes through one path guard. An agent calling write_file on the "
        "protocol — however it spells the path — is refused, and the refusal is audited.",
    )
    _refused_write(repo, home, out)

    say(
        "The audit log proves nothing was altered",
        "Every step above is a line in .git/snodo/audit.log, each hashing the one before it.",
    )
    snodo("audit", "verify")
    out.rule()
    out.print(
        f"[bold green]demo complete[/] in {time.monotonic() - started:.1f}s. Next: `snodo init` in your own repository."
    )
    if keep:
        out.print(f"kept {base} (SNODO_HOME={home}); explore it with `cd {repo} && SNODO_HOME={home} snodo audit show`")
    elif directory is None:
        shutil.rmtree(base, ignore_errors=True)
    else:  # never delete a directory the user named, only what the demo made in it
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    if as_json:
        emit_json(
            {
                "completed": True,
                "steps": step_no,
                "seconds": round(time.monotonic() - started, 1),
                "kept": str(base) if keep else None,
            }
        )


def _refused_write(repo: Path, home: Path, out: object) -> None:
    from snodo.protocol import find_protocol, read_protocol_file  # noqa: PLC0415 only the refused-write step loads the guard
    from snodo.state.audit import AuditLog  # noqa: PLC0415 only the refused-write step loads the guard
    from snodo.state.runtime import audit_log_path  # noqa: PLC0415 only the refused-write step loads the guard
    from snodo.workspace import PathGuard, Workspace  # noqa: PLC0415 only the refused-write step loads the guard

    protocol = read_protocol_file(find_protocol(repo))
    ws = Workspace(repo, PathGuard(repo, protocol.protected_paths))
    audit = AuditLog(audit_log_path(repo), home=home)  # the demo's home holds its audit key
    before = (repo / ".snodo" / "protocol.yml").read_bytes()
    for spelling in (".snodo/protocol.yml", "./src/../.SNODO/protocol.yml", str(repo / ".snodo" / "protocol.yml")):
        try:
            ws.write_file(spelling, "modes: []  # an agent trying to loosen its own rules\n")
        except PathValidationError as exc:
            audit.append(
                "path_refused",
                mode="producer",
                data={"path": spelling, "tool": "write_file", "reason": exc.reason, "source": "demo"},
            )
            out.print(f"[red]refused[/] write_file({escape(spelling)!r}): {escape(exc.reason)}")  # type: ignore[attr-defined]
        else:  # pragma: no cover - would be a governance failure
            raise click.ClickException(f"the guard let {spelling!r} through")
    assert (repo / ".snodo" / "protocol.yml").read_bytes() == before
    out.print("the protocol file is byte-for-byte unchanged")  # type: ignore[attr-defined]
