"""``ckptdiff convert``'s plan table folds the tensors that differ only in layer/expert indices into one row each
(docs/convert.md, "The plan's rows"); ``--expand`` lists every tensor; JSON and ``convert.json`` always do."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from fixtures.generate import HERE as FIXTURES
from fixtures.generate import write_safetensors
from fixtures.published_drafters import mtp_layer_tensors

DRAFTERS = FIXTURES / "drafters"
EXPORT = DRAFTERS / "mtp-deepseek-v3-nextn-export"  # 52 tensors: the MTP layer at 0, 4 experts × 6 tensors
BASE = DRAFTERS / "bases" / "deepseek-v3"
#: The export's plan rows, folded: the 24 expert tensors in 6 rows.
FOLDED = 52 - 6 * 4 + 6
EXPERT_KINDS = [
    f"{proj}.{what}" for proj in ("gate_proj", "up_proj", "down_proj") for what in ("weight", "weight_scale_inv")
]


def plan_rows(stdout: str) -> list[str]:
    """The tensor table's rows (without its header and rule), as printed."""
    return stdout.split("\n\n")[1].splitlines()[2:]


def plan(run_cli, tmp_path, *flags, source=EXPORT, **options):
    """``ckptdiff convert SOURCE OUT --to vllm --base BASE --plan FLAGS`` (DeepSeek-V3's NextN layer renumbered)."""
    out = tmp_path / "o"
    return run_cli("convert", str(source), str(out), "--to", "vllm", "--base", str(BASE), "--plan", *flags, **options)


def test_the_nextn_plan_folds_each_expert_tensor_into_one_row_and_counts_every_tensor(run_cli, tmp_path):
    result = plan(run_cli, tmp_path)

    assert result.returncode == 0, result.stderr
    rows = plan_rows(result.stdout)
    assert len(rows) == FOLDED
    down = re.compile(
        r"model\.layers\.61\.mlp\.experts\.\{0\.\.3\}\.down_proj\.weight +"
        r"model\.layers\.0\.mlp\.experts\.\{0\.\.3\}\.down_proj\.weight +4 +rename +F8_E4M3 +\[16, 8\]$"
    )
    assert sum(1 for row in rows if down.match(row)) == 1
    for kind in EXPERT_KINDS:
        assert sum(1 for row in rows if f"experts.{{0..3}}.{kind} " in row) == 1
    assert not re.search(r"experts\.[0-9]", result.stdout)  # no expert is listed on its own
    single = next(row for row in rows if row.startswith("model.layers.61.enorm.weight "))
    assert single.split() == [
        "model.layers.61.enorm.weight",
        "model.layers.0.enorm.weight",
        "1",
        "rename",
        "BF16",
        "[16]",
    ]
    assert "plan: 52 tensors, 12.91 kB in 1 file (model.safetensors)" in result.stdout

    markdown = plan(run_cli, tmp_path, "--format", "markdown")
    assert (
        "| `model.layers.61.mlp.experts.{0..3}.down_proj.weight` "
        "| `model.layers.0.mlp.experts.{0..3}.down_proj.weight` | 4 | rename | F8_E4M3 | [16, 8] | model.safetensors |"
    ) in markdown.stdout


def test_expand_lists_every_tensor(run_cli, tmp_path):
    result = plan(run_cli, tmp_path, "--expand")

    assert result.returncode == 0, result.stderr
    rows = plan_rows(result.stdout)
    assert len(rows) == 52
    assert "{" not in result.stdout.split("\n\n")[1] and "count" not in rows[0]
    for expert in range(4):
        for kind in EXPERT_KINDS:
            out, source = f"model.layers.61.mlp.experts.{expert}.{kind}", f"model.layers.0.mlp.experts.{expert}.{kind}"
            assert sum(1 for row in rows if row.split()[:2] == [out, source]) == 1
    assert "plan: 52 tensors" in result.stdout


def repository(tmp_path: Path, settings: str, name: str = "ckptdiff.toml") -> Path:
    """A git repository whose config file holds ``settings``, and a folder below it to run from."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / name).write_text(settings)
    (root / "work").mkdir()
    return root / "work"


def test_a_config_files_expand_applies_to_the_plan_and_a_flag_overrides_it(run_cli, tmp_path):
    below = repository(tmp_path, "expand = true\n")

    expanded = plan(run_cli, tmp_path, cwd=below)
    collapsed = plan(run_cli, tmp_path, "--collapse", cwd=below)

    assert expanded.returncode == 0, expanded.stderr
    assert len(plan_rows(expanded.stdout)) == 52 and "{" not in expanded.stdout.split("\n\n")[1]
    assert collapsed.returncode == 0, collapsed.stderr
    assert len(plan_rows(collapsed.stdout)) == FOLDED
    (below.parent / "ckptdiff.toml").write_text("expand = false\n")
    assert len(plan_rows(plan(run_cli, tmp_path, "--expand", cwd=below).stdout)) == 52
    assert len(plan_rows(plan(run_cli, tmp_path, cwd=below).stdout)) == FOLDED


def test_config_names_the_file_and_a_pyproject_table_is_read(run_cli, tmp_path):
    pyproject = tmp_path / "elsewhere" / "pyproject.toml"
    pyproject.parent.mkdir()
    pyproject.write_text("[tool.ckptdiff]\nexpand = true\n")

    named = plan(run_cli, tmp_path, "--config", str(pyproject))
    found = plan(run_cli, tmp_path, cwd=pyproject.parent)

    assert len(plan_rows(named.stdout)) == 52 and len(plan_rows(found.stdout)) == 52


@pytest.mark.parametrize(
    ("settings", "defect"),
    [
        ("expand = 1\n", "expand: must be true or false"),
        ("expand = \n", "is not valid TOML"),
        ("expnad = true\n", "expnad: is not a ckptdiff setting (did you mean expand?)"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_it_and_nothing_is_written(run_cli, tmp_path, settings, defect):
    below = repository(tmp_path, settings)
    out = tmp_path / "o"

    result = run_cli("convert", str(EXPORT), str(out), "--to", "vllm", "--base", str(BASE), cwd=below)

    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"ckptdiff: {below.parent / 'ckptdiff.toml'}") and defect in result.stderr
    assert not out.exists() and not (tmp_path / "o.partial").exists()


def nextn_export(folder: Path, changed: dict[str, tuple[str, list[int]]]) -> Path:
    """The bundled NextN export rebuilt with some tensors' (dtype, shape) changed."""
    folder.mkdir()
    shutil.copy(EXPORT / "config.json", folder / "config.json")
    specs = [
        (name, *changed.get(name, (dtype, shape)))
        for name, dtype, shape in mtp_layer_tensors(0, attention="mla", fp8=True)
    ]
    write_safetensors(folder / "model.safetensors", specs, fill="zeros")
    return folder


@pytest.mark.parametrize(
    ("changed", "apart", "rest"),
    [
        (  # expert 2's down_proj in BF16: its own row; the other three fold (a gap in the index set)
            {"model.layers.0.mlp.experts.2.down_proj.weight": ("BF16", [16, 8])},
            "model.layers.61.mlp.experts.2.down_proj.weight "
            "model.layers.0.mlp.experts.2.down_proj.weight 1 rename BF16 [16, 8]",
            "model.layers.61.mlp.experts.{0,1,3}.down_proj.weight "
            "model.layers.0.mlp.experts.{0,1,3}.down_proj.weight 3 rename F8_E4M3 [16, 8]",
        ),
        (  # expert 1's up_proj of another shape
            {"model.layers.0.mlp.experts.1.up_proj.weight": ("F8_E4M3", [16, 16])},
            "model.layers.61.mlp.experts.1.up_proj.weight "
            "model.layers.0.mlp.experts.1.up_proj.weight 1 rename F8_E4M3 [16, 16]",
            "model.layers.61.mlp.experts.{0,2,3}.up_proj.weight "
            "model.layers.0.mlp.experts.{0,2,3}.up_proj.weight 3 rename F8_E4M3 [8, 16]",
        ),
    ],
)
def test_an_expert_that_differs_keeps_a_row_of_its_own(run_cli, tmp_path, changed, apart, rest):
    source = nextn_export(tmp_path / "export", changed)

    result = plan(run_cli, tmp_path, source=source)

    assert result.returncode == 0, result.stderr
    rows = [" ".join(row.split()) for row in plan_rows(result.stdout)]
    assert apart in rows and rest in rows
    assert rows.index(apart) == rows.index(rest) + 1  # under its siblings' row, not where its expert comes
    assert sum(1 for row in rows if row.startswith("model.layers.61.mlp.experts.")) == 6 + 1
    assert "plan: 52 tensors" in result.stdout


def test_json_and_convert_json_list_every_tensor_while_the_table_folds(run_cli, tmp_path):
    document = run_cli(
        "convert", str(EXPORT), str(tmp_path / "p"), "--to", "vllm", "--base", str(BASE), "--plan", "--format", "json"
    )
    planned = json.loads(document.stdout)["tensors"]
    assert len(planned) == 52
    assert {t["name"] for t in planned if ".experts." in t["name"]} == {
        f"model.layers.61.mlp.experts.{expert}.{kind}" for expert in range(4) for kind in EXPERT_KINDS
    }

    out = tmp_path / "o"
    converted = run_cli("convert", str(EXPORT), str(out), "--to", "vllm", "--base", str(BASE))

    assert converted.returncode == 0, converted.stderr
    assert "experts.{0..3}.down_proj.weight" in converted.stdout and "converted:" in converted.stderr + converted.stdout
    provenance = json.loads((out / "convert.json").read_text())
    assert [(t["name"], t["from"]["name"]) for t in provenance["tensors"]] == [
        (t["name"], t["from"]["name"]) for t in planned
    ]


@pytest.mark.parametrize("columns", [80, 120])
def test_a_narrow_terminal_puts_each_input_name_under_its_row(run_cli, tmp_path, columns):
    result = plan(run_cli, tmp_path, env={"COLUMNS": str(columns)})

    assert result.returncode == 0, result.stderr
    table = result.stdout.split("\n\n")[1].splitlines()
    assert table[0].startswith("tensor ← from ") and all(len(line) <= columns for line in table)
    assert "  ← model.layers.0.mlp.experts.{0..3}.down_proj.weight" in table
    assert "plan: 52 tensors" in result.stdout


@pytest.mark.parametrize("columns", [40, 50])
def test_a_terminal_too_narrow_for_the_table_lists_each_tensor_on_lines_of_its_own(run_cli, tmp_path, columns):
    """Under about 54 columns even a name's longest part beside the shapes does not fit: each tensor is its name,
    then what the table's columns hold, under it, and nothing is lost."""
    args = ["convert", str(FIXTURES / "kimi-k2-eagle3-published"), str(tmp_path / "o"), "--to", "vllm", "--plan"]
    result = run_cli(*args, env={"COLUMNS": str(columns)})
    document = json.loads(run_cli(*args, "--format", "json").stdout)

    assert result.returncode == 0, result.stderr
    assert max(map(len, result.stdout.splitlines())) <= columns, result.stdout
    table = result.stdout.split("\n\n")[1]
    assert table.startswith("d2t\n  from       d2t\n  transform  copy\n  dtype      I64\n  shape      [256]\n")
    squeezed = "".join(table.split())
    for tensor in document["tensors"]:
        cells = [tensor["name"], "from", tensor["from"]["name"], "transform", *tensor["transforms"]]
        assert "".join(cells + ["dtype", tensor["dtype"], "shape", str(tensor["shape"])]).replace(" ", "") in squeezed
