"""The event codes ``--allow-event`` may name: the list matches what the families' rules emit, and a code no event
has is refused before anything is read, with the code it most likely meant."""

from __future__ import annotations

import pytest
from event_code_scan import emitted_codes

from ckptdiff.families.event_codes import EVENT_CODES
from fixtures.generate import HERE as FIXTURES

DRAFTER = str(FIXTURES / "kimi-k2-eagle3-published")


def test_the_list_holds_every_code_the_rules_emit_at_its_severities():
    assert {code: set(severities) for code, severities in EVENT_CODES.items()} == emitted_codes()


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("aux_id_default", "no engine event has this code (did you mean aux_ids_default?)"),
        ("lm_head_randm", "no engine event has this code (did you mean lm_head_random?)"),
        ("zzzz", "no engine event has this code (the codes are listed in docs/engines.md#event-codes)"),
        (
            "unknown_name",
            "is an error event, which fails a conversion whatever is allowed "
            "(--allow-event accepts warnings: the output loads, but not as trained)",
        ),
        (
            "aux_ids",
            "is an info event, which never stops a conversion "
            "(--allow-event accepts warnings: the output loads, but not as trained)",
        ),
    ],
)
def test_convert_refuses_an_allow_event_code_that_changes_nothing_before_reading(run_cli, tmp_path, code, says):
    out = tmp_path / "out"
    result = run_cli("convert", str(tmp_path / "no-such-drafter"), str(out), "--to", "sglang", "--allow-event", code)
    assert result.returncode == 2 and result.stdout == "" and not out.exists()
    assert result.stderr == f"ckptdiff: --allow-event {code}: {says}\n"


@pytest.mark.parametrize("blank", ["", " "])
def test_convert_refuses_a_blank_allow_event_code_naming_it_as_typed(run_cli, tmp_path, blank):
    """`--allow-event "$CODE"` with CODE unset read "--allow-event : no engine event has this code"."""
    out = tmp_path / "out"
    result = run_cli("convert", str(tmp_path / "no-such-drafter"), str(out), "--to", "sglang", "--allow-event", blank)
    assert result.returncode == 2 and result.stdout == "" and not out.exists()
    assert result.stderr == (
        f"ckptdiff: --allow-event {blank!r}: is empty (give a warning's code, e.g. lm_head_random)\n"
    )


def test_convert_takes_a_warnings_code_and_says_when_the_check_never_raised_it(run_cli, tmp_path):
    """A code the plan's check never raised allowed nothing: a typo of another warning's code, or a rule copied
    from another drafter's run. The plan says so (the comparison's gate calls such a rule unmatched)."""
    result = run_cli(
        "convert", DRAFTER, str(tmp_path / "out"), "--to", "sglang", "--plan", "--allow-event", "config_ignored"
    )
    assert result.returncode == 0, result.stderr
    assert "warning: --allow-event config_ignored: sglang's check raised no such event (allowed nothing)" in (
        result.stdout
    )


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("sglang:lm_head_randm", "no engine event has the code lm_head_randm (did you mean lm_head_random?)"),
        ("sglng:lm_head_random", "no engine is named sglng (did you mean sglang?)"),
        (
            "vllm:lm_hed_*",
            "no engine event's code matches lm_hed_* (the codes are listed in docs/engines.md#event-codes)",
        ),
        ("x*:lm_head_random", "no engine is named x* (the engines are sglang, vllm, trtllm)"),
        ("sglang:aux_ids", "aux_ids is an info event, which never fails the gate"),
    ],
)
def test_the_gate_refuses_an_allow_event_rule_that_can_match_nothing_before_reading(run_cli, tmp_path, rule, says):
    missing = str(tmp_path / "no-such-drafter")
    result = run_cli(missing, "--engine", "sglang", "--allow-event", rule, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"ckptdiff: --allow-event: {rule!r}: {says}\n"

    (tmp_path / "ckptdiff.toml").write_text(f'allow-event = ["{rule}"]\n')
    result = run_cli(missing, "--engine", "sglang", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.endswith(f": allow-event: {rule!r}: {says}\n")


@pytest.mark.parametrize(
    "rule", ["sglang:lm_head_random", "*:lm_head_random", "sglang:*", "*:lm_head_*", "vllm:unknown_name"]
)
def test_the_gate_takes_rules_that_name_known_engines_and_codes(run_cli, rule):
    result = run_cli(str(FIXTURES / "kimi-k2-eagle3-no-lm-head"), "--engine", "sglang", "--allow-event", rule)
    assert result.returncode in (0, 1) and "allow-event" in result.stdout, result.stderr
