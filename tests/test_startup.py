"""Start-up stays light: the CLI's module, ``--help``, ``--version`` and a local comparison import no heavy library.

What a fresh interpreter has imported is a count, not a timing: benchmarks/run.py measures the seconds.
"""

from __future__ import annotations

import json
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
        [sys.executable, "-c", IMPORTED_BY, *args], capture_output=True, text=True, cwd=REPO, timeout=60
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
