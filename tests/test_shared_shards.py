"""A local pair: side B reuses A's decode of a shard whose header bytes are A's same-named shard's, and only then.

The reference is the same comparison with each side read on its own (``resolve``), which shares nothing: the
reports must be identical in every format. Which path ran is seen in the objects: a reused shard's header is
A's very decoded header; a shard whose header differs from A's only in its ``__metadata__`` has a header of its
own holding A's very decoded tensors; a decoded one's are B's own.
"""

from __future__ import annotations

import pytest
from sparse_files import copy_sparse, rewrite_header_json

import ckptdiff
from ckptdiff.checkpoint import HeaderTensors
from ckptdiff.comparison import choose_profile, compare_checkpoints
from ckptdiff.errors import HeaderError
from ckptdiff.policy import Policy
from ckptdiff.sources import SourceOptions, resolve, resolve_both
from ckptdiff.version import __version__
from fixtures.generate import KIMI_K2_BASE_CONFIG, kimi_k2_base_layer, write_kimi_k2_base, write_safetensors

LAYERS, EXPERTS = 4, 3


def shard(layer: int) -> str:
    return f"model-{layer + 1:05d}-of-{LAYERS:06d}.safetensors"


def layer_specs(layer: int) -> list:
    return kimi_k2_base_layer(KIMI_K2_BASE_CONFIG, layer, experts=EXPERTS)


def base(folder, **kwargs):
    """A 4-layer Kimi-K2-shaped checkpoint (a shard per layer) without the vocab-sized tensors, to stay small."""
    return write_kimi_k2_base(folder, layers=LAYERS, experts=EXPERTS, embed_shape=[32, 7168], **kwargs)


def reports_alike(a, b) -> None:
    """The report of ``ckptdiff.compare`` (sides read as a pair) equals the one of sides read separately."""
    paired = ckptdiff.compare(str(a), str(b))
    side_a, side_b = resolve(str(a)), resolve(str(b))
    profile = choose_profile("auto", side_a, side_b)  # and compare()'s policy, whose words are Python's
    alone = compare_checkpoints(side_a, side_b, profile=profile, policy=Policy(), tool_version=__version__)
    for fmt in ("json", "table", "markdown"):
        assert ckptdiff.render(paired, fmt) == ckptdiff.render(alone, fmt)


def reused_shards(a, b) -> set[str]:
    side_a, side_b = resolve_both(str(a), str(b))
    assert isinstance(side_a.tensors, HeaderTensors) and isinstance(side_b.tensors, HeaderTensors)
    headers_a = dict(side_a.tensors.shards)
    return {file for file, header in side_b.tensors.shards if headers_a.get(file) is header}


def shards_with_a_tensors(a, b) -> set[str]:
    """B's shards with a header of their own (their metadata) over A's decoded tensors."""
    side_a, side_b = resolve_both(str(a), str(b))
    assert isinstance(side_a.tensors, HeaderTensors) and isinstance(side_b.tensors, HeaderTensors)
    headers_a = dict(side_a.tensors.shards)
    return {
        file
        for file, header in side_b.tensors.shards
        if file in headers_a and headers_a[file] is not header and headers_a[file].tensors is header.tensors
    }


def entries_shared(a, b) -> bool:
    """Whether B's merged name → entry map is A's very map (every shard's tensors were A's)."""
    side_a, side_b = resolve_both(str(a), str(b))
    assert isinstance(side_a.tensors, HeaderTensors) and isinstance(side_b.tensors, HeaderTensors)
    return side_a.tensors.entries is side_b.tensors.entries


def metadata_of(folder, file: str) -> dict:
    side = resolve(str(folder))
    assert isinstance(side.tensors, HeaderTensors)
    return dict(dict(side.tensors.shards)[file].metadata)


def test_identical_headers_reuse_every_shard(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b", config=dict(KIMI_K2_BASE_CONFIG, max_position_embeddings=262144))

    assert reused_shards(a, b) == {shard(layer) for layer in range(LAYERS)}
    assert weight_map_is_a(a, b)
    assert entries_shared(a, b)
    reports_alike(a, b)


def test_every_shard_metadata_differs_the_tensors_are_reused_under_b_metadata(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b", metadata={"format": "pt", "producer": "fine-tune"})

    assert reused_shards(a, b) == set()
    assert shards_with_a_tensors(a, b) == {shard(layer) for layer in range(LAYERS)}
    side_a, side_b = resolve_both(str(a), str(b))
    assert isinstance(side_b.tensors, HeaderTensors)
    assert [dict(header.metadata) for _, header in side_b.tensors.shards] == [metadata_of(b, shard(0))] * LAYERS
    assert metadata_of(b, shard(0)) == {"format": "pt", "producer": "fine-tune"}
    assert [header.header_length for _, header in side_b.tensors.shards] != [
        header.header_length
        for _, header in side_a.tensors.shards  # type: ignore[attr-defined]
    ]
    reports_alike(a, b)


def test_metadata_that_is_not_flat_strings_is_refused_as_when_read_alone(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    rewrite_header_json(b / shard(1), lambda text: text.replace(b'{"format":"pt"}', b'{"format":7}'))

    with pytest.raises(HeaderError) as alone:
        resolve(str(b))
    with pytest.raises(HeaderError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)
    assert "__metadata__ must map strings to strings" in str(paired.value)


def test_metadata_with_a_key_named_twice_is_refused_as_when_read_alone(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    twice = b'{"format":"pt","format":"pu"}'
    rewrite_header_json(b / shard(2), lambda text: text.replace(b'{"format":"pt"}', twice))

    with pytest.raises(HeaderError) as alone:
        resolve(str(b))
    with pytest.raises(HeaderError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)
    assert "duplicate key" in str(paired.value)


def test_metadata_and_a_shape_differ_in_one_shard_it_is_decoded(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    specs = layer_specs(2)
    name, dtype, shape = specs[-1]
    specs[-1] = (name, dtype, [*shape[:-1], shape[-1] * 2])
    write_safetensors(b / shard(2), specs, metadata={"format": "pt", "producer": "fine-tune"})

    assert reused_shards(a, b) == {shard(0), shard(1), shard(3)}
    assert shards_with_a_tensors(a, b) == set()
    reports_alike(a, b)
    report = ckptdiff.compare(str(a), str(b))
    assert [row.name for row in report.tensors if row.status == "shape_mismatch"] == [name]


def test_b_without_metadata_is_decoded_on_its_own(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    rewrite_header_json(b / shard(0), lambda text: text.replace(b'"__metadata__":{"format":"pt"},', b""))

    assert shards_with_a_tensors(a, b) == set()
    assert reused_shards(a, b) == {shard(1), shard(2), shard(3)}
    assert metadata_of(b, shard(0)) == {}
    reports_alike(a, b)


def test_one_shard_metadata_differs_only_that_shard_is_decoded(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    # the same tensors, one byte of __metadata__ changed: "pt" → "pu" (same length, same offsets)
    write_safetensors(b / shard(2), layer_specs(2), metadata={"format": "pu"})

    assert reused_shards(a, b) == {shard(0), shard(1), shard(3)}
    assert shards_with_a_tensors(a, b) == {shard(2)}
    assert metadata_of(b, shard(2)) == {"format": "pu"}
    assert entries_shared(a, b)
    reports_alike(a, b)


def test_one_tensor_shape_differs_that_shard_is_decoded_and_the_mismatch_shown(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    specs = layer_specs(1)
    name, dtype, shape = specs[0]
    specs[0] = (name, dtype, [shape[0] + 1, *shape[1:]])
    write_safetensors(b / shard(1), specs, metadata={"format": "pt"})

    assert reused_shards(a, b) == {shard(0), shard(2), shard(3)}
    assert not entries_shared(a, b)
    reports_alike(a, b)
    report = ckptdiff.compare(str(a), str(b))
    assert [row.name for row in report.tensors if row.status == "shape_mismatch"] == [name]


def test_a_reused_header_still_checks_b_file_size(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    with open(b / shard(3), "ab") as handle:  # same header bytes, trailing data after the data region
        handle.write(b"\0" * 8)

    with pytest.raises(HeaderError) as raised:
        resolve_both(str(a), str(b))
    assert str(b / shard(3)) in str(raised.value)
    assert "trailing data" in str(raised.value)


def test_a_single_file_pair_is_matched_by_its_name(tmp_path):
    a = base(tmp_path / "a")
    (tmp_path / "b").mkdir()
    copy_sparse(a / shard(0), tmp_path / "b" / shard(0))
    (tmp_path / "c").mkdir()
    copy_sparse(a / shard(0), tmp_path / "c" / "model.safetensors")  # same bytes, another name: not A's shard

    assert reused_shards(a / shard(0), tmp_path / "b" / shard(0)) == {shard(0)}
    assert reused_shards(a / shard(0), tmp_path / "c" / "model.safetensors") == set()
    reports_alike(a / shard(0), tmp_path / "b" / shard(0))


def weight_map_is_a(a, b) -> bool:
    """Whether B's tensors were checked against A's very weight map (B's index was not parsed on its own)."""
    from ckptdiff.sources import SourceOptions, open_source, read_source
    from ckptdiff.sources.shared_shards import SharedShards

    shared = SharedShards()
    source_a, source_b = open_source(str(a), SourceOptions()), open_source(str(b), SourceOptions())
    source_a.shared = source_b.shared = shared
    read_source(source_a)
    shared.done_recording()
    read_source(source_b)
    return shared.reused_index


def edit_index(folder, change) -> None:
    path = folder / "model.safetensors.index.json"
    path.write_bytes(change(path.read_bytes()))


def test_an_index_differing_only_before_its_weight_map_is_not_parsed_again(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b", metadata={"format": "pt", "producer": "fine-tune"})  # another total_size
    assert (a / "model.safetensors.index.json").read_bytes() != (b / "model.safetensors.index.json").read_bytes()

    assert weight_map_is_a(a, b)
    reports_alike(a, b)


def test_an_index_with_a_member_named_twice_before_its_weight_map_is_refused_as_alone(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    edit_index(b, lambda raw: raw.replace(b'"metadata": {', b'"metadata": {"x": 1}, "metadata": {', 1))

    with pytest.raises(ckptdiff.CkptdiffError) as alone:
        resolve(str(b))
    with pytest.raises(ckptdiff.CkptdiffError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)
    assert "duplicate key 'metadata'" in str(paired.value)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda raw: raw.rstrip().removesuffix(b"}") + b', "note": "after"}\n', id="member-after-map"),
        pytest.param(lambda raw: raw.replace(b"{\n", b'{"weight_map": 1,\n', 1), id="map-twice"),
        pytest.param(lambda raw: raw.replace(b'"metadata": {', b'"metadata": {"weight_map": 0, ', 1), id="nested-key"),
    ],
)
def test_an_index_whose_weight_map_is_not_its_last_member_alone_is_parsed_on_its_own(tmp_path, change):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    edit_index(b, change)

    try:
        alone = resolve(str(b))
    except ckptdiff.CkptdiffError as refused:
        with pytest.raises(ckptdiff.CkptdiffError) as paired:
            resolve_both(str(a), str(b))
        assert str(paired.value) == str(refused)
        return
    assert not weight_map_is_a(a, b)
    assert dict(resolve_both(str(a), str(b))[1].tensors.items()) == dict(alone.tensors.items())
    reports_alike(a, b)


def test_b_missing_a_shard_of_a_is_refused_by_its_index(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    (b / shard(1)).unlink()

    with pytest.raises(ckptdiff.CkptdiffError) as alone:
        resolve(str(b))
    with pytest.raises(ckptdiff.CkptdiffError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)


def test_b_index_without_one_name_is_refused_though_its_shards_are_a(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    name = b'    "model.layers.1.input_layernorm.weight": "' + shard(1).encode() + b'",\n'
    edit_index(b, lambda raw: raw.replace(name, b"", 1))

    with pytest.raises(ckptdiff.CkptdiffError) as alone:
        resolve(str(b))
    with pytest.raises(ckptdiff.CkptdiffError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)
    assert "model.layers.1.input_layernorm.weight" in str(paired.value)


def test_an_index_naming_another_shard_is_parsed_and_refused(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b", metadata={"format": "pt", "producer": "fine-tune"})
    wrong = b'"model.layers.1.input_layernorm.weight": "' + shard(0).encode()
    edit_index(b, lambda raw: raw.replace(b'"model.layers.1.input_layernorm.weight": "' + shard(1).encode(), wrong))

    with pytest.raises(ckptdiff.CkptdiffError) as paired:
        resolve_both(str(a), str(b))
    assert "model.layers.1.input_layernorm.weight" in str(paired.value)


def respace(text: bytes) -> bytes:
    """A header's JSON with a space after its opening brace: the same tensors, a text of its own."""
    return b"{ " + text[1:]


def test_headers_whose_text_differs_are_decoded_and_checked_with_a_index_answers(tmp_path):
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    for layer in range(LAYERS):
        rewrite_header_json(b / shard(layer), respace)

    assert reused_shards(a, b) == set() and shards_with_a_tensors(a, b) == set()
    assert weight_map_is_a(a, b) and not entries_shared(a, b)
    reports_alike(a, b)


@pytest.mark.parametrize("layer", [0, 1])
def test_a_shard_naming_another_tensor_under_a_index_is_refused_as_alone(tmp_path, layer):
    """A's answer that its shard's names are indexed to it is B's only for the same names: a renamed tensor in
    B's shard (same index) is checked against the index, and refused as when B is read on its own."""
    a = base(tmp_path / "a")
    b = base(tmp_path / "b")
    name = f"model.layers.{layer}.input_layernorm.weight".encode()
    for at in range(LAYERS):
        rewrite_header_json(b / shard(at), respace)
    rewrite_header_json(b / shard(layer), lambda text: text.replace(name, name[:-1] + b"W", 1))

    with pytest.raises(ckptdiff.CkptdiffError) as alone:
        resolve(str(b))
    with pytest.raises(ckptdiff.CkptdiffError) as paired:
        resolve_both(str(a), str(b))
    assert str(paired.value) == str(alone.value)
    assert name.decode() in str(paired.value) or name[:-1].decode() + "W" in str(paired.value)


# --- a remote pair: both sides are read at once, and share their shard headers both ways --------------------


def on_the_hub(hub, a, b) -> tuple[str, str]:
    hub.add_repo("org/a", a)
    hub.add_repo("org/b", b)
    return "org/a", "org/b"


def decoded_once(a: str, b: str) -> set[str]:
    """The shards whose header is one decoded object on both sides of a remote pair, read a header at a time
    (``jobs=1``: each read and decode ends before the next starts, so the side second to a shard finds the
    first one's decode, whichever side that was)."""
    side_a, side_b = resolve_both(a, b, SourceOptions(jobs=1))
    assert isinstance(side_a.tensors, HeaderTensors) and isinstance(side_b.tensors, HeaderTensors)
    headers_a = dict(side_a.tensors.shards)
    return {file for file, header in side_b.tensors.shards if headers_a.get(file) is header}


def test_a_hub_pair_with_identical_shards_decodes_each_once(hub_client, tmp_path):
    a, b = on_the_hub(hub_client, base(tmp_path / "a"), base(tmp_path / "b"))

    assert decoded_once(a, b) == {shard(layer) for layer in range(LAYERS)}
    reports_alike(a, b)


def test_a_hub_pair_shares_only_the_shards_whose_bytes_are_the_same(hub_client, tmp_path):
    b = base(tmp_path / "b")
    specs = layer_specs(1)
    name, dtype, shape = specs[0]
    specs[0] = (name, dtype, [shape[0] + 1, *shape[1:]])
    write_safetensors(b / shard(1), specs, metadata={"format": "pt"})
    write_safetensors(b / shard(2), layer_specs(2), metadata={"format": "pu"})  # the tensors of A, other metadata
    a, b_spec = on_the_hub(hub_client, base(tmp_path / "a"), b)

    assert decoded_once(a, b_spec) == {shard(0), shard(3)}
    side_a, side_b = resolve_both(a, b_spec, SourceOptions(jobs=1))
    assert isinstance(side_a.tensors, HeaderTensors) and isinstance(side_b.tensors, HeaderTensors)
    header_a, header_b = dict(side_a.tensors.shards)[shard(2)], dict(side_b.tensors.shards)[shard(2)]
    assert header_a.tensors is header_b.tensors  # decoded once, under each side's own metadata
    assert (dict(header_a.metadata), dict(header_b.metadata)) == ({"format": "pt"}, {"format": "pu"})
    reports_alike(a, b_spec)
    report = ckptdiff.compare(a, b_spec)
    assert [row.name for row in report.tensors if row.status == "shape_mismatch"] == [name]


def test_a_hub_pair_shard_reused_still_checks_its_own_size(hub_client, tmp_path):
    b = base(tmp_path / "b")
    with open(b / shard(3), "ab") as handle:  # the same header bytes, trailing data after the data region
        handle.write(b"\0" * 8)
    a, b_spec = on_the_hub(hub_client, base(tmp_path / "a"), b)

    with pytest.raises(HeaderError) as raised:
        resolve_both(a, b_spec, SourceOptions(jobs=1))
    assert "org/b" in str(raised.value) and shard(3) in str(raised.value)
    assert "trailing data" in str(raised.value)
