"""The full-scale Kimi-K2 drafter pair (sparse files) has the published tensor table, reading only headers.

The expectation is the published table itself (AQ-MedAI/Kimi-K2-Instruct-eagle3, as listed in the shared reference
notes), written out here, not shapes read back from what fixtures/generate.py wrote.
"""

from __future__ import annotations

import json
import math

import pytest

from ckptdiff import compare
from fixtures.generate import write_kimi_k2_drafter_pair

# The published AQ-MedAI/Kimi-K2-Instruct-eagle3 tensors (nn.Linear is [out, in]): H 7168, I 18432, 64 heads × 128,
# 3 aux layers, draft vocab 32000, vocab 163840; bf16 except d2t (int64) and t2d (bool).
REFERENCE = {
    "fc.weight": ([7168, 21504], "BF16"),
    "midlayer.self_attn.q_proj.weight": ([8192, 14336], "BF16"),
    "midlayer.self_attn.k_proj.weight": ([8192, 14336], "BF16"),
    "midlayer.self_attn.v_proj.weight": ([8192, 14336], "BF16"),
    "midlayer.self_attn.o_proj.weight": ([7168, 8192], "BF16"),
    "midlayer.mlp.gate_proj.weight": ([18432, 7168], "BF16"),
    "midlayer.mlp.up_proj.weight": ([18432, 7168], "BF16"),
    "midlayer.mlp.down_proj.weight": ([7168, 18432], "BF16"),
    "midlayer.hidden_norm.weight": ([7168], "BF16"),
    "midlayer.input_layernorm.weight": ([7168], "BF16"),
    "midlayer.post_attention_layernorm.weight": ([7168], "BF16"),
    "norm.weight": ([7168], "BF16"),
    "lm_head.weight": ([32000, 7168], "BF16"),
    "d2t": ([32000], "I64"),
    "t2d": ([163840], "BOOL"),
}
# Not in the published file: frozen, copied from the base's model.embed_tokens.weight; an in-house drafter may carry it.
EMBED_TOKENS = ([163840, 7168], "BF16")
PUBLISHED_BF16_PARAMETERS = 1_190_948_864
PUBLISHED_DATA_BYTES = 2_382_317_568  # 2.22 GiB, the published model.safetensors without its header


def test_the_expected_table_adds_up_to_the_published_file_size():
    """The table above is the published one: its parameters and bytes are those of the published file."""
    bf16 = sum(math.prod(shape) for shape, dtype in REFERENCE.values() if dtype == "BF16")
    assert bf16 == PUBLISHED_BF16_PARAMETERS
    assert bf16 * 2 + 32000 * 8 + 163840 * 1 == PUBLISHED_DATA_BYTES


@pytest.fixture(scope="module")
def kimi_pair(tmp_path_factory):
    return write_kimi_k2_drafter_pair(tmp_path_factory.mktemp("kimi"))


def test_reference_table_is_reproduced(kimi_pair):
    published, ours = kimi_pair
    report = compare(str(published), str(ours))

    assert report.verdict == "compatible"
    rows = {row.name: row for row in report.tensors}
    assert set(rows) == set(REFERENCE) | {"embed_tokens.weight"}
    for name, (shape, dtype) in REFERENCE.items():
        assert rows[name].status == "match", name
        assert (list(rows[name].a.shape), rows[name].a.dtype) == (shape, dtype)
        assert (list(rows[name].b.shape), rows[name].b.dtype) == (shape, dtype)
    embed = rows["embed_tokens.weight"]
    assert embed.status == "injected"
    assert embed.a is None and (list(embed.b.shape), embed.b.dtype) == EMBED_TOKENS
    assert report.a.bytes == PUBLISHED_DATA_BYTES
    assert report.a.parameters == PUBLISHED_BF16_PARAMETERS + 32000 + 163840


def _bytes_read_by_this_process() -> int:
    with open("/proc/self/io") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split()[1])


def test_only_header_bytes_are_read(kimi_pair):
    published, ours = kimi_pair
    on_disk = sum(p.stat().st_size for side in kimi_pair for p in side.iterdir())
    before = _bytes_read_by_this_process()
    compare(str(published), str(ours))
    read = _bytes_read_by_this_process() - before
    assert on_disk > 6 * 10**9
    assert read < 64 * 1024, f"read {read} bytes of {on_disk}"


def test_cli_json_reports_the_reference_pair(kimi_pair, run_cli):
    published, ours = kimi_pair
    result = run_cli(str(published), str(ours), "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["verdict"] == "compatible"
    assert document["a"]["bytes"] == PUBLISHED_DATA_BYTES
    rows = {t["name"]: t for t in document["tensors"]}
    embed = rows.pop("embed_tokens.weight")
    assert embed["status"] == "injected" and embed["a"] is None
    assert (embed["b"]["shape"], embed["b"]["dtype"]) == EMBED_TOKENS
    assert {name: row["status"] for name, row in rows.items()} == dict.fromkeys(REFERENCE, "match")
    for name, (shape, dtype) in REFERENCE.items():
        for side in ("a", "b"):
            assert rows[name][side] == {"shape": shape, "dtype": dtype}, (name, side)
