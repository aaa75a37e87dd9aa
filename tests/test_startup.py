"""Start-up stays light: the CLI's module, ``--help``, ``--version`` and a local comparison import no heavy library.

What a fresh interpreter has imported is a count, not a timing: benchmarks/run.py measures the seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

#: Libraries that only some features need (the Hub, --values); each costs 0.1–2 s to import.
HEAVY = ("torch", "huggingface_hub", "numpy", "safetensors", "httpx", "requests")
#: Object-store libraries (ckptdiff[s3], [gcs], [azure], [http]): only an s3://, gs://, az:// or URL spec loads them.
HEAVY += ("fsspec", "s3fs", "botocore", "aiobotocore", "aiohttp", "gcsfs", "adlfs")
#: Progress bars (tqdm) load only when a bar is drawn, and the markdown table writer only for markdown.
HEAVY += ("tqdm", "tabulate")

IMPORTED_BY = """
import json, sys
from ckptdiff.cli import main
if sys.argv[1:]:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
"""


def top_level_modules_after(*args: str) -> set[str]:
    """Run ``ckptdiff args`` in a fresh interpreter (no args: only import the CLI); the packages it imported."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_BY, *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    return {name.split(".")[0] for name in json.loads(done.stderr.strip().splitlines()[-1])}


def test_importing_the_cli_imports_no_heavy_library() -> None:
    imported = top_level_modules_after()
    assert "ckptdiff" in imported and "click" in imported
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_heavy_library(flag: str) -> None:
    assert top_level_modules_after(flag).isdisjoint(HEAVY)


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_need_no_header_decoder(flag: str) -> None:
    """--help works even where the runtime dependencies of a comparison (msgspec) are missing or broken."""
    assert "msgspec" not in top_level_modules_after(flag)


def test_a_local_comparison_imports_no_heavy_library() -> None:
    published, ours = FIXTURES / "kimi-k2-eagle3-published", FIXTURES / "kimi-k25-eagle3-ours"
    imported = top_level_modules_after(str(published), str(ours), "--format", "json", "-o", "/dev/null")
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


# --- the Hub path: what is loaded before the first request, and what never is ---------------------------------

#: Runs the ckptdiff command (``python -m ckptdiff``'s entry) in a fresh interpreter and prints, as JSON on stderr,
#: the modules loaded when huggingface_hub's HTTP client sent its first request, and those loaded at the end.
#: httpx2's ``Client.send`` is wrapped for the snapshot: the library's, not ckptdiff's.
COMMAND_RUN = """
import atexit, json, runpy, sys
first = []
if "--snapshot-first-request" in sys.argv:
    sys.argv.remove("--snapshot-first-request")
    import httpx2
    send = httpx2.Client.send
    def snapshot(self, request, **kwargs):
        if not first:
            first.append(sorted(sys.modules))
        return send(self, request, **kwargs)
    httpx2.Client.send = snapshot
def loaded():
    print(json.dumps({"first": first[0] if first else None, "end": sorted(sys.modules)}), file=sys.__stderr__)
atexit.register(loaded)
sys.argv = ["ckptdiff", *sys.argv[1:]]
runpy.run_module("ckptdiff", run_name="__main__")
"""


def run_the_command(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> dict:
    """``python -m ckptdiff args`` in a fresh interpreter: its exit code and the modules it loaded (at the end,
    and with ``--snapshot-first-request`` when huggingface_hub's HTTP client sent its first request)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_"))}
    full_env.update(env or {}, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_RUN, *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=120
    )
    return {"code": done.returncode, **json.loads(done.stderr.strip().splitlines()[-1])}


#: Loaded only by what a Hub comparison does not need: downloads (file_download) and the auth helpers' PyYAML
#: and filelock (no token can be sent here).
NEVER_ON_THE_HUB_PATH = ("huggingface_hub.file_download", "huggingface_hub.utils._auth", "yaml", "filelock")
#: The command line's parser and the CLI: loaded, and the command line accepted, before the first request.
LOADED_BEFORE_ANY_REQUEST = ("click", "ckptdiff.cli")
#: The torch-pickle reader: only for .bin/.pt checkpoints.
TORCH_READER = ("ckptdiff.sources.torch_pickle",)


def modules_of_a_hub_run(hub, home: Path, *args: str, cwd: Path = REPO) -> dict:
    return run_the_command("--snapshot-first-request", *args, cwd=cwd, env=hub.client_env(home))


def asked_once(hub) -> bool:
    """Whether every request the Hub got (path and Range) came once."""
    asked = [(entry.path, entry.range) for entry in hub.log]
    return len(asked) == len(set(asked)) > 2


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in names or m.split(".")[0] in names)


@pytest.fixture
def two_repos(hub) -> tuple[str, str]:
    hub.add_repo("org/published", FIXTURES / "kimi-k2-eagle3-published")
    hub.add_repo("org/ours", FIXTURES / "kimi-k25-eagle3-ours")
    return "org/published", "org/ours"


def test_a_hub_run_parses_its_command_line_before_the_first_request(hub, two_repos, tmp_path) -> None:
    run = modules_of_a_hub_run(hub, tmp_path / "hf-home", *two_repos, "--format", "json", "-o", os.devnull)

    assert run["code"] == 0
    assert set(LOADED_BEFORE_ANY_REQUEST) <= set(run["first"])
    assert loaded(run["end"], (*NEVER_ON_THE_HUB_PATH, *TORCH_READER)) == []
    assert hub.requests["api-info"] == 2  # one listing call a side
    assert asked_once(hub)


def test_specs_from_the_config_file_are_read_once(hub, two_repos, tmp_path) -> None:
    (tmp_path / "ckptdiff.toml").write_text(f'reference = "{two_repos[0]}"\ncandidate = "{two_repos[1]}"\n')

    run = modules_of_a_hub_run(hub, tmp_path / "hf-home", "-o", os.devnull, cwd=tmp_path)

    assert run["code"] == 0
    assert hub.requests["api-info"] == 2
    assert asked_once(hub)


def test_offline_sends_nothing(hub, two_repos, tmp_path) -> None:
    run = modules_of_a_hub_run(hub, tmp_path / "hf-home", *two_repos, "--offline")

    assert run["code"] == 2 and run["first"] is None
    assert hub.total_requests == 0


def test_a_file_downloaded_into_the_hf_cache_is_read_from_there(hub, two_repos, tmp_path) -> None:
    """Once a repo has a folder in huggingface_hub's cache, its download module looks files up there."""
    home = tmp_path / "hf-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    download = "from huggingface_hub import hf_hub_download; hf_hub_download('org/published', 'config.json')"
    assert subprocess.run([sys.executable, "-c", download], env={**env, **hub.client_env(home)}).returncode == 0
    hub.reset_counters()

    run = modules_of_a_hub_run(hub, home, *two_repos, "--format", "json", "-o", os.devnull)

    assert run["code"] == 0 and "huggingface_hub.file_download" in run["end"]
    configs = [entry.path.split("/")[:3] for entry in hub.log if entry.path.endswith("/config.json")]
    assert configs == [["", "org", "ours"]]  # org/published's came from the HF cache


def test_a_local_comparison_through_the_command_imports_no_heavy_library(tmp_path) -> None:
    published, ours = FIXTURES / "kimi-k2-eagle3-published", FIXTURES / "kimi-k25-eagle3-ours"

    run = run_the_command(str(published), str(ours), "-o", os.devnull, env={"HF_HOME": str(tmp_path)})

    assert run["code"] == 0
    assert loaded(run["end"], HEAVY) == []


#: Knowledge a comparison of two base models (neither config a drafter's, no --base) does not use: the EAGLE-3
#: profile loads only for configs its detector claims, the base layouts only for a run with a base.
DRAFTER_KNOWLEDGE = (
    "ckptdiff.families.eagle3.profile",
    "ckptdiff.families.eagle3.spec",
    "ckptdiff.base_layouts",
    "ckptdiff.families.rules",  # the engines' rule vocabulary: only with --engine
)
#: The TOML parser: only for a config file, or a pyproject.toml that names ckptdiff.
TOML_PARSER = ("tomllib", "tomli")


def test_a_hub_run_of_two_bases_loads_no_drafter_knowledge_and_no_toml_parser(hub, tmp_path) -> None:
    hub.add_repo("org/base", FIXTURES / "drafters" / "bases" / "qwen3-8b")
    hub.add_repo("org/other", FIXTURES / "drafters" / "bases" / "llama3.1-8b")
    work = tmp_path / "project"
    (work / ".git").mkdir(parents=True)  # the config file search ends here
    (work / "pyproject.toml").write_text('[project]\nname = "trainer"\n\n[tool.ruff]\nline-length = 100\n')

    run = modules_of_a_hub_run(hub, tmp_path / "hf-home", "org/base", "org/other", "--format", "json", cwd=work)

    assert run["code"] == 0  # their configs differ (reported), their tensors match
    assert loaded(run["end"], (*DRAFTER_KNOWLEDGE, *TOML_PARSER)) == []
    assert "ckptdiff.families.eagle3.detect" in run["end"]  # the profiles were asked, through their detectors


def test_a_pyproject_that_names_ckptdiff_is_still_read(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.ckptdiff]\nformat = "json"\n')
    pair = FIXTURES / "drafters" / "bases"

    run = run_the_command(str(pair / "qwen3-8b"), str(pair / "qwen3-8b"), cwd=tmp_path, env={"HF_HOME": str(tmp_path)})

    assert run["code"] == 0
    assert "tomllib" in run["end"] or "tomli" in run["end"]


def test_a_drafter_comparison_loads_its_profile_without_a_base_layout() -> None:
    published, ours = FIXTURES / "kimi-k2-eagle3-published", FIXTURES / "kimi-k25-eagle3-ours"

    run = run_the_command(str(published), str(ours), "--format", "json", "-o", os.devnull)

    assert run["code"] == 0
    assert loaded(run["end"], ("ckptdiff.families.eagle3.profile", "ckptdiff.families.eagle3.spec")) == [
        "ckptdiff.families.eagle3.profile",
        "ckptdiff.families.eagle3.spec",
    ]


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_through_the_command_imports_no_heavy_library(flag: str) -> None:
    run = run_the_command(flag)

    assert run["code"] == 0
    assert loaded(run["end"], (*HEAVY, "msgspec")) == []
