"""Child processes that never outlive the parent that started them, and a parent that ends
every one of them on Ctrl-C, SIGTERM or any error.

A child calls :func:`tether` first thing. From then on it dies with its parent however the
parent ends, SIGKILL included, by two independent means:

- Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, set through ctypes): the kernel
  sends SIGTERM to the child when the thread that started it ends;
- a lifeline: the child's stdin is a pipe whose only writer is the parent, so a thread that
  blocks reading it sees end-of-file when the parent is gone (any POSIX system).

Either way the child runs its ``on_end`` clean-up (e.g. removing its temporary files) and
exits at once; its other threads are not waited for. Ctrl-C is the parent's business: a
tethered child ignores SIGINT, so that a Ctrl-C sent to the whole process group does not
leave half-stopped children, and the parent ends them with :meth:`Children.end`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
END_EXIT = 143  # 128 + SIGTERM: how a tethered child exits when told to end


def _set_parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` when the parent (thread) ends; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def tether(parent_pid: int, on_end: Callable[[], None] = lambda: None, lifeline: bool = True) -> None:
    """Make this process end when ``parent_pid`` does, or when it is sent SIGTERM: run
    ``on_end`` (it must be quick and must not raise), then ``os._exit(END_EXIT)``. SIGINT is
    ignored from now on. ``lifeline``: also watch stdin for end-of-file (the parent started
    this process with :meth:`Children.start`). Call it from the main thread, first thing."""

    def end(*_: object) -> None:
        try:
            on_end()
        finally:
            os._exit(END_EXIT)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, end)
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for
        end()
    if lifeline:

        def watch() -> None:
            with contextlib.suppress(OSError):
                while os.read(0, 4096):
                    pass
            end()

        threading.Thread(target=watch, name="lifeline", daemon=True).start()


def bound(argv: Sequence[str]) -> list[str]:
    """``argv`` as a command that ends with this process however this one ends, SIGKILL
    included: Linux sends it SIGTERM when the thread that started it ends (the parent-death
    signal, asked for by this module run as a program, :func:`_exec_bound`, before ``argv``'s
    program replaces it, which keeps it). For a program that does not call :func:`tether`
    itself (``redis-server``, ``sweepq serve``, a worker's ``python -c``), started from a
    thread that lives as long as it must (a benchmark's main thread). The process is
    ``argv``'s once started: its pid, its memory, its exit code. Elsewhere than Linux:
    ``argv`` as it is."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-m", __name__, str(os.getpid()), *argv]


def _exec_bound(parent_pid: int, argv: Sequence[str]) -> None:
    """:func:`bound`'s first step: ask for the parent-death signal, end at once when the parent
    died before the ask, then become ``argv``'s program (exec keeps the signal asked for)."""
    _set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(END_EXIT)
    os.execvp(argv[0], list(argv))


class Children:
    """The processes a parent started, to be ended all at once. Not thread-safe: one thread
    starts and ends them (the one that started them: the parent-death signal follows it)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.kinds: dict[int, str] = {}  # pid: what the process is, for the report of an interrupt
        self.ended: dict[str, int] = {}  # how many of each kind end() found running, over every call

    def start(self, argv: Sequence[str], kind: str, **popen: object) -> subprocess.Popen:
        """Start ``argv`` with a lifeline on its stdin; it must call :func:`tether` with
        ``os.getpid()`` of this process (pass it on its command line). ``kind`` names it."""
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, **popen)  # type: ignore[call-overload]
        self.procs.append(proc)
        self.kinds[proc.pid] = kind
        return proc

    def running(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def end(self, grace: float = 0.5) -> dict[str, int]:
        """End every child still running: SIGTERM (each cleans up after itself), then SIGKILL
        after ``grace`` seconds for any that has not ended; each is waited for, so none is
        left behind, not even as a zombie. Returns how many of each kind were running."""
        alive = self.running()
        ended: dict[str, int] = {}
        for p in alive:
            ended[self.kinds[p.pid]] = ended.get(self.kinds[p.pid], 0) + 1
            self.ended[self.kinds[p.pid]] = self.ended.get(self.kinds[p.pid], 0) + 1
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        deadline = time.monotonic() + grace
        for p in alive:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for p in self.procs:
            for pipe in (p.stdin, p.stdout, p.stderr):  # stdin is the lifeline: nothing more to say
                if pipe:
                    with contextlib.suppress(OSError):
                        pipe.close()
        return ended


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP received: handled as Ctrl-C is."""


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_as_ctrl_c() -> Iterator[None]:
    """While the body runs in the main thread, SIGTERM and SIGHUP raise :class:`Interrupted`
    (a KeyboardInterrupt), so that one ``except KeyboardInterrupt`` ends the children
    whatever asked this process to stop. Elsewhere than the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    before = {s: signal.signal(s, raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def ignoring_interrupts() -> Iterator[None]:
    """While the body runs in the main thread, Ctrl-C, SIGTERM and SIGHUP are ignored: the
    clean-up after a first Ctrl-C is not cut short by a second one (it takes at most about
    a second). Elsewhere than the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, signal.SIG_IGN) for s in _STOPS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait (blocked, not lost) while the body runs, and arrive
    when it ends: a starter that records its new child inside the body always knows it
    before an interrupt can unwind it, so its ``finally`` kills it. Blocks only the calling
    thread, which is where CPython delivers them when it is the main thread."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


if __name__ == "__main__":
    _exec_bound(int(sys.argv[1]), sys.argv[2:])
