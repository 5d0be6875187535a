"""The typed values an author's ``conftest.py`` may return from the kit's fixtures.

See docs/conformance.md for each fixture with an example. Importing this registers nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import field, frozen


def _files(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@frozen(kw_only=True)
class ValidatorCase:
    """A project and a task for a validator: the kit builds a committed git repository from
    ``files`` (beside ``.snodo/``) and asks the validator about ``task``.

    :param files: path -> content of every project file.
    :param task: the task spec the validator judges.
    :param changed_files: what a post-execute request reports as changed (default: every
        file of ``files``).
    """

    files: Mapping[str, str] = field(converter=_files)
    task: str
    changed_files: tuple[str, ...] | None = None

    def changed(self) -> tuple[str, ...]:
        return tuple(self.files) if self.changed_files is None else tuple(self.changed_files)


@frozen(kw_only=True)
class FixAttempt:
    """A recovery attempt as the engine hands it to a coder: ``attempt`` > 0 and the
    validators' ``findings`` from the attempt before."""

    findings: tuple[str, ...]
    attempt: int = 1


__all__ = ["FixAttempt", "ValidatorCase"]
