"""How much ``pip install ckptdiff`` puts on disk: a fresh virtual environment, the install, the installed
distributions' files summed (pip and setuptools, which every venv has, left out).

    python benchmarks/install_size.py                 # this checkout, the base install
    python benchmarks/install_size.py '.[values]'     # with an extra (a requirement pip understands)
    python benchmarks/install_size.py --keep DIR      # build the venv in DIR and leave it there
    python benchmarks/install_size.py --constraints action-constraints.txt   # also pin what it installed

Each distribution's size is the sum of the files its RECORD lists that exist (pip writes the byte-compiled
``.pyc`` files into RECORD too), so what the figure counts is what ``pip uninstall`` would remove. The base
install's target (issue 29): at most 60 MB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 60.0
#: In every virtual environment whatever is installed into it.
LEFT_OUT = ("pip", "setuptools")

#: Run by the venv's interpreter: each installed distribution's name, version and bytes on disk.
SIZES = """
import json, sys
from importlib.metadata import distributions
left_out = set(sys.argv[1:])
found = {}
for dist in distributions():
    name = dist.metadata["Name"]
    if name is None or name.lower() in left_out:
        continue
    total = 0
    for file in dist.files or ():
        path = dist.locate_file(file)
        try:
            total += path.stat().st_size
        except OSError:  # listed, not there (a .pyc never compiled)
            pass
    found[name] = (dist.version, total)
print(json.dumps(found))
"""


CONSTRAINTS_HEADER = """\
# The versions the GitHub Action installs ckptdiff with (pip install -c this file): what `pip install ckptdiff`
# resolved in a fresh venv, written by `python benchmarks/install_size.py --constraints action-constraints.txt`
# (rerun it to move the pins; the Action's cache key hashes this file).
"""


def measure(requirement: str, folder: Path) -> dict[str, tuple[str, int]]:
    """Install ``requirement`` into a fresh venv in ``folder``; the installed distributions and their bytes."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    if not python.exists():  # Windows
        python = folder / "Scripts" / "python.exe"
    install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement]
    subprocess.run(install, check=True, cwd=ROOT)
    done = subprocess.run([str(python), "-c", SIZES, *LEFT_OUT], check=True, capture_output=True, text=True, cwd=folder)
    return {name: (version, size) for name, (version, size) in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requirement", nargs="?", default=".", help="what to pip-install (default: this checkout)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="build the venv in DIR and keep it")
    parser.add_argument(
        "--constraints", metavar="FILE", type=Path, help="write the installed versions as pip constraints to FILE"
    )
    args = parser.parse_args()
    if args.keep is not None:
        sizes = measure(args.requirement, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="ckptdiff-install-size-") as folder:
            sizes = measure(args.requirement, Path(folder) / "venv")
    total = sum(size for _, size in sizes.values())
    summary = f"{len(sizes)} distributions, {total / 1e6:.1f} MB (pip, setuptools left out)"
    print(f"pip install {args.requirement}: {summary}")
    for name, (version, size) in sorted(sizes.items(), key=lambda item: -item[1][1]):
        print(f"  {size / 1e6:8.1f} MB  {name} {version}")
    if args.constraints is not None:
        pins = sorted(f"{name}=={version}" for name, (version, _) in sizes.items() if name.lower() != "ckptdiff")
        args.constraints.write_text(CONSTRAINTS_HEADER + "".join(f"{pin}\n" for pin in pins))
    if args.requirement == ".":
        print(f"target: at most {TARGET_MB:.0f} MB: {'met' if total / 1e6 <= TARGET_MB else 'NOT met'}")


if __name__ == "__main__":
    main()
