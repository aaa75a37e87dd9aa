"""Per-layer drift plots for the HTML report (``--values``): relative L2 and cosine of each tensor, by layer, one
pair of inline SVG plots per tensor family (the names that differ only in their indices)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from ..errors import printable_name
from ..report import TensorRow

#: An integer path component between dots: the first one in a name is its layer.
_INDEX = re.compile(r"(?<=\.)(0|[1-9][0-9]*)(?=\.)")
WIDTH, HEIGHT = 440, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 24, 40
#: The two statistics plotted, their axis titles, and where their axis starts when the data does not say.
METRICS = (("rel_l2", "relative L2 ‖B−A‖/‖A‖"), ("cosine", "cosine(A, B)"))


@dataclass(frozen=True)
class Point:
    layer: int
    tensor: str
    value: float


@dataclass(frozen=True)
class Family:
    """Tensors whose names differ only in their integer components, ``model.layers.*.mlp.down_proj.weight``."""

    name: str
    points: dict[str, list[Point]]  # metric → points, by layer
    layers: tuple[int, ...]
    missing: int  # tensors of the family with no number for a metric (e.g. A all zeros: no relative L2)


def families(rows: Sequence[TensorRow]) -> list[Family]:
    """The families of the rows whose values were compared, each with a point per tensor and metric; a family
    needs tensors in two layers or more to be worth a plot."""
    grouped: dict[str, list[tuple[int, TensorRow]]] = {}
    for row in rows:
        if row.values is None:
            continue
        indices = _INDEX.findall(row.name)
        if not indices:
            continue
        grouped.setdefault(_INDEX.sub("*", row.name), []).append((int(indices[0]), row))
    out = []
    for name, members in sorted(grouped.items()):
        layers = tuple(sorted({layer for layer, _ in members}))
        if len(layers) < 2:
            continue
        points: dict[str, list[Point]] = {metric: [] for metric, _ in METRICS}
        missing = 0
        for layer, row in sorted(members, key=lambda m: (m[0], m[1].name)):
            assert row.values is not None
            for metric, _ in METRICS:
                value = 0.0 if row.values.equal and metric == "rel_l2" else None
                value = 1.0 if row.values.equal and metric == "cosine" else value
                value = row.values.number(metric) if value is None else value
                if value is None or not math.isfinite(value):
                    missing += 1
                    continue
                points[metric].append(Point(layer, row.name, value))
        out.append(Family(name, points, layers, missing))
    return out


def _ticks(low: float, high: float) -> list[float]:
    return [low, (low + high) / 2, high] if high > low else [low]


def _number(value: float, digits: int = 3) -> str:
    return format(value, f".{digits}g") if value == 0 or 1e-3 <= abs(value) < 1e4 else format(value, ".2e")


def plot(family: Family, metric: str, title: str) -> str:
    """One inline SVG: a point per tensor at its layer (x) and value (y), a line through them where each layer
    has one tensor; ``<title>`` on each point names the tensor and its value (a tooltip)."""
    points = family.points[metric]
    first, last = family.layers[0], family.layers[-1]
    values = [p.value for p in points] or [0.0]
    if metric == "cosine":
        low, high = min(min(values), 1.0), 1.0
    else:
        low, high = 0.0, max(max(values), 0.0)
    if high == low:  # a flat line (every tensor equal): give it room
        low, high = (low, low + 1) if metric == "rel_l2" else (low - 1e-3, high)
    inner_w, inner_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    digits = 6 if metric == "cosine" else 3  # cosines near 1 differ in the fifth digit

    def x(layer: int) -> float:
        return _LEFT + (inner_w * (layer - first) / (last - first) if last > first else inner_w / 2)

    def y(value: float) -> float:
        return _TOP + inner_h * (1 - (value - low) / (high - low))

    out = [
        f'<svg class="plot" data-metric="{metric}" data-family="{escape(family.name)}" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)} by layer">',
        f'<text x="{_LEFT}" y="14" class="title">{escape(title)}</text>',
        f'<line x1="{_LEFT}" y1="{_TOP + inner_h}" x2="{WIDTH - _RIGHT}" y2="{_TOP + inner_h}" class="axis"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + inner_h}" class="axis"/>',
    ]
    for tick in _ticks(low, high):
        out.append(
            f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" class="tick" text-anchor="end">{_number(tick, digits)}</text>'
        )
        out.append(f'<line x1="{_LEFT}" y1="{y(tick):.1f}" x2="{WIDTH - _RIGHT}" y2="{y(tick):.1f}" class="grid"/>')
    step = max(1, math.ceil(len(family.layers) / 12))
    for layer in family.layers[::step]:
        out.append(
            f'<text x="{x(layer):.1f}" y="{_TOP + inner_h + 16}" class="tick" text-anchor="middle">{layer}</text>'
        )
    out.append(f'<text x="{_LEFT + inner_w / 2}" y="{HEIGHT - 4}" class="tick" text-anchor="middle">layer</text>')
    layers = [p.layer for p in points]
    if len(layers) == len(set(layers)) and len(points) > 1:
        path = " ".join(f"{x(p.layer):.1f},{y(p.value):.1f}" for p in points)
        out.append(f'<polyline points="{path}" class="trend"/>')
    for p in points:
        out.append(
            f'<circle cx="{x(p.layer):.1f}" cy="{y(p.value):.1f}" r="3.5" class="point" data-layer="{p.layer}" '
            f'data-value="{p.value!r}"><title>{escape(printable_name(p.tensor))}: {_number(p.value, digits)}'
            "</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def drift_section(rows: Sequence[TensorRow]) -> list[str]:
    """The plots of every family, or nothing when no family spans two layers."""
    found = families(rows)
    if not found:
        return []
    out = ['<section id="drift"><h2>Value drift by layer</h2>']
    out.append(
        "<p>Relative L2 (‖B−A‖/‖A‖, 0 when equal) and cosine (1 when parallel) of each tensor, by the first index "
        "in its name. Hover a point for its tensor.</p>"
    )
    for family in found:
        note = f" ({family.missing} values not defined, not drawn)" if family.missing else ""
        out.append(
            f'<figure class="family" data-family="{escape(family.name)}"><figcaption>'
            f"<code>{escape(printable_name(family.name))}</code> — {len(family.layers)} layers{note}</figcaption>"
        )
        out += [plot(family, metric, title) for metric, title in METRICS]
        out.append("</figure>")
    out.append("</section>")
    return out
