"""The HTML report: inline SVG plots and tables, one self-contained file, no plotting library."""

from __future__ import annotations

import html

import pandas as pd


def _svg_lines(series: dict[str, list[float]], title: str, unit: str, width=760, height=240) -> str:
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    n = max((len(v) for v in series.values()), default=0)
    top = max((max(v) for v in series.values() if v), default=0) or 1
    pad = 40

    def pt(i, v):
        x = pad + (width - 2 * pad) * (i / max(1, n - 1))
        y = height - pad - (height - 2 * pad) * (v / top)
        return f"{x:.1f},{y:.1f}"

    parts = [
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" role="img">',
        f'<text x="{pad}" y="18" font-size="14">{html.escape(title)}</text>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>',
        f'<text x="{pad}" y="{pad - 6}" font-size="11">{top:,.0f} {html.escape(unit)}</text>',
        f'<text x="{width - pad}" y="{height - pad + 16}" font-size="11" text-anchor="end">interval {n - 1}</text>',
    ]
    for k, (name, vals) in enumerate(series.items()):
        c = colors[k % len(colors)]
        pts = " ".join(pt(i, v) for i, v in enumerate(vals))
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
        parts.append(
            f'<text x="{width - pad}" y="{pad + 14 * k}" font-size="11" fill="{c}" '
            f'text-anchor="end">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(df: pd.DataFrame, limit: int = 30) -> str:
    return df.head(limit).to_html(index=False, float_format=lambda v: f"{v:,.2f}", border=0, classes="t")


def render(totals: pd.DataFrame, per_queue: pd.DataFrame, overall: dict, grid: pd.DataFrame | None) -> str:
    mem = _svg_lines(
        {
            "in memory with the sweeper": list(totals["mem_bytes"] / 1e6),
            "without sweeping": list(totals["nosweep_bytes"] / 1e6),
        },
        "Memory over time, all queues",
        "MB",
    )
    back = _svg_lines(
        {
            "read back by gets": list(totals["bytes_read"] / 1e6),
            "written by sweeps (messages)": list(totals["swept_msgs"] / 1e3),
        },
        "Unsweep volume per interval (MB) and swept messages (thousands)",
        "",
    )
    top = per_queue.sort_values("peak_saved_bytes", ascending=False)
    cards = "".join(f"<li><b>{html.escape(k)}</b>: {v}</li>" for k, v in overall.items())
    grid_html = ""
    if grid is not None and len(grid):
        g = grid.groupby(["interval_s", "factor", "extra", "blob_bytes"], as_index=False).agg(
            peak_mem_bytes=("peak_mem_bytes", "sum"), bytes_read=("bytes_read", "sum"), sweeps=("sweeps", "sum")
        )
        grid_html = "<h2>What-if grid (sum over queues)</h2>" + _table(g, 200)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>sweepq memory-pressure report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:900px}} table.t{{border-collapse:collapse;font-size:12px}}
table.t td,table.t th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}}</style></head><body>
<h1>sweepq memory-pressure report</h1><ul>{cards}</ul>
{mem}{back}
<h2>Queues that save the most memory at their peak</h2>{_table(top)}
{grid_html}
</body></html>"""
