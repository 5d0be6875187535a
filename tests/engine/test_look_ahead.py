"""The user's checkout is read from the moment a run is asked for (engine/checkout.py)."""

from __future__ import annotations

import os
from concurrent.futures import wait
from pathlib import Path

from snodo.engine import checkout
from tests.conftest import git, make_repo


def test_the_look_started_ahead_is_the_one_the_run_takes_and_says_what_was_uncommitted_then(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("mine\n")
    head = git(repo, "rev-parse", "HEAD").strip()
    checkout.look_ahead(repo / ".")  # any spelling of the path: keyed by its real path
    ahead = checkout._AHEAD[os.path.realpath(repo)]
    checkout.look_ahead(repo)  # asked twice: still one look
    assert checkout._AHEAD[os.path.realpath(repo)] is ahead
    assert ahead.result() == (head, ["notes.txt"])
    (repo / "later.txt").write_text("after the run was asked for\n")
    taken = checkout.looking(repo)
    assert taken is ahead and taken.result() == (head, ["notes.txt"])
    fresh = checkout.looking(repo)  # taken once: the next run reads the checkout again
    assert fresh is not ahead and sorted(fresh.result()[1]) == ["later.txt", "notes.txt"]


def test_a_look_ahead_at_another_checkout_is_not_taken(tmp_path: Path) -> None:
    one, other = make_repo(tmp_path / "one"), make_repo(tmp_path / "other")
    checkout.look_ahead(other)
    try:
        assert checkout.looking(one).result()[1] == []
        assert os.path.realpath(other) in checkout._AHEAD
    finally:
        wait([checkout.looking(other)])
