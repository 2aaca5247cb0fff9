"""The plan: which settings of the sweep rule a workload should run with (``sweepq plan``).

Pure logic, no I/O and no compiler: the grid of settings (:func:`parse_grid`, from ranges or a
file's text), each setting's outcome from its replay's figures (:func:`outcome`), the Pareto
frontier of those outcomes (:func:`frontier`) and the cheapest setting that meets a goal
(:func:`choose`). sweeper/plan_run.py replays the grid; cli/plan.py prints and plots it.

What a setting costs is measured on four axes, each the less the better:

* ``peak_memory_bytes``: the most the messages in memory held at an interval's end;
* ``disk_bytes``: bytes swept into blobs plus bytes read back from them;
* ``unsweep_waits``: gets that found their message in a blob (each brings one blob back);
* ``blocked_or_refused``: puts that arrived when they would have passed the memory budget
  (a BLOCK queue holds them back, a FAIL queue refuses them: policy ``fail`` does not make
  them; policy ``page`` makes them and sweeps at the interval's end).

A setting is on the **frontier** when no other setting is at least as good on all four and
better on one. Invariant: every setting of the grid is either on the frontier or dominated
by one that is.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, fields

from .policy import DEFAULT_EXTRA, DEFAULT_FACTOR, DEFAULT_INTERVAL, SweepPolicy
from .runs import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS

POLICIES = ("page", "fail")  # what a put does over the budget, as the replay models it
OBJECTIVES = ("peak_memory_bytes", "disk_bytes", "unsweep_waits", "blocked_or_refused")

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes from ``500000``, ``200MB`` (10^6) or ``64MiB`` (2^20); ValueError otherwise."""
    m = _SIZE.fullmatch(text)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        raise ValueError(f"{text!r} is not a size; write bytes or a number with a unit: 200MB, 64MiB")
    return int(float(m.group(1)) * unit)


@dataclass(frozen=True)
class Setting:
    """One setting of the rule and the store: what ``sweepq replay``'s options set. The
    defaults are the seed's (interval 5 s, y > 2x, buffer x + 5, the blob store's limits, no
    budget)."""

    interval: float = DEFAULT_INTERVAL
    factor: int = DEFAULT_FACTOR
    extra: int = DEFAULT_EXTRA
    blob_bytes: int = DEFAULT_MAX_BLOB_BYTES
    blob_records: int = DEFAULT_MAX_BLOB_RECORDS
    memory_budget: int = 0
    policy: str = "page"
    rule: str = "seed"

    def __post_init__(self) -> None:
        self.sweep_policy()  # checks interval, factor, extra, rule and budget
        if self.blob_bytes < 1 or self.blob_records < 1:
            raise ValueError("blob_bytes and blob_records must be >= 1")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; use {' or '.join(POLICIES)}")

    def sweep_policy(self) -> SweepPolicy:
        return SweepPolicy(
            factor=self.factor,
            extra=self.extra,
            interval=self.interval,
            rule=self.rule,
            memory_budget=self.memory_budget,
        )

    def label(self) -> str:
        """The fields that differ from the seed's default, ``name=value`` (``seed default`` if none)."""
        base = Setting()
        parts = [
            f"{f.name}={getattr(self, f.name):g}"
            if isinstance(getattr(self, f.name), float)
            else f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(base, f.name)
        ]
        return " ".join(parts) or "seed default"


AXES = {f.name: f.type for f in fields(Setting)}
_KINDS = {"interval": float, "policy": str, "rule": str, "blob_bytes": "size", "memory_budget": "size"}


def _value(axis: str, text: str) -> float | int | str:
    kind = _KINDS.get(axis, int)
    if kind == "size":
        return parse_size(text)
    if kind is str:
        return text.strip()
    try:
        return float(text) if kind is float else int(text)
    except ValueError:
        raise ValueError(f"axis {axis}: {text!r} is not {'a number' if kind is float else 'an integer'}") from None


def _values(axis: str, text: str) -> list:
    """``a,b,c``, or a range ``lo:hi`` (integers, both ends) or ``lo:hi:step`` (numbers)."""
    out: list = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ":" in part and _KINDS.get(axis, int) is not str:
            bits = part.split(":")
            if len(bits) not in (2, 3):
                raise ValueError(f"axis {axis}: range {part!r} is lo:hi or lo:hi:step")
            lo, hi = _value(axis, bits[0]), _value(axis, bits[1])
            step = _value(axis, bits[2]) if len(bits) == 3 else 1
            if step <= 0 or hi < lo:  # type: ignore[operator]
                raise ValueError(f"axis {axis}: range {part!r} needs lo <= hi and a step > 0")
            n = round((hi - lo) / step)  # type: ignore[operator]
            out.extend(type(lo)(lo + k * step) for k in range(n + 1))  # type: ignore[operator]
        else:
            out.append(_value(axis, part))
    if not out:
        raise ValueError(f"axis {axis} has no values; write {axis}=v1,v2 or {axis}=lo:hi")
    return list(dict.fromkeys(out))


def parse_grid(text: str) -> list[Setting]:
    """The settings of a grid: every combination of the axes given (the others at the seed's
    default), in the order the axes vary last to first. ``text`` is either
    ``'interval=1,5;factor=1:4;memory_budget=0,200MB'`` (``;`` or new lines between axes,
    ``#`` starts a comment) or a JSON object of axis to a list of values or such a string.
    ValueError names what is wrong."""
    text = text.strip()
    axes: dict[str, list] = {}
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"the grid is not valid JSON: {e}") from None
        items = [(k, v if isinstance(v, str) else ",".join(str(x) for x in v)) for k, v in obj.items()]
    else:
        items = []
        for line in re.split(r"[;\n]", text):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "=" not in line:
                raise ValueError(f"grid part {line!r}: write name=v1,v2 or name=lo:hi (names: {', '.join(AXES)})")
            name, _, vals = line.partition("=")
            items.append((name.strip(), vals))
    for name, vals in items:
        if name not in AXES:
            raise ValueError(f"unknown grid axis {name!r}; use {', '.join(AXES)}")
        if name in axes:
            raise ValueError(f"grid axis {name!r} is given twice")
        axes[name] = _values(name, str(vals))
    if not axes:
        raise ValueError(f"the grid is empty; write e.g. interval=1,5;factor=1:4 (names: {', '.join(AXES)})")
    names = list(axes)
    out = []
    for combo in itertools.product(*(axes[n] for n in names)):
        out.append(Setting(**dict(zip(names, combo, strict=True))))
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Outcome:
    """What one setting did on the trace (all counts over the whole trace)."""

    setting: Setting
    peak_memory_bytes: int  # the most held in memory at an interval's end
    peak_nosweep_bytes: int  # the same with no sweeper
    bytes_put: int  # every put's record bytes (payload and header)
    bytes_swept: int  # written into blobs
    bytes_read_back: int  # read back from blobs by gets
    unsweep_waits: int  # gets that found their message in a blob
    stored_mean_s: float  # how long a blob brought back had been stored, on average
    stored_max_s: float  # and the longest
    blocked_or_refused: int  # puts that arrived over the budget
    msgs_swept: int
    msgs_reswept: int
    blobs_written: int

    @property
    def disk_bytes(self) -> int:
        return self.bytes_swept + self.bytes_read_back

    @property
    def read_back_share(self) -> float:
        """Bytes read back over bytes put."""
        return self.bytes_read_back / self.bytes_put if self.bytes_put else 0.0

    def costs(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in OBJECTIVES)

    def as_dict(self) -> dict:
        d = {"setting": asdict(self.setting), "label": self.setting.label()}
        d.update({f.name: getattr(self, f.name) for f in fields(self) if f.name != "setting"})
        d["disk_bytes"] = self.disk_bytes
        d["read_back_share"] = self.read_back_share
        return d


def outcome(setting: Setting, overall: dict, summary: dict, bytes_put: int) -> Outcome:
    """A setting's outcome from its replay: ``overall`` as ReplayResult.overall() gives it and
    ``summary`` the per-queue SUMMARY columns summed (``stored_max_us``: the max).

    Bytes swept are not a column of the replay: the bytes in blobs change by what is swept
    less what is read back, from none at the start, so what was swept is what is in blobs
    at the end plus what was read back."""
    waits = int(summary["blobs_read"])
    return Outcome(
        setting=setting,
        peak_memory_bytes=int(overall["peak_memory_with_sweeper_bytes"]),
        peak_nosweep_bytes=int(overall["peak_memory_without_sweeping_bytes"]),
        bytes_put=int(bytes_put),
        bytes_swept=int(overall["swept_bytes_at_end"]) + int(overall["bytes_read_back"]),
        bytes_read_back=int(overall["bytes_read_back"]),
        unsweep_waits=waits,
        stored_mean_s=summary["stored_us"] / waits / 1e6 if waits else 0.0,
        stored_max_s=summary["stored_max_us"] / 1e6,
        blocked_or_refused=int(summary["puts_over_budget"]),
        msgs_swept=int(overall["msgs_swept"]),
        msgs_reswept=int(overall["msgs_reswept"]),
        blobs_written=int(overall["blobs_written"]),
    )


def _dominates(a: tuple, b: tuple) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def frontier(outcomes: list[Outcome]) -> list[int]:
    """Indices of the outcomes no other outcome dominates on OBJECTIVES, by peak memory.
    Of outcomes with equal costs the first is kept (the others add no choice)."""
    costs = [o.costs() for o in outcomes]
    keep = []
    for i, c in enumerate(costs):
        if any(_dominates(d, c) for d in costs):
            continue
        if any(costs[j] == c for j in keep):
            continue
        keep.append(i)
    return sorted(keep, key=lambda i: costs[i])


@dataclass(frozen=True)
class Goal:
    """What the user wants: peak memory at most ``max_memory`` bytes and/or bytes read back at
    most ``max_read_back`` (bytes, or a share of the bytes put when ``read_back_share``)."""

    max_memory: int | None = None
    max_read_back: float | None = None
    read_back_share: bool = False

    def met_by(self, o: Outcome) -> bool:
        if self.max_memory is not None and o.peak_memory_bytes > self.max_memory:
            return False
        if self.max_read_back is not None:
            got = o.read_back_share if self.read_back_share else o.bytes_read_back
            if got > self.max_read_back:
                return False
        return True

    def cost(self, o: Outcome) -> tuple:
        """The order of the cheapest: no put blocked or refused first; then, under a memory
        goal, the least disk traffic (memory is what is bounded), else the least peak memory
        (disk traffic is what is bounded); then the other, then unsweep waits."""
        if self.max_memory is not None:
            return (o.blocked_or_refused, o.disk_bytes, o.peak_memory_bytes, o.unsweep_waits)
        return (o.blocked_or_refused, o.peak_memory_bytes, o.disk_bytes, o.unsweep_waits)


def parse_read_back(text: str) -> tuple[float, bool]:
    """``5%`` (a share of the bytes put) or a size (``50MB``): (limit, is a share)."""
    t = text.strip()
    if t.endswith("%"):
        try:
            share = float(t[:-1]) / 100
        except ValueError:
            raise ValueError(f"{text!r} is not a percentage such as 5%") from None
        if share < 0:
            raise ValueError(f"{text!r}: a share is >= 0%")
        return share, True
    return float(parse_size(t)), False


def choose(outcomes: list[Outcome], goal: Goal) -> int | None:
    """The index of the cheapest outcome that meets ``goal`` (Goal.cost), or None when none does."""
    meets = [i for i, o in enumerate(outcomes) if goal.met_by(o)]
    if not meets:
        return None
    return min(meets, key=lambda i: goal.cost(outcomes[i]))


__all__ = [
    "AXES",
    "OBJECTIVES",
    "POLICIES",
    "Goal",
    "Outcome",
    "Setting",
    "choose",
    "frontier",
    "outcome",
    "parse_grid",
    "parse_read_back",
    "parse_size",
]
