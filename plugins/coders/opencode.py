"""The ``opencode`` coder: drives the opencode CLI, which edits the workspace itself.

It declares ``writes_in_place``: the engine snapshots the tree around the run and halts on
any ``.snodo/`` change, so this coder reports what happened and hides nothing. It declares
``needs_network`` too: the engine confines it with network allowed, for the provider.

The real CLI works in the directory named by ``--dir``, else in ``$PWD`` — not in the
process's working directory — so both are set to the workspace. It runs with
``--format json`` and its event stream (``step_start``, ``text``, ``tool_use``,
``step_finish``, ``error``) is read for the summary, the tool calls, permission
rejections (the CLI auto-rejects and still exits 0), provider errors and token usage.
Terminal control sequences are stripped from everything it prints.

Failures are the environment's, never a verdict on the work (``EnvironmentProblem``): the
CLI missing, hung, silent, crashed, a provider error (with the provider's own message), a
run that only had its tool calls rejected, or a loop of model requests that produce nothing.
The CLI retries a rate limit or a 5xx on its own, up to five times over about a minute and
a half, and says nothing on its JSON stream meanwhile (opencode-ai 1.18: the retry count is
built in, not configurable). So it runs with ``--print-logs --log-level ERROR``: its first
``stream error`` log line (the provider's failed request) ends the run at once, well inside
``timeout``. The run is also bounded by a number of model requests (``max_requests``) and a
stall detector (empty replies in a row), not only by time; the process group is killed when
any bound is hit. Token usage (``step_finish`` events: tokens and cost) is reported even
when the run fails, on the exception (the engine records it as ``coder_usage``).

Settings (``coder_config``): ``model`` (passed as ``--model``), ``timeout`` (seconds;
default the engine's), ``silence_timeout`` (seconds without output), ``max_requests``
(model requests per run, default 50), ``extra_args`` (a list inserted before the prompt),
``env`` (names of inherited variables opencode needs: its sandbox's environment is an
allowlist; ``OPENCODE_*`` and ``<PROVIDER>_API_KEY`` of ``--model provider/name`` pass
without it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from snodo.api import (
    CoderCapabilities,
    CoderRequest,
    CoderResult,
    CoderSpec,
    EnvironmentProblem,
    RequiredProgram,
    Setting,
    hookimpl,
    run_process,
)

from .._model import carry_usage
from .._model_settings import strip_control
from ._config import CoderConfig
from ._prompt import task_prompt

SETTINGS = (
    Setting("model", "text"),
    Setting("timeout", "seconds"),
    Setting("silence_timeout", "seconds"),
    Setting("max_requests", "integer"),
    Setting("extra_args", "strings"),
    Setting("env", "strings"),
)
PROGRAM = RequiredProgram(name="opencode", install_hint="npm install -g opencode-ai")
DEFAULT_MAX_REQUESTS = 50
EMPTY_REPLIES_IN_A_ROW = 3  # model requests with no output, no tool call and no tokens: a stall
#: opencode's log line for a failed provider request (``--print-logs --log-level ERROR``)
_STREAM_ERROR = re.compile(r'level=ERROR .*message="stream error".*?error\.error=(?:"((?:[^"\\]|\\.)*)"|(\S+))')
EDIT_TOOLS = frozenset({"write", "edit", "patch", "multiedit", "apply_patch"})


#: opencode's own state, copied into the run's private directory (never written back): the
#: credentials `opencode auth login` stored, the provider packages it has cached, and the
#: user's global configuration (providers, models): a confined process has a private HOME,
#: so without the copy a confined opencode would know none of the user's providers.
_CARRIED = (
    ("XDG_DATA_HOME", ".local/share", "opencode/auth.json"),
    ("XDG_CACHE_HOME", ".cache", "opencode"),
    ("XDG_CONFIG_HOME", ".config", "opencode"),
)


def private_state(state: Path) -> dict[str, str]:
    """XDG directories for one opencode run, under ``state``.

    Confined, everything outside the workspace is read-only, so opencode cannot keep its
    database, logs and caches in the user's home; and an agent driving it must not be able
    to plant anything there that a later, unconfined opencode would run. So each run gets its
    own directories (made writable in the sandbox), seeded with copies of the credentials
    and the provider-package cache, and thrown away afterwards.
    """
    env: dict[str, str] = {}
    for var, default, _carried in (*_CARRIED, ("XDG_STATE_HOME", ".local/state", "")):
        target = state / default
        target.mkdir(parents=True, exist_ok=True)
        env[var] = str(target)
    for var, default, carried in _CARRIED:
        source = Path(os.environ.get(var) or Path.home() / default) / carried
        with contextlib.suppress(OSError, shutil.Error):
            if source.is_dir():
                shutil.copytree(source, state / default / carried, symlinks=True)
            elif source.is_file():
                (state / default / carried).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, state / default / carried)
    return env


class Events:
    """What the CLI's ``--format json`` stream said, read one line at a time."""

    def __init__(self, max_requests: int) -> None:
        self.max_requests = max_requests
        self.texts: list[str] = []
        self.tools: list[dict[str, str]] = []
        self.rejected: list[str] = []
        self.errors: list[str] = []
        self.requests = 0
        self.empty_in_a_row = 0
        self.usage: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0}
        self.cost = 0.0
        self.stop_reason: str | None = None

    def read(self, raw: str) -> str | None:
        """Take one output line; returns a readable line for the job log (or None to skip)."""
        line = strip_control(raw).strip()
        if not line:
            return None
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            failed = _STREAM_ERROR.search(line)
            if failed:  # its log line for a failed provider request: it would retry in silence
                self.errors.append(failed.group(1) or failed.group(2) or "stream error")
                self.stop_reason = self.stop_reason or "error"
                return f"error: {self.errors[-1]}"
            if "auto-rejecting" in line:  # the CLI's own note on stderr; the tool_use event follows
                return line.lstrip("! ")
            return line
        kind, part = event["type"], _obj(event.get("part"))
        if kind == "step_start":
            self.requests += 1
            if self.requests > self.max_requests:
                self.stop_reason = f"it made more than {self.max_requests} model requests (max_requests)"
            return None
        if kind == "text":
            text = str(part.get("text") or "").strip()
            if text:
                self.texts.append(text)
                self.empty_in_a_row = 0
            return text or None
        if kind == "tool_use":
            return self._tool(part)
        if kind == "step_finish":
            self._finish(part)
            return None
        if kind == "error":
            message = _error_message(event.get("error"))
            self.errors.append(message)
            self.stop_reason = self.stop_reason or "error"
            return f"error: {message}"
        return None

    def _tool(self, part: dict[str, Any]) -> str:
        self.empty_in_a_row = 0
        state = _obj(part.get("state"))
        tool, status = str(part.get("tool") or "?"), str(state.get("status") or "?")
        args = _obj(state.get("input"))
        target = str(state.get("title") or args.get("filePath") or args.get("path") or args.get("command") or "")
        self.tools.append({"tool": tool, "status": status, "target": target})
        error = str(state.get("error") or "")
        if status == "error" and "rejected permission" in error:
            self.rejected.append(f"{tool} {args.get('filePath') or target}".strip())
            return f"tool {tool} {target}: permission rejected"
        return f"tool {tool} {target}: {status}" + (f" ({error})" if error else "")

    def _finish(self, part: dict[str, Any]) -> None:
        tokens = _obj(part.get("tokens"))
        spent = 0
        for ours, theirs in (
            ("prompt_tokens", "input"),
            ("completion_tokens", "output"),
            ("reasoning_tokens", "reasoning"),
        ):
            value = tokens.get(theirs)
            if isinstance(value, int):
                self.usage[ours] += value
                spent += value
        cost = part.get("cost")
        if isinstance(cost, int | float):
            self.cost += float(cost)
        if spent == 0 and part.get("reason") in ("unknown", "error", None):
            self.empty_in_a_row += 1
            if self.empty_in_a_row >= EMPTY_REPLIES_IN_A_ROW:
                self.stop_reason = self.stop_reason or (
                    f"its last {self.empty_in_a_row} model requests produced nothing (an empty or unreadable "
                    "reply from the provider)"
                )
        else:
            self.empty_in_a_row = 0

    def summary(self) -> str:
        edits = [t for t in self.tools if t["tool"] in EDIT_TOOLS and t["status"] == "completed"]
        text = self.texts[-1] if self.texts else ""
        parts = [text[:2000]] if text else []
        if edits:
            parts.append("edited: " + ", ".join(sorted({t["target"] for t in edits if t["target"]})))
        if self.rejected:
            parts.append("permission rejected: " + "; ".join(self.rejected))
        return "\n".join(parts) or "opencode finished"

    def record(self, seconds: float) -> dict[str, Any]:
        usage: dict[str, Any] = {"seconds": round(seconds, 2), "requests": self.requests, **self.usage}
        usage["tool_calls"] = len(self.tools)
        if self.cost:
            usage["cost_usd"] = round(self.cost, 8)
        if self.rejected:
            usage["permission_rejected"] = list(self.rejected)
        return usage


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (the CLI's output is not trusted)."""
    return value if isinstance(value, dict) else {}


def _error_message(error: Any) -> str:
    """The provider's own message from an ``error`` event, with its HTTP status."""
    if not isinstance(error, dict):
        return strip_control(str(error))
    data = _obj(error.get("data"))
    message = strip_control(str(data.get("message") or error.get("message") or error.get("name") or "unknown error"))
    status = data.get("statusCode")
    return f"{message} (HTTP {status})" if isinstance(status, int) else message


class OpencodeCoder:
    def pass_env(self) -> tuple[str, ...]:
        """The inherited variables opencode needs in its sandbox (whose environment is an
        allowlist): the ``env`` setting, its own ``OPENCODE_*`` settings, plus
        ``<PROVIDER>_API_KEY`` / ``_BASE_URL`` for a ``--model provider/name``."""
        provider = (self.model or "").partition("/")[0].upper().replace("-", "_")
        derived = (f"{provider}_API_KEY", f"{provider}_BASE_URL") if provider and "/" in (self.model or "") else ()
        own = tuple(name for name in os.environ if name.startswith("OPENCODE_"))
        return (*self.env, *own, *derived)

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = CoderConfig("opencode", config, SETTINGS)
        self.model = cfg.text("model")
        self.timeout = cfg.number("timeout")
        self.silence_timeout = cfg.number("silence_timeout")
        self.max_requests = cfg.integer("max_requests") or DEFAULT_MAX_REQUESTS
        self.extra_args = cfg.strings("extra_args")
        self.env = cfg.strings("env")

    def argv(self, request: CoderRequest) -> list[str]:
        model = ["--model", self.model] if self.model else []
        workspace = str(request.workspace.resolve())
        return [
            PROGRAM.name,
            "run",
            "--format",
            "json",
            "--print-logs",  # ERROR log lines: the first failed provider request, before any retry
            "--log-level",
            "ERROR",
            "--dir",
            workspace,
            *model,
            *self.extra_args,
            task_prompt(request),
        ]

    def generate(self, request: CoderRequest) -> CoderResult:
        events = Events(self.max_requests)
        started = time.monotonic()
        try:
            return self._run(request, events)
        except BaseException as exc:  # what it spent before failing is still the run's
            carry_usage(exc, {"model": self.model or "(opencode default)", **events.record(time.monotonic() - started)})
            raise

    def _run(self, request: CoderRequest, events: Events) -> CoderResult:
        if shutil.which(PROGRAM.name) is None:
            raise EnvironmentProblem(f"the opencode coder needs {PROGRAM.name!r} on PATH", hint=PROGRAM.install_hint)
        timeout = self.timeout or request.timeout

        def on_line(raw: str) -> None:
            shown = events.read(raw)
            if shown:
                request.log(shown[:500])

        with tempfile.TemporaryDirectory(prefix="snodo-opencode-") as state:
            # The CLI reads $PWD, not the process's working directory: both name the workspace.
            env = {**os.environ, "PWD": str(request.workspace.resolve()), **private_state(Path(state))}
            result = run_process(
                self.argv(request),
                cwd=request.workspace,
                timeout=timeout,
                silence_timeout=self.silence_timeout,
                env=env,
                on_line=on_line,
                stop_if=lambda _line: events.stop_reason is not None,
                writable=(Path(state),),
                pass_env=self.pass_env(),
            )
        if events.errors:
            model = f"model {self.model!r}" if self.model else "the model opencode is configured with"
            raise EnvironmentProblem(
                f"opencode stopped on a provider error: {events.errors[-1]} ({model})",
                hint="`opencode models` lists the models opencode knows; check the model name, and the "
                "provider's credentials and status in opencode's configuration",
            )
        if events.stop_reason is not None:
            bounded = "max_requests" in events.stop_reason
            raise EnvironmentProblem(
                f"opencode was stopped: {events.stop_reason}; its process group was killed",
                hint="raise coder_config.max_requests or narrow the task"
                if bounded
                else "check the provider and the model opencode is configured with (it retries errors on its own)",
            )
        if result.timed_out:
            raise EnvironmentProblem(f"opencode timed out after {timeout:g}s; its process group was killed")
        if result.silent_too_long:
            raise EnvironmentProblem(
                f"opencode timed out after {self.silence_timeout or 0:g}s without output; its process group was killed"
            )
        if result.returncode != 0:
            tail = strip_control(result.tail(20))
            raise EnvironmentProblem(f"opencode exited with code {result.returncode}:\n{tail}")
        edited = any(t["tool"] in EDIT_TOOLS and t["status"] == "completed" for t in events.tools)
        if events.rejected and not edited:
            raise EnvironmentProblem(
                f"opencode's tool calls were rejected by its permission rules: {'; '.join(events.rejected)}",
                hint="opencode run auto-rejects what its permissions would ask about; allow the tool in "
                "opencode.json (permission) or narrow the task to the project",
            )
        return CoderResult(summary=events.summary(), usage=events.record(result.duration))


@hookimpl
def snodo_coders() -> Iterator[CoderSpec]:
    yield CoderSpec(
        name="opencode",
        description="runs `opencode run` in the workspace; it edits the files itself",
        capabilities=CoderCapabilities(
            writes_in_place=True,
            commits_own_changes=False,
            required_programs=(PROGRAM,),
            settings=SETTINGS,
            needs_network=True,
            deterministic=False,
        ),
    )


@hookimpl
def snodo_generate(name: str, request: CoderRequest) -> CoderResult | None:
    return OpencodeCoder(request.config).generate(request) if name == "opencode" else None


@hookimpl
def snodo_preflight(coder: str, coder_config: Mapping[str, Any]) -> None:
    """Settings are read strictly before any token is spent."""
    if coder == "opencode":
        OpencodeCoder(coder_config)
