"""The contracts, as two aggregate test classes: one for coders, one for validators.

Each kind is one class on purpose (pandas issue 54420): an author cannot subclass half of
the kit and miss the rest, and a contract added here reaches every plugin at once. The
plugin module (:mod:`snodo_conformance.plugin`) collects this module; nothing here is meant
to be imported by a plugin author.

This module only gathers what pytest collects: the two classes and the fixtures they use.
Each family lives in its own module: the contract titles and how failures are reported
(:mod:`.contracts`), the default tasks and projects (:mod:`.defaults`), a coder run as the
engine runs it (:mod:`.coder_run`) and its contracts (:mod:`.contracts_coder`), a validator
run on its own and through the shared runner (:mod:`.validator_run`) and its contracts
(:mod:`.contracts_validator`).
"""

from __future__ import annotations

from .coder_run import coder_run, no_path
from .contracts import CONTRACTS, SAFETY_CONTRACTS
from .contracts_coder import CoderContract
from .contracts_validator import ValidatorContract
from .validator_run import validator_run

__all__ = [
    "CONTRACTS",
    "SAFETY_CONTRACTS",
    "CoderContract",
    "ValidatorContract",
    "coder_run",
    "no_path",
    "validator_run",
]
