"""The selector evaluator: a syntax tree compiled once into nested Python closures.

Each closure takes ``values``, a dict from identifier to value, and returns the node's
value: for conditions ``True``, ``False`` or ``None`` (SQL's Unknown); for values a
``bool``, ``int``, ``float``, ``str``, ``bytes`` or ``None`` (NULL). Nothing is ever
passed to ``eval``. Constant subtrees are folded at compile time, so ``2 > 1`` costs
nothing per message and a selector that is FALSE or Unknown whatever the properties is
seen before any message is (2504).

Semantics kept (JMS / docs/semantics.md §10.2):
- NULL (a missing property) gives Unknown in comparisons, arithmetic, BETWEEN, IN and LIKE;
  ``IS [NOT] NULL`` is never Unknown. AND / OR / NOT follow SQL's three-valued tables.
- Values of different types are never converted: comparing them is FALSE (for ``<>`` as
  well), and so is LIKE or IN on a non-string; arithmetic on a non-number is NULL.
  ``int`` and ``float`` are both numbers; ``bool`` is not a number.
- Exact numbers are Java ``long``s: ``+ - * /`` of two of them wrap at 64 bits and ``/``
  truncates toward zero; division by zero is NULL. So no evaluation can raise (an
  unbounded int could overflow a float conversion). NOT BETWEEN / NOT IN / NOT LIKE are
  NOT of the positive form.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from . import parser as p

# A compiled (sub)expression: values -> a number, str, bool, bytes or None (Unknown). Any: each
# closure tests the types it got at run time, as SQL-92's three-valued logic asks.
Fn = Callable[[dict], Any]

_NC = object()  # "not a constant"
_2_63 = 2**63
_2_64 = 2**64
_NUM = (int, float)
_ORDER = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}


def compile_tree(node: p.Node, cond: bool = True) -> tuple[Fn, object]:
    """``(closure, constant)``: the constant is the folded value, or ``_NC``."""
    fn, const = _compile(node)
    if cond and isinstance(node, p.Ident):
        name = node.name

        def as_cond(v: dict, name=name):
            x = v.get(name)
            return x if type(x) is bool else None

        return as_cond, _NC
    return fn, const


def is_constant(const: object) -> bool:
    return const is not _NC


def _const(value: object) -> tuple[Fn, object]:
    return (lambda _v: value), value


def _fold(fn: Fn, *consts: object) -> tuple[Fn, object]:
    if all(c is not _NC for c in consts):
        return _const(fn({}))
    return fn, _NC


def _compile(node: p.Node) -> tuple[Fn, object]:
    if isinstance(node, p.Lit):
        return _const(node.value)
    if isinstance(node, p.Hex):  # only reached where the parser left it a number
        return _const(int(node.digits, 16))
    if isinstance(node, p.Ident):
        name = node.name
        return (lambda v: v.get(name)), _NC
    if isinstance(node, p.Arith):
        return _arith(node)
    if isinstance(node, p.Cmp):
        return _cmp(node.op, node.left, node.right)
    if isinstance(node, p.Logic):
        return _logic(node)
    if isinstance(node, p.Between):
        return _between(node)
    if isinstance(node, p.In):
        return _in(node)
    if isinstance(node, p.Like):
        return _like(node)
    if isinstance(node, p.IsNull):
        return _is_null(node)
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _arith(node: p.Arith) -> tuple[Fn, object]:
    a, ca = _compile(node.left)
    if node.right is None:
        if node.op == "-":

            def neg(v):
                x = a(v)
                t = type(x)
                return (-x if t is float else _long(-x)) if t in _NUM else None

            return _fold(neg, ca)

        def pos(v):
            x = a(v)
            return x if type(x) in _NUM else None

        return _fold(pos, ca)
    b, cb = _compile(node.right)
    op = node.op
    if op == "+":

        def f(v):
            x, y = a(v), b(v)
            return _exact(x + y, x, y) if type(x) in _NUM and type(y) in _NUM else None

    elif op == "-":

        def f(v):
            x, y = a(v), b(v)
            return _exact(x - y, x, y) if type(x) in _NUM and type(y) in _NUM else None

    elif op == "*":

        def f(v):
            x, y = a(v), b(v)
            return _exact(x * y, x, y) if type(x) in _NUM and type(y) in _NUM else None

    else:

        def f(v):
            x, y = a(v), b(v)
            if type(x) not in _NUM or type(y) not in _NUM or y == 0:
                return None
            if type(x) is int and type(y) is int:
                q = abs(x) // abs(y)
                return _long(q if (x < 0) == (y < 0) else -q)
            return x / y

    return _fold(f, ca, cb)


def _long(n: int) -> int:
    """``n`` wrapped to a signed 64-bit integer, as Java's long arithmetic does."""
    return n if -_2_63 <= n < _2_63 else (n + _2_63) % _2_64 - _2_63


def _exact(r, x, y):
    return _long(r) if type(x) is int and type(y) is int else r


def _eq(x: object, y: object) -> bool | None:
    if x is None or y is None:
        return None
    tx, ty = type(x), type(y)
    if tx is ty or (tx in _NUM and ty in _NUM):
        return x == y
    return False


def _cmp(op: str, left: p.Node, right: p.Node) -> tuple[Fn, object]:
    a, ca = _compile(left)
    b, cb = _compile(right)
    if op == "=":

        def f(v):
            return _eq(a(v), b(v))

    elif op == "<>":

        def f(v):
            x, y = a(v), b(v)
            if x is None or y is None:
                return None
            tx, ty = type(x), type(y)
            if tx is ty or (tx in _NUM and ty in _NUM):
                return x != y
            return False

    else:
        rel = _ORDER[op]

        def f(v):
            x, y = a(v), b(v)
            if x is None or y is None:
                return None
            if type(x) in _NUM and type(y) in _NUM:
                return rel(x, y)
            return False

    return _fold(f, ca, cb)


def _logic(node: p.Logic) -> tuple[Fn, object]:
    if node.op == "NOT":
        a, ca = compile_tree(node.left)

        def f(v):
            x = a(v)
            return None if x is None else not x

        return _fold(f, ca)
    # A chain a AND b AND c ... is one node with a loop, not a closure per operand: a
    # selector of thousands of terms then costs no deep recursion to compile or evaluate.
    op = node.op
    decisive = op == "OR"  # the value that decides the chain: TRUE for OR, FALSE for AND
    fns = []
    unknown_const = False
    for operand in _chain(node, op):
        fn, c = compile_tree(operand)
        if c is decisive:
            return _const(decisive)
        if c is _NC:
            fns.append(fn)
        elif c is None:
            unknown_const = True
        # a constant that does not decide (TRUE in AND, FALSE in OR) drops out
    if not fns:
        return _const(None if unknown_const else not decisive)
    if len(fns) == 1 and not unknown_const:
        return fns[0], _NC
    fns = tuple(fns)  # type: ignore[assignment]  # a tuple: the loop below runs per message

    def f(v):  # type: ignore[no-redef]  # the NOT branch above returned its own f
        unknown = unknown_const
        for g in fns:
            x = g(v)
            if x is decisive:
                return decisive
            if x is None:
                unknown = True
        return None if unknown else not decisive

    return f, _NC


def _chain(node: p.Logic, op: str) -> list[p.Node]:
    """The operands of a chain of ``op`` (AND or OR), left to right, found without recursion."""
    out: list[p.Node] = []
    stack: list[p.Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, p.Logic) and n.op == op:
            stack.append(n.right)  # type: ignore[arg-type]  # AND and OR have a right operand
            stack.append(n.left)
        else:
            out.append(n)
    return out


def _between(node: p.Between) -> tuple[Fn, object]:
    x, cx = _compile(node.operand)
    lo, clo = _compile(node.low)
    hi, chi = _compile(node.high)
    negated = node.negated

    def f(v):
        val = x(v)
        low, high = lo(v), hi(v)
        # val >= low AND val <= high, in three-valued logic; a non-number compares FALSE.
        if val is None:
            r1 = r2 = None
        else:
            num = type(val) in _NUM
            r1 = None if low is None else (num and type(low) in _NUM and val >= low)
            r2 = None if high is None else (num and type(high) in _NUM and val <= high)
        r = False if r1 is False or r2 is False else (None if r1 is None or r2 is None else True)
        return r if r is None or not negated else not r

    return _fold(f, cx, clo, chi)


def _in(node: p.In) -> tuple[Fn, object]:
    x, cx = _compile(node.operand)
    values = node.values
    negated = node.negated

    def f(v):
        val = x(v)
        if val is None:
            return None
        r = type(val) is str and val in values
        return not r if negated else r

    return _fold(f, cx)


def _like(node: p.Like) -> tuple[Fn, object]:
    x, cx = _compile(node.operand)
    match = node.regex.fullmatch
    negated = node.negated

    def f(v):
        val = x(v)
        if val is None:
            return None
        r = type(val) is str and match(val) is not None
        return not r if negated else r

    return _fold(f, cx)


def _is_null(node: p.IsNull) -> tuple[Fn, object]:
    x, cx = _compile(node.operand)
    if node.negated:
        return _fold(lambda v: x(v) is not None, cx)
    return _fold(lambda v: x(v) is None, cx)


MAX_DEPTH = 100


def depth_error(node: p.Node) -> p.Node | None:
    """The first node nested deeper than MAX_DEPTH (AND / OR chains count as one level),
    or None. Deeper selectors are refused so that evaluation never nears the recursion limit."""
    stack: list[tuple[p.Node, int, str | None]] = [(node, 1, None)]
    while stack:
        n, d, parent_op = stack.pop()
        if isinstance(n, p.Logic) and n.op == parent_op and n.op != "NOT":
            d -= 1  # a link of the same chain
        if d > MAX_DEPTH:
            return n
        op = n.op if isinstance(n, p.Logic) else None
        for attr in ("left", "right", "operand", "low", "high"):
            child = getattr(n, attr, None)
            if child is not None:
                stack.append((child, d + 1, op))
    return None


def identifiers(node: p.Node) -> list[p.Ident]:
    """Every identifier in the tree, in text order."""
    out: list[p.Ident] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, p.Ident):
            out.append(n)
        for attr in ("left", "right", "operand", "low", "high"):
            child = getattr(n, attr, None)
            if child is not None:
                stack.append(child)
    out.sort(key=lambda n: n.pos)
    return out
