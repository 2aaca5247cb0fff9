"""``sweepq inspect PATH``: what a data directory holds, without changing it.

The store and the engine are imported by the command when it runs, not with this module:
every ``sweepq`` command builds its parser from here (cli/main.py), and none of the others
needs them."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
from typing import TYPE_CHECKING

from .data import MQ_NAMES
from .serve import add_server_options

if TYPE_CHECKING:
    from sweepq.blobstore import BlobStore

# The attributes `sweepq inspect` always shows, by their MQ names (as DISPLAY QLOCAL shows them).
_MAIN = ("delivery_sequence", "default_priority", "default_persistence", "max_depth", "max_msg_length")
_SHOWN = {k: MQ_NAMES[k] for k in _MAIN}


def _plain(value):
    return value.name if isinstance(value, enum.Enum) and value.name else value


def _queues(store: BlobStore) -> dict[str, dict]:
    """Each stored queue definition with its persistent messages: those in records of their
    own, and those in the blobs of its chains that are persistent and not marked removed (the
    ones an open brings back; engine/durable/recovery.py)."""
    from sweepq.blobstore import BlobCorruptError
    from sweepq.engine import record
    from sweepq.engine.durable.layout import (
        MARK_REMOVED,
        decode_definition,
        decode_value,
        is_queue_object,
        queue_prefix,
    )
    from sweepq.engine.queue import QueueAttributes

    swept: dict[str, list[tuple[bytes, int]]] = {}
    for chain, ids in store.chains().items():  # chain names are b"QUEUE/priority"
        name = chain.decode(errors="replace").rpartition("/")[0]
        swept.setdefault(name, []).extend((chain, b) for b in ids)
    out = {}
    for name_b, value in sorted(store.objects().items()):
        if not is_queue_object(name_b):
            continue  # the queue manager's own attributes, remote queues, channels
        name = name_b.decode(errors="replace")
        damaged: list[str] = []
        try:
            attrs = QueueAttributes(**decode_definition(value)).validated()
            shown = {f.name: _plain(getattr(attrs, f.name)) for f in dataclasses.fields(attrs)}
        except Exception as e:  # MQError, TypeError, ValueError: what an open would leave out too
            shown = None
            damaged.append(f"its definition cannot be read ({' '.join(str(e).split())})")
        own = store.messages(queue_prefix(name))
        in_records = sum(decode_value(v) is not None for _, v in own)
        if in_records < len(own):
            damaged.append(f"{len(own) - in_records} damaged message record(s)")
        in_blobs = 0
        for chain, blob_id in swept.get(name, []):
            try:
                records = store.read(blob_id, chain, None)
                marks = store.marks(blob_id)
            except BlobCorruptError as e:
                damaged.append(" ".join(str(e).split()))
                continue
            in_blobs += sum(
                1
                for pos, rec in enumerate(records)
                if rec[record.OFF_FLAGS] & record.PERSISTENT and marks.get(pos) != MARK_REMOVED
            )
        out[name] = {
            "attributes": shown,
            "persistent_messages": in_records + in_blobs,
            "persistent_in_blobs": in_blobs,
            "damaged": damaged,
        }
    return out


def _attribute_text(attrs: dict) -> str:
    """The main attributes, then any other that is not its default, MQ-style."""
    from sweepq.engine.queue import QueueAttributes

    defaults = QueueAttributes()
    parts = [f"{mq}({attrs[k]})" for k, mq in _SHOWN.items()]
    for k, v in attrs.items():
        if k not in _SHOWN and v != _plain(getattr(defaults, k)):
            parts.append(f"{k}={v}")
    return " ".join(parts)


def describe(path: str, as_json: bool = False) -> str:
    """The report of ``sweepq inspect``: queues, chains, pending blobs, dictionaries and the
    statistics at the last close, as text or JSON; the store is opened read-only."""
    from sweepq.blobstore import BlobStore, StoreError
    from sweepq.engine.manager import STATS_FILE

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
        queues = _queues(store)
        dictionaries = {k.decode(errors="replace"): v for k, v in store.dictionaries().items()}
    finally:
        store.close()
    stats = None
    stats_path = os.path.join(path, STATS_FILE)
    if os.path.exists(stats_path):
        with open(stats_path) as f:
            stats = json.load(f)
    report = {
        "path": path,
        "queues": queues,
        "chains": chains,
        "pending_blobs": len(pending),
        "dictionaries": dictionaries,
        "last_stats": stats,
    }
    if as_json:
        return json.dumps(report, indent=2)
    lines = [f"sweepq store at {path}"]
    if not queues:
        lines.append("  no queues defined")
    for name, q in queues.items():
        n, swept = q["persistent_messages"], q["persistent_in_blobs"]
        where = f" ({swept:,} in blobs)" if swept else ""
        lines.append(f"  queue {name}: {n:,} persistent message{'' if n == 1 else 's'}{where}")
        if q["attributes"] is not None:
            lines.append(f"    {_attribute_text(q['attributes'])}")
        lines += [f"    damaged: {d}" for d in q["damaged"]]
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


# -- the command ------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    def bad(why: str) -> int:
        name = "path" if args.data_dir is None else "--data-dir"
        print(
            f"sweepq inspect: error: argument {name}: {why}; pass a data directory that QueueManager.open(path) wrote",
            file=sys.stderr,
        )
        return 2

    if args.server is not None:  # a running server's view: cli/serve.py
        from .serve import inspect_server

        return inspect_server(args)
    if args.path is None and args.data_dir is None:
        print(
            "sweepq inspect: error: the following arguments are required: path (or --data-dir DIR) "
            "(see 'sweepq inspect --help')",
            file=sys.stderr,
        )
        return 2
    if args.path is not None and args.data_dir is not None and args.path != args.data_dir:
        return bad(f"{args.data_dir} and the path {args.path} differ; give one of them")
    args.path = args.path if args.path is not None else args.data_dir
    if not os.path.exists(args.path):
        return bad(f"{args.path} does not exist")
    if not os.path.isdir(args.path):
        return bad(f"{args.path} is not a directory")
    try:
        text = describe(args.path, as_json=args.json)
    except Exception as e:  # the store's errors already say what is wrong
        return bad(" ".join(str(e).split()))
    print(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``inspect`` to the ``sweepq`` subparsers ``sub``."""
    i = sub.add_parser(
        "inspect",
        help="show what a data directory holds",
        description="Open a sweepq data directory read-only and print its chains, blobs,\n"
        "dictionaries and the statistics its queue manager left at close.",
        epilog="examples:\n  sweepq inspect --data-dir ./queues\n  sweepq inspect ./queues --json",
    )
    i.add_argument("path", nargs="?", help="the data directory (QueueManager.open(path)), or give --data-dir")
    i.add_argument("--data-dir", metavar="DIR", help="the data directory, as for define, put, get and browse")
    i.add_argument("--json", action="store_true", help="print as JSON")
    add_server_options(i)  # instead: a running server's queues and connections (sweepq status)
    i.set_defaults(func=_inspect)
