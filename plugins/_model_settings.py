"""The one model-settings schema every model-backed plugin shares, and its strict reading.

The litellm coder, the ``llm``, ``acceptance`` and ``protocol`` judges and the model planner
all reach a model through :mod:`snodo_plugins._model`; they all accept exactly
:data:`MODEL_SETTINGS` (documented once, in docs/providers.md), so a team that learns to
point one of them at a self-hosted model knows how to point all of them. A coder reads them
from ``coder_config``; a judge takes ``model`` from its validator and the rest from
``tooling``. Each plugin declares them by splicing :data:`MODEL_SETTINGS` (or
:data:`PROVIDER_SETTINGS`) into its own settings: this tuple is the one place to change.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from snodo.api import EnvironmentProblem, Setting

#: How to reach a model; ``model`` itself, then the provider settings.
MODEL_SETTINGS = (
    Setting("model", "text"),
    Setting("api_base", "text"),
    Setting("api_key_env", "text"),
    Setting("timeout", "seconds"),
    Setting("max_retries", "count"),
    Setting("temperature", "number"),
    Setting("stream", "boolean"),
)
#: The provider settings alone: a judge's ``tooling`` keys (its ``model`` is a validator field).
PROVIDER_SETTINGS = MODEL_SETTINGS[1:]
#: litellm's offline switch, accepted beside them by every model plugin (tests and demos only).
MOCK = "mock_response"

DEFAULT_TIMEOUT = 120.0
_URL = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[^/\s:@\[\]]+)(:\d{1,5})?(/\S*)?$")
DEFAULT_MAX_RETRIES = 1

# CSI (colours, cursor), OSC (titles, links), the other two-byte escapes, and C0 controls but tab/newline.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]"
)


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences (colours, cursor moves, titles)."""
    return _CONTROL.sub("", text)


def excerpt(text: str, limit: int = 240) -> str:
    """A short one-line quote of a reply (control sequences removed), for readable messages."""
    flat = " ".join(strip_control(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


class SettingsError(ValueError):
    """A provider setting has the wrong type; the caller re-raises it as its own fault."""


@frozen(kw_only=True)
class ModelSettings:
    """How to reach one model: the settings a protocol gives a coder, judge or planner."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    timeout: float | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    temperature: float | None = None
    stream: bool = False
    mock_response: Any = None

    @classmethod
    def read(cls, model: str, raw: Mapping[str, Any]) -> ModelSettings:
        """Typed settings from a protocol mapping; a wrongly typed value raises :class:`SettingsError`."""

        def text(key: str) -> str | None:
            value = raw.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise SettingsError(f"{key} must be a non-empty string, got {value!r}")
            return value

        def number(key: str, *, positive: bool) -> float | None:
            value = raw.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float) or (positive and value <= 0):
                raise SettingsError(f"{key} must be a {'positive ' if positive else ''}number, got {value!r}")
            return float(value)

        retries = raw.get("max_retries", DEFAULT_MAX_RETRIES)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SettingsError(f"max_retries must be a whole number >= 0, got {retries!r}")
        stream = raw.get("stream", False)
        if not isinstance(stream, bool):
            raise SettingsError(f"stream must be true or false, got {stream!r}")
        api_base = text("api_base")
        if api_base is not None and not _URL.match(api_base):
            raise SettingsError(f"api_base must be an http:// or https:// URL with a host, got {api_base!r}")
        return cls(
            model=model,
            api_base=api_base,
            api_key_env=text("api_key_env"),
            timeout=number("timeout", positive=True),
            max_retries=retries,
            temperature=number("temperature", positive=False),
            stream=stream,
            mock_response=raw.get(MOCK),
        )


#: How to get the model stack, which the base distribution leaves out (pyproject.toml extras).
MODEL_EXTRA = "pip install 'snodo-governance[model]'"


class ModelStackMissing(EnvironmentProblem):
    """litellm cannot be imported: the base install has no model stack."""


def litellm() -> Any:
    """Import litellm without letting it fetch its model cost map over the network.

    A governance engine should not phone home on import, and offline the retries cost
    seconds; a user who wants the live map sets LITELLM_LOCAL_MODEL_COST_MAP=False.
    Raises :class:`ModelStackMissing` naming the extra to install when litellm (or one of
    its own dependencies) cannot be imported.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm as module  # noqa: PLC0415 litellm (the `model` extra) only when a model is called
    except ImportError as exc:
        raise ModelStackMissing(
            f"the model stack is not installed: litellm cannot be imported ({exc}); "
            "it comes with the extra snodo-governance[model]",
            hint=f"{MODEL_EXTRA} (a pipx install: pipx inject snodo-governance litellm), or run with --mock; "
            "see docs/providers.md",
        ) from None

    module.suppress_debug_info = True  # its "Provider List" banners would pollute job logs
    return module
