"""The MTP family's rules against the engines' own MTP loaders: small DeepSeek-V3 targets (MLA, MoE) built here,
each loaded by vLLM's DeepSeekMTP and SGLang's DeepseekV3ForCausalLMNextN on the CPU (families_worker.py inside
each pinned engine's environment), each engine's outcome compared with ckptdiff's.

    python tests/oracle/families_check.py [--engine vllm] [--keep DIR]

An engine's outcome: ``fails`` when its config, construction or load raised; ``degraded`` when a parameter stayed
unwritten that it does not take from the target (SGLang: embedding and head); else ``loads``. Exit 0 when every
comparison agrees, 1 when one does not, 2 when an engine environment is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from engines import missing_environments, pins  # noqa: E402

from fixtures.generate import write_config, write_safetensors  # noqa: E402

H, V, E, MOE, Q, KV = 64, 256, 2, 32, 32, 32
#: What an engine's MTP drafter takes from the target rather than from the checkpoint (never "unwritten").
FROM_TARGET = {"sglang": {"lm_head.weight", "model.embed_tokens.weight"}, "vllm": set()}
ROPE = {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0}
ROPE |= {"beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def config(**overrides: Any) -> dict[str, Any]:
    out = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": H,
        "intermediate_size": 128,
        "moe_intermediate_size": MOE,
        "num_hidden_layers": 2,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "q_lora_rank": Q,
        "kv_lora_rank": KV,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "n_routed_experts": E,
        "n_shared_experts": 1,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "routed_scaling_factor": 1.0,
        "norm_topk_prob": True,
        "vocab_size": V,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "rope_scaling": ROPE,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    return out | overrides


def mtp_layer(layer: int, *, embed: bool = True, drop: str = "") -> list[tuple[str, str, list[int]]]:
    p = f"model.layers.{layer}."
    out = [
        (p + "enorm.weight", "BF16", [H]),
        (p + "hnorm.weight", "BF16", [H]),
        (p + "eh_proj.weight", "BF16", [H, 2 * H]),
        (p + "shared_head.norm.weight", "BF16", [H]),
        (p + "shared_head.head.weight", "BF16", [V, H]),
        (p + "input_layernorm.weight", "BF16", [H]),
        (p + "post_attention_layernorm.weight", "BF16", [H]),
        (p + "self_attn.q_a_proj.weight", "BF16", [Q, H]),
        (p + "self_attn.q_a_layernorm.weight", "BF16", [Q]),
        (p + "self_attn.q_b_proj.weight", "BF16", [4 * 24, Q]),
        (p + "self_attn.kv_a_proj_with_mqa.weight", "BF16", [KV + 8, H]),
        (p + "self_attn.kv_a_layernorm.weight", "BF16", [KV]),
        (p + "self_attn.kv_b_proj.weight", "BF16", [4 * 32, KV]),
        (p + "self_attn.o_proj.weight", "BF16", [H, 4 * 16]),
        (p + "mlp.gate.weight", "BF16", [E, H]),
        (p + "mlp.gate.e_score_correction_bias", "F32", [E]),
        *[(p + f"mlp.experts.{e}.{w}_proj.weight", "BF16", [MOE, H]) for e in range(E) for w in ("gate", "up")],
        *[(p + f"mlp.experts.{e}.down_proj.weight", "BF16", [H, MOE]) for e in range(E)],
        *[(p + f"mlp.shared_experts.{w}_proj.weight", "BF16", [MOE, H]) for w in ("gate", "up")],
        (p + "mlp.shared_experts.down_proj.weight", "BF16", [H, MOE]),
    ]
    if embed:
        out.append((p + "embed_tokens.weight", "BF16", [V, H]))
    return [t for t in out if not drop or drop not in t[0]]


MAIN = [
    ("model.embed_tokens.weight", "BF16", [V, H]),
    ("lm_head.weight", "BF16", [V, H]),
    ("model.norm.weight", "BF16", [H]),
    ("model.layers.0.input_layernorm.weight", "BF16", [H]),
]
LAYER_2 = mtp_layer(2)
#: name → (what it tests, config, tensors)
CASES: dict[str, tuple[str, dict[str, Any], list[tuple[str, str, list[int]]]]] = {
    "mtp_full": ("a DeepSeek-V3 target with its MTP layer", config(), MAIN + mtp_layer(2)),
    "mtp_dropped": ("the export dropped the MTP layer", config(), MAIN),
    "mtp_two": ("two nextn layers, both stored", config(num_nextn_predict_layers=2), [*MAIN, *LAYER_2, *mtp_layer(3)]),
    "mtp_two_one_stored": ("two nextn layers, one stored", config(num_nextn_predict_layers=2), MAIN + LAYER_2),
    "mtp_no_eh_proj": ("the MTP layer without eh_proj", config(), MAIN + mtp_layer(2, drop="eh_proj")),
    "mtp_no_layer_embed": ("the MTP layer without its embed_tokens copy", config(), MAIN + mtp_layer(2, embed=False)),
    "mtp_no_expert": ("one routed expert missing", config(), MAIN + mtp_layer(2, drop="experts.1.")),
    "mtp_kimi_model_type": ("model_type kimi_k2 with an MTP layer", config(model_type="kimi_k2"), MAIN + mtp_layer(2)),
}  # fmt: skip


def engine_outcome(engine: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return "fails"
    unwritten = set(result.get("unwritten", [])) - FROM_TARGET[engine]
    return "degraded" if unwritten else "loads"


def ckptdiff_outcome(case_dir: Path, engine: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ckptdiff", str(case_dir), "--engine", engine, "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return str(json.loads(done.stdout)["engines"][0]["outcome"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", action="append", choices=["vllm", "sglang"])
    parser.add_argument("--keep", type=Path, help="build the cases here (default: a temporary folder)")
    options = parser.parse_args()
    wanted = [pin for pin in pins() if pin.engine in (options.engine or ["vllm", "sglang"])]
    missing = missing_environments(wanted)
    if missing:
        print(f"families_check: no engine environment: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    root = options.keep or Path(tempfile.mkdtemp(prefix="ckptdiff-families-"))
    disagreements = 0
    for name, (what, settings, tensors) in CASES.items():
        print(f"{name}: {what}")
        folder = root / name
        write_config(folder, settings)
        write_safetensors(folder / "model.safetensors", tensors, fill="zeros")
        for pin in wanted:
            dest = root / f"{name}.{pin.engine}.json"
            python = pin.environment / "bin" / "python"
            subprocess.run([str(python), str(HERE / "families_worker.py"), pin.engine, str(folder), str(dest)],
                           capture_output=True, timeout=900)  # fmt: skip
            result = json.loads(dest.read_text()) if dest.exists() else {"error": "no result"}
            theirs, ours = engine_outcome(pin.engine, result), ckptdiff_outcome(folder, pin.engine)
            agree = theirs == ours
            disagreements += not agree
            detail = result.get("error") or ", ".join(sorted(set(result.get("unwritten", [])))) or "-"
            mark = "ok " if agree else "DIS"
            print(f"  {mark} {pin.engine:6} ckptdiff {ours:8} engine {theirs:8} {detail[:110]}")
    total = len(CASES) * len(wanted)
    print(f"MTP family: {total - disagreements} of {total} comparisons agree")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
