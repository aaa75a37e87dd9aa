"""The comparison: statuses, verdict, config differences — on in-memory checkpoints and the bundled fixtures."""

from __future__ import annotations

from report_json import json_document

from ckptdiff import compare
from ckptdiff.checkpoint import Checkpoint, TensorInfo
from ckptdiff.comparison import compare_checkpoints, diff_configs, flatten_config
from ckptdiff.families import detect_profile, get_profile
from ckptdiff.formats._common import note_text
from ckptdiff.report import NotePart
from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TWO_AUX = str(FIXTURES / "kimi-k25-eagle3-two-aux")


def checkpoint(tensors: dict[str, tuple[list[int], str]], config=None, spec="x") -> Checkpoint:
    infos = {n: TensorInfo(n, d, tuple(s), "model.safetensors", (0, 0)) for n, (s, d) in tensors.items()}
    return Checkpoint(spec=spec, kind="local", location=spec, revision=None, tensors=infos, config=config)


def test_every_status():
    a = checkpoint(
        {
            "same": ([2, 3], "BF16"),
            "reshaped": ([2, 3], "BF16"),
            "recast": ([4], "F32"),
            "gone": ([1], "F32"),
            "both_differ": ([2], "F16"),
        }
    )
    b = checkpoint(
        {
            "same": ([2, 3], "BF16"),
            "reshaped": ([2, 4], "BF16"),
            "recast": ([4], "BF16"),
            "new": ([1], "F32"),
            "both_differ": ([3], "F32"),
        }
    )
    report = compare_checkpoints(a, b)
    status = {row.name: (row.status, note_text(row)) for row in report.tensors}
    assert status == {
        "both_differ": ("shape_mismatch", "dim 0: 2 vs 3; dtype F16 vs F32"),
        "gone": ("only_in_a", "did you mean B's new? (same shape and dtype)"),
        "new": ("only_in_b", "did you mean A's gone? (same shape and dtype)"),
        "recast": ("dtype_mismatch", "dtype F32 vs BF16"),
        "reshaped": ("shape_mismatch", "dim 1: 3 vs 4"),
        "same": ("match", None),
    }
    assert [row.name for row in report.tensors] == sorted(status)
    assert report.verdict == "incompatible" and report.exit_code == 1


def test_a_row_note_is_data_the_formats_word():
    a = checkpoint({"flat": ([6], "F16"), "renamed": ([2, 2], "F32")})
    b = checkpoint({"flat": ([2, 3], "BF16"), "moved": ([2, 2], "F32")})

    rows = {row.name: row for row in compare_checkpoints(a, b).tensors}

    assert rows["flat"].notes == (NotePart("rank", a=1, b=2), NotePart("dtype", a="F16", b="BF16"))
    assert note_text(rows["flat"]) == "rank 1 vs 2; dtype F16 vs BF16"
    assert rows["renamed"].notes == (NotePart("did_you_mean", side="B", name="moved"),)
    assert rows["moved"].notes == (NotePart("did_you_mean", side="A", name="renamed"),)


def test_embed_tokens_is_injected_only_for_eagle3_drafters():
    drafter_config = {"architectures": ["LlamaForCausalLMEagle3"]}
    a = checkpoint({"fc.weight": ([4, 12], "BF16")}, drafter_config)
    b = checkpoint({"fc.weight": ([4, 12], "BF16"), "embed_tokens.weight": ([32, 4], "BF16")}, drafter_config)
    eagle3 = compare_checkpoints(a, b, profile=detect_profile(a.config, b.config))
    assert eagle3.verdict == "compatible" and eagle3.profile == "eagle3"
    row = next(r for r in eagle3.tensors if r.name == "embed_tokens.weight")
    assert row.status == "injected" and "base model" in (note_text(row) or "")

    generic = compare_checkpoints(a, b, profile=get_profile("none"))
    assert generic.verdict == "incompatible"
    assert {r.name: r.status for r in generic.tensors}["embed_tokens.weight"] == "only_in_b"


def test_profile_detection_from_config():
    assert detect_profile({"architectures": ["LlamaForCausalLMEagle3"]}).name == "eagle3"
    assert detect_profile({"eagle_config": {}}).name == "eagle3"
    assert detect_profile({"speculators_model_type": "eagle3"}).name == "eagle3"
    assert detect_profile({"architectures": ["LlamaForCausalLM"]}, None) is None


def test_config_differences_are_dotted_and_skip_provenance():
    a = {
        "hidden_size": 64,
        "transformers_version": "4.57.0",
        "eagle_config": {"ids": [2, 30, 58], "use": True},
        "only_a": 1,
        "flag": True,
    }
    b = {
        "hidden_size": 64,
        "transformers_version": "4.58.1",
        "eagle_config": {"ids": [2, 30], "use": True},
        "only_b": None,
        "flag": 1,
        "_name_or_path": "/home/me",
    }
    assert flatten_config(a)[("eagle_config", "ids")] == [2, 30, 58]
    diffs = [(d.key, d.status) for d in diff_configs(a, b)]
    assert diffs == [
        ("eagle_config.ids", "differs"),
        ("flag", "differs"),
        ("only_a", "only_in_a"),
        ("only_b", "only_in_b"),
    ]


def test_bundled_fixtures_through_the_api():
    report = compare(PUBLISHED, OURS)
    assert report.verdict == "compatible"
    assert report.counts["match"] == 15 and report.counts["injected"] == 1
    assert [(d.key, d.a, d.b) for d in report.config] == [("max_position_embeddings", 131072, 262144)]
    assert report.a.tensors == 15 and report.b.tensors == 16

    broken = compare(PUBLISHED, TWO_AUX)
    fc = next(row for row in broken.tensors if row.name == "fc.weight")
    assert broken.verdict == "incompatible"
    assert (fc.status, fc.a.shape, fc.b.shape) == ("shape_mismatch", (64, 192), (64, 128))


def test_the_json_report_is_the_documented_schema():
    document = json_document(compare(PUBLISHED, OURS))
    assert document["schema"] == "ckptdiff/report/v1"
    assert {"verdict", "a", "b", "tensors", "config", "findings"} <= document.keys()
    assert {"spec", "kind", "revision", "etag", "files", "tensors", "parameters", "bytes"} <= document["a"].keys()
    assert document["a"]["kind"] == "local" and document["a"]["revision"] is None
    embed = next(t for t in document["tensors"] if t["name"] == "embed_tokens.weight")
    assert embed["a"] is None and embed["b"] == {"shape": [1024, 64], "dtype": "BF16"}
    assert {"severity", "code", "message"} <= document["findings"][0].keys()


def test_rows_are_typed_structs_that_compare_and_hash_by_value() -> None:
    from ckptdiff.report import TensorRow, TensorSide

    side = TensorSide((4,), "F32")
    rows = [TensorRow("a", "match", side, side, None), TensorRow("b", "only_in_a", side, None, "note")]
    assert [row.values for row in rows] == [None, None]
    assert hash(rows[0]) == hash(TensorRow("a", "match", TensorSide((4,), "F32"), side, None))
    assert [row.compared for row in rows] == [True, False]
