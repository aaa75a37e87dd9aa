"""The capture per target class (ckptdiff/engines/capture.py) and the conditional verdicts it gives without --base,
end to end from the CLI: the AQ-MedAI Kimi-K2 drafter, alone and against the real Kimi-K2 base, the policy that
fails a conditional verdict, a target class no rule names, and the generated table in docs/engines.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CliRun, run_in_process

from ckptdiff.families.eagle3.engines import get_engine
from ckptdiff.families.eagle3.engines.capture import capture_for, documented_table
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_config, write_drafter, write_kimi_k2_drafter_pair, write_safetensors

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
KIMI_K2_BASE = str(FIXTURES / "kimi-k2-base-header-only")


def ckptdiff(*args: str, cwd: Path = REPO) -> CliRun:
    """The command line in this process (click's runner), offline, with no colour."""
    return run_in_process(list(args), {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}, cwd)


def engines_of(completed: CliRun) -> dict[str, dict]:
    return {entry["engine"]: entry for entry in json.loads(completed.stdout)["engines"]}


def target(folder: Path, architecture: str, model_type: str, layers: int, hidden: int = 64, vocab: int = 1024) -> str:
    write_config(
        folder,
        {
            "architectures": [architecture],
            "model_type": model_type,
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "vocab_size": vocab,
        },
    )
    write_safetensors(folder / "model.safetensors", [("model.embed_tokens.weight", "BF16", [vocab, hidden])])
    return str(folder)


def test_the_published_kimi_k2_drafter_alone_loads_under_both_engines_with_the_condition_stated() -> None:
    done = ckptdiff(PUBLISHED, "--engine", "vllm", "--engine", "sglang")
    assert done.returncode == 0, done.stdout + done.stderr
    # [2, 30, 58] are the default capture's indices of a 61-layer model: vLLM's default takes those layers on
    # any 61-layer target; SGLang reads them as given only in its DeepSeek-V2 class (and GPT-OSS at depth 58)
    words = " ".join(done.stdout.split())
    assert (
        "a 61-layer model of any class it knows (Llama, Llama-4, Qwen2/Qwen3, Qwen3-MoE, DeepSeek-V2/V3, GPT-OSS)"
        in words
    )
    assert "a 59-256-layer DeepSeek-V2/V3 model such as Kimi-K2" in done.stdout
    assert done.stdout.rstrip().endswith(
        "compatible: vllm A loads (conditional on the target), sglang A loads (conditional on the target)"
    )
    entries = engines_of(ckptdiff(PUBLISHED, "--engine", "vllm", "--engine", "sglang", "--format", "json"))
    (condition,) = entries["vllm"]["conditions"]
    assert condition["code"] == "aux_capture"
    assert {t["family"]: t["layers"] for t in condition["targets"]} == {
        family: [[61, 61]] for family in ("Llama", "Llama-4", "Qwen2/Qwen3", "Qwen3-MoE", "DeepSeek-V2/V3", "GPT-OSS")
    }
    (condition,) = entries["sglang"]["conditions"]
    assert {t["family"]: t["layers"] for t in condition["targets"]} == {
        "DeepSeek-V2/V3": [[59, 256]],
        "GPT-OSS": [[58, 58]],
    }


def test_the_full_size_published_drafter_against_the_full_size_kimi_k2_base_is_decided(tmp_path: Path) -> None:
    published, _ = write_kimi_k2_drafter_pair(tmp_path)  # sparse: the real shapes on a few KB of disk
    done = ckptdiff(
        str(published), "--base", KIMI_K2_BASE, "--engine", "vllm", "--engine", "sglang", "--format", "json"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    entries = engines_of(done)
    assert {e["outcome"] for e in entries.values()} == {"loads"}
    assert all("conditions" not in e for e in entries.values())
    captured = {e["code"]: e["message"] for e in entries["vllm"]["events"]}["aux_ids_default"]
    assert "captures the outputs of target layers [1, 29, 57] on this 61-layer DeepSeek-V2/V3 target" in captured
    base_config = json.loads((Path(KIMI_K2_BASE) / "config.json").read_text())
    assert (base_config["num_hidden_layers"], base_config["hidden_size"], base_config["vocab_size"]) == (
        61,
        7168,
        163840,
    )


def test_a_conditional_verdict_fails_the_gate_under_the_policy(tmp_path: Path) -> None:
    assert ckptdiff(PUBLISHED, "--engine", "vllm", "--fail-on-conditional").returncode == 1
    config = tmp_path / "ckptdiff.toml"
    config.write_text("fail_on_conditional = true\n")
    done = ckptdiff(PUBLISHED, "--engine", "vllm", "--config", str(config))
    assert done.returncode == 1, done.stdout + done.stderr
    # with the base the condition is decided: nothing conditional left to fail
    kimi = target(tmp_path / "kimi", "DeepseekV3ForCausalLM", "kimi_k2", 61)
    decided = ckptdiff(PUBLISHED, "--engine", "vllm", "--fail-on-conditional", "--base", kimi)
    assert decided.returncode == 0 and "(conditional on the target)" not in decided.stdout, decided.stdout


def test_the_same_ids_on_a_llama_class_target_load_under_vllm_and_are_one_late_under_sglang(tmp_path: Path) -> None:
    """The ids are the default capture's indices of a 61-layer model, written for DeepSeek-V2's convention (each
    the input of its layer): vLLM's default takes those layers on any 61-layer target; SGLang's Llama class adds
    1, and the warning says the ids were written for another class's convention."""
    llama = target(tmp_path / "llama61", "LlamaForCausalLM", "llama", 61)
    done = ckptdiff(PUBLISHED, "--base", llama, "--engine", "vllm", "--engine", "sglang", "--format", "json")
    assert done.returncode == 1
    entries = engines_of(done)
    assert entries["vllm"]["outcome"] == "loads" and "conditions" not in entries["vllm"]
    warning = next(e for e in entries["sglang"]["events"] if e["severity"] == "warning")
    assert warning["code"] == "aux_ids_convention"
    assert warning["params"]["class_reading"] == [2, 30, 58] and warning["params"]["default_depth"] == 61
    assert "name the outputs of layers [1, 29, 57]" in warning["message"]
    assert "written for that convention, not for SGLang's Llama class" in warning["message"]


def test_a_target_class_no_rule_names_gets_a_condition_naming_it_never_a_guess(tmp_path: Path) -> None:
    other = target(tmp_path / "other", "FooBarForCausalLM", "foo_bar", 61)
    done = ckptdiff(PUBLISHED, "--base", other, "--engine", "vllm", "--engine", "sglang", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    for entry in engines_of(done).values():
        codes = {e["code"] for e in entry["events"]}
        assert "aux_capture_unknown_class" in codes and "aux_ids_default" not in codes, codes
        (condition,) = entry["conditions"]
        assert condition["targets"][0]["architectures"] == ["FooBarForCausalLM"]
        notice = next(e for e in entry["events"] if e["code"] == "aux_capture_conditional")
        assert "FooBarForCausalLM class captures the layers" in notice["message"]


@pytest.mark.parametrize(
    ("engine", "architecture", "ids", "layers", "outputs"),
    [
        ("sglang", "LlamaForCausalLM", (2, 30, 58), 61, (2, 30, 58)),
        ("sglang", "DeepseekV3ForCausalLM", (2, 30, 58), 61, (1, 29, 57)),
        ("sglang", "DeepseekV3ForCausalLM", (1, 29, 57), 61, (1, 29, 57)),
        ("sglang", "GptOssForCausalLM", (2, 12, 24), 24, (1, 11, 23)),
        ("sglang", "GptOssForCausalLM", (1, 11, 22), 24, (1, 11, 22)),
        ("sglang", "Qwen3MoeForCausalLM", (1, 46, 93), 94, (1, 46)),
        ("vllm", "Qwen3ForCausalLM", (2, 18, 36), 36, (1, 17, 35)),
        ("vllm", "DeepseekV3ForCausalLM", None, 61, (1, 29, 57)),
        ("vllm", "Llama4ForConditionalGeneration", None, 48, (1, 23, 44)),
        ("vllm", "Llama4ForConditionalGeneration", (2, 24, 45), 48, (1, 23, 44)),
        ("sglang", "Llama4ForConditionalGeneration", None, 48, (1, 23, 44)),
        ("sglang", "Llama4ForConditionalGeneration", (1, 23, 44), 48, (1, 23, 44)),
        ("sglang", "Llama4ForConditionalGeneration", (1, 23, 47), 48, (1, 23)),
    ],
)
def test_each_class_captures_as_its_rule_says(engine, architecture, ids, layers, outputs) -> None:
    capture = capture_for(get_engine(engine).aux_ids.classes, architecture, None)
    assert capture is not None and capture.outputs(ids, layers) == outputs


def test_a_multimodal_wrapper_is_matched_by_its_text_model_type() -> None:
    capture = capture_for(get_engine("sglang").aux_ids.classes, "KimiK25ForConditionalGeneration", "kimi_k2")
    assert capture is not None and capture.label == "DeepSeek-V2/V3"


def test_llama_4s_text_model_is_matched_when_the_wrapper_is_not_named() -> None:
    for engine in ("vllm", "sglang"):
        capture = capture_for(get_engine(engine).aux_ids.classes, None, "llama4_text")
        assert capture is not None and capture.label == "Llama-4"


def maverick(folder: Path) -> str:
    """A Llama-4 Maverick target as published: the wrapper's config, its text model's sizes in text_config."""
    text = {"model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "vocab_size": 202048}
    write_config(
        folder, {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": text}
    )
    write_safetensors(
        folder / "model.safetensors", [("language_model.model.embed_tokens.weight", "BF16", [202048, 5120])]
    )
    return str(folder)


def maverick_drafter(folder: Path, **ids: list[int]) -> str:
    """An EAGLE-3 drafter for Maverick (nvidia/Llama-4-Maverick-17B-128E-Eagle3's sizes, SpecForge names); ``nested``:
    eagle_config's ids (SGLang reads them), ``top``: the top-level ids (vLLM reads them)."""
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": 5120,
        "intermediate_size": 16384,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 1,
        "vocab_size": 202048,
        "draft_vocab_size": 32000,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "eagle_config": {"use_aux_hidden_state": True},
    }
    if "nested" in ids:
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids["nested"]
    if "top" in ids:
        config["eagle_aux_hidden_state_layer_ids"] = ids["top"]
    return str(write_drafter(folder, config, with_embed=False))


def capture_events(entry: dict) -> list[dict]:
    return [e for e in entry["events"] if e["params"].get("family") == "Llama-4"]


def test_a_maverick_drafter_on_a_llama_4_target_is_decided_by_its_text_models_depth(tmp_path: Path) -> None:
    """Both engines hand the capture to Llama-4's text model: SGLang reads eagle_config's [1, 23, 44] (the outputs of
    layers 1, 23, 44), vLLM reads no ids and its default over text_config's 48 layers takes the same layers."""
    drafter = maverick_drafter(tmp_path / "drafter", nested=[1, 23, 44])
    done = ckptdiff(
        drafter, "--base", maverick(tmp_path / "maverick"), "--engine", "vllm", "--engine", "sglang", "--format", "json"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    for name, entry in engines_of(done).items():
        assert entry["outcome"] == "loads" and "conditions" not in entry, (name, entry)
        (event,) = capture_events(entry)
        assert (event["severity"], event["params"]["captured"], event["params"]["layers"]) == ("info", [1, 23, 44], 48)
        assert "on this 48-layer Llama-4 target" in event["message"]
        assert "aux_capture_unknown_class" not in {e["code"] for e in entry["events"]}


def test_without_ids_each_engine_takes_its_default_from_the_text_config(tmp_path: Path) -> None:
    drafter = maverick_drafter(tmp_path / "drafter")
    done = ckptdiff(
        drafter, "--base", maverick(tmp_path / "maverick"), "--engine", "vllm", "--engine", "sglang", "--format", "json"
    )
    for entry in engines_of(done).values():
        (event,) = capture_events(entry)
        assert event["code"] == "aux_ids_default" and event["params"]["captured"] == [1, 23, 44]


def test_ids_past_llama_4s_depth_are_never_captured(tmp_path: Path) -> None:
    """SGLang captures before layer id + 1 < 48 (id 47 never); vLLM before layer id, up to 48 (id 49 never)."""
    drafter = maverick_drafter(tmp_path / "drafter", nested=[1, 23, 47], top=[2, 24, 49])
    done = ckptdiff(
        drafter, "--base", maverick(tmp_path / "maverick"), "--engine", "vllm", "--engine", "sglang", "--format", "json"
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    entries = engines_of(done)
    for name, outside in (("sglang", [47]), ("vllm", [49])):
        errors = {e["code"]: e for e in entries[name]["events"] if e["severity"] == "error"}
        assert errors["aux_id_out_of_range"]["params"]["outside"] == outside
        assert errors["aux_id_out_of_range"]["params"]["captured"] == [1, 23]
        assert "aux_count_mismatch" in errors


def test_docs_engines_md_holds_the_generated_convention_table() -> None:
    page = (REPO / "docs" / "engines.md").read_text(encoding="utf-8")
    assert documented_table() in page, (
        "regenerate the table in docs/engines.md: python -c 'from ckptdiff.families.eagle3.engines.capture "
        "import documented_table; print(documented_table())'"
    )
