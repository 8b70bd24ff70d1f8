"""The console's pictures as plain geometry: bars, a weekly chart and a blast-radius graph.

Each is computed here from the API's JSON and drawn by the templates as SVG shapes with
numeric attributes only (no inline style, no script: the Content-Security-Policy forbids
both), so a title or a service name reaches the page only as escaped text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

BAR_WIDTH = 240.0


@dataclass(frozen=True, slots=True)
class ScoreBar:
    """A hit's fused score as a bar split by leg (1.0 fills the bar)."""

    lexical: float
    vector: float
    # the parts in words: the bar's meaning is never its colours alone
    label: str = ""

    @classmethod
    def of(cls, why: dict[str, Any]) -> ScoreBar:
        lexical = max(0.0, float(why.get("lexical_part") or 0.0))
        vector = max(0.0, float(why.get("vector_part") or 0.0))
        label = (
            f"fused score {lexical + vector:.4f}: lexical part {lexical:.4f} (solid), "
            f"vector part {vector:.4f} (striped)"
        )
        return cls(
            round(min(lexical, 1.0) * BAR_WIDTH, 1),
            round(min(vector, 1.0) * BAR_WIDTH, 1),
            label,
        )


@dataclass(frozen=True, slots=True)
class Column:
    x: float
    label: str
    segments: list[tuple[str, float, float]]  # (series, y, height), stacked from the bottom
    total: int


@dataclass(frozen=True, slots=True)
class WeeklyChart:
    width: float
    height: float
    columns: list[Column]
    series: list[str]
    peak: int
    column_width: float


SERIES = ("incident", "admin", "correction", "recurrence")


def weekly_chart(weeks: list[dict[str, Any]], *, height: float = 160.0) -> WeeklyChart:
    """Stacked columns per week: entries created by origin, then recurrences."""
    column_width = 18.0
    gap = 6.0
    totals = []
    for week in weeks:
        created = week.get("created") or {}
        totals.append(sum(int(v) for v in created.values()) + int(week.get("recurrences") or 0))
    peak = max(totals, default=0) or 1
    columns = []
    for index, week in enumerate(weeks):
        counts = {**{k: int(v) for k, v in (week.get("created") or {}).items()}}
        counts["recurrence"] = int(week.get("recurrences") or 0)
        y = height
        segments = []
        for series in (*SERIES, *sorted(set(counts) - set(SERIES))):
            n = counts.get(series, 0)
            if not n:
                continue
            h = round(n / peak * (height - 10), 1)
            y = round(y - h, 1)
            segments.append((series, y, h))
        columns.append(
            Column(
                x=round(index * (column_width + gap), 1),
                label=str(week.get("week", ""))[:10],
                segments=segments,
                total=totals[index],
            )
        )
    return WeeklyChart(
        width=max(1.0, len(weeks) * (column_width + gap)),
        height=height,
        columns=columns,
        series=list(SERIES),
        peak=peak,
        column_width=column_width,
    )


@dataclass(frozen=True, slots=True)
class GraphPoint:
    external_id: str
    node_type: str
    distance: int
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class GraphPicture:
    size: float
    centre: GraphPoint
    points: list[GraphPoint]
    lines: list[tuple[float, float, float, float]]
    rings: list[tuple[int, float]] = field(default_factory=list)
    width: float = 0.0  # the drawing's width: every label whole, to its last character


# a label's width per character at the console's 12 px sans-serif, with room to spare
_LABEL_CHAR_PX = 8.0


def blast_radius_picture(radius: dict[str, Any], *, size: float = 520.0) -> GraphPicture:
    """The failing node at the centre, its dependents on one ring per distance, each joined
    to the node before it on its shortest path."""
    centre_xy = size / 2
    node = radius["node"]
    centre = GraphPoint(node["external_id"], node["node_type"], 0, centre_xy, centre_xy)
    affected = radius.get("affected") or []
    hops = max([int(a["distance"]) for a in affected] + [1])
    ring_step = (size / 2 - 40) / hops
    by_distance: dict[int, list[dict[str, Any]]] = {}
    for item in affected:
        by_distance.setdefault(int(item["distance"]), []).append(item)
    points = []
    where: dict[str, tuple[float, float]] = {centre.external_id: (centre.x, centre.y)}
    for distance, items in sorted(by_distance.items()):
        for index, item in enumerate(items):
            angle = 2 * math.pi * index / len(items) + distance * 0.4
            x = round(centre_xy + distance * ring_step * math.cos(angle), 1)
            y = round(centre_xy + distance * ring_step * math.sin(angle), 1)
            points.append(GraphPoint(item["external_id"], item["node_type"], distance, x, y))
            where.setdefault(item["external_id"], (x, y))
    lines = []
    for item in affected:
        path = item.get("path") or []
        if len(path) >= 2 and path[-2] in where and path[-1] in where:
            (x1, y1), (x2, y2) = where[path[-2]], where[path[-1]]
            lines.append((x1, y1, x2, y2))
    rings = [(d, round(d * ring_step, 1)) for d in range(1, hops + 1)]
    label_ends = [p.x + 8 + _LABEL_CHAR_PX * (len(p.external_id) + 4) for p in points]
    label_ends.append(centre.x + _LABEL_CHAR_PX * len(centre.external_id))
    width = round(max([size, *label_ends]) + 10, 1)
    return GraphPicture(
        size=size, centre=centre, points=points, lines=lines, rings=rings, width=width
    )
