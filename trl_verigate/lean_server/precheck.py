"""The precheck of an untrusted proof body: what must not be sent to Lean.

It refuses anything that could leave the `by` block or change how Lean checks or reports the proof (commands,
metaprogramming, attributes, `debug.*` options, native evaluation, `sorry`), and text that looks different to a
reader than to Lean (invisible and bidi characters, look-alike identifiers).

Where the `by` block ends is decided by the tactic splitter, which has its own tokenizer: the two readings (the
splitter's and `lexer.lex`) must agree on what is code, literal and comment, or the proof is rejected, so a comment
or string one of them misreads cannot hide a dedented command.

Unicode: Lean compares identifiers code point by code point and never normalizes, so a look-alike
such as fullwidth `ｓｏｒｒｙ`, Cyrillic `ѕоrrу` or Greek-omicron `sοrry` is a *different*
identifier to Lean (or not an identifier at all) and would fail as unknown. They are rejected
anyway, with a clear reason: it costs nothing (no legitimate proof contains them) and keeps the
verdict safe should a toolchain ever normalize. The spellings Lean *does* treat as the same
name — `«sorryAx»`, `Lean.«ofReduceBool»`, `_root_.sorryAx`, or `ofReduceBool` after
`open Lean` — are caught by comparing every dotted component with guillemets removed.
Legitimate mathematical Unicode (`ℝ`, `h₀`, `α`, `𝓝`, `x²`) passes: none of it normalizes to a
forbidden word.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, ge, itemgetter, methodcaller

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
from trl_verigate.lean_server.gc_pause import gc_paused
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex, split_name
from trl_verigate.lean_server.local_definitions import check_local_definitions
from trl_verigate.lean_server.normalized_tokens import code_tokens as blanked_code_tokens
from trl_verigate.lean_server.normalized_tokens import normalized_tokens, renamed_alike
from trl_verigate.lean_server.readings import all_inside, lexers_disagree_at, read_alike_without_comments
from trl_verigate.lean_server.types import Tactic

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
# Cyrillic/Greek/Latin letters that look like ASCII ones; NFKC leaves them alone.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝӏһАВЕКМНОРСТХЅІЈοανικρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧıꜱʀɡ",
    "aeopcyxsijdqwlhABEKMHOPCTXSIJoavikpuxABEZHIKMNOPTYXisrg",
)


_KIND, _START = itemgetter(0), itemgetter(1)
_SPAN_START, _SPAN_END = attrgetter("start"), attrgetter("end")

# `open`, `set_option` and `import` start commands; `open … in` and `set_option … in` are also tactic prefixes.
PREFIX_COMMANDS = frozenset({"open", "set_option", "import"})


_NOT_PLAIN_ASCII = re.compile(r"[^\n\x20-\x7e]")


def check_characters(text: str, what: str) -> None:
    """Reject characters that read differently to a person than to Lean, or that Lean refuses anyway."""
    # Line breaks and printable ASCII all pass: only the other characters are looked at, and each distinct one once
    # (a `\r`'s verdict depends on the character after it): only a text holding a refused one is walked.
    if all(map(_is_harmless, set(_NOT_PLAIN_ASCII.findall(text)))):
        return
    for match in _NOT_PLAIN_ASCII.finditer(text):
        i, c = match.start(), match.group()
        if c == "\r":
            if text.startswith("\r\n", i):
                continue
            raise PrecheckError(f"lone carriage return in the {what}", i, ": use \\n line endings")
        if c == "\t":
            raise PrecheckError(f"tab in the {what}", i, ": Lean refuses tabs, indent with spaces")
        if unicodedata.category(c) in _REFUSED_CATEGORIES:
            name = unicodedata.name(c, "unnamed")
            raise PrecheckError(f"invisible or control character U+{ord(c):04X} ({name}) in the {what}", i)


_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def _is_harmless(c: str) -> bool:
    """Whether `check_characters` accepts the character `c` wherever it stands (not `\r`, which only `\n` may
    follow)."""
    return c not in "\r\t" and unicodedata.category(c) not in _REFUSED_CATEGORIES


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
# texts is read by the rules only through its kind, span and number of components (`_is_inert`). A new rule that
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


def _is_inert(token: Token) -> bool:
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


def _skeleton(word: str) -> str:
    return unicodedata.normalize("NFKC", word).translate(_CONFUSABLES)


def _code_only(text: str, tokens: list[Token]) -> str:
    """`text` with comments and string/char literals blanked, newlines kept (so lines stay put)."""
    pieces: list[str] = []
    kept_from = 0  # the text before a blanked token is kept as is, and the blanked token's text goes line by line
    for token in compress(tokens, map(_BLANKED_KINDS.__contains__, map(_KIND, tokens))):
        if token.start < kept_from:  # inside a literal already blanked (the code in an interpolated string)
            continue
        pieces.append(text[kept_from : token.start])
        pieces.append(_NOT_LINE_BREAK.sub(" ", text[token.start : token.end]))
        kept_from = token.end
    if not pieces:
        return text
    pieces.append(text[kept_from:])
    return "".join(pieces)


_BLANKED_KINDS = frozenset({"comment", "string", "char"})
_NOT_LINE_BREAK = re.compile(r"[^\n]")
_WORD = re.compile(r"[\w'!?«».]+")


def _check_look_alikes(
    text: str,
    tokens: list[Token],
    allow_native_decide: bool,
    clause_keywords=frozenset(),
    view: CodeTokens | None = None,
) -> None:
    """Reject code that spells a forbidden word with look-alike characters (see the module docstring).

    Runs after `check_tokens` accepted `tokens` with the same `allow_native_decide` and `clause_keywords`
    (`precheck_proof`): the shortcut `_accepted_alike` builds on that. `view`: `tokens`' `CodeTokens`, when the caller
    has one."""
    # Blanking only puts spaces where the text was: an ASCII text's code is ASCII, and its blanking can be skipped.
    if text.isascii():
        return
    code = _code_only(text, tokens)
    if code.isascii():  # every word below would be skipped, and NFKC leaves ASCII unchanged
        return
    # A word's verdict depends on the word alone: each distinct non-ASCII word is judged once, and the text is walked
    # for the first refused one only when there is one.
    if any(map(_look_alike_reason, filter(_not_ascii, set(_WORD.findall(code))), repeat(allow_native_decide))):
        checked: set[str] = set()  # words found innocent
        for match in _WORD.finditer(code):
            word = match.group(0)
            if word.isascii() or word in checked:
                continue
            checked.add(word)
            reason = _look_alike_reason(word, allow_native_decide)
            if reason:
                raise PrecheckError(f"look-alike characters spelling {reason} in `{word}`", match.start())
    if unicodedata.is_normalized("NFKC", code):
        return
    normalized = unicodedata.normalize("NFKC", code)
    view = CodeTokens(tokens) if view is None else view
    if normalized != code and not _accepted_alike(code, normalized, view, allow_native_decide, clause_keywords):
        try:
            # The normalized code's tokens, from the code's own where NFKC only swapped characters (normalized_tokens.py).
            normalized_code = normalized_tokens(code, normalized, view)
            if normalized_code is None:
                normalized_code = lex(normalized)
            check_tokens(normalized_code, allow_native_decide, clause_keywords=clause_keywords)
        except PrecheckError as error:
            # Normalization rarely changes lengths in code, so the offset still points at (or next to) the word.
            raise PrecheckError(
                f"after Unicode normalization (NFKC): {error.before}", error.offset, error.after
            ) from None


def _accepted_alike(code: str, normalized: str, view: CodeTokens, allow_native_decide: bool, clause_keywords) -> bool:
    """Whether the token rules accept the normalized code because they accept the code (`renamed_alike`): they
    accepted the proof's code tokens (`check_tokens` in `precheck_proof`, with the same arguments), which are the
    blanked code's unless the proof has string or character literals; then the blanked code is checked here."""
    if not renamed_alike(code, normalized, _is_inert):
        return False
    if "string" in view.kinds or "char" in view.kinds:
        try:
            check_tokens(blanked_code_tokens(view), allow_native_decide, clause_keywords=clause_keywords)
        except PrecheckError:
            return False
    return True


def _not_ascii(word: str) -> bool:
    return not word.isascii()


def _look_alike_reason(word: str, allow_native_decide: bool) -> str | None:
    skeleton = _skeleton(word)
    return forbidden_word(skeleton, allow_native_decide) or forbidden_word(skeleton.strip("."), False)


_LINE_SPACE = frozenset({"", " ", "\n", "\r", "\t"})
# A line break, then a character that is no whitespace to the lexer: a token (or a comment) starts at column 0.
_CODE_AT_COLUMN_0 = re.compile(r"\n[^ \n\r\t]")
_START_OF_MATCH = methodcaller("start")


def _check_columns(text: str, view: CodeTokens, first_line_at_line_start: bool, clause_keywords=frozenset()) -> None:
    """A code token at column 0 outside brackets closes the `by` block: everything from there on is a new command.

    Inside brackets Lean checks no columns (`withoutPosition`), so a term list may go on at column 0 there; a
    command word or `#` command is refused at any depth by the token checks, and `_check_block` follows the layout.
    """
    # Code inside an interpolated string's braces is part of the literal for layout, as for the splitter. The suffix
    # keywords the splitter placed (`where`, `termination_by`, `decreasing_by`) stand at column 0 by convention;
    # what follows them is held to the column rule as usual (they are words: skipping them moves no bracket depth).
    tokens = view.outside
    # Only a token at column 0 can close the block: the first code character of each line that starts with one is
    # found in the text (in C), and a token starting there, with the bracket depth before it, only for those.
    candidates = [0] if first_line_at_line_start and text[:1] not in _LINE_SPACE else []
    candidates += map((1).__add__, map(_START_OF_MATCH, _CODE_AT_COLUMN_0.finditer(text)))
    at_column_0 = []
    for offset in candidates:
        k = bisect.bisect_left(tokens, offset, key=_START)
        if k < len(tokens) and tokens[k].start == offset and offset not in clause_keywords:
            at_column_0.append(k)
    if not at_column_0:
        return
    depth_after = code_tokens.depth_after(view.outside_texts)
    for k in at_column_0:
        # A stray closer leaves the depth below 0, where columns are still checked.
        if (depth_after[k - 1] if k else 0) <= 0:
            token = tokens[k]
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " closes the `by` block: indent every line of the proof body, e.g. "
                + json.dumps(_indented(text, view.tokens, token), ensure_ascii=False),
            )


def _indented(text: str, tokens: list[Token], dedented: Token) -> str:
    """The corrected form of the proof whose `dedented` token sits at column 0 (shortened to a few lines).

    A body sent flush-left (`"omega"` after a statement ending in `:= by`) is shown indented by two spaces; a later
    line at column 0 is shown at the column of the block's first tactic.
    """
    first = next(t for t in tokens if t.kind != "comment")
    if first is dedented:
        corrected = [("  " + line) if line.strip() else line for line in text.split("\n")]
    else:
        column = first.start - (text.rfind("\n", 0, first.start) + 1)
        line_end = text.find("\n", dedented.start)
        corrected = [" " * column + text[dedented.start : len(text) if line_end < 0 else line_end]]
    while corrected and not corrected[0].strip():  # a file's proof starts with the rest of the `by` line
        corrected.pop(0)
    shown = "\n".join(corrected[:3]) + ("\n…" if len(corrected) > 3 else "")
    return shown if len(shown) <= 200 else shown[:200] + "…"


def _check_block(view: CodeTokens, layout: tactic_split.ProofLayout, text: str) -> list[Tactic]:
    """Every code token must lie in a top-level tactic: anything after the block's end is read by Lean as commands.

    Lean ends the `by` block at the first line indented less than its first tactic (or at a token no tactic
    continues with); what follows is parsed as a declaration suffix (`where`, `termination_by`) or as commands,
    at any column. The splitter follows the same layout rules, so code outside its outermost spans and outside the
    suffix it read (`layout.suffix`) is exactly that. Returns those spans, the proof's outermost tactics.
    """
    spans, suffix = layout.tactics, layout.suffix
    # `text`: the proof, where the readings are often seen to agree without comparing them (`readings.py`).
    if read_alike_without_comments(text, view, layout.tokens):
        disagreement = None
    else:
        disagreement = lexers_disagree_at(view.tokens, layout.tokens, view)
    if disagreement is not None:
        raise PrecheckError(
            "the proof's layout",
            disagreement,
            " is ambiguous (a comment, string or escaped identifier the tactic splitter reads differently), so "
            "where its `by` block ends cannot be checked; rewrite that part",
        )
    starts = list(map(_SPAN_START, spans))
    # The end of the span each token's start falls after (-1 before the first span, so a token there is outside too).
    ends_before = [-1, *map(_SPAN_END, spans)]
    low, high = suffix if suffix is not None else (0, 0)
    # `;` separates tactics, so it sits between spans (or after the last, which Lean allows). The suffix holds the
    # theorem's termination hints and `where` declarations, whose extent the splitter follows as Lean does.
    checked = list(compress(view.code, map(";".__ne__, view.texts))) if ";" in view.texts else view.code
    if low < high:
        checked = [token for token in checked if not low <= token.start < high]
    offsets = list(map(_START, checked))
    token = None
    # Counting per span is the cheaper test where spans are fewer than tokens (a bracket-dense line is one span).
    if 2 * len(spans) >= len(offsets) or not all_inside(offsets, spans):
        # One binary search per token, mapped in C; the first token at or after the end of its span is outside.
        outside = map(ge, offsets, map(ends_before.__getitem__, map(bisect.bisect_right, repeat(starts), offsets)))
        token = next(compress(checked, outside), None)
    if token is not None:
        raise PrecheckError(
            f"`{token.text}`",
            token.start,
            " is outside the proof's tactic block: a line indented less than the block's first tactic closes "
            "the `by` block, and Lean reads the rest as commands; indent every tactic of the block to the same "
            "column",
        )
    return spans


def scoped_prefix_in(code: list[Token], k: int) -> int | None:
    """The index of the `in` closing the `open …` / `set_option NAME VALUE` prefix that starts at `code[k]`, or None
    if no such prefix starts there.

    `code` is a token list without comments. A prefix is `open` followed by at least one `open` argument, or
    `set_option`, an option name and a value Lean's `set_option` accepts (`true`/`false`, a number, a string), each
    followed by `in`. The proof's and a file preamble's checks both read prefixes here, so they agree on what one is.
    """
    token = code[k]
    if token.kind != "ident":
        return None
    if token.text == "open":
        end = k + 1
        if end < len(code) and code[end].text == "scoped":
            end += 1
        first_argument = end
        while end < len(code) and is_open_argument(code[end]):
            end += 1
        if end == first_argument:
            return None
    elif token.text == "set_option":
        end = k + 3
        if end >= len(code) or code[k + 1].kind != "ident" or code[k + 2].kind not in ("ident", "number", "string"):
            return None
    else:
        return None
    return end if end < len(code) and code[end].text == "in" else None


_PREFIX_WORDS = frozenset({"open", "set_option"})


def _check_scoped_prefixes(view: CodeTokens) -> None:
    """`open` and `set_option` are tactics only as `open … in tac` / `set_option NAME VALUE in tac`.

    Without `in` they are commands, which Lean would run after ending the tactic block there.
    """
    code = view.code
    for k in view.indices_of(_PREFIX_WORDS):
        token = code[k]
        if token.kind == "ident" and token.text in _PREFIX_WORDS and scoped_prefix_in(code, k) is None:
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " is not an `open … in tactic` or `set_option NAME VALUE in tactic` prefix (VALUE: true, false, a "
                "number or a string), the only forms that are tactics; the others are commands",
            )


@gc_paused()  # a million tracked tokens make each full collection slow; see gc_pause.py
def precheck_proof(proof: str, allow_native_decide: bool = False, start_column: int = 0) -> list[Tactic]:
    """Raise PrecheckError with the reason if the untrusted proof body must not be sent to Lean.

    Returns the proof's outermost tactics, `split_tactics(proof, "outermost", start_column=start_column)`, which
    the check computes anyway to find where the `by` block ends.

    `start_column` is the column of `proof[0]` in its line, `Prepared.proof_column`: 0 for a ProofRequest (the
    body starts on the line after the statement), the column after `by` for a file whose proof continues the `by`
    line (the same in the code sent to Lean as in the file, a renamed `example` included).
    """
    check_characters(proof, "proof")
    tokens = lex(proof)
    view = CodeTokens(tokens)  # what the checks below derive from the tokens, computed once
    layout = tactic_split.split_proof(proof, "outermost", start_column=start_column)
    keywords = layout.clause_keywords
    _check_columns(proof, view, first_line_at_line_start=start_column == 0, clause_keywords=keywords)
    check_tokens(tokens, allow_native_decide, clause_keywords=keywords, view=view)
    _check_look_alikes(proof, tokens, allow_native_decide, clause_keywords=keywords, view=view)
    _check_scoped_prefixes(view)
    tactics = _check_block(view, layout, proof)
    check_local_definitions(tokens, proof, layout, view)
    return tactics


def is_open_argument(token: Token) -> bool:
    """A token of `open` arguments (`scoped`, namespaces, `(names)`, `hiding`/`renaming` lists), not a keyword."""
    if token.kind == "ident":
        return token.text != "in" and token.text not in COMMAND_WORDS and token.text not in PREFIX_COMMANDS
    return token.kind == "symbol" and token.text in ("(", ")", ",", "→")
