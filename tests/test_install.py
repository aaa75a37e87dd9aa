"""The light install (#29): what ``pip install ckptdiff`` brings is what the package imports, and ``--values``
without its extra is one line saying how to get it. The installed size is measured by
benchmarks/install_size.py (README, "Install").
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "ckptdiff"
FIXTURES = REPO / "fixtures"

#: Import names that differ from the distribution's name.
IMPORT_NAMES = {"huggingface_hub": "huggingface_hub", "tomli": "tomli", "pyyaml": "yaml"}
#: Runtime dependencies no module of the package imports, each with where it is used (none: keep it so).
NOT_IMPORTED_YET: dict[str, str] = {}


def requirements(option: str, section: str = "options") -> list[str]:
    """The distribution names one setup.cfg requirement list holds (markers and versions dropped)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = [line.split("#")[0].strip() for line in config[section][option].splitlines()]
    return [re.split(r"[<>=!~;\[ ]", line)[0].lower() for line in lines if line]


def imported_top_level_names() -> set[str]:
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    imported = imported_top_level_names()
    unused = [
        name
        for name in requirements("install_requires")
        if IMPORT_NAMES.get(name, name.replace("-", "_")) not in imported and name not in NOT_IMPORTED_YET
    ]
    assert unused == []
    for name, used_by in NOT_IMPORTED_YET.items():
        assert name in requirements("install_requires")
        assert all((REPO / path).is_file() and name in (REPO / path).read_text() for path in used_by.split(", "))


def test_values_needs_live_in_its_extra_and_numba_is_not_installed_by_it() -> None:
    base, values = requirements("install_requires"), requirements("values", "options.extras_require")
    assert {"numpy", "ml_dtypes"} <= set(values)
    assert {"numpy", "ml_dtypes", "numba", "llvmlite", "torch"}.isdisjoint(base)
    assert "numba" not in values
    assert "ckptdiff" in requirements("test", "options.extras_require")  # .[test] pulls in ckptdiff[values]


#: A run of the command where numpy and ml_dtypes cannot be imported (``sys.modules[name] = None`` is how the
#: import system marks a module as not there: ``import`` raises ImportError and ``find_spec`` answers None).
WITHOUT_VALUES_EXTRA = """
import sys
for name in ("numpy", "ml_dtypes"):
    sys.modules[name] = None
from ckptdiff.cli import main
main(sys.argv[1:])
"""


def test_values_without_its_extra_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    published, ours = FIXTURES / "kimi-k2-eagle3-published", FIXTURES / "kimi-k25-eagle3-ours"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_VALUES_EXTRA, str(published), str(ours), "--values"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "ckptdiff: --values: needs numpy and ml_dtypes, not installed (pip install 'ckptdiff[values]')\n"
    )


def test_a_header_only_run_needs_nothing_of_the_values_extra(tmp_path: Path) -> None:
    published, ours = FIXTURES / "kimi-k2-eagle3-published", FIXTURES / "kimi-k25-eagle3-ours"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_VALUES_EXTRA, str(published), str(ours), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr


def test_convert_in_the_base_install_writes_a_proven_drafter_and_says_what_it_did_not_check(tmp_path: Path) -> None:
    published, out = FIXTURES / "kimi-k2-eagle3-published", tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_VALUES_EXTRA, "convert", str(published), str(out), "--to", "sglang", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "note: the safetensors package's check not run" in done.stdout + done.stderr
    proof = json.loads((out / "convert.json").read_text())["proof"]
    assert proof["proven"] is True and proof["tensors_compared_by_bytes"] > 0
    assert proof["safetensors_check"].startswith("not run: the safetensors package opens files only through numpy")
    assert not (tmp_path / "out.partial").exists()
