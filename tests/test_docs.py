"""The plugin documentation keeps up with the code (as datasette's test_docs does): every
hookspec is documented in docs/plugins.md with its exact signature, nothing documented there
is a hook that no longer exists, and every conformance contract is listed in
docs/conformance.md under the name ``--snodo-xfail`` takes."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from snodo.plugin import hookspecs

DOCS = Path(__file__).resolve().parent.parent / "docs"
PLUGINS_MD = DOCS / "plugins.md"
CONFORMANCE_MD = DOCS / "conformance.md"


def _annotation(value: Any) -> str:
    # hookspecs use `from __future__ import annotations`: annotations are their source text
    return value if isinstance(value, str) else inspect.formatannotation(value)


def rendered(fn: Callable[..., Any]) -> str:
    """``def name(param: Type, ...) -> Return``, as the hook reference writes it."""
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        text = p.name if p.annotation is p.empty else f"{p.name}: {_annotation(p.annotation)}"
        params.append(text if p.default is p.empty else f"{text} = {p.default!r}")
    returns = "" if sig.return_annotation is sig.empty else f" -> {_annotation(sig.return_annotation)}"
    return f"def {fn.__name__}({', '.join(params)}){returns}"


HOOKSPECS = {
    name: fn
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(fn, f"{hookspecs.PROJECT}_spec")
}


def test_there_are_hookspecs_to_document() -> None:
    assert {"snodo_coders", "snodo_validators", "snodo_validate", "snodo_filter_artifacts"} <= set(HOOKSPECS)


@pytest.mark.parametrize("name", sorted(HOOKSPECS))
def test_every_hookspec_is_documented_with_its_exact_signature(name: str) -> None:
    text = PLUGINS_MD.read_text(encoding="utf-8")
    assert f"### {name}\n" in text, f"docs/plugins.md has no section '### {name}'"
    signature = rendered(HOOKSPECS[name])
    assert f"```python\n{signature}\n```" in text, f"docs/plugins.md must show the exact signature:\n{signature}"


def test_firstresult_hooks_say_so() -> None:
    text = PLUGINS_MD.read_text(encoding="utf-8")
    for name, fn in HOOKSPECS.items():
        if getattr(fn, f"{hookspecs.PROJECT}_spec")["firstresult"]:
            section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
            assert "firstresult" in section, f"{name} is firstresult; its section must say so"


def test_no_documented_hook_is_unknown() -> None:
    reference = PLUGINS_MD.read_text(encoding="utf-8").split("## Hook reference", 1)[1]
    documented = set(re.findall(r"^def (snodo_\w+)\(", reference, re.MULTILINE))
    documented |= set(re.findall(r"^### (snodo_\w+)$", reference, re.MULTILINE))
    assert documented == set(HOOKSPECS)


def test_every_conformance_contract_is_documented() -> None:
    from snodo_conformance.suite import CONTRACTS, CoderContract, ValidatorContract

    tests = {n for cls in (CoderContract, ValidatorContract) for n in vars(cls) if n.startswith("test_")}
    assert tests == set(CONTRACTS), "every kit test needs a contract title in CONTRACTS, and only those"
    text = CONFORMANCE_MD.read_text(encoding="utf-8")
    missing = [name for name in sorted(tests) if f"| `{name}` |" not in text]
    assert not missing, f"docs/conformance.md does not list: {missing}"
