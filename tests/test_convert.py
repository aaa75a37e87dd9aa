"""``ckptdiff convert``: the plan, the write into OUT.partial, the proof, the rename; hostile plans refused.

Every test runs the command as a user does (``run_cli``: the entry point in this process; ``run_cli_subprocess``
where only a process shows it), on the bundled fixtures, on small drafters with random bytes (so a byte out of
place shows), and against the Hub emulator for the seed's case (tests/test_convert_hub.py).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy, for safetensors.numpy
import numpy as np
import pytest
from safetensors.numpy import load_file

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import eagle3_tensors, small_drafter_config, write_config, write_safetensors

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
NO_LM_HEAD = FIXTURES / "kimi-k2-eagle3-no-lm-head"


def random_drafter(folder: Path, *, d2t_dtype: str = "I64", **config: object) -> Path:
    """The scaled-down Kimi-K2 drafter with random bytes in every tensor (d2t: real offsets, in ``d2t_dtype``)."""
    settings = small_drafter_config(**config)
    specs = [(n, d2t_dtype if n == "d2t" else dt, s) for n, dt, s in eagle3_tensors(settings, with_embed=False)]
    write_config(folder, settings)
    write_safetensors(folder / "model.safetensors", specs, fill="random", seed=7, metadata={"format": "pt"})
    # offsets inside the vocabulary (draft id i → target id 4i), whole numbers even in a float d2t, as exported
    from safetensors.numpy import save_file

    tensors = load_file(folder / "model.safetensors")
    offsets = np.arange(len(tensors["d2t"])) * 3
    tensors["d2t"] = offsets.astype({"F32": np.float32, "I32": np.int32, "I64": np.int64}[d2t_dtype])
    tensors["t2d"] = tensors["t2d"].astype(bool)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def digest_folder(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def one_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def drafter(tmp_path: Path) -> Path:
    return random_drafter(tmp_path / "src")


# --- the plan --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_the_plan_prints_every_output_tensor_and_writes_nothing(run_cli, tmp_path, fmt):
    out = tmp_path / "out"

    result = run_cli("convert", str(PUBLISHED), str(out), "--to", "vllm", "--plan", "--format", fmt)

    assert result.returncode == 0, result.stderr
    assert not out.exists() and not (tmp_path / "out.partial").exists()
    for name in (
        "layers.0.self_attn.q_proj.weight",
        "midlayer.self_attn.q_proj.weight",
        "eagle_aux_hidden_state_layer_ids",
    ):
        assert name in result.stdout
    if fmt == "json":
        plan = json.loads(result.stdout)
        by_name = {t["name"]: t for t in plan["tensors"]}
        assert by_name["layers.0.mlp.up_proj.weight"]["from"]["name"] == "midlayer.mlp.up_proj.weight"
        assert by_name["layers.0.mlp.up_proj.weight"]["transforms"] == ["rename"]
        changes = {c["key"]: c for c in plan["config"]["changes"]}
        # SGLang's ids (outputs of layers 2, 30, 58) written where and as vLLM reads them: id j = output of j-1
        assert changes["eagle_aux_hidden_state_layer_ids"]["new"] == [3, 31, 59]
        assert changes["architectures"]["new"] == ["Eagle3LlamaForCausalLM"]
        assert plan["engine_check"]["outcome"] == "loads"


def test_a_needed_tensor_without_a_source_fails_the_plan_and_is_named(run_cli, tmp_path):
    out = tmp_path / "out"

    result = run_cli("convert", str(NO_LM_HEAD), str(out), "--to", "sglang")

    assert result.returncode == 1
    assert "sglang needs lm_head.weight, and no input tensor provides it" in result.stdout
    assert "not converted: the plan fails" in result.stderr
    assert not out.exists() and not (tmp_path / "out.partial").exists()


def test_an_engine_without_a_class_for_the_family_fails_the_plan(run_cli, tmp_path):
    result = run_cli("convert", str(FIXTURES / "drafters" / "mla-kimi-k25"), str(tmp_path / "o"), "--to", "trtllm")

    assert result.returncode == 1
    assert "TensorRT-LLM has no EAGLE-3 class for mla decoder layers" in result.stdout


def medusa_heads(folder: Path) -> Path:
    """A Medusa drafter's layout (medusa_num_heads, medusa_head.{i}.*), the family no pinned engine loads."""
    write_config(folder, {"architectures": ["MedusaModel"], "medusa_num_heads": 2, "medusa_num_layers": 1})
    specs = [(f"{i}.0.linear.weight", "BF16", (16, 16)) for i in range(2)]
    write_safetensors(folder / "model.safetensors", specs, fill="zeros")
    return folder


@pytest.mark.parametrize("checkpoint", ["dflash", "medusa"])
def test_another_familys_checkpoint_is_refused_in_one_line_not_replayed_as_eagle3(run_cli, tmp_path, checkpoint):
    source = FIXTURES / "dflash" / "qwen3-8b-dflash-b16" if checkpoint == "dflash" else medusa_heads(tmp_path / "m")

    result = run_cli("convert", str(source), str(tmp_path / "o"), "--to", "vllm")

    assert result.returncode == 2
    line = one_line(result)
    described = {"dflash": "a DFlash drafter", "medusa": "a Medusa drafter"}[checkpoint]
    assert f"its config.json describes {described}" in line
    assert "convert writes EAGLE-3 drafters and DeepSeek-V3/GLM-layout MTP layers" in line
    assert "--engine ENGINE" in line
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


def test_a_plan_with_many_problems_ends_with_the_first_and_their_count(run_cli, tmp_path):
    result = run_cli("convert", str(NO_LM_HEAD), str(tmp_path / "o"), "--to", "sglang", "--plan")

    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ckptdiff: not converted: the plan fails (sglang needs lm_head.weight")
    assert re.search(r"and \d+ more problems?, listed with the plan\)$", last)


# --- writing and proving ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_a_converted_drafter_holds_each_source_tensors_bytes_as_convert_json_says(run_cli, drafter, tmp_path, engine):
    out = tmp_path / "out"
    before = digest_folder(drafter)

    result = run_cli("convert", str(drafter), str(out), "--to", engine, "-q")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"converted: {out} (15 tensors;")
    assert ("not proven by an engine" in result.stdout) == (engine == "trtllm")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "convert.json", "model.safetensors"]
    assert not (tmp_path / "out.partial").exists()
    assert digest_folder(drafter) == before  # SRC never modified
    provenance = json.loads((out / "convert.json").read_text())
    source, written = load_file(drafter / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(written) == {t["name"] for t in provenance["tensors"]}
    for entry in provenance["tensors"]:
        assert entry["from"]["checkpoint"] == "source"
        assert written[entry["name"]].tobytes() == source[entry["from"]["name"]].tobytes()
    assert provenance["proof"]["proven"] is True
    assert provenance["proof"]["tensors_compared_by_bytes"] == 15
    assert provenance["engine_proof"] == (None if engine != "trtllm" else "not proven by an engine")


def test_convert_json_quotes_the_command_that_wrote_it(run_cli, drafter, tmp_path):
    """As a report's footer does: shell-quoted, the subcommand named, whatever ran the entry point."""
    out = tmp_path / "out dir"

    assert run_cli("convert", str(drafter), str(out), "--to", "vllm", "-q").returncode == 0

    command = json.loads((out / "convert.json").read_text())["command"]
    assert command == f"ckptdiff convert {drafter} '{out}' --to vllm -q"


def test_sglang_to_vllm_to_sglang_gives_back_the_same_checkpoint(run_cli, drafter, tmp_path):
    first, middle, last = tmp_path / "sglang", tmp_path / "vllm", tmp_path / "sglang-again"
    assert run_cli("convert", str(drafter), str(first), "--to", "sglang", "-q").returncode == 0
    assert run_cli("convert", str(first), str(middle), "--to", "vllm", "-q").returncode == 0
    assert run_cli("convert", str(middle), str(last), "--to", "sglang", "-q").returncode == 0

    a, b = load_file(first / "model.safetensors"), load_file(last / "model.safetensors")
    assert list(a) == list(b)
    for name in a:
        assert (a[name].dtype, a[name].shape, a[name].tobytes()) == (b[name].dtype, b[name].shape, b[name].tobytes())
    assert json.loads((first / "config.json").read_text()) == json.loads((last / "config.json").read_text())
    assert set(load_file(middle / "model.safetensors")) != set(a)  # the middle really is vLLM's layout
    vllm_config = json.loads((middle / "config.json").read_text())
    assert vllm_config["eagle_aux_hidden_state_layer_ids"] == [3, 31, 59]


def test_a_float_d2t_is_cast_to_int64_and_compared_by_value(run_cli, tmp_path):
    src = random_drafter(tmp_path / "src", d2t_dtype="F32")
    out = tmp_path / "out"

    result = run_cli("convert", str(src), str(out), "--to", "vllm", "-q")

    assert result.returncode == 0, result.stderr
    assert "1 by value" in result.stdout
    d2t = load_file(out / "model.safetensors")["d2t"]
    assert d2t.dtype == np.int64 and (d2t == np.arange(len(d2t)) * 3).all()
    entry = next(t for t in json.loads((out / "convert.json").read_text())["tensors"] if t["name"] == "d2t")
    assert entry["transforms"] == ["cast"] and entry["from"]["dtype"] == "F32"


def test_max_shard_size_shards_with_a_correct_index(run_cli, drafter, tmp_path):
    out = tmp_path / "out"

    result = run_cli("convert", str(drafter), str(out), "--to", "sglang", "--max-shard-size", "40kB", "-q")

    assert result.returncode == 0, result.stderr
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) > 2 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    stored = {}
    for shard in shards:
        tensors = load_file(out / shard)
        assert sum(t.nbytes for t in tensors.values()) <= 40_000 or len(tensors) == 1
        stored.update({name: shard for name in tensors})
    assert index["weight_map"] == stored
    assert index["metadata"]["total_size"] == sum(t.nbytes for s in shards for t in load_file(out / s).values())
    compared = run_cli(str(drafter), str(out))
    assert compared.returncode == 0, compared.stdout  # the same tensors, whatever the shards


@pytest.mark.parametrize(
    ("size", "says"),
    [
        ("", "'' is not a size"),  # was: no sharding
        (" ", "' ' is not a size"),
        ("5 GBs", "'5 GBs' is not a size"),
        ("1" * 400, "'1111111111111111111111111111111111111111'... is not a size"),  # was: an internal error
        ("0", "'0' is not a positive size"),
        ("1.5", "'1.5' is not a whole number of bytes"),  # was: 1 byte
        ("1.0001KB", "'1.0001KB' is not a whole number of bytes"),
    ],
)
def test_a_malformed_max_shard_size_is_refused_as_click_parses_it(run_cli, drafter, tmp_path, size, says):
    result = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm", "--max-shard-size", size)

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith(f"Error: Invalid value for '--max-shard-size': {says}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_max_shard_size_with_a_fraction_is_its_exact_bytes(run_cli, drafter, tmp_path):
    result = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm", "--max-shard-size", "4.1MB")

    assert result.returncode == 0, result.stderr  # 4.1 * 1000**2 is 4099999.9999999995 in floats


def test_force_replaces_out_only_with_a_proven_output(run_cli, drafter, tmp_path):
    out = tmp_path / "out"
    first = run_cli("convert", str(drafter), str(out), "--to", "vllm", "-q")
    assert first.returncode == 0, first.stderr
    (out / "keep.txt").write_text("an earlier output's")

    refused = run_cli("convert", str(drafter), str(out), "--to", "sglang")
    assert refused.returncode == 2
    assert one_line(refused) == f"ckptdiff: {out}: already exists (--force replaces it once the new one is proven)"
    assert (out / "keep.txt").is_file()

    replaced = run_cli("convert", str(drafter), str(out), "--to", "sglang", "--force", "-q")
    assert replaced.returncode == 0, replaced.stderr
    assert not (out / "keep.txt").exists() and json.loads((out / "convert.json").read_text())["engine"] == "sglang"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("out.")] == []


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_force_never_replaces_what_no_convert_wrote(run_cli, drafter, tmp_path, kind):
    """A mistyped OUT with --force removed the user's folder (photos/, notes.txt) or file."""
    out = tmp_path / "out"
    if kind == "folder":
        (out / "photos").mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
    else:
        out.write_text("mine")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    result = run_cli("convert", str(drafter), str(out), "--to", "sglang", "--force")

    assert result.returncode == 2
    assert one_line(result).startswith(f"ckptdiff: {out}: exists and is not an earlier convert output")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("target", ["elsewhere", "earlier-output", "absent"])
def test_force_never_replaces_a_symlink_and_says_it_is_one(run_cli, drafter, tmp_path, target):
    """OUT a link, even to an earlier convert output (``latest -> run-3``): refused, left as it is, and named as a
    link; it was refused as "not an earlier convert output (no convert.json)" when the folder it names had one."""
    (tmp_path / "elsewhere").mkdir()
    earlier = tmp_path / "earlier-output"
    assert run_cli("convert", str(drafter), str(earlier), "--to", "sglang", "-q").returncode == 0
    out = tmp_path / "out"
    out.symlink_to(target)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    result = run_cli("convert", str(drafter), str(out), "--to", "sglang", "--force")

    assert result.returncode == 2
    assert one_line(result) == (
        f"ckptdiff: {out}: is a symlink (to {target}): --force replaces only a folder an earlier convert wrote, or an "
        "empty one, never a link (give the folder it names as OUT, or remove the link yourself)"
    )
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_force_fills_an_empty_folder(run_cli, drafter, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = run_cli("convert", str(drafter), str(out), "--to", "sglang", "--force", "-q")
    assert result.returncode == 0, result.stderr
    assert (out / "convert.json").is_file()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace shows the system calls; not installed here")
def test_every_output_file_and_folder_is_on_disk_before_out_replaces_the_old_one(drafter, tmp_path):
    # a crash after the rename must not leave an OUT whose bytes never reached the disk, the old one gone
    out = tmp_path / "out"
    out.mkdir()
    log = tmp_path / "strace.log"
    command = ["strace", "-f", "-y", "-o", str(log), "-e", "trace=fsync,rename,renameat,renameat2"]
    command += [sys.executable, "-m", "ckptdiff", "convert", str(drafter), str(out), "--to", "vllm", "--force", "-q"]
    command += ["--max-shard-size", "40kB"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    into_place = next(i for i, line in enumerate(calls) if "out.partial" in line and "rename" in line)
    synced = {re.sub(r".*fsync\(\d+<([^>]*)>\).*", r"\1", line) for line in calls[:into_place] if "fsync(" in line}
    partial = str(tmp_path / "out.partial")
    written = {f"{partial}/{p.name}" for p in out.iterdir()}
    assert len(written) > 3  # shards, the index, config.json, convert.json
    assert written | {partial} <= synced
    assert any(f"fsync({n}<{tmp_path}>)" in line for line in calls[into_place:] for n in range(1000))


# --- hostile plans ---------------------------------------------------------------------------------------------


def test_a_rename_that_collides_is_refused_in_one_line(run_cli, drafter, tmp_path):
    before = digest_folder(drafter)

    result = run_cli("convert", str(drafter), str(tmp_path / "o"), "--to", "sglang", "--rename", r"^norm\.=fc.")

    assert result.returncode == 2
    line = one_line(result)
    assert "would be written as 'fc.weight'" in line and "'norm.weight'" in line
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()
    assert digest_folder(drafter) == before


def test_a_rename_that_empties_a_name_is_refused_naming_the_option(run_cli, drafter, tmp_path):
    result = run_cli("convert", str(drafter), str(tmp_path / "o"), "--to", "sglang", "--rename", r"^norm\.weight$=")

    assert result.returncode == 2
    assert one_line(result) == "ckptdiff: --rename: turns a tensor name into an empty one"
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


@pytest.mark.parametrize("from_base", ["org/trained-for", ""])
def test_from_base_without_base_is_refused_not_ignored(run_cli, drafter, tmp_path, from_base):
    result = run_cli("convert", str(drafter), str(tmp_path / "o"), "--to", "sglang", "--from-base", from_base)

    assert result.returncode == 2
    assert one_line(result) == "ckptdiff: --from-base: needs --base: the model whose vocabulary is compared with it"
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--embed", "base"), "--embed base: needs --base: the model whose embedding is grafted"),
        (
            ("--from-base", "org/trained-for"),
            "--from-base: needs --base: the model whose vocabulary is compared with it",
        ),
        (("--allow-tokenizer-change",), "--allow-tokenizer-change: needs --base: d2t is carried to its vocabulary"),
    ],
)
def test_a_flag_that_needs_base_is_refused_before_src_is_read(run_cli, tmp_path, flags, says):
    result = run_cli("convert", str(tmp_path / "no-such-drafter"), str(tmp_path / "o"), "--to", "sglang", *flags)
    assert result.returncode == 2
    assert one_line(result) == f"ckptdiff: {says}"


def test_offline_with_a_store_base_is_refused_before_src_is_read(run_cli, tmp_path):
    args = (str(tmp_path / "no-such-drafter"), str(tmp_path / "o"), "--to", "sglang", "--embed", "base")
    result = run_cli("convert", *args, "--base", "s3://models/base", "--offline")
    assert result.returncode == 2
    assert one_line(result) == (
        "ckptdiff: --offline: --base is s3://models/base, an object store, which cannot be read offline (only local "
        "paths and cached Hub repos are read offline)"
    )


def test_out_inside_src_is_refused_in_one_line(run_cli, drafter):
    before = digest_folder(drafter)

    result = run_cli("convert", str(drafter), str(drafter / "converted"), "--to", "vllm")

    assert result.returncode == 2
    assert "is inside SRC" in one_line(result)
    assert digest_folder(drafter) == before and not (drafter / "converted").exists()


def test_force_never_replaces_a_folder_holding_src(run_cli, tmp_path):
    src = random_drafter(tmp_path / "models" / "drafter")

    result = run_cli("convert", str(src), str(tmp_path / "models"), "--to", "vllm", "--force")

    assert result.returncode == 2
    assert "--force would replace it" in one_line(result)
    assert (src / "model.safetensors").is_file()


def test_a_single_file_src_converts_into_a_folder_beside_it(run_cli, tmp_path):
    """``ckptdiff convert drafter.safetensors ./drafter-vllm``: OUT beside the file is not inside the input."""
    downloads = random_drafter(tmp_path / "downloads")
    before = digest_folder(downloads)

    result = run_cli("convert", str(downloads / "model.safetensors"), str(downloads / "drafter-vllm"), "--to", "vllm")

    assert result.returncode == 0, result.stderr
    assert (downloads / "drafter-vllm" / "model.safetensors").is_file()
    assert digest_folder(downloads) == before


def test_force_never_builds_out_where_src_is(run_cli, tmp_path):
    """SRC named like OUT's build folder (``d.partial``, left by an earlier run): --force would remove SRC."""
    src = random_drafter(tmp_path / "d.partial")
    before = digest_folder(src)

    result = run_cli("convert", str(src), str(tmp_path / "d"), "--to", "vllm", "--force")

    assert result.returncode == 2
    assert one_line(result).endswith("d.partial: convert never writes into its input")
    assert digest_folder(src) == before and not (tmp_path / "d").exists()


@pytest.mark.parametrize("out", [".", "./", "..", "/", "HERE"])
def test_out_naming_the_current_folder_is_refused_in_one_line(run_cli, drafter, tmp_path, out):
    """``cd empty && ckptdiff convert SRC . --to vllm --force``: an internal error for ".", and for the folder by
    its own name --force replaced the (empty) current folder under the shell."""
    here = tmp_path / "empty"
    here.mkdir()
    out = str(here) if out == "HERE" else out

    result = run_cli("convert", str(drafter), out, "--to", "vllm", "--force", cwd=here)

    assert result.returncode == 2
    assert one_line(result) == (
        f"ckptdiff: {out.rstrip('/') or '/'}: names the current folder or one above it: convert writes OUT as a new "
        "folder of its own (give it a name, e.g. ./drafter-vllm)"
    )
    assert here.is_dir() and not any(here.iterdir())
    planned = run_cli("convert", str(drafter), out, "--to", "vllm", "--plan", cwd=here)
    assert planned.returncode == 0, planned.stderr  # --plan writes nothing


def test_a_left_partial_output_is_not_reused_without_force(run_cli, drafter, tmp_path):
    (tmp_path / "out.partial").mkdir()

    result = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm")

    assert result.returncode == 2
    assert "out.partial: exists, left by an earlier run" in one_line(result)


def test_force_removes_a_left_partial_output_but_never_a_users_folder_of_that_name(run_cli, drafter, tmp_path):
    """--force removed OUT.partial whatever it held: a user's folder `out.partial` (an rsync --partial-dir, a copy
    in progress) lost its files. Only a folder holding what convert writes is a left partial output."""
    users = tmp_path / "out.partial"
    users.mkdir()
    (users / "notes.txt").write_text("mine")

    refused = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm", "--force")

    assert one_line(refused) == (
        f"ckptdiff: {users}: exists and holds files convert does not write (notes.txt): --force removes only an "
        "earlier run's leftovers (remove it yourself, or choose another OUT)"
    )
    assert (users / "notes.txt").read_text() == "mine" and not (tmp_path / "out").exists()

    (users / "notes.txt").unlink()  # what an interrupted run leaves: the weights and config.json, no convert.json
    (users / "model.safetensors").write_bytes(b"cut short")
    (users / "config.json").write_text("{}")
    replaced = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm", "--force", "-q")
    assert replaced.returncode == 0, replaced.stderr
    assert not users.exists() and (tmp_path / "out" / "convert.json").is_file()


def test_a_folder_named_convert_is_still_compared(run_cli, tmp_path):
    """The plain comparison keeps working: ``ckptdiff convert B`` compares a folder named convert with B."""
    import shutil

    shutil.copytree(PUBLISHED, tmp_path / "convert")

    result = run_cli("convert", str(PUBLISHED), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "compatible: 15 match" in result.stdout


def test_the_plain_comparison_is_unchanged(run_cli):
    result = run_cli(str(PUBLISHED), str(FIXTURES / "kimi-k25-eagle3-ours"))

    assert result.returncode == 0
    assert "compatible: 15 match, 1 injected" in result.stdout


# --- a SRC that changes under the run --------------------------------------------------------------------------


def test_an_object_store_src_rewritten_during_the_write_fails_and_leaves_only_the_partial_output(
    run_cli, drafter, s3, tmp_path
):
    pytest.importorskip("s3fs")
    s3.upload(drafter, "drafters/k2")
    key = "drafters/k2/model.safetensors"
    rewritten = threading.Event()
    changed = bytearray((drafter / "model.safetensors").read_bytes())
    changed[-1] ^= 0xFF  # the last tensor's last byte: other bytes, so a new ETag

    def upload_other_bytes() -> None:
        s3.client().put_object(Bucket="drafters", Key="k2/model.safetensors", Body=bytes(changed))

    def rewrite_when_the_tensors_are_read(environ: dict) -> None:
        ranged = environ.get("HTTP_RANGE", "")
        tensor_read = ranged.startswith("bytes=") and not ranged.startswith("bytes=0-")
        if environ.get("PATH_INFO", "").endswith(key) and tensor_read and not rewritten.is_set():
            rewritten.set()  # a new version of the object, uploaded while convert copies it
            writer = threading.Thread(target=upload_other_bytes)
            writer.start()
            writer.join()  # the new version is in place before this read is answered

    s3.hooks.append(rewrite_when_the_tensors_are_read)
    out = tmp_path / "out"

    result = run_cli("convert", "s3://drafters/k2", str(out), "--to", "sglang", "-q")

    assert rewritten.is_set()
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"s3://{key}: changed while it was converted" in last and f"{out}.partial is left for inspection" in last
    assert not out.exists() and not (tmp_path / "out.partial" / "convert.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file-size limits")
@pytest.mark.parametrize("case", ["header-write", "kernel-copy"])
def test_a_disk_that_fills_while_writing_is_one_line_exit_2_out_kept_and_the_partial_output_removed(tmp_path, case):
    """A file-size limit makes every write past N bytes fail (EFBIG), as a full disk or a quota would: in a
    shard's header written by hand (4 kB), or in a tensor the kernel copies from a SRC on the same disk
    (copy_file_range: once blamed on SRC, "cannot copy", exit 1, OUT.partial left holding the room)."""
    import resource
    import signal

    if case == "header-write":
        src = FIXTURES / "drafters" / "mtp-deepseek-v3-nextn-export"
        extra, limit = ["--base", str(FIXTURES / "drafters" / "bases" / "deepseek-v3")], 4096
    else:
        src, extra = random_drafter(tmp_path / "src"), []
        limit = (src / "model.safetensors").stat().st_size // 2

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of the process being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "out"
    out.mkdir()
    (out / "convert.json").write_text("{}")  # an earlier convert's output, which --force may replace
    (out / "ours.txt").write_text("the user's")
    done = subprocess.run(
        [sys.executable, "-m", "ckptdiff", "convert", str(src), str(out), "--to", "vllm", *extra, "--force", "-q"],
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    partial = tmp_path / "out.partial"
    assert (done.returncode, done.stderr) == (
        2,
        f"ckptdiff: {partial}: cannot be written: File too large (removed; rerun once there is room)\n",
    )
    assert not partial.exists() and sorted(p.name for p in out.iterdir()) == ["convert.json", "ours.txt"]


def test_a_negative_layer_count_is_refused_in_one_line(run_cli, tmp_path, drafter):
    """num_hidden_layers -5 made vLLM's replay ask for layers 1..31: a 106 KB "plan fails" line, exit 1."""
    config = json.loads((drafter / "config.json").read_text())
    (drafter / "config.json").write_text(json.dumps({**config, "num_hidden_layers": -5}))

    result = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", "vllm")

    assert result.returncode == 2
    assert one_line(result) == f"ckptdiff: {drafter}/config.json: num_hidden_layers is -5: a count cannot be negative"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_d2t_of_no_number_type_is_refused_before_anything_is_written(run_cli, tmp_path, drafter, engine):
    """A BOOL d2t was planned as a cast, then failed in the write: exit 1 and OUT.partial left behind."""
    from safetensors.numpy import save_file

    tensors = load_file(drafter / "model.safetensors")
    tensors["d2t"] = np.ones(len(tensors["d2t"]), bool)
    save_file(tensors, drafter / "model.safetensors", metadata={"format": "pt"})

    result = run_cli("convert", str(drafter), str(tmp_path / "out"), "--to", engine)

    assert result.returncode == 2
    assert one_line(result) == f"ckptdiff: {drafter}: d2t is BOOL: its offsets cannot be cast from it to I64"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no OUT, no OUT.partial


def with_d2t(folder: Path, offsets: np.ndarray) -> Path:
    from safetensors.numpy import save_file

    tensors = load_file(folder / "model.safetensors")
    tensors["d2t"] = offsets
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize(
    ("engine", "bad", "dtype", "says"),
    [
        ("vllm", 5, np.int64, "draft id 5 maps to target id {vocab}"),  # one past the last target id
        ("sglang", 5, np.int64, "draft id 5 maps to target id {vocab}"),
        ("trtllm", 2, np.float32, "draft id 2 maps to target id -1"),  # cast to I64, then checked
    ],
)
def test_a_d2t_mapping_past_the_target_vocabulary_is_not_proven(run_cli, tmp_path, drafter, engine, bad, dtype, says):
    vocab = json.loads((drafter / "config.json").read_text())["vocab_size"]
    offsets = np.zeros(len(load_file(drafter / "model.safetensors")["d2t"]), dtype)
    offsets[bad] = vocab - bad if says.endswith("{vocab}") else -bad - 1
    offsets[bad + 1] = vocab  # a later bad id: the first is the one named
    out = tmp_path / "out"

    result = run_cli("convert", str(with_d2t(drafter, offsets)), str(out), "--to", engine, "-q")

    assert result.returncode == 1, result.stderr
    assert f"d2t: {says.format(vocab=vocab)} (offset {int(offsets[bad])}), outside the target's vocabulary" in (
        result.stderr
    )
    assert f"(vocab_size={vocab} in the output's config.json)" in result.stderr
    assert not out.exists() and (tmp_path / "out.partial").is_dir()


def test_a_d2t_reaching_the_last_target_id_is_proven(run_cli, tmp_path, drafter):
    vocab = json.loads((drafter / "config.json").read_text())["vocab_size"]
    length = len(load_file(drafter / "model.safetensors")["d2t"])
    offsets = np.full(length, vocab - length, np.int64)  # draft ids onto the vocabulary's last `length` ids

    result = run_cli("convert", str(with_d2t(drafter, offsets)), str(tmp_path / "out"), "--to", "vllm", "-q")

    assert result.returncode == 0, result.stderr


def _interrupted(where: Callable[[types.FrameType], bool]) -> Callable[..., Any]:
    """A tracer that raises KeyboardInterrupt, as Ctrl-C does, once: at the first line for which ``where`` holds."""
    fired = []

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line" and not fired and where(frame):
            fired.append(frame.f_lineno)
            raise KeyboardInterrupt
        return local

    return lambda frame, event, arg: local


def _line_of(function: Callable[..., Any], text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(number for number, line in enumerate(lines) if text in line)


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    """An OUT an earlier run wrote (``--force`` replaces it) and the proven OUT.partial of this run."""
    out, partial = tmp_path / "out", tmp_path / "out.partial"
    for folder, which in ((out, "old"), (partial, "new")):
        (folder / "weights").mkdir(parents=True)
        for number in range(20):
            (folder / "weights" / f"{number}.bin").write_text(which)
        (folder / "convert.json").write_text(which)
    return out, partial


@pytest.mark.parametrize(
    ("cut_before", "out_is", "partial_left"),
    [("os.rename(partial, out)", "old", True), ("sync_folder(out.parent)", "new", False)],
)
def test_ctrl_c_anywhere_in_the_swap_leaves_one_whole_out(tmp_path, cut_before, out_is, partial_left):
    """Ctrl-C as --force swaps the proven OUT.partial in: cut between the renames OUT used to be missing. Whatever
    line it cuts, OUT is one whole output (the old one before the swap, the new one after) and nothing named
    OUT.replaced-PID is left."""
    from ckptdiff.convert.run import _put_in_place

    out, partial = _folders(tmp_path)
    line = _line_of(_put_in_place, cut_before)
    sys.settrace(_interrupted(lambda frame: frame.f_code is _put_in_place.__code__ and frame.f_lineno == line))
    try:
        with pytest.raises(KeyboardInterrupt):
            _put_in_place(partial, out)
    finally:
        sys.settrace(None)
    assert (out / "convert.json").read_text() == out_is and len(list((out / "weights").iterdir())) == 20
    assert partial.exists() == partial_left
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "out.partial"][: 1 + partial_left]


def test_ctrl_c_while_the_replaced_out_is_removed_removes_it_to_the_end(tmp_path):
    """Cut halfway through removing the OUT it replaced, the run used to leave a gutted OUT.replaced-PID (its weights
    gone, its convert.json left); the removal now finishes as the run unwinds."""
    from ckptdiff.convert.run import _put_in_place

    out, partial = _folders(tmp_path)
    sys.settrace(_interrupted(lambda frame: frame.f_code.co_name.startswith("_rmtree")))
    try:
        with pytest.raises(KeyboardInterrupt):
            _put_in_place(partial, out)
    finally:
        sys.settrace(None)
    assert (out / "convert.json").read_text() == "new"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def test_a_source_without_tensors_plans_zero_files_in_words_that_count(run_cli, tmp_path):
    """An empty SRC (a failed export): the plan fails, naming what the engine needs, and counts what it would write
    in plain words (it said "0 B in 0 file")."""
    src = tmp_path / "src"
    write_config(src, small_drafter_config())
    write_safetensors(src / "model.safetensors", [])
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--to", "sglang", "--plan")
    assert result.returncode == 1
    assert "plan: 0 tensors, 0 B in 0 files" in result.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_out_is_refused_not_made_a_folder_named_by_a_space(run_cli, drafter, tmp_path, blank):
    """`ckptdiff convert SRC "$OUT"` with OUT unset or a space: OUT ' ' was written as a folder named by a space in
    the current folder, and '' was named as "." (the current folder)."""
    result = run_cli("convert", str(drafter), blank, "--to", "vllm", cwd=tmp_path)
    assert one_line(result) == f"ckptdiff: {blank!r}: is empty: give OUT, the new folder's name, e.g. ./drafter-vllm"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_the_markdown_plan_keeps_a_hostile_name_in_its_cell_and_inert(run_cli, tmp_path):
    """A SRC tensor named ``extra.<b>|`x``` (the plan fails on it, and names it): its backticks ended the plan's
    code span early and its ``<b>`` went through raw in the problems list, as GitHub renders a PR comment."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    settings = small_drafter_config()
    src = tmp_path / "src"
    write_config(src, settings)
    hostile = "extra.<b>|`x`"
    write_safetensors(src / "model.safetensors", [*eagle3_tensors(settings, with_embed=False), (hostile, "F32", [2])])
    result = run_cli("convert", str(src), str(tmp_path / "out"), "--to", "sglang", "--plan", "--format", "markdown")
    assert result.returncode == 1
    page = cmarkgfm.github_flavored_markdown_to_html(result.stdout, options=Options.CMARK_OPT_UNSAFE)
    assert "<b>" not in page
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    cells = [
        re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        for row in rows[: len(eagle3_tensors(settings, with_embed=False)) + 2]
    ]
    assert {len(row) for row in cells} == {6}
    assert ["<code>extra.&lt;b&gt;|`x`</code>"] * 2 == next(row[:2] for row in cells if "extra" in row[0])
    assert "<li>sglang would not load extra.&lt;b&gt;|`x`: the weight would be lost</li>" in page
