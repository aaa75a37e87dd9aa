"""A user's Hugging Face token never appears in anything ckptdiff prints or writes.

The real ``ckptdiff`` runs with a recognisable fake token (in ``HF_TOKEN``, the legacy variable, or the stored
login file) on every path: local errors, reports, Hub errors (401, 403 gated, 404, 5xx, timeouts, an unreachable
host), a server that echoes the token back in its error message, and all of these again with ``--debug``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_emulator import HubEmulator, Request

from fixtures.generate import HERE as FIXTURES

PUBLISHED = FIXTURES / "kimi-k2-eagle3-published"
OURS = str(FIXTURES / "kimi-k25-eagle3-ours")
TOKEN = "hf_SecretTokenThatMustNeverBePrinted42"
#: A token in no well-known shape (a proxy's or an old one): only an exact match can catch it.
ODD_TOKEN = "proxy-Secret.Token~That=Must+Never/Print"


@pytest.fixture
def released() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def ckptdiff(hub: HubEmulator, run_cli, run_cli_subprocess, tmp_path: Path):
    """The CLI against the emulator, with a token the client really sends (implicit tokens on). ``process=True``:
    in a process of its own (huggingface_hub configures its logging once a process, from its environment)."""
    home = tmp_path / "hf-home"

    def run(*args: str, token: str = TOKEN, variable: str = "HF_TOKEN", process: bool = False, **env: str):
        base = hub.client_env(home)
        base.update({"HF_HUB_DISABLE_IMPLICIT_TOKEN": "0", "HF_HUB_DOWNLOAD_TIMEOUT": "2"})
        if variable == "stored":
            home.mkdir(parents=True, exist_ok=True)
            (home / "token").write_text(token)
        else:
            base[variable] = token
        return (run_cli_subprocess if process else run_cli)(*args, env={**base, **env})

    return run


def assert_never_shown(result, token: str, *files: Path) -> None:
    for text in (result.stdout, result.stderr, *(path.read_text() for path in files if path.exists())):
        assert token not in text, text
        for piece in (token[:12], token[-12:]):  # not even part of it
            assert piece not in text, text


def echo_the_token(request: Request) -> bool:
    """A hostile or buggy server that puts the caller's Authorization header into its error message."""
    auth = request.headers.get("Authorization")
    if auth is None:
        return False
    message = f"token {auth} is not allowed here; you sent {auth.split()[-1]}"
    request.respond(400, f'{{"error": "{message}"}}'.encode(), {"X-Error-Message": message})
    return True


def list_the_token(request: Request) -> bool:
    """A server whose file listing names a file after the caller's token: it reaches a "what the repo has" line."""
    auth = request.headers.get("Authorization")
    if request.route != "api-info" or auth is None:
        return False
    listing = {"id": "org/drafter", "sha": "a" * 40, "siblings": [{"rfilename": f"weights-{auth.split()[-1]}.bin"}]}
    request.respond(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
    return True


# --- every path, with and without --debug -----------------------------------------------------------------

SCENARIOS = [
    "local-bad-file",
    "hub-missing-repo-404",
    "hub-private-401",
    "hub-gated-403",
    "hub-server-error-500",
    "hub-echoes-the-token",
    "hub-unreachable",
    "hub-timeout",
    "hub-bad-header",
]


def prepare(
    scenario: str, hub: HubEmulator, tmp_path: Path, released: threading.Event
) -> tuple[list[str], dict[str, str]]:
    """Set the emulator up for ``scenario``; returns the command's arguments and environment overrides."""
    hub.add_repo("org/drafter", PUBLISHED)
    if scenario == "local-bad-file":
        bad = tmp_path / "bad.safetensors"
        bad.write_bytes((2**40).to_bytes(8, "little") + b"{}")
        return [str(bad), OURS], {}
    if scenario == "hub-private-401":
        hub.add_repo("org/private", PUBLISHED, private=True)
        return ["org/private", OURS], {}
    if scenario == "hub-gated-403":
        hub.valid_tokens.update({TOKEN, ODD_TOKEN})
        hub.add_repo("org/gated", PUBLISHED, gated=True)
        hub.repos["org/gated"].access = {"hf_someoneElse"}
        return ["org/gated", OURS], {}
    if scenario == "hub-server-error-500":
        hub.fail_next(500, count=20, route="api-info")
    elif scenario == "hub-echoes-the-token":
        hub.hooks.append(echo_the_token)
    elif scenario == "hub-unreachable":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return ["org/drafter", OURS], {"HF_ENDPOINT": f"http://127.0.0.1:{probe.getsockname()[1]}"}
    elif scenario == "hub-timeout":
        hub.hooks.append(lambda request: request.route == "api-info" and released.wait(30))
        return ["org/drafter", OURS], {"HF_HUB_DOWNLOAD_TIMEOUT": "1"}  # the listing never comes: no need to wait 2 s
    elif scenario == "hub-bad-header":
        repo = tmp_path / "bad-repo"
        repo.mkdir()
        (repo / "model.safetensors").write_bytes((30).to_bytes(8, "little") + b'{"w": {"dtype": "F32"}}' + b" " * 7)
        hub.add_repo("org/bad", repo)
        return ["org/bad", OURS], {}
    return ["org/missing" if scenario == "hub-missing-repo-404" else "org/drafter", OURS], {}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_token_is_never_printed(hub, ckptdiff, tmp_path, released, scenario, debug):
    args, env = prepare(scenario, hub, tmp_path, released)
    result = ckptdiff(*args, *(["--debug"] if debug else []), **env, HF_HUB_ETAG_TIMEOUT="2")

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip(), "every scenario is an error"
    if debug and scenario != "local-bad-file":
        assert "Traceback" in result.stderr
    assert_never_shown(result, TOKEN)


@pytest.mark.parametrize("echo", [echo_the_token, list_the_token], ids=["in-an-error", "in-a-listing"])
@pytest.mark.parametrize("variable", ["HUGGING_FACE_HUB_TOKEN", "stored"])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_an_echoed_token_from_any_origin_is_never_printed(hub, ckptdiff, variable, debug, echo):
    """The legacy variable, or a stored login in no hf_ shape: only the exact value can be scrubbed."""
    hub.add_repo("org/drafter", PUBLISHED)
    hub.hooks.append(echo)

    result = ckptdiff("org/drafter", OURS, *(["--debug"] if debug else []), token=ODD_TOKEN, variable=variable)

    assert result.returncode == 2
    assert hub.log and all(entry.authenticated for entry in hub.log if entry.route == "api-info")
    assert_never_shown(result, ODD_TOKEN)


@pytest.mark.parametrize("suffix", [".json", ".md", ".txt", ".xml"])
def test_reports_of_a_successful_hub_run_hold_no_token(hub, ckptdiff, tmp_path, suffix):
    hub.valid_tokens.add(TOKEN)
    hub.add_repo("org/drafter", PUBLISHED, private=True)
    report = tmp_path / f"report{suffix}"
    summary = tmp_path / "summary.md"
    fmt = ["--format", "junit"] if suffix == ".xml" else []

    result = ckptdiff("org/drafter", OURS, "-o", str(report), *fmt, GITHUB_STEP_SUMMARY=str(summary))

    assert result.returncode in (0, 1), result.stderr
    assert report.stat().st_size > 0
    assert_never_shown(result, TOKEN, report, summary)


def test_the_emulator_log_never_keeps_the_token(hub, ckptdiff):
    hub.valid_tokens.add(TOKEN)
    hub.add_repo("org/drafter", PUBLISHED, private=True)
    assert ckptdiff("org/drafter", OURS).returncode in (0, 1)
    assert any(entry.authenticated for entry in hub.log)
    assert TOKEN not in repr(hub.log)


@pytest.mark.parametrize("logging", [{"HF_DEBUG": "1"}, {"HF_HUB_VERBOSITY": "debug"}], ids=["HF_DEBUG", "verbosity"])
def test_huggingface_hub_debug_logs_hold_no_token(hub, ckptdiff, logging):
    """The user may turn the client's own request logging on: it prints requests, never the token."""
    hub.valid_tokens.add(TOKEN)
    hub.add_repo("org/drafter", PUBLISHED, private=True)

    result = ckptdiff("org/drafter", OURS, "--debug", process=True, **logging)

    assert result.returncode in (0, 1), result.stderr
    assert result.stderr.strip(), "the client logged its requests"
    assert_never_shown(result, TOKEN)


# --- object-store credentials ------------------------------------------------------------------------------


def test_cloud_keys_and_url_signatures_are_scrubbed(monkeypatch):
    from ckptdiff.errors import scrub_secrets

    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSecretNeverShown"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AZURE_STORAGE_KEY", "c2VjcmV0LWF6dXJlLWtleS1uZXZlci1zaG93bg==")
    text = (
        f"SignatureDoesNotMatch for {secret} and c2VjcmV0LWF6dXJlLWtleS1uZXZlci1zaG93bg== at "
        "https://acct.blob.core.windows.net/c/model.safetensors?sv=2024-01-01&sig=abc%2Bdef&se=2030 and "
        "https://bucket.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=0123abcd and "
        "https://user:hunter2pass@host/model.safetensors"
    )
    scrubbed = scrub_secrets(text)
    for leaked in (secret, "c2VjcmV0LWF6", "abc%2Bdef", "0123abcd", "AKIA%2F1", "hunter2pass"):
        assert leaked not in scrubbed, scrubbed
    assert "model.safetensors?sv=2024-01-01&sig=***&se=2030" in scrubbed  # the rest of the URL stays readable


def test_a_short_access_key_id_like_localstacks_test_is_not_scrubbed_everywhere(monkeypatch):
    from ckptdiff.errors import scrub_secrets

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    assert scrub_secrets("tests/test_x.py: 1 test") == "tests/test_x.py: 1 test"


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_an_s3_secret_is_never_printed_even_when_denied(run_cli, s3, debug):
    from store_servers import SECRET_KEY

    s3.upload(PUBLISHED, "private/drafter")
    with s3.require_auth():
        result = run_cli("s3://private/drafter", OURS, *(["--debug"] if debug else []), env=s3.env)
    assert result.returncode == 2 and "access denied" in result.stderr
    if debug:
        assert "Traceback" in result.stderr  # --debug shows the traceback, scrubbed
    assert_never_shown(result, SECRET_KEY)
