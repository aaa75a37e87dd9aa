"""The GitHub Action (action.yml): its own shell steps, run with bash the way the Actions runner runs them.

What the runner does for a composite action, and what is done here: the inputs (with their defaults) are
substituted for ``${{ inputs.x }}`` and ``${{ github.action_path }}`` in each step's ``env`` (textually, before the
shell starts), ``INPUT_*`` variables are set, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT`` and ``RUNNER_TEMP`` point at
files of the job, and each ``run:`` script goes to ``bash --noprofile --norc -eo pipefail``. The install step really
pip-installs this checkout into a fresh virtual environment, once for the module, from the wheels the ``wheelhouse``
fixture downloads once for the session (shared with the pre-commit tests). A ``uses:`` step (the cache) is the
runner's own and is not run here: the tests check what it is given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import checkout_build_lock

yaml = pytest.importorskip("yaml")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pip-install")]  # builds: conftest.checkout_build_lock

REPO = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # the runner's `shell: bash`


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    summary: str
    outputs: dict[str, str]


def substitute(value: str, inputs: dict[str, str], action_path: Path = REPO) -> str:
    """What the runner does to ``${{ }}`` in a step's env before the step starts (the only contexts used here)."""

    def one(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression.startswith("inputs."):
            return inputs[expression.removeprefix("inputs.")]
        if expression == "github.action_path":
            return str(action_path)
        raise AssertionError(f"action.yml uses ${{{{ {expression} }}}}, which this test cannot evaluate")

    return EXPRESSION.sub(one, value)


def with_defaults(given: dict[str, str]) -> dict[str, str]:
    unknown = set(given) - set(ACTION["inputs"])
    assert not unknown, f"no such inputs: {unknown}"
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    missing = [name for name, spec in ACTION["inputs"].items() if spec.get("required") and name not in given]
    assert not missing, f"required inputs not given: {missing}"
    inputs.update(given)
    return inputs


def run_step(
    step: dict, inputs: dict[str, str], job: Path, workspace: Path, action_path: Path = REPO, pip: dict | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GITHUB_", "INPUT_", "VIRTUAL_ENV"))}
    env.update(
        RUNNER_TEMP=str(job / "runner-temp"),
        GITHUB_STEP_SUMMARY=str(job / "summary.md"),
        GITHUB_OUTPUT=str(job / "output"),
        GITHUB_WORKSPACE=str(workspace),
        HF_HOME=str(job / "hf-home"),
        HF_HUB_OFFLINE="1",  # the fixtures are local; nothing may reach the network
        NO_COLOR="1",
    )
    env.update(pip or {})
    env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
    env.update({name: substitute(str(value), inputs, action_path) for name, value in step.get("env", {}).items()})
    script = job / "step.sh"
    script.write_text(substitute(step["run"], inputs, action_path))  # the runner pastes expressions into scripts
    return subprocess.run([*BASH, str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=600)


def gate_steps() -> list[dict]:
    return [step for step in ACTION["runs"]["steps"] if step.get("id") == "gate"]


def install_steps() -> list[dict]:
    """The steps before the comparison that the runner hands to bash (the cache step is the runner's own)."""
    return [step for step in ACTION["runs"]["steps"] if step.get("id") != "gate" and "run" in step]


def step_called(step_id: str) -> dict:
    return next(step for step in ACTION["runs"]["steps"] if step.get("id") == step_id)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, wheelhouse: dict[str, str]) -> Path:
    """A job folder whose RUNNER_TEMP holds ckptdiff installed by the action's own install step."""
    job = tmp_path_factory.mktemp("job")
    (job / "runner-temp").mkdir()
    with checkout_build_lock():  # the install step builds this checkout in place
        for step in install_steps():
            result = run_step(step, with_defaults({"a": "x", "b": "y"}), job, REPO, pip=wheelhouse)
            assert result.returncode == 0, result.stderr
    assert (job / "runner-temp" / "ckptdiff-venv" / "bin" / "ckptdiff").exists()
    return job


@pytest.fixture
def action(installed: Path):
    """Run the action's comparison step with these inputs in a fresh job (same installed venv)."""

    def run(workspace: Path = REPO, **given: str) -> Run:
        for name in ("summary.md", "output"):
            (installed / name).write_text("")
        inputs = with_defaults(given)
        code, stdout, stderr = 0, "", ""
        for step in gate_steps():
            result = run_step(step, inputs, installed, workspace)
            code, stdout, stderr = result.returncode, stdout + result.stdout, stderr + result.stderr
            if code:
                break  # the runner stops at the first failing step
        outputs = dict(line.split("=", 1) for line in (installed / "output").read_text().splitlines() if line)
        return Run(code, stdout, stderr, (installed / "summary.md").read_text(), outputs)

    return run


def test_the_action_is_composite_with_the_documented_inputs_and_outputs() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) == {"a", "b", "base", "engine", "format", "args"}
    assert not any(spec.get("required") for spec in ACTION["inputs"].values())  # a, b may come from the config file
    assert set(ACTION["outputs"]) == {"verdict", "exit-code"}
    assert len(gate_steps()) == 1


def test_no_expression_reaches_a_script() -> None:
    """Inputs go through env only: ``${{ inputs.a }}`` inside ``run:`` would be pasted into the script as code."""
    for step in ACTION["runs"]["steps"]:
        if "uses" in step:
            continue
        assert step["shell"] == "bash"
        assert "${{" not in step["run"], step.get("name")


def test_every_action_it_uses_is_pinned_by_commit() -> None:
    """A tag can be moved to other code; a commit cannot."""
    uses = [step["uses"] for step in ACTION["runs"]["steps"] if "uses" in step]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", use) for use in uses), uses


def test_the_install_takes_the_pinned_versions(installed: Path) -> None:
    """The install step passes action-constraints.txt to pip, so every dependency is at its pinned version."""
    pins = {}
    for line in (REPO / "action-constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    python = installed / "runner-temp" / "ckptdiff-venv" / "bin" / "python"
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True)
    found = {row["name"].lower().replace("_", "-"): row["version"] for row in json.loads(listed.stdout)}
    found = {name: version for name, version in found.items() if name not in ("ckptdiff", "pip", "setuptools")}
    assert found == {name: pins[name] for name in found}
    assert set(found) == set(pins)


def test_the_install_is_cached_under_a_key_naming_what_it_holds(tmp_path: Path) -> None:
    """The venv is restored by actions/cache under a key of ckptdiff's version, its files and the Python, and the
    install runs only on a miss."""
    cache, install = step_called("cache"), next(s for s in install_steps() if "pip" in s["run"])
    assert cache["uses"].startswith("actions/cache@")
    assert cache["with"]["path"] == "${{ runner.temp }}/ckptdiff-venv"
    assert '"${RUNNER_TEMP:-/tmp}/ckptdiff-venv"' in install["run"]  # the folder the install fills
    assert "steps.version.outputs.key" in cache["with"]["key"]
    assert install["if"] == "steps.cache.outputs.cache-hit != 'true'"

    def key(action_path: Path) -> str:
        job = tmp_path / f"job-{len(list(tmp_path.iterdir()))}"
        job.mkdir()
        result = run_step(step_called("version"), with_defaults({}), job, REPO, action_path)
        assert result.returncode == 0, result.stderr
        return dict(line.split("=", 1) for line in (job / "output").read_text().splitlines())["key"]

    from ckptdiff import __version__

    first = key(REPO)
    assert first.startswith(f"ckptdiff-{__version__}-py3.") and first == key(REPO)
    edited = tmp_path / "edited"  # same version, one module changed (a new commit on a branch)
    shutil.copytree(REPO / "ckptdiff", edited / "ckptdiff", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "setup.cfg", edited)
    shutil.copy(REPO / "pyproject.toml", edited)
    assert key(edited) == first
    with open(edited / "ckptdiff" / "cli.py", "a") as handle:
        handle.write("\n# a change\n")
    assert key(edited) != first


def test_a_compatible_pair_passes_and_writes_the_summary(action) -> None:
    run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-ours")
    assert run.code == 0, run.stderr
    assert run.stdout.rstrip().endswith("compatible: 15 match, 1 injected")
    assert run.summary.startswith("## ckptdiff: compatible")
    assert run.outputs == {"verdict": "compatible", "exit-code": "0"}


def test_an_incompatible_pair_fails_the_step(action) -> None:
    run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-two-aux", format="json")
    assert run.code == 1
    assert '"verdict": "incompatible"' in run.stdout
    assert run.summary.startswith("## ckptdiff: incompatible")
    assert "fc.weight" in run.summary
    assert run.outputs == {"verdict": "incompatible", "exit-code": "1"}


def test_args_are_split_like_a_shell_and_passed_on(action) -> None:
    run = action(
        a="fixtures/kimi-k2-eagle3-published",
        b="fixtures/kimi-k25-eagle3-two-aux",
        args="--ignore 'fc.*' --only-diffs",
    )
    assert run.code == 0, run.stdout
    assert "--ignore 'fc.*': 1 tensor left out" in run.stdout
    assert "midlayer.mlp.up_proj.weight" not in run.stdout  # --only-diffs reached ckptdiff too

    strict = action(
        a="fixtures/kimi-k2-eagle3-published",
        b="fixtures/kimi-k25-eagle3-two-aux",
        args="--ignore fc.weight --fail-on warning",
    )
    assert strict.code == 1 and strict.outputs["verdict"] == "incompatible"


def test_trouble_fails_the_step_and_says_why_in_the_summary(action) -> None:
    run = action(a="./fixtures/no-such-checkpoint", b="fixtures/kimi-k25-eagle3-ours")
    assert run.code == 2
    assert run.outputs == {"verdict": "error", "exit-code": "2"}
    assert "./fixtures/no-such-checkpoint: no such file or folder" in run.stderr
    assert run.summary.startswith("## ckptdiff: could not compare")
    assert "./fixtures/no-such-checkpoint: no such file or folder" in run.summary


def test_the_engine_input_reaches_ckptdiff(action) -> None:
    for engines in ("no-such-engine", "no-such-engine, other *"):
        run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-ours", engine=engines)
        assert run.code == 2  # an engine ckptdiff does not know (or, before --engine, an option it does not know)
        assert "--engine" in run.stderr


def test_without_a_and_b_the_config_files_reference_and_candidate_are_compared(action, tmp_path: Path) -> None:
    shutil.copytree(REPO / "fixtures" / "kimi-k2-eagle3-published", tmp_path / "reference")
    shutil.copytree(REPO / "fixtures" / "kimi-k25-eagle3-two-aux", tmp_path / "drafter")
    (tmp_path / "ckptdiff.toml").write_text('reference = "reference"\ncandidate = "drafter"\n')
    run = action(workspace=tmp_path, format="table")
    assert run.code == 1, run.stderr
    assert run.stdout.startswith("A: reference\nB: drafter\n")
    assert run.outputs == {"verdict": "incompatible", "exit-code": "1"}


@pytest.mark.parametrize(
    ("inputs", "line"),
    [
        ({"b": "fixtures/kimi-k25-eagle3-ours"}, "ckptdiff action: b is set but a is empty"),
        (
            {"a": "fixtures/kimi-k2-eagle3-published", "b": "fixtures/kimi-k25-eagle3-ours", "args": "--ignore 'fc"},
            "ckptdiff action: args: cannot split --ignore 'fc: No closing quotation",
        ),
    ],
)
def test_inputs_the_action_cannot_use_are_one_line_and_exit_2(action, inputs: dict[str, str], line: str) -> None:
    run = action(**inputs)
    assert run.code == 2 and run.stderr == line + "\n"
    assert run.outputs == {"verdict": "error", "exit-code": "2"}
    assert line in run.summary


@pytest.mark.parametrize(
    "hostile",
    [
        "$(touch {canary})",
        "`touch {canary}`",
        "x; touch {canary}",
        "x' && touch {canary} && '",
        '" ; touch {canary}; "',
    ],
)
def test_inputs_cannot_run_shell_code(action, tmp_path: Path, hostile: str) -> None:
    canary = tmp_path / "pwned"
    payload = hostile.format(canary=canary)
    for inputs in (
        {"a": payload, "b": "fixtures/kimi-k25-eagle3-ours"},
        {"a": "fixtures/kimi-k2-eagle3-published", "b": "fixtures/kimi-k25-eagle3-ours", "base": payload},
        {"a": "fixtures/kimi-k2-eagle3-published", "b": "fixtures/kimi-k25-eagle3-ours", "format": payload},
        {"a": "fixtures/kimi-k2-eagle3-published", "b": "fixtures/kimi-k25-eagle3-ours", "args": payload},
    ):
        run = action(**inputs)
        assert run.code == 2, (inputs, run.stdout)
        assert not canary.exists(), inputs


def test_a_spec_that_looks_like_an_option_is_still_a_spec(action, tmp_path: Path) -> None:
    run = action(a="--version", b="fixtures/kimi-k25-eagle3-ours")
    assert run.code == 2
    assert "--version: no such file or folder" in run.stderr


def test_the_documented_workflows_use_only_the_actions_inputs() -> None:
    """The README's and docs/ci-gate.md's examples stay in step with action.yml."""
    uses = 0
    for page in (REPO / "README.md", REPO / "docs" / "ci-gate.md"):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):
            for job in (yaml.safe_load(block).get("jobs") or {}).values():
                for step in job["steps"]:
                    if str(step.get("uses", "")).startswith("<owner>/ckptdiff@"):
                        uses += 1
                        assert set(step["with"]) <= set(ACTION["inputs"]), page.name
                        assert {"a", "b"} <= set(step["with"]), page.name
    assert uses == 2


def test_every_line_of_the_engine_input_reaches_ckptdiff(action) -> None:
    run = action(a="fixtures/kimi-k2-eagle3-no-lm-head", engine="sglang\nvllm, trtllm\n")
    assert run.code == 1, run.stderr
    assert all(f"  {engine} A: degraded" in run.stdout for engine in ("sglang", "vllm", "trtllm"))


def test_failures_are_annotations_on_the_run(action) -> None:
    """The default format, github: each failing tensor and engine event is an ::error line the runner turns into an
    annotation, before the table."""
    run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-two-aux")
    assert run.code == 1
    assert run.stdout.startswith(
        "::error title=ckptdiff%3A shape_mismatch::fc.weight: A [64, 192] BF16, B [64, 128] BF16 (dim 1: 192 vs 128)\n"
    )
    assert "::warning title=ckptdiff%3A aux_layer_ids_differ::" in run.stdout
    assert run.stdout.rstrip().endswith("incompatible: 1 error (shape_mismatch fc.weight), 14 match, 1 injected")


def test_args_quoted_in_the_summary_stay_inside_its_code_block(action) -> None:
    """A split error quotes the args; a fence of backticks in them must not end the summary's code block."""
    from markdown_it import MarkdownIt

    hostile = "x\n```\n# forged heading\n<img src=x onerror=alert(1)> @someone [x](https://e.invalid) '"
    run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-ours", args=hostile)
    assert run.code == 2 and run.outputs["verdict"] == "error"
    tokens = MarkdownIt("commonmark").parse(run.summary)
    assert [t.type for t in tokens if t.level == 0] == ["heading_open", "heading_close", "fence"]
    fence = next(t for t in tokens if t.type == "fence")
    assert "# forged heading" in fence.content and "<img" in fence.content


def test_a_refusal_quoting_the_args_starts_no_workflow_command(action) -> None:
    """The args are the workflow author's, but may hold text from a pull request: quoted in the refusal, they
    stay on one line and form no command (tests/test_ci_log.py reads the log as the runner does)."""
    from test_ci_log import runner_commands

    hostile = "x\n::stop-commands::paused\n##[add-mask]secret '"
    run = action(a="fixtures/kimi-k2-eagle3-published", b="fixtures/kimi-k25-eagle3-ours", args=hostile)
    assert run.code == 2 and run.outputs == {"verdict": "error", "exit-code": "2"}
    assert len(run.stderr.splitlines()) == 1 and runner_commands(run.stdout + run.stderr) == []
