"""Typed records exchanged between the core and plugins, frozen all the way down."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from attrs import field, frozen

from snodo.base.frozen import freeze

if TYPE_CHECKING:
    from snodo.protocol.models import Mode, Validator
    from snodo.protocol.models import Protocol as ProtocolDoc

Severity = Literal["pass", "warn", "blocker"]
SEVERITIES: tuple[str, ...] = ("pass", "warn", "blocker")

_T = TypeVar("_T")
_NAME = re.compile(r"^[a-z][a-z0-9_.-]*$")


def _valid_name(_inst: object, _attr: object, value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(
            f"plugin-registered name {value!r} must be lower case, start with a letter and use "
            "only letters, digits, '-', '_' or '.'"
        )


def _frozen_mapping(value: Any) -> Mapping[str, Any]:
    frozen_value = freeze(value)
    if not isinstance(frozen_value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return frozen_value


@frozen(kw_only=True)
class RequiredProgram:
    """A program a coder needs on PATH, and how a user gets it."""

    name: str
    install_hint: str


@frozen(kw_only=True)
class CoderCapabilities:
    """What a coder declares about itself (ADR 035, docs/plugins.md); the engine acts on this,
    never on probing.

    :param writes_in_place: edits the workspace itself; every changed path is judged by the
        path guard (``.snodo/``, ``.git/``, protected paths, outside the workspace: ``blocker``).
    :param commits_own_changes: (in-place) its commits on the task branch are the change;
        without it, a moved HEAD, branch or any new commit is a ``blocker``.
    :param required_programs: checked on PATH before any token is consumed.
    :param settings: the ``coder_config`` keys it honours (names or typed
        :class:`~snodo.rules.settings.Setting`); any other key or type is refused first.
    :param needs_network: confined execution leaves the network on only for such a coder.
    :param deterministic: the same request gives the same operations (the conformance kit checks).
    """

    writes_in_place: bool
    commits_own_changes: bool
    required_programs: tuple[RequiredProgram, ...] = ()
    settings: tuple[str, ...] = ()
    needs_network: bool = False
    deterministic: bool = False


@frozen(kw_only=True)
class FileOperation:
    """One change a coder proposes. ``content`` is required for writes, absent for deletes."""

    op: Literal["write", "delete"]
    path: str
    content: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.op not in ("write", "delete"):
            raise ValueError(f"operation must be 'write' or 'delete', got {self.op!r}")
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("operation path must be a non-empty string")
        if self.op == "write" and not isinstance(self.content, str):
            raise ValueError(f"write of {self.path!r} needs string content")
        if self.op == "delete" and self.content is not None:
            raise ValueError(f"delete of {self.path!r} must not carry content")


@frozen(kw_only=True)
class CoderRequest:
    """Everything a coder gets for one task; ``findings``: on a recovery attempt, what the
    validators said last time; ``log`` streams a line to the job log."""

    task_id: str
    spec: str
    workspace: Path
    mode_id: str
    criteria: tuple[str, ...] = ()
    guidance: str = ""
    protected_paths: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)
    timeout: float = 600.0
    findings: tuple[str, ...] = ()
    attempt: int = 0
    log: Callable[[str], None] = field(default=lambda _line: None, eq=False, repr=False)


@frozen(kw_only=True)
class CoderResult:
    """What a coder produced. In-place coders return no operations (the engine diffs)."""

    operations: tuple[FileOperation, ...] = ()
    summary: str = ""
    usage: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)


def _moved(field_name: str, hook: str) -> Callable[[Any, Any, Any], None]:

    def refuse(inst: Any, _attr: Any, value: Any) -> None:
        if value is not None:
            raise TypeError(
                f"{type(inst).__name__}({field_name}=...) is no longer supported: register the "
                f"{type(inst).__name__} without it and implement the {hook} hook, which snodo calls "
                "with the registered name (see docs/plugins.md)"
            )

    return refuse


@frozen(kw_only=True)
class CoderSpec:
    """A coder registration, answered by its plugin's ``snodo_generate(name, ...)``."""

    name: str = field(validator=_valid_name)
    description: str
    capabilities: CoderCapabilities
    factory: None = field(default=None, validator=_moved("factory", "snodo_generate(name, request)"), repr=False)


@frozen(kw_only=True)
class ValidatorSpec:
    """A validator type registration, answered by its plugin's ``snodo_validate(name, ...)``;
    it never modifies the workspace.

    :param needs_model: a protocol using it without a ``model`` is refused (WF3); with none
        it must raise, never pass.
    :param deterministic: the same request and tree give the same verdict (the kit checks).
    :param settings: the ``tooling`` keys it honours, as for a coder (``timeout`` is the runner's).
    :param judges_objects: reads the work only as git objects (``request.work``): no copy.
    :param runs_code: starts processes on the work, so it gets a copy of its own; otherwise it
        shares one copy with the phase's other readers, read-only to any process it starts.
    """

    name: str = field(validator=_valid_name)
    description: str
    needs_model: bool = False
    deterministic: bool = True
    settings: tuple[str, ...] = ()
    judges_objects: bool = False
    runs_code: bool = True


@frozen(kw_only=True)
class Verdict:
    """A validator's judgement (raise when none can be reached). ``escalate``: a person must
    look whatever the policy or ``severity_cap`` say, unless a blocker stands."""

    severity: Severity
    justification: str
    details: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)
    escalate: bool = False

    def __attrs_post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")
        if not isinstance(self.justification, str) or not self.justification.strip():
            raise ValueError("a verdict needs a non-empty justification")


def _once(read: Callable[[], _T]) -> Callable[[], _T]:
    """``read()``, asked on the first call only: validators run concurrently, the first asks and
    the rest wait for its answer (a failure is asked again next time)."""
    lock, answer = threading.Lock(), list[_T]()

    def get() -> _T:
        with lock:
            if not answer:
                answer.append(read())
            return answer[0]

    return get


class WorkspaceStatus:
    """``git status --porcelain``'s lines (at most 50), read on the first ask and shared by
    the phase's validators."""

    LIMIT = 50

    def __init__(self, read: Callable[[], tuple[str, ...]]) -> None:
        self.uncommitted = _once(lambda: tuple(read())[: self.LIMIT])


class JudgedWork:
    """The work under judgement as git objects: the judged tree and the base commit
    (``None``: none known), each read on the first ask and shared by the phase's validators."""

    def __init__(
        self,
        repo: Path,
        base: str | Callable[[], str | None] | None,
        read_tree: Callable[[], str],
        cache: Path | None = None,
    ) -> None:
        self.repo = repo
        #: where judgements keep what they may reuse (the base's results), out of agents' reach
        self.cache = cache
        self._base = _once(base if callable(base) else lambda: base)
        self.tree = _once(read_tree)

    @property
    def base(self) -> str | None:
        return self._base()


@frozen(kw_only=True)
class ValidationRequest:
    """What a validator judges: one task, one phase, one validator's configuration.

    ``workspace``: a copy of the judged tree (its index holds that tree, its ``HEAD`` the
    base); ``project_root``: the user's checkout, where relative settings are resolved;
    ``changed_files`` and ``diff`` (after the work): the task's whole change set. ``status``
    and ``work`` are ``None`` in a request snodo's runner did not build.
    """

    validator: Validator
    task_id: str
    task_spec: str
    phase: str
    mode: Mode
    protocol: ProtocolDoc
    workspace: Path
    changed_files: tuple[str, ...] = ()
    diff: str = ""
    project_root: Path | None = None
    timeout: float = 300.0
    status: WorkspaceStatus | None = field(default=None, eq=False, repr=False)
    work: JudgedWork | None = field(default=None, eq=False, repr=False)


@frozen(kw_only=True)
class PredicateContext:
    """What a constraint predicate sees. ``changed_files`` are real file paths only."""

    workspace: Path
    task_id: str
    task_spec: str
    phase: str
    changed_files: tuple[str, ...] = ()
    diff: str = ""


@frozen(kw_only=True)
class PredicateResult:
    ok: bool
    message: str


@frozen(kw_only=True)
class PredicateSpec:
    """A predicate registration, answered by its plugin's ``snodo_check_predicate(name, ...)``.

    :param discard_work_on_failure: a run it halts keeps no commit of its work (it holds a
        secret, say); its message must name what was found without quoting it.
    """

    name: str = field(validator=_valid_name)
    description: str
    discard_work_on_failure: bool = False
    check: None = field(
        default=None, validator=_moved("check", "snodo_check_predicate(name, context, params)"), repr=False
    )


@frozen(kw_only=True)
class ArtifactContext:
    workspace: Path
    task_id: str
    mode_id: str
    protected_paths: tuple[str, ...] = ()


@frozen(kw_only=True)
class DroppedOperation:
    """An operation a filter removed, and why (audited as ``path_refused``)."""

    operation: FileOperation
    reason: str
