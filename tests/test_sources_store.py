"""Checkpoints in object stores: S3 through moto's real S3 server on loopback, read like the same files on disk."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from request_gate import RequestGate  # noqa: E402
from store_servers import ACCESS_KEY, SECRET_KEY  # noqa: E402

from ckptdiff.errors import CkptdiffError, SourceError  # noqa: E402
from ckptdiff.sources import SourceOptions, resolve  # noqa: E402
from ckptdiff.sources.base import INITIAL_RANGE  # noqa: E402
from fixtures.generate import HERE as FIXTURES  # noqa: E402
from fixtures.generate import write_safetensors  # noqa: E402

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
OURS = FIXTURES / "kimi-k25-eagle3-ours"


def cli_json(run_cli, env, *args):
    result = run_cli(*args, "--format", "json", env=env)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


# --- the same checkpoint, wherever it is ----------------------------------------------------------------------


def test_a_drafter_pair_on_s3_reads_like_the_same_pair_on_disk(s3, run_cli):
    s3.upload(PUBLISHED, "drafters/published")
    s3.upload(OURS, "drafters/ours")

    remote = cli_json(run_cli, s3.env, "s3://drafters/published", "s3://drafters/ours")
    local = cli_json(run_cli, s3.env, str(PUBLISHED), str(OURS))

    for key in ("verdict", "profile", "counts", "tensors", "config", "findings"):
        assert remote[key] == local[key], key
    assert remote["a"]["spec"] == "s3://drafters/published"
    etag = s3.client().head_object(Bucket="drafters", Key="published/model.safetensors")["ETag"].strip('"')
    # the object's ETag, in its own field: a revision is a Hub commit
    assert (remote["a"]["kind"], remote["a"]["etag"], remote["a"]["revision"]) == ("store", etag, None)


def test_an_s3_key_holding_a_hash_is_read_as_its_key(s3, run_cli):
    """`aws s3 ls s3://drafters/runs/exp#3/` reads the key as written: so does ckptdiff, and shows it whole."""
    s3.upload(PUBLISHED, "drafters/runs/exp#3")
    remote = cli_json(run_cli, s3.env, "s3://drafters/runs/exp#3", str(PUBLISHED))
    assert remote["verdict"] == "compatible" and remote["a"]["spec"] == "s3://drafters/runs/exp#3"
    named = cli_json(run_cli, s3.env, "s3://drafters/runs/exp#3/model.safetensors", str(PUBLISHED))
    assert named["a"]["spec"] == "s3://drafters/runs/exp#3/model.safetensors"


def test_a_single_object_costs_a_head_and_one_ranged_get_for_its_header(s3):
    s3.upload(PUBLISHED, "one/drafter")

    checkpoint = resolve("s3://one/drafter/model.safetensors")

    assert checkpoint.tensors == resolve(str(PUBLISHED / "model.safetensors")).tensors
    assert checkpoint.config == json.loads((PUBLISHED / "config.json").read_text())
    assert s3.requests["one/drafter/model.safetensors"] == 2  # HEAD (its size and ETag), one ranged GET
    # the first ranged GET is sized for a typical header (the Hub's rule): one request, at most INITIAL_RANGE bytes
    header = len(_header_of(PUBLISHED / "model.safetensors"))
    assert header <= s3.bytes_sent["one/drafter/model.safetensors"] <= INITIAL_RANGE


def write_sharded(folder: Path, shards: int = 3) -> Path:
    """A small sharded checkpoint (index + shards of ~1 MiB, each far bigger than its header) with a config."""
    folder.mkdir(parents=True)
    weight_map = {}
    for number in range(1, shards + 1):
        shard = f"model-{number:05d}-of-{shards:05d}.safetensors"
        tensors = [(f"model.layers.{number}.mlp.{part}.weight", "BF16", [512, 512]) for part in ("up", "down")]
        if number == 1:
            tensors.append(("model.embed_tokens.weight", "BF16", [1024, 512]))
        write_safetensors(folder / shard, tensors, fill="sparse")
        weight_map.update({name: shard for name, _, _ in tensors})
    index = {"metadata": {}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 512}))
    return folder


def test_a_sharded_checkpoint_reads_its_index_and_each_shards_header(s3, tmp_path):
    base = write_sharded(tmp_path / "base")
    s3.upload(base, "models/base")

    remote = resolve("s3://models/base/", SourceOptions(jobs=4))
    local = resolve(str(base))

    assert remote.tensors == local.tensors and remote.config == local.config
    assert [f.path for f in remote.files] == [f.path for f in local.files]
    for shard in base.glob("*.safetensors"):
        sent = s3.bytes_sent[f"models/base/{shard.name}"]
        assert len(_header_of(shard)) <= sent <= INITIAL_RANGE < shard.stat().st_size, shard.name


def test_shards_are_read_in_parallel_on_a_pool_of_jobs(s3, tmp_path):
    base = write_sharded(tmp_path / "base", shards=8)
    s3.upload(base, "models/eight")
    # the first 3 header reads wait at the server until all 3 are there (so 3 are in flight together, however
    # loaded the machine); then every request waits 0.05 s, so a pool wider than 3 would show as more at once
    s3.hooks.append(RequestGate(lambda environ: environ["PATH_INFO"].endswith(".safetensors"), until=3))
    s3.latency = 0.05
    try:
        resolve("s3://models/eight", SourceOptions(jobs=3))
    finally:
        s3.latency = 0.0
        s3.hooks.clear()
    # 3 header reads, plus config.json and the index beside them
    assert 3 <= s3.max_in_flight <= 3 + 2
    assert sum(n for key, n in s3.requests.items() if key.endswith(".safetensors")) == 8


def test_wanted_tensors_read_only_the_shard_that_holds_them(s3, tmp_path):
    base = write_sharded(tmp_path / "base")
    s3.upload(base, "models/base")
    index = json.loads((base / "model.safetensors.index.json").read_text())["weight_map"]

    checkpoint = resolve("s3://models/base", wanted={"model.embed_tokens.weight"})

    holder = index["model.embed_tokens.weight"]
    assert [f.path for f in checkpoint.files] == [holder]
    read = {key.rsplit("/", 1)[1] for key in s3.bytes_sent if key.endswith(".safetensors")}
    assert read == {holder}


def test_a_prefix_whose_weights_are_one_folder_down_names_it(s3):
    s3.upload(PUBLISHED, "runs/job-7/checkpoint-100")
    with pytest.raises(SourceError) as error:
        resolve("s3://runs/job-7")
    assert error.value.line().endswith("(its weights are in a subfolder: give s3://runs/job-7/checkpoint-100)")
    assert resolve("s3://runs/job-7/checkpoint-100").tensors  # the spec it gives reads


def test_a_large_object_costs_only_its_header(s3, tmp_path):
    """160 times the first read's size (moto holds every uploaded byte in memory: 256 MiB took most of the
    suite's S3 time, for the same proof)."""
    big = tmp_path / "big" / "model.safetensors"
    big.parent.mkdir()
    write_safetensors(big, [("lm_head.weight", "BF16", [4096, 2048])], fill="sparse")  # 16 MiB on a sparse disk
    assert big.stat().st_size > 160 * INITIAL_RANGE
    s3.upload(big.parent, "big/ckpt")

    checkpoint = resolve("s3://big/ckpt/model.safetensors")

    assert checkpoint.tensors["lm_head.weight"].shape == (4096, 2048)
    assert s3.requests["big/ckpt/model.safetensors"] == 2  # HEAD, one ranged GET
    assert s3.bytes_sent["big/ckpt/model.safetensors"] == INITIAL_RANGE  # 100 kB of 16 MiB


# --- errors: one line, exit 2, the secret never shown ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("s3://no-such-bucket/drafter", "s3://no-such-bucket/drafter: no such bucket, object or prefix"),
        ("s3://errors/no-such-prefix", "s3://errors/no-such-prefix: no such bucket, object or prefix"),
        ("s3://errors/drafter/missing.safetensors", "s3://errors/drafter/missing.safetensors: no such bucket"),
    ],
)
def test_a_missing_bucket_or_key_is_one_line(s3, run_cli, spec, expected):
    s3.upload(PUBLISHED, "errors/drafter")
    result = run_cli(spec, str(OURS), "--debug", env=s3.env)
    assert_one_line(result, expected)


def test_an_object_that_is_no_weight_file_is_named_as_a_local_one_would_be(s3, run_cli):
    s3.upload(PUBLISHED, "files/drafter")
    result = run_cli("s3://files/drafter/config.json", str(OURS), env=s3.env)
    assert_one_line(result, "s3://files/drafter/config.json: is not named like a weight file")
    local = run_cli(str(PUBLISHED / "config.json"), str(OURS))  # the same words as for a local file
    assert local.stderr == result.stderr.replace("s3://files/drafter", str(PUBLISHED))


def test_denied_credentials_are_one_line_and_the_secret_is_never_shown(s3, run_cli):
    s3.upload(PUBLISHED, "private/drafter")
    with s3.require_auth() as (key_id, secret):
        for debug in ((), ("--debug",)):
            result = run_cli("s3://private/drafter", str(OURS), *debug, env=s3.env)
            assert_one_line(result, "s3://private/drafter")  # the prefix, or the object the keys could not read
            assert ": access denied (check the credentials" in result.stderr
        allowed_env = {**s3.env, "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}
        allowed = run_cli("s3://private/drafter", str(OURS), env=allowed_env)
    assert allowed.returncode == 0, allowed.stderr
    assert secret not in allowed.stdout + allowed.stderr


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (403, "access denied (check the credentials"),  # an object the keys may not read (a KMS key, an ACL)
        (500, "the server answered HTTP 500 (retry later)"),
        (503, "the server answered HTTP 503 (retry later)"),
    ],
)
def test_a_shard_the_store_will_not_serve_is_one_line_naming_that_shard(s3, run_cli, tmp_path, status, said):
    base = write_sharded(tmp_path / "base")
    s3.upload(base, "refusing/base")
    shard = sorted(base.glob("*.safetensors"))[1].name
    s3.answer[f"refusing/base/{shard}"] = status
    # AWS_MAX_ATTEMPTS: botocore's retries of the 5xx prove nothing here, and take seconds
    result = run_cli("s3://refusing/base", str(base), env={**s3.env, "AWS_MAX_ATTEMPTS": "1"})
    assert_one_line(result, f"s3://refusing/base/{shard}: {said}")


def test_an_unreachable_endpoint_is_one_line(s3, run_cli):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    # AWS_MAX_ATTEMPTS (botocore's own setting) keeps the test short; s3fs still retries a few times
    env = {**s3.env, "AWS_ENDPOINT_URL": closed, "AWS_MAX_ATTEMPTS": "1"}
    result = run_cli("s3://drafters/published", str(OURS), env=env)
    assert_one_line(result, f"s3://drafters/published: cannot reach the store's endpoint {closed}")


def assert_one_line(result, expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"ckptdiff: {expected}"), result.stderr
    assert "Traceback" not in result.stderr or "--debug" in str(result.args)
    assert "internal error" not in result.stderr
    for piece in (SECRET_KEY, SECRET_KEY[:12], SECRET_KEY[-12:], ACCESS_KEY):
        assert piece not in result.stderr + result.stdout


def test_a_missing_extra_names_the_pip_install(run_cli_subprocess, tmp_path):
    """Without gcsfs installed (a hidden import here), gs:// says which extra to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "gcsfs.py").write_text("raise ImportError('No module named gcsfs', name='gcsfs')\n")
    result = run_cli_subprocess("gs://bucket/drafter", str(OURS), env={"PYTHONPATH": str(blocker)})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "ckptdiff: gs://bucket/drafter: reading gs:// needs gcsfs (pip install 'ckptdiff[gcs]')"
    ]


def _header_of(path: Path) -> bytes:
    """The 8-byte length and the JSON header: all a header-only read may fetch of a safetensors file."""
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        return prefix + handle.read(int.from_bytes(prefix, "little"))


def test_values_download_a_stores_weight_files_and_compare_like_local_ones(s3, run_cli, tmp_path):
    """--values reads through the same Source: a store's files go to a temporary folder, removed afterwards."""
    pytest.importorskip("numpy")
    s3.upload(PUBLISHED, "values/published")
    s3.upload(OURS, "values/ours")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**s3.env, "TMPDIR": str(scratch)}

    remote = run_cli("s3://values/published", "s3://values/ours", "--values", "--format", "json", env=env)
    local = run_cli(str(PUBLISHED), str(OURS), "--values", "--format", "json", env=env)

    assert remote.returncode == local.returncode, remote.stderr
    assert json.loads(remote.stdout)["tensors"] == json.loads(local.stdout)["tensors"]
    assert "--values: downloading 1 file(s) of A (s3://values/published)" in remote.stderr
    assert s3.bytes_sent["values/ours/model.safetensors"] >= (OURS / "model.safetensors").stat().st_size
    assert list(scratch.iterdir()) == []  # the temporary folder is gone


def test_offline_refuses_an_object_store_before_any_request(s3):
    with pytest.raises(SourceError, match="an object store cannot be read with --offline"):
        resolve("s3://drafters/published", SourceOptions(offline=True))
    assert sum(s3.requests.values()) == 0


def test_a_shard_the_index_names_that_is_a_prefix_says_it_is_a_folder(s3, tmp_path: Path):
    folder = tmp_path / "sharded"
    write_safetensors(folder / "model-00001-of-00002.safetensors", [("a.weight", "F32", [2, 2])])
    (folder / "model-00002-of-00002.safetensors").mkdir()
    (folder / "model-00002-of-00002.safetensors" / "part-0").write_bytes(b"uploaded as a folder")
    weight_map = {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    s3.upload(folder, "drafters/sharded")
    with pytest.raises(CkptdiffError) as error:
        resolve("s3://drafters/sharded", SourceOptions())
    assert error.value.line() == (
        "s3://drafters/sharded/model.safetensors.index.json: shard model-00002-of-00002.safetensors listed in the "
        "index is a folder, not a file"
    )


def test_offline_refuses_a_store_side_before_either_side_is_read(s3, run_cli, tmp_path: Path):
    """The store side is named (B, --base; b from Python) before A is read: A's broken header is never reached."""
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not a safetensors file")
    result = run_cli(str(broken), "s3://drafters/published", "--offline", env=s3.env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "ckptdiff: --offline: B is s3://drafters/published, an object store, which cannot be read offline "
        "(only local paths and cached Hub repos are read offline)\n"
    )
    result = run_cli(str(PUBLISHED), str(broken), "--base", "https://example.com/base", "--offline", env=s3.env)
    assert result.stderr.startswith("ckptdiff: --offline: --base is https://example.com/base, a web server, ")
    assert sum(s3.requests.values()) == 0
    import ckptdiff

    with pytest.raises(ckptdiff.CkptdiffError, match=r"^offline: b is s3://drafters/published, an object store"):
        ckptdiff.compare(str(broken), "s3://drafters/published", offline=True)


def test_an_unreachable_store_is_one_line_without_the_clients_logged_tracebacks(run_cli_subprocess):
    """gcsfs logs each failed attempt with its traceback; ckptdiff's one line is all that reaches stderr."""
    pytest.importorskip("gcsfs")
    done = run_cli_subprocess(
        "gs://my-bucket/drafter",
        str(FIXTURES / "kimi-k25-eagle3-ours"),
        env={"GOOGLE_CLOUD_PROJECT": "x", "STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"},
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("ckptdiff: gs://my-bucket/drafter: "), done.stderr
