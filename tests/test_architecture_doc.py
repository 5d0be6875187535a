"""docs/architecture.md's "where each rule lives" table points at code that exists, and each
row is proven by behaviour: a named test breaks the rule through a door other than the home
itself (the MCP server, the CLI, the engine, a plugin, the kit) and watches it refused."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*(?P<rule>[^|]+?)\s*\|\s*`(?P<file>snodo/[\w/]+\.py):(?P<name>[\w.]+)`\s*\|$")


def homes() -> list[tuple[str, str, str]]:
    text = ARCHITECTURE.read_text()
    section = text.split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    rows = [m for line in section.splitlines() if (m := ROW.match(line.strip()))]
    return [(m["rule"], m["file"], m["name"]) for m in rows]


def test_the_table_names_every_rule_the_design_promises() -> None:
    rules = " ".join(rule.lower() for rule, _, _ in homes())
    for needle in (
        "path guard",
        "child processes",
        "policy",
        "inv3",
        "token issue",
        "token consume",
        "audit append",
        "audit verify",
        "decision verification",
        "confinement",
        "in-place",
        "git",
        "test-run reader",
        "converter",
    ):
        assert needle in rules, needle
    # every row of the section parsed: a malformed row must not silently drop out
    section = ARCHITECTURE.read_text().split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    assert len(homes()) == sum(1 for line in section.splitlines() if line.startswith("| ") and "`snodo/" in line)


@pytest.mark.parametrize(("rule", "file", "name"), homes(), ids=[h[2] for h in homes()])
def test_each_home_exists(rule: str, file: str, name: str) -> None:
    module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    target: object = module
    for part in name.split("."):
        assert hasattr(target, part), f"{rule}: {file} has no {name}"
        target = getattr(target, part)
    assert callable(target) or name.isupper(), f"{rule}: {file}:{name} is neither a function nor a constant"


#: Each row's home → the behaviour tests that break its rule through another door.
PROOFS: dict[str, tuple[str, ...]] = {
    "Judge.judge": (
        "tests/judging/test_change_kinds.py::test_the_engine_path_judges_the_same_way",
        "tests/judging/test_change_kinds.py::test_an_edited_test_escalates_with_its_diff_and_the_base_version_runs",
    ),
    "read": (
        "tests/judging/test_endings.py::test_a_process_that_ends_early_or_lies_does_not_pass",
        "tests/judging/test_record.py::test_a_line_from_a_second_writer_is_refused",
    ),
    "split": (
        "tests/judging/test_change_kinds.py::test_a_harness_change_with_honest_source_escalates_whatever_the_policy",
    ),
    "added_findings": ("tests/judging/test_scan.py::test_steering_source_is_found",),
    "check_branch": (
        "tests/engine/test_run_branch.py::test_an_invalid_name_is_refused_before_anything_runs",
        "tests/engine/test_run_branch.py::test_an_existing_branch_is_refused_and_left_as_it_is",
    ),
    "RefusalWatch.settle": (
        "tests/sandbox/test_refusals_evidence.py::test_a_coders_reported_refusals_are_audited_and_shown",
        "tests/sandbox/test_refusals_evidence.py::test_run_tests_over_mcp_audits_and_says_what_the_sandbox_refused",
    ),
    "PathGuard.check_mutation": ("tests/mcp/test_mcp_governance.py::test_snodo_is_protected_however_it_is_spelt",),
    "InPlaceWatch.judge": (
        "tests/engine/test_engine_inplace_guard.py::test_in_place_attack_halts_blocker_and_leaves_the_checkout_as_it_was",
    ),
    "run_process": (
        "tests/sandbox/test_attacks_host.py::test_no_process_outlives_the_run",
        "tests/mcp/test_mcp_cancel.py::test_a_cancelled_run_tests_leaves_no_process_behind",
    ),
    "confined": ("tests/sandbox/test_attacks_mcp.py::test_conftest_written_by_the_agent_cannot_touch_governance",),
    "confined_environment": ("tests/sandbox/test_attacks_host.py::test_environment_is_an_allowlist",),
    "probe": (
        "tests/sandbox/test_probe_record.py::test_a_second_process_skips_the_probe_until_the_program_changes",
        "tests/sandbox/test_probe_record.py::test_a_stale_record_is_no_verdict_and_is_dropped",
    ),
    "reap_adopted": ("tests/sandbox/test_reaping.py::test_a_confined_commands_cpu_counts_in_snodos_tree",),
    "program": ("tests/sandbox/test_machinery.py::test_a_failing_hook_that_attempts_the_forgery_is_a_blocker",),
    "BoundedOutput": ("tests/sandbox/test_attacks_host.py::test_a_huge_line_without_newline_is_bounded",),
    "missing": ("tests/sandbox/test_confinement_record.py::test_the_gaps_are_said_plainly",),
    "run_phase": (
        "tests/governance/test_validate_cli.py::test_failing_suite_is_a_blocker_and_missing_command_a_validator_error",
    ),
    "uncommitted": (
        "tests/governance/test_concurrent_phase.py::test_the_validators_of_a_phase_share_one_read_of_the_tree_state",
        "tests/governance/test_served_status.py::test_a_served_project_reports_each_change_in_the_verdict",
        "tests/governance/test_served_status.py::test_a_same_size_rewrite_with_its_mtime_set_back_is_seen",
    ),
    "classify": ("tests/mcp/test_mcp_governance.py::test_validator_error_issues_nothing_and_never_says_authorize",),
    "authorisation_refusals": ("tests/mcp/test_mcp_governance.py::test_propose_adjudicate_applies_the_one_inv3_rule",),
    "validate_task": (
        "tests/mcp/test_mcp_governance.py::test_dispatch_after_pass_runs_the_engine_and_consumes_both_tokens",
    ),
    "AGENT_INSTRUCTION": (
        "tests/mcp/test_mcp_governance.py::test_blocker_issues_nothing",
        "tests/governance/test_validate_cli.py::test_failing_suite_is_a_blocker_and_missing_command_a_validator_error",
    ),
    "TokenService.issued": ("tests/governance/test_validate_cli.py::test_pass_records_a_token_and_audits",),
    "TokenService.consume": (
        "tests/mcp/test_mcp_governance.py::test_dispatch_never_consumes_a_token_of_another_task_or_spec",
    ),
    "AuditLog.append": ("tests/state/test_audit.py::test_eight_processes_append_4000_events",),
    "AuditLog.verify": ("tests/state/test_audit.py::test_tampering_is_detected_by_audit_verify",),
    "DecisionStore.verified_records": (
        "tests/governance/test_validate_cli.py::test_unknown_decision_and_tampered_record",
    ),
    "parse_allowed_signers": (
        "tests/evidence/test_verify_e2e.py::test_an_attestation_by_a_key_not_on_main_is_refused_even_if_the_branch_lists_it",
    ),
    "attest_run": (
        "tests/evidence/test_attest_resume.py::test_an_approved_escalation_resumed_to_completion_is_attested",
    ),
    "verify": (
        "tests/evidence/test_verify_e2e.py::test_the_docs_pre_receive_hook_refuses_unattested_work_and_accepts_governed_work",
    ),
    "ProposalStore.add": (
        "tests/mcp/test_mcp_governance.py::test_escalate_persists_the_decision_then_authorize_then_pass",
    ),
    "JobRunner.execute": (
        "tests/engine/test_job_records.py::test_a_burst_leaves_one_process_per_slot_and_a_full_queue_refuses",
    ),
    "run_git": ("tests/workspace/test_gitrun_hardening.py::test_the_agents_git_tools_are_hardened_the_same_way",),
    "GitMetaWatch": (
        "tests/sandbox/test_attacks_git.py::test_a_nested_repository_made_by_confined_code_is_refused_and_removed",
    ),
    "run_tests": ("tests/workspace/test_testrun_reader.py::test_a_tests_own_output_cannot_fake_the_tally",),
    "project_python": (
        "tests/realproj/test_interpreter_discovery.py::test_a_symlink_leading_out_of_the_project_is_refused",
    ),
    "restart_log": ("tests/realproj/test_audit_restart.py::test_a_deleted_log_then_restart_records_the_lost_head",),
    "runtime_dir": (
        "tests/realproj/test_runtime_state.py::test_git_clean_leaves_the_state_and_the_next_run_works",
        "tests/realproj/test_runtime_state.py::test_a_linked_worktree_shares_the_main_checkouts_log",
        "tests/sandbox/test_confinement.py::test_runtime_state_in_the_common_git_dir_is_out_of_reach",
    ),
    "exit_code_for": ("tests/cli/test_cli_json_contract.py::test_bad_arguments_answer_in_json_with_exit_4",),
    "restore": (
        "tests/sandbox/test_pool_reuse.py::test_the_next_run_in_the_same_slot_sees_nothing_of_the_last",
        "tests/engine/test_pool_restore.py::test_leftovers_git_cannot_see_or_that_hide_behind_a_link_are_gone",
        "tests/engine/test_pool_restore.py::test_a_same_size_rewrite_with_its_mtime_set_back_is_undone",
    ),
    "read_only_paths": (
        "tests/sandbox/test_layout.py::test_a_workspace_git_cannot_list_is_refused_not_left_unprotected",
    ),
    "CONVERTER": ("tests/protocol/test_bad_protocols.py::test_bad_protocol_is_refused_alike_before_anything_runs",),
    "check_settings": (
        "tests/conformance/test_settings_one_rule.py::test_a_mistyped_validator_setting_is_refused_alike_by_loader_plugin_and_kit",
        "tests/conformance/test_settings_one_rule.py::test_a_mistyped_coder_setting_is_refused_alike_by_loader_engine_and_coder",
    ),
    "freeze": (
        "tests/test_frozen_plugin_inputs.py::test_every_plugin_input_refuses_mutation_while_validators_run_concurrently",
    ),
    "PluginHost.caller_for": (
        "tests/test_plugin_host_pluggy.py::test_wrappers_and_tracing_see_every_hook_call_of_a_run",
    ),
    "PluginHost._dispatch": (
        "tests/test_plugin_extension_shape.py::test_each_name_is_answered_by_its_own_plugin_only_inside_every_wrapper",
    ),
}


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_row_is_proven_by_a_behaviour_test_that_exists() -> None:
    """A row without a behaviour test, or naming one that is gone, fails here: write the test
    that breaks the rule through a second door, then name it in PROOFS."""
    names = {name for _, _, name in homes()}
    assert sorted(names - set(PROOFS)) == [], "rows with no behaviour test named in PROOFS"
    assert sorted(set(PROOFS) - names) == [], "PROOFS names rows the table no longer has"
    missing = [
        proof
        for proofs in PROOFS.values()
        for proof in proofs
        if proof.split("::")[1] not in _test_functions(ROOT / proof.split("::")[0])
    ]
    assert missing == []


def _picture_names() -> set[str]:
    """The packages (``name/``) and modules (``name.py``) the picture's rows start with."""
    text = ARCHITECTURE.read_text()
    picture = text.split("```\n", 2)[1]
    names: set[str] = set()
    for line in picture.splitlines():
        head = re.match(r"^\s*((?:(?:\w+/|\w+\.py)(?:\s+|$))*)", line)
        names |= {m.rstrip("/").removesuffix(".py") for m in head[1].split()} if head else set()
    return names


def test_the_picture_shows_exactly_the_layers_import_linter_checks() -> None:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"] == "layers point down")["layers"]
    placed = {name.strip() for layer in layers for name in re.split(r"[:|]", layer)} - {"__main__"}
    assert _picture_names() == placed
    children = {p.stem for p in (ROOT / "snodo").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert placed <= children
    assert children - placed == {"__init__", "__main__"}
