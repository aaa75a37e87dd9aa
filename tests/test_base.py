"""--base: weights the engine injects are verified against the base model, reading only the shard(s) that hold
them, and the drafters' configs are checked against the base's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptdiff import compare
from ckptdiff.formats._common import note_text
from ckptdiff.formats.messages import finding_message
from ckptdiff.report import NotePart, TensorSide
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import (
    KIMI_K2_BASE_CONFIG,
    KIMI_K2_DRAFTER_CONFIG,
    eagle3_tensors,
    write_config,
    write_drafter,
    write_kimi_k2_base,
    write_kimi_k2_drafter_pair,
    write_safetensors,
)

FIRST_SHARD = "model-00001-of-000061.safetensors"


@pytest.fixture(scope="module")
def kimi_pair(tmp_path_factory) -> tuple[Path, Path]:
    """Full-scale sparse drafters: the published Kimi-K2 one (no embed) and a K2.5 one carrying its embed."""
    return write_kimi_k2_drafter_pair(tmp_path_factory.mktemp("pair"))


def base_with_only_the_first_shard(folder: Path, **options) -> Path:
    """A 61-shard Kimi-K2-shaped base whose shards 2..61 are deleted after the index is written: a run that
    succeeds on it opened nothing but config.json, the index and the first shard."""
    write_kimi_k2_base(folder, experts=2, **options)
    for shard in folder.glob("model-*.safetensors"):
        if shard.name != FIRST_SHARD:
            shard.unlink()
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 61 and sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        FIRST_SHARD,
        "model.safetensors.index.json",
    ]
    return folder


def tiny_base(folder: Path, tensors: list, **config) -> Path:
    """A one-shard sharded base holding just ``tensors`` (name, dtype, shape), with a Kimi-K2 config."""
    write_safetensors(folder / "model-00001-of-000001.safetensors", tensors)
    weight_map = {name: "model-00001-of-000001.safetensors" for name, _, _ in tensors}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    write_config(folder, dict(KIMI_K2_BASE_CONFIG, **config))
    return folder


def codes(report) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def finding(report, code: str) -> str:
    (message,) = [finding_message(report, f) for f in report.findings if f.code == code]
    return message


# --- the reference pair against a 61-shard base -----------------------------------------------------------


def test_the_kimi_pair_with_a_61_shard_base_verifies_embed_tokens_from_one_shard(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = base_with_only_the_first_shard(tmp_path / "Kimi-K2-Instruct")

    result = run_cli(str(published), str(ours), "--base", str(base), "--format", "json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "compatible"
    assert report["base"]["files"] == 1 and report["base"]["tensors"] < 100
    embed = next(t for t in report["tensors"] if t["name"] == "embed_tokens.weight")
    assert embed["status"] == "injected" and embed["a"] is None
    assert embed["b"] == {"shape": [163840, 7168], "dtype": "BF16"}
    assert (
        embed["note"]
        == "frozen: the engine takes it from the base model's model.embed_tokens.weight; verified: [163840, 7168] BF16"
    )
    assert {
        "severity": "info",
        "code": "injected_verified",
        "message": "A: embed_tokens.weight: the base's model.embed_tokens.weight [163840, 7168] BF16 fits",
        "subject": "embed_tokens.weight",
        "params": {
            "weight": "embed_tokens.weight",
            "base_name": "model.embed_tokens.weight",
            "base_shape": [163840, 7168],
            "base_dtype": "BF16",
            "sides": ["A"],
        },
    } in (report["findings"])
    assert not [f for f in report["findings"] if f["severity"] != "info"]


def test_the_same_in_the_table_format(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = base_with_only_the_first_shard(tmp_path / "Kimi-K2-Instruct")

    result = run_cli(str(published), str(ours), "--base", str(base), "-v")

    assert result.returncode == 0, result.stderr
    assert f"base: {base}" in result.stdout
    assert "\ninfo:\n" in result.stdout  # -v: info findings are shown, under their heading
    assert "\n  [injected_verified] A: embed_tokens.weight: the base's model.embed_tokens.weight" in result.stdout


def test_a_base_whose_embedding_has_160000_rows_is_incompatible(kimi_pair, tmp_path, run_cli):
    published, ours = kimi_pair
    base = base_with_only_the_first_shard(tmp_path / "other-base", embed_shape=[160000, 7168])

    result = run_cli(str(published), str(ours), "--base", str(base), "--format", "json")

    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "incompatible"
    (error,) = [f for f in report["findings"] if f["severity"] == "error"]
    assert error["code"] == "injected_incompatible_with_base"
    assert error["message"] == (
        "A: embed_tokens.weight would come from the base's model.embed_tokens.weight, which is [160000, 7168] BF16, "
        "but A's config.json needs [163840, 7168] (vocab_size=163840, hidden_size=7168) and B stores its own as "
        "[163840, 7168]"
    )
    embed = next(t for t in report["tensors"] if t["name"] == "embed_tokens.weight")
    assert embed["note"].endswith("; base has [160000, 7168] BF16: does not fit")


def test_a_hub_base_costs_its_config_and_one_shard_header(kimi_pair, tmp_path, hub_client):
    published, ours = kimi_pair
    hub_client.add_repo("moonshotai/Kimi-K2-Instruct", write_kimi_k2_base(tmp_path / "base", experts=2))

    report = compare(str(published), str(ours), base="moonshotai/Kimi-K2-Instruct")

    assert report.verdict == "compatible" and "injected_verified" in codes(report)
    assert report.base.files == 1 and report.base.revision is not None
    weight_files = {e.path.rsplit("/", 1)[1] for e in hub_client.log if ".safetensors" in e.path}
    assert weight_files == {FIRST_SHARD}  # the first shard holds the embedding: the index is not needed
    # one listing call, config.json (one GET), one ranged GET
    assert hub_client.requests == {"api-info": 1, "resolve": 2}


def test_the_cli_with_a_hub_base_and_a_bad_embedding_exits_1(kimi_pair, tmp_path, hub, run_cli):
    published, ours = kimi_pair
    hub.add_repo("org/other-base", write_kimi_k2_base(tmp_path / "base", experts=2, embed_shape=[160000, 7168]))

    result = run_cli(str(published), str(ours), "--base", "org/other-base", "-q", env=hub.client_env(tmp_path / "hf"))

    assert result.returncode == 1, result.stderr
    assert "errors:\n  [injected_incompatible_with_base] A: embed_tokens.weight would come from" in result.stdout
    assert hub.requests == {"api-info": 1, "resolve": 2}  # listing; config.json (one GET); one shard header


# --- more base checks, on small bases ---------------------------------------------------------------------


def test_an_injected_rows_note_names_where_it_comes_from_and_the_verdict_as_data(kimi_pair, tmp_path):
    published, ours = kimi_pair
    base = base_with_only_the_first_shard(tmp_path / "Kimi-K2-Instruct")

    report = compare(str(published), str(ours), base=str(base))

    embed = next(row for row in report.tensors if row.name == "embed_tokens.weight")
    assert embed.notes == (
        NotePart("injected", how="embedding", name="model.embed_tokens.weight"),
        NotePart("base_verdict", how="verified", stores=TensorSide((163840, 7168), "BF16")),
    )
    assert note_text(embed) == (
        "frozen: the engine takes it from the base model's model.embed_tokens.weight; verified: [163840, 7168] BF16"
    )


def drafter_pair(root: Path, **config) -> tuple[Path, Path]:
    """Full-scale sparse drafters without embed_tokens (A) and with it (B)."""
    drafter_config = dict(KIMI_K2_DRAFTER_CONFIG, **config)
    return (
        write_drafter(root / "a", drafter_config, with_embed=False),
        write_drafter(root / "b", drafter_config, with_embed=True),
    )


def test_a_base_without_the_embedding_cannot_supply_it(tmp_path):
    a, b = drafter_pair(tmp_path)
    base = tiny_base(tmp_path / "base", [("model.norm.weight", "BF16", [7168])])

    report = compare(str(a), str(b), base=str(base))

    assert report.verdict == "incompatible" and codes(report)["injected_missing_in_base"] == "error"
    assert finding(report, "injected_missing_in_base").startswith("A: embed_tokens.weight is absent and the base")
    assert finding(report, "injected_missing_in_base").endswith("has no model.embed_tokens.weight to supply it")


def test_the_drafter_config_is_checked_against_the_base_config(tmp_path):
    a, b = drafter_pair(tmp_path)
    base = write_kimi_k2_base(
        tmp_path / "base",
        layers=2,
        experts=1,
        embed_shape=[163840, 7168],
        config=dict(
            KIMI_K2_BASE_CONFIG,
            vocab_size=160000,
            num_hidden_layers=40,
            torch_dtype="float16",
            max_position_embeddings=262144,
        ),
    )

    report = compare(str(a), str(b), base=str(base))

    assert report.verdict == "incompatible"
    assert codes(report) == {
        "injected_verified": "info",  # the embedding itself is [163840, 7168] in this base's shard
        "embed_tokens_carried": "info",
        "base_config_mismatch": "error",
        "aux_layer_out_of_range": "error",
        "dtype_differs_from_base": "warning",
        "max_position_small": "warning",
    }
    messages = [finding_message(report, f) for f in report.findings]
    assert (
        "A and B: vocab_size=163840 but the base's vocab_size is 160000: the drafter was trained for another tokenizer"
    ) in messages
    assert finding(report, "aux_layer_out_of_range").startswith(
        "A and B: eagle_config.eagle_aux_hidden_state_layer_ids=[2, 30, 58] names layer(s) [58] but the base has "
        "num_hidden_layers=40"
    )
    assert "SGLang/vLLM off-by-one" in finding(report, "aux_layer_out_of_range")
    assert finding(report, "dtype_differs_from_base").startswith(
        "A and B: the drafter is BF16 but the base runs in F16"
    )
    assert finding(report, "max_position_small").startswith(
        "A and B: max_position_embeddings=131072 is below the base's 262144"
    )


def test_one_drafter_checked_alone_is_checked_against_the_base_config_too(tmp_path, run_cli):
    """`ckptdiff ./ours --engine sglang --base BASE`, the gate before deployment, said "compatible: sglang A loads"
    of a drafter whose vocab_size is not the base's: every engine loads it, and it proposes another tokenizer's ids.
    On its own, a drafter is checked against the base's config as each side of a pair is."""
    a, _ = drafter_pair(tmp_path)
    base = tmp_path / "base"
    write_config(base, dict(KIMI_K2_BASE_CONFIG, vocab_size=160000, max_position_embeddings=262144))
    write_safetensors(base / "model.safetensors", [("model.norm.weight", "BF16", [7168])])

    alone = compare(str(a), base=str(base), engines=["sglang"])

    assert alone.verdict == "incompatible"
    assert codes(alone) == {"base_config_mismatch": "error", "max_position_small": "warning"}
    assert finding(alone, "base_config_mismatch") == (
        "A: vocab_size=163840 but the base's vocab_size is 160000: the drafter was trained for another tokenizer"
    )
    gate = run_cli(str(a), "--engine", "sglang", "--base", str(base), "-q")
    assert gate.returncode == 1
    assert gate.stdout.splitlines()[-1] == "incompatible: 1 error (base_config_mismatch)"


def test_a_base_with_another_hidden_size_cannot_feed_fc(tmp_path):
    a, b = drafter_pair(tmp_path)
    base = write_kimi_k2_base(
        tmp_path / "base",
        layers=1,
        experts=1,
        embed_shape=[163840, 5120],
        config=dict(KIMI_K2_BASE_CONFIG, hidden_size=5120),
    )

    report = compare(str(a), str(b), base=str(base))

    assert report.verdict == "incompatible"
    assert any("fc cannot take the base's hidden states" in finding_message(report, f) for f in report.findings)
    assert "[163840, 5120] BF16" in finding(report, "injected_incompatible_with_base")


def test_an_injected_weight_in_another_dtype_is_a_warning(tmp_path):
    a = write_drafter(tmp_path / "a", KIMI_K2_DRAFTER_CONFIG, with_embed=False)
    base = tiny_base(tmp_path / "base", [("model.embed_tokens.weight", "F32", [163840, 7168])])

    report = compare(str(a), str(a), base=str(base))

    assert report.verdict == "compatible"
    assert finding(report, "dtype_differs_from_base") == (
        "A and B: embed_tokens.weight would come from the base's model.embed_tokens.weight as F32, but the "
        "drafter's weights are BF16"
    )


def test_lm_head_for_a_drafter_without_draft_vocab_size_is_read_from_the_base_too(tmp_path):
    config = dict(KIMI_K2_DRAFTER_CONFIG, draft_vocab_size=None)
    without_head = [spec for spec in eagle3_tensors(config, with_embed=True) if spec[0] != "lm_head.weight"]
    a = write_drafter(tmp_path / "a", config, with_embed=False)
    b = write_drafter(tmp_path / "b", config, with_embed=True, tensors=without_head)
    base = write_kimi_k2_base(tmp_path / "base", layers=3, experts=1)

    report = compare(str(a), str(b), base=str(base))

    assert report.base.files == 2  # embed in the first shard, lm_head in the last; not the middle one
    assert [finding_message(report, f) for f in report.findings if f.code == "injected_verified"] == [
        "A: embed_tokens.weight: the base's model.embed_tokens.weight [163840, 7168] BF16 fits",
        "B: lm_head.weight: the base's lm_head.weight [163840, 7168] BF16 fits",
    ]
    rows = {row.name: row for row in report.tensors}
    assert rows["lm_head.weight"].status == "injected" and rows["embed_tokens.weight"].status == "injected"


def test_a_base_nothing_uses_is_said_on_stderr_and_left_out_of_the_report(tmp_path, run_cli):
    """Two checkpoints no drafter family claims: --base is read (a typo in it still fails) but nothing checks
    against it, which stderr says once, apart from the report; a drafter pair's base is used and says nothing."""
    for side in ("a", "b"):
        write_safetensors(tmp_path / side / "model.safetensors", [("w", "F32", [2, 2])])
    base = tmp_path / "base"
    write_safetensors(base / "model.safetensors", [("model.embed_tokens.weight", "BF16", [32, 8])])
    plain = run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--base", str(base))
    assert plain.returncode == 0
    assert plain.stderr == (
        "ckptdiff: --base: read, but nothing in this comparison uses it (neither side is a drafter taking weights "
        "from it; --engine and --values check against it)\n"
    )
    assert "nothing in this comparison uses it" not in plain.stdout
    assert run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--base", str(base), "-q").stderr == ""
    assert run_cli(str(tmp_path / "a"), str(tmp_path / "b"), "--base", str(tmp_path / "typo")).returncode == 2

    published, ours = (str(FIXTURES / name) for name in ("kimi-k2-eagle3-published", "kimi-k25-eagle3-ours"))
    used = run_cli(published, ours, "--base", str(FIXTURES / "drafters" / "bases" / "kimi-k2"))
    assert used.returncode in (0, 1) and "--base" not in used.stderr, used.stderr
