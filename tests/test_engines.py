"""--engine: each serving engine's EAGLE-3 loader replayed on small checkpoints built from the real failures in
../shared/reference/engines.md (the table of user reports), end to end from the CLI and through the library."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from report_json import json_document

from ckptdiff.formats.messages import event_message, finding_message, rules_applied
from ckptdiff.pipeline import compare_specs
from ckptdiff.policy import Policy
from ckptdiff.report import Finding
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import eagle3_tensors, small_drafter_config, write_config, write_drafter, write_safetensors

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")


def drafter(folder: Path, *, tensors: list[Any] | None = None, with_embed: bool = False, **config: Any) -> str:
    """A small SpecForge-layout drafter (the published Kimi-K2 one scaled down), with config overrides."""
    settings = small_drafter_config(**config)
    specs = tensors if tensors is not None else eagle3_tensors(settings, with_embed=with_embed)
    return str(write_drafter(folder, settings, with_embed=with_embed, tensors=specs))


def base(folder: Path, *, hidden: int = 64, layers: int = 61, vocab: int = 1024, multimodal: bool = False) -> str:
    """A target model's config.json (Kimi-K2-like text settings) and its embedding, small."""
    text = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "torch_dtype": "bfloat16",
    }
    config = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": text}
    write_config(folder, config if multimodal else text)
    prefix = "language_model." if multimodal else ""
    write_safetensors(
        folder / "model.safetensors",
        [
            (f"{prefix}model.embed_tokens.weight", "BF16", [vocab, hidden]),
            (f"{prefix}lm_head.weight", "BF16", [vocab, hidden]),
        ],
    )
    return str(folder)


def result(report: Any, engine: str, side: str = "A") -> Any:
    return next(r for r in report.engines if r.engine == engine and r.side == side)


def codes(engine_result: Any) -> dict[str, str]:
    return {event.code: event.severity for event in engine_result.events}


def check(spec: str, *engines: str, base_spec: str | None = None, policy: Policy | None = None) -> Any:
    return compare_specs(spec, None, engines=engines or ("all",), base=base_spec, policy=policy)


# --- the published layout: no false alarm ---------------------------------------------------------------


def test_the_published_drafter_loads_under_every_engine(tmp_path, run_cli):
    done = run_cli(PUBLISHED, "--engine", "all", "--base", base(tmp_path / "base"), "--format", "json")
    assert done.returncode == 0, done.stdout
    document = json.loads(done.stdout)
    assert [(e["engine"], e["side"], e["outcome"]) for e in document["engines"]] == [
        ("sglang", "A", "loads"),
        ("vllm", "A", "loads"),
        ("trtllm", "A", "loads"),
    ]
    assert document["b"] is None and document["verdict"] == "compatible" and document["tensors"] == []


def test_vllm_ignores_nested_aux_ids_and_says_on_which_targets_that_is_right_until_the_base_decides(tmp_path):
    """vLLM 0.33.0's model runner reads the top-level ids, then eagle_config.layer_ids: SpecForge's nested
    eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58] is ignored, and the default capture is used. Those
    ids are the default capture's indices of a 61-layer model (the inputs of layers 2, 30, 58), so without a base
    that is right on a 61-layer target of any class: a conditional verdict, not a warning."""
    alone = result(check(PUBLISHED, "vllm"), "vllm")
    notice = next(e for e in alone.events if e.code == "aux_capture_conditional")
    assert alone.outcome == "loads" and notice.severity == "info"
    assert "ignores eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58]" in event_message(notice)
    assert "a 61-layer model of any class it knows" in event_message(notice)
    (condition,) = alone.conditions
    families = {(t.family, t.layers) for t in condition.targets}
    assert families >= {("DeepSeek-V2/V3", ((61, 61),)), ("Llama", ((61, 61),))}
    # against the 61-layer Kimi-K2 base the default (2, 30, 58) is what the drafter names: decided, information only
    with_base = result(check(PUBLISHED, "vllm", base_spec=base(tmp_path / "base")), "vllm")
    assert with_base.outcome == "loads" and codes(with_base)["aux_ids_default"] == "info" and not with_base.conditions


def test_both_sides_are_simulated_and_engine_prose_moves_out_of_the_findings(tmp_path):
    plain = compare_specs(PUBLISHED, OURS)
    assert "embed_tokens_carried" in {f.code for f in plain.findings} and plain.engines == ()
    report = compare_specs(PUBLISHED, OURS, engines=("sglang", "vllm"), base=base(tmp_path / "base"))
    assert [(r.engine, r.side, r.outcome) for r in report.engines] == [
        ("sglang", "A", "loads"),
        ("sglang", "B", "loads"),
        ("vllm", "A", "loads"),
        ("vllm", "B", "loads"),
    ]
    assert "embed_tokens_carried" not in {f.code for f in report.findings}
    # what each engine does with B's own embed_tokens is now its event
    assert codes(result(report, "sglang", "B"))["embed_tokens_overridden"] == "info"
    assert codes(result(report, "vllm", "B"))["embed_tokens_own"] == "info"
    assert report.verdict == "compatible"


# --- the reference's failure table -------------------------------------------------------------------------


def test_no_lm_head_with_draft_vocab_size_is_a_random_head_under_sglang(tmp_path, run_cli):
    """sglang PR#27908: nvidia/Kimi-K2.6-Eagle3 without lm_head, draft_vocab_size set: accept length 1.00."""
    settings = small_drafter_config()
    spec = drafter(
        tmp_path / "d", tensors=[t for t in eagle3_tensors(settings, with_embed=False) if t[0] != "lm_head.weight"]
    )
    report = check(spec, "sglang")
    sglang = result(report, "sglang")
    assert sglang.outcome == "degraded" and codes(sglang)["lm_head_random"] == "warning"
    event = next(e for e in sglang.events if e.code == "lm_head_random")
    assert (
        "lm_head.weight" in event_message(event)
        and "RANDOM" in event_message(event)
        and "llama_eagle3.py" in event_message(event)
    )
    done = run_cli(spec, "--engine", "sglang")
    assert done.returncode == 1
    assert "sglang A: degraded — 1 weight random (lm_head.weight)" in done.stdout


def test_speculators_layer_names_load_under_sglang_and_vllm(tmp_path):
    """speculators writes layers.0.*; SGLang 0.5.23's llama_eagle3 maps midlayer to layers.0 and tries
    model.{name}, so both namings reach model.layers.0.*."""
    settings = small_drafter_config()
    renamed = [
        (name.replace("midlayer.", "layers.0."), dtype, shape)
        for name, dtype, shape in eagle3_tensors(settings, with_embed=False)
    ]
    report = check(drafter(tmp_path / "d", tensors=renamed), "sglang", "vllm")
    sglang, vllm = result(report, "sglang"), result(report, "vllm")
    assert sglang.outcome == "loads"
    # vLLM only ignores the nested aux ids: right on a 61-layer DeepSeek-V2/V3 target (no base to decide)
    assert vllm.outcome == "loads" and vllm.conditions and "aux_capture_conditional" in codes(vllm)
    # every tensor and every parameter ends somewhere
    assert dict((name, fate) for name, fate, _ in sglang.tensors)["layers.0.mlp.up_proj.weight"] == "loaded"
    assert dict(sglang.parameters)["model.layers.0.self_attn.qkv_proj.weight[q]"] == "loaded"
    fates = {name: (fate, param) for name, fate, param in vllm.tensors}
    # vLLM's own naming: only the model. prefix and the q/k/v stacking
    assert fates["layers.0.self_attn.q_proj.weight"] == ("loaded", "model.layers.0.self_attn.qkv_proj.weight[q]")
    assert fates["d2t"] == ("renamed", "draft_id_to_target_id") and fates["t2d"] == ("skipped", None)
    assert fates["norm.weight"] == ("loaded", "model.norm.weight")
    assert dict(vllm.parameters)["model.embed_tokens.weight"] == "from_target"


def test_vllm_renames_specforge_names():
    vllm = result(check(PUBLISHED, "vllm"), "vllm")
    fates = {name: (fate, param) for name, fate, param in vllm.tensors}
    assert fates["midlayer.self_attn.q_proj.weight"] == ("renamed", "model.layers.0.self_attn.qkv_proj.weight[q]")
    assert all(fate in ("loaded", "from_target") for _, fate in vllm.parameters)


def test_hf_style_model_prefixed_names_fail_under_vllm_and_are_skipped_by_sglang(tmp_path):
    """A drafter saved with vLLM's in-memory names (model.layers.0.*): vLLM prefixes model. once more."""
    settings = small_drafter_config()
    kept = ("lm_head.weight", "d2t", "t2d")
    prefixed = [
        (name if name in kept else "model." + name.replace("midlayer.", "layers.0."), dtype, shape)
        for name, dtype, shape in eagle3_tensors(settings, with_embed=False)
    ]
    report = check(drafter(tmp_path / "d", tensors=prefixed), "vllm", "sglang")
    vllm = result(report, "vllm")
    assert vllm.outcome == "fails"
    event = next(e for e in vllm.events if e.tensor == "model.layers.0.self_attn.q_proj.weight")
    assert "There is no module or parameter named" in event_message(event) and "model.model.layers.0" in event_message(
        event
    )
    assert "AutoWeightsLoader" in event_message(event)
    # SGLang tries each name as it is first: model.layers.0.* is its own parameter name
    assert result(report, "sglang").outcome == "loads"


def test_aux_ids_at_the_top_level_are_ignored_by_sglang_and_read_by_vllm(tmp_path):
    spec = drafter(
        tmp_path / "d", eagle_config={"use_aux_hidden_state": True}, eagle_aux_hidden_state_layer_ids=[2, 30, 58]
    )
    report = check(spec, "sglang", "vllm", base_spec=base(tmp_path / "base"))
    sglang, vllm = result(report, "sglang"), result(report, "vllm")
    default = next(e for e in sglang.events if e.code == "aux_ids_default")
    assert "ignores eagle_aux_hidden_state_layer_ids=[2, 30, 58]" in event_message(default)
    assert "outputs of target layers [1, 29, 57]" in event_message(default)  # its default for the 61-layer base
    # ... which are the layers those ids name in vLLM's convention: nothing lost, information only
    assert default.severity == "info" and sglang.outcome == "loads"
    other = drafter(tmp_path / "o", eagle_config={}, eagle_aux_hidden_state_layer_ids=[5, 30, 58])
    sglang = result(check(other, "sglang", base_spec=base(tmp_path / "base")), "sglang")
    assert sglang.outcome == "degraded" and codes(sglang)["aux_ids_default"] == "warning"
    read = next(e for e in vllm.events if e.code == "aux_ids")
    assert (
        event_message(read).startswith("reads eagle_aux_hidden_state_layer_ids=[2, 30, 58]") and vllm.outcome == "loads"
    )


def test_a_non_eagle3_architecture_fails_with_each_engines_error(tmp_path, run_cli):
    """AngelSlim#39 (SGLang KeyError in qwen3.py), and vLLM's registry refusal of the name EAGLEConfig makes."""
    spec = drafter(tmp_path / "d", architectures=["MistralForCausalLM"])
    report = check(spec, "sglang", "vllm")
    sglang, vllm = result(report, "sglang"), result(report, "vllm")
    assert sglang.outcome == vllm.outcome == "fails"
    assert "KeyError: 'midlayer.self_attn.qkv_proj.weight'" in event_message(sglang.events[0])
    assert "Model architectures ['Eagle3MistralForCausalLM'] are not supported for now." in event_message(
        vllm.events[0]
    )
    assert "registry.py" in event_message(vllm.events[0])
    done = run_cli(spec, "--engine", "sglang", "--engine", "vllm")
    assert done.returncode == 1 and "sglang A: fails" in done.stdout and "vllm A: fails" in done.stdout


def test_a_drafter_narrower_than_its_target_without_an_embedding_fails_under_vllm(tmp_path):
    """vllm#18906: draft hidden != target hidden and no embed_tokens of its own. vLLM 0.33.0 shares the target's
    embedding with no width check (maybe_share_target_embed), so the first forward fails (the oracle agrees)."""
    settings = small_drafter_config(target_hidden_size=128)
    tensors = [
        ("fc.weight", dtype, [64, 3 * 128]) if name == "fc.weight" else (name, dtype, shape)
        for name, dtype, shape in eagle3_tensors(settings, with_embed=False)
    ]
    spec = drafter(tmp_path / "d", tensors=tensors, target_hidden_size=128)
    report = check(spec, "vllm", "sglang", base_spec=base(tmp_path / "base", hidden=128))
    vllm = result(report, "vllm")
    assert vllm.outcome == "fails" and dict(vllm.parameters)["model.embed_tokens.weight"] == "from_target"
    event = next(e for e in vllm.events if e.code == "embed_width_mismatch")
    assert "128 wide" in event_message(event) and "hidden_size=64" in event_message(event)
    # SGLang's fc takes 3 x target_hidden_size, and with target_hidden_size != hidden_size set_embed keeps the
    # drafter's own embedding, which it does not have
    sglang = result(report, "sglang")
    assert sglang.outcome == "degraded" and dict(sglang.parameters)["model.embed_tokens.weight"] == "random"


def test_aux_ids_written_for_sglang_read_one_layer_early_by_vllm(tmp_path):
    """vllm PR#43671: a head trained with SGLang's "output of layer k" ids, served by vLLM."""
    spec = drafter(
        tmp_path / "d", eagle_config={"use_aux_hidden_state": True}, eagle_aux_hidden_state_layer_ids=[1, 29, 57]
    )
    report = check(spec, "vllm", base_spec=base(tmp_path / "base"))
    event = next(e for e in result(report, "vllm").events if e.code == "aux_ids_convention")
    assert event.severity == "warning" and result(report, "vllm").outcome == "degraded"
    assert "SGLang's convention" in event_message(event) and "vLLM's convention" in event_message(event)
    assert "captures the outputs of target layers [0, 28, 56] on this 61-layer" in event_message(event)
    assert "name the outputs of layers [1, 29, 57]" in event_message(event)
    # the same ids where SGLang reads them
    nested = drafter(tmp_path / "n", eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
    sglang = result(check(nested, "sglang", base_spec=base(tmp_path / "base")), "sglang")
    assert sglang.outcome == "loads" and "aux_ids_convention" not in codes(sglang)


def test_the_target_settings_come_from_text_config_of_a_multimodal_base(tmp_path):
    spec = drafter(tmp_path / "d", eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 70]})
    report = check(spec, "sglang", base_spec=base(tmp_path / "base", multimodal=True))
    out_of_range = next(e for e in result(report, "sglang").events if e.code == "aux_id_out_of_range")
    assert "never captured from a 61-layer target" in event_message(out_of_range)
    assert result(report, "sglang").outcome == "fails"


# --- CLI, formats, config file, policy ---------------------------------------------------------------------


def test_one_spec_without_an_engine_is_a_usage_error(run_cli):
    done = run_cli(PUBLISHED)
    assert done.returncode == 2 and "Missing argument 'B': give B to compare A with, or --engine NAME" in done.stderr


def test_table_markdown_and_junit_show_one_line_per_engine_and_side(tmp_path, run_cli):
    settings = small_drafter_config()
    spec = drafter(
        tmp_path / "d", tensors=[t for t in eagle3_tensors(settings, with_embed=False) if t[0] != "lm_head.weight"]
    )
    table = run_cli(PUBLISHED, spec, "--engine", "sglang").stdout
    assert "engines:\n  sglang A: loads\n" in table
    headline = "  sglang B: degraded — 1 weight random (lm_head.weight)\n"
    assert headline + "    warning [lm_head_random] lm_head.weight is missing" in table
    assert table.rstrip().endswith(
        "incompatible: 1 error (only_in_a lm_head.weight), 1 warning (sglang B lm_head_random), 14 match;"
        " sglang A loads (conditional on the target), sglang B degraded (conditional on the target)"
    )
    markdown = run_cli(PUBLISHED, spec, "--engine", "sglang", "--format", "markdown").stdout
    assert "### Engines" in markdown and "- **sglang B: degraded — 1 weight random (lm_head.weight)** ⚠️" in markdown
    junit = ET.fromstring(run_cli(PUBLISHED, spec, "--engine", "sglang", "--format", "junit").stdout)
    cases = {case.get("name"): case for case in junit.iter("testcase") if case.get("classname") == "engines"}
    assert set(cases) == {"sglang A", "sglang B"}
    assert cases["sglang B"].find("failure").get("type") == "degraded" and cases["sglang A"].find("failure") is None


def test_json_engines_schema(tmp_path, run_cli):
    document = json.loads(run_cli(PUBLISHED, OURS, "--engine", "vllm", "--format", "json").stdout)
    assert document["schema"] == "ckptdiff/report/v1"
    entry = document["engines"][1]
    assert {"engine", "side", "outcome", "events"} <= set(entry) and entry["side"] == "B"
    for event in entry["events"]:
        assert {"severity", "code", "tensor", "message", "wording"} <= set(event)
        assert set(event) <= {"severity", "code", "tensor", "message", "wording", "params", "source", "allowed_by"}
        assert event["severity"] in ("error", "warning", "info") and isinstance(event["tensor"], (str, type(None)))
    assert "engines" not in json.loads(run_cli(PUBLISHED, OURS, "--format", "json").stdout)


def test_config_file_engines_and_allowed_events(tmp_path, run_cli):
    settings = small_drafter_config()
    spec = drafter(
        tmp_path / "d", tensors=[t for t in eagle3_tensors(settings, with_embed=False) if t[0] != "lm_head.weight"]
    )
    (tmp_path / "ckptdiff.toml").write_text('engine = ["sglang"]\n')
    done = run_cli(spec, cwd=tmp_path)
    assert done.returncode == 1 and "sglang A: degraded" in done.stdout
    (tmp_path / "ckptdiff.toml").write_text('engine = ["sglang"]\nallow-event = ["sglang:lm_head_random"]\n')
    done = run_cli(spec, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "--allow-event sglang:lm_head_random (from ckptdiff.toml): 1 engine event accepted" in done.stdout
    assert "sglang A: degraded — 1 weight random (lm_head.weight)" in done.stdout  # the outcome is still told as it is
    (tmp_path / "ckptdiff.toml").write_text('engine = ["tgi"]\n')
    assert "'tgi' is not an engine" in run_cli(spec, cwd=tmp_path).stderr


def test_an_allowed_event_passes_the_gate_from_the_command_line(tmp_path, run_cli):
    settings = small_drafter_config()
    spec = drafter(
        tmp_path / "d", tensors=[t for t in eagle3_tensors(settings, with_embed=False) if t[0] != "lm_head.weight"]
    )
    assert run_cli(spec, "--engine", "sglang", "--allow-event", "*:lm_head_random").returncode == 0
    assert run_cli(spec, "--engine", "sglang", "--allow-event", "vllm:lm_head_random").returncode == 1
    assert run_cli(spec, "--engine", "sglang", "--allow-event", "lm_head_random").returncode == 2


# --- the Report's state is derived -------------------------------------------------------------------------


def test_verdict_counts_and_rule_texts_follow_what_the_report_holds():
    report = compare_specs(PUBLISHED, OURS, policy=Policy(fail_on="warning"))
    assert report.verdict == "compatible" and rules_applied(report) == []
    warned = replace(report, findings=(*report.findings, Finding("warning", "values_changed", "…")))
    assert warned.verdict == "incompatible"
    assert rules_applied(warned) == ["fail_on='warning': 1 warning finding fails the gate"]  # a Policy from Python
    fewer = replace(report, tensors=report.tensors[:3])
    assert sum(fewer.counts.values()) == 3 and json_document(report)["verdict"] == "compatible"


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_every_rule_cites_its_engine_file_and_commit(engine):
    from ckptdiff.families.eagle3.engines import get_engine

    rules = get_engine(engine)
    assert rules.name == engine
    events = [rules.unregistered, rules.aux_ids.default_event]
    for loader in rules.loaders:
        events += [loader.unknown, loader.shape_error, *(d.event for d in loader.drops)]
        events += [case.then for param in loader.params for case in (*param.absent, *param.loaded)]
    for event in events:
        assert event.source.repo.count("/") == 1 and len(event.source.commit) >= 7 and event.source.path


def test_a_speculators_format_drafter_is_vllms(tmp_path):
    """The speculators library's format: settings under transformer_layer_config, layers.0.*, ids at the top."""
    inner = {
        k: v
        for k, v in small_drafter_config().items()
        if k not in ("architectures", "eagle_config", "draft_vocab_size")
    }
    config = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 256,
        "transformer_layer_config": inner,
        "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
        "norm_before_residual": False,
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": "moonshotai/Kimi-K2-Instruct", "architectures": ["DeepseekV3ForCausalLM"]},
        },
    }
    tensors = [
        (name.replace("midlayer.", "layers.0."), dtype, shape)
        for name, dtype, shape in eagle3_tensors(small_drafter_config(), with_embed=True)
    ]
    folder = tmp_path / "speculators"
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", tensors)
    report = check(str(folder))
    assert result(report, "vllm").outcome == "loads"
    assert result(report, "sglang").outcome == "fails" and result(report, "trtllm").outcome == "fails"
    assert "EAGLE3Speculator" in event_message(result(report, "trtllm").events[0])
    # the adapter's default differs from the library's: a config that leaves the key out is read otherwise
    config.pop("norm_before_residual")
    write_config(folder, config)
    vllm = result(check(str(folder), "vllm"), "vllm")
    assert vllm.outcome == "loads" and codes(vllm)["config_default_differs"] == "info"
    # vLLM validates speculators_config when the checkpoint is served as the model, not as a drafter
    del config["speculators_config"]["proposal_methods"]
    write_config(folder, config)
    vllm = result(check(str(folder), "vllm"), "vllm")
    assert vllm.outcome == "degraded" and vllm.events[0].code == "speculators_config_invalid"
    assert "ValueError: Invalid speculators config structure" in event_message(vllm.events[0])
    assert "vllm serve" in event_message(vllm.events[0])
    # an architecture its adapter cannot build is refused either way
    config["transformer_layer_config"]["model_type"] = "mistral"
    write_config(folder, config)
    vllm = result(check(str(folder), "vllm"), "vllm")
    assert vllm.outcome == "fails" and "Unsupported model_type mistral" in event_message(vllm.events[0])
    # a type vLLM's registry lacks is refused naming the five it holds (algos.py register_speculator)
    config["transformer_layer_config"]["model_type"] = "llama"
    config["speculators_model_type"] = "medusa"
    write_config(folder, config)
    said = event_message(result(check(str(folder), "vllm"), "vllm").events[0])
    assert 'is "medusa": ValueError: Expected one of: eagle3, peagle, dflash, dflash2, dspark' in said
    # one it holds for another family builds that family's drafter, not an EAGLE-3 one
    config["speculators_model_type"] = "dflash"
    write_config(folder, config)
    said = event_message(result(check(str(folder), "vllm"), "vllm").events[0])
    assert "builds a DFlash drafter (DFlashDraftModel) from it, not EAGLE-3" in said


def test_a_hub_drafter_checked_alone_reads_the_bases_config_and_at_most_one_shard_header(hub, run_cli, tmp_path):
    from fixtures.generate import write_kimi_k2_base

    hub.add_repo("AQ-MedAI/Kimi-K2-Instruct-eagle3", FIXTURES / "kimi-k2-eagle3-published")
    hub.add_repo("moonshotai/Kimi-K2-Instruct", write_kimi_k2_base(tmp_path / "base", layers=4, experts=2))
    env = hub.client_env(tmp_path / "hf-home")
    done = run_cli(
        "AQ-MedAI/Kimi-K2-Instruct-eagle3",
        "--engine",
        "vllm",
        "--base",
        "moonshotai/Kimi-K2-Instruct",
        "--format",
        "json",
        env=env,
    )
    assert done.returncode == 1, done.stderr  # the small drafter (hidden 64) does not fit Kimi-K2 (7168)
    vllm = json.loads(done.stdout)["engines"][0]
    # fc is too narrow for the target's hidden states, and the target's 7168-wide embedding replaces none of its own
    assert {e["code"] for e in vllm["events"] if e["severity"] == "error"} == {
        "target_hidden_mismatch",
        "embed_width_mismatch",
    }
    assert "the target's hidden_size is 7168" in next(
        e["message"] for e in vllm["events"] if e["code"] == "target_hidden_mismatch"
    )
    base_requests = [entry.path for entry in hub.log if "moonshotai/" in entry.path]
    # the planner's first-shard rule reads one shard header at most; never the 4 shards of this base
    assert sum(path.endswith(".safetensors") for path in base_requests) <= 1, base_requests


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"architectures": "LlamaForCausalLMEagle3"},
        {"architectures": [7]},
        {
            "architectures": ["LlamaForCausalLMEagle3"],
            "hidden_size": 64,
            "num_attention_heads": None,  # 0 is refused with the file's other defects (test_malformed.py)
            "eagle_config": {"use_aux_hidden_state": "yes"},
        },
    ],
)
def test_odd_configs_give_events_not_tracebacks(tmp_path, run_cli, config):
    folder = tmp_path / "odd"
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", [("fc.weight", "BF16", [64, 192])])
    done = run_cli(str(folder), "--engine", "all", "--format", "json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    outcomes = {e["outcome"] for e in json.loads(done.stdout)["engines"]}
    assert outcomes <= {"fails", "degraded"}


def test_a_folder_without_config_fails_under_every_engine(tmp_path):
    write_safetensors(tmp_path / "bare" / "model.safetensors", [("fc.weight", "BF16", [64, 192])])
    report = check(str(tmp_path / "bare"))
    assert {(r.outcome, r.events[0].code) for r in report.engines} == {("fails", "no_config")}


def test_a_release_with_a_target_whitelist_refuses_other_targets(tmp_path):
    """vllm#22152: older vLLM refused EAGLE-3 for targets outside a model_type list; main (002e77c) has none.
    An engine version with a whitelist is the same rules with ``target_model_types`` set."""
    from ckptdiff.families.eagle3.engines import get_engine
    from ckptdiff.families.eagle3.engines.replay import simulate
    from ckptdiff.sources import resolve

    drafter_checkpoint = resolve(PUBLISHED)
    target = json.loads((Path(base(tmp_path / "base", multimodal=True)) / "config.json").read_text())
    assert simulate(get_engine("vllm"), drafter_checkpoint, "A", target).outcome == "loads"
    older = replace(get_engine("vllm"), target_model_types=("llama", "qwen"))
    refused = simulate(older, drafter_checkpoint, "A", target)
    assert refused.outcome == "fails"
    assert "Eagle3 is only supported for ['llama', 'qwen'] models. Got " in event_message(refused.events[0])
    assert "model_type='kimi_k2'" in event_message(refused.events[0])  # read from text_config


def test_an_mla_drafter_loads_under_sglang_and_vllm_and_is_unknown_to_trtllm(tmp_path):
    """A kimi-k2.5-eagle3-mla style drafter (Eagle3DeepseekV2ForCausalLM, layers.0.* names, MLA attention):
    TRT-LLM PR#15426 "Unknown architecture for AutoModelForCausalLM: Eagle3DeepseekV2ForCausalLM"."""
    h, inter, vocab, draft = 64, 160, 1024, 256
    mla = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16}
    config = small_drafter_config(architectures=["Eagle3DeepseekV2ForCausalLM"], **mla)
    shapes = {
        "self_attn.q_a_proj.weight": [32, 2 * h],
        "self_attn.q_a_layernorm.weight": [32],
        "self_attn.q_b_proj.weight": [96, 32],
        "self_attn.kv_a_proj_with_mqa.weight": [24, 2 * h],
        "self_attn.kv_a_layernorm.weight": [16],
        "self_attn.kv_b_proj.weight": [128, 16],
        "self_attn.o_proj.weight": [h, 64],
        "mlp.gate_proj.weight": [inter, h],
        "mlp.up_proj.weight": [inter, h],
        "mlp.down_proj.weight": [h, inter],
        "input_layernorm.weight": [h],
        "hidden_norm.weight": [h],
        "post_attention_layernorm.weight": [h],
    }
    tensors = [(f"layers.0.{name}", "BF16", shape) for name, shape in shapes.items()]
    tensors += [("fc.weight", "BF16", [h, 3 * h]), ("norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [draft, h])]
    tensors += [("d2t", "I64", [draft]), ("t2d", "BOOL", [vocab])]
    folder = tmp_path / "mla"
    write_config(folder, config)
    write_safetensors(folder / "model.safetensors", tensors)
    report = check(str(folder), base_spec=base(tmp_path / "base"))
    assert result(report, "sglang").outcome == "loads" and result(report, "vllm").outcome == "loads"
    # every MLA tensor reaches a parameter, checked against the config (q_a and kv_a fused into one)
    vllm_fates = {name: param for name, _, param in result(report, "vllm").tensors}
    assert (
        vllm_fates["layers.0.self_attn.kv_a_proj_with_mqa.weight"]
        == "model.layers.0.self_attn.fused_qkv_a_proj.weight[1]"
    )
    assert all(fate == "loaded" for _, fate in result(report, "vllm").parameters if "self_attn" in _)
    trtllm = result(report, "trtllm")
    assert trtllm.outcome == "fails"
    assert "Unknown architecture for AutoModelForCausalLM: EAGLE3DeepseekV2ForCausalLM" in event_message(
        trtllm.events[0]
    )
    fates = {name: fate for name, fate, _ in result(report, "sglang").tensors}
    assert (
        fates["layers.0.self_attn.q_a_proj.weight"] == "renamed" and fates["layers.0.mlp.up_proj.weight"] == "renamed"
    )


def test_aux_layer_ids_differ_keeps_the_difference_and_leaves_the_engines_to_their_events(tmp_path):
    shifted = drafter(tmp_path / "shifted", eagle_config={"eagle_aux_hidden_state_layer_ids": [3, 31, 59]})
    report_plain = compare_specs(PUBLISHED, shifted)
    plain = next(f for f in report_plain.findings if f.code == "aux_layer_ids_differ")
    assert "SGLang and vLLM read these ids off by one" in finding_message(report_plain, plain)
    report = compare_specs(PUBLISHED, shifted, engines=("sglang",))
    finding = next(f for f in report.findings if f.code == "aux_layer_ids_differ")
    assert (
        finding_message(report, finding)
        == "eagle_config.eagle_aux_hidden_state_layer_ids differs: A [2, 30, 58], B [3, 31, 59]"
    )
    captured = next(e for e in result(report, "sglang", "B").events if e.code == "aux_ids")
    assert "captures the outputs of target layers [3, 31, 59]" in event_message(captured)


def test_attention_biases_are_loaded_by_vllm_and_dropped_by_sglang(tmp_path):
    """attention_bias: vLLM builds qkv_proj with bias=attention_bias; SGLang's llama_eagle3 with bias=False."""
    settings = small_drafter_config(attention_bias=True)
    tensors = eagle3_tensors(settings, with_embed=False)
    tensors += [(f"midlayer.self_attn.{p}_proj.bias", "BF16", [64]) for p in ("q", "k", "v", "o")]
    spec = drafter(tmp_path / "d", tensors=tensors, attention_bias=True)
    report = check(spec, "sglang", "vllm", base_spec=base(tmp_path / "base"))
    assert result(report, "vllm").outcome == "loads"
    sglang = result(report, "sglang")
    assert sglang.outcome == "degraded"
    assert sorted(e.tensor for e in sglang.events if e.code == "skipped_unknown_name") == [
        f"midlayer.self_attn.{p}_proj.bias" for p in ("k", "q", "v")
    ]


def test_an_event_about_a_tensor_names_it_in_its_message_and_reports_print_it_once(tmp_path):
    """Every event with a tensor names it first; the formats print the message as the simulator wrote it."""
    from ckptdiff.formats import render

    drafters = FIXTURES / "drafters"
    unquantized = tmp_path / "fp8-without-config"  # FP8 tensors, no quantization_config: SGLang skips the scales
    shutil.copytree(drafters / "fp8-qwen3-8b", unquantized)
    config = json.loads((unquantized / "config.json").read_text())
    del config["quantization_config"]
    (unquantized / "config.json").write_text(json.dumps(config))
    report = check(str(unquantized), base_spec=str(drafters / "bases" / "qwen3-8b"))
    events = [e for r in report.engines for e in r.events if e.tensor is not None]
    skipped = [e for e in events if e.code == "skipped_unknown_name"]

    assert skipped and all(event_message(e).startswith(e.tensor) for e in events)
    name = skipped[0].tensor
    table = render(report, "table")
    assert f"{name}: SGLang has no parameter {name} or model.{name}" in table and f"{name}: {name}" not in table
