"""What snodo reads of a repository's git configuration, without starting git.

:func:`snodo.git.runner.pin` asks git once (``config --get-regexp``) for the filter and merge
drivers to neutralise and whether the repository names its committer. Which files git
reads for that is fixed (no system file, no ``GIT_CONFIG_*``: see
:func:`snodo.git.runner.clean_env`): the repository's ``config``, the worktree's
``config.worktree``, ``~/.gitconfig`` and ``~/.config/git/config``. Their bytes therefore
determine the answer — unless one of them includes another file (``include``,
``includeIf``), which may change without them: then no key is given and git is asked.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

#: What :func:`snodo.git.runner.pin` reads of the configuration, in one process: the filter and
#: merge drivers to neutralise and whether the repository names its committer.
CONFIG_KEYS = r"^(filter|merge)\.|^user\.(name|email)$"

#: A configuration file larger than this is not read for a cache key (git is asked).
_MAX_CONFIG = 1 << 20


def config_files(git_dir: Path, common_dir: Path) -> list[str]:
    """The files git reads the configuration of ``git_dir`` from (absent ones included)."""
    home = os.environ.get("HOME", "")  # git sees no XDG_CONFIG_HOME (see clean_env)
    files = [str(common_dir / "config"), str(git_dir / "config.worktree")]
    return files + ([os.path.join(home, ".gitconfig"), os.path.join(home, ".config", "git", "config")] if home else [])


def stamp(files: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """When each of ``files`` last changed (0: absent)."""
    out = []
    for name in files:
        try:
            out.append((name, os.stat(name).st_mtime_ns))
        except OSError:
            out.append((name, 0))
    return tuple(out)


def content_key(files: Sequence[str], *salt: str) -> str | None:
    """SHA-256 of ``files``' bytes (an absent file counts as absent) and ``salt``; ``None``
    when one of them includes another file or cannot be read whole."""
    digest = hashlib.sha256("\0".join(("config-v1", *salt)).encode())
    for name in files:
        try:
            with open(name, "rb") as f:
                data = f.read(_MAX_CONFIG + 1)
        except FileNotFoundError:
            digest.update(f"\0{name}\0absent".encode())
            continue
        except OSError:
            return None
        if len(data) > _MAX_CONFIG or b"include" in data.lower():
            return None
        digest.update(f"\0{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def parse_listing(listing: str, identity_keys: Sequence[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """``config -z --get-regexp`` output as (the overrides neutralising every driver it
    defines, which of ``identity_keys`` it sets to something)."""
    values = dict(record.partition("\n")[::2] for record in listing.split("\0") if record)
    keys = list(values)
    identity = frozenset(k for k in keys if k in identity_keys and values[k].strip())
    return neutralise(keys), identity


def neutralise(keys: Sequence[str]) -> tuple[str, ...]:
    """Overrides switching off every filter and merge driver named in ``keys``."""
    out: list[str] = []
    for key in keys:
        section, _, rest = key.partition(".")
        name = rest.rpartition(".")[0]
        if not name:
            continue
        if section == "filter":
            out += [f"filter.{name}.{k}=" for k in ("clean", "smudge", "process")] + [f"filter.{name}.required=false"]
        elif section == "merge":
            out.append(f"merge.{name}.driver=false")
    return tuple(dict.fromkeys(out))
