"""The exceptions snodo raises: plain text a user can act on, in a log, an MCP tool error
or a JSON payload alike."""

from __future__ import annotations


class SnodoError(Exception):
    """Base of every error snodo raises on purpose; the command line exits with ``exit_code``."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f"\n  hint: {self.hint}" if self.hint else "")


class ProtocolError(SnodoError):
    """The protocol file could not be read, parsed or validated; ``problems``: one line each
    (``file: message @ path``)."""

    def __init__(self, message: str, *, problems: tuple[str, ...] = (), hint: str | None = None):
        super().__init__(message, hint=hint)
        self.problems = problems

    def __str__(self) -> str:
        text = self.message
        if self.problems and self.problems != (self.message,):
            text += "\n" + "\n".join(f"  - {p}" for p in self.problems)
        return text + (f"\n  hint: {self.hint}" if self.hint else "")


class PluginError(SnodoError):
    """A plugin failed to load, registered something invalid, or conflicts with another."""


class StateError(SnodoError):
    """Governance state (sessions, tokens, audit, keys) is missing, corrupt or unwritable; a
    corrupt file is never silently replaced."""

    exit_code = 4


class AuditChainError(StateError):
    """The audit log's hash chain is broken; nothing may append to it."""

    def __init__(self, message: str, *, line: int | None = None, reason: str = "", hint: str | None = None):
        super().__init__(message, hint=hint)
        self.line = line
        self.reason = reason


class TokenError(SnodoError):
    """A validation token failed verification or could not be consumed; ``reason``: the short cause audited."""

    def __init__(self, message: str, *, reason: str = "", hint: str | None = None):
        super().__init__(message, hint=hint)
        self.reason = reason


class DecisionError(SnodoError):
    """A human decision cannot be recorded (unknown id, blocker in the proposal, bad key)."""


class PathValidationError(SnodoError):
    """A tool-surface mutation targeted a protected or out-of-root path (INV2, ADR 026)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"refused {path!r}: {reason}")
        self.path = path
        self.reason = reason


class ToolError(SnodoError):
    """A workspace, git or test tool was called with bad arguments or failed."""


class CoderError(SnodoError):
    """A coder plugin produced no usable result: the run halts ``coder_failed``."""


class EnvironmentProblem(SnodoError):
    """The environment cannot run the work (a program, provider, credential or time limit): ``environment_error``."""


class ValidatorFault(SnodoError):
    """A validator could not reach a verdict. The runner turns it into an ``error`` result."""
