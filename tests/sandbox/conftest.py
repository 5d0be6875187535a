"""Fixtures of the confinement tests: every test runs once per backend that works here."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from snodo.sandbox import forget_probes
from snodo.sandbox.choose import probe

BACKENDS = ("bwrap", "landlock")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Force one backend (``SNODO_SANDBOX_BACKEND``) for this test and the processes it starts."""
    name: str = request.param
    _, reason = probe(name)
    if reason is not None:  # pragma: no cover - both work on the machines this suite targets
        if name in os.environ.get("SNODO_TEST_REQUIRE_BACKENDS", "").split(","):
            pytest.fail(f"{name} is required (SNODO_TEST_REQUIRE_BACKENDS) but does not work here: {reason}")
        pytest.skip(f"{name} does not work here: {reason}")
    monkeypatch.setenv("SNODO_SANDBOX_BACKEND", name)
    yield name
    forget_probes()


@pytest.fixture
def fake_bwrap(tmp_path: Path) -> Path:
    """A ``bwrap`` that fails exactly as bubblewrap does where user namespaces are refused."""
    program = tmp_path / "fake-bin" / "bwrap"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    program.chmod(0o755)
    return program
