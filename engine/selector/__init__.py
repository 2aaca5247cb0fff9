"""Selection strings (docs/semantics.md §10): parse once at open, evaluate per message.

This subpackage owns the selector dialect — the SQL92 subset of JMS and IBM MQ message
selectors — from text to a predicate over message records:

- ``lexer``: characters to tokens (literals, identifiers, keywords, operators);
- ``parser``: tokens to a typed syntax tree by recursive descent (syntax errors are 2459
  with the 1-based position and what was expected);
- ``evaluate``: the tree compiled once into nested closures with three-valued logic and
  constant folding (a selector that can never be TRUE is 2504);
- ``fields``: the descriptor fields a selector can name (``Root.MQMD.Priority``,
  ``JMSCorrelationID``, ...) and how each is read from a record.

Invariant: a :class:`Selector` accepts a message only when the selector is TRUE for it
(FALSE and Unknown both reject), it reads only the properties and fields the selector
names, and it never calls ``eval``. Written by hand: no maintained Python library parses
this dialect (python-qpid-proton, stomp clients and pymqi/ibmmq pass selectors to a
broker; the parsers that exist are Java, C++ or Erlang).
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import properties, record
from ..constants import Reason
from ..errors import MQError
from ..identifiers import reserved_prefix
from . import evaluate as _ev
from .fields import DESCRIPTOR
from .lexer import syntax_error
from .parser import parse

__all__ = ["Selector", "compile_selector"]


class Selector:
    """A compiled selector: call :meth:`matches` on records, :meth:`evaluate` on values.

    ``text`` is the selection string as given; ``names`` every identifier it references;
    ``always_true`` says it selects every message (it folded to TRUE).
    """

    __slots__ = ("_fields", "_fn", "_props", "always_true", "names", "text")

    def __init__(self, text: str, fn: _ev.Fn, names: tuple[str, ...], always_true: bool):
        self.text = text
        self._fn = fn
        self.names = frozenset(names)
        self.always_true = always_true
        self._fields = tuple((n, DESCRIPTOR[n]) for n in names if n in DESCRIPTOR)
        self._props = properties.wanted({n for n in names if n not in DESCRIPTOR})

    def evaluate(self, values: Mapping[str, object]) -> bool | None:
        """The selector's value over ``values`` (identifier -> value; missing = NULL):
        True, False or None for Unknown."""
        return self._fn(values if isinstance(values, dict) else dict(values))

    def matches(self, rec: bytes, ident: record.Identity) -> bool:
        """Whether the message in ``rec`` is selected (the selector is TRUE for it)."""
        vals = {name: get(rec, ident) for name, get in self._fields}
        if self._props and rec[record.OFF_FLAGS] & record.HAS_PROPS:
            start, end = record.props_span(rec)
            vals.update(properties.lookup(rec, start, end, self._props))
        return self._fn(vals) is True

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def compile_selector(text: str | None) -> Selector | None:
    """Parse and compile a selection string once.

    ``None``, ``""`` or blanks mean no selection and give ``None``. A syntax error raises
    ``MQError(SELECTOR_SYNTAX_ERROR)`` (2459) naming the 1-based position and what was
    expected; a selector that is FALSE or Unknown before looking at any message raises
    ``MQError(SELECTOR_ALWAYS_FALSE)`` (2504): it could never select anything. A
    selector that folds to TRUE selects every message (``always_true``).
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise MQError(
            Reason.SELECTOR_SYNTAX_ERROR,
            f"a selection string must be a str (or None for no selection), not {type(text).__name__}",
        )
    if not text.strip():
        return None
    tree = parse(text)
    deep = _ev.depth_error(tree)
    if deep is not None:
        raise syntax_error(text, deep.pos, f"expected at most {_ev.MAX_DEPTH} levels of nesting")
    names: list[str] = []
    for node in _ev.identifiers(tree):
        name = node.name
        if reserved_prefix(name) and name not in DESCRIPTOR:
            raise syntax_error(
                text,
                node.pos,
                f"expected a descriptor field sweepq knows, found {name}: one of {', '.join(sorted(DESCRIPTOR))}",
            )
        if name not in names:
            names.append(name)
    fn, const = _ev.compile_tree(tree)
    if _ev.is_constant(const):
        if const is not True:
            raise MQError(
                Reason.SELECTOR_ALWAYS_FALSE,
                f"selector {text!r} is {'FALSE' if const is False else 'UNKNOWN'} whatever the message holds, "
                "so it could never select one",
            )
        return Selector(text, fn, (), True)
    return Selector(text, fn, tuple(names), False)
