"""Progress: readers report to a callback (ckptdiff/progress.py); bars are drawn only on a terminal's stderr."""

from __future__ import annotations

import io
import signal
import sys
from pathlib import Path

import pytest

import ckptdiff.progress as progress_module
from ckptdiff.cli import main
from ckptdiff.progress import terminal_progress
from ckptdiff.sources import SourceOptions, resolve
from ckptdiff.values import ValuesOptions, compare_values
from fixtures.generate import write_kimi_k2_base, write_safetensors


class Recorded:
    """A Progress that records what the readers tell it."""

    def __init__(self) -> None:
        self.bars: list[dict] = []

    def __call__(self, label: str, total: int | None, unit: str) -> Recorded:
        self.bars.append({"label": label, "total": total, "unit": unit, "done": 0, "closed": False})
        return self

    def advance(self, amount: int = 1) -> None:
        self.bars[-1]["done"] += amount

    def set_total(self, total: int | None) -> None:
        self.bars[-1]["total"] = total

    def close(self) -> None:
        self.bars[-1]["closed"] = True


class Terminal(io.StringIO):
    """A stream that says it is a terminal, and keeps what was drawn on it."""

    def isatty(self) -> bool:
        return True


def trained_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two 1 MiB bf16 files whose values differ everywhere."""
    tensors = [("w", "BF16", [1024, 512])]
    for name, seed in (("a", 1), ("b", 2)):
        write_safetensors(tmp_path / name / "model.safetensors", tensors, fill="random", seed=seed)
    return tmp_path / "a", tmp_path / "b"


def test_a_sharded_read_advances_one_bar_a_shard(tmp_path: Path) -> None:
    base = write_kimi_k2_base(tmp_path / "base", layers=12, experts=1)  # 12 shards
    progress = Recorded()
    checkpoint = resolve(str(base), SourceOptions(progress=progress))
    assert len(checkpoint.files) == 12
    assert progress.bars == [{"label": str(base), "total": 12, "unit": "shard", "done": 12, "closed": True}]


def test_a_failed_read_still_closes_its_bar(tmp_path: Path) -> None:
    base = write_kimi_k2_base(tmp_path / "base", layers=4, experts=1)
    next(base.glob("*-00003-of-*.safetensors")).write_bytes(b"\x08")  # a broken shard
    progress = Recorded()
    try:
        resolve(str(base), SourceOptions(progress=progress))
    except Exception:
        pass
    assert progress.bars[0]["closed"]


def test_bars_need_a_terminal(monkeypatch) -> None:
    assert terminal_progress(io.StringIO()) is None  # a file or a pipe: no bars, and tqdm is never imported

    screen = Terminal()
    progress = terminal_progress(screen)
    assert progress is not None
    monkeypatch.setattr(progress_module, "DELAY", 3600)  # work done within the delay, however loaded the machine
    bar = progress("org/name", 3, "shard")
    for _ in range(3):
        bar.advance()
    bar.close()
    assert screen.getvalue() == ""  # done within the delay: nothing drawn

    monkeypatch.setattr(progress_module, "DELAY", 0)  # work that outlasts the delay
    bar = progress("org/name", 3, "shard")
    bar.advance()
    assert "org/name:" in screen.getvalue() and "/3 [" in screen.getvalue()  # drawn, on the terminal
    bar.close()


def test_the_values_pass_advances_one_bar_of_the_bytes_it_compares(tmp_path: Path) -> None:
    a, b = (resolve(str(side)) for side in trained_pair(tmp_path))
    progress, heard = Recorded(), []

    hook = ValuesOptions(on_progress=lambda done, total: heard.append((done, total)))
    compare_values(a, b, ["w"], progress=progress, options=hook)

    both_sides = 2 * 1024 * 512 * 2
    assert progress.bars == [
        {"label": "--values", "total": both_sides, "unit": "B", "done": both_sides, "closed": True}
    ]
    assert heard[-1] == (both_sides, both_sides)  # the caller's own hook hears the pass too


def test_a_failed_values_pass_still_closes_its_bar(tmp_path: Path) -> None:
    folder_a, folder_b = trained_pair(tmp_path)
    a, b = resolve(str(folder_a)), resolve(str(folder_b))
    with open(folder_b / "model.safetensors", "r+b") as handle:  # cut short after its header was read
        handle.truncate(handle.seek(0, 2) - 100)
    progress = Recorded()

    with pytest.raises(Exception, match="file ends at byte"):
        compare_values(a, b, ["w"], progress=progress)

    assert progress.bars and all(bar["closed"] for bar in progress.bars)


def run_on_a_terminal(monkeypatch, capsys, *args: str) -> str:
    """``ckptdiff args`` in this process with a terminal as stderr and no delay before a bar: what it drew."""
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(progress_module, "DELAY", 0)
    interrupt = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as done:
            main(list(args))
    finally:
        signal.signal(signal.SIGINT, interrupt)
    assert done.value.code == 0, screen.getvalue()
    assert '"tensors"' in capsys.readouterr().out  # the report, on stdout as always
    return screen.getvalue()


def test_values_on_a_terminal_draw_a_bar_of_bytes(tmp_path: Path, monkeypatch, capsys) -> None:
    a, b = trained_pair(tmp_path)
    monkeypatch.chdir(tmp_path)

    drawn = run_on_a_terminal(monkeypatch, capsys, str(a), str(b), "--values", "--format", "json")

    assert "--values:" in drawn and "/2.10M [" in drawn  # both sides' 1 MiB, in bytes


def test_values_draw_no_bar_when_quiet_or_not_on_a_terminal(tmp_path: Path, monkeypatch, capsys, run_cli) -> None:
    a, b = trained_pair(tmp_path)
    monkeypatch.chdir(tmp_path)

    assert run_on_a_terminal(monkeypatch, capsys, str(a), str(b), "--values", "--format", "json", "-q") == ""
    piped = run_cli(str(a), str(b), "--values", "--format", "json")
    assert piped.returncode == 0 and "--values:" not in piped.stderr


def test_a_bar_names_its_folder_as_names_are_written(monkeypatch) -> None:
    """A folder whose name holds an escape character and a backslash: the bar shows them as the report's ``A:``
    line does (``x\\\\t\\x1b``), and no escape reaches the terminal."""
    screen = Terminal()
    monkeypatch.setattr(progress_module, "DELAY", 0)
    progress = terminal_progress(screen)
    assert progress is not None
    bar = progress("/models/x\\t\x1b", 2, "shard")
    bar.advance()
    bar.close()

    assert "/models/x\\\\t\\x1b:" in screen.getvalue() and "\x1b" not in screen.getvalue()
