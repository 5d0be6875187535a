"""snodo's conformance kit: the contracts the engine relies on, run against a plugin.

Opt-in, as a pytest plugin (``pytest -p snodo_conformance.plugin --snodo-coder NAME`` or
``--snodo-validator NAME``); see :mod:`snodo_conformance.plugin` and docs/conformance.md.
:mod:`snodo_conformance.cases` holds the types an author's fixture overrides return, and
:mod:`snodo_conformance.harness` the author harness (``snodo_project``: real ``snodo run`` /
``snodo validate`` on a sample project). Importing this package registers nothing and
changes no pytest run.
"""
