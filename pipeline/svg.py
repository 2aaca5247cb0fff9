"""Charts of the report drawn as SVG text: lines and bars over a time axis, with a title, one
labelled unit per axis, ticks at round values, a grid and a legend.

The report's three charts over time were matplotlib PNGs: about a third of a second of the
driver's after the replay (PNG rasterising and compressing three 900-pixel images), on a run
whose whole budget after the JVM's start is about a second (docs/pipeline.md). The same
charts as SVG are text written in a few milliseconds, scale to any width, and print as
sharply; the file stays self-contained (each chart an ``<img>`` of a data URI). No
dependency: the report needs no matplotlib for them.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable

import numpy as np

# Plot area inside the image: margins for the tick labels, the axis labels and the title.
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 30, 44
FONT = "font-family:DejaVu Sans,Arial,sans-serif"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    if out[-1] < hi - step * 1e-9:
        out.append(out[-1] + step)
    return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering [lo, hi] (lo > 0)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b = a + 1
    return [10.0**k for k in range(a, b + 1)]


class Chart:
    """One chart: ``line``, ``bars``, ``points`` and ``hline`` add to it, :meth:`img` draws it."""

    def __init__(self, title: str, xlabel: str, ylabel: str, width: int = 900, height: int = 340):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.width, self.height = width, height
        self.items: list[tuple] = []
        self.log = False
        self.yfmt: Callable[[float], str] = lambda v: f"{v:,.0f}"

    def line(self, x, y, label: str | None, color: str, dash: bool = False) -> Chart:
        self.items.append(("line", np.asarray(x, float), np.asarray(y, float), label, color, dash))
        return self

    def bars(self, x, y, width: float, color: str) -> Chart:
        self.items.append(("bars", np.asarray(x, float), np.asarray(y, float), width, color))
        return self

    def points(self, x, y, label: str | None, color: str) -> Chart:
        self.items.append(("points", np.asarray(x, float), np.asarray(y, float), label, color))
        return self

    def hline(self, y: float, label: str | None, color: str) -> Chart:
        self.items.append(("hline", y, label, color))
        return self

    def _ranges(self) -> tuple[list[float], list[float]]:
        xs = [it[1] for it in self.items if it[0] != "hline"]
        ys = [it[2] for it in self.items if it[0] != "hline"] + [
            np.array([it[1]]) for it in self.items if it[0] == "hline"
        ]
        x = np.concatenate(xs) if xs else np.zeros(1)
        y = np.concatenate(ys) if ys else np.zeros(1)
        x_lo, x_hi = (float(x.min()), float(x.max())) if len(x) else (0.0, 1.0)
        bar = max((it[3] for it in self.items if it[0] == "bars"), default=0.0)
        x_lo, x_hi = x_lo - bar / 2, x_hi + bar / 2
        if self.log:
            pos = y[y > 0]
            lo, hi = (float(pos.min()), float(pos.max())) if len(pos) else (1.0, 10.0)
            return nice_ticks(x_lo, x_hi, 8), log_ticks(lo, hi)
        return nice_ticks(x_lo, x_hi, 8), nice_ticks(0.0, max(float(y.max(initial=0)), 1e-12), 5)

    def svg(self) -> str:
        xt, yt = self._ranges()
        w, h = self.width, self.height
        pw, ph = w - LEFT - RIGHT, h - TOP - BOTTOM
        x0, x1 = xt[0], xt[-1]
        if self.log:
            y0, y1 = math.log10(yt[0]), math.log10(yt[-1])
        else:
            y0, y1 = yt[0], yt[-1]

        def sx(v):
            return LEFT + (np.asarray(v, float) - x0) / (x1 - x0) * pw

        def sy(v):
            v = np.asarray(v, float)
            if self.log:
                v = np.log10(np.maximum(v, yt[0]))
            return TOP + ph - (v - y0) / (y1 - y0) * ph

        e = html.escape
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'style="{FONT};font-size:12px"><rect width="{w}" height="{h}" fill="white"/>',
            f'<text x="{LEFT + pw / 2:.1f}" y="18" text-anchor="middle" font-size="14">{e(self.title)}</text>',
        ]
        for v in yt:
            py = float(sy(v))
            out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{e(self.yfmt(v))}</text>')
        for v in xt:
            px = float(sx(v))
            out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="#ddd"/>')
            out.append(f'<text x="{px:.1f}" y="{TOP + ph + 16}" text-anchor="middle">{v:,.4g}</text>')
        out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
        out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{h - 8}" text-anchor="middle">{e(self.xlabel)}</text>')
        mid = f"{TOP + ph / 2:.1f}"
        out.append(f'<text transform="translate(16 {mid}) rotate(-90)" text-anchor="middle">{e(self.ylabel)}</text>')
        legend = []
        for it in self.items:
            kind = it[0]
            if kind == "line":
                _, x, y, label, color, dash = it
                pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(sx(x).tolist(), sy(y).tolist(), strict=True))
                style = ' stroke-dasharray="6 4"' if dash else ""
                out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.6"{style}/>')
                legend.append((label, color, "line"))
            elif kind == "bars":
                _, x, y, width, color = it
                half = width / (x1 - x0) * pw / 2
                base = float(sy(yt[0]))
                for a, b in zip(sx(x).tolist(), sy(y).tolist(), strict=True):
                    height = max(0.0, base - b)
                    out.append(
                        f'<rect x="{a - half:.1f}" y="{b:.1f}" width="{2 * half:.1f}" height="{height:.1f}" '
                        f'fill="{color}"/>'
                    )
            elif kind == "points":
                _, x, y, label, color = it
                for a, b in zip(sx(x).tolist(), sy(y).tolist(), strict=True):
                    out.append(f'<path d="M{a - 4:.1f},{b - 4:.1f} h8 l-4,7 z" fill="{color}"/>')
                legend.append((label, color, "point"))
            else:
                _, y, label, color = it
                py = float(sy(y))
                out.append(
                    f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{py:.1f}" y2="{py:.1f}" stroke="{color}" '
                    'stroke-dasharray="6 4"/>'
                )
                legend.append((label, color, "dash"))
        legend = [g for g in legend if g[0]]
        if legend:
            lw = 24 + 7 * max(len(g[0]) for g in legend)
            lx, ly = LEFT + pw - lw - 8, TOP + 8
            out.append(
                f'<rect x="{lx}" y="{ly}" width="{lw}" height="{8 + 16 * len(legend)}" fill="white" stroke="#ccc"/>'
            )
            for i, (label, color, how) in enumerate(legend):
                cy = ly + 12 + 16 * i
                if how == "point":
                    out.append(f'<path d="M{lx + 10},{cy - 4} h8 l-4,7 z" fill="{color}"/>')
                else:
                    dash = ' stroke-dasharray="4 3"' if how == "dash" else ""
                    out.append(
                        f'<line x1="{lx + 6}" x2="{lx + 22}" y1="{cy}" y2="{cy}" stroke="{color}" '
                        f'stroke-width="2"{dash}/>'
                    )
                out.append(f'<text x="{lx + 28}" y="{cy + 4}">{e(label)}</text>')
        out.append("</svg>")
        return "".join(out)

    def img(self) -> str:
        """The chart as an ``<img>`` of a data URI: the report stays one self-contained file."""
        data = base64.b64encode(self.svg().encode()).decode()
        return f'<img alt="chart: {html.escape(self.title)}" src="data:image/svg+xml;base64,{data}">'
