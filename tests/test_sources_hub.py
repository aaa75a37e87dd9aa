"""Hub checkpoints through the real huggingface_hub client against the emulator: lazy, pinned, cached, offline."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from huggingface_hub import constants, hf_hub_download, snapshot_download
from request_gate import RequestGate
from torch_files import write_torch_file

import ckptdiff.progress as progress_module
from ckptdiff.errors import CkptdiffError, HeaderError, SourceError
from ckptdiff.pipeline import compare_specs
from ckptdiff.progress import terminal_progress
from ckptdiff.sources import SourceOptions, resolve, resolve_both
from ckptdiff.sources.header_cache import HeaderCache
from ckptdiff.sources.hub import INITIAL_RANGE
from fixtures.generate import HERE as FIXTURES
from fixtures.generate import header_bytes, write_kimi_k2_base, write_safetensors

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
TOKEN = "hf_emulatorTestToken1234567890"


def ranged_gets(hub) -> list[str]:
    """The Range headers of the GETs the emulator saw, in order."""
    return [entry.range for entry in hub.log if entry.range is not None]


@pytest.fixture
def small_base(tmp_path: Path) -> Path:
    """A Kimi-K2-shaped base with 4 shards (one layer each, 2 experts)."""
    return write_kimi_k2_base(tmp_path / "base", layers=4, experts=2)


# --- reading ----------------------------------------------------------------------------------------------


def test_a_hub_repo_reads_like_the_same_folder_on_disk(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)

    remote = resolve("org/drafter")
    local = resolve(str(PUBLISHED))

    assert (remote.kind, remote.location, remote.revision) == ("hub", "org/drafter", commit)
    assert remote.tensors == local.tensors
    assert remote.config == local.config
    weights = (PUBLISHED / "model.safetensors").read_bytes()
    (file,) = remote.files
    assert (file.path, file.size) == ("model.safetensors", len(weights))
    assert file.sha256 == hashlib.sha256(weights).hexdigest()  # from the listing, not from reading the file
    # one listing call, config.json (one GET: the listing gave its commit and size), one ranged GET for the header
    assert hub_client.requests == {"api-info": 1, "resolve": 2}
    assert ranged_gets(hub_client) == [f"bytes=0-{INITIAL_RANGE - 1}"]


def test_every_request_is_pinned_to_the_resolved_commit(hub_client, small_base):
    commit = hub_client.add_repo("org/base", small_base)

    resolve("org/base")

    files = [entry.path for entry in hub_client.log if entry.route == "resolve"]
    assert len(files) == 1 + 1 + 4  # config and index (one GET each), four shard headers
    assert all(f"/resolve/{commit}/" in path for path in files)


def test_a_sharded_repo_reads_like_the_same_folder_on_disk(hub_client, small_base):
    hub_client.add_repo("org/base", small_base)

    remote = resolve("org/base")
    local = resolve(str(small_base))

    assert remote.tensors == local.tensors and remote.config == local.config
    assert [f.path for f in remote.files] == [f"model-{i:05d}-of-000004.safetensors" for i in range(1, 5)]
    assert all(f.sha256 and f.size for f in remote.files)
    assert hub_client.total_requests == 1 + 2 + 4  # listing, config + index, one GET per shard


def test_wanted_tensors_read_only_the_shard_that_holds_them(hub_client, small_base):
    hub_client.add_repo("org/base", small_base)

    base = resolve("org/base", wanted={"model.embed_tokens.weight"})

    assert [f.path for f in base.files] == ["model-00001-of-000004.safetensors"]
    assert base.tensors["model.embed_tokens.weight"].shape == (163840, 7168)
    assert base.config["model_type"] == "kimi_k2"
    assert hub_client.total_requests == 1 + 1 + 1  # listing, config, the first shard's header (the index: not needed)


def test_a_branch_that_moves_is_followed_and_a_tag_stays(hub_client, tmp_path):
    first = hub_client.add_repo("org/drafter", PUBLISHED)
    hub_client.tag("org/drafter", "v1", first)
    resolve("org/drafter")
    moved = tmp_path / "moved"
    write_safetensors(moved / "model.safetensors", [("only.weight", "F32", [4])], fill="zeros")
    second = hub_client.push("org/drafter", moved)

    now = resolve("org/drafter")
    tagged = resolve("org/drafter@v1")

    assert now.revision == second and set(now.tensors) == {"only.weight"} and now.config is None
    assert tagged.revision == first and "fc.weight" in tagged.tensors


def is_shard_read(request) -> bool:
    return request.method == "GET" and request.path.endswith(".safetensors")


def test_shards_are_read_in_parallel_on_a_bounded_pool(hub_client, tmp_path):
    hub_client.add_repo("org/base", write_kimi_k2_base(tmp_path / "base", layers=12, experts=1))
    hub_client.hooks.append(RequestGate(is_shard_read, until=3))  # 3 at once, however loaded the machine
    hub_client.latency = 0.05  # then long enough for a wider pool's requests to overlap

    resolve("org/base", SourceOptions(jobs=3))

    # 3 header workers, plus config.json and the index downloading beside them
    assert 3 <= hub_client.max_in_flight["resolve"] <= 3 + 2
    assert hub_client.requests["resolve"] == 1 + 1 + 12


def test_both_sides_share_one_bound_on_header_reads(hub_client, tmp_path):
    for repo in ("org/a", "org/b"):
        hub_client.add_repo(repo, write_kimi_k2_base(tmp_path / repo, layers=12, experts=1))
    hub_client.hooks.append(RequestGate(is_shard_read, until=5))  # 5 at once, however loaded the machine
    hub_client.latency = 0.05  # then long enough for two pools' requests to overlap

    resolve_both("org/a", "org/b", SourceOptions(jobs=5))

    # 5 header reads for the two sides together, plus config.json and the index of each side beside them
    assert 5 <= hub_client.max_in_flight["resolve"] <= 5 + 4
    assert hub_client.requests["resolve"] == 2 * (1 + 1 + 12)


def test_by_default_every_shard_of_both_sides_is_in_flight_at_once(hub_client, tmp_path):
    """Counted, not timed: each shard read is held at the emulator until all 24 are there at the same moment,
    which only happens if none waits for another to finish (a smaller pool would break the barrier)."""
    for repo in ("org/a", "org/b"):
        hub_client.add_repo(repo, write_kimi_k2_base(tmp_path / repo, layers=12, experts=1))
    together = threading.Barrier(24)

    def hold_until_all_arrive(request) -> bool:
        if request.path.endswith(".safetensors"):
            try:
                together.wait(timeout=120)
            except threading.BrokenBarrierError:
                pass  # fewer than 24 at once: answered anyway, and the assertion below says so
        return False  # then answered as usual

    hub_client.hooks.append(hold_until_all_arrive)

    resolve_both("org/a", "org/b")

    shard_reads = [entry for entry in hub_client.log if entry.path.endswith(".safetensors")]
    assert len(shard_reads) == 24
    assert not together.broken and hub_client.max_in_flight["resolve"] >= 24


def test_a_pairs_reads_are_under_way_while_the_comparison_loads(hub_client, tmp_path):
    """Causal, not timed: what the caller does meanwhile (the CLI loads the comparison and its output format)
    waits until both listing calls have reached the emulator, which happens only if the reads started first."""
    for repo in ("org/a", "org/b"):
        hub_client.add_repo(repo, write_kimi_k2_base(tmp_path / repo, layers=2, experts=1))
    listings = threading.Semaphore(0)

    def count_listings(request) -> bool:
        if request.route == "api-info":
            listings.release()
        return False  # then answered as usual

    hub_client.hooks.append(count_listings)
    reached: list[bool] = []

    report = compare_specs(
        "org/a", "org/b", meanwhile=lambda: reached.append(all(listings.acquire(timeout=120) for _ in "ab"))
    )

    assert reached == [True] and report.verdict == "compatible"


# --- cache and offline ------------------------------------------------------------------------------------


def test_second_run_pinned_makes_no_request_and_a_branch_makes_one(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    first = resolve("org/drafter")
    hub_client.reset_counters()

    pinned = resolve(f"org/drafter@{commit}")
    assert hub_client.total_requests == 0

    on_branch = resolve("org/drafter")
    assert hub_client.requests == {"api-info": 1}
    assert pinned.tensors == on_branch.tensors == first.tensors and pinned.revision == commit


def test_offline_reads_only_the_cache(hub_client, monkeypatch):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    online = resolve("org/drafter")
    hub_client.reset_counters()

    with_flag = resolve("org/drafter", SourceOptions(offline=True))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with_env = resolve("org/drafter")

    assert hub_client.total_requests == 0
    assert with_flag.revision == with_env.revision == commit
    assert with_flag.tensors == with_env.tensors == online.tensors and with_env.config == online.config


def test_offline_without_a_cached_copy_says_so(hub_client):
    hub_client.add_repo("org/drafter", PUBLISHED)

    with pytest.raises(SourceError) as error:
        resolve("org/drafter@v2", SourceOptions(offline=True))

    assert error.value.line() == (
        "org/drafter@v2: not in the local cache and offline mode is on "
        "(run once without --offline/HF_HUB_OFFLINE=1 to fill the cache)"
    )
    assert hub_client.total_requests == 0


def test_offline_works_from_a_snapshot_huggingface_hub_downloaded(hub_client, monkeypatch):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    snapshot_download("org/drafter")  # e.g. by vLLM: no ckptdiff cache, only the HF cache
    hub_client.reset_counters()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    checkpoint = resolve("org/drafter")

    assert checkpoint.revision == commit and "fc.weight" in checkpoint.tensors
    # A blob's name is not a hash (#30 finding 4): the listing rebuilt from the snapshot carries none.
    assert checkpoint.files[0].sha256 is None
    assert hub_client.total_requests == 0


def test_offline_with_only_config_json_downloaded_is_not_cached(hub_client, monkeypatch):
    hub_client.add_repo("org/drafter", PUBLISHED)
    hf_hub_download("org/drafter", "config.json")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    with pytest.raises(SourceError, match="not in the local cache and offline mode is on"):
        resolve("org/drafter")


def test_a_shard_already_in_the_hf_cache_is_read_from_disk(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    hf_hub_download("org/drafter", "model.safetensors", revision=commit)
    hub_client.reset_counters()

    checkpoint = resolve(f"org/drafter@{commit}")

    assert "fc.weight" in checkpoint.tensors
    assert all(entry.range is None for entry in hub_client.log)  # listing and config only, no ranged GET


def test_a_damaged_cache_entry_is_fetched_again(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    resolve("org/drafter")
    cache = HeaderCache("org/drafter")
    cache.write_header(commit, "model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    cache.flush()  # a later pack: its entry replaces the sound one
    hub_client.reset_counters()

    again = resolve(f"org/drafter@{commit}")

    assert "fc.weight" in again.tensors
    assert hub_client.requests == {"resolve": 1}


def test_a_damaged_cached_config_is_fetched_again(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    first = resolve("org/drafter")
    cache = HeaderCache("org/drafter")
    assert cache.read_file(commit, "config.json") == (PUBLISHED / "config.json").read_bytes()
    cache.write_file(commit, "config.json", b'{"model_type": "trunc')
    cache.flush()
    hub_client.reset_counters()

    again = resolve(f"org/drafter@{commit}")

    assert again.config == first.config
    assert hub_client.requests == {"resolve": 1}  # config.json, one GET


# --- ranged reads -----------------------------------------------------------------------------------------


def _write_with_header_length(path: Path, prefix_length: int) -> None:
    """A safetensors file whose 8-byte length + JSON header take exactly ``prefix_length`` bytes."""
    tensors = [("w", "F32", [1])]
    estimate = prefix_length - len(header_bytes(tensors, {"pad": ""})[0])
    for pad in range(max(0, estimate - 8), estimate + 9):
        if len(header_bytes(tensors, {"pad": "x" * pad})[0]) == prefix_length:
            write_safetensors(path, tensors, fill="zeros", metadata={"pad": "x" * pad})
            return
    raise AssertionError(f"cannot build a {prefix_length}-byte header")


@pytest.mark.parametrize(
    ("prefix_length", "ranges"),
    [
        (INITIAL_RANGE, [f"bytes=0-{INITIAL_RANGE - 1}"]),  # the header just fits the first range
        (INITIAL_RANGE + 8, [f"bytes=0-{INITIAL_RANGE - 1}", f"bytes={INITIAL_RANGE}-{INITIAL_RANGE + 7}"]),
        (3 * INITIAL_RANGE, [f"bytes=0-{INITIAL_RANGE - 1}", f"bytes={INITIAL_RANGE}-{3 * INITIAL_RANGE - 1}"]),
    ],
)
def test_a_long_header_costs_one_more_request_for_the_remainder_only(hub_client, tmp_path, prefix_length, ranges):
    _write_with_header_length(tmp_path / "repo" / "model.safetensors", prefix_length)
    hub_client.add_repo("org/long", tmp_path / "repo")

    checkpoint = resolve("org/long")

    assert checkpoint.tensors["w"].shape == (1,)  # the whole padded header was parsed
    assert ranged_gets(hub_client) == ranges
    assert hub_client.bytes_sent["resolve"] == prefix_length  # the header and nothing else, never twice


def test_a_server_that_ignores_range_is_read_only_as_far_as_the_header(hub_client, tmp_path):
    repo = tmp_path / "repo"
    write_safetensors(repo / "model.safetensors", [("w", "F32", [16 * 1024 * 1024])])  # 64 MiB, sparse
    hub_client.add_repo("org/big", repo)
    hub_client.ignore_range = True

    checkpoint = resolve("org/big")
    hub_client.stop()  # let the server notice the dropped connection before counting

    assert checkpoint.tensors["w"].shape == (16 * 1024 * 1024,)
    sent = hub_client.bytes_sent["resolve"]
    assert sent < (repo / "model.safetensors").stat().st_size // 4, sent


def test_a_long_header_from_a_server_that_ignores_range_takes_one_request(hub_client, tmp_path):
    _write_with_header_length(tmp_path / "repo" / "model.safetensors", 3 * INITIAL_RANGE)
    hub_client.add_repo("org/long", tmp_path / "repo")
    hub_client.ignore_range = True

    checkpoint = resolve("org/long")

    assert checkpoint.tensors["w"].shape == (1,)  # the whole padded header was parsed
    assert [entry.status for entry in hub_client.log if entry.range] == [200]  # read on to the header's end


def test_lfs_files_are_read_through_the_redirect_without_the_token(hub_client, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub_client.valid_tokens.add(TOKEN)
    hub_client.lfs_redirect = True
    hub_client.add_repo("org/drafter", PUBLISHED, private=True)

    checkpoint = resolve("org/drafter")

    assert "fc.weight" in checkpoint.tensors
    assert hub_client.requests == {"api-info": 1, "resolve": 2, "cdn": 1}  # config.json; the shard's 302
    (cdn,) = [entry for entry in hub_client.log if entry.route == "cdn"]
    assert cdn.range == f"bytes=0-{INITIAL_RANGE - 1}" and not cdn.authenticated


def test_transient_server_errors_are_retried(hub_client):
    hub_client.add_repo("org/drafter", PUBLISHED)
    hub_client.fail_next(429, retry_after=0, route="api-info")
    hub_client.fail_next(503, route="resolve")

    checkpoint = resolve("org/drafter")

    assert "fc.weight" in checkpoint.tensors
    assert [entry.status for entry in hub_client.log].count(503) == 1
    assert [entry.status for entry in hub_client.log].count(429) == 1


def test_a_progress_bar_is_drawn_only_when_asked_on_a_terminal(hub_client, small_base, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    hub_client.add_repo("org/base", small_base)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    resolve("org/base", SourceOptions(progress=None))
    assert terminal.getvalue() == ""

    hub_client.add_repo("org/base2", small_base)
    monkeypatch.setattr(progress_module, "DELAY", 0)  # reads slower than the delay before a bar appears
    resolve("org/base2", SourceOptions(progress=terminal_progress(terminal)))
    assert "org/base2:" in terminal.getvalue() and "/4 [" in terminal.getvalue()  # tqdm, 4 shards, then erased


# --- errors: one line naming the repo and what to do ------------------------------------------------------


def test_a_missing_repo(hub_client):
    with pytest.raises(SourceError) as error:
        resolve("org/missing")
    line = error.value.line()
    assert line.startswith("org/missing: repo not found on http://127.0.0.1:")
    assert "HF_TOKEN" in line and "hf auth login" in line


def test_a_missing_revision(hub_client):
    hub_client.add_repo("org/drafter", PUBLISHED)
    with pytest.raises(SourceError) as error:
        resolve("org/drafter@no-such-branch")
    assert error.value.line() == (
        "org/drafter@no-such-branch: revision 'no-such-branch' not found (check the branch, tag or commit)"
    )


def test_a_gated_repo_without_a_token(hub_client):
    hub_client.add_repo("org/gated", PUBLISHED, gated=True)
    with pytest.raises(SourceError) as error:
        resolve("org/gated")
    line = error.value.line()
    assert line.startswith("org/gated@") and "gated repo" in line
    assert "set HF_TOKEN or run `hf auth login`" in line


def test_a_token_without_access_is_never_printed(hub_client, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub_client.valid_tokens.add(TOKEN)
    hub_client.add_repo("org/gated", PUBLISHED, gated=True)
    hub_client.repos["org/gated"].access = {"hf_someoneElse"}
    with pytest.raises(SourceError) as error:
        resolve("org/gated")
    assert "gated repo" in error.value.line() and TOKEN not in error.value.line()


def test_a_private_repo_with_a_token(hub_client, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub_client.valid_tokens.add(TOKEN)
    hub_client.add_repo("org/private", PUBLISHED, private=True)
    assert "fc.weight" in resolve("org/private").tensors


@pytest.mark.parametrize("status", [401, 403])
def test_unauthorised_file_requests_say_how_to_log_in(hub_client, status):
    hub_client.add_repo("org/drafter", PUBLISHED)
    hub_client.fail_next(status, route="resolve", count=10)
    with pytest.raises(SourceError) as error:
        resolve("org/drafter")
    assert "HF_TOKEN" in error.value.line() and "org/drafter@" in error.value.line()


def test_a_repo_without_readable_weights_says_what_it_has(hub_client, tmp_path):
    repo = tmp_path / "gguf"
    repo.mkdir()
    (repo / "config.json").write_text("{}")
    (repo / "model-q4.gguf").write_bytes(b"GGUF")
    hub_client.add_repo("org/gguf", repo)
    with pytest.raises(SourceError) as error:
        resolve("org/gguf")
    assert error.value.line() == (
        "org/gguf@"
        + hub_client.repos["org/gguf"].refs["main"][:12]
        + ": no safetensors weights (model.safetensors or *.safetensors.index.json)"
        + " (it holds: model-q4.gguf (not safetensors))"
    )
    assert hub_client.requests == {"api-info": 1}


def test_a_repo_whose_weights_are_in_a_subfolder_names_its_spec(hub_client, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(PUBLISHED, repo / "drafter")
    (repo / "README.md").write_text("a drafter in drafter/")
    hub_client.add_repo("org/nested", repo)
    with pytest.raises(SourceError) as error:
        resolve("org/nested")
    assert error.value.line().endswith("(its weights are in a subfolder: give hf://org/nested/drafter)")
    with pytest.raises(SourceError, match=r"give hf://org/nested@main/drafter\)$"):
        resolve("org/nested@main")
    assert resolve("hf://org/nested/drafter").tensors  # the spec it gives reads


def test_a_torch_bin_on_the_hub_is_read_like_the_same_file_on_disk(hub_client, tmp_path):
    """One planner for every store: a .bin repo is read as a local folder is (the pickle through ranges)."""
    repo = tmp_path / "pickled"
    state = {"embed.weight": ("F32", [4096, 512], None), "norm.weight": ("F32", [512], None)}  # 8 MiB of weights
    write_torch_file(repo / "pytorch_model.bin", state)
    hub_client.add_repo("org/pickled", repo)
    remote, local = resolve("org/pickled"), resolve(str(repo))
    assert remote.tensors == local.tensors and set(remote.tensors) == set(state)
    assert hub_client.bytes_sent["resolve"] < 512 * 1024  # the zip directory and the pickle, not the weights


def test_an_unreachable_hub(hub_client, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    with pytest.raises(SourceError) as error:
        resolve("org/drafter")
    line = error.value.line()  # org/drafter might have meant a local folder: the line says there is none
    assert line.startswith(f"org/drafter: cannot reach {closed}, and there is no local file or folder of that name")
    assert "(check the network" in line


def test_a_hub_that_does_not_answer_in_time(hub_client, monkeypatch):
    hub_client.add_repo("org/drafter", PUBLISHED)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.3)
    hub_client.hooks.append(lambda request: request.route == "api-info" and time.sleep(1.5) is None)
    with pytest.raises(SourceError) as error:
        resolve("org/drafter")
    assert error.value.line().startswith("org/drafter: timed out talking to http://127.0.0.1:")


def test_a_bad_header_on_the_hub_names_the_file(hub_client, tmp_path):
    repo = tmp_path / "bad"
    repo.mkdir()
    (repo / "model.safetensors").write_bytes((20).to_bytes(8, "little") + b'{"w": {"dtype": "F32"}}')
    commit = hub_client.add_repo("org/bad", repo)
    with pytest.raises(HeaderError) as error:
        resolve("org/bad")
    assert error.value.line().startswith(f"org/bad@{commit[:12]}:model.safetensors: ")


def test_with_several_bad_shards_the_first_by_name_is_reported(hub_client, small_base):
    for number in (4, 2):
        shard = small_base / f"model-0000{number}-of-000004.safetensors"
        with open(shard, "r+b") as handle:
            handle.seek(8)
            handle.write(b"[")  # the header no longer starts with '{'
    commit = hub_client.add_repo("org/base", small_base)
    with pytest.raises(HeaderError) as error:
        resolve("org/base")
    assert error.value.line().startswith(f"org/base@{commit[:12]}:model-00002-of-000004.safetensors: ")


def test_an_index_naming_a_shard_the_repo_lacks(hub_client, small_base):
    index = json.loads((small_base / "model.safetensors.index.json").read_text())
    index["weight_map"]["extra.weight"] = "model-00009-of-000004.safetensors"
    (small_base / "model.safetensors.index.json").write_text(json.dumps(index))
    hub_client.add_repo("org/base", small_base)
    with pytest.raises(CkptdiffError, match="model-00009-of-000004.safetensors listed in the index is not in the repo"):
        resolve("org/base")


def test_an_index_naming_a_folder_of_the_repo_says_it_is_a_folder(hub_client, small_base):
    index = json.loads((small_base / "model.safetensors.index.json").read_text())
    index["weight_map"]["extra.weight"] = "extra.safetensors"
    (small_base / "model.safetensors.index.json").write_text(json.dumps(index))
    (small_base / "extra.safetensors").mkdir()
    (small_base / "extra.safetensors" / "README.md").write_text("not a shard")
    hub_client.add_repo("org/base", small_base)
    with pytest.raises(CkptdiffError, match=r"index.json: shard extra.safetensors listed in the index is a folder, "):
        resolve("org/base")


def test_a_same_size_edit_of_a_cached_header_is_caught_and_fetched_again(hub_client):
    """An edit that keeps the entry's size and leaves a valid header (a renamed tensor) fails its checksum."""
    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    first = resolve("org/drafter")
    [pack] = (HeaderCache("org/drafter").root / commit / "packs").iterdir()
    raw = pack.read_bytes()
    assert b"fc.weight" in raw
    pack.write_bytes(raw.replace(b"fc.weight", b"fc.weighT", 1))
    hub_client.reset_counters()

    again = resolve(f"org/drafter@{commit}")

    assert again.tensors == first.tensors and "fc.weighT" not in again.tensors
    assert hub_client.requests == {"resolve": 2}  # the pack is a miss as a whole: config.json and the header again


def test_a_read_writes_one_pack_not_a_file_per_shard(hub_client, small_base):
    """Creating a file costs the kernel ~0.7 ms of CPU here: a 100-shard pair made 100 of them mid-run."""
    commit = hub_client.add_repo("org/base", small_base)
    first = resolve("org/base")
    folder = HeaderCache("org/base").root / commit
    assert sorted(p.relative_to(folder).parent.as_posix() for p in folder.rglob("*") if p.is_file()) == [".", "packs"]
    hub_client.reset_counters()

    again = resolve(f"org/base@{commit}")

    assert again.tensors == first.tensors and again.config == first.config
    assert hub_client.requests == {}  # every header, config.json and the index from the pack


def test_a_commit_s_packs_are_merged_once_there_are_many(hub_client, small_base):
    commit = hub_client.add_repo("org/base", small_base)
    first = resolve("org/base")
    for extra in range(HeaderCache.MAX_PACKS - 1):  # other runs' packs: one made-up small file each
        cache = HeaderCache("org/base")
        cache.write_file(commit, f"extra-{extra}.json", b"{}")
        cache.flush()
    packs = HeaderCache("org/base").root / commit / "packs"
    assert len(list(packs.iterdir())) == 1  # the write that would have made the eighth merged them all
    hub_client.reset_counters()

    again = resolve(f"org/base@{commit}")

    assert again.tensors == first.tensors and hub_client.requests == {}
    assert HeaderCache("org/base").read_file(commit, "extra-0.json") == b"{}"


def test_the_cache_lives_in_its_own_folder_under_hf_home_not_in_the_hub_cache(hub_client):
    from huggingface_hub import constants

    hub_client.add_repo("org/drafter", PUBLISHED)
    resolve("org/drafter")

    assert (Path(constants.HF_HOME) / "ckptdiff" / "v3" / "models--org--drafter").is_dir()
    assert not (Path(constants.HF_HUB_CACHE) / "ckptdiff").exists()  # `hf cache` would call it invalid


def test_a_cached_header_names_its_shard_once(hub_client, monkeypatch):
    """A header read from the cache is decoded under the shard's display name (``org/drafter@…:model.safetensors``,
    the name its errors carry), built once for it: read_header leaves the naming to the way the header is read."""
    from ckptdiff.sources.hub import HubSource

    commit = hub_client.add_repo("org/drafter", PUBLISHED)
    resolve("org/drafter")  # the header is in the cache now
    named: list[object] = []
    name_of = HubSource.name_of

    def counted(self: HubSource, file: object = None) -> str:
        named.append(file)
        return name_of(self, file)  # type: ignore[arg-type]

    monkeypatch.setattr(HubSource, "name_of", counted)
    hub_client.reset_counters()

    again = resolve(f"org/drafter@{commit}")

    assert "fc.weight" in again.tensors and hub_client.total_requests == 0
    assert named.count("model.safetensors") == 1
