"""The pre-commit hook (.pre-commit-hooks.yaml), through ``pre-commit try-repo`` in a temporary git repository.

try-repo does what a user's ``.pre-commit-config.yaml`` would: it clones this repository (with any uncommitted
changes to tracked files), installs it into a fresh environment of its own (``language: python``: pip, here from the
session's ``wheelhouse``, shared with the GitHub Action's tests) and runs the hook in the user's repository. The
hook takes no arguments there, so A and B come from the user's ``ckptdiff.toml`` (``reference``, ``candidate``), as
the docs show.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "ckptdiff tests",
    "GIT_AUTHOR_EMAIL": "tests@ckptdiff.invalid",
    "GIT_COMMITTER_NAME": "ckptdiff tests",
    "GIT_COMMITTER_EMAIL": "tests@ckptdiff.invalid",
}


def in_a_git_checkout() -> bool:
    probe = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=REPO, capture_output=True)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("pip-install"),  # with the Action's tests; builds: conftest.checkout_build_lock
    pytest.mark.skipif(not in_a_git_checkout(), reason="try-repo clones this repository: needs git"),
]


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory, wheelhouse: dict[str, str]) -> dict[str, str]:
    """One pre-commit cache for the module (a clean checkout's hook environment is installed once) and pip's
    wheelhouse."""
    return {"PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")), **wheelhouse}


def user_repository(root: Path, candidate_fixture: str) -> Path:
    """A repository that keeps its drafter under checkpoints/drafter and gates it against a reference folder."""
    repository = root / "user-repo"
    shutil.copytree(FIXTURES / "kimi-k2-eagle3-published", repository / "reference" / "published")
    shutil.copytree(FIXTURES / candidate_fixture, repository / "checkpoints" / "drafter")
    (repository / "ckptdiff.toml").write_text(
        'reference = "reference/published"\ncandidate = "checkpoints/drafter"\nonly-diffs = true\n'
    )
    git(repository, "init", "-q")
    git(repository, "add", ".")
    git(repository, "commit", "-q", "-m", "a drafter")
    return repository


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, env={**os.environ, **GIT_IDENTITY}, capture_output=True)


def try_repo(repository: Path, home: Path, shared: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_", "VIRTUAL_ENV", "PRE_COMMIT"))}
    env.update(GIT_IDENTITY, HF_HOME=str(home / "hf-home"), HF_HUB_OFFLINE="1", NO_COLOR="1", **shared)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "ckptdiff", "--all-files", "--color", "never"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_hook_passes_a_compatible_drafter(tmp_path: Path, pre_commit_home: dict[str, str]) -> None:
    repository = user_repository(tmp_path, "kimi-k25-eagle3-ours")
    result = try_repo(repository, tmp_path, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ckptdiff (checkpoint stays drop-in compatible)" in result.stdout
    assert "Passed" in result.stdout


def test_the_hook_fails_an_incompatible_drafter_and_prints_the_report(
    tmp_path: Path, pre_commit_home: dict[str, str]
) -> None:
    repository = user_repository(tmp_path, "kimi-k25-eagle3-two-aux")
    result = try_repo(repository, tmp_path, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed" in result.stdout
    assert "- exit code: 1" in result.stdout
    assert "A: reference/published" in result.stdout and "B: checkpoints/drafter" in result.stdout
    assert "fc.weight" in result.stdout and "shape_mismatch" in result.stdout
    assert "incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected" in result.stdout
