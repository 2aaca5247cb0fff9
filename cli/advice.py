"""The engine's and the client's advice said the command line's way.

An MQError's text ends with what to do in Python (``define it with define_queue()``,
``connect with admin_token=...``, ``connect(url, token=...)``): a command-line user gets the
command or option that does the same instead. One table for every command, so that no
command tells its user to call Python.
"""

from __future__ import annotations

__all__ = ["for_the_command_line"]

# (the Python advice as the engine or client words it, the command line's equivalent)
_ADVICE = (
    ("define it with define_queue()", "define it with: sweepq define QUEUE"),
    ("define it with define_channel()", "define it with: sweepq channel define NAME --type sender|receiver"),
    (
        "connect with admin_token=...",
        "pass --admin-token-file FILE (the server's DIR/sweepq.admin-token) or set $SWEEPQ_ADMIN_TOKEN",
    ),
    (
        "connect(url, token=...)",
        "pass --token-file FILE (the server's DIR/sweepq.token) or set $SWEEPQ_TOKEN",
    ),
)


def for_the_command_line(text: str, **names: str) -> str:
    """``text`` with each piece of Python advice replaced by its command-line form; ``names``
    fill the form's placeholders (``QUEUE="ORDERS"``, ``NAME="TO.B"``) where they are known."""
    for python, command in _ADVICE:
        if python in text:
            for key, value in names.items():
                command = command.replace(key, value)
            text = text.replace(python, command)
    return text
