"""The Hub emulator answers the unmodified huggingface_hub client the way the Hub does (tests/hub_emulator.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from fixtures.generate import write_safetensors


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    write_safetensors(folder / "model.safetensors", [("w", "F32", [1000])], fill="random")
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "sub").mkdir()
    (folder / "sub" / "notes.txt").write_text("hello\n")
    return folder


def test_api_lists_files_with_sizes_and_lfs_sha256(hub_client, repo):
    commit = hub_client.add_repo("org/tiny", repo)

    info = HfApi().model_info("org/tiny", files_metadata=True)

    assert info.sha == commit
    siblings = {s.rfilename: s for s in info.siblings}
    assert set(siblings) == {"config.json", "model.safetensors", "sub/notes.txt"}
    weights = (repo / "model.safetensors").read_bytes()
    assert siblings["model.safetensors"].size == len(weights)
    assert siblings["model.safetensors"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
    assert siblings["config.json"].lfs is None
    assert hub_client.requests == {"api-info": 1}


def test_resolve_head_and_download_through_the_cache(hub_client, repo):
    commit = hub_client.add_repo("org/tiny", repo)

    path = hf_hub_download("org/tiny", "config.json")
    again = hf_hub_download("org/tiny", "config.json", revision=commit)

    assert Path(path).read_text() == '{"hidden_size": 8}\n'
    assert again == path and f"/snapshots/{commit}/" in path
    assert hub_client.requests["resolve"] == 2  # HEAD + GET; the pinned second call is served by the cache


def test_ranges_are_clamped_and_past_the_end_is_416(hub_client, repo):
    hub_client.add_repo("org/tiny", repo)
    url = f"{hub_client.endpoint}/org/tiny/resolve/main/model.safetensors"
    size = (repo / "model.safetensors").stat().st_size

    head = httpx2.get(url, headers={"Range": "bytes=0-7"})
    tail = httpx2.get(url, headers={"Range": f"bytes={size - 4}-{size + 100}"})
    past = httpx2.get(url, headers={"Range": f"bytes={size}-{size + 10}"})

    assert head.status_code == 206 and head.content == (repo / "model.safetensors").read_bytes()[:8]
    assert head.headers["Content-Range"] == f"bytes 0-7/{size}"
    assert tail.status_code == 206 and tail.headers["Content-Range"] == f"bytes {size - 4}-{size - 1}/{size}"
    assert past.status_code == 416 and past.headers["Content-Range"] == f"bytes */{size}"
    assert head.headers["X-Repo-Commit"] and hub_client.bytes_sent["resolve"] == 8 + 4


def test_lfs_files_redirect_to_a_second_origin(hub_client, repo):
    hub_client.lfs_redirect = True
    hub_client.add_repo("org/tiny", repo)
    url = f"{hub_client.endpoint}/org/tiny/resolve/main/model.safetensors"

    moved = httpx2.head(url)
    followed = httpx2.get(url, headers={"Range": "bytes=0-7"}, follow_redirects=True)

    assert moved.status_code == 302 and moved.headers["Location"].startswith(hub_client.cdn_endpoint)
    assert moved.headers["X-Linked-Size"] == str((repo / "model.safetensors").stat().st_size)
    assert followed.status_code == 206
    assert hub_client.requests == {"resolve": 2, "cdn": 1}


def test_error_codes_map_to_the_clients_exceptions(hub_client, repo):
    hub_client.add_repo("org/tiny", repo)
    hub_client.add_repo("org/gated", repo, gated=True)

    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/missing", "config.json")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "config.json", revision="no-such-branch")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download("org/tiny", "nope.json")
    with pytest.raises(GatedRepoError):
        hf_hub_download("org/gated", "config.json")
    assert HfApi().model_info("org/gated").gated == "manual"  # metadata stays public, files do not


def test_gated_repo_needs_a_granted_token(hub_client, repo, monkeypatch):
    hub_client.add_repo("org/gated", repo, gated=True)
    hub_client.valid_tokens |= {"hf_granted", "hf_other"}
    hub_client.repos["org/gated"].access = {"hf_granted"}

    with pytest.raises(GatedRepoError) as denied:
        hf_hub_download("org/gated", "config.json", token="hf_other")
    assert denied.value.response.status_code == 403
    assert Path(hf_hub_download("org/gated", "config.json", token="hf_granted")).is_file()
    assert not any("hf_" in str(entry) for entry in hub_client.log)  # the log never keeps a token


def test_branches_move_and_tags_pin(hub_client, repo, tmp_path):
    first = hub_client.add_repo("org/tiny", repo)
    hub_client.tag("org/tiny", "v1", first)
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "config.json").write_text('{"hidden_size": 16}\n')
    second = hub_client.push("org/tiny", changed)

    api = HfApi()
    assert api.model_info("org/tiny").sha == second
    assert api.model_info("org/tiny", revision="v1").sha == first
    assert json.loads(Path(hf_hub_download("org/tiny", "config.json", revision="v1")).read_text()) == {"hidden_size": 8}


def test_tree_is_paginated_with_link_headers(hub_client, repo):
    hub_client.tree_page_size = 2
    hub_client.add_repo("org/tiny", repo)

    entries = list(HfApi().list_repo_tree("org/tiny", recursive=True))

    assert [e.path for e in entries] == ["config.json", "model.safetensors", "sub", "sub/notes.txt"]
    assert hub_client.requests["api-tree"] == 2


def test_forced_status_then_recovery(hub_client, repo):
    hub_client.add_repo("org/tiny", repo)
    hub_client.fail_next(429, count=1, retry_after=0)
    url = f"{hub_client.endpoint}/org/tiny/resolve/main/config.json"

    assert [httpx2.get(url).status_code for _ in range(2)] == [429, 200]
    assert hub_client.log[0].status == 429


def test_ignore_range_counts_only_bytes_that_left(hub_client, tmp_path):
    folder = tmp_path / "big"
    write_safetensors(folder / "model.safetensors", [("w", "F32", [4 * 1024 * 1024])], fill="sparse")  # 16 MiB
    hub_client.add_repo("org/big", folder)
    hub_client.ignore_range = True
    url = f"{hub_client.endpoint}/org/big/resolve/main/model.safetensors"

    with httpx2.stream("GET", url, headers={"Range": "bytes=0-99"}) as response:
        assert response.status_code == 200
        next(response.iter_raw())

    hub_client.stop()  # waits for the handler to notice the closed connection
    assert 0 < hub_client.bytes_sent["resolve"] < 16 * 1024 * 1024


def test_hooks_can_answer_any_request(hub_client, repo):
    hub_client.add_repo("org/tiny", repo)

    def teapot(request):
        if request.route != "resolve":
            return False
        request.respond(418, b"short and stout")
        return True

    hub_client.hooks.append(teapot)
    response = httpx2.get(f"{hub_client.endpoint}/org/tiny/resolve/main/config.json")

    assert (response.status_code, response.content) == (418, b"short and stout")
    assert hub_client.bytes_sent["resolve"] == len(b"short and stout")


def test_sparse_files_are_served_without_reading_them_whole(hub_client, tmp_path):
    folder = tmp_path / "huge"
    write_safetensors(folder / "model.safetensors", [("w", "BF16", [8 * 1024**3])])  # 16 GiB, sparse
    hub_client.add_repo("org/huge", folder)

    info = HfApi().model_info("org/huge", files_metadata=True)
    url = f"{hub_client.endpoint}/org/huge/resolve/main/model.safetensors"
    end = httpx2.get(url, headers={"Range": "bytes=-4"})

    (sibling,) = info.siblings
    assert sibling.size == (folder / "model.safetensors").stat().st_size > 16 * 1024**3
    assert sibling.lfs.sha256 == hashlib.sha256(f"hub-emulator:model.safetensors:{sibling.size}".encode()).hexdigest()
    assert end.status_code == 206 and end.content == b"\0\0\0\0"


def test_the_loopback_servers_stop_polling_at_one_interval_defined_once() -> None:
    """The Hub emulator and the store servers' web server start their loops through tests/loopback.py, whose
    STOP_POLL is the one interval: no server module keeps a copy of its own to drift from it."""
    import ast

    tests = Path(__file__).parent

    def assigned(node: ast.AST) -> list[ast.expr]:
        if isinstance(node, ast.AnnAssign):
            return [node.target]
        return node.targets if isinstance(node, ast.Assign) else []

    defining = [
        path.name
        for path in sorted(tests.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if any(getattr(target, "id", None) == "STOP_POLL" for target in assigned(node))
    ]
    assert defining == ["loopback.py"]
    for server in ("hub_emulator.py", "store_servers.py"):
        text = (tests / server).read_text(encoding="utf-8")
        assert "from loopback import serve_in_background" in text and "serve_forever" not in text
