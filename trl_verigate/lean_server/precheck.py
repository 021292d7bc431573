"""The precheck of an untrusted proof body: what must not be sent to Lean.

It refuses anything that could leave the `by` block or change how Lean checks or reports the proof (commands,
metaprogramming, attributes, `debug.*` options, native evaluation, `sorry`), and text that looks different to a
reader than to Lean (invisible and bidi characters, look-alike identifiers).

The word and token rules themselves (`check_tokens`, `forbidden_word`) are in `token_rules`; this module runs them
and the checks of characters, look-alikes, columns and the `by` block's extent over a proof.

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
from itertools import compress, filterfalse, repeat
from operator import attrgetter, ge, itemgetter, le, methodcaller

from trl_verigate.lean_server import code_tokens
from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.code_tokens import CodeTokens
from trl_verigate.lean_server.gc_pause import gc_paused
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex
from trl_verigate.lean_server.local_definitions import check_local_definitions
from trl_verigate.lean_server.normalized_tokens import code_tokens as blanked_code_tokens
from trl_verigate.lean_server.normalized_tokens import non_ascii_words, normalized_tokens, renamed_alike
from trl_verigate.lean_server.readings import all_inside, lexers_disagree_at, read_alike_without_comments
from trl_verigate.lean_server.token_rules import COMMAND_WORDS, PREFIX_COMMANDS, check_tokens, forbidden_word, is_inert
from trl_verigate.lean_server.types import Tactic

# Cyrillic/Greek/Latin letters that look like ASCII ones; NFKC leaves them alone.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝӏһАВЕКМНОРСТХЅІЈοανικρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧıꜱʀɡ",
    "aeopcyxsijdqwlhABEKMHOPCTXSIJoavikpuxABEZHIKMNOPTYXisrg",
)


_KIND, _START = itemgetter(0), itemgetter(1)
_SPAN_START, _SPAN_END = attrgetter("start"), attrgetter("end")


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
    view = CodeTokens(tokens) if view is None else view
    # Without comments and literals there is nothing to blank (told from the view's kinds, which the token checks
    # have listed already, instead of a pass over the tokens).
    literals = view.code is not view.tokens or "string" in view.present_kinds or "char" in view.present_kinds
    code = _code_only(text, tokens) if literals else text
    if code.isascii():  # every word below would be skipped, and NFKC leaves ASCII unchanged
        return
    # A word's verdict depends on the word alone: each distinct non-ASCII word is judged once, and the text is walked
    # for the first refused one only when there is one.
    # The non-ASCII words of `_WORD` lie in the whitespace-delimited ones that hold a character outside ASCII.
    words = non_ascii_words(code)
    candidates = filterfalse(str.isascii, set(_WORD.findall(" ".join(words))))
    if any(map(_look_alike_reason, candidates, repeat(allow_native_decide))):
        checked: set[str] = set()  # words found innocent
        for match in _WORD.finditer(code):
            word = match.group(0)
            if word.isascii() or word in checked:
                continue
            checked.add(word)
            reason = _look_alike_reason(word, allow_native_decide)
            if reason:
                raise PrecheckError(f"look-alike characters spelling {reason} in `{word}`", match.start())
    if unicodedata.is_normalized("NFKC", code) or _accepted_alike(
        code, words, view, allow_native_decide, clause_keywords
    ):
        return
    normalized = unicodedata.normalize("NFKC", code)
    if normalized != code:
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


def _accepted_alike(code: str, words: set[str], view: CodeTokens, allow_native_decide: bool, clause_keywords) -> bool:
    """Whether the token rules accept the normalized code because they accept the code (`renamed_alike`): they
    accepted the proof's code tokens (`check_tokens` in `precheck_proof`, with the same arguments), which are the
    blanked code's unless the proof has string or character literals; then the blanked code is checked here."""
    if not renamed_alike(code, words, is_inert):
        return False
    if "string" in view.present_kinds or "char" in view.present_kinds:
        try:
            check_tokens(blanked_code_tokens(view), allow_native_decide, clause_keywords=clause_keywords)
        except PrecheckError:
            return False
    return True


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
    if suffix is None and _only_spaces_between(text, starts, list(map(_SPAN_END, spans))):
        return spans
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


# What may lie between a proof's tactics without a token of the lexer's starting there: its whitespace, and `;`.
_SPACES_AND_SEMICOLONS = re.compile(r"[ \n\r\t;]*+")


def _only_spaces_between(text: str, starts: list[int], ends: list[int]) -> bool:
    """Whether the text outside the spans `[starts[i], ends[i])` (in order, apart) holds only whitespace and `;`: then
    no code token but `;` starts outside them (a token starts at a character that is no whitespace to the lexer, and
    one starting at `;` is that symbol), which `_check_block` decides in one match per gap instead of a search per
    token. False (the tokens decide) where a gap holds anything else: a comment, or code outside the block."""
    gap_starts, gap_ends = [0, *ends], [*starts, len(text)]
    return all(map(le, gap_starts, gap_ends)) and all(
        map(_SPACES_AND_SEMICOLONS.fullmatch, repeat(text), gap_starts, gap_ends)
    )


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
def precheck_proof(
    proof: str, allow_native_decide: bool = False, start_column: int = 0, tokens: list[Token] | None = None
) -> list[Tactic]:
    """Raise PrecheckError with the reason if the untrusted proof body must not be sent to Lean.

    Returns the proof's outermost tactics, `split_tactics(proof, "outermost", start_column=start_column)`, which
    the check computes anyway to find where the `by` block ends.

    `start_column` is the column of `proof[0]` in its line, `Prepared.proof_column`: 0 for a ProofRequest (the
    body starts on the line after the statement), the column after `by` for a file whose proof continues the `by`
    line (the same in the code sent to Lean as in the file, a renamed `example` included).

    `tokens`: `lex(proof)`, when the caller has it (a file's body is lexed whole).
    """
    check_characters(proof, "proof")
    tokens = lex(proof) if tokens is None else tokens
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
