"""The EAGLE-3 profile: detection, naming conventions, --rename, "did you mean", shapes a config implies, and the
findings for the failures serving engines hit (each finding code has a test here or in test_base.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptdiff import compare
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints
from ckptdiff.errors import CkptdiffError
from ckptdiff.families import detect_profile, get_profile
from ckptdiff.families.eagle3.naming import (
    SPECFORGE,
    SPECULATORS,
    TENSORRT_LLM,
    VLLM,
    canonical_name,
    naming_convention,
)
from ckptdiff.families.eagle3.shapes import expected_shapes
from ckptdiff.formats._common import note_text
from ckptdiff.formats.messages import finding_message
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import (
    KIMI_K2_BASE_CONFIG,
    KIMI_K2_DRAFTER_CONFIG,
    eagle3_tensors,
    small_drafter_config,
    write_drafter,
    write_kimi_k2_base,
    write_safetensors,
)

EAGLE3 = get_profile("eagle3")
# From shared/reference/README.md: the published Kimi-K2 drafter's tensors, derived from its config.
KIMI_K2_SHAPES = {
    "fc.weight": (7168, 21504),
    "midlayer.self_attn.q_proj.weight": (8192, 14336),
    "midlayer.self_attn.k_proj.weight": (8192, 14336),
    "midlayer.self_attn.v_proj.weight": (8192, 14336),
    "midlayer.self_attn.o_proj.weight": (7168, 8192),
    "midlayer.mlp.gate_proj.weight": (18432, 7168),
    "midlayer.mlp.up_proj.weight": (18432, 7168),
    "midlayer.mlp.down_proj.weight": (7168, 18432),
    "midlayer.hidden_norm.weight": (7168,),
    "midlayer.input_layernorm.weight": (7168,),
    "midlayer.post_attention_layernorm.weight": (7168,),
    "norm.weight": (7168,),
    "lm_head.weight": (32000, 7168),
    "d2t": (32000,),
    "t2d": (163840,),
    "embed_tokens.weight": (163840, 7168),
}


def vllm_name(name: str) -> str:
    """What vLLM calls a SpecForge tensor: midlayer. → layers.0., model. on all but lm_head/d2t/t2d."""
    name = name.replace("midlayer.", "layers.0.")
    return name if name.startswith("lm_head") or name in ("d2t", "t2d") else "model." + name


def drafter(folder: Path, config: dict | None = None, *, with_embed: bool = False, rename=None, drop=(), **changes):
    """A sparse drafter folder; ``changes`` maps a tensor name to a new shape, ``drop`` leaves tensors out."""
    config = config or small_drafter_config()
    specs = []
    for name, dtype, shape in eagle3_tensors(config, with_embed=with_embed):
        if name in drop:
            continue
        shape = changes.get(name.replace(".", "_"), shape)
        specs.append(((rename or (lambda n: n))(name), dtype, shape))
    return write_drafter(folder, config, with_embed=with_embed, tensors=specs)


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def finding(report, code: str) -> str:
    (message,) = [finding_message(report, f) for f in report.findings if f.code == code]
    return message


# --- detection --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"architectures": ["LlamaForCausalLMEagle3"]},
        {"architectures": ["Eagle3DeepseekV2ForCausalLM"]},
        {"architectures": ["Qwen3ForCausalLM"], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
        {"speculators_model_type": "eagle3", "transformer_layer_config": {"hidden_size": 64}},
    ],
)
def test_eagle3_drafters_are_detected(config):
    assert detect_profile(config) is EAGLE3


def test_a_base_model_has_no_profile():
    assert detect_profile(KIMI_K2_BASE_CONFIG, None) is None


# --- naming conventions -----------------------------------------------------------------------------------


def test_every_convention_maps_to_the_specforge_names():
    stored = {
        SPECFORGE: ["midlayer.self_attn.q_proj.weight", "fc.weight", "lm_head.weight", "d2t"],
        SPECULATORS: ["layers.0.self_attn.q_proj.weight", "fc.weight", "lm_head.weight", "d2t"],
        VLLM: ["model.layers.0.self_attn.q_proj.weight", "model.fc.weight", "lm_head.weight", "d2t"],
        TENSORRT_LLM: ["model.midlayer.self_attn.q_proj.weight", "model.fc.weight", "lm_head.weight", "model.d2t"],
    }
    for convention, names in stored.items():
        assert naming_convention(names) is convention
        assert [canonical_name(n) for n in names] == stored[SPECFORGE]
    assert canonical_name("draft_id_to_target_id") == "d2t"  # vLLM's in-memory name
    assert naming_convention(["fc.weight", "norm.weight"]) is None  # no decoder layer: cannot tell


def test_published_layout_vs_vllm_naming_is_compatible_with_a_convention_finding(tmp_path):
    published = drafter(tmp_path / "published")
    converted = drafter(tmp_path / "vllm", rename=vllm_name)

    report = compare(str(published), str(converted))

    assert report.verdict == "compatible"
    assert set(report.counts.items()) >= {("match", 15), ("only_in_a", 0), ("only_in_b", 0)}
    assert codes(report)["naming_conventions_differ"] == "warning"
    message = finding(report, "naming_conventions_differ")
    assert "SpecForge/EAGLE (midlayer.*, no prefix)" in message and "vLLM (model.layers.0.*" in message
    rows = {row.name: row for row in report.tensors}
    q_proj = rows["midlayer.self_attn.q_proj.weight"]
    assert q_proj.a.name is None and q_proj.b.name == "model.layers.0.self_attn.q_proj.weight"
    assert rows["fc.weight"].b.name == "model.fc.weight" and rows["lm_head.weight"].b.name is None


def test_the_json_report_carries_each_sides_own_name(tmp_path, run_cli):
    published = drafter(tmp_path / "published")
    converted = drafter(tmp_path / "vllm", rename=vllm_name)

    result = run_cli(str(published), str(converted), "--format", "json")

    assert result.returncode == 0, result.stderr
    tensors = {t["name"]: t for t in json.loads(result.stdout)["tensors"]}
    assert tensors["midlayer.mlp.up_proj.weight"]["b"] == {
        "shape": [160, 64],
        "dtype": "BF16",
        "name": "model.layers.0.mlp.up_proj.weight",
    }
    assert "name" not in tensors["midlayer.mlp.up_proj.weight"]["a"]


def test_without_the_profile_names_do_not_match_and_did_you_mean_points_at_the_counterpart(tmp_path):
    published = drafter(tmp_path / "published")
    converted = drafter(tmp_path / "vllm", rename=vllm_name)

    report = compare(str(published), str(converted), profile="none")

    assert report.verdict == "incompatible"
    rows = {row.name: row for row in report.tensors}
    assert rows["midlayer.mlp.up_proj.weight"].status == "only_in_a"
    assert note_text(rows["midlayer.mlp.up_proj.weight"]) == (
        "did you mean B's model.layers.0.mlp.up_proj.weight? (same shape and dtype)"
    )
    assert note_text(rows["model.norm.weight"]) == "did you mean A's norm.weight? (same shape and dtype)"


def test_did_you_mean_picks_the_closest_of_several_same_shaped_names(tmp_path):
    a = drafter(tmp_path / "a")
    b = drafter(tmp_path / "b", rename=lambda n: n.replace("hidden_norm", "hidden_layernorm"))

    report = compare(str(a), str(b))

    rows = {row.name: row for row in report.tensors}  # four [64] BF16 norms are candidates; the name decides
    assert rows["midlayer.hidden_norm.weight"].status == "only_in_a"
    assert note_text(rows["midlayer.hidden_norm.weight"]) == (
        "did you mean B's midlayer.hidden_layernorm.weight? (same shape and dtype)"
    )


def test_did_you_mean_scales_to_hundreds_of_renamed_layers_and_stays_quiet_beyond_a_thousand():
    def side(prefix: str, layers: int) -> Checkpoint:
        names = [f"model.{prefix}.{i}.mlp.weight" for i in range(layers)]
        return Checkpoint("x", "local", "x", None, {n: TensorInfo(n, "F32", (4,), "m", (0, 0)) for n in names})

    report = compare_checkpoints(side("layers", 600), side("blocks", 600))

    notes = {row.name: note_text(row) for row in report.tensors}
    for i in (0, 7, 17, 117, 599):
        assert (
            notes[f"model.layers.{i}.mlp.weight"]
            == f"did you mean B's model.blocks.{i}.mlp.weight? (same shape and dtype)"
        )
        assert (
            notes[f"model.blocks.{i}.mlp.weight"]
            == f"did you mean A's model.layers.{i}.mlp.weight? (same shape and dtype)"
        )
    many = compare_checkpoints(side("layers", 1001), side("blocks", 1001))
    assert {note_text(row) for row in many.tensors} == {None}


def test_rename_rules_apply_to_both_sides_before_matching(tmp_path, run_cli):
    published = drafter(tmp_path / "published")
    converted = drafter(tmp_path / "vllm", rename=vllm_name)

    result = run_cli(
        str(published),
        str(converted),
        "--profile",
        "none",
        "--format",
        "json",
        "--rename",
        r"^model\.layers\.0\.=midlayer.",
        "--rename",
        r"^model\.=",
    )

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["verdict"] == "compatible" and document["counts"]["match"] == 15
    up = next(t for t in document["tensors"] if t["name"] == "midlayer.mlp.up_proj.weight")
    assert up["b"]["name"] == "model.layers.0.mlp.up_proj.weight"


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("no-equals-sign", "is not REGEX=REPLACEMENT"),
        ("mid(layer=x", "is not a regular expression"),
        (r"midlayer=\2", "replacement '\\2' is invalid"),
        (r"^.*$=same", "into 'same'"),
    ],
)
def test_a_bad_rename_rule_is_one_line_and_exit_2(rule, says, run_cli):
    published = str(Path(__file__).parent.parent / "fixtures" / "kimi-k2-eagle3-published")

    result = run_cli(published, published, "--rename", rule)

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("ckptdiff: --rename: ") and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_tensor_the_file_names_empty_is_compared_not_blamed_on_rename(tmp_path, run_cli):
    """safetensors allows the name ''; only a --rename that empties a name is refused."""
    write_safetensors(tmp_path / "a.safetensors", [("", "F32", [2]), ("w", "F32", [2])])
    write_safetensors(tmp_path / "b.safetensors", [("w", "F32", [2])])

    result = run_cli(str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"), "--format", "json")

    assert result.returncode == 1, result.stderr
    rows = {row["name"]: row["status"] for row in json.loads(result.stdout)["tensors"]}
    assert rows == {"": "only_in_a", "w": "match"}

    emptied = run_cli(str(tmp_path / "b.safetensors"), str(tmp_path / "b.safetensors"), "--rename", "^w$=")
    assert emptied.returncode == 2
    assert emptied.stderr == "ckptdiff: --rename: turns A's 'w' into an empty name\n"
    # a config file's rule is blamed on the file's setting, not on a --rename never given
    (tmp_path / "ckptdiff.toml").write_text("rename = ['^w$=']\n")
    b = str(tmp_path / "b.safetensors")
    from_file = run_cli(b, b, "--config", str(tmp_path / "ckptdiff.toml"))
    assert from_file.returncode == 2
    assert (
        from_file.stderr
        == f"ckptdiff: {os.path.relpath(tmp_path / 'ckptdiff.toml')}: rename: turns A's 'w' into an empty name\n"
    )


# --- shapes from each side's own config -------------------------------------------------------------------


def test_the_reference_table_follows_from_the_published_config():
    assert {name: e.shape for name, e in expected_shapes(KIMI_K2_DRAFTER_CONFIG).items() if name in KIMI_K2_SHAPES} == (
        KIMI_K2_SHAPES
    )


def test_a_speculators_config_keeps_its_settings_nested_and_names_the_target_hidden_size():
    config = {
        "speculators_model_type": "eagle3",
        "architectures": ["Eagle3Speculator"],
        "draft_vocab_size": 32000,
        "target_hidden_size": 5120,
        "transformer_layer_config": {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "vocab_size": 128256,
        },
    }
    shapes = expected_shapes(config)

    assert shapes["fc.weight"].shape == (4096, 3 * 5120)
    assert "target_hidden_size=5120" in shapes["fc.weight"].because and "the default" in shapes["fc.weight"].because
    assert shapes["midlayer.self_attn.k_proj.weight"].shape == (8 * 128, 2 * 4096)
    assert shapes["embed_tokens.weight"].shape == (128256, 4096)
    assert shapes["lm_head.weight"].shape == (32000, 4096) and shapes["d2t"].shape == (32000,)


def test_fc_built_for_two_aux_layers_is_flagged_against_its_own_config_even_beside_an_identical_twin(tmp_path):
    config = KIMI_K2_DRAFTER_CONFIG  # 3 aux layers: fc input must be 3 × 7168 = 21504
    a = drafter(tmp_path / "a", config, fc_weight=[7168, 14336])
    b = drafter(tmp_path / "b", config, fc_weight=[7168, 14336])

    report = compare(str(a), str(b))

    assert report.counts["match"] == 15 and report.verdict == "incompatible" and report.exit_code == 1
    assert codes(report)["shape_vs_config"] == "error"
    message = finding(report, "shape_vs_config")
    assert message.startswith("A and B: fc.weight is [7168, 14336] but its config.json implies [7168, 21504]")
    assert "eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58]" in message and "hidden_size=7168" in message


def test_fc_is_not_checked_when_the_drafter_does_not_use_aux_hidden_states():
    config = dict(KIMI_K2_DRAFTER_CONFIG, eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 58]})
    assert expected_shapes(config)["fc.weight"].shape == (7168, 21504)
    config["eagle_config"]["use_aux_hidden_state"] = False
    assert "fc.weight" not in expected_shapes(config)


def test_a_vllm_named_tensor_is_checked_under_its_canonical_name_and_reported_with_its_own(tmp_path):
    a = drafter(tmp_path / "a", rename=vllm_name, midlayer_self_attn_o_proj_weight=[64, 32])

    report = compare(str(a), str(a))

    message = finding(report, "shape_vs_config")
    assert message.startswith("A and B: midlayer.self_attn.o_proj.weight (stored as model.layers.0.self_attn.o_proj")
    assert "num_attention_heads=4" in message and "head_dim=16" in message


def test_t2d_length_mismatch(tmp_path):
    a = drafter(tmp_path / "a")
    b = drafter(tmp_path / "b", t2d=[1000])

    report = compare(str(a), str(b))

    assert codes(report)["t2d_length_mismatch"] == "warning" and "shape_vs_config" not in codes(report)
    assert finding(report, "t2d_length_mismatch").startswith("B: t2d has [1000] entries but config.json's vocab_size")


def test_an_mla_drafters_attention_is_checked_against_its_config(tmp_path):
    """Eagle3DeepseekV2ForCausalLM: MLA attention tensors this profile has no rule for."""
    config = small_drafter_config(
        architectures=["Eagle3DeepseekV2ForCausalLM"],
        model_type="deepseek_v2",
        kv_lora_rank=32,
        q_lora_rank=48,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
    )
    mla = {
        "midlayer.self_attn.q_a_proj.weight": [48, 128],
        "midlayer.self_attn.q_b_proj.weight": [96, 48],
        "midlayer.self_attn.kv_a_proj_with_mqa.weight": [40, 128],
        "midlayer.self_attn.kv_b_proj.weight": [128, 32],
        "midlayer.self_attn.o_proj.weight": [64, 64],
    }
    plain = [(n, d, s) for n, d, s in eagle3_tensors(config, with_embed=False) if ".self_attn." not in n]
    write_drafter(tmp_path / "a", config, with_embed=False, tensors=plain + [(n, "BF16", s) for n, s in mla.items()])
    mla["midlayer.self_attn.kv_b_proj.weight"] = [256, 32]
    write_drafter(tmp_path / "b", config, with_embed=False, tensors=plain + [(n, "BF16", s) for n, s in mla.items()])

    same = compare(str(tmp_path / "a"), str(tmp_path / "a"))
    changed = compare(str(tmp_path / "a"), str(tmp_path / "b"))

    assert same.profile == "eagle3" and same.verdict == "compatible"
    assert {f.severity for f in same.findings} <= {"info"}
    rows = {row.name: row for row in changed.tensors}
    assert rows["midlayer.self_attn.kv_b_proj.weight"].status == "shape_mismatch"
    # MLA widths are checked against the config like Llama's: B's kv_b_proj is not 4 heads x (16 + 16) rows
    wrong = next(f for f in changed.findings if f.code == "shape_vs_config")
    assert finding_message(changed, wrong).startswith(
        "B: midlayer.self_attn.kv_b_proj.weight is [256, 32] but its config.json implies [128, 32]"
    )


def test_unknown_attention_tensors_are_not_checked_even_when_the_config_does_not_say_mla(tmp_path):
    config = small_drafter_config(v_head_dim=32)  # o_proj is [64, 4 × 32], not [64, 4 × head_dim 16]
    mla = [
        ("midlayer.self_attn.kv_a_proj_with_mqa.weight", "BF16", [40, 128]),
        ("midlayer.self_attn.o_proj.weight", "BF16", [64, 128]),
    ]
    plain = [(n, d, s) for n, d, s in eagle3_tensors(config, with_embed=False) if ".self_attn." not in n]
    write_drafter(tmp_path / "a", config, with_embed=False, tensors=plain + mla)

    report = compare(str(tmp_path / "a"), str(tmp_path / "a"))

    assert report.verdict == "compatible" and "shape_vs_config" not in codes(report)


def test_a_base_model_compared_under_the_eagle3_profile_keeps_its_names(tmp_path):
    base = write_kimi_k2_base(tmp_path / "base", layers=2, experts=1)

    report = compare(str(base), str(base), profile="eagle3")

    assert naming_convention(report_names := [row.name for row in report.tensors]) is None
    assert "model.layers.0.input_layernorm.weight" in report_names and "model.embed_tokens.weight" in report_names
    assert all(row.a.name is None for row in report.tensors)
    assert report.verdict == "compatible" and report.findings == ()


def test_an_architecture_without_a_profile_gets_the_generic_comparison():
    def base(shape):
        infos = {"model.embed_tokens.weight": TensorInfo("model.embed_tokens.weight", "BF16", shape, "m", (0, 0))}
        return Checkpoint("x", "local", "x", None, infos, config=KIMI_K2_BASE_CONFIG)

    report = compare_checkpoints(base((10, 4)), base((10, 4)))

    assert report.profile is None and report.verdict == "compatible" and report.findings == ()


# --- the failures engines hit -----------------------------------------------------------------------------


def test_lm_head_missing_while_draft_vocab_size_is_set(tmp_path):
    a = drafter(tmp_path / "a")
    b = drafter(tmp_path / "b", drop={"lm_head.weight"})

    report = compare(str(a), str(b))

    assert report.verdict == "incompatible" and codes(report)["lm_head_missing"] == "error"
    assert finding(report, "lm_head_missing").startswith("B: config.json sets draft_vocab_size=256 but there is no")
    assert "randomly initialised" in finding(report, "lm_head_missing")


def test_lm_head_is_injected_from_the_base_when_the_drafter_has_no_draft_vocab_size(tmp_path):
    config = small_drafter_config(draft_vocab_size=None)
    a = drafter(tmp_path / "a", config)
    b = drafter(tmp_path / "b", config, drop={"lm_head.weight"})

    report = compare(str(a), str(b))

    row = next(row for row in report.tensors if row.name == "lm_head.weight")
    assert row.status == "injected" and "the base model's lm_head.weight" in (note_text(row) or "")
    assert report.verdict == "compatible" and "lm_head_missing" not in codes(report)
    assert EAGLE3.base_tensors(config) == {"model.embed_tokens.weight", "lm_head.weight"}
    tied = dict(config, tie_word_embeddings=True)
    assert EAGLE3.base_tensors(tied) == {"model.embed_tokens.weight"}
    assert EAGLE3.injected_weight("lm_head.weight", tied).how == "tied_head"


def test_d2t_missing_when_the_draft_vocabulary_is_smaller(tmp_path):
    a = drafter(tmp_path / "a", drop={"d2t"})

    report = compare(str(a), str(a))

    assert report.verdict == "incompatible" and codes(report)["d2t_missing"] == "error"
    message = finding(report, "d2t_missing")
    assert message.startswith("A and B: the draft vocabulary (draft_vocab_size=256) differs from the target's")
    assert "2.99 to 1.12" in message


def test_no_d2t_is_needed_when_the_draft_vocabulary_is_the_full_one(tmp_path):
    config = small_drafter_config(draft_vocab_size=1024)
    a = drafter(tmp_path / "a", config, drop={"d2t", "t2d"})

    report = compare(str(a), str(a))

    assert report.verdict == "compatible" and "d2t_missing" not in codes(report)


def test_aux_layer_ids_shifted_by_one_mention_the_sglang_vllm_off_by_one(tmp_path):
    a = drafter(tmp_path / "a")
    shifted = small_drafter_config(
        eagle_config={"eagle_aux_hidden_state_layer_ids": [3, 31, 59], "use_aux_hidden_state": True}
    )
    b = drafter(tmp_path / "b", shifted)

    report = compare(str(a), str(b))

    assert report.verdict == "compatible" and codes(report)["aux_layer_ids_differ"] == "warning"
    message = finding(report, "aux_layer_ids_differ")
    assert "A [2, 30, 58], B [3, 31, 59]" in message and "A's +1" in message and "off by one" in message


def test_aux_layer_ids_are_compared_at_the_key_both_sides_set(tmp_path):
    """A vLLM conversion keeps its source's eagle_config ids and adds vLLM's top-level key (their +1): the first key
    found on each side were compared, and the finding said eagle_config's ids differ, naming B's top-level ones."""
    a = drafter(tmp_path / "a")
    converted = small_drafter_config(eagle_aux_hidden_state_layer_ids=[3, 31, 59])
    b = drafter(tmp_path / "b", converted)

    report = compare(str(a), str(b))

    assert "aux_layer_ids_differ" not in codes(report)


def test_aux_layer_ids_at_different_keys_name_each_key(tmp_path):
    a = drafter(tmp_path / "a")
    vllm_only = small_drafter_config(eagle_aux_hidden_state_layer_ids=[3, 31, 59])
    del vllm_only["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    b = drafter(tmp_path / "b", vllm_only)

    report = compare(str(a), str(b))

    message = finding(report, "aux_layer_ids_differ")
    assert message.startswith(
        "aux layer ids differ: A eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58], "
        "B eagle_aux_hidden_state_layer_ids=[3, 31, 59]; B's ids are A's +1"
    ), message


def test_max_position_embeddings_small_and_differing(tmp_path):
    a = drafter(tmp_path / "a")
    b = drafter(tmp_path / "b", small_drafter_config(max_position_embeddings=2048))

    report = compare(str(a), str(b))

    assert codes(report) == {
        "max_position_small": "warning",
        "max_position_differs": "info",
        "injected_from_base": "info",
    }
    assert finding(report, "max_position_small").startswith("B: max_position_embeddings=2048 is small")
    assert finding(report, "max_position_differs") == (
        "max_position_embeddings differs: A 131072, B 2048; the smaller one clamps RoPE past 2048 tokens"
    )


def test_a_drafter_carrying_its_own_embedding_is_pointed_out():
    report = compare(str(FIXTURES / "kimi-k2-eagle3-published"), str(FIXTURES / "kimi-k25-eagle3-ours"))

    assert codes(report)["embed_tokens_carried"] == "info"
    assert finding(report, "embed_tokens_carried").startswith(
        "B: carries its own embed_tokens.weight: vLLM uses it instead of the base's model.embed_tokens.weight"
    )


def test_a_warning_fails_the_gate_with_fail_on_warning(tmp_path, run_cli):
    a = drafter(tmp_path / "a", small_drafter_config(max_position_embeddings=2048))

    assert run_cli(str(a), str(a)).returncode == 0
    result = run_cli(str(a), str(a), "--fail-on", "warning")
    assert result.returncode == 1 and "[max_position_small]" in result.stdout


def test_the_same_finding_for_both_sides_is_reported_once():
    infos = {"fc.weight": TensorInfo("fc.weight", "BF16", (64, 100), "m", (0, 0))}
    side = Checkpoint("x", "local", "x", None, infos, config=small_drafter_config())

    report = compare_checkpoints(side, side, profile=EAGLE3)

    assert [f.code for f in report.findings].count("shape_vs_config") == 1


def test_findings_for_both_sides_merge_by_subject_and_params_and_say_which_sides():
    infos = {"fc.weight": TensorInfo("fc.weight", "BF16", (64, 100), "m", (0, 0))}
    a = Checkpoint("a", "local", "a", None, infos, config=small_drafter_config())
    other = {"fc.weight": TensorInfo("fc.weight", "BF16", (64, 101), "m", (0, 0))}
    b = Checkpoint("b", "local", "b", None, other, config=small_drafter_config())

    same = [f for f in compare_checkpoints(a, a, profile=EAGLE3).findings if f.code == "shape_vs_config"]
    differ = [f for f in compare_checkpoints(a, b, profile=EAGLE3).findings if f.code == "shape_vs_config"]

    assert [(f.subject, f.params["shape"], f.params["sides"]) for f in same] == [("fc.weight", [64, 100], ["A", "B"])]
    assert [(f.subject, f.params["shape"], f.params["sides"]) for f in differ] == [
        ("fc.weight", [64, 100], ["A"]),
        ("fc.weight", [64, 101], ["B"]),
    ]


def test_a_rename_collision_in_the_library_raises_the_user_error():
    infos = {n: TensorInfo(n, "BF16", (1,), "m", (0, 0)) for n in ("x.a", "x.b")}
    side = Checkpoint("x", "local", "x", None, infos)

    with pytest.raises(CkptdiffError, match="turns both 'x.a' and 'x.b' of A into 'x'"):
        compare_checkpoints(side, side, renames=[r"\.[ab]$="])


def test_the_table_shows_each_sides_own_name(tmp_path, run_cli):
    published = drafter(tmp_path / "published")
    converted = drafter(tmp_path / "vllm", rename=vllm_name)

    result = run_cli(str(published), str(converted), "--format", "table", "--all")

    assert result.returncode == 0, result.stderr
    up = next(line for line in result.stdout.splitlines() if line.startswith("midlayer.mlp.up_proj.weight"))
    assert "[160, 64] BF16 as model.layers.0.mlp.up_proj.weight" in up
    assert up.count(" as ") == 1  # A stores it under the canonical name


def test_rename_rules_can_live_in_the_config_file_and_a_flag_replaces_them(tmp_path, run_cli):
    published = drafter(tmp_path / "published")
    prefixed = drafter(tmp_path / "prefixed", rename=lambda name: "draft." + name)
    (tmp_path / "ckptdiff.toml").write_text('rename = ["^draft\\\\.="]\n')

    from_file = run_cli(str(published), str(prefixed), "--format", "json", cwd=tmp_path)
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["counts"]["match"] == 15

    replaced = run_cli(str(published), str(prefixed), "--rename", "^nothing=", "--format", "json", cwd=tmp_path)
    assert replaced.returncode == 1
    assert json.loads(replaced.stdout)["counts"]["only_in_b"] == 15

    (tmp_path / "ckptdiff.toml").write_text("rename = [3]\n")
    broken = run_cli(str(published), str(prefixed), cwd=tmp_path)
    assert broken.returncode == 2 and "must be a list of non-empty strings (REGEX=REPLACEMENT rules)" in broken.stderr


@pytest.mark.parametrize(
    ("torch_dtype", "expected"),
    [("bfloat16", "BF16"), ("torch.float16", "F16"), ("float8_e4m3fn", "F8_E4M3"), ("int8", None), ("bf16", None)],
)
def test_a_drafter_configs_torch_dtype_is_read_through_the_dtype_registry(torch_dtype, expected):
    from ckptdiff.families.eagle3.spec import DrafterSpec

    drafter = DrafterSpec.of(small_drafter_config(torch_dtype=torch_dtype))

    assert drafter.safetensors_dtype == expected
