"""The machine report: ``Report.to_dict()`` as JSON, every tensor listed, byte-for-byte deterministic."""

from __future__ import annotations

import json

from ..report import Report
from . import RenderOptions


def render(report: Report, options: RenderOptions) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
