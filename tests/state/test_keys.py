from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from snodo.base.errors import StateError
from snodo.state import keys
from snodo.state.keys import (
    DECISION_PRIVATE_KEY_FILE,
    DECISION_PUBLIC_KEY_FILE,
    ensure_decision_keys,
    load_decision_public_key,
    public_key_fingerprint,
    token_key,
)

REPO = Path(__file__).resolve().parents[2]
SNODO = REPO / "snodo"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_token_key_is_created_once_private(home: Path) -> None:
    key = token_key(home)
    path = home / "keys" / "token.key"
    assert len(key) >= 32
    assert _mode(path) == 0o600
    assert _mode(home / "keys") == 0o700
    assert token_key(home) == key


def test_concurrent_processes_share_one_token_key(home: Path, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    workers = [spawn("token-key-hash", home) for _ in range(8)]
    hashes = {w.communicate(timeout=60)[0].strip() for w in workers}
    assert all(w.returncode == 0 for w in workers)
    assert len(hashes) == 1
    assert [p.name for p in (home / "keys").iterdir()] == ["token.key"]


def test_token_key_with_loose_mode_is_refused(home: Path) -> None:
    token_key(home)
    path = home / "keys" / "token.key"
    path.chmod(0o644)
    with pytest.raises(StateError, match="mode 0644") as caught:
        token_key(home)
    assert str(path) in str(caught.value)


def test_empty_token_key_is_refused_not_replaced(home: Path) -> None:
    path = home / "keys" / "token.key"
    (home / "keys").mkdir()
    path.touch(mode=0o600)
    with pytest.raises(StateError, match="empty or too short"):
        token_key(home)
    assert path.read_bytes() == b""


def test_decision_keys_created_on_first_use(home: Path) -> None:
    public = ensure_decision_keys(home)
    private_path = home / "keys" / DECISION_PRIVATE_KEY_FILE
    assert _mode(private_path) == 0o600
    assert _mode(home / "keys" / DECISION_PUBLIC_KEY_FILE) == 0o644
    again = ensure_decision_keys(home)
    assert public_key_fingerprint(again) == public_key_fingerprint(public)
    assert public_key_fingerprint(load_decision_public_key(home)).startswith("sha256:")


def test_half_a_decision_key_pair_is_an_error(home: Path) -> None:
    ensure_decision_keys(home)
    (home / "keys" / DECISION_PUBLIC_KEY_FILE).unlink()
    with pytest.raises(StateError, match="incomplete"):
        ensure_decision_keys(home)
    assert (home / "keys" / DECISION_PRIVATE_KEY_FILE).exists()


def test_missing_public_key_says_how_it_is_made(home: Path) -> None:
    with pytest.raises(StateError, match="no decision public key") as caught:
        load_decision_public_key(home)
    assert "snodo authorize" in str(caught.value)


# ------------------------------------------------------------ the private-key boundary


def test_state_modules_never_import_the_signing_module() -> None:
    modules = sorted(f"snodo.state.{p.stem}" for p in (SNODO / "state").glob("*.py") if p.stem != "__init__")
    code = (
        "import importlib, json, sys\n"
        f"for name in ['snodo.state', *{modules!r}]:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert "snodo.state.decisions" in loaded
    assert "snodo.cli.signing" not in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("litellm", "mcp")}


def _string_constants(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_only_the_signing_module_and_cli_name_the_private_key() -> None:
    """keys.py names the private key file to create it; anything else naming it, or any
    code loading a private key, must be the signing module or the command line."""
    allowed = {SNODO / "state" / "keys.py"}
    offenders = []
    for path in SNODO.rglob("*.py"):
        if path in allowed or (SNODO / "cli") in path.parents:
            continue
        source = path.read_text()
        names_key = DECISION_PRIVATE_KEY_FILE in _string_constants(source)
        if names_key or "DECISION_PRIVATE_KEY_FILE" in source or "load_pem_private_key" in source:
            offenders.append(str(path.relative_to(REPO)))
        if "decision_key_paths" in source:
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_keys_module_cannot_load_a_private_key() -> None:
    source = Path(keys.__file__).read_text()
    for loader in (
        "load_pem_private_key",
        "load_der_private_key",
        "load_ssh_private_key",
        "from_private_bytes",
    ):
        assert loader not in source


def test_openssh_ed25519_lines_read_as_cryptography_reads_them() -> None:
    """The ``ssh-ed25519`` reader (which spares every run cryptography's SSH module) gives
    the key cryptography gives, and refuses what it refuses."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from snodo.state.keys import openssh_public, parse_public_key

    for _ in range(20):
        key = Ed25519PrivateKey.generate().public_key()
        line = openssh_public(key).encode() + b" a comment"
        assert parse_public_key(line, "k").public_bytes_raw() == key.public_bytes_raw()
        assert (
            parse_public_key(line, "k").public_bytes_raw() == serialization.load_ssh_public_key(line).public_bytes_raw()
        )  # type: ignore[union-attr]

    def blob(*fields: bytes) -> bytes:
        return b"ssh-ed25519 " + base64.b64encode(b"".join(len(f).to_bytes(4, "big") + f for f in fields))

    bad = [
        b"ssh-ed25519 AAAA",
        b"ssh-ed25519 not*base64",
        blob(b"ssh-ed25519", b"k" * 31),  # a key of the wrong size
        blob(b"ssh-rsa", b"k" * 32),  # another type behind the ed25519 name
        blob(b"ssh-ed25519", b"k" * 32, b"more"),  # trailing data
        blob(b"ssh-ed25519", b"k" * 32) + b"A",  # base64 broken at the end
    ]
    for line in bad:
        with pytest.raises(ValueError):
            serialization.load_ssh_public_key(line)
        with pytest.raises(StateError, match="is not a valid public key"):
            parse_public_key(line, "k")
