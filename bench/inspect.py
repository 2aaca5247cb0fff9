"""``sweepq inspect PATH``: what a data directory holds, without changing it."""

from __future__ import annotations

import json
import os

from sweepq.blobstore import BlobStore, StoreError
from sweepq.engine.manager import STATS_FILE


def describe(path: str, as_json: bool = False) -> str:
    if not os.path.isdir(path):
        raise StoreError(f"{path} is not a directory")
    store = BlobStore(path, read_only=True)
    try:
        chains = {}
        for name, ids in sorted(store.chains().items()):
            heads = [store.blob_header(b) for b in ids]
            chains[name.decode(errors="replace")] = {
                "blobs": len(ids),
                "records": sum(h.count for h in heads),
                "raw_bytes": sum(h.raw_len for h in heads),
                "compressed_bytes": sum(h.comp_len for h in heads),
            }
        pending = store.pending()
        dictionaries = {k.decode(errors="replace"): v for k, v in store._scope_dict.items()}
    finally:
        store.close()
    stats = None
    stats_path = os.path.join(path, STATS_FILE)
    if os.path.exists(stats_path):
        with open(stats_path) as f:
            stats = json.load(f)
    report = {
        "path": path,
        "chains": chains,
        "pending_blobs": len(pending),
        "dictionaries": dictionaries,
        "last_stats": stats,
    }
    if as_json:
        return json.dumps(report, indent=2)
    lines = [f"sweepq store at {path}"]
    if not chains:
        lines.append("  no swept messages (every chain is empty)")
    for name, c in chains.items():
        ratio = c["raw_bytes"] / c["compressed_bytes"] if c["compressed_bytes"] else 0
        lines.append(
            f"  chain {name:20s} {c['blobs']:6d} blobs {c['records']:10,d} records "
            f"{c['raw_bytes'] / 1e6:9.2f} MB raw -> {c['compressed_bytes'] / 1e6:8.2f} MB ({ratio:.1f}x)"
        )
    lines.append(f"  pending blobs (in no chain): {len(pending)}")
    if dictionaries:
        lines.append("  trained dictionaries: " + ", ".join(f"{k} -> {v}" for k, v in dictionaries.items()))
    if stats:
        lines.append("  statistics at the last close:")
        keys = [
            "msgs_in_memory",
            "msgs_swept",
            "blobs",
            "sweeps",
            "unsweeps",
            "readahead_hits",
            "readahead_misses",
            "damaged_blobs",
            "lock_hold_p99_ms",
            "write_seconds",
        ]
        lines.append("    " + f"{'queue':16s}" + "".join(f"{k:>18s}" for k in keys) + "  aborts")
        for q, s in stats.items():
            aborts = ", ".join(f"{r}={n}" for r, n in s["aborts"].items() if n) or "-"
            vals = "".join(f"{s[k]:>18.3f}" if isinstance(s[k], float) else f"{s[k]:>18,d}" for k in keys)
            lines.append(f"    {q:16s}{vals}  {aborts}")
    return "\n".join(lines)
