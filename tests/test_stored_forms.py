"""What a durable put and get write of a record, made in one allocation each (issue 31):
``record.pinned`` (a plain record with its MsgId written out) is ``pin_msg_id(plain(...))``,
and ``checked.stored_key`` / ``stored_value`` (the key and the crc-led value, the crc32
checked.py's own in the compiled form: PCLMULQDQ folding from 64 bytes where the CPU can, a
slice-by-8 loop for the rest) are engine/durable/layout.py's ``message_key`` /
``encode_value``: byte for byte, in this process's form and in the interpreted one
(SWEEPQ_PURE=1), on payloads of every length around the crc loop's 8-byte steps."""

from __future__ import annotations

import inspect
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from sweepq.engine import record
from sweepq.engine.durable import checked, layout

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = b"QM1     \x01\x02\x03\x04"


def cases(seed: int = 7) -> list[tuple]:
    """(seq, put_us, priority, persistent, payload, prefix, lane) of records to write."""
    rnd = random.Random(seed)
    sizes = [*range(0, 40), 255, 1024, 1025, 4099, 70_000]
    out = []
    for size in sizes:
        out.append(
            (
                rnd.choice([0, 1, 255, 256, 2**32 + 5, 2**64 - 1, rnd.randrange(2**64)]),
                rnd.choice([0, 1_700_000_000_123_456, -1, 2**62]),
                rnd.randrange(10),
                rnd.random() < 0.8,
                rnd.randbytes(size),
                rnd.choice([b"Q\x00", b"a.long.queue.name.of.the.kind.people.use\x00", b"\x00"]),
                rnd.randrange(256),
            )
        )
    return out


def made(rows: list[tuple]) -> list[tuple[bytes, bytes, bytes]]:
    """Each case's (pinned record, stored key, stored value), by the fast functions."""
    ident = record.Identity(RUN_ID)
    out = []
    for seq, put_us, priority, persistent, payload, prefix, lane in rows:
        rec = record.pinned(seq, put_us, priority, persistent, payload, ident)
        out.append((rec, checked.stored_key(prefix, lane, rec), checked.stored_value(rec)))
    return out


_INTERPRETED = (
    "import pickle, sys\n"
    "from sweepq.engine import record\n"
    "from sweepq.engine.durable import checked\n"
    "assert record.__file__.endswith('.py') and checked.__file__.endswith('.py')\n"
    f"RUN_ID = {RUN_ID!r}\n"
    + inspect.getsource(made)
    + "sys.stdout.buffer.write(pickle.dumps(made(pickle.load(sys.stdin.buffer))))\n"
)


def test_the_fast_forms_make_what_layout_and_pin_msg_id_make():
    ident = record.Identity(RUN_ID)
    rows = cases()
    for row, (rec, key, value) in zip(rows, made(rows), strict=True):
        seq, put_us, priority, persistent, payload, prefix, lane = row
        assert rec == record.pin_msg_id(record.plain(seq, put_us, priority, persistent, payload), ident)
        assert record.data_of(rec) == payload and record.seq_of(rec) == seq
        assert ident.msg_id(rec) == ident.msg_id(record.plain(seq, put_us, priority, persistent, b""))
        assert key == layout.message_key(prefix, lane, rec)
        assert layout.key_parts(key)[1:] == (lane, seq)
        assert value == layout.encode_value(rec) and layout.decode_value(value) == rec


def test_a_flipped_bit_fails_the_crc_stored_value_wrote():
    rec = record.pinned(5, 0, 1, True, bytes(range(256)) * 4, record.Identity(RUN_ID))
    value = checked.stored_value(rec)
    for bit in range(0, 8 * len(value), 13):
        bad = bytearray(value)
        bad[bit // 8] ^= 1 << (bit % 8)
        assert layout.decode_value(bytes(bad)) is None


@pytest.mark.parametrize("lane", [-1, 256])
def test_a_lane_past_a_byte_is_refused_as_layout_refuses_it(lane):
    rec = record.plain(1, 0, 0, True, b"x")
    with pytest.raises((ValueError, OverflowError)):
        layout.message_key(b"Q\x00", lane, rec)
    with pytest.raises((ValueError, OverflowError)):
        checked.stored_key(b"Q\x00", lane, rec)


def test_both_forms_make_the_same_bytes():
    rows = cases(11)
    out = subprocess.run(
        [sys.executable, "-c", _INTERPRETED],
        input=pickle.dumps(rows),
        env={**os.environ, "SWEEPQ_PURE": "1"},
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert pickle.loads(out.stdout) == made(rows)
