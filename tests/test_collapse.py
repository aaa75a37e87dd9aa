"""Layer/expert pattern collapse: one table row per pattern, exactly the names it spells, every tensor in JSON."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptdiff import compare
from ckptdiff.formats import render
from ckptdiff.formats.collapse import collapse, compact_indices, expand_pattern, expanded, fold
from ckptdiff.report import TensorRow, TensorSide
from fixtures.generate import write_kimi_k2_base

NORM = TensorSide((7168,), "BF16")
EXPERT = TensorSide((2048, 7168), "F8_E4M3")


def spelled_names(pattern: str) -> set[str]:
    """Expand ``a.{0..2,5}.b`` into the names it stands for (the inverse of collapse)."""
    pieces = re.split(r"\{([^}]*)\}", pattern)
    choices: list[list[str]] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            choices.append([piece])
            continue
        values: list[str] = []
        for part in piece.split(","):
            first, _, last = part.partition("..")
            values += [str(v) for v in range(int(first), int(last or first) + 1)]
        choices.append(values)
    return {"".join(parts) for parts in itertools.product(*choices)}


def expert_rows(layers, experts, odd=()) -> list[TensorRow]:
    rows = []
    for layer in layers:
        rows.append(TensorRow(f"model.layers.{layer}.input_layernorm.weight", "match", NORM, NORM, None))
        for expert in experts:
            status = "shape_mismatch" if (layer, expert) in odd else "match"
            b = TensorSide((1024, 7168), "F8_E4M3") if status != "match" else EXPERT
            rows.append(
                TensorRow(f"model.layers.{layer}.mlp.experts.{expert}.gate_proj.weight", status, EXPERT, b, None)
            )
    return sorted(rows, key=lambda row: row.name)


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([0, 1, 2, 3, 5, 7, 8, 9], "0..3,5,7..9"),
        ([4, 5], "4,5"),
        ([7], "7"),
        ([3, 1, 2, 2], "1..3"),
        (range(384), "0..383"),
        ([0, 2, 4], "0,2,4"),
    ],
)
def test_index_sets_are_spelled_compactly(values, text):
    assert compact_indices(values) == text


def test_layers_and_experts_collapse_into_one_row_each():
    shown = collapse(expert_rows(range(1, 61), range(384)))
    assert [(line.name, line.count) for line in shown] == [
        ("model.layers.{1..60}.input_layernorm.weight", 60),
        ("model.layers.{1..60}.mlp.experts.{0..383}.gate_proj.weight", 60 * 384),
    ]


def test_a_differing_expert_stands_alone_and_the_rest_stays_exact():
    shown = collapse(expert_rows(range(1, 11), range(8), odd={(5, 7)}))
    by_name = {line.name: (line.count, line.row.status) for line in shown}
    assert by_name == {
        "model.layers.{1..10}.input_layernorm.weight": (10, "match"),
        "model.layers.{1..4,6..10}.mlp.experts.{0..7}.gate_proj.weight": (72, "match"),
        "model.layers.5.mlp.experts.{0..6}.gate_proj.weight": (7, "match"),
        "model.layers.5.mlp.experts.7.gate_proj.weight": (1, "shape_mismatch"),
    }


def test_rows_that_differ_in_anything_shown_do_not_merge():
    a = TensorRow("layers.0.w", "match", NORM, NORM, None)
    b = TensorRow("layers.1.w", "match", EXPERT, EXPERT, None)  # other shape
    c = TensorRow("layers.2.w", "match", NORM, NORM, None, allowed_by="allow_extra.1")  # a policy marker
    d = TensorRow("layers.3.w", "only_in_a", NORM, None, None)  # other status
    e = TensorRow("layers.4.w", "match", NORM, NORM, None)
    shown = collapse([a, b, c, d, e])
    assert [line.name for line in shown] == ["layers.{0,4}.w", "layers.1.w", "layers.2.w", "layers.3.w"]


def test_leading_zeros_and_non_path_digits_are_not_indices():
    rows = [TensorRow(name, "match", NORM, NORM, None) for name in ("h.01.w", "h.02.w", "fp8.w", "fp9.w")]
    assert [line.name for line in collapse(rows)] == ["h.01.w", "h.02.w", "fp8.w", "fp9.w"]


def test_expand_keeps_one_row_per_tensor():
    rows = expert_rows(range(2), range(3))
    assert [(line.name, line.count) for line in expanded(rows)] == [(row.name, 1) for row in rows]


@settings(max_examples=60, deadline=None)
@given(
    grid=st.sets(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=80),
    odd=st.sets(st.tuples(st.integers(0, 12), st.integers(0, 12)), max_size=6),
)
def test_every_pattern_spells_exactly_its_tensors(grid, odd):
    rows = []
    for layer, expert in sorted(grid):
        status = "dtype_mismatch" if (layer, expert) in odd else "match"
        rows.append(TensorRow(f"model.layers.{layer}.mlp.experts.{expert}.w", status, NORM, NORM, None))
    shown = collapse(rows)
    seen: set[str] = set()
    for line in shown:
        names = spelled_names(line.name)
        assert len(names) == line.count
        assert not names & seen  # patterns never overlap
        assert all(row.status == line.row.status for row in rows if row.name in names)
        seen |= names
    assert seen == {row.name for row in rows}


def test_a_converted_layers_names_fold_in_pairs():
    """``ckptdiff convert``'s rows: an output name and its input's, their indices varying together."""
    same = [(f"model.layers.61.mlp.experts.{e}.w", f"model.layers.0.mlp.experts.{e}.w") for e in range(256)]
    assert [(line.names, line.count) for line in fold(same, ["F8_E4M3"] * 256)] == [
        (("model.layers.61.mlp.experts.{0..255}.w", "model.layers.0.mlp.experts.{0..255}.w"), 256)
    ]
    # two MTP layers moved from 0, 1 to 61, 62: the layer index rises with the output's, one row
    moved = [(f"layers.{61 + k}.experts.{e}.w", f"layers.{k}.experts.{e}.w") for k in range(2) for e in range(4)]
    assert [(line.names, line.count) for line in fold(moved, ["BF16"] * 8)] == [
        (("layers.{61,62}.experts.{0..3}.w", "layers.{0,1}.experts.{0..3}.w"), 8)
    ]
    # an input index that falls as the output's rises would not pair up in order: a row each
    crossed = [(f"layers.{k}.w", f"layers.{1 - k}.w") for k in range(2)]
    assert [line.names for line in fold(crossed, ["BF16"] * 2)] == [
        ("layers.0.w", "layers.1.w"),
        ("layers.1.w", "layers.0.w"),
    ]


@settings(max_examples=60, deadline=None)
@given(
    grid=st.sets(st.tuples(st.integers(0, 6), st.integers(0, 12)), min_size=1, max_size=60),
    odd=st.sets(st.tuples(st.integers(0, 6), st.integers(0, 12)), max_size=5),
    move=st.sampled_from(["same", "shifted", "reversed"]),
)
def test_every_folded_pair_of_patterns_spells_exactly_its_pairs(grid, odd, move):
    def source_layer(layer: int) -> int:
        return {"same": layer, "shifted": layer + 61, "reversed": 6 - layer}[move]

    cells = sorted(grid)
    pairs = [(f"m.layers.{k}.experts.{e}.w", f"m.layers.{source_layer(k)}.experts.{e}.w") for k, e in cells]
    keys = ["BF16" if cell in odd else "F8_E4M3" for cell in cells]
    key_of = dict(zip(pairs, keys))
    seen: set[tuple[str, str]] = set()
    for line in fold(pairs, keys):
        spelled = list(zip(expand_pattern(line.names[0]), expand_pattern(line.names[1]), strict=True))
        assert len(spelled) == line.count
        assert {key_of.get(pair) for pair in spelled} == {keys[line.first]}  # only real pairs, all alike
        assert not set(spelled) & seen  # rows never overlap
        seen |= set(spelled)
    assert seen == set(pairs)


#: Of Kimi-K2's 384 experts a layer: the same 37 patterns as the full ~140 k-tensor base at an eighth of the cost.
EXPERTS = 48


@pytest.fixture(scope="module")
def kimi_k2_base_report(tmp_path_factory):
    base = write_kimi_k2_base(tmp_path_factory.mktemp("kimi-k2-base"), experts=EXPERTS)  # 61 shards (sparse)
    return compare(str(base), str(base))


def test_the_61_shard_kimi_k2_base_renders_in_a_few_dozen_rows_and_json_lists_every_tensor(kimi_k2_base_report):
    report = kimi_k2_base_report
    assert report.verdict == "compatible" and report.a.files == 61 and len(report.tensors) > 18_000

    table = render(report, "table")
    body = table.split("\n\n")[1].splitlines()[2:]  # the tensor table without its header and rule
    assert len(body) == 37
    experts = re.compile(r"model\.layers\.\{1\.\.60\}\.mlp\.experts\.\{0\.\.47\}\.gate_proj\.weight +2880 ")
    assert sum(1 for line in body if experts.match(line)) == 1

    markdown = render(report, "markdown")
    assert markdown.count("\n| `model.") + markdown.count("\n| `lm_head") < 60

    listed = json.loads(render(report, "json"))["tensors"]
    assert len(listed) == len(report.tensors)
    assert {row["name"] for row in listed} == {row.name for row in report.tensors}
