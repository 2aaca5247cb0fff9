"""The durable bench's producer rows alone (bench/durable.py ``producers``: 1 and 8 threads,
rounds interleaved), one line a run: the put+commit and put rows' rates and paired ratios.
Usage: python producers.py DIR MESSAGES ROUNDS"""

from __future__ import annotations

import os
import sys

from sweepq.bench.durable import producers


def main(base: str, n: int, rounds: int) -> None:
    r = producers(n, 1024, 8, rounds, base=base)
    one, eight, put = r["put+commit, 1 producer"], r["put+commit, 8 producers"], r["put, 8 producers"]
    print(
        f"put+commit: 1 producer {one['per_s']:5.0f}/s, 8 producers {eight['per_s']:5.0f}/s"
        f" ({eight['syncs_per_msg']:.2f} syncs a message), {eight['ratio_vs_one']:.2f} x;"
        f" put: {put['ratio_vs_one']:.2f} x; load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
