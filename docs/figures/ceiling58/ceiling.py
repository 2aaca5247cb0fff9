"""8 producers against one under ``sync="commit"``, beside the ceiling measured in the same
rounds (issue 31): ``sweepq.bench.durable.producers`` (the bench's own rows: persistent puts
outside syncpoint, put+commit, and the bare floors of the same thread counts), once per fresh
process, ``RUNS`` times. Each line: each kind's 1 and 8 thread rates (best round), the
messages one fdatasync call covered with 8, and the paired ratio; then sweepq's ratios as a
share of the ceiling, the better bare floor's.

ceiling.txt was made at 40c230c, when the bench had one bare floor (the group commit);
two-floors.txt by this version, with the fdatasync per write beside it.

Usage: python docs/figures/ceiling58/ceiling.py DIR MESSAGES ROUNDS RUNS > docs/figures/ceiling58/two-floors.txt
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def child(base: str, n: int, rounds: int) -> str:
    from sweepq.bench import durable as d

    r = d.producers(n, 1024, 8, rounds, base=base)
    parts, ratio = [], {}
    for kind in ("put", "put+commit", *d.BARES):  # the bench's own kinds, by its own names
        one, eight = r[f"{kind}, 1 producer"], r[f"{kind}, 8 producers"]
        ratio[kind] = eight["ratio_vs_one"]
        parts.append(
            f"{kind}: 1 {one['per_s']:6.0f}/s, 8 {eight['per_s']:6.0f}/s "
            f"({1 / eight['syncs_per_msg']:.1f} a sync), {eight['ratio_vs_one']:.2f} x"
        )
    bare = r["ceiling"]
    share = f"of the ceiling: put {ratio['put'] / bare:.2f}, put+commit {ratio['put+commit'] / bare:.2f}"
    return "; ".join(parts) + f"; {share}; load {os.getloadavg()[0]:.2f}"


def main() -> None:
    if sys.argv[1] == "--child":
        print(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
        return
    base, n, rounds, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(base, exist_ok=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# python docs/figures/ceiling58/ceiling.py {base} {n} {rounds} {runs}; commit {head}; {when}")
    for i in range(1, runs + 1):
        out = subprocess.run(
            [sys.executable, __file__, "--child", base, str(n), str(rounds)], capture_output=True, text=True, check=True
        ).stdout.strip()
        print(f"run {i}: {out}")


if __name__ == "__main__":
    main()
