"""Headless Chromium for the tests that look at a report the way a reader does: the DOM after its scripts ran, the
layout at a window size, and screenshots (``apt-get install -y chromium``; .ci/run installs it).

``--dump-dom`` prints the document once the page has loaded, after its scripts ran: a test's probe script writes
what it measured (bounding boxes, counts) into ``data-`` attributes of ``<body>``, and the test reads them back.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None
)
WIDTH, HEIGHT = 1280, 800


def chromium() -> str:
    if CHROMIUM is None:
        pytest.skip("no chromium (apt-get install -y chromium)")
    return CHROMIUM


def _command(*args: str) -> list[str]:
    # --no-sandbox: the sandbox cannot start as root (CI containers); the page is the test's own file
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"]
    return [chromium(), *flags, "--no-first-run", "--disable-extensions", *args]


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}  # a profile of its own: nothing of the machine's browser
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, check=False)


def dump_dom(page: Path, height: int = HEIGHT) -> str:
    """The page's DOM after its scripts ran, at the test width and ``height``; loading nothing from the network
    (``--host-resolver-rules`` sends every host nowhere, so a page that needs the network shows it)."""
    args = _command("--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    args = [arg if not arg.startswith("--window-size") else f"--window-size={WIDTH},{height}" for arg in args]
    result = _run(args, page.parent)
    assert result.returncode == 0 and "<html" in result.stdout, result.stderr[-2000:]
    return result.stdout


def screenshot(page: Path, png: Path, height: int = HEIGHT) -> Path:
    """A PNG of the page's first ``height`` pixels at the test width."""
    args = _command("--host-resolver-rules=MAP * ~NOTFOUND", f"--screenshot={png}", page.as_uri())
    args = [arg if not arg.startswith("--window-size") else f"--window-size={WIDTH},{height}" for arg in args]
    result = _run(args, page.parent)
    assert result.returncode == 0 and png.stat().st_size > 0, result.stderr[-2000:]
    return png


class _BodyData(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            # data-verdict-bottom is dataset.verdictBottom to the script that wrote it
            self.data = {_camel(name[5:]): value or "" for name, value in attrs if name.startswith("data-")}


def _camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(part.capitalize() for part in rest)


def body_data(dom: str) -> dict[str, str]:
    """The ``data-*`` attributes a probe script left on ``<body>``, by their ``dataset`` names."""
    parser = _BodyData()
    parser.feed(dom)
    return parser.data
