"""A coder that says it cannot do the work (``CoderError``) halts ``coder_failed`` with its
message, never ``environment_error`` (which means: fix the machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from snodo.api import CoderCapabilities, CoderError, CoderRequest, CoderResult, CoderSpec, hookimpl
from snodo.engine.loop import Engine
from snodo.governance.service import Project
from snodo.plugin.host import get_plugin_manager
from snodo.protocol import load_protocol
from snodo.rules.outcomes import RUN_NEXT_STEP
from tests.conftest import git, write_producer_protocol


class Refuses:
    attempts: list[tuple[int, tuple[str, ...]]] = []

    def __init__(self, config: dict[str, object]) -> None:
        pass

    def generate(self, request: CoderRequest) -> CoderResult:
        Refuses.attempts.append((request.attempt, tuple(request.findings)))
        raise CoderError("the diff does not apply", hint="the file changed under the coder")


class Plugin:
    @hookimpl
    def snodo_coders(self) -> Iterator[CoderSpec]:
        yield CoderSpec(
            name="refuses",
            description="raises CoderError",
            capabilities=CoderCapabilities(writes_in_place=False, commits_own_changes=False),
        )

    @hookimpl
    def snodo_generate(self, name: str, request: CoderRequest) -> CoderResult:
        return Refuses({}).generate(request)


def test_coder_error_ends_coder_failed_with_its_message(git_repo: Path) -> None:
    write_producer_protocol(git_repo)
    text = (git_repo / ".snodo" / "protocol.yml").read_text().replace("coder: mock", "coder: refuses")
    (git_repo / ".snodo" / "protocol.yml").write_text(text)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "protocol")
    host = get_plugin_manager(plugins=[Plugin()])
    project = Project(load_protocol(git_repo / ".snodo" / "protocol.yml", host), host)
    result = Engine(project).run("add an ok module")
    assert (result.status, result.outcome, result.phase) == ("halted", "coder_failed", "execute")
    assert "the diff does not apply" in result.message and "the file changed under the coder" in result.message
    payload = result.payload()
    assert payload["next"] == RUN_NEXT_STEP["coder_failed"] and "environment" not in payload["next"]
    # a fix attempt per the budget (min of max_recovery_depth 3, max_total_fix_attempts 10), told why
    assert [a for a, _ in Refuses.attempts] == [0, 1, 2, 3]
    assert Refuses.attempts[1][1] == (
        "your previous attempt failed: the diff does not apply\n  hint: the file changed under the coder",
    )
