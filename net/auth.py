"""Who may connect, and who may administer (docs/clients.md "Security").

* A Unix socket's file permissions are its access control: the server creates it 0600 (in a
  data directory that is 0700), so only its owner connects; a connection on it needs no token.
* TCP needs the server's token: a client that does not present it is refused with
  MQRC_NOT_AUTHORIZED (2035) and a log line, at once.
* Administration (define, alter, delete; channel and remote queue changes; a channel's
  sequence number reset) needs the admin token on every transport (net/protocol.py
  ``AUTHORITY`` lists who may send each request). Without one configured, no connection may
  administer.

A token is text: a presented value that is not (another type, or a str that UTF-8 cannot
carry, such as one holding a lone surrogate) matches nothing, so it is refused with 2035
like any wrong token; a server is never configured with one (PARM_VALUE_ERROR). Tokens are
compared in constant time. :func:`token_file` keeps a token in a file created
0600 (read back on the next start), as ``sweepq serve`` does in its data directory.
"""

from __future__ import annotations

import hmac
import os
import secrets

from sweepq.engine import MQError, Reason

TOKEN_FILE = "sweepq.token"
ADMIN_TOKEN_FILE = "sweepq.admin-token"


def new_token() -> str:
    """256 random bits as 64 hex digits: safe in a shell, a URL and an argument. (URL-safe
    base64 begins with ``-`` one time in 64, and ``--token "$(cat FILE)"`` then read the
    token as an option: the docs' own example failed in CI that way.)"""
    return secrets.token_hex(32)


def token_file(path: str) -> str:
    """The token kept in ``path``; a new one written there (mode 0600) when there is none."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path) as f:
            token = f.read().strip()
        if token:
            return token
        os.unlink(path)
        return token_file(path)
    token = new_token()
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def read_token(path: str) -> str | None:
    """The token in ``path``, or None when the file is missing or unreadable."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def matches(given: object, expected: str | None) -> bool:
    """Whether ``given`` is the token ``expected`` (never when either is not text)."""
    if expected is None or not isinstance(given, str):
        return False
    try:
        return hmac.compare_digest(given.encode(), expected.encode())
    except UnicodeEncodeError:  # a lone surrogate: no token holds one
        return False


def check_configured(token: object, what: str) -> None:
    """:raises MQError: PARM_VALUE_ERROR for a server token that is not text (None: none)."""
    if token is None:
        return
    ok = isinstance(token, str) and token != ""
    try:
        ok = ok and bool(token.encode())  # type: ignore[union-attr]
    except UnicodeEncodeError:
        ok = False
    if not ok:
        raise MQError(Reason.PARM_VALUE_ERROR, f"{what} must be non-empty text (UTF-8), e.g. auth.new_token()")


def beside_socket(url: str) -> tuple[str | None, str | None]:
    """(token, admin token) from the files next to a ``unix:`` URL's socket, where a server
    started by ``sweepq serve --data-dir`` keeps them; (None, None) for other URLs or when they
    cannot be read (only the data directory's owner can). The command line uses this, so that
    the owner of a data directory administers its server without typing a token."""
    from .calls import Address  # one parser of addresses: unix:q/sweepq.sock is a socket too

    try:
        address = Address.parse(url)
    except MQError:
        return None, None
    if address.scheme != "unix":
        return None, None
    folder = os.path.dirname(address.path)
    return read_token(os.path.join(folder, TOKEN_FILE)), read_token(os.path.join(folder, ADMIN_TOKEN_FILE))
