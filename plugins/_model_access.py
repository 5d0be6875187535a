"""Preflight: can this model be reached at all? Asked before the first token of a run.

Two checks, both local or nearly so, so that a run which cannot finish stops before the
coder spends anything (docs/providers.md, "Preflight"):

- **credentials**: ``api_key_env`` names a set, non-blank variable; without it, the key
  variable litellm expects for the model's provider (``OPENAI_API_KEY``...) is set;
- **endpoint**: ``api_base`` is a well-formed http(s) URL and a TCP connection to its host
  and port opens within :data:`CONNECT_BOUND` seconds. No request is sent: nothing is spent
  and no provider logs a call. A provider's default endpoint (no ``api_base``) is not
  probed: it is the provider's to keep up, and the first call classifies an outage.

``mock_response`` (litellm's offline switch) skips both: no provider is contacted.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from snodo.api import EnvironmentProblem

from ._model_settings import ModelSettings, litellm

#: Seconds a TCP connect to ``api_base`` may take before the endpoint counts as unreachable.
CONNECT_BOUND = 3.0

_BLANKABLE = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cohere": "COHERE_API_KEY",
}


def _provider(model: str) -> str | None:
    try:
        return str(litellm().get_llm_provider(model=model)[1])
    except Exception:  # not a model litellm can route: no provider to name
        return None


def missing_keys(settings: ModelSettings) -> list[str]:
    """The variables this model needs that are unset (empty when all is in place)."""
    if settings.mock_response is not None:
        return []
    if settings.api_key_env:
        return [] if (os.environ.get(settings.api_key_env) or "").strip() else [settings.api_key_env]
    try:
        missing = list(litellm().validate_environment(model=settings.model).get("missing_keys") or [])
    except Exception:  # an unknown provider: litellm cannot say, the call will tell
        return []
    # litellm counts a variable that is set but empty as present; the provider will not
    var = _BLANKABLE.get(_provider(settings.model) or "")
    if var and var in os.environ and not os.environ[var].strip() and var not in missing:
        missing.append(var)
    if settings.api_base:  # the endpoint is given, so a missing *_API_BASE variable does not matter
        missing = [m for m in missing if not m.endswith(("_API_BASE", "_BASE_URL", "_ENDPOINT"))]
    return missing


def key_variables(model: str) -> list[str]:
    """The key variables litellm expects for the model's provider, set or not (for hints)."""
    try:
        data = litellm().validate_environment(model=model)
    except Exception:  # an unknown provider: we cannot name the variable
        return []
    return [k for k in data.get("missing_keys") or [] if k.endswith("_KEY")]


def check_credentials(settings: ModelSettings, who: str = "") -> None:
    """Raise :class:`EnvironmentProblem` naming the unset variable, before any token is spent."""
    missing = missing_keys(settings)
    if missing:
        names = " or ".join(missing)
        raise EnvironmentProblem(
            f"{who}no credentials for model {settings.model!r}: {names} is not set",
            hint=f"export {missing[0]}=<your key> (or set api_key_env to the variable holding it) "
            "and run again; see docs/providers.md",
        )


def check_endpoint(settings: ModelSettings, who: str = "", bound: float = CONNECT_BOUND) -> None:
    """Raise :class:`EnvironmentProblem` when ``api_base`` cannot be connected to within ``bound``."""
    if settings.api_base is None or settings.mock_response is not None:
        return
    url = urlsplit(settings.api_base)
    try:
        host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    except ValueError:  # a port out of range
        host, port = None, 0
    if not host or url.scheme not in ("http", "https"):
        raise EnvironmentProblem(
            f"{who}api_base {settings.api_base!r} for model {settings.model!r} is not an http(s) URL with a host",
            hint="set api_base to the provider's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1",
        )
    import socket  # noqa: PLC0415 every snodo start loads this plugin, few reach a model

    try:
        with socket.create_connection((host, port), timeout=bound):
            pass
    except OSError as exc:
        raise EnvironmentProblem(
            f"{who}model {settings.model!r}: {connection_problem(exc)} at {settings.api_base}",
            hint="start the model server or fix api_base, then run again; see docs/providers.md",
        ) from None


def connection_problem(exc: BaseException) -> str:
    """What kind of connection failure ``exc`` (or what it wraps) is, in words."""
    import socket  # noqa: PLC0415 every snodo start loads this plugin, few reach a model

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return "the host name does not resolve (DNS)"
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, TimeoutError | socket.timeout):
            return "connection timed out"
        name = type(current).__name__
        text = str(current)
        if "SSL" in name or "CERTIFICATE" in text or "SSL" in text:
            return f"the TLS handshake failed ({excerpt_of(text)})"
        if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            return "the host name does not resolve (DNS)"
        if "Connection refused" in text or "ECONNREFUSED" in text:
            return "connection refused"
        current = current.__cause__ or current.__context__
    return "could not connect"


def excerpt_of(text: str) -> str:
    return " ".join(text.split())[:160]


def preflight(settings: ModelSettings, who: str = "") -> None:
    """Both checks, credentials first (they cost nothing)."""
    check_credentials(settings, who)
    check_endpoint(settings, who)
