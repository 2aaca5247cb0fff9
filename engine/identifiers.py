"""What a name in a selection string may be, and so what a message property may be named
(docs/semantics.md §10): Java identifiers joined by single dots, case-sensitive, never a
selector keyword in any case; names starting ``JMS``, ``Root.`` or ``Body.`` belong to the
descriptor and to JMS, never to application properties.

A module of its own, below both the selector (engine/selector/, whose lexer reads
identifiers with these rules) and the properties (engine/properties.py, which check names
with them), so that neither imports the other for them: properties sit in the message
record, and the selector reads records.
"""

from __future__ import annotations

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "NULL", "TRUE", "FALSE", "ESCAPE"})
RESERVED = KEYWORDS  # what an identifier (and so a property name) may not be, in any case


def is_ident_start(ch: str) -> bool:
    """Java's Character.isJavaIdentifierStart, near enough: a letter, ``_`` or ``$``."""
    return ch.isalpha() or ch == "_" or ch == "$"


def is_ident_part(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or ch == "$"


def is_identifier(name: str) -> bool:
    """A selector identifier: Java identifiers joined by single dots, not a reserved word."""
    if not name or name.upper() in RESERVED:
        return False
    for part in name.split("."):
        if not part or not is_ident_start(part[0]) or not all(map(is_ident_part, part[1:])):
            return False
    return True


def reserved_prefix(name: str) -> bool:
    """Names that belong to the descriptor or to JMS, never to application properties."""
    return name.startswith("JMS") or name in ("Root", "Body") or name.startswith(("Root.", "Body."))
