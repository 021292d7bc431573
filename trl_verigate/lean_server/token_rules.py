"""The precheck's token rules: the words a proof may not hold and the rules `check_tokens` holds every code token to.

Split from `precheck`, which runs them over a proof's tokens (and once more over its Unicode-normalized code, unless
`is_inert` shows that cannot change the verdict); `files` and `file_header` hold a complete file's declarations and
header lines to them too. The option and configuration rules live in `config_values`.
"""

from __future__ import annotations

from collections.abc import Sequence

from trl_verigate.lean_server import code_tokens
from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.code_tokens import CodeTokens, indices_of
from trl_verigate.lean_server.config_values import (
    _BOOLS,
    _TERM_SEQUENCE_WORDS,
    DISCHARGER_ITEMS,
    OPTION_MAXIMA,
    TACTIC_VALUED_ITEMS,
    check_config_values,
    check_set_option,
    forbidden_option,
)
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex, split_name

# Command keywords (defined next to the splitter, which ends a tactic block at them): any of them inside a proof
# Command keywords (defined next to the splitter, which ends a tactic block at them): any of them inside a proof
# means the proof left its `by` block or adds syntax/declarations.
COMMAND_WORDS = tactic_split.COMMAND_WORDS
# Tactics that close goals without proving them, or search tactics: `apply?` has closed goals
# with sorry without the warning (DeepSeek-Prover-V2). `exact?` is allowed: it fails when it finds nothing, and a
# goal it closes with `sorryAx` is caught by the axioms check like any other.
# `hint` and `observe` run library search too; `plausible`/`slim_check` test a goal on examples and have admitted
# it when they found no counterexample.
TACTIC_WORDS = frozenset(
    {"sorry", "admit", "stop", "apply?", "library_search", "hint", "observe", "observe?", "plausible", "slim_check"}
)
# Elaborators and commands that run code of the proof's choosing while Lean elaborates it (found by reading Lean
# core and Mathlib for `evalTerm`/`evalExpr`/`evalConst` in term, tactic and command elaborators). Code running
# inside the REPL can forge the REPL's answer, so none of them may appear anywhere in a proof or file:
# - `include_str e` (core) evaluates `e` with `evalTerm` and reads that file into the term;
# - `from_lrat e e'` (Mathlib.Tactic.Sat.FromLRAT) evaluates both strings with `evalTerm`; `lrat_proof` is its
#   command form;
# - `success_if_fail_with_msg e tac` (Mathlib.Tactic.SuccessIfFailWithMsg) evaluates `e` with `evalTerm`;
# - `with_panel_widgets [e]` and `show_panel_widgets [e]` (core, Lean.Widget.UserWidget) evaluate widget
#   instances `e` with `evalExpr`;
# - `extend_docs`, `register_linter_set` and `with_weak_namespace` are commands (Mathlib, core, Mathlib): a proof
#   that reaches Lean's command level has left its `by` block, and these change the environment.
# `eval% e` (Mathlib.Tactic.Eval: `evalExpr` with unsafe safety) is one token `eval%`, see `PERCENT_ELABORATORS`.
# Already refused elsewhere: `#eval`/`#`-commands, `run_tac`/`run_elab`/`run_meta`/`by_elab`, `elab`/`macro`
# (COMMAND_WORDS), `native_decide`/`bv_decide`/`decide +native` (NATIVE_WORDS), `plausible` (it compiles and runs
# the goal's `Testable` instance), and every `declare_config_elab` config, which `check_config_values` holds to
# literals.
# - `tactic`, Aesop's rule builder (`aesop (add safe tactic NAME)`): it runs the constant NAME with `evalConst`, so
#   a constant the submission compiled (a helper `def`, a `where`/`let rec` of a helper) would run inside the REPL.
#   No proof needs it (no published prover output has it): Aesop's other builders (`apply`, `simp`, `cases`, …)
#   only elaborate their term.
CODE_RUNNING_WORDS = frozenset({"include_str", "from_lrat", "success_if_fail_with_msg", "with_panel_widgets", "tactic"})
# Macros and functions that print or sleep when compiled code runs (`println! "…"` is `IO.println s!"…"`;
# `dbg_trace "…"; e` and `dbgTrace` print from pure code). The IO names they expand to are refused by name
# (`IO_WORDS`), but the macro hides the name: refused wherever they appear, with the IO names.
IO_MACRO_WORDS = frozenset(
    {"println!", "dbg_trace", "dbgTrace", "dbgTraceVal", "dbgTraceIfShared", "dbgSleep", "dbgStackTrace"}
)
# Commands missing from the splitter's COMMAND_WORDS (`lrat_proof` and `show_panel_widgets` also run code), refused
# here as command words wherever they appear.
EXTRA_COMMAND_WORDS = frozenset(
    {"lrat_proof", "show_panel_widgets", "extend_docs", "register_linter_set", "with_weak_namespace"}
)
# `NAME%` tokens (no space before `%`) whose elaborator runs code: Mathlib's `eval% e` compiles `e` and runs it in
# the interpreter. Lean reads `eval%` as one keyword, so `Polynomial.eval` and `eval % n` are unaffected.
PERCENT_ELABORATORS = frozenset({"eval"})
# Name components that reach IO or mutable state. Compiled or interpreted code (allow_native_decide, or an
# elaborator that slipped through) could run an IO action from safe code: `IO.RealWorld` is `Unit`, so
# `(EStateM.run' act ()).getD d`, or applying an `IO` action to `()`, performs it. Refusing the names that denote
# IO actions and their runners closes that without touching mathematics: none of them occurs in the 730 published
# prover outputs of tests/data/published, and a theorem about numbers has no use for them.
# `IO`/`EIO`/`BaseIO`: the IO monads and the namespace of every IO primitive (`IO.FS.readFile`, `IO.Process.spawn`,
# `IO.getEnv`); `EStateM`: the state monad IO is built on and its runners (`EStateM.run`, `.run'`); `ST`/`EST`/
# `runST`/`runEST`/`StateRefT`: mutable references and their runners; `System`: `System.FilePath.readDir`,
# `pathExists`, `walkDir` return IO actions outside the `IO` namespace.
IO_WORDS = frozenset(
    {"IO", "EIO", "BaseIO", "EStateM", "ST", "EST", "runST", "runEST", "StateRefT", "StateRefT'", "System"}
)
# Lean's metaprogramming monads: a value of these types is a metaprogram, which may change the environment it runs
# in (`addDeclWithoutChecking`, `modifyEnv`) and so the answer `#print axioms` gives. A proof never names them; a
# config field of such a type (`linarith (discharger := …)`, `LinarithConfig.discharger : TacticM Unit`) is one
# way to have one run.
META_WORDS = frozenset({"TacticM", "TermElabM", "MetaM", "CoreM", "CommandElabM", "MacroM", "DelabM"})
# Constants that are axioms or unchecked evaluation, under any spelling of their name.
CONSTANT_WORDS = frozenset({"sorryAx", "trustCompiler"})
NATIVE_WORDS = frozenset(
    {"native_decide", "bv_decide", "bv_decide?", "bv_check", "ofReduceBool", "reduceBool", "ofReduceNat", "reduceNat"}
    # Its `native` field turns `decide` into `native_decide`, however the structure is written.
    | {"DecideConfig"}
)
# `open`, `set_option` and `import` start commands; `open … in` and `set_option … in` are also tactic prefixes.
PREFIX_COMMANDS = frozenset({"open", "set_option", "import"})


def forbidden_word(word: str, allow_native_decide: bool, components: Sequence[str] | None = None) -> str | None:
    """Why `word` (one identifier token, as Lean would read it) is forbidden, or None.

    `components`: the word's dotted name components when its token has them already (`Token.components`).
    """
    if word in COMMAND_WORDS or word in EXTRA_COMMAND_WORDS:
        return f"command `{word}`"
    if word in TACTIC_WORDS:
        return f"`{word}`"
    if word in CODE_RUNNING_WORDS:
        return f"`{word}` (it runs code while Lean elaborates the proof)"
    if not allow_native_decide and word in NATIVE_WORDS:
        return f"`{word}` (native evaluation; allowed only with allow_native_decide=True)"
    parts = split_name(word) if components is None else components
    for part in parts:
        if part in CONSTANT_WORDS or part in TACTIC_WORDS:
            return f"`{part}` (in `{word}`)"
        if not allow_native_decide and part in NATIVE_WORDS:
            return f"`{part}` (in `{word}`; native evaluation, allowed only with allow_native_decide=True)"
        if len(parts) > 1 and part in ("implemented_by", "extern"):
            return f"`{part}` (in `{word}`)"
        if part in IO_WORDS or part in IO_MACRO_WORDS:
            return f"`{part}` (in `{word}`; IO and mutable state are out of a proof's reach)"
        if part in META_WORDS:
            return f"`{part}` (in `{word}`; metaprograms are out of a proof's reach)"
        # `unsafeIO`, `unsafeCast`, `unsafeBaseIO`, `ptrAddrUnsafe`, …: unsafe code runs IO or breaks types.
        # The bare word `unsafe` is a command word, allowed only as an Aesop rule phase (`_is_keyword_argument`).
        if "unsafe" in part.lower() and part != "unsafe":
            return f"`{part}` (in `{word}`; unsafe code)"
    return None


def check_tokens(
    tokens: list[Token],
    allow_native_decide: bool,
    allowed_commands=frozenset(),
    clause_keywords=frozenset(),
    view: CodeTokens | None = None,
) -> None:
    """Hold every code token to the word, attribute, native-evaluation, option and configuration rules.

    `clause_keywords`: the offsets where the splitter reads `where`/`termination_by`/`decreasing_by` as a suffix
    keyword (of the theorem, of a `where` declaration or of a `let rec`: `ProofLayout.clause_keywords`); there, and
    only there, those words are allowed. Every other token of a suffix is held to the same rules as a tactic's.
    `view`: `tokens`' `CodeTokens`, when the caller has one.
    """
    view = CodeTokens(tokens) if view is None else view
    code, texts = view.code, view.texts
    enclosing = view.enclosing
    # `forbidden_word` of each distinct word (a word's verdict depends on the word alone). The loop below visits only
    # the tokens a rule can refuse: a word with a reason or a rule of its own, or `#`, `@`, `+`; every other token
    # passes every rule, and skipping them in C keeps the check linear with a small constant.
    # A text is of one kind wherever it stands (a name's never a symbol's, number's or literal's), and a name's
    # components are `split_name` of its text.
    words = [text for text, kind in dict(zip(texts, view.kinds, strict=True)).items() if kind == "ident"]
    reasons = {word: forbidden_word(word, allow_native_decide) for word in words}
    watched = {word for word, reason in reasons.items() if reason} | _OWN_RULE_WORDS
    watched |= _WATCHED_SYMBOLS if allow_native_decide else _WATCHED_SYMBOLS_NATIVE
    for k in view.indices_of(watched):
        token = code[k]
        following = code[k + 1] if k + 1 < len(code) else None
        adjacent = following is not None and following.start == token.end
        if token.kind == "ident":
            # Before the allowed-command exemption: a file header allows `set_option` but not every option.
            if token.text == "set_option" and following is not None and following.kind == "ident":
                check_set_option(code, k)
            if token.text in ("where", "rec") and following is not None and len(following.components) > 1:
                # An auxiliary definition declared into a namespace (`where _root_.Linarith.LinarithConfig.evil`)
                # could stand in for a library's constant, as a helper's could (`(config := .evil)`).
                raise PrecheckError(
                    f"`{token.text} {following.text}`",
                    following.start,
                    ": a `where`/`let rec` definition is named plainly (no `.`, no `_root_`)",
                )
            if token.text in allowed_commands or _is_keyword_argument(code, k, enclosing):
                continue
            if token.start in clause_keywords and token.text in tactic_split.SUFFIX_WORDS:
                continue
            reason = reasons[token.text]
            if reason:
                raise PrecheckError(reason, token.start)
            if token.text in PERCENT_ELABORATORS and adjacent and following.text == "%":
                raise PrecheckError(f"`{token.text}%` (it runs code while Lean elaborates the proof)", token.start)
        elif token.kind == "symbol":
            if token.text == "#" and adjacent and following.kind == "ident":
                raise PrecheckError(f"command `#{following.text}`", token.start)
            if token.text == "@" and adjacent and following.text == "[":
                raise PrecheckError("attribute `@[`", token.start)
            if not allow_native_decide and token.text == "+" and following is not None and _is_native(following):
                raise PrecheckError("`+native` (native evaluation)", token.start)
    if not allow_native_decide:
        natives = {word for word in words if split_name(word)[-1] == "native"}
        for k in indices_of(texts, natives) if natives else ():
            if k >= len(code) - 2:
                break
            token = code[k]
            assigns = code[k + 1].text == ":" and code[k + 2].text == "=" and code[k + 2].start == code[k + 1].end
            # Any value counts (`Bool.true`, `!false`, `(true)`): only the field name is certain. A local named
            # `native` (`have native := h`) sets no field. A whole config written positionally (`⟨false, true, …⟩`,
            # `.mk …`) is no literal, so `check_config_values` refuses it.
            binds = k > 0 and code[k - 1].text in _BINDING_WORDS
            if _is_native(token) and assigns and not binds:
                raise PrecheckError("`native :=` (native evaluation)", token.start)
    check_config_values(code, view)


# Words with a rule of their own in `check_tokens` besides `forbidden_word`, and the symbols it looks at.
_OWN_RULE_WORDS = frozenset({"set_option", "where", "rec"} | PERCENT_ELABORATORS)
_WATCHED_SYMBOLS = frozenset({"#", "@"})
_WATCHED_SYMBOLS_NATIVE = _WATCHED_SYMBOLS | {"+"}
# Words after which `NAME :=` names a local, not a configuration field.
_BINDING_WORDS = frozenset({"have", "haveI", "let", "letI", "set", "replace"})
# Every text a rule of `check_tokens` (with `check_set_option` and `check_config_values`) compares a token's text or a
# name component with, beyond the words `forbidden_word` refuses and the option names: a token with none of these
# texts is read by the rules only through its kind, span and number of components (`is_inert`). A new rule that
# reads a new text must add it here; test_precheck_look_alikes holds this set to the string constants of those rules.
_RULE_TEXTS = frozenset(
    _OWN_RULE_WORDS
    | _WATCHED_SYMBOLS_NATIVE
    | _BINDING_WORDS
    | PREFIX_COMMANDS
    | tactic_split.SUFFIX_WORDS
    | code_tokens.BRACKETS
    | TACTIC_VALUED_ITEMS
    | DISCHARGER_ITEMS
    | _TERM_SEQUENCE_WORDS
    | _BOOLS
    | {"native", "scoped", "unsafe", "add", "erase", "in", "rule_sets", "%", ":", "=", ",", ";", "-", ".", "→"}
)


def is_inert(token: Token) -> bool:
    """Whether the token rules read `token` only through its kind, span and number of name components: a symbol that
    is not ASCII and none of `_RULE_TEXTS`, or an identifier that `forbidden_word` passes, whose text and components
    are none of `_RULE_TEXTS`, and none of whose dotted suffixes is an option with a rule (`forbidden_option`, a
    bounded option), so as an option name or a configuration field it passes too."""
    if token.kind == "symbol":
        return not token.text.isascii() and token.text not in _RULE_TEXTS
    if token.kind != "ident" or token.text in _RULE_TEXTS:
        return False
    parts = token.components
    if forbidden_word(token.text, False, parts) or not _RULE_TEXTS.isdisjoint(parts):
        return False
    suffixes = [".".join(parts[i:]) for i in range(len(parts))]
    return not any(forbidden_option(option) or option in OPTION_MAXIMA for option in suffixes)


def check_header(header: str, allow_native_decide: bool) -> None:
    """A complete file's header lines (`import`, `open`, `set_option` commands, as `files.split_header` cuts them)
    under the proof's rules: no forbidden name in an `open` (`open IO.FS` would make `readFile` reachable
    unqualified; `open Lean` is harmless, its forbidden constants are caught by name component), and the option
    rules with their bounds. Offsets are relative to `header`."""
    check_tokens(lex(header), allow_native_decide, allowed_commands=PREFIX_COMMANDS)


def _is_keyword_argument(code: list[Token], k: int, enclosing: list[int]) -> bool:
    """Whether `code[k]` is a command word used as an argument: `scoped` right after `open` (`open scoped X in`), or
    `unsafe`, an Aesop rule phase, right after `add` or a `,` in an `(add …)` clause (`aesop (add unsafe 50% …)`).

    Neither starts a command there: `open scoped` without `in` is refused as a command `open`, and an `unsafe` term
    (`unsafe e`) cannot be an application argument, so after `add` Lean reads the phase or fails to parse.
    """
    word = code[k].text
    previous = code[k - 1].text if k > 0 else None
    if word == "scoped":
        return previous == "open"
    if word != "unsafe":
        return False
    if previous in ("add", "erase"):
        return k >= 2 and code[k - 2].text == "("
    if previous != ",":
        return False
    # The bracket the `,` is in, from `enclosing` (`enclosing_openers(code)`): scanning back to it per `unsafe` made
    # `aesop (add unsafe h, unsafe h, …)` quadratic.
    j = enclosing[k]
    return j > 0 and code[j].text == "(" and code[j + 1].text in ("add", "erase")


def _is_native(token: Token) -> bool:
    return token.kind == "ident" and token.components[-1] == "native"
