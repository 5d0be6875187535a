"""The table of bad protocols: each a small edit of :data:`BASE` and the exact problem line(s)
every command must report. ``{p}`` stands for the protocol file's path."""

from __future__ import annotations

from attrs import frozen

BASE = """\
protocol_id: table
name: Table-test protocol
version: "1.0.0"
initial_mode: producer
modes:
  - mode_id: producer
    tools: [read, edit, test, validate, dispatch, commit]
    validators: [gate, judge]
    coder: marker-coder
    coder_config: {model: any/model}
    constraints:
      - {constraint_id: traced, predicate: marker_pred}
  - mode_id: reviewer
    tools: [review, approve]
    validators: [judge]
    coder: marker-coder
validators:
  - validator_id: gate
    validator_type: marker
    evaluation_phase: pre_execute
    tooling: {timeout: 60}
  - validator_id: judge
    validator_type: marker
    evaluation_phase: post_execute
    tooling: {command: "python -m pytest -q"}
execution: {max_iterations: 5, max_recovery_depth: 1, max_total_fix_attempts: 1}
"""

MODE_KEYS = "mode_id, name, description, tools, validators, transitions, constraints, coder, coder_config"
VALIDATOR_KEYS = "validator_id, validator_type, evaluation_phase, criteria, tooling, model, constraints, severity_cap"
TOP_KEYS = (
    "protocol_id, name, version, modes, validators, disagreement_policy, quorum_threshold, initial_mode, "
    "roles, global_constraints, exclusive_tools, protected_paths, execution, metadata"
)
CAPS = "approve, assess, commit, decide, dispatch, edit, merge, plan, read, resolve, review, test, validate"
VALIDATOR_TYPES = "acceptance, command, git-hooks, llm, marker, protocol, pytest"
CODERS = "litellm, marker-coder, mock, opencode"
PREDICATES = "files_in_scope, marker_pred, no_secrets_in_diff, tests_exist_for_modified"
NO_POST = (
    "WF3: mode 'producer' holds 'dispatch' but has no post_execute validator to judge the work once done: every "
    "run in this mode would halt (validator_error) at post_execute; add a post_execute validator to the mode's "
    "validators"
)
REFUSED = "{p}: the protocol was refused"
NOT_WELL_FORMED = "{p}: the protocol is not well-formed"


@frozen
class Case:
    id: str
    edits: tuple[tuple[str, str], ...]
    expected: tuple[str, ...]
    append: str = ""
    headline: str = REFUSED

    def text(self) -> str:
        text = BASE
        for old, new in self.edits:
            assert old in text, (self.id, old)
            text = text.replace(old, new, 1)
        return text + self.append


def case(
    id: str,
    edits: list[tuple[str, str]] | None,
    *expected: str,
    append: str = "",
    wf: bool = False,
    headline: str | None = None,
) -> Case:
    return Case(id, tuple(edits or ()), expected, append, headline or (NOT_WELL_FORMED if wf else REFUSED))


ALIAS_BOMB = (
    "metadata:\n"
    '  a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
)
HUGE = f"{{p}}: the file is {len(BASE.encode()) + 1_000_003} bytes long; a protocol may be at most 1000000"
DEEP = "metadata: " + "[" * 45 + "]" * 45 + "\n"

CASES: tuple[Case, ...] = (
    # ---- YAML and structure --------------------------------------------------------------
    case(
        "duplicate-top-level-key",
        None,
        "{p}:28: duplicate key 'protected_paths' (first at line 27); a key may appear only once in a mapping "
        "@ protected_paths",
        append="protected_paths: [.github/workflows]\nprotected_paths: []\n",
    ),
    case(
        "duplicate-mode-key",
        [("    validators: [gate, judge]\n", "    validators: [gate, judge]\n    tools: [read]\n")],
        "{p}:9: duplicate key 'tools' (first at line 7); a key may appear only once in a mapping @ modes[0].tools",
    ),
    case(
        "duplicate-tooling-key",
        [("tooling: {timeout: 60}", "tooling: {timeout: 60, timeout: 5}")],
        "{p}:21: duplicate key 'timeout' (first at line 21); a key may appear only once in a mapping "
        "@ validators[0].tooling.timeout",
    ),
    case(
        "unknown-top-level-key",
        None,
        "{p}:27: unknown key 'protected_path' (did you mean 'protected_paths'?); allowed: "
        + TOP_KEYS
        + " @ (top level)",
        append="protected_path: [LICENSE]\n",
    ),
    case(
        "unknown-mode-key",
        [("    validators: [gate, judge]\n", "    validatorz: [gate, judge]\n")],
        "{p}:8: unknown key 'validatorz' (did you mean 'validators'?); allowed: " + MODE_KEYS + " @ modes[0]",
    ),
    case(
        "unknown-validator-key",
        [("evaluation_phase: pre_execute", "evaluation_phse: pre_execute")],
        "{p}:20: unknown key 'evaluation_phse' (did you mean 'evaluation_phase'?); allowed: "
        + VALIDATOR_KEYS
        + " @ validators[0]",
    ),
    case(
        "timeout-as-string",
        [("tooling: {timeout: 60}", "tooling: {timeout: '10'}")],
        "{p}:21: expected a positive number of seconds, got str '10' @ validators[0].tooling.timeout",
    ),
    case(
        "timeout-negative",
        [("tooling: {timeout: 60}", "tooling: {timeout: -1}")],
        "{p}:21: expected a positive number of seconds, got int -1 @ validators[0].tooling.timeout",
    ),
    case(
        "timeout-zero",
        [("tooling: {timeout: 60}", "tooling: {timeout: 0}")],
        "{p}:21: expected a positive number of seconds, got int 0 @ validators[0].tooling.timeout",
    ),
    case(
        "coder-timeout-not-a-number",
        [("coder_config: {model: any/model}", "coder_config: {model: any/model, timeout: no}")],
        "{p}:10: expected a positive number of seconds, got str 'no' @ modes[0].coder_config.timeout",
    ),
    case(
        "max-iterations-zero",
        [("max_iterations: 5", "max_iterations: 0")],
        "{p}:26: expected an integer of at least 1, got 0 @ execution.max_iterations",
    ),
    case(
        "max-recovery-depth-negative",
        [("max_recovery_depth: 1", "max_recovery_depth: -3")],
        "{p}:26: expected an integer of at least 0, got -3 @ execution.max_recovery_depth",
    ),
    case(
        "max-total-fix-attempts-negative",
        [("max_total_fix_attempts: 1", "max_total_fix_attempts: -1")],
        "{p}:26: expected an integer of at least 0, got -1 @ execution.max_total_fix_attempts",
    ),
    case(
        "max-parallel-jobs-zero",
        [("max_total_fix_attempts: 1}", "max_total_fix_attempts: 1, max_parallel_jobs: 0}")],
        "{p}:26: expected an integer of at least 1, got 0 @ execution.max_parallel_jobs",
    ),
    case(
        "max-iterations-float",
        [("max_iterations: 5", "max_iterations: 3.9")],
        "{p}:26: expected an integer, got float 3.9 @ execution.max_iterations",
    ),
    case(
        "version-not-semver",
        [('version: "1.0.0"', "version: '7'")],
        "{p}:3: expected a version MAJOR.MINOR.PATCH such as '1.0.0', got '7' @ version",
    ),
    case(
        "version-a-number",
        [('version: "1.0.0"', "version: 1.0")],
        "{p}:3: expected a string, got float 1.0 @ version",
    ),
    case(
        "quorum-threshold-zero",
        None,
        "{p}:27: expected a fraction in (0, 1], got 0.0 @ quorum_threshold",
        append="quorum_threshold: 0\n",
    ),
    case(
        "quorum-threshold-above-one",
        None,
        "{p}:27: expected a fraction in (0, 1], got 1.5 @ quorum_threshold",
        append="quorum_threshold: 1.5\n",
    ),
    case(
        "policy-typo",
        None,
        "{p}:27: expected one of: unanimous, majority, quorum, any; got 'majorty' (did you mean 'majority'?) "
        "@ disagreement_policy",
        append="disagreement_policy: majorty\n",
    ),
    case(
        "phase-typo",
        [("evaluation_phase: post_execute", "evaluation_phase: post-execute")],
        "{p}:24: expected one of: pre_execute, post_execute; got 'post-execute' (did you mean 'post_execute'?) "
        "@ validators[1].evaluation_phase",
    ),
    case(
        "severity-cap-typo",
        [("    evaluation_phase: post_execute\n", "    evaluation_phase: post_execute\n    severity_cap: warning\n")],
        "{p}:25: expected one of: pass, warn, blocker; got 'warning' (did you mean 'warn'?) @ validators[1].severity_cap",
    ),
    case(
        "sandbox-not-a-choice",
        [("max_total_fix_attempts: 1}", "max_total_fix_attempts: 1, sandbox: no}")],
        "{p}:26: expected one of: auto, off; got 'no' @ execution.sandbox",
    ),
    case(
        "tools-a-string",
        [("    tools: [review, approve]", "    tools: review")],
        "{p}:14: expected a list, got str 'review' @ modes[1].tools",
    ),
    case(
        "renamed-key-with-block-value",
        [("modes:\n", "modes: []\nold_modes:\n")],
        "{p}:6: unknown key 'old_modes' (did you mean 'modes'?); allowed: " + TOP_KEYS + " @ (top level)",
    ),
    case(
        "deep-nesting",
        None,
        "{p}:27: nested more than 40 levels deep @ metadata" + "[0]" * 40,
        append=DEEP,
    ),
    case(
        "alias-bomb",
        None,
        "{p}:28: the document expands to more than 100000 values (aliases counted each time they are used); "
        "a protocol is never that large",
        append=ALIAS_BOMB,
    ),
    case(
        "yaml-syntax-error",
        [("    tools: [review, approve]", "    tools: [review, approve")],
        "{p}:15:15: YAML syntax error: expected ',' or ']', but got ':'",
        headline="{p}:15:15: YAML syntax error: expected ',' or ']', but got ':'",
    ),
    case(
        "recursive-alias",
        None,
        "{p}:28: an alias refers to a value that contains it @ metadata.loop[0]",
        append="metadata:\n  loop: &loop [*loop]\n",
    ),
    case(
        "huge-file",
        None,
        HUGE,
        append="# " + "x" * 1_000_000 + "\n",
        headline=HUGE,
    ),
    case(
        "not-a-mapping",
        [(BASE, "- just\n- a list\n")],
        "{p}:1: the protocol must be a mapping of fields, got a list",
        headline="{p}:1: the protocol must be a mapping of fields, got a list",
    ),
    # ---- well-formedness (needs the plugin host) -------------------------------------------
    case(
        "capability-typo",
        [("validate, dispatch, commit]", "validate, dispatc, commit]")],
        "CAP: {p}:7: mode 'producer' grants unknown capability 'dispatc' (did you mean 'dispatch'?) @ modes[0].tools[4]; "
        "known capabilities: " + CAPS,
        wf=True,
    ),
    case(
        "validator-type-typo",
        [
            (
                "    validator_type: marker\n    evaluation_phase: pre",
                "    validator_type: markr\n    evaluation_phase: pre",
            )
        ],
        "WF3: {p}:19: validator 'gate': no validator type named 'markr' is installed (did you mean 'marker'?); installed: "
        + VALIDATOR_TYPES
        + " (install the plugin that provides it, then check `snodo plugins`) @ validators[0].validator_type",
        wf=True,
    ),
    case(
        "coder-typo",
        [("    coder: marker-coder\n    coder_config", "    coder: marker-codr\n    coder_config")],
        "WF3: {p}:9: mode 'producer' coder: no coder named 'marker-codr' is installed (did you mean 'marker-coder'?); "
        "installed: " + CODERS + " (install the plugin that provides it, then check `snodo plugins`) @ modes[0].coder",
        wf=True,
    ),
    case(
        "predicate-typo",
        [("predicate: marker_pred", "predicate: marker_prd")],
        "WF5: constraint 'traced' at modes[0] (producer).constraints[0] names unknown predicate 'marker_prd' "
        "(did you mean 'marker_pred'?) (registered: " + PREDICATES + ")",
        wf=True,
    ),
    case(
        "tooling-key-typo",
        [("tooling: {timeout: 60}", "tooling: {timout: 60}")],
        "WF3: {p}:21: validator 'gate' (type marker): unknown tooling key 'timout' (did you mean 'timeout'?); the marker "
        "validator honours: command, timeout @ validators[0].tooling.timout",
        wf=True,
    ),
    case(
        "tooling-key-of-another-plugin",
        [('tooling: {command: "python -m pytest -q"}', "tooling: {mock_response: pass}")],
        "WF3: {p}:25: validator 'judge' (type marker): unknown tooling key 'mock_response'; the marker validator honours: "
        "command, timeout @ validators[1].tooling.mock_response",
        wf=True,
    ),
    case(
        "coder-config-typo",
        [("coder_config: {model: any/model}", "coder_config: {modle: any/model}")],
        "WF3: {p}:10: mode 'producer': coder 'marker-coder': unknown coder_config key 'modle' (did you mean 'model'?); "
        "the marker-coder coder honours: model @ modes[0].coder_config.modle",
        wf=True,
    ),
    case(
        "leftover-coder-config-for-mock",
        [("    coder: marker-coder\n    coder_config", "    coder: mock\n    coder_config")],
        "WF3: {p}:10: mode 'producer': coder 'mock': unknown coder_config key 'model'; the mock coder honours: files, "
        "delete @ modes[0].coder_config.model",
        wf=True,
    ),
    case(
        "dispatch-without-post-execute",
        [("    validators: [gate, judge]\n", "    validators: [gate]\n")],
        NO_POST,
        wf=True,
    ),
    case(
        "dispatch-without-pre-execute",
        [("    validators: [gate, judge]\n", "    validators: [judge]\n")],
        "WF3: mode 'producer' holds 'dispatch' but has no pre_execute validator to gate the work before it starts: "
        "every run in this mode would halt (validator_error) at pre_execute; add a pre_execute validator to the "
        "mode's validators",
        wf=True,
    ),
    case(
        "undeclared-validator",
        [("    validators: [gate, judge]\n", "    validators: [gaet, judge]\n")],
        "WF3: mode 'producer' names validator 'gaet', which is not declared (did you mean 'gate'?) "
        "(declared: gate, judge)",
        "WF3: mode 'producer' holds 'dispatch' but has no pre_execute validator to gate the work before it starts: "
        "every run in this mode would halt (validator_error) at pre_execute; add a pre_execute validator to the "
        "mode's validators",
        wf=True,
    ),
    case(
        "initial-mode-typo",
        [("initial_mode: producer", "initial_mode: produser")],
        "WF3: initial_mode 'produser' is not a declared mode (did you mean 'producer'?) (producer, reviewer)",
        wf=True,
    ),
    case(
        "transition-to-unknown-mode",
        [
            (
                "    coder: marker-coder\nvalidators:",
                "    coder: marker-coder\n    transitions: [{to: reviewr}]\nvalidators:",
            )
        ],
        "WF3: mode 'reviewer' has a transition to unknown mode 'reviewr' (did you mean 'reviewer'?)",
        wf=True,
    ),
    case(
        "exclusive-held-twice",
        [("validate, dispatch, commit]", "validate, dispatch, approve]")],
        "WF1: exclusive capability 'approve' is held by 2 modes: producer, reviewer (at most one mode may hold it)",
        wf=True,
    ),
    case(
        "duplicate-validator-id",
        [
            ("  - validator_id: judge\n", "  - validator_id: gate\n"),
            ("validators: [gate, judge]", "validators: [gate]"),
        ],
        "ID: validator_id 'gate' is declared more than once",
        NO_POST,
        "WF3: mode 'reviewer' names validator 'judge', which is not declared (declared: gate)",
        wf=True,
    ),
    case(
        "duplicate-mode-id",
        [("  - mode_id: reviewer", "  - mode_id: producer")],
        "ID: mode_id 'producer' is declared more than once",
        wf=True,
    ),
    case(
        "role-names-unknown-mode",
        None,
        "WF2: role 'maintainer' names unknown mode 'reviewers' (did you mean 'reviewer'?)",
        append="roles:\n  - {role_id: maintainer, modes: [reviewers]}\n",
        wf=True,
    ),
    case(
        "exclusive-tools-typo",
        None,
        "CAP: exclusive_tools names unknown capability 'comit' (did you mean 'commit'?); known capabilities: " + CAPS,
        append="exclusive_tools: [comit]\n",
        wf=True,
    ),
    case(
        "model-judge-without-model",
        [
            ("    validators: [gate, judge]\n", "    validators: [gate, judge, review]\n"),
            (
                "execution:",
                "  - {validator_id: review, validator_type: llm, evaluation_phase: post_execute}\nexecution:",
            ),
        ],
        "WF3: {p}:26: validator 'review' (type llm) is judged by a model but sets no `model`: it would report "
        "validator_error on every run of mode(s) producer; set `model` (e.g. openai/gpt-4o-mini) or remove it "
        "from those modes @ validators[2].model",
        wf=True,
    ),
    case(
        "majority-with-one-validator",
        [
            (
                "  - validator_id: judge\n    validator_type: marker\n    evaluation_phase: post_execute\n"
                '    tooling: {command: "python -m pytest -q"}\n',
                "",
            ),
            ("    validators: [gate, judge]\n", "    validators: [gate]\n"),
            ("    validators: [judge]\n", "    validators: [gate]\n"),
        ],
        NO_POST,
        "WF4: disagreement_policy 'majority' needs at least 2 validators, the protocol declares 1",
        append="disagreement_policy: majority\n",
        wf=True,
    ),
)
