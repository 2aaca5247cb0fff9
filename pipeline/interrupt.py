"""Spark calls made from a thread of their own, so that a Ctrl-C finds the main thread outside Py4J.

A KeyboardInterrupt raised inside a Py4J call is logged by Py4J, with its traceback, on the
root logger ("KeyboardInterrupt while sending command."), and pyspark's own SIGINT handler
(installed with a SparkContext created on the main thread) re-enters the interrupted call's
connection to cancel the jobs. :func:`on_thread` runs the call on another thread while the
main thread waits in ``join``, where the interrupt lands as a plain KeyboardInterrupt: the
caller acts on it (cancels its jobs) and the run ends with one line (pipeline/job.py ``main``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

# How long an interrupted call's thread is waited for once ``on_interrupt`` ran (Spark fails a
# cancelled job at once; this only bounds a JVM that does not answer).
CANCEL_WAIT_S = 60.0


def on_thread(
    action: Callable[[], Any],
    on_interrupt: Callable[[], None] | None = None,
    thread: type[threading.Thread] = threading.Thread,
    name: str = "sweepq-spark-call",
) -> Any:
    """``action()`` run on a new ``thread`` (pyspark's InheritableThread carries the caller's
    Spark local properties) while this one waits; its value, or its exception raised here. On
    KeyboardInterrupt: ``on_interrupt()`` (errors suppressed: a JVM gone has nothing to cancel),
    the thread waited for (bounded by ``CANCEL_WAIT_S``), and the KeyboardInterrupt raised again;
    a thread still in its call then is a daemon and does not hold the process's exit."""
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = action()
        except BaseException as e:  # raised again on the caller's thread
            out["error"] = e

    t = thread(target=target, name=name, daemon=True)
    t.start()
    try:
        t.join()
    except KeyboardInterrupt:
        if on_interrupt is not None:
            with contextlib.suppress(Exception):  # a JVM gone has nothing left to cancel
                on_interrupt()
        t.join(CANCEL_WAIT_S)
        raise
    if "error" in out:
        raise out["error"]
    return out["value"]
