"""Specs people paste: a Hub page's URL from the browser is the Hub (``/org/name``, ``/tree/REV[/SUB]``,
``/blob/REV/file``), a URL of any other host is a plain web server, and a revision git could never name is
refused before any request."""

from __future__ import annotations

import pytest

from ckptdiff.errors import SourceError
from ckptdiff.sources import HubSpec, StoreSpec, parse_spec, resolve
from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://huggingface.co/org/name", HubSpec("org/name", None, None, explicit=True)),
        ("https://huggingface.co/org/name/", HubSpec("org/name", None, None, explicit=True)),
        ("https://hf.co/org/name", HubSpec("org/name", None, None, explicit=True)),
        ("https://huggingface.co/org/name/tree/main", HubSpec("org/name", "main", None, explicit=True)),
        ("https://huggingface.co/org/name/tree/v1.0/eagle3", HubSpec("org/name", "v1.0", "eagle3", explicit=True)),
        (
            "https://huggingface.co/org/name/tree/refs%2Fpr%2F1/a/b",
            HubSpec("org/name", "refs/pr/1", "a/b", explicit=True),
        ),
        (
            "https://huggingface.co/org/name/blob/main/eagle3/model.safetensors",
            HubSpec("org/name", "main", "eagle3/model.safetensors", explicit=True),
        ),
        ("https://huggingface.co/org/name/blob/main/config.json", HubSpec("org/name", "main", None, explicit=True)),
        (
            "https://huggingface.co/org/name/resolve/" + "a" * 40 + "/model.safetensors",
            HubSpec("org/name", "a" * 40, "model.safetensors", explicit=True),
        ),
        (  # a query string or fragment pasted along is dropped
            "https://huggingface.co/org/name/tree/main?not-for-all-audiences=true#files",
            HubSpec("org/name", "main", None, explicit=True),
        ),
        (
            "https://files.example.com/org/name/tree/main",
            StoreSpec("https://files.example.com/org/name/tree/main", "https"),
        ),
    ],
)
def test_a_pasted_hub_url_is_the_hub_and_any_other_host_a_web_server(url, expected):
    assert parse_spec(url) == expected


@pytest.mark.parametrize(
    ("url", "defect"),
    [
        ("https://huggingface.co/datasets/org/name", "a Hub dataset, not a model repo"),
        ("https://huggingface.co/spaces/org/app", "a Hub space, not a model repo"),
        ("https://huggingface.co/org", "not a Hub model URL"),
        ("https://huggingface.co/org/name/commits/main", "not a Hub model URL"),
        ("https://huggingface.co/org/name/tree/main/../../x", "not a Hub model URL"),
    ],
)
def test_a_hub_url_that_names_no_model_is_refused_in_one_line(url, defect):
    with pytest.raises(SourceError, match=defect):
        parse_spec(url)


@pytest.mark.parametrize(
    "spec", ["org/name@..", "org/name@a..b", "org/name@main~1", "org/name@a b", "hf://org/name@..", "org/name@x.lock"]
)
def test_a_revision_git_could_not_name_is_refused(spec):
    with pytest.raises(SourceError, match="is not a valid revision"):
        parse_spec(spec)


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/1", "release-2024_01", "a" * 40])
def test_real_revisions_are_taken(revision):
    assert parse_spec(f"org/name@{revision}") == HubSpec("org/name", revision)


# --- through the emulator: HF_ENDPOINT's host is the Hub's --------------------------------------------------------


def test_a_pasted_tree_url_reads_like_the_repo_id(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)

    pasted = resolve(f"{hub_client.endpoint}/org/drafter/tree/{commit}")
    plain = resolve("org/drafter")

    assert (pasted.kind, pasted.location, pasted.revision) == ("hub", "org/drafter", commit)
    assert pasted.tensors == plain.tensors and pasted.config == plain.config


def test_pasted_folder_and_file_urls_end_to_end(hub, run_cli, tmp_path):
    repo = tmp_path / "repo"
    (repo / "eagle3").mkdir(parents=True)
    for file in PUBLISHED.iterdir():
        (repo / "eagle3" / file.name).write_bytes(file.read_bytes())
    hub.add_repo("org/multi", repo)
    env = hub.client_env(tmp_path / "hf")

    for url in (
        f"{hub.endpoint}/org/multi/tree/main/eagle3",
        f"{hub.endpoint}/org/multi/blob/main/eagle3/model.safetensors",
        f"{hub.endpoint}/org/multi/blob/main/eagle3/config.json",
    ):
        result = run_cli(url, str(PUBLISHED), env=env)
        assert result.returncode == 0, (url, result.stderr)
        assert f"A: {url.partition('://')[0]}" in result.stdout, result.stdout

    missing = run_cli(f"{hub.endpoint}/org/none/tree/main", str(PUBLISHED), env=env)
    assert missing.returncode == 2 and "repo not found" in missing.stderr
    assert "aiohttp" not in missing.stderr and "no such bucket" not in missing.stderr
