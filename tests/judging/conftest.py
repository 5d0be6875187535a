"""The corpus's library, held-out tests and cases are test *data*: the projects snodo judges.
Collected by snodo's own suite they would run against nothing (``textkit`` is not
importable here) and their conftest hooks would steer this session."""

collect_ignore = ["corpus"]
