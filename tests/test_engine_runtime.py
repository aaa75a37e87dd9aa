"""Runtime semantics beyond the weights (issue #27 item 3), end to end from the CLI and the API: vLLM's two model
runners (``--vllm-runner``), target classes an engine refuses EAGLE-3 for, and the registries' data behind them.
The oracle (tests/oracle: the ``vllm_v1`` variant, v1_dflash.py and the ``gen_target_class_*`` cases) checks the
same against the engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_in_process

import ckptdiff
from ckptdiff.errors import CkptdiffError
from ckptdiff.families.eagle3.engines.target_classes import SGLANG_REFUSED, VLLM_REFUSED
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_config, write_safetensors

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")  # eagle_config ids [2, 30, 58], hidden 64


def ckptdiff_json(*args: str) -> dict[str, dict]:
    """The command line's JSON report (in this process: click's runner), offline, by engine."""
    done = run_in_process(
        [*args, "--format", "json"], {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}, REPO
    )
    assert done.returncode in (0, 1), done.stderr
    return {entry["engine"]: entry for entry in json.loads(done.stdout)["engines"]}


def target(folder: Path, architecture: str, model_type: str, layers: int = 61, hidden: int = 64) -> str:
    write_config(
        folder,
        {
            "architectures": [architecture],
            "model_type": model_type,
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "vocab_size": 1024,
        },
    )
    write_safetensors(folder / "model.safetensors", [("model.embed_tokens.weight", "BF16", [1024, hidden])])
    return str(folder)


def events(entry: dict) -> dict[str, dict]:
    return {event["code"]: event for event in entry["events"]}


def test_the_v1_runner_reads_eagle_config_ids_that_the_v2_runner_ignores(tmp_path: Path) -> None:
    llama = target(tmp_path / "llama", "LlamaForCausalLM", "llama")
    v2 = events(ckptdiff_json(PUBLISHED, "--engine", "vllm", "--base", llama)["vllm"])
    v1_entry = ckptdiff_json(PUBLISHED, "--engine", "vllm", "--base", llama, "--vllm-runner", "v1")["vllm"]
    v1 = events(v1_entry)
    assert "read" not in v2["aux_ids_default"]["params"] or v2["aux_ids_default"]["params"]["read"] is None
    assert v1["aux_ids"]["params"]["read"] == ["eagle_config.eagle_aux_hidden_state_layer_ids", [2, 30, 58]]
    assert v1["aux_ids"]["params"]["captured"] == [1, 29, 57]  # as given: the inputs of layers 2, 30, 58
    assert "gpu_model_runner.py" in v1["aux_ids"]["source"] and "runner_v1" in v1
    assert "runner_v1" not in v2 and v1_entry["outcome"] == "loads"


def test_each_runner_reads_its_own_keys(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "kimi-k2-eagle3-published" / "config.json").read_text())
    config["eagle_config"] = {"layer_ids": [5, 10, 20], "use_aux_hidden_state": True}
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(config))
    (drafter / "model.safetensors").write_bytes(
        (FIXTURES / "kimi-k2-eagle3-published" / "model.safetensors").read_bytes()
    )
    llama = target(tmp_path / "llama", "LlamaForCausalLM", "llama", layers=32)
    v2 = events(ckptdiff_json(str(drafter), "--engine", "vllm", "--base", llama)["vllm"])
    v1 = events(ckptdiff_json(str(drafter), "--engine", "vllm", "--base", llama, "--vllm-runner", "v1")["vllm"])
    assert v2["aux_ids"]["params"]["read"] == ["eagle_config.layer_ids", [5, 10, 20]]
    assert "aux_ids" not in v1 and v1["aux_ids_default"]["params"]["captured"] == [1, 15, 28]  # its default


def test_a_narrower_drafter_without_embedding_fails_under_v2_and_keeps_a_random_one_under_v1(tmp_path: Path) -> None:
    wide = target(tmp_path / "wide", "DeepseekV3ForCausalLM", "deepseek_v3", hidden=128)
    v2 = ckptdiff_json(PUBLISHED, "--engine", "vllm", "--base", wide)["vllm"]
    v1 = ckptdiff_json(PUBLISHED, "--engine", "vllm", "--base", wide, "--vllm-runner", "v1")["vllm"]
    assert "embed_width_mismatch" in events(v2) and v2["outcome"] == "fails"
    assert "embed_width_mismatch" not in events(v1)
    embed = events(v1)["embed_not_shared"]
    assert embed["severity"] == "warning" and "llm_base_proposer.py (_maybe_share_embeddings)" in embed["source"]
    fates = {p["name"]: p["fate"] for p in v1["parameters"]}
    assert fates["model.embed_tokens.weight"] == "random"


@pytest.mark.parametrize("runner", [(), ("--vllm-runner", "v1")])
def test_without_aux_hidden_states_no_capture_is_set_up_nor_the_target_class_checked(
    tmp_path: Path, runner: tuple[str, ...]
) -> None:
    """eagle_config.use_aux_hidden_state false: the runners (V2 model_runner.py:412, V1 gpu_model_runner.py:5170) and
    SGLang (attention_backend_setup.py:54) set no capture up, so neither the ids nor the class matter (the oracle's
    v1_use_aux_false_* cases observe it under the V1 runner)."""
    config = json.loads((FIXTURES / "kimi-k2-eagle3-published" / "config.json").read_text())
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 15, 28], "use_aux_hidden_state": False}
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(config))
    source = FIXTURES / "kimi-k2-eagle3-published" / "model.safetensors"
    (drafter / "model.safetensors").write_bytes(source.read_bytes())
    gemma = target(tmp_path / "gemma2", "Gemma2ForCausalLM", "gemma2", layers=32)
    entries = ckptdiff_json(str(drafter), "--engine", "vllm", "--engine", "sglang", "--base", gemma, *runner)
    for engine, entry in entries.items():
        found = events(entry)
        assert "target_class_not_eagle3" not in found, engine
        assert not {"aux_ids", "aux_ids_default", "aux_ids_convention"} & set(found), engine
        off = found["aux_capture_off"]
        assert off["severity"] == "info" and "use_aux_hidden_state is false" in off["message"]
    source_v1 = events(entries["vllm"])["aux_capture_off"]["source"]
    assert ("gpu_model_runner.py" in source_v1) == bool(runner)


@pytest.mark.parametrize(
    ("eagle_config", "top_level", "off"),
    [
        ({"use_aux_hidden_state": None}, {}, True),
        ({"use_aux_hidden_state": 0}, {}, True),
        ({"use_aux_hidden_state": "false"}, {}, False),
        ({}, {"use_aux_hidden_state": False}, False),
    ],
)
def test_use_aux_hidden_state_is_read_by_its_truth_value_in_eagle_config_only(
    tmp_path: Path, eagle_config: dict, top_level: dict, off: bool
) -> None:
    """The engines read ``eagle_config.get("use_aux_hidden_state", True)`` and test its truth value (vLLM
    eagle3_utils.py:15, SGLang spec_aux_hidden_state.py:189): null and 0 turn the capture off, a string does not, a
    top-level key is never read (the oracle's vllm_v2 variant observes each on the V2 runner's own load_model)."""
    config = json.loads((FIXTURES / "kimi-k2-eagle3-published" / "config.json").read_text())
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 15, 28], **eagle_config}
    config.update(top_level)
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(config))
    weights = (FIXTURES / "kimi-k2-eagle3-published" / "model.safetensors").read_bytes()
    (drafter / "model.safetensors").write_bytes(weights)
    gemma = target(tmp_path / "gemma2", "Gemma2ForCausalLM", "gemma2", layers=32)
    for runner in ((), ("--vllm-runner", "v1")):
        entries = ckptdiff_json(str(drafter), "--engine", "vllm", "--engine", "sglang", "--base", gemma, *runner)
        for engine, entry in entries.items():
            found = events(entry)
            assert ("aux_capture_off" in found) == off, (engine, runner)
            assert ("target_class_not_eagle3" in found) == (not off), (engine, runner)


def test_without_a_capture_only_the_v1_runner_runs_the_mla_drafters_fc(tmp_path: Path) -> None:
    """use_aux_hidden_state false: V1's proposer calls combine_hidden_states whatever was captured
    (llm_base_proposer.py:549), and the MLA drafter applies its fc there unconditionally (deepseek_eagle3.py:368):
    fc, sized for three aux states, gets the last hidden state. V2 hands that state over without fc; a Llama
    drafter's combine skips fc itself (the oracle's gen_mla_use_aux_false under vllm_v1 and vllm_v2)."""
    found = {}
    for name, source in (("mla", FIXTURES / "drafters" / "kimi-k2.5-eagle3-mla"), ("llama", Path(PUBLISHED))):
        config = json.loads((source / "config.json").read_text())
        config["eagle_config"]["use_aux_hidden_state"] = False
        drafter = tmp_path / name
        drafter.mkdir()
        (drafter / "config.json").write_text(json.dumps(config))
        (drafter / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes())
        for runner in ("v2", "v1"):
            entry = ckptdiff_json(str(drafter), "--engine", "vllm", "--vllm-runner", runner)["vllm"]
            found[name, runner] = events(entry)
    fc = found["mla", "v1"]["fc_without_capture"]
    assert fc["severity"] == "error" and "llm_base_proposer.py:549" in fc["source"]
    assert not any("fc_without_capture" in found[key] for key in (("mla", "v2"), ("llama", "v1"), ("llama", "v2")))


def test_a_speculators_config_turns_the_capture_off_in_its_transformer_layer_config(tmp_path: Path) -> None:
    """vLLM builds a speculators drafter's config from its transformer_layer_config (speculators/base.py): an
    eagle_config there turns the capture off, one at the speculators config's top level is never read."""
    llama = target(tmp_path / "llama", "LlamaForCausalLM", "llama", layers=32)
    layer = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "vocab_size": 1024,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
    }
    found = {}
    for where in ("top", "layer"):
        config = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "draft_vocab_size": 1024,
            "transformer_layer_config": dict(layer),
            "speculators_config": {
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                "verifier": {"name_or_path": "target", "architectures": ["LlamaForCausalLM"]},
            },
        }
        holder = config if where == "top" else config["transformer_layer_config"]
        holder["eagle_config"] = {"use_aux_hidden_state": False}
        drafter = tmp_path / where
        write_config(drafter, config)
        write_safetensors(drafter / "model.safetensors", [("fc.weight", "BF16", [64, 192])])
        found[where] = events(ckptdiff_json(str(drafter), "--engine", "vllm", "--base", llama)["vllm"])
    assert "aux_capture_off" not in found["top"] and "aux_capture_off" in found["layer"]


@pytest.mark.parametrize(
    ("architecture", "model_type", "refused_by"),
    [
        ("Gemma2ForCausalLM", "gemma2", {"vllm", "sglang"}),
        ("MixtralForCausalLM", "mixtral", {"vllm", "sglang"}),
        ("Glm4MoeForCausalLM", "glm4_moe", {"vllm"}),
        ("LlamaForCausalLM", "llama", set()),
    ],
)
def test_a_target_class_without_eagle3_capture_is_refused_with_the_engines_words(
    tmp_path: Path, architecture: str, model_type: str, refused_by: set[str]
) -> None:
    base = target(tmp_path / "base", architecture, model_type)
    entries = ckptdiff_json(PUBLISHED, "--engine", "vllm", "--engine", "sglang", "--base", base)
    for engine, entry in entries.items():
        refusal = events(entry).get("target_class_not_eagle3")
        if engine in refused_by:
            assert (
                entry["outcome"] == "fails"
                and refusal is not None
                and refusal["params"]["architecture"] == architecture
            )
            assert not {"aux_ids", "aux_ids_default", "aux_capture_conditional"} & set(
                events(entry)
            )  # nothing captured
        else:
            assert refusal is None


def test_the_refusal_lists_come_from_the_registries() -> None:
    assert {"Gemma2ForCausalLM", "MixtralForCausalLM", "Glm4MoeForCausalLM"} <= VLLM_REFUSED
    assert {"Gemma2ForCausalLM", "MixtralForCausalLM"} <= SGLANG_REFUSED and "Glm4MoeForCausalLM" not in SGLANG_REFUSED
    served = {
        "LlamaForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "DeepseekV3ForCausalLM",
        "GptOssForCausalLM",
    }
    assert not served & (VLLM_REFUSED | SGLANG_REFUSED)


def test_the_api_takes_the_runner_and_refuses_an_unknown_one() -> None:
    result = ckptdiff.compare(PUBLISHED, engines=["vllm"], vllm_runner="v1")
    (entry,) = result.engines
    assert "runner_v1" in {event.code for event in entry.events}
    default = ckptdiff.compare(PUBLISHED, engines=["vllm"])
    assert "runner_v1" not in {event.code for event in default.engines[0].events}
    with pytest.raises(CkptdiffError, match="vllm_runner"):
        ckptdiff.compare(PUBLISHED, engines=["vllm"], vllm_runner="v3")


@pytest.mark.parametrize("engines", [(), ("--engine", "sglang")])
def test_the_runner_without_vllm_among_the_engines_is_refused_before_anything_is_read(engines, tmp_path) -> None:
    """It changed nothing: only vLLM's replay reads it."""
    args = [str(tmp_path / "no-such-drafter"), PUBLISHED, *engines, "--vllm-runner", "v1"]
    done = run_in_process(args, {"PATH": "/usr/bin:/bin"}, REPO)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.endswith(
        "Error: --vllm-runner chooses how --engine vllm is replayed: give --engine vllm (or all)\n"
    )
    for given in (("--engine", "vllm"), ("--engine", "all")):
        assert run_in_process(
            [PUBLISHED, *given, "--vllm-runner", "v1"], {"PATH": "/usr/bin:/bin"}, REPO
        ).returncode in (0, 1)


def test_a_dflash_drafter_under_the_v1_runner_is_judged_at_the_v1_runners_capture(tmp_path: Path) -> None:
    """DFlash under --vllm-runner v1: the target captures where the V1 runner reads ids (an eagle_config section's
    ids replace the DFlash ones, gpu_model_runner.py _get_eagle3_aux_layers_from_config), so three ids there against
    fc's five features fail the first forward under V1 only (observed by worker_v1_vllm.py on vLLM's own
    CPUModelRunner)."""
    published = FIXTURES / "dflash" / "qwen3-8b-dflash-b16"
    base = str(FIXTURES / "dflash" / "qwen3-8b-base-header-only")
    config = json.loads((published / "config.json").read_text())
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [2, 10, 18]}
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(config))
    for name in (p.name for p in published.glob("*.safetensors")):
        (drafter / name).write_bytes((published / name).read_bytes())
    v2 = ckptdiff_json(str(drafter), "--engine", "vllm", "--base", base)["vllm"]
    v1 = ckptdiff_json(str(drafter), "--engine", "vllm", "--base", base, "--vllm-runner", "v1")["vllm"]
    assert v2["outcome"] == "loads" and "target_layer_not_captured" not in events(v2)
    failed = events(v1)["target_layer_not_captured"]
    assert v1["outcome"] == "fails" and failed["params"]["captured"] == 3 and failed["params"]["features"] == 5
    assert "gpu_model_runner.py" in failed["source"] and "llm_base_proposer.py:549" in failed["source"]
    # V1's dummy run hands the drafter a hidden_size-wide buffer: start-up runs, and the first draft fails
    assert failed["wording"] == "dflash.vllm.target_layer_not_captured_v1"
    assert "start-up runs (its dummy run does not combine them) and the first draft raises" in failed["message"]
    assert events(v2)["v1_runner_capture_differs"]["params"]["fails"] is True
    as_published = [
        ckptdiff_json(str(published), "--engine", "vllm", "--base", base, *runner)["vllm"]["outcome"]
        for runner in ((), ("--vllm-runner", "v1"))
    ]
    assert as_published == ["loads", "loads"]
