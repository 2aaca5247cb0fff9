"""The selector lexer: selection-string text to tokens, each with its 0-based position.

It owns the lexical rules of docs/semantics.md §10: keywords (case-insensitive), Java
identifiers (case-sensitive, with ``.`` between parts so that ``Root.MQMD.Priority`` is
one identifier; engine/identifiers.py holds their rules), string literals in single quotes
(``''`` is a quote; double quotes are refused), exact numerics (decimal, ``0x``
hexadecimal, octal with a leading 0, optional ``L``), approximate numerics and the
operators. Every error is ``MQError(SELECTOR_SYNTAX_ERROR)`` naming the 1-based character
position.
"""

from __future__ import annotations

from typing import Any

from ..constants import Reason
from ..errors import MQError
from ..identifiers import KEYWORDS, is_ident_part, is_ident_start

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Token kinds.
IDENT = "identifier"
KEYWORD = "keyword"
STRING = "string"
INT = "integer"
FLOAT = "number"
HEX = "hex"
OP = "operator"
END = "end"

_OPS2 = ("<>", "<=", ">=")
_OPS1 = "=<>+-*/(),"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class Token:
    """One token: ``kind``, ``value`` (the keyword in upper case, the literal's value, the
    operator text; for HEX the digits as written) and ``pos``, its 0-based offset."""

    __slots__ = ("kind", "pos", "value")

    def __init__(self, kind: str, value: Any, pos: int):  # Any: its type follows ``kind``
        self.kind = kind
        self.value = value
        self.pos = pos

    def describe(self) -> str:
        if self.kind == END:
            return "the end of the selector"
        if self.kind == STRING:
            return f"the string {self.value!r}"
        if self.kind == HEX:
            return f"0x{self.value}"
        return repr(str(self.value)) if self.kind != KEYWORD else str(self.value)

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


def syntax_error(text: str, pos: int, message: str) -> MQError:
    """The 2459 error for ``text``: the 1-based position first, then what was wrong."""
    shown = text if len(text) <= 200 else text[:200] + "..."
    return MQError(
        Reason.SELECTOR_SYNTAX_ERROR,
        f"selector syntax error at character {pos + 1}: {message} (selector: {shown!r})",
    )


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an END token. Raises 2459 on a lexical error."""
    out: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "'":
            i = _string(text, i, out)
        elif ch == '"':
            raise syntax_error(text, i, "expected a string in single quotes; double quotes are not allowed")
        elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            i = _number(text, i, out)
        elif is_ident_start(ch):
            i = _identifier(text, i, out)
        elif text.startswith(_OPS2, i):
            out.append(Token(OP, text[i : i + 2], i))
            i += 2
        elif ch in _OPS1:
            out.append(Token(OP, ch, i))
            i += 1
        elif ch == "!" and text.startswith("!=", i):
            raise syntax_error(text, i, "expected an operator: != is not one; write <> for not equal")
        else:
            raise syntax_error(text, i, f"expected an operator, a value or the end, found the character {ch!r}")
    out.append(Token(END, None, n))
    return out


def _string(text: str, start: int, out: list[Token]) -> int:
    i = start + 1
    parts = []
    while True:
        j = text.find("'", i)
        if j < 0:
            raise syntax_error(text, start, "expected a closing ' for the string literal that starts here")
        parts.append(text[i:j])
        if text.startswith("''", j):
            parts.append("'")
            i = j + 2
            continue
        out.append(Token(STRING, "".join(parts), start))
        return j + 1


def _identifier(text: str, start: int, out: list[Token]) -> int:
    n = len(text)
    i = start + 1
    while True:
        while i < n and is_ident_part(text[i]):
            i += 1
        # A dot joins parts of one name (Root.MQMD.Priority) when a name part follows it.
        if i + 1 < n and text[i] == "." and is_ident_start(text[i + 1]):
            i += 2
            continue
        break
    word = text[start:i]
    upper = word.upper()
    if upper in KEYWORDS:
        out.append(Token(KEYWORD, upper, start))
    else:
        out.append(Token(IDENT, word, start))
    return i


def _number(text: str, start: int, out: list[Token]) -> int:
    n = len(text)
    i = start
    if text.startswith(("0x", "0X"), i):
        j = i + 2
        while j < n and text[j] in _HEX_DIGITS:
            j += 1
        if j == i + 2:
            raise syntax_error(text, start, "expected hexadecimal digits after 0x")
        digits = text[i + 2 : j]
        if j < n and text[j] in "lL":  # a long: a number, never a byte string
            _end_of_literal(text, j + 1)
            out.append(Token(INT, _long(text, start, int(digits, 16)), start))
            return j + 1
        _end_of_literal(text, j)
        out.append(Token(HEX, digits, start))
        return j
    j = i
    while j < n and text[j].isdigit():
        j += 1
    is_float = False
    if j < n and text[j] == ".":
        is_float = True
        j += 1
        while j < n and text[j].isdigit():
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k >= n or not text[k].isdigit():
            raise syntax_error(text, j, "expected digits in the exponent, e.g. 7E3 or 5.1e-2")
        while k < n and text[k].isdigit():
            k += 1
        is_float = True
        j = k
    literal = text[i:j]
    if is_float:
        if j < n and text[j] in "fFdD":
            j += 1
        _end_of_literal(text, j)
        out.append(Token(FLOAT, float(literal), start))
        return j
    if len(literal) > 1 and literal[0] == "0":
        bad = next((k for k, c in enumerate(literal) if c in "89"), None)
        if bad is not None:
            raise syntax_error(
                text, start + bad, f"expected an octal digit 0-7: {literal} has a leading 0, so it is octal"
            )
        value = int(literal, 8)
    else:
        value = int(literal)
    if j < n and text[j] in "lL":
        j += 1
    _end_of_literal(text, j)
    out.append(Token(INT, _long(text, start, value), start))
    return j


def _long(text: str, pos: int, value: int) -> int:
    # The sign is applied later (unary minus), so the magnitude may be 2**63 for -2**63.
    if value > INT64_MAX + 1:
        raise syntax_error(text, pos, "expected an exact numeric within 64 bits")
    return value


def _end_of_literal(text: str, j: int) -> None:
    if j < len(text) and (is_ident_part(text[j]) or text[j] in ".'"):
        raise syntax_error(text, j, f"expected an operator or a space after the number, found {text[j]!r}")
