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
import re
import unicodedata
from collections.abc import Sequence

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex, split_name
from trl_verigate.lean_server.types import Tactic

# Command keywords (defined next to the splitter, which ends a tactic block at them): any of them inside a proof
# means the proof left its `by` block or adds syntax/declarations.
COMMAND_WORDS = tactic_split.COMMAND_WORDS
# Tactics that close goals without proving them, or search tactics: `apply?` has closed goals
# with sorry without the warning (DeepSeek-Prover-V2), `exact?` is `apply?`'s sibling.
# `hint` and `observe` run library search too; `plausible`/`slim_check` test a goal on examples and have admitted
# it when they found no counterexample.
TACTIC_WORDS = frozenset(
    {"sorry", "admit", "stop", "exact?", "apply?", "library_search", "hint", "observe", "observe?", "plausible"}
    | {"slim_check"}
)
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
    if word in COMMAND_WORDS:
        return f"command `{word}`"
    if word in TACTIC_WORDS:
        return f"`{word}`"
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
    return None


def forbidden_option(name: str) -> bool:
    """Whether `set_option NAME` changes how Lean checks or reports a proof (`debug.skipKernelTC`, `warn.sorry`)."""
    return name in FORBIDDEN_OPTIONS or name.startswith(FORBIDDEN_OPTION_PREFIXES)


def check_tokens(tokens: list[Token], allow_native_decide: bool, allowed_commands=frozenset()) -> None:
    code = [t for t in tokens if t.kind != "comment"]
    for k, token in enumerate(code):
        following = code[k + 1] if k + 1 < len(code) else None
        adjacent = following is not None and following.start == token.end
        if token.kind == "ident":
            if token.text in allowed_commands or _is_keyword_argument(code, k):
                continue
            reason = forbidden_word(token.text, allow_native_decide, token.components)
            if reason:
                raise PrecheckError(reason, token.start)
            if token.text == "set_option" and following is not None and following.kind == "ident":
                option = ".".join(following.components)
                if forbidden_option(option):
                    raise PrecheckError(f"`set_option {option}`", token.start)
        elif token.kind == "symbol":
            if token.text == "#" and adjacent and following.kind == "ident":
                raise PrecheckError(f"command `#{following.text}`", token.start)
            if token.text == "@" and adjacent and following.text == "[":
                raise PrecheckError("attribute `@[`", token.start)
            if not allow_native_decide and token.text == "+" and following is not None and _is_native(following):
                raise PrecheckError("`+native` (native evaluation)", token.start)
    if not allow_native_decide:
        for k, token in enumerate(code[:-2]):
            texts = [t.text for t in code[k + 1 : k + 5]]
            assigns = texts[:2] == [":", "="] and code[k + 2].start == code[k + 1].end
            # Any value counts (`Bool.true`, `!false`, `(true)`): only the field name is certain.
            if _is_native(token) and assigns:
                raise PrecheckError("`native :=` (native evaluation)", token.start)
            # A whole config (`⟨false, true, …⟩`, `.mk …`) can set `native` positionally; `decide +kernel` remains.
            if token.text == "decide" and texts == ["(", "config", ":", "="]:
                raise PrecheckError(
                    "`decide (config := …)`",
                    token.start,
                    " can turn on native evaluation; write `decide` or `decide +kernel`",
                )


def _is_keyword_argument(code: list[Token], k: int) -> bool:
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
    depth = 0
    for j in range(k - 1, 0, -1):
        text = code[j].text
        if text in tactic_split.CLOSERS:
            depth += 1
        elif text in tactic_split.OPENERS:
            if depth == 0:
                return text == "(" and code[j + 1].text in ("add", "erase")
            depth -= 1
    return False


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
    for token in tokens:
        if token.kind == "comment" or token.start < literal_end:
            # Code inside an interpolated string's braces is part of the literal for layout, as for the splitter.
            continue
        if token.kind == "string":
            literal_end = token.end
        line_start = text.rfind("\n", 0, token.start) + 1
        # A stray closer leaves the depth below 0, where columns are still checked.
        if depth <= 0 and token.start == line_start and (line_start > 0 or first_line_at_line_start):
            raise PrecheckError(
                f"`{token.text}`", token.start, " closes the `by` block: indent every line of the proof body"
            )
        if token.kind == "symbol":
            if token.text in tactic_split.OPENERS:
                depth += 1
            elif token.text in tactic_split.CLOSERS:
                depth -= 1


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
