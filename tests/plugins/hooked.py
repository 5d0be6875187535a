"""A built-in coder asked the way the engine asks it: through its ``snodo_generate`` hook."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import evolve

from snodo.api import CoderRequest, CoderResult
from snodo.testing import PluginHost


class HookedCoder:
    """``generate(request)`` dispatched through the host, with ``config`` as the mode's
    ``coder_config``; construction runs the coder's ``snodo_preflight`` as the engine does
    before any token, so a bad setting or a missing key raises here."""

    def __init__(self, host: PluginHost, name: str, config: Mapping[str, Any]) -> None:
        self.host, self.name, self.config = host, name, config
        host.pm.hook.snodo_preflight(mode=None, coder=name, coder_config=config, validators=())

    def generate(self, request: CoderRequest) -> CoderResult:
        return self.host.generate(self.name, evolve(request, config=self.config))
