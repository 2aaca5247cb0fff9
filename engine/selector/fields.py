"""Descriptor fields a selector can name, and how each is read straight from a record.

The names are IBM MQ's message-property names for MQMD fields (``Root.MQMD.<Field>``) and
the JMS header names that IBM MQ maps onto the MQMD (docs/semantics.md §10.2). Each getter
reads only its own bytes of the record, so a selector on Priority decodes nothing else.
Invariant: a getter returns what ``msg.md`` would show for that field (bytes for ids,
ints for numbers), or the JMS form IBM MQ documents (``'ID:<hex>'`` for ids, NULL for an
id that is NONE, delivery mode ``'PERSISTENT'`` / ``'NON_PERSISTENT'`` as the JMS
selector rules say, timestamp in milliseconds).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from .. import record
from ..constants import CORRELID_NONE, GROUPID_NONE

_PUT_US = struct.Struct("<q")
_OFF_PUT_US = record.OFF_SEQ + 8
_GROUP = struct.Struct("<24sIII")

Getter = Callable[[bytes, record.Identity], object]


def _put_us(rec: bytes) -> int:
    return _PUT_US.unpack_from(rec, _OFF_PUT_US)[0]


def _group(rec: bytes) -> tuple[bytes, int, int, int]:
    off = record._sections(rec)[2]
    if off < 0:
        return GROUPID_NONE, 1, 0, 0
    return _GROUP.unpack_from(rec, off)


def _jms_id(value: bytes, none: bytes) -> str | None:
    return None if value == none else "ID:" + value.hex()


def _put_time(rec: bytes, _ident) -> str:
    us = _put_us(rec)
    t = time.gmtime(us // 1_000_000)
    return time.strftime("%H%M%S", t) + f"{us // 10_000 % 100:02d}"


def _put_date(rec: bytes, _ident) -> str:
    return time.strftime("%Y%m%d", time.gmtime(_put_us(rec) // 1_000_000))


DESCRIPTOR: dict[str, Getter] = {
    "Root.MQMD.MsgId": lambda rec, ident: ident.msg_id(rec),
    "Root.MQMD.CorrelId": lambda rec, _i: record.correl_id(rec),
    "Root.MQMD.Priority": lambda rec, _i: rec[record.OFF_PRIORITY],
    "Root.MQMD.Persistence": lambda rec, _i: rec[record.OFF_FLAGS] & record.PERSISTENT,
    "Root.MQMD.BackoutCount": lambda rec, _i: record.backout_of(rec),
    "Root.MQMD.GroupId": lambda rec, _i: _group(rec)[0],
    "Root.MQMD.MsgSeqNumber": lambda rec, _i: _group(rec)[1],
    "Root.MQMD.Offset": lambda rec, _i: _group(rec)[2],
    "Root.MQMD.MsgFlags": lambda rec, _i: _group(rec)[3],
    "Root.MQMD.PutTime": _put_time,  # 'HHMMSSTH', UTC, as MQ's MQMD.PutTime
    "Root.MQMD.PutDate": _put_date,  # 'YYYYMMDD', UTC
    "Root.MQMD.ReplyToQ": lambda rec, _i: record.reply_to(rec)[0],
    "Root.MQMD.ReplyToQMgr": lambda rec, _i: record.reply_to(rec)[1],
    "JMSPriority": lambda rec, _i: rec[record.OFF_PRIORITY],
    # JMS selectors compare the delivery mode with the strings, not with the constants 1 / 2.
    "JMSDeliveryMode": lambda rec, _i: "PERSISTENT" if rec[record.OFF_FLAGS] & record.PERSISTENT else "NON_PERSISTENT",
    "JMSMessageID": lambda rec, ident: "ID:" + ident.msg_id(rec).hex(),
    "JMSCorrelationID": lambda rec, _i: _jms_id(record.correl_id(rec), CORRELID_NONE),
    "JMSTimestamp": lambda rec, _i: _put_us(rec) // 1000,
    "JMSXDeliveryCount": lambda rec, _i: record.backout_of(rec) + 1,
    "JMSXGroupID": lambda rec, _i: _jms_id(_group(rec)[0], GROUPID_NONE),
    "JMSXGroupSeq": lambda rec, _i: _group(rec)[1],
}
