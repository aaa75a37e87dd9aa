"""``ckptdiff convert`` on MTP layers: a NextN export or a full model's MTP layers, moved to where both engines read
them beside the target (docs/convert.md, "MTP layers")."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_safetensors

DRAFTERS = FIXTURES / "drafters"
EXPORT = DRAFTERS / "mtp-deepseek-v3-nextn-export"  # SGLang's export layout: the MTP layer at 0, 1 hidden layer
FULL = DRAFTERS / "mtp-deepseek-v3"  # a target with its MTP layer at 61
DROPPED = DRAFTERS / "mtp-deepseek-v3-dropped"
BASE = DRAFTERS / "bases" / "deepseek-v3"


def stored(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """Each tensor of a safetensors file → (dtype, shape, its bytes), read as the format lays them out (numpy has
    no FP8 type for safetensors.numpy to load)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__", None)
    body = data[8 + length :]
    return {n: (h["dtype"], h["shape"], body[h["data_offsets"][0] : h["data_offsets"][1]]) for n, h in header.items()}


def one_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_nextn_export_fails_under_vllm_as_published_and_loads_once_converted(run_cli, tmp_path):
    as_published = run_cli(str(EXPORT), "--engine", "vllm", "--base", str(BASE))
    assert as_published.returncode == 1
    assert "mtp_layer_missing" in as_published.stdout  # vLLM asks for layer 61, the export stores layer 0

    out = tmp_path / "export-vllm"
    converted = run_cli("convert", str(EXPORT), str(out), "--to", "vllm", "--base", str(BASE), "-q")

    assert converted.returncode == 0, converted.stderr
    written = stored(out / "model.safetensors")
    source = stored(EXPORT / "model.safetensors")
    assert written == {name.replace("layers.0.", "layers.61."): held for name, held in source.items()}
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 61 and config["num_nextn_predict_layers"] == 1
    provenance = json.loads((out / "convert.json").read_text())
    assert provenance["proven_by"] == "ckptdiff and the engine's loader (oracle job)"
    assert [t["from"]["name"] for t in provenance["tensors"]] == list(source)
    for engine in ("vllm", "sglang"):  # one layout both engines read
        check = run_cli(str(out), "--engine", engine, "--base", str(BASE))
        assert check.returncode == 0, check.stdout
        assert f"{engine} A loads" in check.stdout


def test_a_full_models_mtp_layer_is_extracted_alone(run_cli, tmp_path):
    out = tmp_path / "mtp-only"

    result = run_cli("convert", str(FULL), str(out), "--to", "sglang")

    assert result.returncode == 0, result.stderr
    written = stored(out / "model.safetensors")
    assert written and all(name.startswith("model.layers.61.") for name in written)
    assert "model.embed_tokens.weight: not an MTP layer's" in result.stdout
    both = run_cli(str(out), "--engine", "vllm", "--engine", "sglang", "--base", str(BASE))
    assert both.returncode == 0, both.stdout


def test_many_tensors_left_for_one_reason_are_counted_not_listed(run_cli, tmp_path):
    model = tmp_path / "full"
    model.mkdir()
    (model / "config.json").write_bytes((FULL / "config.json").read_bytes())
    specs = [(name, dtype, tuple(shape)) for name, (dtype, shape, _) in stored(FULL / "model.safetensors").items()]
    specs += [(f"model.layers.{i}.input_layernorm.weight", "BF16", (16,)) for i in range(1, 21)]  # main layers
    write_safetensors(model / "model.safetensors", specs, fill="zeros")

    result = run_cli("convert", str(model), str(tmp_path / "o"), "--to", "vllm", "--plan")

    assert result.returncode == 0, result.stderr
    assert "24 tensors (lm_head.weight, model.embed_tokens.weight, model.layers.0.input_layernorm.weight, …)" in (
        result.stdout
    )
    document = run_cli("convert", str(model), str(tmp_path / "o"), "--to", "vllm", "--plan", "--format", "json")
    assert len(json.loads(document.stdout)["not_written"]) == 24  # convert.json lists every one


def test_an_export_without_base_is_refused_naming_what_is_missing(run_cli, tmp_path):
    result = run_cli("convert", str(EXPORT), str(tmp_path / "o"), "--to", "vllm")

    assert result.returncode == 2
    line = one_line(result)
    assert "stores its MTP layers at [0]" in line and "give --base" in line
    assert not (tmp_path / "o").exists()


def test_a_model_that_lost_its_mtp_layers_is_refused(run_cli, tmp_path):
    result = run_cli("convert", str(DROPPED), str(tmp_path / "o"), "--to", "sglang")

    assert result.returncode == 2
    assert "announces 1 (num_nextn_predict_layers) but stores no MTP layer" in one_line(result)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--to", "trtllm"], "ckptdiff has no MTP rules for TensorRT-LLM"),
        (["--to", "vllm", "--embed", "drop"], "--embed: applies to EAGLE-3 drafters"),
    ],
)
def test_what_mtp_layers_do_not_take_is_refused(run_cli, tmp_path, flags, said):
    result = run_cli("convert", str(FULL), str(tmp_path / "o"), *flags)

    assert result.returncode == 2
    assert said in one_line(result)


def test_qwen3_next_mtp_prefix_is_refused(run_cli, tmp_path):
    model = tmp_path / "qwen3-next"
    model.mkdir()
    config = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_hidden_layers": 4}
    (model / "config.json").write_text(json.dumps(config))
    write_safetensors(model / "model.safetensors", [("mtp.fc.weight", "BF16", (8, 16))], fill="zeros")

    result = run_cli("convert", str(model), str(tmp_path / "o"), "--to", "vllm")

    assert result.returncode == 2
    assert "keeps its MTP layers under mtp.* (Qwen3-Next, Qwen3.5)" in one_line(result)


def test_the_source_is_never_modified(run_cli, tmp_path):
    before = {p.name: p.read_bytes() for p in Path(EXPORT).iterdir()}

    run_cli("convert", str(EXPORT), str(tmp_path / "o"), "--to", "vllm", "--base", str(BASE), "-q")

    assert {p.name: p.read_bytes() for p in Path(EXPORT).iterdir()} == before


# --- from the Hub: only the MTP layer's bytes are read -------------------------------------------------------------


@pytest.fixture
def ckptdiff_hub(hub, run_cli, tmp_path):
    def run(*args: str):
        return run_cli(*args, env=hub.client_env(tmp_path / "hf-home"))

    return run


def test_a_hub_models_mtp_layer_is_extracted_reading_only_its_bytes(hub, ckptdiff_hub, tmp_path):
    """A DeepSeek-V3-layout model on the Hub, its main layers in one large shard (64 MiB, sparse) and its MTP layer
    in another: the main shard is read no further than its header, the MTP shard's tensors byte for byte."""
    from base_fixtures import write_sharded

    repo = tmp_path / "repo"
    layer = [(name, dtype, list(shape)) for name, (dtype, shape, _) in stored(FULL / "model.safetensors").items()]
    main = [(f"model.layers.{i}.mlp.down_proj.weight", "BF16", [1024, 1024]) for i in range(32)]  # 64 MiB
    write_sharded(repo, json.loads((FULL / "config.json").read_text()), [main, layer])
    mtp_shard = repo / "model-00002-of-00002.safetensors"
    write_safetensors(mtp_shard, layer, fill="random", seed=61, metadata={"format": "pt"})
    hub.add_repo("deepseek-ai/DeepSeek-V3-small", repo)
    hub.reset_counters()

    result = ckptdiff_hub("convert", "deepseek-ai/DeepSeek-V3-small", str(tmp_path / "out"), "--to", "vllm", "-q")

    assert result.returncode == 0, result.stderr
    source = {n: held for n, held in stored(mtp_shard).items() if n.startswith("model.layers.61.")}
    written = stored(tmp_path / "out" / "model-00002-of-00002.safetensors")
    assert written == source  # the MTP layer alone, byte for byte, in the shard it came from
    main_gets = [e for e in hub.log if e.path.endswith("model-00001-of-00002.safetensors") and e.method == "GET"]
    assert sum(e.bytes_sent for e in main_gets) < 64 * 1024  # its header only, never the 64 MiB of main layers
    assert hub.bytes_sent["resolve"] < (mtp_shard.stat().st_size + 64 * 1024) * 2
