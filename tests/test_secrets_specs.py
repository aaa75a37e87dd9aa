"""Credentials in every place a spec or a setting can carry them never appear in anything ckptdiff prints or writes,
and a mistake in a spec is one line and exit 2, never an "internal error".

The specs are generated: every scheme (also upper-case), every userinfo form (``user:secret@``, ``:secret@``,
``secret@``), in A, B and --base, and the endpoints read from the environment (``AWS_ENDPOINT_URL`` with
``user:secret@`` or a security token). Each run's stdout, stderr, report file (every format) and step summary are
scanned for the secret, with and without --debug.
"""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptdiff.errors import CkptdiffError, scrub_secrets, url_credentials
from ckptdiff.sources import open_source, parse_spec
from fixtures.generate import HERE as FIXTURES

PUBLISHED = str(FIXTURES / "kimi-k2-eagle3-published")
SECRET = "Sekr1tCanary0042zz"
KEY_ID = "AKIACANARYKEYID4242"
FORMATS = (("table", "r.txt"), ("markdown", "r.md"), ("json", "r.json"), ("junit", "r.xml"))


def closed_port() -> int:
    """A loopback port nothing listens on: a connection is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def userinfo_forms() -> list[str]:
    # the last: a secret pasted unencoded holding a '/' (as AWS secret keys and Azure account keys often do)
    return [
        f"{KEY_ID}:{SECRET}@",
        f"user:{SECRET}@",
        f":{SECRET}@",
        f"{SECRET}@",
        f"{KEY_ID}:{SECRET[:9]}/{SECRET[9:]}@",
    ]


def generated_specs(port: int) -> list[str]:
    """Every store scheme, in lower and upper case, with every userinfo form."""
    places = {
        "s3": "bucket/run",
        "gs": "bucket/run",
        "az": "container/run",
        "abfs": "container/run",
        "http": f"127.0.0.1:{port}/m/model.safetensors",
        "https": f"127.0.0.1:{port}/m/",
    }
    return [
        f"{spelled}://{userinfo}{place}"
        for (scheme, place), userinfo in itertools.product(places.items(), userinfo_forms())
        for spelled in (scheme, scheme.upper())
    ]


def assert_never_shown(texts: list[str]) -> None:
    for text in texts:
        for piece in (SECRET, SECRET[:9], SECRET[-9:], KEY_ID):
            assert piece not in text, text


def all_outputs(run_cli, tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    """stdout, stderr, the report file in every format and the step summary of a run that compares."""
    summary = tmp_path / "summary.md"
    texts = []
    for fmt, name in FORMATS:
        out = tmp_path / name
        result = run_cli(*args, "--format", fmt, "-o", str(out), env={**env, "GITHUB_STEP_SUMMARY": str(summary)})
        assert result.returncode in (0, 1), result.stderr
        texts += [result.stdout, result.stderr, out.read_text()]
    return texts + [summary.read_text()]


def refusals(run_cli, args: list[str], env: dict[str, str]) -> list[str]:
    """stdout and stderr of a run that cannot compare, with and without --debug: one line and exit 2 (a traceback
    only with --debug), never an internal error."""
    texts = []
    for debug in ([], ["--debug"]):
        result = run_cli(*args, *debug, env=env)
        assert result.returncode == 2 and "internal error" not in result.stderr, result.stderr
        assert debug or len(result.stderr.splitlines()) == 1, result.stderr
        texts += [result.stdout, result.stderr]
    return texts


@pytest.mark.parametrize("side", ["a", "base"])
def test_credentials_in_any_spec_are_never_printed(run_cli, side):
    port = closed_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    for spec in generated_specs(port):
        args = [spec, PUBLISHED] if side == "a" else [PUBLISHED, PUBLISHED, "--base", spec]
        assert_never_shown(refusals(run_cli, args, env))


def test_credentials_of_a_web_url_that_is_read_are_in_no_output(hub, run_cli, tmp_path):
    """An upper-case scheme and a password: the comparison runs, and no output of any format holds the password."""
    pytest.importorskip("aiohttp")
    hub.add_repo("org/drafter", Path(PUBLISHED))
    url = f"HTTP://user:{SECRET}@{hub.endpoint.partition('://')[2]}/org/drafter/resolve/main/model.safetensors"
    assert_never_shown(all_outputs(run_cli, tmp_path, [url, PUBLISHED], {"HF_HOME": str(tmp_path / "hf")}))


def test_an_object_store_url_carrying_credentials_is_refused_in_one_line(run_cli):
    result = run_cli(f"s3://{KEY_ID}:{SECRET}@bucket/run", PUBLISHED)
    assert result.returncode == 2
    assert result.stderr == (
        "ckptdiff: s3://bucket/run: credentials in the URL (user:secret@) are not read "
        "(give them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)\n"
    )


def test_a_web_password_holding_a_slash_is_refused_without_it(run_cli):
    result = run_cli(f"https://user:{SECRET[:9]}/{SECRET[9:]}@files.example/m/model.safetensors", PUBLISHED)
    assert result.returncode == 2
    assert result.stderr == (
        "ckptdiff: https://files.example/m/model.safetensors: the password in the URL (user:password@) holds a '/' "
        "(write each '/' in it as %2F)\n"
    )


@pytest.mark.parametrize(
    "endpoint",
    [
        f"http://user:{SECRET}@127.0.0.1:{{port}}",
        f"http://{SECRET}@127.0.0.1:{{port}}",
        f"http://{KEY_ID}:{SECRET}@127.0.0.1:{{port}}/",
        f"http://127.0.0.1:{{port}}/?X-Amz-Security-Token={SECRET}",
        f"http://127.0.0.1:{{port}}/#{SECRET}",
        "127.0.0.1:{port}",
        "ftp://127.0.0.1:{port}",
        "http://127.0.0.1:99999",
    ],
    ids=["user-password", "token", "key-secret", "security-token", "fragment", "no-scheme", "ftp", "bad-port"],
)
@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_an_unusable_aws_endpoint_url_is_one_line_without_its_secrets(run_cli, tmp_path, endpoint, variable):
    pytest.importorskip("s3fs")
    env = {variable: endpoint.format(port=closed_port()), "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    result = run_cli("s3://bucket/run", PUBLISHED, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"ckptdiff: {variable}: ") and len(result.stderr.splitlines()) == 1
    assert_never_shown(refusals(run_cli, ["s3://bucket/run", PUBLISHED], env))


@pytest.mark.parametrize("spec", ["HTTP://127.0.0.1:{port}/m/model.safetensors", "S3://bucket/run", "Gs://bucket/x"])
def test_an_upper_case_scheme_names_its_store(run_cli, spec):
    port = closed_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    env["AWS_MAX_ATTEMPTS"] = "1"  # botocore's retries of a refused connection prove nothing here, and take seconds
    result = run_cli(spec.format(port=port), PUBLISHED, env=env)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "Protocol not known" not in result.stderr and "internal error" not in result.stderr
    # the store's own answer (nothing listens there; gcsfs is not installed), naming the spec as it was typed
    assert result.stderr.startswith(f"ckptdiff: {spec.format(port=port)}: ")
    assert "cannot reach" in result.stderr or "needs gcsfs" in result.stderr


def test_the_internal_error_line_is_scrubbed_too(monkeypatch):
    """Whatever a library quotes of a spec's credentials, without the URL around them, the scrubber knows them."""
    parse_spec(f"https://{KEY_ID}:{SECRET}@files.example/m/model.safetensors")
    text = f'ValueError: invalid bucket name "{KEY_ID}:{SECRET}@files.example" (password {SECRET})'
    assert_never_shown([scrub_secrets(text)])


#: Pieces a mistyped or hostile spec is made of.
PIECES = st.sampled_from(
    [
        "s3", "S3", "gs", "GCS", "az", "abfss", "http", "HTTPS", "hf", "HF", "ftp", "tcp", "://", ":/", ":", "/",
        "//", "@", "?", "#", "..", ".", "org", "name", "bucket", "127.0.0.1", ":0", ":99999", "[::1", "]",
        f"{SECRET}", f"user:{SECRET}@", "%2F", "%", " ", "\n", "~", "refs/pr/1", "main", "-",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=8).map("".join))
def test_a_spec_is_a_source_or_one_line_naming_it(spec):
    """Parsing and opening any spec (nothing is read yet) gives a Source or a CkptdiffError, never another
    exception, and the error's line holds no credential (the canary as a URL's user:password@ or token@; a spec
    that is the bare word is a path, shown as typed)."""
    try:
        open_source(spec)
    except CkptdiffError as err:
        line = scrub_secrets(err.line())
        assert "\n" not in line
        if any(SECRET in credential for credential in url_credentials(spec)):
            assert SECRET not in line


@pytest.mark.parametrize(
    "address",
    [
        f"tcp://user:{SECRET}@127.0.0.1:{{port}}",
        f"tcp://{SECRET}@127.0.0.1:{{port}}",
        f"TLS://{KEY_ID}:{SECRET}@127.0.0.1:{{port}}",
        f"user:{SECRET}@127.0.0.1:{{port}}",
    ],
)
def test_a_scheduler_address_with_credentials_is_refused_without_them(run_cli, tmp_path, address):
    """Finding 3: Dask has no place for a password in its address (TLS secures a cluster): one line, exit 2."""
    result = run_cli(PUBLISHED, PUBLISHED, "--values", "--scheduler", address.format(port=closed_port()))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "a Dask address cannot carry credentials (user:password@)" in result.stderr
    assert_never_shown([result.stdout, result.stderr])


@pytest.mark.parametrize(
    "address", ["tcp://127.0.0.1", "tcp://127.0.0.1:http", "tcp://[::1", "http://127.0.0.1:8786", "tcp://:8786", "x"]
)
def test_a_malformed_scheduler_address_is_one_line(run_cli, address):
    result = run_cli(PUBLISHED, PUBLISHED, "--values", "--scheduler", address)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "not a Dask scheduler address (tcp://HOST:PORT" in result.stderr


@pytest.mark.parametrize(
    ("revision", "said"),
    [
        (None, "named '../../../etc/passwd' as the commit of the default branch, which is not a commit hash"),
        ("v1", "named '../../../etc/passwd' as the commit of revision 'v1', which is not a commit hash"),
    ],
)
def test_a_commit_the_hub_names_that_is_no_hash_is_refused_in_words(hub, run_cli, tmp_path, revision, said):
    """Finding 25: a listing whose commit is a path, not a sha, is refused saying so (it was worded "did not
    say which commit None is")."""
    hub.add_repo("org/drafter", Path(PUBLISHED))
    hub.repos["org/drafter"].commits["../../../etc/passwd"] = Path(PUBLISHED)
    hub.tag("org/drafter", revision or "main", "../../../etc/passwd")
    spec = f"org/drafter@{revision}" if revision else "org/drafter"
    result = run_cli(spec, PUBLISHED, env=hub.client_env(tmp_path / "hf"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert said in result.stderr and "None" not in result.stderr
    assert not any((tmp_path / "hf").rglob("passwd"))  # nothing was cached under the path it named
