"""Progress: readers report to a callback (ckptdiff/progress.py); bars are drawn only on a terminal's stderr."""

from __future__ import annotations

import io
from pathlib import Path

import ckptdiff.progress as progress_module
from ckptdiff.progress import terminal_progress
from ckptdiff.sources import SourceOptions, resolve
from fixtures.generate import write_kimi_k2_base


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

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    progress = terminal_progress(screen)
    assert progress is not None
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
