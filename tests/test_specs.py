"""What a spec means: hf:// is the Hub, a URL scheme is its store, an existing path is a path, and a mistyped
relative path that looks like org/name says that no such path exists as well as what the Hub answered."""

from __future__ import annotations

import pytest

from ckptdiff.errors import SourceError
from ckptdiff.sources import HubSpec, LocalSpec, StoreSpec, parse_spec, resolve
from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("hf://org/name", HubSpec("org/name", None, None, explicit=True)),
        ("hf://org/name@v1.0", HubSpec("org/name", "v1.0", None, explicit=True)),
        ("hf://org/name@refs%2Fpr%2F1/eagle3", HubSpec("org/name", "refs/pr/1", "eagle3", explicit=True)),
        ("hf://org/name/sub/folder/", HubSpec("org/name", None, "sub/folder", explicit=True)),
        ("s3://bucket/runs/ckpt-100/", StoreSpec("s3://bucket/runs/ckpt-100/", "s3")),
        ("gs://bucket/model.safetensors", StoreSpec("gs://bucket/model.safetensors", "gs")),
        ("az://container/ckpt", StoreSpec("az://container/ckpt", "az")),
        ("abfs://container/ckpt", StoreSpec("abfs://container/ckpt", "abfs")),
        ("s3://bucket/runs/exp#3/", StoreSpec("s3://bucket/runs/exp#3/", "s3")),  # a key may hold a '#'
        ("az://container/exp#3", StoreSpec("az://container/exp#3", "az")),
        ("https://host/m/model.safetensors", StoreSpec("https://host/m/model.safetensors", "https")),
        ("org/name", HubSpec("org/name", None)),
    ],
)
def test_a_url_scheme_always_means_its_store(spec, expected):
    assert parse_spec(spec) == expected


def test_a_url_never_becomes_a_path_even_if_a_folder_of_that_name_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hf:" / "org" / "name").mkdir(parents=True)
    assert isinstance(parse_spec("hf://org/name"), HubSpec)
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert isinstance(parse_spec("org/name"), LocalSpec)  # an existing path wins over a bare repo id


@pytest.mark.parametrize("spec", ["hf://org", "hf://org/name@", "hf://org/name/../../etc", "s3://", "s3:///"])
def test_a_malformed_url_is_refused_before_any_request(spec):
    with pytest.raises(SourceError):
        parse_spec(spec)


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        ("file:///data/drafter", "file:///data/drafter: ckptdiff does not read file:// URLs (give the path itself)"),
        (
            "ftp://user:pw@host/drafter",
            "ftp://host/drafter: ckptdiff does not read ftp:// URLs (give a path, a Hub repo id, or an hf://, s3://, "
            "gs://, az:// or https:// URL)",
        ),
    ],
)
def test_a_url_of_a_scheme_ckptdiff_does_not_read_says_so(spec, line):
    """Not "no such file or folder, and not a Hub repo id": the user typed a URL, and its password stays out."""
    with pytest.raises(SourceError) as error:
        parse_spec(spec)
    assert error.value.line() == line


@pytest.mark.parametrize("spec", ["~\0", "./a\0b", "org/na\0me"])
def test_a_nul_character_is_one_clear_error(spec):
    with pytest.raises(SourceError, match="holds a NUL character"):
        parse_spec(spec)


def test_a_signed_url_is_refused_and_its_signature_never_shown():
    with pytest.raises(SourceError) as error:
        parse_spec("https://host/m/model.safetensors?X-Amz-Signature=0123456789abcdef&X-Amz-Expires=60")
    line = error.value.line()
    assert line.startswith("https://host/m/model.safetensors: a URL with a query string (a signed link)")
    assert "0123456789abcdef" not in line


def test_hf_url_reads_like_the_plain_hub_spec(hub_client):
    commit = hub_client.add_repo("org/drafter", PUBLISHED)

    plain = resolve("org/drafter")
    spelled = resolve(f"hf://org/drafter@{commit}")

    assert (spelled.kind, spelled.location, spelled.revision) == ("hub", "org/drafter", commit)
    assert spelled.tensors == plain.tensors and spelled.config == plain.config


def test_hf_url_with_a_subfolder_reads_the_checkpoint_inside_it(hub_client, tmp_path):
    repo = tmp_path / "repo"
    (repo / "eagle3").mkdir(parents=True)
    for file in PUBLISHED.iterdir():
        (repo / "eagle3" / file.name).write_bytes(file.read_bytes())
    (repo / "README.md").write_text("a repo with its drafter in a subfolder\n")
    hub_client.add_repo("org/multi", repo)

    folder = resolve("hf://org/multi/eagle3")
    file = resolve("hf://org/multi/eagle3/model.safetensors")

    local = resolve(str(PUBLISHED))
    assert folder.tensors == file.tensors == local.tensors and folder.config == local.config
    with pytest.raises(SourceError, match=r"org/multi@\w+:nowhere: no such folder in the repo"):
        resolve("hf://org/multi/nowhere")


def test_a_mistyped_relative_path_says_no_local_path_exists(hub, run_cli, tmp_path):
    """`runs/ckpt-100` (meant: ./runs/ckpt-100, run from the wrong folder) is not sent to the Hub unexplained."""
    result = run_cli("runs/ckpt-100", OURS, env=hub.client_env(tmp_path / "hf-home"), cwd=tmp_path)

    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ckptdiff: runs/ckpt-100: repo not found on {hub.endpoint}")
    assert "and there is no local file or folder of that name" in line


def test_a_mistyped_relative_path_says_no_local_path_exists_when_the_hub_is_unreachable(hub, run_cli, tmp_path):
    env = {**hub.client_env(tmp_path / "hf-home"), "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens on port 9
    result = run_cli("runs/ckpt-100", OURS, env=env, cwd=tmp_path)

    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ckptdiff: runs/ckpt-100: cannot reach http://127.0.0.1:9")
    assert "and there is no local file or folder of that name" in line


def test_hf_url_of_a_missing_repo_says_only_what_the_hub_answered(hub, run_cli, tmp_path):
    result = run_cli("hf://runs/ckpt-100", OURS, env=hub.client_env(tmp_path / "hf-home"), cwd=tmp_path)

    assert result.returncode == 2
    assert "repo not found" in result.stderr and "local file" not in result.stderr


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            "https://host/m/#files",
            "https://host/m/: has a fragment (a '#' and what follows), which is never sent to a web server: it names "
            "no file (leave it out; a '#' in a file's name is written %23)",
        ),
        (
            "gs://bucket/m/model.safetensors#1712345",
            "gs://bucket/m/model.safetensors: names an object generation after its '#', which ckptdiff does not read "
            "(name the object without '#…': its live version is read)",
        ),
    ],
)
def test_a_url_with_a_fragment_says_what_the_fragment_is(spec, line, run_cli):
    """Not "a URL with a query string", which it has none of: a web server never sees a fragment, and gcsfs reads
    one as the object's generation. An S3 or Azure key may hold a '#' (above)."""
    with pytest.raises(SourceError) as error:
        parse_spec(spec)
    assert error.value.line() == line
    result = run_cli(spec, OURS)
    assert result.returncode == 2 and result.stderr == f"ckptdiff: {line}\n"
