"""A credential written into a URL never appears in anything ckptdiff prints or writes.

Every URL form that can carry one (``user:password@``, ``:password@``, ``token@``, a token in the query string or
the fragment, an ``HF_ENDPOINT`` with credentials) is run through the real command with every output format, the
step summary, a finding that names the source and an error line; the canary must appear in none of them.
"""

from __future__ import annotations

import json
import shutil
from collections import OrderedDict
from pathlib import Path

import pytest

from ckptdiff.errors import scrub_secrets
from ckptdiff.sources import display_spec, parse_spec
from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
CANARY = "CanaryPw4242xyzzy"


def _outputs(run_cli, tmp_path: Path, a: str, b: str, env: dict[str, str]) -> list[str]:
    """stdout, stderr and every file of a table, markdown, JSON and JUnit run, with the step summary."""
    summary = tmp_path / "summary.md"
    texts: list[str] = []
    for fmt, name in (("table", "r.txt"), ("markdown", "r.md"), ("json", "r.json"), ("junit", "r.xml")):
        out = tmp_path / name
        result = run_cli(a, b, "--format", fmt, "-o", str(out), env={**env, "GITHUB_STEP_SUMMARY": str(summary)})
        assert result.returncode in (0, 1), result.stderr
        texts += [result.stdout, result.stderr, out.read_text()]
    texts.append(summary.read_text())
    return texts


def _no_canary(texts: list[str]) -> None:
    for text in texts:
        assert CANARY not in text, text
        assert CANARY[:8] not in text and CANARY[-8:] not in text, text


@pytest.mark.parametrize(
    "userinfo", [f"user:{CANARY}@", f":{CANARY}@", f"{CANARY}@"], ids=["user-password", "password", "token"]
)
def test_a_web_url_with_credentials_is_printed_without_them(hub, run_cli, tmp_path, userinfo):
    pytest.importorskip("aiohttp")
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(PUBLISHED / "model.safetensors", lone / "model.safetensors")  # no config.json: a finding names A
    hub.add_repo("org/drafter", lone)
    host = hub.endpoint.partition("://")[2]
    url = f"http://{userinfo}{host}/org/drafter/resolve/main/model.safetensors"

    texts = _outputs(run_cli, tmp_path, url, str(PUBLISHED), {"HF_HOME": str(tmp_path / "hf")})

    _no_canary(texts)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["a"]["spec"] == f"http://{host}/org/drafter/resolve/main/model.safetensors"
    assert any("has no config.json" in f["message"] for f in report["findings"])


def test_an_hf_endpoint_with_credentials_is_printed_without_them(hub, run_cli, tmp_path):
    hub.add_repo("org/drafter", PUBLISHED)
    host = hub.endpoint.partition("://")[2]
    env = {**hub.client_env(tmp_path / "hf"), "HF_ENDPOINT": f"http://{CANARY}@{host}"}

    _no_canary(_outputs(run_cli, tmp_path, "org/drafter", str(PUBLISHED), env))
    missing = run_cli("org/missing", str(PUBLISHED), env=env)
    assert missing.returncode == 2 and "repo not found on http://127.0.0.1" in missing.stderr
    _no_canary([missing.stdout, missing.stderr])


@pytest.mark.parametrize(
    "url",
    [
        f"https://host.example/m/model.safetensors?access_token={CANARY}",
        f"https://host.example/m/model.safetensors#access_token={CANARY}",
        f"https://host.example/m/model.safetensors?X-Amz-Signature={CANARY}&x=1",
        f"https://user:{CANARY}@host.example/m/model.safetensors?api_key={CANARY}",
    ],
    ids=["query-token", "fragment-token", "signature", "userinfo-and-key"],
)
def test_a_url_carrying_a_token_is_refused_in_a_line_without_it(run_cli, url):
    result = run_cli(url, str(PUBLISHED))

    assert result.returncode == 2
    defect = "has a fragment" if "#" in url else "a URL with a query string"  # each says what the URL carries
    assert f"https://host.example/m/model.safetensors: {defect}" in result.stderr
    _no_canary([result.stdout, result.stderr])


@pytest.mark.parametrize(
    "spec, shown",
    [
        (f"http://user:{CANARY}@h:8/m", "http://h:8/m"),
        (f"http://:{CANARY}@h/m", "http://h/m"),
        (f"https://{CANARY}@h/m/", "https://h/m/"),
        (f"s3://b/p?token={CANARY}", "s3://b/p"),
        (f"https://h/m#access_token={CANARY}", "https://h/m"),
        (f"https://u:p#{CANARY}@h/m", "https://h/m"),
        (f"s3://AKIAKEYID4242:{CANARY[:8]}/{CANARY[8:]}@b/p", "s3://b/p"),  # a '/' in the secret, unencoded
        (f"http://user:{CANARY[:8]}/{CANARY[8:]}@h:8/m", "http://h:8/m"),
        ("http://h:8/m@main", "http://h:8/m@main"),
        ("org/name@main", "org/name@main"),
        ("./runs/ckpt-100", "./runs/ckpt-100"),
    ],
)
def test_the_display_identity_keeps_the_place_and_drops_the_credentials(spec, shown):
    assert display_spec(spec) == shown


@pytest.mark.parametrize(
    "text",
    [
        f"GET http://user:{CANARY}@h/x failed",
        f"GET http://:{CANARY}@h/x failed",
        f"GET http://{CANARY}@h/x failed",
        f"see https://h/x#access_token={CANARY}",
        f"see https://h/x?refresh_token={CANARY}&a=1",
        f"see https://h/x?sv=1&sig={CANARY}",
        f"see https://h/x?client_secret={CANARY}",
        f'Invalid bucket name "s3://AKIAKEYID4242:{CANARY[:8]}/{CANARY[8:]}@bucket"',
    ],
)
def test_the_scrubber_catches_every_url_form(text):
    assert CANARY not in scrub_secrets(text)


def test_every_url_of_a_text_gives_up_its_credentials_even_run_together():
    from ckptdiff.errors import url_credentials

    found = url_credentials(f"s3://b/x,https://user:{CANARY}@h/m http://AKIAKEYID4242:{CANARY[:8]}/{CANARY[8:]}@b/p")
    assert CANARY in found and f"{CANARY[:8]}/{CANARY[8:]}" in found and "AKIAKEYID4242" in found
    assert url_credentials("http://h:8/m@main s3://bucket/a@b") == []  # a port, a path holding '@': no credentials


def test_a_pasted_url_keeps_its_credentials_for_the_requests_only(tmp_path):
    parsed = parse_spec(f"https://user:{CANARY}@files.example/m/model.safetensors")
    assert parsed.url.startswith("https://user:")  # type: ignore[union-attr]  # the store still authenticates


@pytest.fixture
def fresh_process(monkeypatch):
    """The remembered credentials of a process that has seen none yet (restored after)."""
    from ckptdiff import errors

    monkeypatch.setattr(errors, "_URL_CREDENTIALS", OrderedDict())
    return errors


def test_a_notebook_that_compares_for_days_remembers_a_bounded_number_of_credentials(fresh_process):
    """A new token each hour: the process keeps the most recent ones only, and the current call's are always
    scrubbed from what a library quotes without the URL around them."""
    errors = fresh_process
    for hour in range(4 * errors.MOST_URL_CREDENTIALS):
        parse_spec(f"https://reader:expired{hour:05d}@files.example/m/model.safetensors")
    parse_spec(f"https://reader:{CANARY}@files.example/m/model.safetensors")

    assert len(errors._URL_CREDENTIALS) == errors.MOST_URL_CREDENTIALS
    _no_canary([scrub_secrets(f'ValueError: invalid bucket name "reader:{CANARY}@files.example" ({CANARY})')])


def test_a_credential_in_use_is_kept_however_many_others_come_after_it(fresh_process):
    """Each spec is remembered again as it is parsed (every source a run opens): a run's own never age out."""
    errors = fresh_process
    spec = f"https://{CANARY}@files.example/m/model.safetensors"
    for other in range(3 * errors.MOST_URL_CREDENTIALS):
        parse_spec(spec)
        errors.remember_url_credentials(f"tcp://user:other{other:05d}@scheduler.example:8786")
    _no_canary([scrub_secrets(f"token {CANARY} refused")])


def test_no_password_of_the_command_line_is_forgotten_however_many_it_holds(fresh_process, run_cli, tmp_path):
    """300 credentialed URLs on one command line (--ignore rules here; --rename, --base, store URLs alike): the
    first one's password is scrubbed from every output to the end of the run, though the most recent 256 forms
    remembered would have let it go. It holds a quote, so only the remembered string can catch it: the URL
    pattern stops there, and shell quoting (the report's command line) splits it."""
    errors = fresh_process
    rules = ["--ignore", f"https://reader:pa'{CANARY}@files.example/m/x.weight"]
    for other in range(1, 300):
        rules += ["--ignore", f"https://user{other}:other{other:05d}pw@files{other}.example/m/x.weight"]
    summary = tmp_path / "summary.md"

    texts = []
    for fmt, name in (("table", "r.txt"), ("markdown", "r.md"), ("json", "r.json"), ("junit", "r.xml")):
        out = tmp_path / name
        done = run_cli(
            str(PUBLISHED), str(PUBLISHED), *rules, "-v", "--format", fmt, "-o", str(out),
            env={"GITHUB_STEP_SUMMARY": str(summary)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        texts += [done.stdout, done.stderr, out.read_text()]
    shown = run_cli(str(PUBLISHED), str(PUBLISHED), *rules, "-v")
    texts += [shown.stdout, shown.stderr, summary.read_text()]

    _no_canary(texts)
    assert "policy_rule_unmatched" in shown.stdout and "https://***@files.example/m/x.weight" in shown.stdout
    assert len(errors._URL_CREDENTIALS) <= errors.MOST_URL_CREDENTIALS
    assert not errors._PINNED_URL_CREDENTIALS  # let go once the run ended


def test_a_usage_error_quoting_a_url_shows_it_without_its_credentials(run_cli):
    done = run_cli("a", "b", f"https://user:{CANARY}@files.example/m")
    assert done.returncode == 2
    assert "Error: Got unexpected extra argument (https://***@files.example/m)" in done.stderr
    _no_canary([done.stdout, done.stderr])
