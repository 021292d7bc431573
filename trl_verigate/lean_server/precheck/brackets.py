"""Brackets: which closer matches each opener, read once per request, and the bound on how deep they nest.

Every rule that skips a bracketed group looks its closer up here instead of scanning for it, so a group nested
inside others is never walked once per enclosing level: the precheck's work stays linear in the request's size
however deep the request nests. No published proof nests brackets or tactic blocks anywhere near `MAX_NESTING`
deep; beyond it a request is refused with a message instead of being read.
"""

from __future__ import annotations

from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token

OPENERS = frozenset("([{⟨⦃⟦‹⌊⌈⟪")
CLOSERS = frozenset(")]}⟩⦄⟧›⌋⌉⟫")
# Levels of brackets, and of tactic blocks (`by`, `·`, `=>`, `(disch := …)`), a request may nest.
MAX_NESTING = 32
NESTING_HINT = ": no proof needs that; name an inner step with `have` instead"


def bracket_pairs(tokens: list[Token]) -> list[int]:
    """For each token, the index of its matching closer if it is an opener (`len(tokens)` when none closes it), else
    -1; raises PrecheckError where brackets nest more than `MAX_NESTING` deep."""
    closer = [-1] * len(tokens)
    stack: list[int] = []
    for k, token in enumerate(tokens):
        if token.text in OPENERS:
            if len(stack) >= MAX_NESTING:
                raise PrecheckError(f"brackets nested more than {MAX_NESTING} deep", token.start, NESTING_HINT)
            stack.append(k)
            closer[k] = len(tokens)
        elif token.text in CLOSERS and stack:
            closer[stack.pop()] = k
    return closer


def enclosing_openers(tokens: list[Token]) -> list[int]:
    """For each token, the index of the innermost bracket it stands in (-1 at the top level), in one pass."""
    enclosing, stack = [], []
    for k, token in enumerate(tokens):
        if token.text in CLOSERS and stack:
            stack.pop()
        enclosing.append(stack[-1] if stack else -1)
        if token.text in OPENERS:
            stack.append(k)
    return enclosing
