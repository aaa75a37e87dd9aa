"""Checkpoints on plain web servers (http://, https://): a file, an index, or a folder URL, read with ranged GETs.

The server is tests/hub_emulator.py, used here only as a web server that honours Range and counts bytes: its
``/{repo}/resolve/{revision}/{file}`` URLs are ordinary file URLs.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem

from request_gate import RequestGate  # noqa: E402
from store_servers import WebServer  # noqa: E402

from ckptdiff.errors import SourceError  # noqa: E402
from ckptdiff.sources import resolve  # noqa: E402
from ckptdiff.sources.base import INITIAL_RANGE  # noqa: E402
from fixtures.generate import HERE as FIXTURES  # noqa: E402
from fixtures.generate import write_safetensors  # noqa: E402

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"


def test_a_safetensors_url_reads_like_the_same_file_on_disk(hub):
    hub.add_repo("org/drafter", PUBLISHED)
    url = f"{hub.endpoint}/org/drafter/resolve/main/model.safetensors"
    hub.reset_counters()

    checkpoint = resolve(url)

    local = resolve(str(PUBLISHED / "model.safetensors"))
    assert checkpoint.tensors == local.tensors and checkpoint.kind == "store"
    assert checkpoint.config == json.loads((PUBLISHED / "config.json").read_text())  # config.json beside it
    assert hub.bytes_sent["resolve"] <= INITIAL_RANGE + (PUBLISHED / "config.json").stat().st_size


def test_a_folder_url_without_a_folder_page_finds_the_usual_names(hub, tmp_path):
    folder = tmp_path / "sharded"
    folder.mkdir()
    weight_map = {}
    for number in (1, 2):
        shard = f"model-{number:05d}-of-00002.safetensors"
        write_safetensors(folder / shard, [(f"layer{number}.weight", "BF16", [1024, 1024])], fill="sparse")
        weight_map[f"layer{number}.weight"] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    hub.add_repo("org/sharded", folder)

    checkpoint = resolve(f"{hub.endpoint}/org/sharded/resolve/main/")

    assert checkpoint.tensors == resolve(str(folder)).tensors
    assert [f.path for f in checkpoint.files] == sorted(weight_map.values())


def test_a_missing_url_is_one_line(hub):
    hub.add_repo("org/drafter", PUBLISHED)
    url = f"{hub.endpoint}/org/drafter/resolve/main/none/model.safetensors"  # a 404, as a web server says it
    with pytest.raises(SourceError) as error:
        resolve(url)
    assert error.value.line() == f"{url}: not found (HTTP 404) (check the URL)"


@pytest.fixture
def weights_in_a_subfolder(tmp_path):
    """A web server's tree: /models/x/config.json, and the weights in /models/x/sub/ (a run's checkpoint-100/)."""
    folder = tmp_path / "models" / "x"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(PUBLISHED / "config.json", folder)
    shutil.copy(PUBLISHED / "model.safetensors", folder / "sub")
    return tmp_path


def test_a_folder_url_names_the_subfolder_its_server_lists_weights_in(weights_in_a_subfolder):
    with WebServer(weights_in_a_subfolder, autoindex=True) as web:
        url = f"{web.endpoint}/models/x"
        with pytest.raises(SourceError) as error:
            resolve(url)
        assert error.value.line() == (
            f"{url}: no safetensors weights (model.safetensors or *.safetensors.index.json)"
            f" (its weights are in a subfolder: give {url}/sub)"
        )
        assert resolve(f"{url}/sub").tensors == resolve(str(PUBLISHED / "model.safetensors")).tensors


def test_a_folder_url_holding_only_subfolders_names_those_with_weights(tmp_path):
    """A run's folder with no file of its own at the top, only its checkpoints: none of the names asked for is
    there, and its page names them (it is no missing folder)."""
    for step in ("checkpoint-100", "checkpoint-200"):
        shutil.copytree(PUBLISHED, tmp_path / "run" / step)
    with WebServer(tmp_path, autoindex=True) as web:
        url = f"{web.endpoint}/run"
        with pytest.raises(SourceError) as error:
            resolve(url)
        with pytest.raises(SourceError) as missing:
            resolve(f"{web.endpoint}/no-such-run")
    assert error.value.line() == (
        f"{url}: no safetensors weights (model.safetensors or *.safetensors.index.json)"
        f" (its weights are in subfolders: give one of {url}/checkpoint-100, {url}/checkpoint-200)"
    )
    assert missing.value.line() == f"{web.endpoint}/no-such-run: not found (HTTP 404) (check the URL)"


def test_a_folder_page_whose_links_are_absolute_paths_or_whole_urls_names_the_subfolder_too(weights_in_a_subfolder):
    folder = weights_in_a_subfolder / "models" / "x"
    with WebServer(weights_in_a_subfolder, autoindex=True) as web:
        url = f"{web.endpoint}/models/x"
        (folder / "index.html").write_text('<a href="/models/">up</a> <a href="/models/x/sub/">sub/</a>')
        (folder / "sub" / "index.html").write_text(f'<a href="{url}/sub/model.safetensors">model.safetensors</a>')
        with pytest.raises(SourceError) as error:
            resolve(url)
    assert error.value.line().endswith(f" (its weights are in a subfolder: give {url}/sub)")


def test_a_folder_url_without_folder_pages_says_what_it_found_and_what_to_give(weights_in_a_subfolder):
    with WebServer(weights_in_a_subfolder, autoindex=False) as web:
        url = f"{web.endpoint}/models/x"
        with pytest.raises(SourceError) as error:
            resolve(url)
    assert error.value.line() == (
        f"{url}: no safetensors weights (model.safetensors or *.safetensors.index.json) (found config.json, none of"
        " model.safetensors, model.safetensors.index.json, pytorch_model.bin.index.json, pytorch_model.bin;"
        " a web server lists no folder: give the URL of the weights' file or index,"
        f" e.g. {url}/SUBFOLDER/model.safetensors)"
    )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("config.json", "is not named like a weight file"),
        ("model-q4_k_m.gguf", "is a GGUF (llama.cpp) file"),
    ],
)
def test_a_url_of_a_file_that_is_no_weight_file_is_named_as_a_local_one_would_be(tmp_path, name, said):
    """A URL pasted from a server's page for its config.json said "no such bucket, object or prefix" of a file the
    server serves: it was taken as a folder and asked for model.safetensors inside it."""
    shutil.copy(PUBLISHED / "config.json", tmp_path)
    (tmp_path / "model-q4_k_m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    for autoindex in (True, False):
        with WebServer(tmp_path, autoindex=autoindex) as web:
            with pytest.raises(SourceError) as error:
                resolve(f"{web.endpoint}/{name}")
            with pytest.raises(SourceError) as folder:  # a missing folder is the server's 404, as before
                resolve(f"{web.endpoint}/no-such-run")
        assert error.value.line().startswith(f"{web.endpoint}/{name}: {said} (ckptdiff reads safetensors files")
        assert folder.value.line() == f"{web.endpoint}/no-such-run: not found (HTTP 404) (check the URL)"


def test_a_folder_url_asks_for_each_name_by_a_head_and_a_get_after_a_404(tmp_path):
    """docs/object-stores.md: fsspec's HTTP client follows a HEAD that answers 404 with a GET."""
    shutil.copy(PUBLISHED / "config.json", tmp_path)
    shutil.copy(PUBLISHED / "model.safetensors", tmp_path)
    with WebServer(tmp_path, autoindex=True) as web:
        checkpoint = resolve(f"{web.endpoint}/")

    assert checkpoint.tensors
    absent = ("model.safetensors.index.json", "pytorch_model.bin.index.json", "pytorch_model.bin")
    asked = {("HEAD", "/model.safetensors"): 1, ("HEAD", "/config.json"): 1}
    asked |= {(method, f"/{name}"): 1 for name in absent for method in ("HEAD", "GET")}
    read = {("GET", "/model.safetensors"): 1, ("GET", "/config.json"): 1}  # the header and config.json
    assert web.requests == asked | read
    assert sum(asked.values()) == 8


def test_a_folder_url_asks_for_every_name_at_once(tmp_path):
    """The five asks are in flight together (one round trip, not five): all five HEADs wait at the server at once."""
    shutil.copy(PUBLISHED / "config.json", tmp_path)
    shutil.copy(PUBLISHED / "model.safetensors", tmp_path)
    with WebServer(tmp_path) as web, ThreadPoolExecutor(1) as caller:
        gate = RequestGate(lambda request: request[0] == "HEAD")
        web.hooks.append(gate)
        reading = caller.submit(resolve, f"{web.endpoint}/")
        try:
            gate.wait_held(5)
        finally:
            gate.open()
        assert reading.result().tensors


@pytest.mark.parametrize(
    ("status", "defect"),
    [
        (403, "access denied (HTTP 403) (the server refused the request; a signed URL may have expired)"),
        (401, "access denied (HTTP 401) (the server refused the request; a signed URL may have expired)"),
        (500, "the server answered HTTP 500 (retry later)"),
        (503, "the server answered HTTP 503 (retry later)"),
    ],
)
@pytest.mark.parametrize("spec", ["/m/", "/m/model.safetensors", "/m/config.json"])
def test_a_config_json_the_server_does_not_give_is_named_with_its_answer(tmp_path, status, defect, spec):
    """A folder's config.json that the server refuses or fails on is not an absent one (whose comparison would
    quietly leave the config out): the line names its URL and the answer, whether the spec is the folder, the
    weights beside it or config.json itself."""
    shutil.copytree(PUBLISHED, tmp_path / "m")
    with WebServer(tmp_path) as web:
        web.answer["/m/config.json"] = status
        with pytest.raises(SourceError) as error:
            resolve(web.endpoint + spec)
    assert error.value.line() == f"{web.endpoint}/m/config.json: {defect}"


def test_a_config_json_url_is_named_for_what_it_is(tmp_path):
    shutil.copytree(PUBLISHED, tmp_path / "m")
    with WebServer(tmp_path) as web:
        with pytest.raises(SourceError) as there:
            resolve(f"{web.endpoint}/m/config.json")
        with pytest.raises(SourceError) as missing:
            resolve(f"{web.endpoint}/elsewhere/config.json")
        web.answer["/m/config.json"] = 404
        assert resolve(f"{web.endpoint}/m/").config is None  # a 404 is a folder without config.json
    assert there.value.line().startswith(f"{web.endpoint}/m/config.json: is not named like a weight file (")
    assert missing.value.line() == f"{web.endpoint}/elsewhere/config.json: not found (HTTP 404) (check the URL)"


def test_a_weight_name_refused_beside_the_weights_is_absent_but_alone_is_named(tmp_path):
    """S3's website endpoints answer 403 for a key they do not have: a refused index beside model.safetensors is
    no index; a refused model.safetensors with no other weights is the error."""
    shutil.copytree(PUBLISHED, tmp_path / "m")
    with WebServer(tmp_path) as web:
        web.answer["/m/model.safetensors.index.json"] = 403
        assert resolve(f"{web.endpoint}/m/").tensors == resolve(str(PUBLISHED)).tensors
        web.answer["/m/model.safetensors"] = 403
        with pytest.raises(SourceError) as error:
            resolve(f"{web.endpoint}/m/")
    assert error.value.line().startswith(f"{web.endpoint}/m/model.safetensors: access denied (HTTP 403)")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x/model.safetensors", "http://127.0.0.1:9/x/"])
def test_a_server_that_cannot_be_reached_is_not_a_missing_object(url):
    """fsspec's http client raises FileNotFoundError for a refused connection; the line says what happened."""
    with pytest.raises(SourceError) as error:
        resolve(url)
    assert error.value.line() == f"{url}: cannot reach the store (check the network and the endpoint URL)"


# --- gs:// and az:// through fsspec's memory filesystem standing in for gcsfs / adlfs --------------------------


@pytest.fixture(params=["gs", "az"])
def memory_store(request, monkeypatch):
    """fsspec's in-memory filesystem registered under a cloud scheme: the same fsspec calls gcsfs/adlfs answer."""
    from fsspec.implementations.memory import MemoryFileSystem
    from fsspec.registry import _registry

    class CloudInMemory(MemoryFileSystem):
        protocol = (request.param,)
        store: dict = {}  # noqa: RUF012 (fsspec's own convention: the class holds the files)
        pseudo_dirs = [""]  # noqa: RUF012

        @classmethod
        def _strip_protocol(cls, path: str) -> str:
            return MemoryFileSystem._strip_protocol(path.removeprefix(f"{request.param}://"))

    monkeypatch.setitem(_registry, request.param, CloudInMemory)  # undone after the test
    return request.param, CloudInMemory()


def test_a_cloud_bucket_reads_like_the_same_folder_on_disk(memory_store):
    scheme, fs = memory_store
    for file in PUBLISHED.iterdir():
        fs.pipe_file(f"bucket/drafter/{file.name}", file.read_bytes())

    checkpoint = resolve(f"{scheme}://bucket/drafter")

    local = resolve(str(PUBLISHED))
    assert checkpoint.tensors == local.tensors and checkpoint.config == local.config
    assert checkpoint.location == f"{scheme}://bucket/drafter"
    with pytest.raises(SourceError, match="no such bucket, object or prefix"):
        resolve(f"{scheme}://bucket/elsewhere")
