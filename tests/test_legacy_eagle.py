"""EAGLE-1/2 drafters (the EAGLE authors' own layout: a plain Llama config, fc over [embedding; hidden state]) under
``--engine``: no family claims their config, so the EAGLE-3 loaders are replayed, and the verdict says first what
the checkpoint is and where the engines serve it instead."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.generate import write_config, write_safetensors

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 16, 2, 1, 8, 32, 128
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "drafters"

#: yuhuili/EAGLE-LLaMA3-Instruct-8B's config.json, widths scaled down: a one-layer Llama, nothing EAGLE-3's.
EAGLE1_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 1,
    "hidden_size": HIDDEN,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "intermediate_size": INTER,
    "vocab_size": VOCAB,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


def eagle1(folder: Path) -> str:
    """EAGLE's drafter: fc (with its bias) over [embedding; hidden state], one decoder layer without an input norm."""
    p = "layers.0."
    tensors = [("fc.weight", "F16", [HIDDEN, 2 * HIDDEN]), ("fc.bias", "F16", [HIDDEN])]
    tensors += [
        (p + "self_attn.q_proj.weight", "F16", [HEADS * HEAD_DIM, HIDDEN]),
        (p + "self_attn.k_proj.weight", "F16", [KV_HEADS * HEAD_DIM, HIDDEN]),
        (p + "self_attn.v_proj.weight", "F16", [KV_HEADS * HEAD_DIM, HIDDEN]),
        (p + "self_attn.o_proj.weight", "F16", [HIDDEN, HEADS * HEAD_DIM]),
        (p + "mlp.gate_proj.weight", "F16", [INTER, HIDDEN]),
        (p + "mlp.up_proj.weight", "F16", [INTER, HIDDEN]),
        (p + "mlp.down_proj.weight", "F16", [HIDDEN, INTER]),
        (p + "post_attention_layernorm.weight", "F16", [HIDDEN]),
    ]
    write_config(folder, EAGLE1_CONFIG)
    write_safetensors(folder / "model.safetensors", tensors)
    return str(folder)


def hints(document: dict) -> dict[str, list[str]]:
    return {
        e["engine"]: [event["message"] for event in e["events"] if event["code"] == "eagle1_drafter"]
        for e in document["engines"]
    }


def test_an_eagle1_drafter_is_named_as_one_before_the_eagle3_loaders_verdict(tmp_path, run_cli) -> None:
    done = run_cli(eagle1(tmp_path / "eagle1"), "--engine", "vllm", "--engine", "sglang", "--format", "json")
    document = json.loads(done.stdout)
    assert {e["engine"]: e["outcome"] for e in document["engines"]} == {"vllm": "fails", "sglang": "fails"}
    found = hints(document)
    assert [len(messages) for messages in found.values()] == [1, 1]
    assert (
        'vLLM serves EAGLE-1/2 drafters under speculative_config method "eagle" (EagleLlamaForCausalLM)'
        in (found["vllm"][0])
    )
    assert (
        "SGLang serves EAGLE-1/2 drafters under --speculative-algorithm EAGLE (LlamaForCausalLMEagle)"
        in (found["sglang"][0])
    )
    text = run_cli(str(tmp_path / "eagle1"), "--engine", "vllm").stdout
    assert text.index("[eagle1_drafter]") < text.index("[bias_ignored]")  # first of the warnings


def test_eagle3_drafters_get_no_eagle1_hint(tmp_path, run_cli) -> None:
    """An EAGLE-3 config (its architecture, eagle_config or speculators type) is never called EAGLE-1/2, even with
    an fc over two states; nor is a plain config beside EAGLE-3's vocabulary maps."""
    for name in ("yuhuili-eagle3-llama3.1-8b", "specforge-qwen3-8b", "redhat-speculators-llama3.1-8b"):
        document = json.loads(run_cli(str(FIXTURES / name), "--engine", "all", "--format", "json").stdout)
        assert all(not messages for messages in hints(document).values()), name
    folder = Path(eagle1(tmp_path / "two-aux"))
    write_config(folder, {**EAGLE1_CONFIG, "architectures": ["LlamaForCausalLMEagle3"]})
    document = json.loads(run_cli(str(folder), "--engine", "all", "--format", "json").stdout)
    assert all(not messages for messages in hints(document).values())


def test_convert_refuses_an_eagle1_drafter_in_one_line(tmp_path, run_cli) -> None:
    done = run_cli("convert", eagle1(tmp_path / "eagle1"), str(tmp_path / "out"), "--to", "sglang")
    assert done.returncode == 2
    assert "an EAGLE-1/2 drafter; convert writes EAGLE-3 drafters" in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()
