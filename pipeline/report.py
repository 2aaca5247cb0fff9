"""The HTML report of a replay: headline figures, charts and tables in one self-contained file.

The charts over time are SVG drawn here (pipeline/svg.py), the what-if grid's a matplotlib
PNG; each is embedded (base64), so the file opens anywhere, offline, and prints as it looks;
the figures it shows are few enough that an interactive library (and its JavaScript) buys
nothing. Every chart has one unit per axis, labelled; time is in seconds or minutes from the
trace's start; sizes are in B / kB / MB / GB (powers of 1000) and counts carry thousands
separators.
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np

from sweepq.sweeper.replay import M

_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))


def byte_unit(peak: float) -> tuple[float, str]:
    """The (divisor, name) of the largest unit that keeps ``peak`` at 1 or more."""
    for div, name in _UNITS:
        if peak >= div:
            return div, name
    return 1.0, "B"


def human_bytes(n: float) -> str:
    """1013831 -> '1.01 MB'."""
    div, name = byte_unit(abs(n))
    return f"{n:,.0f} B" if name == "B" else f"{n / div:,.2f} {name}"


def human_seconds(s: float) -> str:
    if s < 120:
        return f"{s:,.1f} s"
    if s < 7200:
        return f"{s / 60:,.1f} min"
    return f"{s / 3600:,.1f} h"


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="chart" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _time_axis(n: int, interval_s: float) -> tuple[np.ndarray, str]:
    """Interval ends as time from the trace's start, in seconds or minutes."""
    t = (np.arange(n) + 1) * interval_s
    if len(t) and t[-1] > 600:
        return t / 60, "time from the trace's start (min)"
    return t, "time from the trace's start (s)"


def charts(totals: np.ndarray, interval_s: float, budget: int = 0) -> list[str]:
    """Memory over time; volume read back per interval; messages swept and re-swept per
    interval. SVG (pipeline/svg.py): a few milliseconds where matplotlib's PNGs took tenths of
    a second of the run."""
    from .svg import Chart

    x, xlabel = _time_axis(len(totals), interval_s)
    out = []
    mem, nosweep = totals[:, M["mem_bytes"]], totals[:, M["nosweep_bytes"]]
    div, unit = byte_unit(max(float(nosweep.max(initial=0)), float(mem.max(initial=0))))
    # When the sweeper keeps memory far below the unswept line, a linear axis shows it as zero.
    log = mem.max(initial=0) > 0 and nosweep.max(initial=0) > 20 * mem.max(initial=0)
    ylabel = f"in memory ({unit}{', log scale' if log else ''})"
    c = Chart("Message bytes in memory, all queues", xlabel, ylabel)
    c.line(x, nosweep / div, "without sweeping", "#d62728").line(x, mem / div, "with the sweeper", "#1f77b4")
    if budget:
        c.hline(budget / div, "memory budget", "#555")
        acted = totals[:, M["budget_msgs"]] > 0
        if acted.any():
            c.points(x[acted], mem[acted] / div, "budget swept beyond the rule", "#555")
    c.log = bool(log)
    if log:
        c.yfmt = lambda v: f"{v:,.3g}"
    elif div != 1:
        c.yfmt = lambda v: f"{v:,.1f}"
    out.append(c.img())

    read = totals[:, M["bytes_read"]]
    div, unit = byte_unit(float(read.max(initial=0)))
    c = Chart(
        f"Bytes read back from blobs by gets, per {interval_s:g} s interval", xlabel, f"read back ({unit})", height=300
    )
    c.bars(x, read / div, width=(x[1] - x[0]) * 0.9 if len(x) > 1 else 1, color="#2ca02c")
    c.yfmt = lambda v: f"{v:,.4g}"
    out.append(c.img())

    c = Chart(f"Messages moved into blobs, per {interval_s:g} s interval", xlabel, "messages", height=300)
    c.line(x, totals[:, M["msgs_written"]], "swept", "#9467bd")
    c.line(x, totals[:, M["msgs_reswept"]], "of them swept before (re-swept)", "#ff7f0e")
    out.append(c.img())
    return out


def warm_up() -> None:
    """Draw one small chart as matplotlib draws the what-if grid's (a line, a legend, titles,
    a formatted axis, PNG) and drop it: matplotlib's first chart loads its backend, fonts and
    text layout (a few tenths of a second, several times a later chart's cost), which a driver
    that idles meanwhile pays here instead of in its report (pipeline/job.py runs it on a
    thread while Spark starts, for a run with a grid). One chart: the later ones cost only
    their own drawing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0.0, 1.0], [0.0, 1.0], label="warm-up", color="#1f77b4")
    ax.set(title="warm-up", xlabel="time (s)", ylabel="memory (MB)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(alpha=0.3)
    ax.legend()
    _png(fig)


def _label(g: dict) -> str:
    rule = g.get("rule", "seed")
    return f"{rule}: {g['interval_s']:g} s, y>{g['factor']}x, x+{g['extra']}, {human_bytes(g['blob_bytes'])}"


def grid_chart(grid: list[dict]) -> str:
    """Peak memory and volume read back for each combination of the what-if grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [_label(g) for g in grid]
    peak = np.array([g.get("peak_mem_bytes", 0) for g in grid], float)
    read = np.array([g.get("bytes_read", 0) for g in grid], float)
    y = np.arange(len(grid))
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(grid) + 1.6), sharey=True)
    for ax, vals, title, color in (
        (axes[0], peak, "peak memory with the sweeper", "#1f77b4"),
        (axes[1], read, "read back by gets", "#2ca02c"),
    ):
        div, unit = byte_unit(float(vals.max(initial=0)))
        ax.barh(y, vals / div, color=color)
        ax.set(title=title, xlabel=unit)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    fig.suptitle("What-if grid: rule, interval, sweep when y > factor x, buffer x + extra, blob size", y=1.04)
    return _png(fig)


def _row(cells) -> str:
    return "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


def _table(header, rows) -> str:
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
    return f'<table class="t">{head}{"".join(_row(r) for r in rows)}</table>'


def headline(overall: dict) -> list[tuple[str, str]]:
    """The figures at the top of the report, as (label, human value)."""
    rows = [
        ("events", f"{overall['events']:,}"),
        ("queues", f"{overall['queues']:,}"),
        ("intervals", f"{overall['intervals']:,} of {overall.get('interval_s', 5.0):g} s"),
        ("peak memory with the sweeper", human_bytes(overall["peak_memory_with_sweeper_bytes"])),
        ("peak memory without sweeping", human_bytes(overall["peak_memory_without_sweeping_bytes"])),
        ("memory saved at the peak", human_bytes(overall["peak_memory_saved_bytes"])),
        ("read back by gets", f"{human_bytes(overall['bytes_read_back'])} in {overall['blobs_read_back']:,} blobs"),
        ("blobs written", f"{overall['blobs_written']:,}"),
        (
            "messages swept",
            f"{overall['msgs_swept']:,}, of which re-swept {overall['msgs_reswept']:,} "
            f"({overall['reswept_share']:.1%})",
        ),
    ]
    if overall.get("memory_budget_bytes"):
        rows.append(
            (
                "memory budget",
                f"{human_bytes(overall['memory_budget_bytes'])}: acted in {overall.get('budget_intervals', 0):,} "
                f"intervals, sweeping {overall.get('budget_msgs', 0):,} messages beyond the rule",
            )
        )
    if "rule" in overall:
        rows.append(("rule", overall["rule"]))
    if "seconds" in overall:
        rows += speed_rows(overall)
    return rows


def speed_rows(overall: dict) -> list[tuple[str, str]]:
    """The pipeline's speed: run time and events/s after the JVM's start and with it, the
    layout (made, reused or given, and its time) and each stage's time."""
    stages = overall.get("stage_seconds", {})
    jvm = stages.get("spark_start", 0.0)
    rows = [
        ("run time (after the JVM start)", human_seconds(overall["seconds"])),
        (
            "events per second",
            f"{overall['events_per_second']:,} after the JVM start; "
            f"{overall.get('events_per_second_with_jvm_start', 0):,} with its {human_seconds(jvm)} start",
        ),
    ]
    lay = overall.get("layout")
    if lay:
        said = {
            "given": "none needed: the trace is laid out by queue",
            "reused": f"reused from {lay['directory']} (made by the {lay['made_by']} shuffle in "
            f"{human_seconds(lay['seconds_when_made'] or 0)})",
            "made": f"made by the {lay['made_by']} shuffle in {human_seconds(lay['seconds'])}, kept in "
            f"{lay['directory']}",
            "direct": "none made: each replay task read the whole trace and replayed the queues of its bucket",
        }[lay["how"]]
        rows.append(("layout by queue", said))
    if stages:
        names = {"spark_start": "JVM start", "warm_up": "workers' warm-up"}
        rows.append(("stages", ", ".join(f"{names.get(k, k)} {human_seconds(v)}" for k, v in stages.items())))
    return rows


def restamp(html_text: str, before: dict, after: dict) -> str:
    """The report with its headline figures taken from ``after`` instead of ``before`` (the
    run's time is known only once the report itself is made)."""
    return html_text.replace(
        _table(["figure", "value"], headline(before)), _table(["figure", "value"], headline(after))
    )


def render(totals: np.ndarray, top, overall: dict, grid: list[dict] | None) -> str:
    """The report. ``totals``: per-interval sums (METRICS columns); ``top``: rows (dicts) of
    the queues that save the most at their peak; ``grid``: per-combination figures or None."""
    interval_s = float(overall.get("interval_s", 5.0))
    cards = _table(["figure", "value"], headline(overall))
    budget = int(overall.get("memory_budget_bytes", 0))
    imgs = "".join(f"<p>{c}</p>" for c in charts(totals, interval_s, budget)) if len(totals) else ""
    queue_rows = [
        (
            r["queue"],
            human_bytes(r["peak_nosweep_bytes"]),
            human_bytes(r["peak_mem_bytes"]),
            human_bytes(r["peak_saved_bytes"]),
            human_bytes(r["bytes_read"]),
            f"{int(r['sweeps']):,}",
            f"{int(r['msgs_swept']):,}",
            f"{int(r['msgs_reswept']):,}",
        )
        for r in top
    ]
    queues = _table(
        [
            "queue",
            "peak without sweeping",
            "peak with the sweeper",
            "saved at the peak",
            "read back",
            "sweeps",
            "swept",
            "re-swept",
        ],
        queue_rows,
    )
    grid_html = ""
    if grid:
        grid_rows = [
            (
                g.get("rule", "seed"),
                f"{g['interval_s']:g} s",
                g["factor"],
                g["extra"],
                human_bytes(g["blob_bytes"]),
                human_bytes(g.get("peak_mem_bytes", 0)),
                human_bytes(g.get("bytes_read", 0)),
                f"{g.get('msgs_swept', 0):,}",
                f"{g.get('msgs_reswept', 0):,}",
                f"{g.get('msgs_reswept', 0) / g['msgs_swept']:.1%}" if g.get("msgs_swept") else "-",
            )
            for g in grid
        ]
        grid_html = (
            "<h2>What-if grid</h2>"
            + f"<p>{grid_chart(grid)}</p>"
            + _table(
                [
                    "rule",
                    "interval",
                    "factor",
                    "extra",
                    "blob size",
                    "peak memory",
                    "read back",
                    "swept",
                    "re-swept",
                    "re-swept share",
                ],
                grid_rows,
            )
        )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>sweepq memory-pressure report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}} table.t{{border-collapse:collapse;font-size:13px}}
table.t td,table.t th{{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}}
table.t td:first-child,table.t th:first-child{{text-align:left}} img{{max-width:100%}}</style></head><body>
<h1>sweepq memory-pressure report</h1>
<p>The slow queue sweeper's rule replayed over a message trace: memory with and without the sweeper,
and what unsweeping costs.</p>
{cards}
<h2>Over time</h2>{imgs}
<h2>Queues that save the most memory at their peak</h2>{queues}
{grid_html}
</body></html>"""
