"""Every YAML snippet in the provider, coder and validator pages loads through the protocol
loader `snodo protocol check` uses (schema, unknown-key and well-formedness checks).

A snippet that is a whole protocol is loaded as is. A snippet that shows only ``modes:``
and/or ``validators:`` is placed into a fixed skeleton (one dispatching mode with the
snippet's validators, filled up with model-free validators so both phases are judged, as
WF3 asks); its entries are checked exactly as written. Any other shape fails: the page
should show something a reader can paste into a protocol."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from snodo.plugin.host import PluginHost
from snodo.protocol import load_protocol

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("providers.md", "coders.md", "validators.md")
_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.DOTALL | re.MULTILINE)


def snippets() -> list[Any]:
    found = []
    for page in PAGES:
        for n, match in enumerate(_BLOCK.finditer((DOCS / page).read_text()), 1):
            found.append(pytest.param(match.group(1), id=f"{page}#{n}"))
    return found


def as_protocol(snippet: Any) -> dict[str, Any]:
    if not isinstance(snippet, dict) or not ({"modes", "validators"} & set(snippet)):
        pytest.fail(f"the snippet is not a protocol nor its modes/validators: {snippet!r:.200}")
    if "protocol_id" in snippet:
        return snippet
    validators = list(snippet.get("validators") or [])
    phases = {v.get("evaluation_phase", "pre_execute") for v in validators}
    if "pre_execute" not in phases:
        validators.append({"validator_id": "filler-pre", "validator_type": "protocol"})
    if "post_execute" not in phases:
        validators.append(
            {"validator_id": "filler-post", "validator_type": "acceptance", "evaluation_phase": "post_execute"}
        )
    mode: dict[str, Any] = {"mode_id": "producer", "tools": ["read", "edit", "validate", "dispatch"], "coder": "mock"}
    for given in snippet.get("modes") or []:
        mode.update(given)
    mode["validators"] = [v["validator_id"] for v in validators]
    return {"protocol_id": "docs", "name": "docs", "modes": [mode], "validators": validators}


def test_the_pages_have_snippets() -> None:
    assert len(snippets()) >= 9


def test_the_check_is_real_a_misspelt_model_setting_is_refused(host: PluginHost, tmp_path: Path) -> None:
    from snodo.base.errors import ProtocolError

    judge = {"validator_id": "done", "validator_type": "acceptance", "evaluation_phase": "post_execute"}
    path = tmp_path / "protocol.yml"
    path.write_text(yaml.safe_dump(as_protocol({"validators": [{**judge, "tooling": {"api_bse": "http://x"}}]})))
    with pytest.raises(ProtocolError, match="api_bse"):
        load_protocol(path, host)


@pytest.mark.parametrize("text", snippets())
def test_snippet_loads_through_protocol_check(text: str, host: PluginHost, tmp_path: Path) -> None:
    path = tmp_path / "protocol.yml"
    path.write_text(yaml.safe_dump(as_protocol(yaml.safe_load(text))))
    loaded = load_protocol(path, host)
    assert loaded.protocol.modes
