"""The selector parser: tokens to a typed syntax tree, by recursive descent.

Grammar (docs/semantics.md §10; lowest precedence first, left to right within a level)::

    selector   := or_expr END
    or_expr    := and_expr (OR and_expr)*
    and_expr   := not_expr (AND not_expr)*
    not_expr   := NOT not_expr | predicate
    predicate  := sum [ cmp_op sum
                      | [NOT] BETWEEN sum AND sum
                      | [NOT] IN '(' string (',' string)* ')'
                      | [NOT] LIKE string [ESCAPE string]
                      | IS [NOT] NULL ]
    sum        := product (('+' | '-') product)*
    product    := unary (('*' | '/') unary)*
    unary      := ('+' | '-') unary | primary
    primary    := literal | identifier | '(' or_expr ')'

Every node carries a static *kind*: NUM, STR, BOOL, BYTES for what literals and operators
are known to give, ANY for an identifier (its type is known only per message). A kind
that can never fit its place (``'a' + 1``, ``NOT 5``, ``x LIKE 3``, ``'a' < 'b'``) is a
syntax error (2459) at the offending operand, as in JMS.

``0x`` literals: docs/semantics.md §10.1 calls ``0xA`` a hexadecimal number and also says a
``0x`` literal compared with a property is a byte string whose odd digit count
(``0xAFC23``) is a syntax error. sweepq resolves this by place: a ``0x`` literal that is
an operand of a comparison whose other side is an identifier or a byte string is a
**byte string** (an even number of digits, compared length- and order-exactly); anywhere
else (arithmetic, a sign, BETWEEN bounds, compared with a number) it is a **hexadecimal
exact numeric**. ``Priority = 10``, ``Priority = +0xA`` and ``0xAL`` (an ``L`` suffix) are
numbers; ``myBytes = 0x0AFC23`` is a byte string.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .lexer import END, FLOAT, HEX, IDENT, INT, INT64_MAX, KEYWORD, OP, STRING, Token, syntax_error, tokenize

NUM = "number"
STR = "string"
BOOL = "boolean"
BYTES = "byte string"
ANY = "identifier"

_CMP = frozenset({"=", "<>", "<", ">", "<=", ">="})
MAX_NESTING = 40  # parentheses, NOTs and signs inside one another: the parser recurses on them


class Node:
    """A syntax-tree node: ``kind`` (static type) and ``pos`` (0-based, for errors)."""

    __slots__ = ("kind", "pos")
    kind: str
    pos: int


class Lit(Node):
    __slots__ = ("value",)

    def __init__(self, value: Any, kind: str, pos: int):  # Any: its type follows ``kind``
        self.value, self.kind, self.pos = value, kind, pos


class Hex(Node):
    """A ``0x`` literal whose reading (number or byte string) its place decides."""

    __slots__ = ("digits",)

    def __init__(self, digits: str, pos: int):
        self.digits, self.kind, self.pos = digits, NUM, pos


class Ident(Node):
    __slots__ = ("name",)

    def __init__(self, name: str, pos: int):
        self.name, self.kind, self.pos = name, ANY, pos


class Arith(Node):
    """Binary ``+ - * /`` or unary ``-`` (``right`` None)."""

    __slots__ = ("left", "op", "right")

    def __init__(self, op: str, left: Node, right: Node | None, pos: int):
        self.op, self.left, self.right, self.kind, self.pos = op, left, right, NUM, pos


class Cmp(Node):
    __slots__ = ("left", "op", "right")

    def __init__(self, op: str, left: Node, right: Node, pos: int):
        self.op, self.left, self.right, self.kind, self.pos = op, left, right, BOOL, pos


class Logic(Node):
    """AND / OR of two conditions, NOT of one (``right`` None)."""

    __slots__ = ("left", "op", "right")

    def __init__(self, op: str, left: Node, right: Node | None, pos: int):
        self.op, self.left, self.right, self.kind, self.pos = op, left, right, BOOL, pos


class Between(Node):
    __slots__ = ("high", "low", "negated", "operand")

    def __init__(self, operand: Node, low: Node, high: Node, negated: bool, pos: int):
        self.operand, self.low, self.high, self.negated, self.kind, self.pos = operand, low, high, negated, BOOL, pos


class In(Node):
    __slots__ = ("negated", "operand", "values")

    def __init__(self, operand: Node, values: frozenset[str], negated: bool, pos: int):
        self.operand, self.values, self.negated, self.kind, self.pos = operand, values, negated, BOOL, pos


class Like(Node):
    __slots__ = ("negated", "operand", "regex")

    def __init__(self, operand: Node, regex: re.Pattern, negated: bool, pos: int):
        self.operand, self.regex, self.negated, self.kind, self.pos = operand, regex, negated, BOOL, pos


class IsNull(Node):
    __slots__ = ("negated", "operand")

    def __init__(self, operand: Node, negated: bool, pos: int):
        self.operand, self.negated, self.kind, self.pos = operand, negated, BOOL, pos


def parse(text: str) -> Node:
    """The syntax tree of a (non-blank) selector. Raises 2459 with the position on error."""
    return _Parser(text).selector()


class _Parser:
    __slots__ = ("i", "nesting", "text", "toks")

    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.nesting = 0

    def nest(self, t: Token) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise syntax_error(self.text, t.pos, f"expected at most {MAX_NESTING} parentheses, NOTs or signs nested")

    # -- token helpers --------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at_kw(self, word: str) -> bool:
        t = self.toks[self.i]
        return t.kind == KEYWORD and t.value == word

    def at_op(self, op: str) -> bool:
        t = self.toks[self.i]
        return t.kind == OP and t.value == op

    def error(self, expected: str, tok: Token | None = None):
        tok = tok or self.tok
        return syntax_error(self.text, tok.pos, f"expected {expected}, found {tok.describe()}")

    def need_kw(self, word: str, expected: str | None = None) -> Token:
        if not self.at_kw(word):
            raise self.error(expected or word)
        return self.take()

    def need_op(self, op: str, expected: str | None = None) -> Token:
        if not self.at_op(op):
            raise self.error(expected or repr(op))
        return self.take()

    def bad_kind(self, node: Node, message: str):
        return syntax_error(self.text, node.pos, message)

    # -- grammar ----------------------------------------------------------------------------

    def selector(self) -> Node:
        node = self.or_expr()
        if self.tok.kind != END:
            raise self.error("AND, OR, a comparison or the end of the selector")
        return self.condition(node)

    def condition(self, node: Node) -> Node:
        """``node`` where a condition is needed: a boolean, or an identifier (a boolean
        property: TRUE selects, anything else is unknown)."""
        if node.kind not in (BOOL, ANY):
            raise self.bad_kind(node, f"expected a condition, found a {node.kind} expression")
        return node

    def or_expr(self) -> Node:
        return self.logic("OR", self.and_expr)

    def and_expr(self) -> Node:
        return self.logic("AND", self.not_expr)

    def logic(self, op: str, operand: Callable[[], Node]) -> Node:
        """A run of ``operand``s joined by ``op`` (AND or OR), left to right, each a condition."""
        node = operand()
        while self.at_kw(op):
            t = self.take()
            node = Logic(op, self.condition(node), self.condition(operand()), t.pos)
        return node

    def not_expr(self) -> Node:
        if self.at_kw("NOT"):
            t = self.take()
            self.nest(t)
            node = Logic("NOT", self.condition(self.not_expr()), None, t.pos)
            self.nesting -= 1
            return node
        return self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        t = self.tok
        if t.kind == OP and t.value in _CMP:
            self.take()
            right = self.sum()
            return self.comparison(t, left, right)
        negated = False
        if self.at_kw("NOT"):
            nxt = self.toks[self.i + 1]
            if not (nxt.kind == KEYWORD and nxt.value in ("BETWEEN", "IN", "LIKE")):
                raise self.error("BETWEEN, IN or LIKE after NOT", nxt)
            self.take()
            negated = True
            t = self.tok
        if self.at_kw("BETWEEN"):
            self.take()
            low = self.numeric(self.sum(), "BETWEEN bound")
            self.need_kw("AND", "AND between the two BETWEEN bounds")
            high = self.numeric(self.sum(), "BETWEEN bound")
            return Between(self.numeric(left, "operand of BETWEEN"), low, high, negated, t.pos)
        if self.at_kw("IN"):
            self.take()
            return In(self.stringish(left, "IN"), self.in_list(), negated, t.pos)
        if self.at_kw("LIKE"):
            self.take()
            return Like(self.stringish(left, "LIKE"), self.like_pattern(), negated, t.pos)
        if self.at_kw("IS"):
            self.take()
            neg = False
            if self.at_kw("NOT"):
                self.take()
                neg = True
            self.need_kw("NULL", "NULL after IS" + (" NOT" if neg else ""))
            return IsNull(self.value(left), neg, t.pos)
        return left

    def comparison(self, t: Token, left: Node, right: Node) -> Node:
        op = t.value
        left, right = self.resolve_hex(left, right), self.resolve_hex(right, left)
        lk, rk = left.kind, right.kind
        if op not in ("=", "<>"):
            for side in (left, right):
                if side.kind in (STR, BOOL, BYTES):
                    raise self.bad_kind(side, f"expected a number: {op} orders numbers ({side.kind}s allow = and <>)")
        if lk != ANY and rk != ANY and lk != rk:
            raise self.bad_kind(right, f"expected a {lk} to compare with the {lk} on the left, found a {rk}")
        return Cmp(op, left, right, t.pos)

    def resolve_hex(self, node: Node, other: Node) -> Node:
        """A bare ``0x`` literal beside an identifier or a byte string is a byte string;
        elsewhere it is a number (see the module docstring)."""
        if not isinstance(node, Hex):
            return node
        if other.kind in (ANY, BYTES) or isinstance(other, Hex):
            if len(node.digits) % 2:
                raise self.bad_kind(
                    node,
                    f"expected an even number of hex digits in byte string 0x{node.digits}: write whole bytes "
                    f"(0x0{node.digits}), or +0x{node.digits} for the hexadecimal number",
                )
            return Lit(bytes.fromhex(node.digits), BYTES, node.pos)
        return Lit(int(node.digits, 16), NUM, node.pos)

    def numeric(self, node: Node, what: str) -> Node:
        if isinstance(node, Hex):
            return Lit(int(node.digits, 16), NUM, node.pos)
        if node.kind not in (NUM, ANY):
            raise self.bad_kind(node, f"expected a number as {what}, found a {node.kind}")
        return node

    def value(self, node: Node) -> Node:
        return self.numeric(node, "operand") if isinstance(node, Hex) else node

    def stringish(self, node: Node, what: str) -> Node:
        if node.kind not in (STR, ANY) or isinstance(node, Hex):
            raise self.bad_kind(node, f"expected a string or an identifier before {what}, found a {node.kind}")
        return node

    def in_list(self) -> frozenset[str]:
        self.need_op("(", "'(' to open the IN list")
        values = []
        while True:
            t = self.tok
            if t.kind != STRING:
                raise self.error("a string literal in the IN list")
            values.append(self.take().value)
            if self.at_op(","):
                self.take()
                continue
            self.need_op(")", "',' or ')' in the IN list")
            return frozenset(values)

    def like_pattern(self) -> re.Pattern:
        t = self.tok
        if t.kind != STRING:
            raise self.error("a string literal pattern after LIKE")
        self.take()
        pattern = t.value
        escape = None
        if self.at_kw("ESCAPE"):
            self.take()
            e = self.tok
            if e.kind != STRING:
                raise self.error("a one-character string literal after ESCAPE")
            self.take()
            if len(e.value) != 1:
                raise syntax_error(self.text, e.pos, f"expected one character after ESCAPE, found {e.value!r}")
            escape = e.value
        return _like_regex(self.text, t.pos, pattern, escape)

    def sum(self) -> Node:
        return self.arith(("+", "-"), self.product)

    def product(self) -> Node:
        return self.arith(("*", "/"), self.unary)

    def arith(self, ops: tuple[str, str], operand: Callable[[], Node]) -> Node:
        """A run of ``operand``s joined by the operators ``ops`` of one precedence, left to
        right, each numeric."""
        node = operand()
        while self.tok.kind == OP and self.tok.value in ops:
            t = self.take()
            what = "operand of " + t.value
            node = Arith(t.value, self.numeric(node, what), self.numeric(operand(), what), t.pos)
        return node

    def unary(self) -> Node:
        t = self.tok
        if t.kind == OP and t.value in ("+", "-"):
            self.take()
            nxt = self.tok
            if t.value == "-" and nxt.kind == INT:  # -9223372036854775808 is a literal
                self.take()
                return self.int_lit(-nxt.value, t.pos)
            self.nest(t)
            operand = self.numeric(self.unary(), f"operand of unary {t.value}")
            self.nesting -= 1
            if isinstance(operand, Lit):
                return Lit(-operand.value if t.value == "-" else operand.value, NUM, t.pos)
            return Arith(t.value, operand, None, t.pos)
        return self.primary()

    def int_lit(self, value: int, pos: int) -> Lit:
        if value > INT64_MAX:
            raise syntax_error(self.text, pos, "expected an exact numeric within 64 bits")
        return Lit(value, NUM, pos)

    def primary(self) -> Node:
        t = self.tok
        k = t.kind
        if k == INT:
            self.take()
            return self.int_lit(t.value, t.pos)
        if k in (FLOAT, STRING):
            self.take()
            return Lit(t.value, NUM if k == FLOAT else STR, t.pos)
        if k == HEX:
            self.take()
            return Hex(t.value, t.pos)
        if k == IDENT:
            self.take()
            return Ident(t.value, t.pos)
        if k == KEYWORD and t.value in ("TRUE", "FALSE"):
            self.take()
            return Lit(t.value == "TRUE", BOOL, t.pos)
        if k == OP and t.value == "(":
            self.take()
            self.nest(t)
            node = self.or_expr()
            self.need_op(")", "')' or an operator")
            self.nesting -= 1
            return node
        if k == KEYWORD and t.value == "NULL":
            raise self.error("a value (NULL may only follow IS, as IS NULL)")
        if k == KEYWORD:
            raise self.error(f"a value ({t.value} is a reserved word, not an identifier)")
        raise self.error("a value: an identifier, a literal or '('")


def _like_regex(text: str, pos: int, pattern: str, escape: str | None) -> re.Pattern:
    """``%`` any sequence, ``_`` one character, ``escape`` makes the next one literal."""
    out = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == escape:
            if i + 1 >= n or pattern[i + 1] not in ("%", "_", escape):
                raise syntax_error(
                    text, pos, f"expected %, _ or {escape!r} after the escape {escape!r} in LIKE pattern {pattern!r}"
                )
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)
