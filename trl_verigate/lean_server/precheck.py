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

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.lexer import PrecheckError, Token, enclosing_openers, lex, split_name
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

# Cyrillic/Greek/Latin letters that look like ASCII ones; NFKC leaves them alone.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝӏһАВЕКМНОРСТХЅІЈοανικρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧıꜱʀɡ",
    "aeopcyxsijdqwlhABEKMHOPCTXSIJoavikpuxABEZHIKMNOPTYXisrg",
)


# `open`, `set_option` and `import` start commands; `open … in` and `set_option … in` are also tactic prefixes.
PREFIX_COMMANDS = frozenset({"open", "set_option", "import"})


def check_characters(text: str, what: str) -> None:
    """Reject characters that read differently to a person than to Lean, or that Lean refuses anyway."""
    for i, c in enumerate(text):
        if c == "\n" or c == " ":
            continue
        if c == "\r":
            if text.startswith("\r\n", i):
                continue
            raise PrecheckError(f"lone carriage return in the {what}", i, ": use \\n line endings")
        if c == "\t":
            raise PrecheckError(f"tab in the {what}", i, ": Lean refuses tabs, indent with spaces")
        category = unicodedata.category(c)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"):
            name = unicodedata.name(c, "unnamed")
            raise PrecheckError(f"invisible or control character U+{ord(c):04X} ({name}) in the {what}", i)


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


def check_tokens(tokens: list[Token], allow_native_decide: bool, allowed_commands=frozenset()) -> None:
    code = [t for t in tokens if t.kind != "comment"]
    enclosing = enclosing_openers(code)
    for k, token in enumerate(code):
        following = code[k + 1] if k + 1 < len(code) else None
        adjacent = following is not None and following.start == token.end
        if token.kind == "ident":
            # Before the allowed-command exemption: a file header allows `set_option` but not every option.
            if token.text == "set_option" and following is not None and following.kind == "ident":
                _check_option(code, k)
            if token.text in allowed_commands or _is_keyword_argument(code, k, enclosing):
                continue
            reason = forbidden_word(token.text, allow_native_decide, token.components)
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
        for k, token in enumerate(code[:-2]):
            assigns = code[k + 1].text == ":" and code[k + 2].text == "=" and code[k + 2].start == code[k + 1].end
            # Any value counts (`Bool.true`, `!false`, `(true)`): only the field name is certain. A local named
            # `native` (`have native := h`) sets no field. A whole config written positionally (`⟨false, true, …⟩`,
            # `.mk …`) is no literal, so `check_config_values` refuses it.
            binds = k > 0 and code[k - 1].text in _BINDING_WORDS
            if _is_native(token) and assigns and not binds:
                raise PrecheckError("`native :=` (native evaluation)", token.start)
    check_config_values(code)


def _check_option(code: list[Token], k: int) -> None:
    """The option rules for `set_option NAME VALUE` starting at `code[k]`."""
    option = ".".join(code[k + 1].components)
    if forbidden_option(option):
        raise PrecheckError(f"`set_option {option}`", code[k].start, option_harm(option))
    # Only a numeral can set a numeric option; any other value is Lean's error or the prefix check's.
    value = code[k + 2] if k + 2 < len(code) and code[k + 2].kind == "number" else None
    refusal = None if value is None else option_value_refusal(option, value.text)
    if refusal:
        raise PrecheckError(refusal, code[k].start)


def check_header(header: str, allow_native_decide: bool) -> None:
    """A complete file's header lines (`import`, `open`, `set_option` commands, as `files.split_header` cuts them)
    under the proof's rules: no forbidden name in an `open` (`open IO.FS` would make `readFile` reachable
    unqualified; `open Lean` is harmless, its forbidden constants are caught by name component), and the option
    rules with their bounds. Offsets are relative to `header`."""
    check_tokens(lex(header), allow_native_decide, allowed_commands=PREFIX_COMMANDS)


# Words after which `NAME :=` names a local, not a configuration field.
_BINDING_WORDS = frozenset({"have", "haveI", "let", "letI", "set", "replace"})
# Config-shaped items whose value is a tactic sequence, elaborated as tactics (and checked as the proof's own code):
# `simp (disch := positivity)`, `field_simp (discharger := norm_num)`, `linear_combination (norm := ring_nf)`. The
# same name can be a config field that is evaluated (`linarith (discharger := e)` sets `LinarithConfig.discharger :
# TacticM Unit`), so only a single name is accepted as their value: a tactic, or a library constant, never code.
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


def check_config_values(code: list[Token]) -> None:
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
    """
    # The code inside a string's `{…}` follows the string in the token list; reading it here could pair a bracket
    # inside the literal with one outside (`(config := "{)}" ++ e)` would look like a literal value).
    code = _outside_literals(code)
    closers = _matching_closers(code)
    openers = {close: open_ for open_, close in closers.items()}
    named_arguments: dict[int, bool] = {}
    for k, token in enumerate(code):
        if not _is_config_item(code, k):
            continue
        name = code[k + 1]
        close = closers.get(k, len(code))
        value = code[k + 4 : close]
        if _is_literal(value):
            _check_options_in_config(name, value)
            continue
        if name.text in TACTIC_VALUED_ITEMS and len(value) == 1 and value[0].kind == "ident":
            continue
        if name.text in DISCHARGER_ITEMS and _is_tactic_sequence(value):
            continue
        if _is_named_argument(code, k, openers, named_arguments):
            continue
        if name.text == "rule_sets" and _is_name_list(value):  # Aesop rule-set names, looked up, never evaluated
            continue
        head = code[k - 1].text if k > 0 else ""
        raise PrecheckError(
            f"`({name.text} := …)`",
            token.start,
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
    assignments = [(name, _numeral_at(value, 0))]
    for j, token in enumerate(value[:-3]):
        if token.kind == "ident" and value[j + 1].text == ":" and value[j + 2].text == "=":
            assignments.append((token, _numeral_at(value, j + 3)))
    for field, numeral in assignments:
        parts = field.components
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


def _outside_literals(code: list[Token]) -> list[Token]:
    """`code` less the tokens lexed from inside string literals (interpolation segments)."""
    kept: list[Token] = []
    literal_end = 0
    for token in code:
        if token.start < literal_end:
            continue
        if token.kind == "string":
            literal_end = token.end
        kept.append(token)
    return kept


def _is_config_item(code: list[Token], k: int) -> bool:
    """Whether `code[k]` opens `(NAME := …`, the shape of a configuration item (and of a named argument)."""
    if code[k].text != "(" or k + 3 >= len(code) or code[k + 1].kind != "ident":
        return False
    colon, equals = code[k + 2], code[k + 3]
    return colon.text == ":" and equals.text == "=" and equals.start == colon.end


def _matching_closers(code: list[Token]) -> dict[int, int]:
    """Index of each opening bracket's matching closer, for the brackets that are closed."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k, token in enumerate(code):
        if token.kind != "symbol":
            continue
        if token.text in tactic_split.OPENERS:
            stack.append(k)
        elif token.text in tactic_split.CLOSERS and stack:
            pairs[stack.pop()] = k
    return pairs


def _is_named_argument(code: list[Token], k: int, openers: dict[int, int], known: dict[int, bool]) -> bool:
    """Whether the item opening at `code[k]` follows a dotted identifier, possibly across earlier items.

    `known` holds the answer for every item walked so far: all items of a chain share it, so a chain of n items is
    walked once, not once per item (n² steps for `Nat.f (a := x) (a := x) …`).
    """
    items, j = [k], k - 1
    while j >= 0 and code[j].text == ")" and j in openers and _is_config_item(code, openers[j]):
        j = openers[j] - 1
        if j + 1 in known:
            answer = known[j + 1]
            break
        items.append(j + 1)
    else:
        answer = j >= 0 and code[j].kind == "ident" and len(code[j].components) > 1
    known.update(dict.fromkeys(items, answer))
    return answer


def _is_literal(value: list[Token]) -> bool:
    """Whether `value` is exactly one literal: a number, `-number`, string, character, `true`/`false`, `.ctor`
    (optionally applied to list literals, `.pos [1, 2]`), a list of literals, a parenthesized literal, or a
    structure instance `{ f := literal, … }` (fields separated by commas or line breaks).

    Nesting deeper than `_MAX_LITERAL_DEPTH` brackets is no literal: the parser below recurses per bracket.
    """
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


# No configuration needs more: `{ f := .ctor [[1]] }` is three levels.
_MAX_LITERAL_DEPTH = 8


def _literal_end(tokens: list[Token], i: int) -> int | None:
    """The index after the literal starting at `tokens[i]`, or None if none starts there."""
    if i >= len(tokens):
        return None
    token = tokens[i]
    if token.kind in ("number", "string", "char") or token.text in ("true", "false"):
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
    chars = list(text)
    for token in tokens:
        if token.kind in ("comment", "string", "char"):
            for i in range(token.start, token.end):
                if chars[i] != "\n":
                    chars[i] = " "
    return "".join(chars)


def _check_look_alikes(text: str, tokens: list[Token], allow_native_decide: bool) -> None:
    """Reject code that spells a forbidden word with look-alike characters (see the module docstring)."""
    code = _code_only(text, tokens)
    for match in re.finditer(r"[\w'!?«».]+", code):
        word = match.group(0)
        if word.isascii():
            continue
        skeleton = _skeleton(word)
        reason = forbidden_word(skeleton, allow_native_decide) or forbidden_word(skeleton.strip("."), False)
        if reason:
            raise PrecheckError(f"look-alike characters spelling {reason} in `{word}`", match.start())
    normalized = unicodedata.normalize("NFKC", code)
    if normalized != code:
        try:
            check_tokens(lex(normalized), allow_native_decide)
        except PrecheckError as error:
            # Normalization rarely changes lengths in code, so the offset still points at (or next to) the word.
            raise PrecheckError(
                f"after Unicode normalization (NFKC): {error.before}", error.offset, error.after
            ) from None


def _check_columns(text: str, tokens: list[Token], first_line_at_line_start: bool) -> None:
    """A code token at column 0 outside brackets closes the `by` block: everything from there on is a new command.

    Inside brackets Lean checks no columns (`withoutPosition`), so a term list may go on at column 0 there; a
    command word or `#` command is refused at any depth by the token checks, and `_check_block` follows the layout.
    """
    depth = 0
    literal_end = 0
    line_start = scanned = 0  # tokens come in text order: each stretch of text is searched for a line break once
    for token in tokens:
        if token.kind == "comment" or token.start < literal_end:
            # Code inside an interpolated string's braces is part of the literal for layout, as for the splitter.
            continue
        if token.kind == "string":
            literal_end = token.end
        line_start, scanned = text.rfind("\n", scanned, token.start) + 1 or line_start, token.start
        # A stray closer leaves the depth below 0, where columns are still checked.
        if depth <= 0 and token.start == line_start and (line_start > 0 or first_line_at_line_start):
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " closes the `by` block: indent every line of the proof body, e.g. "
                + json.dumps(_indented(text, tokens, token), ensure_ascii=False),
            )
        if token.kind == "symbol":
            if token.text in tactic_split.OPENERS:
                depth += 1
            elif token.text in tactic_split.CLOSERS:
                depth -= 1


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


def _check_block(text: str, tokens: list[Token], start_column: int) -> list[Tactic]:
    """Every code token must lie in a top-level tactic: anything after the block's end is read by Lean as commands.

    Lean ends the `by` block at the first line indented less than its first tactic (or at a token no tactic
    continues with); what follows is parsed as a declaration suffix (`where`, `termination_by`) or as commands,
    at any column. The splitter follows the same layout rules, so code outside its outermost spans is exactly
    that. Returns those spans, the proof's outermost tactics.
    """
    spans, splitter_tokens = tactic_split.split_tactics_and_tokens(text, "outermost", start_column=start_column)
    disagreement = lexers_disagree_at(tokens, splitter_tokens)
    if disagreement is not None:
        raise PrecheckError(
            "the proof's layout",
            disagreement,
            " is ambiguous (a comment, string or escaped identifier the tactic splitter reads differently), so "
            "where its `by` block ends cannot be checked; rewrite that part",
        )
    starts = [span.start for span in spans]
    for token in tokens:
        # `;` separates tactics, so it sits between spans (or after the last, which Lean allows).
        if token.kind == "comment" or token.text == ";":
            continue
        index = bisect.bisect_right(starts, token.start) - 1
        if index < 0 or token.start >= spans[index].end:
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " is outside the proof's tactic block: a line indented less than the block's first tactic closes "
                "the `by` block, and Lean reads the rest as commands; indent every tactic of the block to the same "
                "column",
            )
    return spans


def _reading(spans) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(code runs, literals) of a lexer's `(start, end, is_literal)` tokens, tokens inside a literal dropped.

    Touching code tokens merge into one run, so the lexers may cut `:=` or `1_000` differently and still agree.
    """
    runs: list[tuple[int, int]] = []
    literals: list[tuple[int, int]] = []
    literal_end = 0
    for start, end, literal in spans:
        if start < literal_end:  # code inside an interpolated string's braces, part of the literal for layout
            continue
        if literal:
            literals.append((start, end))
            literal_end = end
        elif runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
    return runs, literals


def lexers_disagree_at(tokens: list[Token], splitter_tokens) -> int | None:
    """The first offset where the precheck's tokens and the splitter's differ on what is code, literal or comment.

    `_check_block` trusts the splitter's spans only if both read the same code: otherwise text one of them takes
    for a string or comment could hold the line that, to Lean, ends the `by` block.
    """
    ours = _reading(
        (t.start, t.end, t.kind in ("string", "char"))
        for t in sorted(tokens, key=lambda t: t.start)
        if t.kind != "comment"
    )
    theirs = _reading(splitter_tokens)
    if ours == theirs:
        return None
    differences = [set(a).symmetric_difference(b) for a, b in zip(ours, theirs, strict=True)]
    return min(start for difference in differences for start, _ in difference)


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


def _check_scoped_prefixes(tokens: list[Token]) -> None:
    """`open` and `set_option` are tactics only as `open … in tac` / `set_option NAME VALUE in tac`.

    Without `in` they are commands, which Lean would run after ending the tactic block there.
    """
    code = [t for t in tokens if t.kind != "comment"]
    for k, token in enumerate(code):
        if token.kind == "ident" and token.text in ("open", "set_option") and scoped_prefix_in(code, k) is None:
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " is not an `open … in tactic` or `set_option NAME VALUE in tactic` prefix (VALUE: true, false, a "
                "number or a string), the only forms that are tactics; the others are commands",
            )


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
    _check_columns(proof, tokens, first_line_at_line_start=start_column == 0)
    check_tokens(tokens, allow_native_decide)
    _check_look_alikes(proof, tokens, allow_native_decide)
    _check_scoped_prefixes(tokens)
    return _check_block(proof, tokens, start_column)


def is_open_argument(token: Token) -> bool:
    """A token of `open` arguments (`scoped`, namespaces, `(names)`, `hiding`/`renaming` lists), not a keyword."""
    if token.kind == "ident":
        return token.text != "in" and token.text not in COMMAND_WORDS and token.text not in PREFIX_COMMANDS
    return token.kind == "symbol" and token.text in ("(", ")", ",", "→")
