"""Tactic configuration is data: Lean compiles and runs a configuration's value (`Elab/Tactic/Config.lean`,
`evalExpr'`), so every configuration item holds a literal, wherever the tactic's syntax puts it.

A configuration item is `(NAME := value)`, `+NAME` or `-NAME`. Lean's tactics take them after their name and after
their own flags (`solve_by_elim * (…)`, `linarith ! (…)`, `simpa ? ! (…)`), and Aesop between its clauses. So every
`(NAME := …)` of a tactic's own tokens is read as one, except right after a term, where it is a named argument of that
term (`exact foo (x := fun n => n)`), which Lean elaborates and never runs. The value's allowed shapes
(`literal_end`): numerals, `true`/`false`, enum constructors (`.all`, `.pos [1, 2]`), lists and structure instances
(`{ maxSteps := 100000 }`) of those. Anything else (a name, an application, a field's code: `proc`, `preprocessors`,
`s.env.addDeclCore`, …) is refused.

An allow-listed tactic's argument that is code outside its configuration (`grind … on_failure e`,
`CODE_ARGUMENTS`) is refused too. `(disch := …)`, `(discharger := …)` and `(norm := …)` hold tactic blocks, held to
the tactic allow-list. Each of their tactics starts with a word that starts no term as well (not `show`, `have`,
`fun`, …): a tactic whose syntax takes no discharger reads the item as a configuration field, a term Lean would run.
"""

from __future__ import annotations

import bisect

from trl_verigate.lean_server.precheck.brackets import MAX_NESTING, OPENERS
from trl_verigate.lean_server.precheck.grammar import AESOP_CLAUSE_HEADS, TACTIC_BRACKETS, TACTIC_VALUED_ITEMS
from trl_verigate.lean_server.precheck.layout import Node, ProofLayout
from trl_verigate.lean_server.precheck.policy import Policy
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token

LITERAL_WORDS = frozenset({"true", "false"})
# Keywords of allow-listed tactics whose argument is code Lean runs, outside any configuration: refused wherever they
# stand, with the reason.
CODE_ARGUMENTS = {
    "on_failure": "`grind … on_failure e` compiles and runs `e` (Lean's Elab/Tactic/Grind: `elabFallback`, "
    "`evalConst`), so a proof may not give one",
}
# Configuration fields whose value is code Lean runs (SolveByElim's `proc`/`suspend`, Linarith's `preprocessors` and
# `oracle`): refused as a field (`(proc := …)`, `{ oracle := … }`) wherever it stands, a backstop for a tactic
# position the layout misses, where the item would read as a term's named argument.
CODE_FIELDS = frozenset({"proc", "suspend", "preprocessors", "oracle"})
# Tactics that are also terms: as a configuration field's value (the reading of a tactic without a discharger) they
# build a value Lean would run.
_TERM_HEADS = frozenset(
    {
        "show", "have", "haveI", "let", "letI", "suffices", "calc", "match", "fun", "λ", "if", "open", "set_option",
        "nofun", "nomatch", "by", "do", "·", ".",
    }
)  # fmt: skip
# Words after which a `(NAME := …)` is still in the tactic's configuration: they end no term.
_NO_TERM_WORDS = frozenset({"only", "at", "using", "with", "generalizing", "in", "from", "then", "else"})
# Aesop's rule builders that only read a lemma or a definition (not `tactic`, which runs the constant it names, nor
# `default`, which may pick `tactic`). A rule without a builder gets `default`, whose first choice for a constant of
# type `TacticM Unit` is `tactic` (Aesop/Builder/Default.lean); a submission can define such a constant without
# writing a meta name (its type as `(fun {α} (_ : α) => α) CategoryTheory.categoryTheoryDischarger`), so a rule
# names its builder.
AESOP_BUILDERS = frozenset({"apply", "forward", "destruct", "cases", "cases_or", "constructors", "unfold", "simp"})
# Aesop's rule phases: `(add PHASE …)` is an Aesop clause whatever tactic it follows.
_AESOP_PHASES = frozenset({"safe", "unsafe", "norm"})
_LITERALS_HINT = (
    ": a tactic configuration is compiled and run, so it holds literals only (numbers, true/false, `.name`, "
    "lists and `{ field := literal }`)"
)


def check_configuration(layout: ProofLayout, node: Node, policy: Policy) -> None:
    """Every configuration item among the tactic's own tokens (see the module docstring)."""
    tokens, closers = layout.tokens, layout.closers
    aesop = tokens[node.first].text in AESOP_CLAUSE_HEADS or _has_aesop_clause(tokens, node)
    if aesop:
        _check_tactic_builders(layout, node)
    nested = {child.first: child.end for child in node.children}
    firsts = [child.first for child in node.children]
    k, after_term = node.first + 1, False
    while k < node.end:
        token = tokens[k]
        if k in nested:  # a nested tactic block (`by …`, `· …`, an alternative's `=>` block): a term to what follows
            k, after_term = nested[k], True
        elif token.text == "(" and k + 2 < node.end and tokens[k + 1].kind == "ident" and tokens[k + 2].text == ":=":
            _check_item(layout, node, k, policy, after_term, firsts)
            k = closers[k] + 1
        elif token.text in ("+", "-") and not after_term and _flag(tokens, k):
            k += 2
        elif aesop and token.text == "(" and k + 1 < node.end and tokens[k + 1].text in ("add", "erase"):
            if tokens[k + 1].text == "add":
                check_aesop_rules(layout, k + 2, closers[k])
            k = closers[k] + 1
        elif token.text in OPENERS:
            k, after_term = closers[k] + 1, token.text != "["
        else:
            after_term = _ends_term(tokens, k)
            k += 1


def _has_aesop_clause(tokens: list[Token], node: Node) -> bool:
    """Whether the tactic's tokens hold an Aesop clause `(add PHASE …)` (a tactic that takes Aesop's clauses under a
    name `AESOP_CLAUSE_HEADS` does not list)."""
    return any(
        tokens[j].text == "(" and tokens[j + 1].text == "add" and tokens[j + 2].text in _AESOP_PHASES
        for j in range(node.first, node.end - 2)
    )


def _check_tactic_builders(layout: ProofLayout, node: Node) -> None:
    """Aesop's `tactic` builder runs the constant it names; it may take only a tactic block `(by …)`, whose tactics
    the layout reads and the tactic rules hold."""
    tokens = layout.tokens
    for j in range(node.first, node.end):
        if tokens[j].text != "tactic" or tokens[j].kind != "ident":
            continue
        by_block = j + 2 < node.end and tokens[j + 1].text == "(" and tokens[j + 2].text == "by"
        if not by_block:
            raise PrecheckError(
                "Aesop's `tactic` rule builder",
                tokens[j].start,
                ": it runs the constant it names as a tactic; give it tactics instead (`tactic (by positivity)`)",
            )


def _flag(tokens: list[Token], k: int) -> bool:
    """`+NAME` or `-NAME` at k, glued: a configuration flag."""
    return k + 1 < len(tokens) and tokens[k + 1].start == tokens[k].end and tokens[k + 1].kind == "ident"


def _ends_term(tokens: list[Token], k: int) -> bool:
    """Whether a `(NAME := …)` right after token k is a named argument of a term that token k ends."""
    token = tokens[k]
    if token.kind == "ident":
        return token.text not in _NO_TERM_WORDS
    return token.kind in ("number", "string", "char")


def _check_item(
    layout: ProofLayout, node: Node, k: int, policy: Policy, named_argument: bool, firsts: list[int]
) -> None:
    """The item `(NAME := …)` at token k: a tactic block for the tactic-valued names; otherwise, unless it is a named
    argument, a literal (and an option's value within the option's bound). `firsts`: the first token of each of the
    tactic's nested tactics."""
    tokens, close = layout.tokens, layout.closers[k]
    name = tokens[k + 1].text
    if name in TACTIC_VALUED_ITEMS:
        inside = node.children[bisect.bisect_right(firsts, k) : bisect.bisect_left(firsts, close)]
        _check_tactic_item(layout, k, inside)
    elif named_argument:
        return
    elif name == "rule_sets" and tokens[node.first].text in AESOP_CLAUSE_HEADS:
        _check_rule_set_names(tokens, k + 3, close)
    else:
        if k + 3 >= close or literal_end(layout, k + 3, close) != close:
            at = tokens[min(k + 3, len(tokens) - 1)]
            raise PrecheckError(f"the value of `({name} := …)`", at.start, _LITERALS_HINT)
        check_configured_options(tokens, k + 1, close, policy)


def _check_tactic_item(layout: ProofLayout, k: int, tactics: list[Node]) -> None:
    """The tactics of the `(disch := …)` item at token k, and those of the brackets among them, start as no term
    does."""
    pending = list(tactics)
    while pending:
        tactic = pending.pop()
        head = layout.tokens[tactic.first]
        if head.text in TACTIC_BRACKETS:
            pending += tactic.children
        elif head.text in _TERM_HEADS:
            raise PrecheckError(
                f"`{head.text}` in `({layout.tokens[k + 1].text} := …)`",
                head.start,
                ": it also starts a term, and a tactic without a discharger reads the item as a configuration "
                "value, which Lean runs; write the discharger as tactics (`(disch := positivity)`)",
            )


def _check_rule_set_names(tokens: list[Token], k: int, end: int) -> None:
    """Aesop's `(rule_sets := [-default, Foo])`: names only."""
    for token in tokens[k:end]:
        if token.kind != "ident" and token.text not in ("[", "]", ",", "-"):
            raise PrecheckError("`(rule_sets := …)`", token.start, " lists rule set names only")


def literal_end(layout: ProofLayout, k: int, end: int, depth: int = 0) -> int:
    """The index after the literal starting at `k` (before `end`), or -1 where none starts or it nests deeper than
    `MAX_NESTING`."""
    tokens = layout.tokens
    if k >= end or depth > MAX_NESTING:
        return -1
    token = tokens[k]
    if token.kind == "number" or token.text in LITERAL_WORDS:
        return k + 1
    if token.text == "-" and k + 1 < end and tokens[k + 1].kind == "number":
        return k + 2
    if token.text == "." and _glued_name(tokens, k) and "." not in tokens[k + 1].text and tokens[k + 1].text != "mk":
        # An enum constructor, with literal arguments (`.pos [1, 2]`); `.mk a b …` would build a structure
        # positionally, past its field names.
        j = k + 2
        while j < end and tokens[j].text not in (",", "}", "]", ")") and not tokens[j].line_start:
            j = literal_end(layout, j, end, depth + 1)
            if j < 0:
                return -1
        return j
    if token.text in ("[", "{", "("):
        return _group_literal_end(layout, k, end, depth)
    return -1


def _glued_name(tokens: list[Token], k: int) -> bool:
    following = tokens[k + 1] if k + 1 < len(tokens) else None
    return following is not None and following.start == tokens[k].end and following.kind == "ident"


def _group_literal_end(layout: ProofLayout, k: int, end: int, depth: int) -> int:
    """`[literal, …]`, `{ field := literal … }` or `(literal)` at k."""
    tokens, close = layout.tokens, layout.closers[k]
    if close >= end:
        return -1
    bracket = tokens[k].text
    j = k + 1
    while j < close:
        if bracket == "{":
            if not (tokens[j].kind == "ident" and tokens[j + 1].text == ":="):
                return -1
            j += 2
        j = literal_end(layout, j, close, depth + 1)
        if j < 0:
            return -1
        if j < close:
            # Fields of `{ … }` are separated by `,` or by line breaks; items of `[ … ]` by `,`.
            if bracket == "{" and tokens[j].line_start:
                continue
            if tokens[j].text != "," or bracket == "(":
                return -1
            j += 1
    return close + 1


def check_configured_options(tokens: list[Token], k: int, end: int, policy: Policy) -> None:
    """Fields of a configuration that are options keep to the option rules: no trace or debug option, and a bounded
    one (`maxRecDepth := 10000`, `opt.exponentiation.threshold := 4096`) within its bound."""
    for j in range(k, end - 2):
        name = tokens[j]
        if name.kind != "ident" or tokens[j + 1].text != ":=":
            continue
        parts = name.components
        if any(part in ("trace", "debug", "profiler", "diagnostics") for part in parts):
            raise PrecheckError(f"`{name.text} := …`", name.start, ": trace and debug options are refused")
        bounds = [policy.option_bound(".".join(parts[i:])) for i in range(len(parts))]
        bound = next((b for b in bounds if isinstance(b, int)), None)
        if bound is None:
            continue
        value = j + 2
        while value < end and tokens[value].text == "(":
            value += 1
        number = natural(tokens[value]) if value < end else None
        if number is None or number == 0 or number > bound:
            raise PrecheckError(f"`{name.text} := …`", name.start, f": a natural number, at most {bound}")


def natural(token: Token) -> int | None:
    """The value of a natural-number literal (decimal, `0x`, `0b`, `0o`), else None."""
    if token.kind != "number":
        return None
    try:
        return int(token.text, 0) if not token.text.isdigit() else int(token.text)
    except ValueError:
        return None


def check_aesop_rules(layout: ProofLayout, k: int, end: int) -> None:
    """Every branch of the rules of an Aesop `(add …)` clause names an allowed builder: with none, Aesop's default
    builder runs a constant of type `TacticM Unit` as a tactic (`Aesop/Builder/Default.lean`). A rule is a run of
    features, optionally ending in a bracketed list of rules, each of which shares them
    (`Aesop/Frontend/RuleExpr.lean`: `feature [rule_expr,+]`): a branch is one path from the clause to a leaf."""
    for start, stop in _items(layout, k, end):
        _check_rule_branches(layout, start, stop, False)


def _items(layout: ProofLayout, k: int, end: int) -> list[tuple[int, int]]:
    """The `[start, stop)` ranges of the comma-separated items between k and end."""
    items, start = [], k
    while k < end:
        if layout.tokens[k].text == ",":
            items.append((start, k))
            start = k + 1
        k = layout.closers[k] + 1 if layout.closers[k] >= 0 else k + 1
    items.append((start, end))
    return items


def _check_rule_branches(layout: ProofLayout, k: int, end: int, has_builder: bool) -> None:
    tokens = layout.tokens
    j = k
    while j < end:
        text = tokens[j].text
        if text == "[":  # the rest of every branch is one of the listed rules
            close = layout.closers[j]
            if close + 1 < end:
                raise PrecheckError("an Aesop rule after a rule list", tokens[close].start, ": Lean reads none there")
            for start, stop in _items(layout, j + 1, min(close, end)):
                _check_rule_branches(layout, start, stop, has_builder)
            return
        if text == "default":
            raise PrecheckError(
                "Aesop's `default` rule builder", tokens[j].start, ": it may run the constant as a tactic"
            )
        tactic_block = text == "tactic" and j + 2 < end and tokens[j + 2].text == "by"  # `_check_tactic_builders`
        has_builder = has_builder or text in AESOP_BUILDERS or tactic_block
        j = layout.closers[j] + 1 if layout.closers[j] >= 0 else j + 1  # `(…)`: builder options and terms
    if not has_builder:
        at = tokens[min(k, len(tokens) - 1)]
        raise PrecheckError(
            "an Aesop rule without a builder",
            at.start,
            f": name one ({', '.join(sorted(AESOP_BUILDERS))}; `apply`, or `simp` for a `norm` rule, is what Aesop "
            "picks for a lemma); without one Aesop runs a constant of type `TacticM Unit` as a tactic",
        )
