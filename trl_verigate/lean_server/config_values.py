"""What a proof may set: Lean options (`set_option NAME VALUE`, and options set through a configuration) and tactic
configuration values (`(NAME := VALUE)` items), which `declare_config_elab` elaborators compile and run.

Split from `precheck`, whose token checks call `check_set_option` and `check_config_values`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import accumulate, compress, repeat
from operator import and_, eq, itemgetter, lt, not_, or_, sub

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.code_tokens import BRACKETS, CodeTokens, tokens_at, values_at
from trl_verigate.lean_server.lexer import PrecheckError, Token

_KIND, _START, _END, _TEXT, _COMPONENTS = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3), itemgetter(4)

FORBIDDEN_OPTION_PREFIXES = ("debug.", "bootstrap.", "compiler.", "interpreter.")
# `warn.sorry false` silences the "declaration uses sorry" warning (the axioms check would still catch it).
FORBIDDEN_OPTIONS = frozenset({"allowUnsafeReducibility", "warn.sorry"})
# Options that only add output (traces, profiles, counters): a proof has no use for them, and
# `set_option trace.Meta.synthInstance true in` floods the response. (`pp.*` options only change how the messages
# Lean writes anyway are printed, and legitimate files set them.)
OUTPUT_OPTION_PREFIXES = ("trace.", "profiler.", "diagnostics.")
OUTPUT_OPTIONS = frozenset({"trace", "profiler", "diagnostics"})
# Numeric options that bound Lean's own work, and the largest value a proof may set. Lean documents defaults, not
# maxima, so the bounds are ours: each is far above what a legitimate proof needs and below what turns the option
# into a weapon.
# - `maxRecDepth` (default 512): deep recursion past it overflows Lean's native stack and kills the REPL; 10000
#   (20x the default) is the value proofs that need more use (`set_option maxRecDepth 10000 in`).
# - `exponentiation.threshold` (default 256): the largest exponent Lean evaluates `a ^ n` with; 4096 keeps each
#   power evaluated small enough to stay within the memory limit.
# `maxHeartbeats` and `synthInstance.maxHeartbeats` are not bounded: they only turn a long elaboration into an error
# earlier, the per-request timeout bounds time whatever they say, and `set_option maxHeartbeats 0` (no limit)
# heads 661 of the 730 published prover outputs.
OPTION_MAXIMA = {"maxRecDepth": 10000, "exponentiation.threshold": 4096}


def forbidden_option(name: str) -> bool:
    """Whether `set_option NAME` changes how Lean checks or reports a proof (`debug.skipKernelTC`, `warn.sorry`), or
    only adds output (`trace.*`, `profiler`, `diagnostics`), whatever its value."""
    return (
        name in FORBIDDEN_OPTIONS
        or name.startswith(FORBIDDEN_OPTION_PREFIXES)
        or name in OUTPUT_OPTIONS
        or name.startswith(OUTPUT_OPTION_PREFIXES)
        or "trace" in name.split(".")
    )


def option_harm(name: str) -> str:
    """What a forbidden option would do, for the rejection reason."""
    if name in FORBIDDEN_OPTIONS or name.startswith(FORBIDDEN_OPTION_PREFIXES):
        return " (it changes how Lean checks or reports the proof)"
    return " (trace, profiler and diagnostics options only add output, and flood the response)"


def option_value_refusal(name: str, value: str) -> str | None:
    """Why `set_option NAME VALUE` must not run (VALUE as written), or None; for options `forbidden_option` allows.

    The numeric options of `OPTION_MAXIMA` take a natural number up to their maximum (decimal, `0x`, `0b` or `0o`,
    as Lean reads a numeral).
    """
    maximum = OPTION_MAXIMA.get(name)
    if maximum is None:
        return None
    try:
        number = int(value, 10) if value.isdigit() else int(value, 0)
    except ValueError:
        return f"`set_option {name} {value}`: the value must be a natural number up to {maximum}"
    if number > maximum:
        return f"`set_option {name} {value}`: at most {maximum} (a larger value lets one proof exhaust Lean)"
    return None


def check_set_option(code: list[Token], k: int) -> None:
    """The option rules for `set_option NAME VALUE` starting at `code[k]`."""
    option = ".".join(code[k + 1].components)
    if forbidden_option(option):
        raise PrecheckError(f"`set_option {option}`", code[k].start, option_harm(option))
    # Only a numeral can set a numeric option; any other value is Lean's error or the prefix check's.
    value = code[k + 2] if k + 2 < len(code) and code[k + 2].kind == "number" else None
    refusal = None if value is None else option_value_refusal(option, value.text)
    if refusal:
        raise PrecheckError(refusal, code[k].start)


# Config-shaped items whose value is a tactic sequence, elaborated as tactics (and checked as the proof's own code):
# `simp (disch := positivity)`, `field_simp (discharger := norm_num)`, `linear_combination (norm := ring_nf)`. A
# single name is accepted as their value (a tactic, or a library constant; never a helper of the file, see
# `files._check_no_helper_code_is_run`). Any other value must be a literal, except a discharger's (below): a config
# field of the same name is evaluated (`LinarithConfig.discharger : TacticM Unit`), and a `norm` item is not
# excluded from Lean's configuration items.
TACTIC_VALUED_ITEMS = frozenset({"disch", "discharger", "norm"})
# Of those, the items Lean's parser never reads as a configuration item: core's `valConfigItem` is
# `atomic(" (" notFollowedBy(&"discharger" <|> &"disch") ident " := ")…`, so in any tactic's `optConfig`
# `(disch := …)`/`(discharger := …)` is the `discharger` syntax, a tactic sequence elaborated as tactics (a config's
# `discharger` field is reachable only through `(config := { discharger := … })`, whose value must be a literal).
# Their value may be a tactic sequence (`field_simp (disch := simp; linarith)`) when it cannot be read as a term at
# all, in case some tactic's own syntax takes a term there: see `_is_tactic_sequence`.
DISCHARGER_ITEMS = frozenset({"disch", "discharger"})
# Words that start a term a `;` can continue (`do a; b`, `have h := e; b`, `let x := e; b`, `by a; b`, `fun x =>
# do …`) or a term `show`/`suffices`/`match`/`if` wraps one in: at the top level of a discharger's value they would
# let a term be read where `_is_tactic_sequence` wants none.
_TERM_SEQUENCE_WORDS = frozenset(
    {"do", "by", "fun", "λ", "have", "haveI", "let", "letI", "show", "suffices", "match", "if", "open", "set_option"}
)


def check_config_values(code: list[Token], view: CodeTokens | None = None) -> None:
    """Every `(NAME := VALUE)` configuration item must have a literal VALUE (see `_is_literal`).

    Tactic configurations built with `declare_config_elab` (`simp`, `omega`, `linarith`, `rw`, `decide`, `aesop`,
    `grind`, …) elaborate VALUE, compile it and run it: a non-literal value is code of the proof's choosing,
    running inside the REPL. Literal values (`simp (config := { maxSteps := 100000 })`, `omega
    (splitDisjunctions := false)`, `rw (occs := .all)`) only set fields; `+opt`/`-opt` flags are literals too.

    The same shape is a named argument after a function (`Nat.le_induction (m := 2)`), which Lean only elaborates.
    A configuration item follows a tactic keyword, and a keyword is never a dotted name, so an item after a dotted
    identifier (or after further items of it) is taken for a named argument. After an undotted name the two cannot
    be told apart without knowing every tactic of every library, so a non-literal value is refused there, with the
    rewrite in the reason.

    `view`: `code`'s `CodeTokens`, when the caller has one (its derived lists are computed once per proof).
    """
    # The code inside a string's `{…}` follows the string in the token list; reading it here could pair a bracket
    # inside the literal with one outside (`(config := "{)}" ++ e)` would look like a literal value).
    view = CodeTokens(code, has_comments=False) if view is None else view
    colons = _config_colons(view)
    if not colons:
        return
    if _all_short(view, colons):
        _check_short_items(view, colons)
        return
    code = view.outside
    items = list(map(sub, colons, repeat(2)))
    closers = view.closers_of_outside
    openers = dict(zip(closers.values(), closers.keys(), strict=True))
    named_arguments: dict[int, bool] = {}
    item_set = set(items)
    end = len(code)
    for k in items:
        name = code[k + 1]
        close = closers.get(k, end)
        value = code[k + 4 : close]
        if _is_literal(value):
            _check_options_in_config(name, value)
            continue
        if name.text in TACTIC_VALUED_ITEMS and len(value) == 1 and value[0].kind == "ident":
            continue
        if name.text in DISCHARGER_ITEMS and _is_tactic_sequence(value):
            continue
        if _is_named_argument(code, k, openers, named_arguments, item_set):
            continue
        if name.text == "rule_sets" and _is_name_list(value):  # Aesop rule-set names, looked up, never evaluated
            continue
        raise _non_literal_value(code, k, name)


def _non_literal_value(code: list[Token], k: int, name: Token) -> PrecheckError:
    """The refusal of the item opening at `code[k]`, named `name`, whose value is not a literal."""
    head = code[k - 1].text if k > 0 else ""
    return PrecheckError(
        f"`({name.text} := …)`",
        code[k].start,
        f" after `{head}` has a non-literal value: a tactic configuration is compiled and run while Lean "
        "elaborates the proof, so its values must be literals (numbers, strings, `true`/`false`, `.constructor`, "
        "lists and `{ field := literal }` structures); a named argument of a function is fine after its "
        "qualified name (`Nat.foo (x := e)`) or written positionally"
        + (
            "; a discharger is one tactic name (`(disch := positivity)`) or a sequence of tactics separated by "
            "`;` or `<;>` (`(disch := simp; linarith)`)"
            if name.text in DISCHARGER_ITEMS
            else ""
        ),
    )


def _all_short(view: CodeTokens, colons: list[int]) -> bool:
    """Whether every item's value is one token that is no bracket, followed by a closer (`(m := a)`): that closer
    closes the item's `(`, so the item's value needs no pairing of the proof's brackets. `colons`: the items' `:`
    (`_config_colons`), each two tokens after its `(`."""
    texts = view.outside_texts
    if colons[-1] + 3 >= len(texts):
        return False
    values, after = values_at(texts, colons, 2), values_at(texts, colons, 3)
    return BRACKETS.isdisjoint(values) and tactic_split.CLOSERS.issuperset(after)


def _check_short_items(view: CodeTokens, colons: list[int]) -> None:
    """`check_config_values`'s verdicts for items that are all short (`_all_short`), item by item in the same order.

    An item needs a look in Python only where a rule could refuse it; the others are told apart in C, over fields
    gathered for all items at once (and a field's test is skipped where no item can meet it):
    - a literal value (one token: a number, string, character, `true`/`false`) is refused only through its name, and
      only where some dotted suffix of the name is an option with a rule (`_may_set_an_option`, judged once per
      distinct name);
    - a non-literal value passes as a tactic-valued item's (`TACTIC_VALUED_ITEMS` with an identifier value), or as a
      named argument (`_named_arguments`).
    A one-token value is no tactic sequence (that needs a `;`) and no rule-set list (`[…]`). The items left are
    judged in token order by the rules above, so the first refused one is the first the item-by-item walk refuses.
    """
    code, texts, kinds = view.outside, view.outside_texts, view.outside_kinds
    count = len(colons)
    value_kinds, value_texts = values_at(kinds, colons, 2), values_at(texts, colons, 2)
    name_texts = values_at(texts, colons, -1)
    literal = [False] * count
    if not (_ONE_TOKEN_LITERALS.isdisjoint(value_kinds) and _BOOLS.isdisjoint(value_texts)):
        literal = list(
            map(or_, map(_ONE_TOKEN_LITERALS.__contains__, value_kinds), map(_BOOLS.__contains__, value_texts))
        )
    excused = literal  # a literal value, or a tactic-valued item's identifier: no named argument needed
    if not TACTIC_VALUED_ITEMS.isdisjoint(name_texts):
        tactic_valued = map(
            and_, map(TACTIC_VALUED_ITEMS.__contains__, name_texts), map(eq, value_kinds, repeat("ident"))
        )
        excused = list(map(or_, literal, tactic_valued))
    named: list[bool] = []
    suspects: list[int] = []
    if not all(excused):
        named = _named_arguments(code, texts, colons)
        if not all(named):
            suspects = list(compress(range(count), map(not_, map(or_, excused, named))))
    if any(literal):
        # A name's verdict depends on its text alone: each distinct name is judged once, on one of its tokens.
        names = dict(zip(compress(name_texts, literal), compress(colons, literal), strict=True))
        risky = {text for text, colon in names.items() if _may_set_an_option(code[colon - 1].components)}
        if risky:
            suspects += compress(range(count), map(and_, literal, map(risky.__contains__, name_texts)))
            suspects.sort()
    for i in suspects:
        k = colons[i] - 2
        name, value = code[k + 1], code[k + 4]
        if literal[i]:
            _check_options_in_config(name, [value])
        elif not (named[i] or (name.text in TACTIC_VALUED_ITEMS and value.kind == "ident")):
            raise _non_literal_value(code, k, name)


def _named_arguments(code: list[Token], texts: list[str], colons: list[int]) -> list[bool]:
    """For short items (`_all_short`, `colons` their `:`), whether each is a named argument (`_is_named_argument`),
    computed in C.

    An item continues a chain of items where the token before it is `)` and the item before it opens six tokens
    back (that `)` is its closer; no other item fits between). A chain is named where the token before its first item
    is a dotted identifier; a running count of chain starts numbers each item's chain, whose answer it takes.
    """
    count, later = len(colons), colons[1:]
    closed = values_at(texts, later, -3)
    # A short item is six tokens (`(`, name, `:`, `=`, a value that is no bracket, a closer), of which only the first
    # is a `(`, so no item opens inside another and the `:`s are at least six apart: exactly six throughout where the
    # first and the last are 6 * (count - 1) apart. Then, with every item after a `)`, all items are one chain.
    if colons[-1] - colons[0] == 6 * (count - 1) and closed.count(")") == count - 1:
        continues = None
        starts = colons[:1]
    else:
        steps = map(sub, later, colons)
        continues = [False, *map(and_, map(eq, steps, repeat(6)), map(eq, closed, repeat(")")))]
        starts = list(compress(colons, map(not_, continues)))
    # The token before each chain's first item; the first item of the code has none (its `(` is `code[0]`).
    no_previous = starts[0] == 2
    previous = tokens_at(code, starts[no_previous:], -3)
    dotted = map(lt, repeat(1), map(len, map(_COMPONENTS, previous)))
    chain_named = [*[False] * no_previous, *map(and_, map(eq, map(_KIND, previous), repeat("ident")), dotted)]
    if continues is None:
        return chain_named * count
    return list(map([None, *chain_named].__getitem__, accumulate(map(not_, continues))))


@lru_cache(maxsize=4096)
def _may_set_an_option(parts: tuple[str, ...]) -> bool:
    """Whether `_check_options_in_config` could refuse an item or field whose name has these dotted components
    (`Token.components`), whatever its value: some dotted suffix of the name is a forbidden option or one with a
    bound. Remembered per name: a configuration repeats its few field names."""
    suffixes = (".".join(parts[i:]) for i in range(len(parts)))
    return any(forbidden_option(option) or option in OPTION_MAXIMA for option in suffixes)


def config_item_values(code: list[Token], view: CodeTokens | None = None) -> Iterator[tuple[Token, list[Token]]]:
    """(NAME, VALUE) of each `(NAME := VALUE)` item whose value Lean may evaluate as code: a tactic-valued item's
    (`TACTIC_VALUED_ITEMS`), and any item with a literal value (a `.ctor` names a constant that the configuration
    elaborator compiles and runs). Non-literal values of other items are refused by `check_config_values` or are
    a function's named arguments, which Lean only elaborates."""
    view = CodeTokens(code, has_comments=False) if view is None else view
    items = _config_items(view)
    code = view.outside
    closers = view.closers_of_outside if items else {}
    for k in items:
        name, value = code[k + 1], code[k + 4 : closers.get(k, len(code))]
        if name.text in TACTIC_VALUED_ITEMS or _is_literal(value):
            yield name, value


def _is_tactic_sequence(value: list[Token]) -> bool:
    """Whether `value` is tactics separated by `;` or `<;>` at its top level, in a form no term has: it starts with
    an undotted name and has no top-level word of `_TERM_SEQUENCE_WORDS`, so the only term syntax a top-level `;`
    could belong to is absent (and `<;>` is tactic syntax only). Its tokens are the proof's own code, checked as
    such; the parser reads it as tactics or not at all."""
    if not value or value[0].kind != "ident" or len(value[0].components) != 1:
        return False
    depth, separated = 0, False
    for token in value:
        if token.kind == "symbol" and token.text in tactic_split.OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in tactic_split.CLOSERS:
            depth -= 1
        elif depth == 0 and token.kind == "ident" and token.text in _TERM_SEQUENCE_WORDS:
            return False
        elif depth == 0 and token.text == ";":
            # `;` alone, or the `;` of `<;>` (lexed `<`, `;`, `>`).
            separated = True
    return separated


def _check_options_in_config(name: Token, value: list[Token]) -> None:
    """Hold options set through a configuration to the `set_option` rules.

    Config elaborators may set Lean options from items or fields named after them (`decide (config :=
    { maxRecDepth := 4000 })`, `(maxRecDepth := 4000)`), possibly under a prefix, so every dotted suffix of each
    item and field name is checked as an option name, with the literal after its `:=`.
    """
    assignments = [(name, 0)]  # each field, and where its literal starts
    for j, token in enumerate(value[:-3]):
        if token.kind == "ident" and value[j + 1].text == ":" and value[j + 2].text == "=":
            assignments.append((token, j + 3))
    for field, literal_at in assignments:
        parts = field.components
        if not _may_set_an_option(parts):  # no rule reads this name (the common case): nothing to refuse
            continue
        numeral = _numeral_at(value, literal_at)
        for i in range(len(parts)):
            option = ".".join(parts[i:])
            if forbidden_option(option):
                raise PrecheckError(f"`{field.text} :=` sets the option `{option}`", field.start, option_harm(option))
            refusal = None if numeral is None else option_value_refusal(option, numeral.text)
            if refusal:
                raise PrecheckError(refusal, field.start)


def _numeral_at(tokens: list[Token], i: int) -> Token | None:
    """The number token of the literal starting at `tokens[i]`, read through parentheses (`((100000))` is the
    literal 100000 to Lean and to `_is_literal`, so the bounds must see it too), or None if it is no number."""
    while i < len(tokens) and tokens[i].text == "(":
        i += 1
    return tokens[i] if i < len(tokens) and tokens[i].kind == "number" else None


def _config_items(view: CodeTokens) -> list[int]:
    """The indices in `view.outside` of the `(` of each `(NAME := …`, the shape of a configuration item (and of a
    named argument): a `(`, an identifier, then `:` and `=` with nothing between them."""
    return list(map(sub, _config_colons(view), repeat(2)))


def _config_colons(view: CodeTokens) -> list[int]:
    """The indices in `view.outside` of the `:` of each configuration item (`_config_items`). Found from the `:`
    tokens, each condition tested in C on the fields gathered for the `:`s that met the ones before; a condition that
    every one meets (the common case) filters nothing."""
    code, texts = view.outside, view.outside_texts
    colons = view.indices_of(":", outside=True)
    colons = colons[bisect_left(colons, 2) : bisect_left(colons, len(code) - 1)]  # room for `(` NAME before, `=` after
    # `=` first: most `:`s of a proof are a type ascription's, and none of those is followed by `=`.
    colons = _where_equal(colons, values_at(texts, colons, 1), "=")
    colons = _where_equal(colons, values_at(texts, colons, -2), "(")
    colons = _where_equal(colons, values_at(view.outside_kinds, colons, -1), "ident")
    # `:` and `=` with nothing between: the one test that reads the tokens themselves (their positions), on the fewest.
    ends, equals_starts = list(map(_END, tokens_at(code, colons))), list(map(_START, tokens_at(code, colons, 1)))
    return colons if ends == equals_starts else list(compress(colons, map(eq, equals_starts, ends)))


def _where_equal(indices: list[int], values: Sequence, wanted: str) -> list[int]:
    """The indices whose value (`values`, one per index) is `wanted`."""
    if values.count(wanted) == len(indices):
        return indices
    return list(compress(indices, map(eq, values, repeat(wanted))))


def _is_named_argument(
    code: list[Token], k: int, openers: dict[int, int], known: dict[int, bool], items: set[int]
) -> bool:
    """Whether the item opening at `code[k]` follows a dotted identifier, possibly across earlier items.

    `known` holds the answer for every item walked so far: all items of a chain share it, so a chain of n items is
    walked once, not once per item (n² steps for `Nat.f (a := x) (a := x) …`). `items`: the indices of all items
    (`_config_items`).
    """
    chain, j = [k], k - 1
    while j >= 0 and code[j].text == ")" and openers.get(j) in items:
        j = openers[j] - 1
        if j + 1 in known:
            answer = known[j + 1]
            break
        chain.append(j + 1)
    else:
        answer = j >= 0 and code[j].kind == "ident" and len(code[j].components) > 1
    for item in chain:
        known[item] = answer
    return answer


def _is_literal(value: list[Token]) -> bool:
    """Whether `value` is exactly one literal: a number, `-number`, string, character, `true`/`false`, `.ctor`
    (optionally applied to list literals, `.pos [1, 2]`), a list of literals, a parenthesized literal, or a
    structure instance `{ f := literal, … }` (fields separated by commas or line breaks).

    Nesting deeper than `_MAX_LITERAL_DEPTH` brackets is no literal: the parser below recurses per bracket.
    """
    if len(value) == 1:
        # One token is a literal exactly when it is a number, string, character, `true` or `false` (a lone bracket
        # or `.`/`-` starts no complete literal): the common case, decided without the walk.
        return value[0].kind in _ONE_TOKEN_LITERALS or value[0].text in _BOOLS
    depth = deepest = 0
    for token in value:
        if token.kind == "symbol" and token.text in tactic_split.OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif token.kind == "symbol" and token.text in tactic_split.CLOSERS:
            depth -= 1
    if deepest > _MAX_LITERAL_DEPTH:
        return False
    end = _literal_end(value, 0)
    return end is not None and end == len(value)


# The kinds and words that are a literal on their own (`_literal_end` of one token).
_ONE_TOKEN_LITERALS = frozenset({"number", "string", "char"})
_BOOLS = frozenset({"true", "false"})
# No configuration needs more: `{ f := .ctor [[1]] }` is three levels.
_MAX_LITERAL_DEPTH = 8


def _literal_end(tokens: list[Token], i: int) -> int | None:
    """The index after the literal starting at `tokens[i]`, or None if none starts there."""
    if i >= len(tokens):
        return None
    token = tokens[i]
    if token.kind in _ONE_TOKEN_LITERALS or token.text in _BOOLS:
        return i + 1
    if token.text == "-" and i + 1 < len(tokens) and tokens[i + 1].kind == "number":
        return i + 2
    if token.text == "." and i + 1 < len(tokens) and tokens[i + 1].kind == "ident":
        if tokens[i + 1].start != token.end or len(tokens[i + 1].components) != 1:
            return None
        i += 2
        while i < len(tokens) and tokens[i].text == "[":
            end = _literal_end(tokens, i)
            if end is None:
                return None
            i = end
        return i
    if token.text == "(":
        end = _literal_end(tokens, i + 1)
        return end + 1 if end is not None and end < len(tokens) and tokens[end].text == ")" else None
    if token.text == "[":
        return _sequence_end(tokens, i + 1, "]", _literal_end)
    if token.text == "{":
        return _sequence_end(tokens, i + 1, "}", _field_end, separator_optional=True)
    return None


def _field_end(tokens: list[Token], i: int) -> int | None:
    """The index after `name := literal` starting at `tokens[i]`, or None."""
    if i + 2 >= len(tokens) or tokens[i].kind != "ident" or [t.text for t in tokens[i + 1 : i + 3]] != [":", "="]:
        return None
    return _literal_end(tokens, i + 3)


def _sequence_end(tokens, i: int, closer: str, element, separator_optional: bool = False) -> int | None:
    """The index after `element (, element)* [,] closer` (or an empty sequence) starting at `tokens[i]`, or None."""
    while i < len(tokens) and tokens[i].text != closer:
        end = element(tokens, i)
        if end is None:
            return None
        i = end
        if i < len(tokens) and tokens[i].text == ",":
            i += 1
        elif not separator_optional and i < len(tokens) and tokens[i].text != closer:
            return None
    return i + 1 if i < len(tokens) else None


def _is_name_list(value: list[Token]) -> bool:
    """Whether `value` is `[A, -B, …]`: Aesop's rule-set names, optionally negated."""
    if len(value) < 2 or value[0].text != "[" or value[-1].text != "]":
        return False
    inner = [token for token in value[1:-1] if token.text != "-"]
    names, commas = inner[0::2], inner[1::2]
    return all(t.kind == "ident" for t in names) and all(t.text == "," for t in commas)
