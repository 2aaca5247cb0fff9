"""MQ constants with MQ's own numbers (docs/semantics.md §1), spelled the Python way.

Option sets are ``enum.IntFlag`` so that ``GMO.SYNCPOINT | GMO.WAIT`` reads like MQ code;
the engine converts them to plain ``int`` once per call, because IntFlag arithmetic is
slow on a hot path.
"""

from __future__ import annotations

import enum


class GMO(enum.IntFlag):
    """MQGMO.Options (get-message options)."""

    NONE = 0
    NO_WAIT = 0
    WAIT = 0x1
    SYNCPOINT = 0x2
    NO_SYNCPOINT = 0x4
    SET_SIGNAL = 0x8
    BROWSE_FIRST = 0x10
    BROWSE_NEXT = 0x20
    ACCEPT_TRUNCATED_MSG = 0x40
    MARK_SKIP_BACKOUT = 0x80
    MSG_UNDER_CURSOR = 0x100
    LOCK = 0x200
    UNLOCK = 0x400
    BROWSE_MSG_UNDER_CURSOR = 0x800
    SYNCPOINT_IF_PERSISTENT = 0x1000
    FAIL_IF_QUIESCING = 0x2000
    CONVERT = 0x4000
    LOGICAL_ORDER = 0x8000
    COMPLETE_MSG = 0x10000
    ALL_MSGS_AVAILABLE = 0x20000
    ALL_SEGMENTS_AVAILABLE = 0x40000


class PMO(enum.IntFlag):
    """MQPMO.Options (put-message options)."""

    NONE = 0
    SYNCPOINT = 0x2
    NO_SYNCPOINT = 0x4
    DEFAULT_CONTEXT = 0x20
    NEW_MSG_ID = 0x40
    NEW_CORREL_ID = 0x80
    PASS_IDENTITY_CONTEXT = 0x100
    PASS_ALL_CONTEXT = 0x200
    SET_IDENTITY_CONTEXT = 0x400
    SET_ALL_CONTEXT = 0x800
    ALTERNATE_USER_AUTHORITY = 0x1000
    FAIL_IF_QUIESCING = 0x2000
    NO_CONTEXT = 0x4000
    LOGICAL_ORDER = 0x8000


class OO(enum.IntFlag):
    """MQOO open options."""

    INPUT_AS_Q_DEF = 0x1
    INPUT_SHARED = 0x2
    INPUT_EXCLUSIVE = 0x4
    BROWSE = 0x8
    OUTPUT = 0x10
    INQUIRE = 0x20
    SET = 0x40
    SAVE_ALL_CONTEXT = 0x80
    PASS_IDENTITY_CONTEXT = 0x100
    PASS_ALL_CONTEXT = 0x200
    SET_IDENTITY_CONTEXT = 0x400
    SET_ALL_CONTEXT = 0x800
    ALTERNATE_USER_AUTHORITY = 0x1000
    FAIL_IF_QUIESCING = 0x2000
    BIND_ON_OPEN = 0x4000
    BIND_NOT_FIXED = 0x8000
    CO_OP = 0x20000
    RESOLVE_LOCAL_Q = 0x40000
    NO_READ_AHEAD = 0x80000
    READ_AHEAD = 0x100000
    BIND_ON_GROUP = 0x400000


class MO(enum.IntFlag):
    """MQMO match options."""

    NONE = 0
    MATCH_MSG_ID = 0x1
    MATCH_CORREL_ID = 0x2
    MATCH_GROUP_ID = 0x4
    MATCH_MSG_SEQ_NUMBER = 0x8
    MATCH_OFFSET = 0x10
    MATCH_MSG_TOKEN = 0x20


class MF(enum.IntFlag):
    """MQMF message flags (groups and segments)."""

    NONE = 0
    SEGMENTATION_INHIBITED = 0
    SEGMENTATION_ALLOWED = 0x1
    SEGMENT = 0x2
    LAST_SEGMENT = 0x4
    MSG_IN_GROUP = 0x8
    LAST_MSG_IN_GROUP = 0x10


class CC(enum.IntEnum):
    """MQ completion codes."""

    OK = 0
    WARNING = 1
    FAILED = 2


class Reason(enum.IntEnum):
    """MQ reason codes with MQ's numbers (docs/semantics.md §9)."""

    NONE = 0
    BACKED_OUT = 2003
    BUFFER_LENGTH_ERROR = 2005
    CONNECTION_BROKEN = 2009
    EXPIRY_ERROR = 2013
    GET_INHIBITED = 2016
    HOBJ_ERROR = 2019
    HCONN_ERROR = 2018
    SYNCPOINT_LIMIT_REACHED = 2024
    MD_ERROR = 2026
    MSG_TOO_BIG_FOR_Q = 2030
    MSG_TOO_BIG_FOR_Q_MGR = 2031
    NO_MSG_AVAILABLE = 2033
    NO_MSG_UNDER_CURSOR = 2034
    NOT_OPEN_FOR_BROWSE = 2036
    NOT_OPEN_FOR_INPUT = 2037
    NOT_OPEN_FOR_OUTPUT = 2039
    OBJECT_IN_USE = 2042
    OPTIONS_ERROR = 2046
    PERSISTENCE_ERROR = 2047
    PERSISTENT_NOT_ALLOWED = 2048
    PRIORITY_EXCEEDS_MAXIMUM = 2049
    PRIORITY_ERROR = 2050
    PUT_INHIBITED = 2051
    Q_DELETED = 2052
    Q_FULL = 2053
    Q_NOT_EMPTY = 2055
    Q_SPACE_NOT_AVAILABLE = 2056
    Q_TYPE_ERROR = 2057
    SECOND_MARK_NOT_ALLOWED = 2062
    SYNCPOINT_NOT_AVAILABLE = 2072
    TRUNCATED_MSG_ACCEPTED = 2079
    TRUNCATED_MSG_FAILED = 2080
    UNKNOWN_OBJECT_NAME = 2085
    WAIT_INTERVAL_ERROR = 2090
    Q_MGR_QUIESCING = 2161
    Q_MGR_NOT_AVAILABLE = 2059
    OBJECT_ALREADY_EXISTS = 2100
    INCONSISTENT_PERSISTENCE = 2185
    # Groups and segments (engine/groups/, docs/semantics.md §6).
    INCOMPLETE_GROUP = 2241
    INCOMPLETE_MSG = 2242
    INCONSISTENT_UOW = 2245
    INVALID_MSG_UNDER_CURSOR = 2246
    INCONSISTENT_BROWSE = 2259
    NO_MSG_LOCKED = 2209
    MSG_FLAGS_ERROR = 2249
    MSG_SEQ_NUMBER_ERROR = 2250
    OFFSET_ERROR = 2251
    MATCH_OPTIONS_ERROR = 2247
    MSG_TOKEN_ERROR = 2331
    PROPERTY_NAME_ERROR = 2442
    SELECTOR_SYNTAX_ERROR = 2459
    PROPERTY_TYPE_ERROR = 2473
    SELECTOR_ALWAYS_FALSE = 2504
    STORAGE_MEDIUM_FULL = 2192
    # The queue manager's memory budget is full (engine/budget.py: BLOCK after its wait, FAIL).
    STORAGE_NOT_AVAILABLE = 2071
    OBJECT_DAMAGED = 2101
    RESOURCE_PROBLEM = 2102
    # A call's work is made but its sync to disk failed (a warning: engine/getpath.py).
    OUTCOME_PENDING = 2124
    # Another call of the same connection is in progress (engine/handle.py).
    CALL_IN_PROGRESS = 2219
    # PCF (MQRCCF) reason for a queue attribute out of range on define / alter.
    PARM_VALUE_ERROR = 3229
    # Client connections (net/, docs/clients.md).
    HANDLE_NOT_AVAILABLE = 2017  # the server's limit of handles per connection
    MAX_CONNS_LIMIT_REACHED = 2025  # the server's limit of connections
    NOT_AUTHORIZED = 2035  # wrong or missing token, or no administration authority
    UNEXPECTED_ERROR = 2195  # the server failed in a way the call did not cause
    HOST_NOT_AVAILABLE = 2538  # nothing listens at the address given to connect()
    # Model and temporary dynamic queues (engine/dynamic.py).
    OBJECT_TYPE_ERROR = 2043  # a model queue where a local queue is needed, or the reverse
    # Distributed queuing (engine/distributed/, net/channels/, docs/channels.md).
    OPTION_NOT_VALID_FOR_TYPE = 2045  # a remote queue opened for anything but output
    Q_MGR_NAME_ERROR = 2058  # a data directory of another queue manager, or a bad name
    UNKNOWN_REMOTE_Q_MGR = 2087  # no route to the queue manager named
    XMIT_Q_USAGE_ERROR = 2091  # the transmission queue named is not usage=TRANSMISSION
    HEADER_ERROR = 2142  # a message on a transmission queue without a transmission header
    UNKNOWN_XMIT_Q = 2196  # the transmission queue named does not exist
    UNKNOWN_DEF_XMIT_Q = 2197  # the default transmission queue does not exist
    DEF_XMIT_Q_USAGE_ERROR = 2199  # the default transmission queue is not usage=TRANSMISSION
    CHANNEL_STOPPED_BY_USER = 2279  # a channel's call ended because the channel was stopped
    CHANNEL_NOT_AVAILABLE = 2537  # the partner refuses the channel (stopped, or not a receiver)
    UNKNOWN_CHANNEL_NAME = 2540  # the partner has no channel of that name
    # PCF (MQRCCF) reasons of channel commands.
    CHANNEL_ERROR = 3235  # the channel stopped: a sequence number mismatch, no dead-letter queue, ...
    CHANNEL_INDOUBT = 4025  # the command needs a channel that is not in doubt (resolve it first)
    CHANNEL_IN_USE = 4031  # the command needs a channel that is not running
    CHANNEL_NOT_FOUND = 4032  # no channel of that name is defined
    CHANNEL_NOT_ACTIVE = 4064  # the command needs a running channel


class DeliverySequence(enum.IntEnum):
    """MsgDeliverySequence (MQMDS)."""

    PRIORITY = 0
    FIFO = 1


class MemoryPolicy(enum.IntEnum):
    """What a put to a queue does once the queue manager's memory budget is reached
    (engine/budget.py; Artemis's address-full-policy): PAGE writes new messages out in
    blobs as they come, BLOCK waits for room (the queue's memory_wait_ms), FAIL refuses at
    once with MQRC_STORAGE_NOT_AVAILABLE (2071)."""

    PAGE = 0
    BLOCK = 1
    FAIL = 2


class Usage(enum.IntEnum):
    """Queue usage (MQUS): a transmission queue's messages can be assigned to channel batches."""

    NORMAL = 0
    TRANSMISSION = 1


class ChannelType(enum.StrEnum):
    """MQCHT: the two ends of a message channel (docs/channels.md)."""

    SENDER = "SENDER"
    RECEIVER = "RECEIVER"


class NpSpeed(enum.StrEnum):
    """NPMSPEED: whether non-persistent messages travel outside the batch's unit of work."""

    FAST = "FAST"
    NORMAL = "NORMAL"


class ChannelStatus(enum.StrEnum):
    """A channel's status (DISPLAY CHSTATUS): RUNNING while it moves messages, RETRYING while
    it tries to reach its partner again, INDOUBT while it is not running and its last batch
    is in doubt, STOPPED once stopped (by a user, or by an error it cannot retry), INACTIVE
    when it was never started, or ended itself after its disconnect interval; STARTING while
    a sender first reaches its partner."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    INDOUBT = "INDOUBT"
    STOPPED = "STOPPED"
    INACTIVE = "INACTIVE"


class IndexType(enum.IntEnum):
    """MQIT index types; the engine keeps hash indexes for these (later issue)."""

    NONE = 0
    MSG_ID = 1
    CORREL_ID = 2
    MSG_TOKEN = 4
    GROUP_ID = 5


class Persistence(enum.IntEnum):
    """MQPER_*: whether a message survives a restart of its queue manager (AS_Q_DEF: the
    queue's ``default_persistence``)."""

    NOT_PERSISTENT = 0
    PERSISTENT = 1
    AS_Q_DEF = 2


class GroupStatus(enum.StrEnum):
    """MQGS_*: where a got message stands in its group (a message's ``group_status``)."""

    NOT_IN_GROUP = " "
    MSG_IN_GROUP = "G"
    LAST_MSG_IN_GROUP = "L"


class SegmentStatus(enum.StrEnum):
    """MQSS_*: whether a got message is a segment, and its group's last one."""

    NOT_A_SEGMENT = " "
    SEGMENT = "S"
    LAST_SEGMENT = "L"


PRIORITY_AS_Q_DEF = -1
MAX_PRIORITY = 9
WAIT_UNLIMITED = -1
EXPIRY_UNLIMITED = -1

MSG_ID_LENGTH = 24
CORREL_ID_LENGTH = 24
GROUP_ID_LENGTH = 24
MSG_TOKEN_LENGTH = 16
MSGID_NONE = bytes(MSG_ID_LENGTH)
CORRELID_NONE = bytes(CORREL_ID_LENGTH)
GROUPID_NONE = bytes(GROUP_ID_LENGTH)
MSGTOKEN_NONE = bytes(MSG_TOKEN_LENGTH)

# Every option bit the engine understands; anything else is MQRC_OPTIONS_ERROR (§4.1 rule 9).
GMO_KNOWN = 0x7FFFF
PMO_KNOWN = 0xFFE6
OO_KNOWN = 0x5FFFFF
MO_KNOWN = 0x3F
MF_KNOWN = 0x1F
