"""The boundary: a proof is object-level mathematics; it may not metaprogram.

Held by allow-lists where the space is open-ended (`policy`):

* the first token of every tactic, at every nesting level, is an allowed tactic (an allowed conv tactic inside
  `conv … =>`), a bracket or bullet, a `set_option … in`/`open … in` prefix, or `trace` with one string literal;
* a tactic's configuration items (`simp (config := …)`, `omega (splitDisjunctions := false)`) hold literals, since
  Lean compiles and runs them; tactic-valued items (`(disch := …)`) are tactic blocks, held to the first rule;
* `open` only allowed namespaces, `set_option` only allowed options within their bounds, both as `… in` prefixes;

and by rules about shapes, not words, everywhere in the code:

* no name under a metaprogramming namespace (`Lean.`, `IO.`, `Qq.`, …), however it is written, unless its first
  component is a local the proof binds (a hypothesis `EST` and `EST.symm` pass);
* no term-level code runner: `NAME%` elaborators (`eval%`), `by_elab…`, quotations (`` ` ``, `q(`, `Q(`), `do`
  blocks, interpolated strings;
* no command keyword (Lean parses a command wherever its parser stops); no `sorry`, `admit`; no native evaluation
  unless allowed.
"""

from __future__ import annotations

import json

from trl_verigate.lean_server.precheck.layout import (
    CLOSERS,
    IN_PREFIXES,
    OPENERS,
    SUFFIX_WORDS,
    TACTIC_BRACKETS,
    TACTIC_VALUED_ITEMS,
    Node,
    ProofLayout,
    walk,
)
from trl_verigate.lean_server.precheck.policy import NATIVE_TACTICS, Policy
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token

ALLOWLIST_HINT = "LeanServerConfig.extra_tactics (CLI --allow-tactic) adds one"
_STRUCTURAL_HEADS = frozenset({"·", "."} | set(TACTIC_BRACKETS))
# Tokens after which a run of plain names are binders (`intro a IO`, `obtain ⟨EST, h⟩`, `fun ST =>`).
_BINDER_INTRODUCERS = frozenset(
    {
        "intro", "intros", "rintro", "fun", "λ", "∀", "∃", "∃!", "have", "haveI", "let", "letI", "set", "obtain",
        "rename_i", "next", "case", "case'", "by_contra", "by_contra!", "by_cases", "generalize", "choose", "ext",
        "funext", "with", "|", "rcases", "cases'", "induction'", "peel", "lift", "wlog", "suffices",
    }
)  # fmt: skip
_BINDER_RUN = frozenset({"_", "⟨", "⟩", ",", "(", ")", "|"})
_BINDER_REACH = 16
_LITERAL_WORDS = frozenset({"true", "false"})
# The symbols `_check_symbol` has a rule for; every other symbol is plain notation.
_CHECKED_SYMBOLS = frozenset({"`", "#", "@[", "+"})
# Aesop's rule builders that only read a lemma or a definition (not `tactic`, which runs the constant it names).
_AESOP_BUILDERS = frozenset({"apply", "forward", "destruct", "cases", "cases_or", "constructors", "unfold", "simp"})
_OPEN_KEYWORDS = frozenset({"in", "hiding", "renaming", "scoped"})


def _matching(tokens: list[Token], k: int, end: int) -> int:
    """The index of the closer matching the opener `tokens[k]` (before `end`), or `end` when there is none."""
    depth = 0
    for j in range(k, end):
        if tokens[j].text in OPENERS:
            depth += 1
        elif tokens[j].text in CLOSERS:
            depth -= 1
            if depth == 0:
                return j
    return end


def _glued(tokens: list[Token], k: int) -> bool:
    """Whether token k+1 exists and touches token k."""
    return k + 1 < len(tokens) and tokens[k + 1].start == tokens[k].end


# ---------------------------------------------------------------- locals


def bound_names(tokens: list[Token], *, signature: bool = False) -> set[str]:
    """Plain names the tokens bind: the names after `intro`, `fun`, `∀`, `have`, `obtain ⟨…⟩`, `rcases … with ⟨…⟩`,
    `case … =>`, … and, in a declaration's `signature`, its binder groups `(x y : T)` (elsewhere `(x : T)` is a type
    ascription, which binds nothing). Each look around a token stops after `_BINDER_REACH` tokens, so the work stays
    linear."""
    bound: set[str] = set()
    for k, token in enumerate(tokens):
        if token.kind != "ident" or "." in token.text or token.text.startswith("«"):
            continue
        reach_end, reach_start = min(len(tokens), k + _BINDER_REACH), max(0, k - _BINDER_REACH)
        if signature:
            j = k + 1  # a run of plain names, then `:`: `(a b EST : T)`
            while j < reach_end and tokens[j].kind == "ident" and "." not in tokens[j].text:
                j += 1
            if j < len(tokens) and tokens[j].text == ":":
                bound.add(token.text)
                continue
        j = k - 1  # back over names and pattern brackets to what introduces them
        while (
            j >= reach_start
            and tokens[j].text not in _BINDER_INTRODUCERS
            and (tokens[j].text in _BINDER_RUN or (tokens[j].kind == "ident" and "." not in tokens[j].text))
        ):
            j -= 1
        if j >= 0 and tokens[j].text in _BINDER_INTRODUCERS:
            bound.add(token.text)
    return bound


# ---------------------------------------------------------------- names and shapes, everywhere


def check_code(
    tokens: list[Token],
    policy: Policy,
    locals_: set[str],
    *,
    allowed_words: frozenset[str] = frozenset(),
    allowed_opens: frozenset[str] = frozenset(),
    trusted_names: frozenset[str] = frozenset(),
    prefixes_need_in: bool = True,
) -> None:
    """The rules every code token is held to, wherever it stands (see the module docstring).

    `allowed_words`: command keywords allowed here (a file's declaration keyword and modifiers). `allowed_opens`:
    namespaces the trusted header opens. `trusted_names`: the names the trusted statement binds (a hypothesis
    `stop`), which may be written although they are tactic keywords.
    `prefixes_need_in`: False for a file's header lines, where `open` and `set_option` are commands of their own.
    """
    enclosing = _enclosing_openers(tokens)
    for k, token in enumerate(tokens):
        previous = tokens[k - 1] if k else None
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if token.kind == "string":
            if "{" in token.text or "}" in token.text:
                raise PrecheckError(
                    "a brace in a string literal",
                    token.start,
                    ': interpolated strings (`s!"{…}"`) run code, and a proof needs none',
                )
            if previous is not None and previous.kind == "ident" and previous.text.endswith("!"):
                raise PrecheckError(f"`{previous.text}` before a string", previous.start, ": string macros run code")
        elif token.kind == "symbol" and token.text in _CHECKED_SYMBOLS:
            _check_symbol(tokens, k, policy)
        elif token.kind == "ident" and token.text not in allowed_words:
            _check_word(tokens, k, policy, locals_, enclosing)
            if token.text in policy.unlisted_keywords and token.text not in trusted_names:
                raise PrecheckError(
                    f"`{token.text}`",
                    token.start,
                    f", a tactic keyword, is not on the allow-list; wherever it stands, Lean may read it as a tactic: "
                    f"{ALLOWLIST_HINT}",
                )
            if token.text in IN_PREFIXES:
                end = _check_prefix(tokens, k, policy, allowed_opens, prefixes_need_in)
                if not prefixes_need_in and end != len(tokens):
                    raise PrecheckError(
                        f"`{tokens[end].text}`", tokens[end].start, f" after a `{token.text}` command on its line"
                    )
        if (
            token.kind == "ident"
            and following is not None
            and following.text == ":="
            and token.components[-1] == "native"
        ):
            if not policy.allow_native_decide and not (previous is not None and previous.text in _BINDER_INTRODUCERS):
                raise PrecheckError("`native :=`", token.start, _native_reason(policy))


def _native_reason(policy: Policy) -> str:
    return ": native evaluation (compiled code vouches for the proof) needs LeanServerConfig.allow_native_decide=True"


def _check_symbol(tokens: list[Token], k: int, policy: Policy) -> None:
    token = tokens[k]
    if token.text == "`":
        raise PrecheckError("a backtick", token.start, ": quotations and name literals are metaprogramming")
    if token.text == "#" and _glued(tokens, k) and tokens[k + 1].kind == "ident":
        hint = ": remove it; the server prints the axioms itself" if tokens[k + 1].text == "print" else ""
        raise PrecheckError(f"command `#{tokens[k + 1].text}`", token.start, ": a proof holds no commands" + hint)
    if token.text == "@[":
        raise PrecheckError("attribute `@[`", token.start, ": a proof body carries no attributes")
    native_flag = _glued(tokens, k) and tokens[k + 1].kind == "ident" and tokens[k + 1].components[-1] == "native"
    if token.text == "+" and native_flag and not policy.allow_native_decide:
        raise PrecheckError("`+native`", token.start, _native_reason(policy))


def _check_word(tokens: list[Token], k: int, policy: Policy, locals_: set[str], enclosing: list[int]) -> None:
    token = tokens[k]
    text = token.text
    previous = tokens[k - 1] if k else None
    if text in policy.commands and not _keyword_argument(tokens, k, enclosing):
        raise PrecheckError(f"command `{text}`", token.start, ": a proof holds no commands")
    if text == "do" or text.startswith("by_elab"):
        raise PrecheckError(f"`{text}`", token.start, ": it runs a metaprogram")
    if token.components in (("sorry",), ("admit",)):
        raise PrecheckError(f"`{text}`", token.start, ": the proof is incomplete")
    if _glued(tokens, k):
        following = tokens[k + 1].text
        if following == "%":
            raise PrecheckError(f"`{text}%`", token.start, ": `%` elaborators run code while Lean elaborates")
        if following == "(" and text in ("q", "Q"):
            raise PrecheckError(f"`{text}(`", token.start, ": quotations are metaprogramming")
    if not policy.allow_native_decide and text in NATIVE_TACTICS:
        raise PrecheckError(f"`{text}`", token.start, _native_reason(policy))
    glued_at = previous is not None and previous.text == "@" and previous.end == token.start
    reason = _name_refusal(token, policy, locals_, glued_at)
    if reason:
        raise PrecheckError(reason, token.start)


def _keyword_argument(tokens: list[Token], k: int, enclosing: list[int]) -> bool:
    """A command keyword used as an argument: `scoped` in `open scoped X in`, or `unsafe`, an Aesop rule phase, in
    `aesop (add unsafe 50% …)`. `enclosing[k]`: the index of the bracket token k stands in (-1 for none)."""
    previous = tokens[k - 1].text if k else None
    if tokens[k].text == "scoped":
        return previous == "open"
    if tokens[k].text != "unsafe" or previous not in ("add", "erase", ","):
        return False
    opener = enclosing[k]
    return opener >= 0 and tokens[opener].text == "(" and tokens[opener + 1].text in ("add", "erase")


def _enclosing_openers(tokens: list[Token]) -> list[int]:
    """For each token, the index of the innermost bracket it stands in (-1 at the top level), in one pass."""
    enclosing, stack = [], []
    for k, token in enumerate(tokens):
        if token.text in CLOSERS and stack:
            stack.pop()
        enclosing.append(stack[-1] if stack else -1)
        if token.text in OPENERS:
            stack.append(k)
    return enclosing


def _name_refusal(token: Token, policy: Policy, locals_: set[str], after_at: bool) -> str | None:
    components = token.components
    rooted = components[0] == "_root_" and len(components) > 1
    parts = components[1:] if rooted else components
    plain = not rooted and not after_at and not token.text.startswith("«")
    # A hypothesis named `IO`, `ST` or `EST` (a `bindable` root), and its fields, are the proof's own names.
    local = plain and parts[0] in locals_ and parts[0] in policy.bindable
    for namespace in policy.meta_namespaces if parts[0] in policy.meta_roots and not local else ():
        if parts[: len(namespace)] == namespace:
            return f"`{token.text}` names `{'.'.join(namespace)}`, metaprogramming or IO: a proof is object-level mathematics"
    for part in parts:
        if part in policy.meta_names:
            return f"`{part}` (in `{token.text}`) runs or fakes code"
        if "unsafe" in part.lower() and part != "unsafe":
            return f"`{part}` (in `{token.text}`): unsafe code"
    return None


def _check_prefix(tokens: list[Token], k: int, policy: Policy, allowed_opens: frozenset[str], need_in: bool) -> int:
    """`open NAMES … in` and `set_option NAME VALUE in` at token k: allowed namespaces and options, bounded values,
    one of Lean's forms. Returns the index after the form (after `in` when `need_in`)."""
    token = tokens[k]
    end = _open_end(tokens, k, policy, allowed_opens) if token.text == "open" else _set_option_end(tokens, k, policy)
    if not need_in:
        return end
    if end >= len(tokens) or tokens[end].text != "in":
        raise PrecheckError(
            f"`{token.text}` without `in`", token.start, f": write `{token.text} … in` before a tactic or term"
        )
    return end + 1


def _open_end(tokens: list[Token], k: int, policy: Policy, allowed_opens: frozenset[str]) -> int:
    """The index after `open [scoped] N…`, `open N (x…)`, `open N hiding x…` or `open N renaming x → y, …` at k."""

    def names_from(j: int) -> int:
        while (
            j < len(tokens)
            and tokens[j].kind == "ident"
            and tokens[j].text not in _OPEN_KEYWORDS | IN_PREFIXES
            and tokens[j].text not in policy.commands
        ):
            j += 1
        return j

    start = k + 1 + (k + 1 < len(tokens) and tokens[k + 1].text == "scoped")
    j = names_from(start)
    if j == start:
        raise PrecheckError("`open` without a namespace", tokens[k].start)
    for name in tokens[start:j]:
        refusal = _name_refusal(name, policy, set(), False)
        if refusal:
            raise PrecheckError(refusal, name.start)
        opened = ".".join(name.components)
        holding = next((".".join(m) for m in policy.meta_namespaces if ".".join(m).startswith(opened + ".")), None)
        if holding:
            raise PrecheckError(
                f"`open {name.text}`",
                name.start,
                f": it holds `{holding}`, which a proof may not reach by a short name",
            )
        if opened not in policy.namespaces | allowed_opens:
            raise PrecheckError(
                f"`open {name.text}`",
                name.start,
                ": only namespaces on the allow-list may be opened (LeanServerConfig.extra_namespaces adds one)",
            )
    following = tokens[j].text if j < len(tokens) else None
    if following not in ("(", "hiding", "renaming"):
        return j
    if j - start != 1 or start != k + 1:
        raise PrecheckError(f"`open … {following}`", tokens[j].start, " takes one namespace")
    if following == "(" or following == "hiding":
        end = names_from(j + 1)
        if end == j + 1 or (following == "(" and (end >= len(tokens) or tokens[end].text != ")")):
            raise PrecheckError(f"`open … {following}`", tokens[j].start, " needs the names it lists")
        return end + (following == "(")
    j += 1  # renaming x → y, …
    while True:
        if not (
            j + 2 < len(tokens)
            and tokens[j].kind == "ident"
            and tokens[j + 1].text in ("→", "->")
            and tokens[j + 2].kind == "ident"
        ):
            raise PrecheckError("`open … renaming`", tokens[k].start, " is `renaming x → y, …`")
        j += 3
        if j < len(tokens) and tokens[j].text == ",":
            j += 1
            continue
        return j


def _set_option_end(tokens: list[Token], k: int, policy: Policy) -> int:
    name = tokens[k + 1] if k + 1 < len(tokens) and tokens[k + 1].kind == "ident" else None
    value = tokens[k + 2] if k + 2 < len(tokens) else None
    if name is None or value is None:
        raise PrecheckError("`set_option` without an option and a value", tokens[k].start)
    check_option(name, value, policy, clamp=False)
    return k + 3


def check_option(name: Token, value: Token, policy: Policy, clamp: bool) -> str:
    """The value `set_option NAME VALUE` runs with: VALUE, or with `clamp` the bound when VALUE is over it (or 0,
    Lean's "no limit"); refused for an option not on the allow-list or, without `clamp`, a value over its bound."""
    option = ".".join(name.components)
    bound = policy.option_bound(option)
    if bound is None:
        raise PrecheckError(
            f"`set_option {option}`", name.start, ": only options on the allow-list may be set (options.txt)"
        )
    if bound == "bool":
        if value.text not in _LITERAL_WORDS:
            raise PrecheckError(f"`set_option {option} {value.text}`", name.start, ": the value is true or false")
        return value.text
    number = _natural(value)
    if number is None:
        raise PrecheckError(f"`set_option {option} {value.text}`", name.start, ": the value is a natural number")
    if number == 0 or number > bound:
        if clamp:
            return str(bound)
        raise PrecheckError(
            f"`set_option {option} {value.text}`",
            name.start,
            f": at most {bound} (0, no limit, is not allowed): write `set_option {option} {bound} in`",
        )
    return value.text


def _natural(token: Token) -> int | None:
    """The value of a natural-number literal (decimal, `0x`, `0b`, `0o`), else None."""
    if token.kind != "number":
        return None
    try:
        return int(token.text, 0) if not token.text.isdigit() else int(token.text)
    except ValueError:
        return None


# ---------------------------------------------------------------- tactics


def check_tactics(layout: ProofLayout, policy: Policy) -> None:
    """Hold the first token of every tactic to its mode's allow-list, and every configuration item to a literal.

    `trace` as a tactic takes one string literal (`trace "…"`): Mathlib's `trace e` compiles and runs `toString e`.
    Elsewhere `trace` is a name (`Matrix.trace`).
    """
    tokens = layout.tokens
    for node in walk(layout.tactics + layout.suffix_tactics):
        if node.kind != "tactic":
            continue
        head = tokens[node.first]
        if head.text in _STRUCTURAL_HEADS or head.text in IN_PREFIXES:
            continue
        if head.text == "trace" and node.mode == "tactic":
            if node.end - node.first == 2 and tokens[node.first + 1].kind == "string":
                continue
            raise PrecheckError("`trace`", head.start, ' takes one string literal here (`trace "…"`): a term is run')
        allowed = policy.tactics if node.mode == "tactic" else policy.conv_tactics
        if head.text in policy.commands:
            raise PrecheckError(f"command `{head.text}`", head.start, ": a proof holds no commands")
        if head.text in NATIVE_TACTICS and not policy.allow_native_decide:
            raise PrecheckError(f"`{head.text}`", head.start, _native_reason(policy))
        if head.text not in allowed:
            what = "tactic" if node.mode == "tactic" else "conv tactic"
            raise PrecheckError(f"{what} `{head.text}`", head.start, f" is not on the allow-list: {ALLOWLIST_HINT}")
        _check_configuration(tokens, node, policy)


def _check_configuration(tokens: list[Token], node: Node, policy: Policy) -> None:
    """Configuration items right after the head (`simp (config := …) +arith`; in Aesop any `(config := …)`)."""
    k, end = node.first + 1, node.end
    aesop = tokens[node.first].text.startswith("aesop")
    if aesop:
        for j in range(node.first, end):
            if tokens[j].text == "tactic" and tokens[j].kind == "ident":
                raise PrecheckError(
                    "Aesop's `tactic` rule builder", tokens[j].start, ": it runs the constant it names as a tactic"
                )
    while k < end:
        token = tokens[k]
        if token.text in ("+", "-") and _glued(tokens, k) and tokens[k + 1].kind == "ident":
            k += 2
        elif token.text == "(" and k + 2 < end and tokens[k + 1].kind == "ident" and tokens[k + 2].text == ":=":
            close = _matching(tokens, k, end)
            if tokens[k + 1].text not in TACTIC_VALUED_ITEMS and tokens[k + 1].text != "rule_sets":
                _check_literal(tokens, k + 3, close, tokens[k + 1].text)
                _check_configured_options(tokens, k + 1, close, policy)
            k = close + 1
        elif aesop and token.text == "(":
            close = _matching(tokens, k, end)
            if k + 1 < close and tokens[k + 1].text == "add":
                _check_aesop_rules(tokens, k + 2, close)
            k = close + 1
        else:
            break


def _check_aesop_rules(tokens: list[Token], k: int, end: int) -> None:
    """Each rule of an Aesop `(add …)` clause names an allowed builder: with none, Aesop's default builder runs a
    constant of type `TacticM Unit` as a tactic (`Aesop/Builder/Default.lean`)."""
    rule_start, depth = k, 0
    for j in range(k, end + 1):
        if j < end and tokens[j].text in OPENERS:
            depth += 1
        elif j < end and tokens[j].text in CLOSERS:
            depth -= 1
        elif j == end or (depth == 0 and tokens[j].text == ","):
            if not any(t.text in _AESOP_BUILDERS for t in tokens[rule_start:j]):
                at = tokens[min(rule_start, end - 1)]
                raise PrecheckError(
                    "an Aesop rule without a builder",
                    at.start,
                    f": name one ({', '.join(sorted(_AESOP_BUILDERS))}); without one Aesop may run the constant as a "
                    "tactic",
                )
            rule_start = j + 1


def _check_configured_options(tokens: list[Token], k: int, end: int, policy: Policy) -> None:
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
        number = _natural(tokens[value]) if value < end else None
        if number is None or number == 0 or number > bound:
            raise PrecheckError(f"`{name.text} := …`", name.start, f": a natural number, at most {bound}")


def _check_literal(tokens: list[Token], k: int, end: int, item: str) -> None:
    if k >= end or _literal_end(tokens, k, end) != end:
        at = tokens[min(k, len(tokens) - 1)]
        raise PrecheckError(
            f"the value of `({item} := …)`",
            at.start,
            ": a tactic configuration is compiled and run, so it holds literals only (numbers, strings, "
            "true/false, `.name`, lists and `{ field := literal }`)",
        )


def _literal_end(tokens: list[Token], k: int, end: int, depth: int = 0) -> int:
    """The index after the literal starting at `k`, or -1 where none starts (or it nests deeper than 64)."""
    if k >= end or depth > 64:
        return -1
    token = tokens[k]
    if token.kind in ("number", "string", "char") or token.text in _LITERAL_WORDS:
        return k + 1
    if token.text == "-" and k + 1 < end and tokens[k + 1].kind == "number":
        return k + 2
    if token.text == "." and _glued(tokens, k) and tokens[k + 1].kind == "ident" and "." not in tokens[k + 1].text:
        if tokens[k + 1].text == "mk":  # `.mk a b …` builds the structure positionally, past its field names
            return -1
        j = k + 2
        while j < end and tokens[j].text not in (",", "}", "]", ")") and not tokens[j].line_start:
            j = _literal_end(tokens, j, end, depth + 1)
            if j < 0:
                return -1
        return j
    if token.text in ("[", "{", "("):
        close = _matching(tokens, k, end)
        j = k + 1
        while j < close:
            if token.text == "{":
                if not (tokens[j].kind == "ident" and j + 1 < close and tokens[j + 1].text == ":="):
                    return -1
                j += 2
            j = _literal_end(tokens, j, close, depth + 1)
            if j < 0:
                return -1
            if j < close:
                # Fields of `{ … }` are separated by `,` or by line breaks; items of `[ … ]` by `,`.
                if token.text == "{" and tokens[j].line_start:
                    continue
                if tokens[j].text != "," or token.text == "(":
                    return -1
                j += 1
        return close + 1 if close < end else -1
    return -1


def check_extent(layout: ProofLayout, text: str) -> None:
    """Every token lies in the top-level tactic block or the declaration suffix after it: Lean reads anything else
    as further commands. The refusal shows the proof indented as it should be."""
    tokens = layout.tokens
    end = layout.suffix[1] if layout.suffix else layout.end
    if end < len(tokens):
        stray = tokens[end]
        raise PrecheckError(
            f"`{stray.text}`",
            stray.start,
            " closes the `by` block (Lean reads what follows as commands): indent every line of the proof body, "
            "e.g. " + json.dumps(_indented(text, tokens, stray), ensure_ascii=False),
        )


def _indented(text: str, tokens: list[Token], stray: Token) -> str:
    """The proof with `stray`'s line indented: a body sent flush-left (`"omega"`) is shown indented by two spaces; a
    later line at the column of the block's first tactic (shortened to a few lines)."""
    if stray is tokens[0]:
        corrected = [("  " + line) if line.strip() else line for line in text.split("\n")]
    else:
        line_end = text.find("\n", stray.start)
        corrected = [" " * tokens[0].column + text[stray.start : len(text) if line_end < 0 else line_end]]
    while corrected and not corrected[0].strip():
        corrected.pop(0)
    shown = "\n".join(corrected[:3]) + ("\n…" if len(corrected) > 3 else "")
    return shown if len(shown) <= 200 else shown[:200] + "…"


def check_local_definitions(layout: ProofLayout, start: int = 0, stop: int | None = None) -> None:
    """A proof's own definitions (`where` declarations, `let rec`s) are named plainly: one declared into a library's
    namespace (`where _root_.Simp.Config.evil`) could stand in for that library's constants. The suffix words stand
    only where the layout reads a declaration suffix. `start`, `stop`: the token range the layout was read from."""
    tokens = layout.tokens
    for k in range(start, len(tokens) if stop is None else stop):
        token = tokens[k]
        if token.text in SUFFIX_WORDS and k not in layout.clause_keywords:
            raise PrecheckError(
                f"`{token.text}`", token.start, " outside a declaration suffix: it ends the proof there"
            )
    names = list(layout.definition_names)
    for node in walk(layout.tactics + layout.suffix_tactics):
        if tokens[node.first].text == "let" and node.first + 2 < node.end and tokens[node.first + 1].text == "rec":
            names.append(node.first + 2)
            depth = 0  # `let rec f … := …, g … := …`: a further definition after each `,` at the `let rec`'s depth
            for k in range(node.first + 2, node.end - 1):
                depth += (tokens[k].text in OPENERS) - (tokens[k].text in CLOSERS)
                if depth == 0 and tokens[k].text == ",":
                    names.append(k + 1)
    for k in names:
        name = tokens[k]
        if name.kind == "ident" and len(name.components) > 1:
            raise PrecheckError(
                f"the definition `{name.text}`",
                name.start,
                ": a `where`/`let rec` definition is named plainly (no `.`)",
            )
