"""Property: whatever string an agent sends, the guard refuses it or names a path strictly
inside the root and outside ``.snodo/`` and ``.git/``, on both resolutions it offers."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from snodo.base.errors import PathValidationError
from snodo.rules.guard import name_key
from snodo.workspace import PathGuard

from .conftest import PROTECTED, SYMLINKS

_SEGMENTS = st.sampled_from(
    [
        ".snodo",
        ".SNODO",
        "\uff0e\uff53\uff4e\uff4f\uff44\uff4f",
        ".snodo.",
        ".snodo ",
        ".git",
        ".Git",
        "..",
        ".",
        "",
        "src",
        "secrets",
        "deep",
        "up",
        "x",
        "snodo",
        "a\u200b",
        "~",
        "C:",
        "::$DATA",
        *SYMLINKS,
    ]
)
_PREFIXES = st.sampled_from(["", "./", "/", "{root}/", "{outside}/", "../", "//"])
_SPELLINGS = st.one_of(
    st.text(max_size=30),
    st.tuples(_PREFIXES, st.lists(_SEGMENTS, max_size=6)).map(lambda t: t[0] + "/".join(t[1])),
)


def _assert_safe(result: Path, root: Path) -> None:
    parts = result.relative_to(root).parts  # raises when outside the root
    assert parts, "the root itself must never be a mutation target"
    assert parts[0].casefold() not in (".snodo", ".git")
    assert not any(name_key(part) in (".snodo", ".git") for part in parts)
    # whatever the returned path leads to stays inside the root and out of .snodo/.git
    real = Path(os.path.realpath(result)).relative_to(root).parts
    assert real and real[0].casefold() not in (".snodo", ".git")


@settings(max_examples=400, deadline=None)
@given(template=_SPELLINGS, follow=st.booleans())
def test_check_mutation_refuses_or_stays_inside(shared_project: Path, template: str, follow: bool) -> None:
    root = shared_project
    path = template.replace("{root}", str(root)).replace("{outside}", str(root.parent / "outside"))
    try:
        result = PathGuard(root, PROTECTED).check_mutation(path, follow_symlinks=follow)
    except PathValidationError as exc:
        assert exc.path == path
        return
    _assert_safe(result, root)
