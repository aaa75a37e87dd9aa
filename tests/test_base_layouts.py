"""--base on every real base layout: multimodal bases keep their text model under a prefix and its settings under a
nested config; the base is read at header cost (its first shard, the index only when needed)."""

from __future__ import annotations

import json
import math
import random
import struct
from pathlib import Path

import pytest
from base_fixtures import (
    GEMMA3_CONFIG,
    KIMI_K25_CONFIG,
    LLAMA4_SCOUT_CONFIG,
    MISTRAL3_CONFIG,
    QWEN3_VL_CONFIG,
    drafter_config_for,
    write_kimi_k25_base,
    write_llama32_1b_base,
    write_llava_style_base,
    write_qwen3_vl_base,
    write_sharded,
)

from ckptdiff import compare
from ckptdiff.base_layouts import LAYOUTS, recognise, text_config, wanted_groups
from ckptdiff.formats._common import side_display_with_layout
from ckptdiff.formats.messages import finding_message
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import (
    KIMI_K2_BASE_CONFIG,
    eagle3_tensors,
    header_bytes,
    kimi_k2_base_layer,
    small_drafter_config,
    write_config,
    write_drafter,
    write_kimi_k2_drafter_pair,
)

K25_FIRST = "model-00001-of-00064.safetensors"


@pytest.fixture(scope="module")
def kimi_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The published Kimi-K2 drafter (no embed) and a K2.5 one carrying its own, full-scale sparse."""
    return write_kimi_k2_drafter_pair(tmp_path_factory.mktemp("pair"))


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def messages(report, code: str) -> list[str]:
    return [finding_message(report, f) for f in report.findings if f.code == code]


def headless_drafter(folder: Path, config: dict) -> Path:
    """A drafter without draft_vocab_size, embed_tokens or lm_head: the engine takes both from the base."""
    specs = [spec for spec in eagle3_tensors(config, with_embed=False) if spec[0] != "lm_head.weight"]
    return write_drafter(folder, config, with_embed=False, tensors=specs)


def only_the_first_shard(base: Path, first: str) -> Path:
    """Delete every other shard and break the index: a run that succeeds read config.json and ``first`` only."""
    for shard in base.glob("model-*.safetensors"):
        if shard.name != first:
            shard.unlink()
    (base / "model.safetensors.index.json").write_text("not an index: reading it would fail")
    return base


# --- Kimi-K2.5: text_config, language_model.*, a vision tower, 64 shards ---------------------------------------


def test_the_kimi_pair_against_a_k25_layout_base_reads_one_shard_header(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = only_the_first_shard(write_kimi_k25_base(tmp_path / "Kimi-K2.5"), K25_FIRST)

    result = run_cli(str(published), str(ours), "--base", str(base), "--format", "json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["base"]["files"] == 1 and report["base"]["layout"]["name"] == "kimi-k2.5"
    assert report["base"]["layout"]["embedding"] == "language_model.model.embed_tokens.weight"
    assert report["base"]["layout"]["text_config"] == ["text_config"]
    embed = next(t for t in report["tensors"] if t["name"] == "embed_tokens.weight")
    assert embed["status"] == "injected" and embed["note"] == (
        "frozen: the engine takes it from the base model's language_model.model.embed_tokens.weight; "
        "verified: [163840, 7168] BF16"
    )
    assert {
        "severity": "info",
        "code": "injected_verified",
        "message": "A: embed_tokens.weight: the base's "
        "language_model.model.embed_tokens.weight [163840, 7168] BF16 fits",
        "subject": "embed_tokens.weight",
        "params": {
            "weight": "embed_tokens.weight",
            "base_name": "language_model.model.embed_tokens.weight",
            "base_shape": [163840, 7168],
            "base_dtype": "BF16",
            "sides": ["A"],
        },
    } in report["findings"]
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    # the text model's settings were found under text_config: no check was skipped
    assert "base_setting_missing" not in {f["code"] for f in report["findings"]}


def test_the_table_and_markdown_name_the_layout(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = write_kimi_k25_base(tmp_path / "Kimi-K2.5")

    table = run_cli(str(published), str(ours), "--base", str(base))
    markdown = run_cli(str(published), str(ours), "--base", str(base), "--format", "markdown")

    assert table.returncode == 0 and markdown.returncode == 0, table.stderr + markdown.stderr
    assert f"base: {base} (multimodal; text model under language_model.)" in table.stdout
    assert f"- **base**: `{base}` (multimodal; text model under language_model.) — 1 file, " in markdown.stdout


def test_a_k25_layout_hub_base_costs_its_config_and_one_shard_header(kimi_pair, tmp_path, hub_client):
    published, ours = kimi_pair
    hub_client.add_repo("moonshotai/Kimi-K2.5", write_kimi_k25_base(tmp_path / "Kimi-K2.5"))

    report = compare(str(published), str(ours), base="moonshotai/Kimi-K2.5")

    assert report.verdict == "compatible" and report.base.layout.embedding == "language_model.model.embed_tokens.weight"
    assert side_display_with_layout(report.base).endswith("(multimodal; text model under language_model.)")
    read = [entry.path.rsplit("/", 1)[1] for entry in hub_client.log if entry.route == "resolve"]
    assert sorted(set(read)) == ["config.json", K25_FIRST]  # no index, one shard
    assert hub_client.requests == {"api-info": 1, "resolve": 2}  # listing; config.json (one GET); one range
    assert (
        "B: carries its own embed_tokens.weight: vLLM uses it instead of the base's language_model.model."
        "embed_tokens.weight" in messages(report, "embed_tokens_carried")[0]
    )


def test_a_k25_layout_base_with_a_160000_row_embedding_is_incompatible(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = write_kimi_k25_base(tmp_path / "other", embed_rows=160000)

    result = run_cli(str(published), str(ours), "--base", str(base), "--format", "json")

    assert result.returncode == 1, result.stderr
    (error,) = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert error["code"] == "injected_incompatible_with_base"
    assert "language_model.model.embed_tokens.weight, which is [160000, 7168] BF16" in error["message"]
    assert "needs [163840, 7168]" in error["message"]


def test_a_drafter_for_another_vocabulary_is_checked_against_text_config(tmp_path):
    base = write_kimi_k25_base(tmp_path / "Kimi-K2.5")
    config = json.loads((FIXTURES / "kimi-k2-eagle3-config.json").read_text())
    drafter = write_drafter(tmp_path / "d", dict(config, vocab_size=151936), with_embed=False)

    report = compare(str(drafter), str(drafter), base=str(base))

    assert (
        "A and B: vocab_size=151936 but the base's text_config.vocab_size is 163840: the drafter was trained for "
        "another tokenizer" in messages(report, "base_config_mismatch")
    )


# --- other multimodal families ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, config, tower",
    [("llama-4", LLAMA4_SCOUT_CONFIG, "vision_model."), ("mistral-3", MISTRAL3_CONFIG, "vision_tower.")],
)
def test_language_model_bases_supply_the_embedding_and_the_head(tmp_path, layout, config, tower):
    base = write_llava_style_base(tmp_path / "base", config, tower=tower, projector="multi_modal_projector.")
    text = config["text_config"]
    # no draft_vocab_size: the engine takes lm_head from the base too, which is in the second shard
    drafter = headless_drafter(tmp_path / "d", drafter_config_for(text, draft_vocab_size=None))

    report = compare(str(drafter), str(drafter), base=str(base))

    assert report.verdict == "compatible", report.findings
    shape = f"[{text['vocab_size']}, {text['hidden_size']}] BF16"
    assert messages(report, "injected_verified") == [
        f"A and B: embed_tokens.weight: the base's language_model.model.embed_tokens.weight {shape} fits",
        f"A and B: lm_head.weight: the base's language_model.lm_head.weight {shape} fits",
    ]
    assert report.base.files == 2  # the head is not in the first shard: the index named the second
    assert report.base.layout.name == layout


def test_gemma3_ties_its_head_and_its_text_config_has_no_vocab_size(tmp_path):
    base = write_llava_style_base(
        tmp_path / "gemma-3-4b-it",
        GEMMA3_CONFIG,
        tower="vision_tower.vision_model.",
        projector="multi_modal_projector.",
        tied=True,
    )
    drafter = headless_drafter(tmp_path / "d", drafter_config_for(GEMMA3_CONFIG["text_config"], draft_vocab_size=None))

    report = compare(str(drafter), str(drafter), base=str(base))

    assert report.verdict == "compatible", report.findings
    assert messages(report, "injected_verified") == [
        "A and B: embed_tokens.weight: the base's language_model.model.embed_tokens.weight [262208, 2560] BF16 fits",
        "A and B: lm_head.weight: the base's language_model.model.embed_tokens.weight [262208, 2560] BF16 fits",
    ]
    assert report.base.layout.lm_head_tied
    # never skipped silently: the check that could not run says what it looked for
    assert messages(report, "base_setting_missing") == [
        "A and B: the base's config.json has no text_config.vocab_size or vocab_size: the drafter's "
        "vocab_size=262208 not checked against the base",
        "A and B: the base's config.json has no text_config.max_position_embeddings or max_position_embeddings: "
        "the drafter's max_position_embeddings=131072 not checked against the base",
    ]


def test_qwen3_vl_keeps_its_text_model_under_model_language_model(tmp_path):
    base = write_qwen3_vl_base(tmp_path / "Qwen3-VL-8B-Instruct")
    text = QWEN3_VL_CONFIG["text_config"]
    drafter = write_drafter(tmp_path / "d", drafter_config_for(text, hidden_size=2048), with_embed=False)

    report = compare(str(drafter), str(drafter), base=str(base))

    assert report.base.layout.name == "qwen3-vl" and report.base.files == 1
    assert messages(report, "base_config_mismatch") == [
        "A and B: the drafter expects target hidden states of hidden_size=2048 but the base's "
        "text_config.hidden_size is 4096: fc cannot take the base's hidden states"
    ]
    assert (
        "model.language_model.embed_tokens.weight, which is [151936, 4096] BF16"
        in messages(report, "injected_incompatible_with_base")[0]
    )


def test_a_text_only_base_with_tied_embeddings_supplies_the_head_from_its_embedding(tmp_path):
    base = write_llama32_1b_base(tmp_path / "Llama-3.2-1B")
    text = json.loads((base / "config.json").read_text())
    drafter = headless_drafter(tmp_path / "d", drafter_config_for(text, draft_vocab_size=None))

    report = compare(str(drafter), str(drafter), base=str(base))

    assert report.verdict == "compatible", report.findings
    assert report.base.layout.name == "text-only" and report.base.layout.lm_head_tied
    assert messages(report, "injected_verified")[1] == (
        "A and B: lm_head.weight: the base's model.embed_tokens.weight [128256, 2048] BF16 fits"
    )


def test_a_base_without_config_json_says_what_is_not_checked(kimi_pair, tmp_path):
    published, ours = kimi_pair
    base = write_kimi_k25_base(tmp_path / "base")
    (base / "config.json").unlink()

    report = compare(str(published), str(ours), base=str(base))

    assert report.verdict == "compatible"
    assert report.base.layout.name == "language_model.model"  # from the tensor names alone
    assert messages(report, "base_config_missing") == [
        f"the base ({base}) has no config.json: the drafters' vocab_size, hidden size, aux layer ids, dtype and "
        "max_position_embeddings are not checked against it"
    ]


def test_every_layout_cites_where_it_comes_from_and_recognition_is_data():
    assert all(layout.source and layout.architectures for layout in LAYOUTS)
    k25 = recognise(KIMI_K25_CONFIG, {"language_model.model.embed_tokens.weight", "vision_tower.x"})
    assert (k25.layout.name, k25.embedding, k25.lm_head) == (
        "kimi-k2.5",
        "language_model.model.embed_tokens.weight",
        None,
    )
    assert text_config(KIMI_K25_CONFIG)["vocab_size"] == 163840
    assert text_config({"thinker_config": {"text_config": {"vocab_size": 7}}})["vocab_size"] == 7
    assert text_config(KIMI_K2_BASE_CONFIG) is KIMI_K2_BASE_CONFIG
    (embedding,) = wanted_groups(["embedding"])
    assert {
        "model.embed_tokens.weight",
        "language_model.model.embed_tokens.weight",
        "model.language_model.embed_tokens.weight",
        "thinker.model.embed_tokens.weight",
    } <= embedding


@pytest.mark.parametrize(
    "config, names, layout, path, embedding, head",
    [
        (
            {"architectures": ["Qwen2_5OmniModel"], "thinker_config": {"text_config": {"vocab_size": 152064}}},
            {"thinker.model.embed_tokens.weight", "thinker.lm_head.weight", "talker.model.embed_tokens.weight"},
            "qwen2.5-omni",
            ("thinker_config", "text_config"),
            "thinker.model.embed_tokens.weight",
            "thinker.lm_head.weight",
        ),
        (
            {"architectures": ["InternVLChatModel"], "llm_config": {"architectures": ["InternLM2ForCausalLM"]}},
            {"language_model.model.tok_embeddings.weight", "language_model.output.weight", "mlp1.0.weight"},
            "internvl",
            ("llm_config",),
            "language_model.model.tok_embeddings.weight",
            "language_model.output.weight",
        ),
        (
            {"architectures": ["DeepseekVLV2ForCausalLM"], "language_config": {"vocab_size": 129280}},
            {"language.model.embed_tokens.weight", "language.lm_head.weight", "vision.blocks.0.attn.qkv.weight"},
            "deepseek-vl2",
            ("language_config",),
            "language.model.embed_tokens.weight",
            "language.lm_head.weight",
        ),
        (  # Qwen2.5-VL as published: text settings at the top level, text model under model.
            {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "vocab_size": 152064, "vision_config": {}},
            {"model.embed_tokens.weight", "lm_head.weight", "visual.blocks.0.attn.qkv.weight"},
            "qwen2.5-vl",
            (),
            "model.embed_tokens.weight",
            "lm_head.weight",
        ),
        (  # an architecture no layout names: recognised by its tensor names, its text config found by its key
            {"architectures": ["SomeNewVLForConditionalGeneration"], "text_config": {"vocab_size": 32000}},
            {"model.language_model.embed_tokens.weight", "lm_head.weight", "model.visual.x"},
            "model.language_model",
            ("text_config",),
            "model.language_model.embed_tokens.weight",
            "lm_head.weight",
        ),
    ],
)
def test_layouts_recognised_from_config_and_names(config, names, layout, path, embedding, head):
    resolved = recognise(config, names)

    assert (resolved.layout.name, resolved.text_config_path) == (layout, path)
    assert (resolved.embedding, resolved.lm_head, resolved.lm_head_tied) == (embedding, head, False)


# --- header cost on the Hub ---------------------------------------------------------------------------------


def test_a_full_scale_61_shard_hub_base_costs_under_2_mb(kimi_pair, kimi_k2_base, tmp_path, hub, run_cli):
    base = kimi_k2_base  # 61 shards, ~140 k tensors, a 12.5 MB index
    assert (base / "model.safetensors.index.json").stat().st_size > 10_000_000
    hub.add_repo("AQ-MedAI/Kimi-K2-Instruct-eagle3", kimi_pair[0])
    hub.add_repo("moonshotai/Kimi-K2-Instruct", base)
    env = hub.client_env(tmp_path / "hf")
    drafter = "AQ-MedAI/Kimi-K2-Instruct-eagle3"

    result = run_cli(drafter, drafter, "--base", "moonshotai/Kimi-K2-Instruct", "--format", "json", env=env)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "compatible" and report["base"]["files"] == 1
    assert hub.total_bytes < 2_000_000, hub.bytes_sent
    assert not [entry for entry in hub.log if entry.path.endswith("model.safetensors.index.json")]


def test_a_base_whose_embedding_is_not_in_the_first_shard_reads_the_index(kimi_pair, tmp_path, hub_client):
    published, ours = kimi_pair
    config = KIMI_K2_BASE_CONFIG  # three of its layers written, the embedding with the last
    layers = [kimi_k2_base_layer(config, layer, experts=1) for layer in range(3)]
    layers[-1] += [
        ("model.embed_tokens.weight", "BF16", [163840, 7168]),
        ("model.norm.weight", "BF16", [7168]),
        ("lm_head.weight", "BF16", [163840, 7168]),
    ]
    hub_client.add_repo("org/base", write_sharded(tmp_path / "base", config, layers))

    report = compare(str(published), str(ours), base="org/base")

    assert report.verdict == "compatible" and "injected_verified" in codes(report)
    read = sorted({entry.path.rsplit("/", 1)[1] for entry in hub_client.log if entry.route == "resolve"})
    assert read == [
        "config.json",
        "model-00001-of-00003.safetensors",
        "model-00003-of-00003.safetensors",
        "model.safetensors.index.json",
    ]
    assert report.base.files == 2


# --- --values --base under every naming ---------------------------------------------------------------------


def bf16(count: int, seed: int) -> bytes:
    """``count`` bf16 values ~ N(0, 1): the high halves of float32s."""
    rng = random.Random(seed)
    floats = struct.pack(f"<{count}f", *(rng.gauss(0, 1) for _ in range(count)))
    return b"".join(floats[i + 2 : i + 4] for i in range(0, len(floats), 4))


def write_with_data(path: Path, tensors: list[tuple[str, str, list[int], bytes | None]]) -> None:
    """A safetensors file with the given bytes per tensor (None: zeros)."""
    prefix, _ = header_bytes([(name, dtype, shape) for name, dtype, shape, _ in tensors], {"format": "pt"})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(prefix)
        for _, dtype, shape, data in tensors:
            size = math.prod(shape) * (1 if dtype == "BOOL" else 8 if dtype == "I64" else 2)
            handle.write(data if data is not None else bytes(size))


def vllm_drafter(folder: Path, embed: bytes, head_rows: int = 256) -> Path:
    """A small drafter in vLLM's naming (model.layers.0.*, model.embed_tokens.weight) carrying ``embed``; with
    ``head_rows`` equal to the vocabulary, no draft_vocab_size: its lm_head is the one the engine would take
    from the base."""
    config = small_drafter_config(**({"draft_vocab_size": None} if head_rows == 1024 else {}))
    v, h = config["vocab_size"], config["hidden_size"]
    write_with_data(
        folder / "model.safetensors",
        [
            ("d2t", "I64", [256], None),
            ("lm_head.weight", "BF16", [head_rows, h], None),
            ("model.embed_tokens.weight", "BF16", [v, h], embed),
            ("model.fc.weight", "BF16", [h, 3 * h], None),
            ("model.layers.0.input_layernorm.weight", "BF16", [h], None),
            ("model.norm.weight", "BF16", [h], None),
        ],
    )
    write_config(folder, config)
    return folder


@pytest.fixture
def small_k25_base(tmp_path) -> tuple[Path, bytes]:
    """A K2.5-layout base at the small drafter's dims, with a real embedding."""
    config = json.loads(json.dumps(KIMI_K25_CONFIG))
    config["text_config"].update(vocab_size=1024, hidden_size=64)
    embed = bf16(1024 * 64, seed=1)
    write_with_data(
        tmp_path / "base" / "model-00001-of-00002.safetensors",
        [("language_model.model.embed_tokens.weight", "BF16", [1024, 64], embed)],
    )
    write_with_data(
        tmp_path / "base" / "model-00002-of-00002.safetensors",
        [
            ("language_model.lm_head.weight", "BF16", [1024, 64], None),
            ("vision_tower.patch_embed.proj.weight", "BF16", [16, 3, 14, 14], None),
        ],
    )
    weight_map = {
        "language_model.model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "language_model.lm_head.weight": "model-00002-of-00002.safetensors",
        "vision_tower.patch_embed.proj.weight": "model-00002-of-00002.safetensors",
    }
    (tmp_path / "base" / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    write_config(tmp_path / "base", config)
    return tmp_path / "base", embed


def test_values_base_compares_a_vllm_named_embedding_with_the_bases(small_k25_base, tmp_path):
    pytest.importorskip("torch")
    from ckptdiff.pipeline import compare_specs

    base, embed = small_k25_base
    random_one = vllm_drafter(tmp_path / "random", bf16(1024 * 64, seed=7))
    copied = vllm_drafter(tmp_path / "copied", embed)

    bad = compare_specs(str(random_one), str(random_one), base=str(base), values=True)
    good = compare_specs(str(copied), str(copied), base=str(base), values=True)

    errors = [f for f in bad.findings if f.code == "embed_differs_from_base"]
    assert [f.severity for f in errors] == ["error", "error"] and finding_message(bad, errors[0]).startswith(
        "A's model.embed_tokens.weight differs from the base's language_model.model.embed_tokens.weight"
    )
    assert bad.exit_code == 1
    assert [finding_message(good, f) for f in good.findings if f.code == "embed_matches_base"] == [
        "A's model.embed_tokens.weight equals the base's language_model.model.embed_tokens.weight",
        "B's model.embed_tokens.weight equals the base's language_model.model.embed_tokens.weight",
    ]
    assert good.exit_code == 0


def test_values_base_pairs_a_head_taken_from_the_base(small_k25_base, tmp_path):
    pytest.importorskip("torch")
    from ckptdiff.pipeline import compare_specs

    base, embed = small_k25_base
    drafter = vllm_drafter(tmp_path / "d", embed, head_rows=1024)

    report = compare_specs(str(drafter), str(drafter), base=str(base), values=True)

    assert "A's lm_head.weight equals the base's language_model.lm_head.weight" in [
        finding_message(report, f) for f in report.findings if f.code == "embed_matches_base"
    ]


def test_values_base_says_when_a_role_cannot_be_paired(small_k25_base, tmp_path):
    pytest.importorskip("torch")
    from ckptdiff.pipeline import compare_specs

    base, _ = small_k25_base
    config = json.loads((base / "config.json").read_text())
    config["text_config"]["vocab_size"] = 2048
    (base / "config.json").write_text(json.dumps(config))
    wide = vllm_drafter(tmp_path / "d", bf16(1024 * 64, seed=7))
    # a base embedding of another shape: written over the first shard
    write_with_data(
        base / "model-00001-of-00002.safetensors",
        [("language_model.model.embed_tokens.weight", "BF16", [2048, 64], None)],
    )

    report = compare_specs(str(wide), str(wide), base=str(base), values=True)

    assert [finding_message(report, f) for f in report.findings if f.code == "base_pair_unavailable"][0] == (
        "A's model.embed_tokens.weight [1024, 64] is not compared by value with the base's "
        "language_model.model.embed_tokens.weight [2048, 64]: the shapes differ"
    )
