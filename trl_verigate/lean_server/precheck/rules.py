"""The boundary: a proof is object-level mathematics; it may not metaprogram.

Held by allow-lists where the space is open-ended (`policy`):

* the first token of every tactic, at every nesting level, is an allowed tactic (an allowed conv tactic inside
  `conv … =>`), a bracket or bullet, a `set_option … in`/`open … in` prefix, or `trace` with one string literal;
  the word `trace` stands nowhere else (Mathlib's `trace e` compiles and runs `e`, so a place the layout misreads
  as a term must not hide one);
* a tactic's configuration items (`simp (config := …)`, `omega (splitDisjunctions := false)`), wherever its syntax
  puts them, hold literals, since Lean compiles and runs them; tactic-valued items (`(disch := …)`) are tactic
  blocks, held to the first rule (`configuration`);
* `set_option` only allowed options within their bounds, as an `… in` prefix like `open`;

and by rules about shapes, not words, everywhere in the code:

* no name under a metaprogramming namespace (`Lean.`, `IO.`, `Qq.`, …), however it is written, unless its first
  component is a local the proof binds, within that binder's scope (a hypothesis `EST` and `EST.symm` pass:
  `scopes`); `open` of any namespace but those and the ones that hold them;
* no term-level code runner: `NAME%` elaborators (`eval%`), `by_elab…`, quotations (`` ` ``, `q(`, `Q(`), `do`
  blocks, interpolated strings; no configuration field that holds code (`proc := …`), in any position;
* no command keyword (Lean parses a command wherever its parser stops); no `sorry`, `admit`; no native evaluation
  unless allowed.
"""

from __future__ import annotations

import json

from trl_verigate.lean_server.precheck.brackets import CLOSERS, OPENERS, enclosing_openers
from trl_verigate.lean_server.precheck.configuration import (
    CODE_ARGUMENTS,
    CODE_FIELDS,
    LITERAL_WORDS,
    check_configuration,
    natural,
)
from trl_verigate.lean_server.precheck.grammar import IN_PREFIXES, SUFFIX_WORDS, TACTIC_BRACKETS
from trl_verigate.lean_server.precheck.layout import ProofLayout, walk
from trl_verigate.lean_server.precheck.policy import NATIVE_TACTICS, Policy
from trl_verigate.lean_server.precheck.scopes import BINDER_INTRODUCERS, Scopes
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token

ALLOWLIST_HINT = "LeanServerConfig.extra_tactics (CLI --allow-tactic) adds one"
_STRUCTURAL_HEADS = frozenset({"·", "."} | set(TACTIC_BRACKETS))
# The symbols `_check_symbol` has a rule for; every other symbol is plain notation.
_CHECKED_SYMBOLS = frozenset({"`", "#", "@[", "+"})
_OPEN_KEYWORDS = frozenset({"in", "hiding", "renaming", "scoped"})
# `#s` is Mathlib's `Finset.card s`, not a command, where no `#` command is a prefix of `#s`: Lean reads the longest
# token. Every `#` command of Lean, Batteries and Mathlib is lowercase and at least four letters long, so a name that
# starts with a capital is a card, and so is a lowercase one the proof binds of at most this many characters.
_CARD_NAME_LENGTH = 3


def _glued(tokens: list[Token], k: int) -> bool:
    """Whether token k+1 exists and touches token k."""
    return k + 1 < len(tokens) and tokens[k + 1].start == tokens[k].end


# ---------------------------------------------------------------- names and shapes, everywhere


def check_code(
    tokens: list[Token],
    policy: Policy,
    scopes: Scopes,
    *,
    allowed_words: frozenset[str] = frozenset(),
    trusted_names: frozenset[str] = frozenset(),
    prefixes_need_in: bool = True,
    trace_heads: frozenset[int] = frozenset(),
) -> None:
    """The rules every code token is held to, wherever it stands (see the module docstring).

    `scopes`: where the proof's own names are bound. `allowed_words`: command keywords allowed here (a file's
    declaration keyword and modifiers). `trusted_names`: the names the trusted statement binds (a hypothesis `stop`),
    which may be written although they are tactic keywords. `prefixes_need_in`: False for a file's header lines,
    where `open` and `set_option` are commands of their own. `trace_heads`: the offsets of the `trace "…"` tactics
    `check_tactics` allowed, the only places the word `trace` may stand.
    """
    enclosing = enclosing_openers(tokens)
    for k, token in enumerate(tokens):
        previous = tokens[k - 1] if k else None
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if token.kind == "string":
            _check_string(token, previous)
        elif token.kind == "symbol" and token.text in _CHECKED_SYMBOLS:
            _check_symbol(tokens, k, policy, scopes)
        elif token.kind == "ident" and token.text not in allowed_words:
            if token.text == "trace" and token.start not in trace_heads:
                raise PrecheckError(
                    "`trace`", token.start, ' stands only as the tactic `trace "…"`: `trace e` compiles and runs `e`'
                )
            _check_word(tokens, k, policy, scopes, enclosing)
            if token.text in policy.unlisted_keywords and token.text not in trusted_names:
                if not _list_item_name(tokens, k, enclosing):
                    raise PrecheckError(
                        f"`{token.text}`",
                        token.start,
                        ", a tactic keyword, is not on the allow-list; wherever it stands, Lean may read it as a "
                        f"tactic: {ALLOWLIST_HINT}",
                    )
            if token.text in IN_PREFIXES:
                end = _check_prefix(tokens, k, policy, prefixes_need_in)
                if not prefixes_need_in and end != len(tokens):
                    raise PrecheckError(
                        f"`{tokens[end].text}`", tokens[end].start, f" after a `{token.text}` command on its line"
                    )
        if (
            token.text in CODE_FIELDS
            and following is not None
            and following.text == ":="
            and (token.line_start or (previous is not None and previous.text in ("(", "{", ",")))
        ):
            raise PrecheckError(
                f"the configuration field `{token.text} := …`", token.start, ": its value is code Lean runs"
            )
        if (
            token.kind == "ident"
            and following is not None
            and following.text == ":="
            and token.components[-1] == "native"
        ):
            if not policy.allow_native_decide and not (previous is not None and previous.text in BINDER_INTRODUCERS):
                raise PrecheckError("`native :=`", token.start, _native_reason(policy))


def _check_string(token: Token, previous: Token | None) -> None:
    """A string literal is read as Lean reads it unless a word before it makes it an interpolated string
    (`s!"{e}"`, `throwError "{e}"`, `trace[c] "{e}"`), where braces hold code and may hold quotes: a string with
    braces may follow only an operator, a separator, an opening bracket or a dotted name."""
    if previous is not None and previous.kind == "ident" and previous.text.endswith("!"):
        raise PrecheckError(f"`{previous.text}` before a string", previous.start, ": string macros run code")
    # A term macro that takes an interpolated string is a keyword (`throwError`, `dbg_trace`), never a dotted name:
    # after `String.length` the string is an argument.
    if ("{" in token.text or "}" in token.text) and not (
        previous is None
        or (previous.kind == "symbol" and previous.text not in CLOSERS)
        or (previous.kind == "ident" and len(previous.components) > 1)
    ):
        raise PrecheckError(
            "a brace in a string literal after a name or a bracket",
            token.start,
            ': interpolated strings (`s!"{…}"`) run code, and a proof needs none',
        )


def _list_item_name(tokens: list[Token], k: int, enclosing: list[int]) -> bool:
    """Whether the word at k is an item of a term list (`simp [field, h]`): a name there, since a tactic never starts
    in a term list. A tactic list (Batteries' `t <;> [t1; t2]`) follows `<;>`, not a tactic's name."""
    opener = enclosing[k]
    if opener < 1 or tokens[opener].text != "[" or tokens[opener - 1].kind != "ident":
        return False
    before, after = tokens[k - 1].text, tokens[k + 1].text if k + 1 < len(tokens) else None
    return before in ("[", ",", "←", "<-") and after in (",", "]")


def _native_reason(policy: Policy) -> str:
    return ": native evaluation (compiled code vouches for the proof) needs LeanServerConfig.allow_native_decide=True"


def _check_symbol(tokens: list[Token], k: int, policy: Policy, scopes: Scopes) -> None:
    token = tokens[k]
    if token.text == "`":
        raise PrecheckError("a backtick", token.start, ": quotations and name literals are metaprogramming")
    if token.text == "#" and _glued(tokens, k) and tokens[k + 1].kind == "ident" and not _card(tokens[k + 1], scopes):
        hint = ": remove it; the server prints the axioms itself" if tokens[k + 1].text == "print" else ""
        raise PrecheckError(f"command `#{tokens[k + 1].text}`", token.start, ": a proof holds no commands" + hint)
    if token.text == "@[":
        raise PrecheckError("attribute `@[`", token.start, ": a proof body carries no attributes")
    native_flag = _glued(tokens, k) and tokens[k + 1].kind == "ident" and tokens[k + 1].components[-1] == "native"
    if token.text == "+" and native_flag and not policy.allow_native_decide:
        raise PrecheckError("`+native`", token.start, _native_reason(policy))


def _card(name: Token, scopes: Scopes) -> bool:
    """Whether `#name` is Mathlib's `Finset.card name` (see `_CARD_NAME_LENGTH`)."""
    first = name.components[0]
    return first[:1].isupper() or (first in scopes.bound and len(first) <= _CARD_NAME_LENGTH)


def _check_word(tokens: list[Token], k: int, policy: Policy, scopes: Scopes, enclosing: list[int]) -> None:
    token = tokens[k]
    text = token.text
    previous = tokens[k - 1] if k else None
    if text in policy.commands and not _keyword_argument(tokens, k, enclosing):
        raise PrecheckError(f"command `{text}`", token.start, ": a proof holds no commands")
    if text == "do" or text.startswith("by_elab"):
        raise PrecheckError(f"`{text}`", token.start, ": it runs a metaprogram")
    if text in CODE_ARGUMENTS:
        raise PrecheckError(f"`{text}`", token.start, f": {CODE_ARGUMENTS[text]}")
    if token.components in (("sorry",), ("admit",)):
        raise PrecheckError(f"`{text}`", token.start, ": the proof is incomplete")
    if _glued(tokens, k):
        following = tokens[k + 1].text
        if following == "%" and len(token.components) == 1:
            # `eval%` is one token to Lean; a dotted name is no token, so `k.val%3` is `k.val % 3`.
            raise PrecheckError(f"`{text}%`", token.start, ": `%` elaborators run code while Lean elaborates")
        if following == "(" and text in ("q", "Q"):
            raise PrecheckError(f"`{text}(`", token.start, ": quotations are metaprogramming")
    if not policy.allow_native_decide and text in NATIVE_TACTICS:
        raise PrecheckError(f"`{text}`", token.start, _native_reason(policy))
    glued_at = previous is not None and previous.text == "@" and previous.end == token.start
    reason = _name_refusal(token, policy, scopes, glued_at)
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


def _name_refusal(token: Token, policy: Policy, scopes: Scopes, after_at: bool) -> str | None:
    components = token.components
    rooted = components[0] == "_root_" and len(components) > 1
    parts = components[1:] if rooted else components
    plain = not rooted and not after_at and not token.text.startswith("«")
    # A hypothesis named `IO`, `ST` or `EST` (a `bindable` root), and its fields, are the proof's own names within
    # its binder's scope.
    local = plain and parts[0] in policy.bindable and scopes.binds(parts[0], token.start)
    for namespace in policy.meta_namespaces if parts[0] in policy.meta_roots and not local else ():
        if parts[: len(namespace)] == namespace:
            return f"`{token.text}` names `{'.'.join(namespace)}`, metaprogramming or IO: a proof is object-level mathematics"
    for part in parts:
        if part in policy.meta_names:
            return f"`{part}` (in `{token.text}`) runs or fakes code"
        if "unsafe" in part.lower() and part != "unsafe":
            return f"`{part}` (in `{token.text}`): unsafe code"
    return None


def _check_prefix(tokens: list[Token], k: int, policy: Policy, need_in: bool) -> int:
    """`open NAMES … in` and `set_option NAME VALUE in` at token k: namespaces other than the meta ones, allowed
    options, bounded values, one of Lean's forms. Returns the index after the form (after `in` when `need_in`)."""
    token = tokens[k]
    end = _open_end(tokens, k, policy) if token.text == "open" else _set_option_end(tokens, k, policy)
    if not need_in:
        return end
    if end >= len(tokens) or tokens[end].text != "in":
        raise PrecheckError(
            f"`{token.text}` without `in`", token.start, f": write `{token.text} … in` before a tactic or term"
        )
    return end + 1


def _open_end(tokens: list[Token], k: int, policy: Policy) -> int:
    """The index after `open [scoped] N…`, `open N (x…)`, `open N hiding x…` or `open N renaming x → y, …` at k.

    Any namespace may be opened but a meta namespace, one inside it (the name rule refuses both) and one that holds
    it (`open Mathlib` would make `Mathlib.Tactic.*` reachable as `Tactic.*`)."""

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
        refusal = _name_refusal(name, policy, Scopes(), False)
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
        if value.text not in LITERAL_WORDS:
            raise PrecheckError(f"`set_option {option} {value.text}`", name.start, ": the value is true or false")
        return value.text
    number = natural(value)
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


# ---------------------------------------------------------------- tactics


def check_tactics(layout: ProofLayout, policy: Policy) -> frozenset[int]:
    """Hold the first token of every tactic to its mode's allow-list, and every configuration item to a literal.

    `trace` as a tactic takes one string literal (`trace "…"`): Mathlib's `trace e` compiles and runs `toString e`.
    Returns the offsets of those `trace` tactics, for `check_code`.
    """
    tokens = layout.tokens
    trace_heads: set[int] = set()
    for node in walk(layout.tactics + layout.suffix_tactics):
        if node.kind != "tactic":
            continue
        head = tokens[node.first]
        if head.text in _STRUCTURAL_HEADS or head.text in IN_PREFIXES:
            continue
        if head.text == "trace" and node.mode == "tactic":
            if node.end - node.first == 2 and tokens[node.first + 1].kind == "string":
                trace_heads.add(head.start)
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
        check_configuration(layout, node, policy)
    return frozenset(trace_heads)


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
