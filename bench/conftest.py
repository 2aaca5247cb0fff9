"""pytest-benchmark set-up: after the run, print each group's ratios to its baseline.

Run with ``pytest bench/ --benchmark-only``. Every benchmark sets ``extra_info["group"]``
through ``benchmark.group`` and one member per group sets ``extra_info["baseline"]``.
"""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    benches = getattr(session, "benchmarks", None) or []
    groups: dict[str, list] = {}
    for b in benches:
        groups.setdefault(b.group or "", []).append(b)
    for group, members in groups.items():
        base = [b for b in members if b.extra_info.get("baseline")]
        if not base:
            continue
        ref = base[0].stats.min
        terminalreporter.write_line(f"ratios in group {group!r} (baseline {base[0].name}, best rounds):")
        for b in members:
            per_op = b.extra_info.get("ops", 1)
            terminalreporter.write_line(
                f"  {b.name:45s} {ref / b.stats.min:6.2f} x baseline speed   ({per_op / b.stats.min / 1e6:.3f} M ops/s)"
            )
