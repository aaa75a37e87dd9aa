"""``ckptdiff org/name ./local`` end to end: the real CLI in a subprocess, the Hub emulated (tests/hub_emulator.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_kimi_k2_full_scale import PUBLISHED_DATA_BYTES, REFERENCE

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_kimi_k2_base, write_kimi_k2_drafter_pair

TOKEN = "hf_cliTestTokenNeverPrinted0123456789"


@pytest.fixture(scope="module")
def kimi_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The full-scale Kimi-K2 drafter pair as sparse files: published (2.2 GB, to serve) and ours (local)."""
    return write_kimi_k2_drafter_pair(tmp_path_factory.mktemp("kimi"))


@pytest.fixture
def ckptdiff(hub, run_cli, tmp_path):
    """Run the CLI with huggingface_hub pointed at the emulator and a fresh HF cache."""
    home = tmp_path / "hf-home"

    def run(*args: str, token: str | None = None, **env: str):
        return run_cli(*args, env={**hub.client_env(home, token=token), **env})

    return run


def test_hub_drafter_against_local_reproduces_the_reference_table(hub, ckptdiff, kimi_pair):
    published, ours = kimi_pair
    commit = hub.add_repo("AQ-MedAI/Kimi-K2-Instruct-eagle3", published)

    result = ckptdiff("AQ-MedAI/Kimi-K2-Instruct-eagle3", str(ours), "--format", "json")

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar off a TTY
    document = json.loads(result.stdout)
    assert document["verdict"] == "compatible"
    assert document["a"]["revision"] == commit and document["a"]["bytes"] == PUBLISHED_DATA_BYTES
    rows = {row["name"]: row for row in document["tensors"]}
    assert rows.pop("embed_tokens.weight")["status"] == "injected"
    assert {name: (row["a"]["shape"], row["a"]["dtype"]) for name, row in rows.items()} == {
        name: (shape, dtype) for name, (shape, dtype) in REFERENCE.items()
    }
    assert {row["status"] for row in rows.values()} == {"match"}
    # the Hub side cost: one listing call, config.json (one GET), one ranged GET; only header bytes
    repo_bytes = sum(p.stat().st_size for p in published.iterdir())
    assert hub.total_requests <= 1 + 2
    assert hub.total_bytes < repo_bytes * 0.0001, (hub.total_bytes, repo_bytes)


def test_a_hub_base_costs_its_config_and_one_shard_header(hub, ckptdiff, kimi_pair, tmp_path):
    published, ours = kimi_pair
    hub.add_repo("AQ-MedAI/Kimi-K2-Instruct-eagle3", published)
    hub.add_repo("moonshotai/Kimi-K2-Instruct", write_kimi_k2_base(tmp_path / "base", layers=6, experts=2))

    result = ckptdiff("AQ-MedAI/Kimi-K2-Instruct-eagle3", str(ours), "--base", "moonshotai/Kimi-K2-Instruct")

    assert result.returncode == 0, result.stderr
    base_requests = [entry.path for entry in hub.log if "moonshotai/" in entry.path]
    assert len(base_requests) == 1 + 1 + 1, base_requests  # listing, config, the first shard (holds the embed)
    assert sum(path.endswith("-of-000006.safetensors") for path in base_requests) == 1


def test_the_table_names_the_commit(hub, ckptdiff, kimi_pair):
    published, ours = kimi_pair
    commit = hub.add_repo("AQ-MedAI/Kimi-K2-Instruct-eagle3", published)

    result = ckptdiff("AQ-MedAI/Kimi-K2-Instruct-eagle3", str(ours))

    assert result.returncode == 0, result.stderr
    assert commit[:12] in result.stdout


def test_second_runs_pinned_offline_and_on_a_branch(hub, ckptdiff):
    commit = hub.add_repo("org/drafter", FIXTURES / "kimi-k2-eagle3-published")
    ours = str(FIXTURES / "kimi-k25-eagle3-ours")
    assert ckptdiff("org/drafter", ours).returncode == 0
    hub.reset_counters()

    assert ckptdiff(f"org/drafter@{commit}", ours).returncode == 0
    assert hub.total_requests == 0
    assert ckptdiff("org/drafter", ours, "--offline").returncode == 0
    assert ckptdiff("org/drafter", ours, HF_HUB_OFFLINE="1").returncode == 0
    assert hub.total_requests == 0
    assert ckptdiff("org/drafter", ours).returncode == 0
    assert hub.requests == {"api-info": 1}


@pytest.mark.parametrize(
    ("online", "offline"), [("org/drafter@main", "org/drafter"), ("org/drafter", "org/drafter@main")]
)
def test_the_default_branch_and_main_are_one_branch_offline(hub, ckptdiff, online, offline):
    """As to huggingface_hub, whose cache keeps one refs/main for ``revision=None`` and ``revision="main"``."""
    commit = hub.add_repo("org/drafter", FIXTURES / "kimi-k2-eagle3-published")
    ours = str(FIXTURES / "kimi-k25-eagle3-ours")
    assert ckptdiff(online, ours).returncode == 0
    hub.reset_counters()

    result = ckptdiff(offline, ours, "--offline", "--format", "json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["a"]["revision"] == commit
    assert hub.total_requests == 0


def test_offline_main_is_found_in_a_cache_that_kept_it_apart_from_the_default_branch(hub, ckptdiff, tmp_path):
    """Earlier versions kept ``@main``'s commit only under ``refs/main`` in ckptdiff's cache."""
    hub.add_repo("org/drafter", FIXTURES / "kimi-k2-eagle3-published")
    ours = str(FIXTURES / "kimi-k25-eagle3-ours")
    assert ckptdiff("org/drafter@main", ours).returncode == 0
    (refs,) = (tmp_path / "hf-home" / "ckptdiff").glob("v3/models--org--drafter/refs")
    (refs / "%40default").unlink()

    assert ckptdiff("org/drafter", ours, "--offline").returncode == 0


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("org/missing", "org/missing: repo not found on http://127.0.0.1:"),
        ("org/drafter@no-such-tag", "org/drafter@no-such-tag: revision 'no-such-tag' not found"),
        ("org/gated", "org/gated@"),
        ("org/pickled", "org/pickled@"),  # a broken torch archive, named
    ],
)
def test_hub_errors_are_one_line_and_exit_2(hub, ckptdiff, tmp_path, spec, expected):
    hub.add_repo("org/drafter", FIXTURES / "kimi-k2-eagle3-published")
    hub.add_repo("org/gated", FIXTURES / "kimi-k2-eagle3-published", gated=True)
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "pytorch_model.bin").write_bytes(b"PK\x03\x04")
    hub.add_repo("org/pickled", pickled)

    result = ckptdiff(spec, str(FIXTURES / "kimi-k25-eagle3-ours"), token=TOKEN)

    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert TOKEN not in result.stderr


def test_offline_without_cache_is_a_clear_error(hub, ckptdiff):
    hub.add_repo("org/drafter", FIXTURES / "kimi-k2-eagle3-published")

    result = ckptdiff("org/drafter", str(FIXTURES / "kimi-k25-eagle3-ours"), "--offline")

    assert result.returncode == 2
    assert "org/drafter: not in the local cache and offline mode is on" in result.stderr
    assert hub.total_requests == 0


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]], ids=["threads", "jobs-2"])
def test_offline_values_with_weights_not_cached_sends_nothing(hub, run_cli_subprocess, tmp_path, jobs):
    """#30 finding 11: ``--offline`` means no request on any path, ``--values`` (huggingface_hub's downloads and
    its own side calls) included: headers cached by an online run, the weights not, a real process."""
    hub.add_repo("org/a", FIXTURES / "kimi-k2-eagle3-published")
    hub.add_repo("org/b", FIXTURES / "kimi-k25-eagle3-ours")
    env = hub.client_env(tmp_path / "hf-home", token=TOKEN)
    assert run_cli_subprocess("org/a", "org/b", env=env).returncode == 0  # headers and listings cached
    hub.reset_counters()

    result = run_cli_subprocess("org/a", "org/b", "--offline", "--values", *jobs, env=env)

    assert hub.total_requests == 0, [entry.path for entry in hub.log]
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "offline" in result.stderr and TOKEN not in result.stderr
