"""Complete files (`str` and `FileRequest` requests): the checks on the file's declarations and on the trusted
statement a `FileRequest` holds it to. The header's rules and key are `file_header`'s.

A complete file is untrusted throughout (kimina snippets are model output). Its header lines must each be one
`import M`, `set_option NAME VALUE` or `open …` command (see `split_header`). Its body is a run of declarations:
helper `theorem`/`lemma`/`def` declarations, then the main theorem, the last declaration, proved with `:= by`
(see `prepare_file` for the rules each must meet).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from operator import itemgetter

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.code_tokens import indices_of
from trl_verigate.lean_server.config_values import TACTIC_VALUED_ITEMS
from trl_verigate.lean_server.file_header import (
    COMMAND_STARTS,
    DECLARING_WORDS,
    HEADER_RULE,
    RESOURCE_OPTIONS,
    check_header_against,
    check_header_options,
    normalize_header,
    split_header,
)
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex, moved
from trl_verigate.lean_server.precheck import check_characters, is_open_argument, precheck_proof, scoped_prefix_in
from trl_verigate.lean_server.prepared import DECLARATIONS, Prepared, assemble, declared_name, located_at
from trl_verigate.lean_server.token_rules import PREFIX_COMMANDS, check_header, check_tokens

_KIND, _START, _END, _TEXT = (itemgetter(i) for i in range(4))
_MODIFIERS = frozenset({"private", "protected", "noncomputable", "nonrec"})
_DECLARATION_SUFFIX_WORDS = frozenset({"where", "termination_by", "termination_by?", "decreasing_by"})
# Importable from here, where `verdict` and the tests name them.
__all__ = ["HEADER_RULE", "normalize_header", "prepare_file", "split_header"]


# ---------------------------------------------------------------- the file's declarations

# What a helper declaration may be. Anything else before the main theorem (`instance`, `axiom`, `opaque`,
# `structure`, `notation`, `macro`, `abbrev`, an attribute, …) is refused: those change how the main theorem's
# statement or proof elaborates, or assume what should be proved.
_HELPER_KEYWORDS = frozenset({"theorem", "lemma", "def"})
_STATEMENT_PREVIEW = 400


@dataclass
class _Declaration:
    """One declaration of a file's body; offsets are in the body, indices in its code tokens."""

    first: int  # index of its first code token (a modifier, a prefix or the keyword)
    keyword_index: int
    keyword: Token
    name: Token | None  # None for `example`
    signature_end: int  # index of the `=` of the `:=` that ends the signature
    end: int  # index one past its last code token
    end_offset: int  # where the next declaration's first token starts (or the body's end)

    @property
    def declared_name(self) -> str | None:
        return None if self.name is None else declared_name(self.name)


def _line_text(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    return text[line_start : len(text) if line_end < 0 else line_end].strip()


def _declaration_start_error(body: str, code: list[Token], k: int, allow_native_decide: bool) -> PrecheckError:
    """Why `code[k]` cannot start a declaration: the token checks' reason when the text from there on holds
    something they refuse (`@[`, `#eval`, a forbidden option), else what a declaration may start with."""
    try:
        check_tokens(code[k:], allow_native_decide, allowed_commands=frozenset(DECLARATIONS) | _MODIFIERS)
    except PrecheckError as error:
        return error
    token = code[k]
    if token.text in PREFIX_COMMANDS and not body[body.rfind("\n", 0, token.start) + 1 : token.start].strip():
        return PrecheckError(
            f"`{_line_text(body, token.start)}`",
            token.start,
            f" is neither a header line nor an `open … in`/`set_option … in` prefix of a declaration: {HEADER_RULE}",
        )
    return PrecheckError(
        f"`{token.text}`",
        token.start,
        ": a complete file's body is helper `theorem`/`lemma`/`def` declarations and then the main theorem, each "
        "preceded only by comments, modifiers and `open … in` / `set_option NAME VALUE in`",
    )


# The words that end the declaration above when one starts a line at column 0.
_DECLARATION_STARTS = (COMMAND_STARTS | _MODIFIERS | {"@"}) - _DECLARATION_SUFFIX_WORDS


def _is_declaration_start(body: str, token: Token) -> bool:
    """Whether `token` starts a line at column 0 with a word that starts a command: the previous declaration ends
    there (Lean ends a term or a `by` block at a column-0 token that cannot continue it)."""
    # `where`, `termination_by` and `decreasing_by` at column 0 continue the declaration above (Lean's grammar puts
    # them after its body); the proof precheck accepts them only where the splitter placed them. The word is tested
    # first: most tokens are no such word, and then the text is not looked at.
    return token.text in _DECLARATION_STARTS and (token.start == 0 or body[token.start - 1] == "\n")


def _declarations(body: str, code: list[Token], allow_native_decide: bool) -> list[_Declaration]:
    """The body's declarations in order; raises PrecheckError where something else stands."""
    declarations: list[_Declaration] = []
    k = 0
    if not code:
        raise PrecheckError("the file declares no theorem: expected `theorem NAME … := by` after the imports")
    # Where a declaration may end: the tokens that start a declaration at column 0, found in C, and the strings,
    # whose interpolated code (the tokens after a string, inside it) ends none.
    starts = [
        k for k in indices_of(list(map(_TEXT, code)), _DECLARATION_STARTS) if _is_declaration_start(body, code[k])
    ]
    strings = indices_of(list(map(_KIND, code)), "string")
    while k < len(code):
        first = k
        while k < len(code):
            if code[k].text in _MODIFIERS:
                k += 1
                continue
            in_at = scoped_prefix_in(code, k)
            if in_at is None:
                break
            k = in_at + 1
        if k >= len(code) or code[k].kind != "ident" or code[k].text not in DECLARATIONS:
            raise _declaration_start_error(body, code, min(k, len(code) - 1), allow_native_decide)
        keyword = code[k]
        name = None
        if keyword.text != "example":
            if k + 1 >= len(code) or code[k + 1].kind != "ident" or code[k + 1].text in COMMAND_STARTS:
                raise PrecheckError(f"the file's `{keyword.text}`", keyword.start, " has no name")
            name = code[k + 1]
        end = _declaration_end(code, k, starts, strings)
        end_offset = code[end].start if end < len(code) else len(body)
        signature_end = _signature_end(code, k, end)
        declarations.append(_Declaration(first, k, keyword, name, signature_end, end, end_offset))
        k = end
    return declarations


def _declaration_end(code: list[Token], keyword_index: int, starts: list[int], strings: list[int]) -> int:
    """The index of the first token after the keyword at `keyword_index` that starts a declaration at column 0
    (`starts`: their indices), outside the string read last before it from the keyword on (`strings`: the indices of
    the string tokens), or `len(code)`: the declaration at `keyword_index` ends there."""
    for end in starts[bisect_right(starts, keyword_index) :]:
        last_string = bisect_left(strings, end) - 1
        if (
            last_string < 0
            or strings[last_string] <= keyword_index
            or code[end].start >= code[strings[last_string]].end
        ):
            return end
    return len(code)


def _signature_end(code: list[Token], keyword_index: int, end: int) -> int:
    """The index of the `=` of the top-level `:=` that ends the signature of the declaration at `keyword_index`.

    A `:=` inside brackets (a default argument) or bound by a `let`/`have` in the statement is not it.
    """
    depth, pending_bindings = 0, 0
    for k in range(keyword_index + 1, end - 1):
        token = code[k]
        if token.text in tactic_split.OPENERS:
            depth += 1
        elif token.text in tactic_split.CLOSERS:
            depth -= 1
        elif depth == 0 and token.text in ("let", "have", "letI", "haveI"):
            pending_bindings += 1
        elif depth == 0 and token.text == ":" and code[k + 1].text == "=" and code[k + 1].start == token.end:
            if not pending_bindings:
                return k + 1
            pending_bindings -= 1
    keyword = code[keyword_index]
    raise PrecheckError(
        f"the `{keyword.text}`",
        keyword.start,
        " has no top-level `:=`: write `… := by` and the tactics (definitions by pattern matching, `| … => …`, "
        "are not accepted in a complete file)",
    )


def _check_declaration_head(code: list[Token], declaration: _Declaration, allow_native_decide: bool) -> None:
    """The declaration's prefixes, modifiers and signature: nothing that changes how Lean checks it."""
    head = code[declaration.first : declaration.signature_end + 1]
    for token in head:
        if token.kind == "ident" and token.text in DECLARING_WORDS and token is not declaration.keyword:
            raise PrecheckError(
                f"`{token.text}`", token.start, f" inside the signature of the `{declaration.keyword.text}`"
            )
    check_tokens(head, allow_native_decide, allowed_commands=frozenset({declaration.keyword.text}) | _MODIFIERS)


def _check_helper(body: str, code: list[Token], helper: _Declaration, allow_native_decide: bool) -> None:
    """A helper declaration: a `theorem`/`lemma`/`def` whose head and value get the checks a proof gets."""
    if helper.keyword.text not in _HELPER_KEYWORDS:
        raise PrecheckError(
            f"`{helper.keyword.text}`",
            helper.keyword.start,
            " before the main theorem: helper declarations are `theorem`, `lemma` or `def` (the main theorem is the "
            "file's last declaration)",
        )
    if len(_root_stripped(helper.name)) > 1:
        raise PrecheckError(
            f"the helper name `{helper.name.text}`",
            helper.name.start,
            " has a namespace: helper names are plain (no `.`; `_root_.x` is `x`), since a helper in a library's "
            "namespace can stand in for its constants (`linarith (config := .evil)` finds `Linarith.LinarithConfig.evil`)",
        )
    _check_declaration_head(code, helper, allow_native_decide)
    value_token = code[helper.signature_end + 1] if helper.signature_end + 1 < helper.end else None
    if value_token is None:
        raise PrecheckError(f"the `{helper.keyword.text}`", helper.keyword.start, " has no value after `:=`")
    start_column = value_token.start - (body.rfind("\n", 0, value_token.start) + 1)
    if value_token.text == "by":
        value_at = value_token.end
        with located_at(value_at):
            precheck_proof(body[value_at : helper.end_offset], allow_native_decide, start_column=start_column + 2)
        return
    _check_term_value(body[value_token.start : helper.end_offset], value_token.start, start_column, allow_native_decide)


# Prepended to a term-mode value so the tactic precheck reads it as one tactic, `exact VALUE`: the tactic starts at
# the value's column, so the layout rules (and where the term ends) are the same as for the term in a `by` block.
_EXACT = "exact "


def _check_term_value(value: str, value_at: int, start_column: int, allow_native_decide: bool) -> None:
    """A term-mode helper value gets a proof body's checks as the tactic `exact VALUE`: the same token checks, and
    every line of it inside that one tactic (a column-0 token, or one indented less than the value's first line,
    would end the declaration where Lean could read a command the word lists do not know)."""
    try:
        precheck_proof(_EXACT + value, allow_native_decide, start_column=start_column)
    except PrecheckError as error:
        offset = None if error.offset is None else max(error.offset - len(_EXACT), 0)
        raise PrecheckError(error.before, offset, error.after).shifted(value_at) from None


def _noncomputable_at(code: list[Token], helper: _Declaration) -> int | None:
    """Where `NONCOMPUTABLE` goes before a helper `def` (its `nonrec`, else its keyword), or None for a `theorem`/
    `lemma` or a `def` already marked `noncomputable`."""
    if helper.keyword.text != "def":
        return None
    modifiers = code[helper.first : helper.keyword_index]
    if any(token.text == "noncomputable" for token in modifiers):
        return None
    # Lean's modifier order is visibility, `noncomputable`, then `nonrec`: the insertion goes before `nonrec`.
    if modifiers and modifiers[-1].text == "nonrec":
        return modifiers[-1].start
    return helper.keyword.start


def _check_no_helper_code_is_run(code: list[Token], helpers: list[_Declaration]) -> None:
    """No tactic-valued configuration item (`(discharger := NAME)`, `(disch := NAME)`, `(norm := NAME)`) may name
    a helper or something declared inside one (`h.aux`, a `where` or `let rec` of `h`), and no `open` may open a
    helper's namespace (to name them unqualified).

    `linarith (discharger := NAME)` evaluates NAME, a `TacticM Unit`, with compiled code: a constant the submission
    compiled would run inside the REPL. Helper `def`s are sent `noncomputable`, so they have no code to run; this
    keeps the auxiliary definitions of helpers out of reach as well, whatever Lean compiles for them.
    """
    helper_names = {helper.declared_name for helper in helpers}
    if not helper_names:
        return
    for k, token in enumerate(code):
        if token.kind != "ident":
            continue
        named = None
        if token.text == "open":
            j = k + 1
            while j < len(code) and is_open_argument(code[j]):
                if code[j].kind == "ident" and _root_stripped(code[j])[0] in helper_names:
                    named = code[j]
                    break
                j += 1
        elif (
            token.text in TACTIC_VALUED_ITEMS
            and k >= 1
            and code[k - 1].text == "("
            and k + 3 < len(code)
            and [t.text for t in code[k + 1 : k + 3]] == [":", "="]
            and code[k + 3].kind == "ident"
            and _root_stripped(code[k + 3])[0] in helper_names
        ):
            named = code[k + 3]
        if named is not None:
            raise PrecheckError(
                f"`{named.text}`",
                named.start,
                " names a helper of this file where Lean evaluates compiled code (a tactic-valued configuration item "
                "or an `open`): a helper's code must never run inside the REPL; use a library tactic",
            )


def _root_stripped(token: Token) -> tuple[str, ...]:
    components = token.components
    return components[1:] if components[:1] == ("_root_",) and len(components) > 1 else components


def _check_distinct_names(declarations: list[_Declaration]) -> None:
    seen: dict[str, _Declaration] = {}
    for declaration in declarations:
        name = declaration.declared_name
        if name is None:
            continue
        if name in seen:
            raise PrecheckError(
                f"`{declaration.name.text}`", declaration.name.start, " is declared twice in the file: rename one"
            )
        seen[name] = declaration


# ---------------------------------------------------------------- the trusted statement and header


@dataclass
class _TrustedStatement:
    text: str
    code: list[Token]
    keyword_index: int

    @property
    def name(self) -> str:
        return declared_name(self.code[self.keyword_index + 1])

    def identifier_components(self) -> frozenset[str]:
        return frozenset(part for t in self.code if t.kind == "ident" for part in t.components)


def _trusted_statement(statement) -> _TrustedStatement:
    if not isinstance(statement, str):
        raise TypeError(f"FileRequest.statement must be a str or None, got {type(statement).__name__}")
    try:
        code = [t for t in lex(statement) if t.kind != "comment"]
    except PrecheckError as error:
        raise PrecheckError(f"FileRequest.statement: {error.before}", None, error.after) from None
    ends_in_by = len(code) >= 3 and [t.text for t in code[-3:]] == [":", "=", "by"] and code[-3].end == code[-2].start
    keywords = [k for k, t in enumerate(code) if t.kind == "ident" and t.text in ("theorem", "lemma")]
    if not ends_in_by or not keywords or keywords[-1] + 1 >= len(code) or code[keywords[-1] + 1].kind != "ident":
        raise PrecheckError(
            "FileRequest.statement must be the dataset's `theorem NAME … := by` (the trusted claim the file's main "
            f"theorem must state); got {statement.strip()[:80]!r}"
        )
    return _TrustedStatement(statement, code, keywords[-1])


def _units(tokens: list[Token]) -> list[tuple[str, bool]]:
    """What Lean reads of a token run, whitespace and comments aside: each token's text, and whether it touches the
    token before it (`x.1` is not `x .1`, `:=` is not `: =`)."""
    return [(t.text, k > 0 and tokens[k - 1].end == t.start) for k, t in enumerate(tokens)]


def _prefixes(code: list[Token], first: int, keyword_index: int) -> list[list[Token]]:
    """The `open … in` / `set_option … in` prefixes before a keyword, resource options and modifiers dropped."""
    prefixes, k = [], first
    while k < keyword_index:
        in_at = scoped_prefix_in(code, k)
        if in_at is None:  # a modifier
            k += 1
            continue
        prefix = code[k : in_at + 1]
        if not (prefix[0].text == "set_option" and ".".join(prefix[1].components) in RESOURCE_OPTIONS):
            prefixes.append(prefix)
        k = in_at + 1
    return prefixes


def _shown(tokens: list[Token]) -> str:
    """A token run as Lean reads it, on one line (shortened): the expected statement in a rejection's reason."""
    shown = "".join(
        t.text if glued or k == 0 else " " + t.text
        for k, (t, (_, glued)) in enumerate(zip(tokens, _units(tokens), strict=True))
    )
    return shown if len(shown) <= _STATEMENT_PREVIEW else shown[:_STATEMENT_PREVIEW] + "…"


def _normalized_name_units(tokens: list[Token], name: str) -> list[tuple[str, bool]]:
    """`_units` of a declaration from its keyword on, with `lemma` read as `theorem` (Mathlib's synonym) and the
    name as Lean resolves it."""
    units = _units(tokens)
    units[0] = ("theorem" if units[0][0] == "lemma" else units[0][0], False)
    units[1] = (name, False)
    return units


def _check_against_statement(
    code: list[Token], main: _Declaration, helpers: list[_Declaration], trusted: _TrustedStatement
) -> None:
    """The main theorem must state the trusted statement: the same name, binders and type, token for token, with
    the same `open … in` prefixes; no helper may declare a name the statement's identifiers could resolve to."""
    expected = trusted.code[trusted.keyword_index :]
    if main.declared_name != trusted.name:
        where = main.name if main.name is not None else main.keyword
        raise PrecheckError(
            f"the file's main theorem (its last declaration) `{where.text}`",
            where.start,
            f" is not the trusted statement's `{trusted.name}`: state it as `{_shown(expected)}`",
        )
    keyword_index = code.index(main.keyword)
    found = code[keyword_index : main.signature_end + 2]
    mismatch = next(
        (
            k
            for k, (ours, theirs) in enumerate(
                zip(
                    _normalized_name_units(found, trusted.name),
                    _normalized_name_units(expected, trusted.name),
                    strict=False,
                )
            )
            if ours != theirs
        ),
        None,
    )
    if mismatch is None and len(found) != len(expected):
        mismatch = min(len(found), len(expected))
    if mismatch is not None:
        at = found[min(mismatch, len(found) - 1)]
        raise PrecheckError(
            "the main theorem does not state the trusted statement (compared token by token, comments and "
            f"whitespace aside): it differs at `{at.text}`",
            at.start,
            f"; expected `{_shown(expected)}`",
        )
    ours, theirs = _prefixes(code, main.first, keyword_index), _prefixes(trusted.code, 0, trusted.keyword_index)
    if [_units(p) for p in ours] != [_units(p) for p in theirs]:
        at = ours[0][0] if ours else main.keyword
        raise PrecheckError(
            "the main theorem's `open … in` / `set_option … in` prefixes",
            at.start,
            f" are not the trusted statement's ({' '.join(_shown(p) for p in theirs) or 'none'}): they could change "
            f"what its names mean (only `set_option {'/'.join(sorted(RESOURCE_OPTIONS))} … in` may be added)",
        )
    statement_words = trusted.identifier_components()
    for helper in helpers:
        last = helper.declared_name.rsplit(".", 1)[-1]
        if last in statement_words:
            raise PrecheckError(
                f"the helper `{helper.name.text}`",
                helper.name.start,
                f" declares a name the trusted statement uses (`{last}`): it could change what the statement means; "
                "rename the helper",
            )


# ---------------------------------------------------------------- prepare_file


def prepare_file(
    file_text: str,
    allow_native_decide: bool,
    statement: str | None = None,
    header: str | None = None,
    default_header: str | None = None,
) -> Prepared:
    """The REPL command for a complete untrusted file; raises PrecheckError.

    The file: header lines (see `split_header`), then declarations, each preceded only by comments, modifiers
    (`private`, `protected`, `noncomputable`, `nonrec`) and `open … in` / `set_option NAME VALUE in`. A new
    declaration starts at a column-0 line; the last declaration is the main theorem, proved with `:= by`, whose
    body gets a `ProofRequest` proof's precheck. Those before it are helpers: each a `theorem`, `lemma` or `def`
    (no `instance`, `axiom`, `opaque`, `abbrev`, `notation`, `macro`, attribute, …), its signature checked like the
    main statement and its value (`:= by` tactics, or a term) like a proof body, layout included (a term that goes
    on past its first line starts on the line after `:=`). No name is declared twice. The `#print axioms` of the main theorem covers the helpers it uses, and the recheck
    tier replays them with it.

    Helper code never runs inside the REPL. Some elaborators evaluate a constant with compiled code: linarith's
    `(discharger := NAME)` and every `declare_config_elab` config (`(config := .ctor)` reaches a `def` in the
    config's namespace), Aesop's `tactic` rule builder. A helper `def` with compiled code could be one of them, and
    run arbitrary code that forges the REPL's answer. So every helper `def` is sent to Lean as `noncomputable def`
    (`NONCOMPUTABLE` inserted before it, then a line break and the spaces back to its column, so every token keeps
    its column and messages map back through `Prepared.edits`): it gets no compiled code, so `evalConst` and
    config evaluation fail on it, while the kernel, `decide`, `rfl` and `simp` unfold it as before. The rewrite
    (rather than requiring the user to write `noncomputable`) keeps prover outputs that write plain `def` valid;
    what Lean checks differs from the submission only in code generation, which a proof never relies on. In
    addition (defence in depth): helper names are plain (no `.`; `_root_.x` is `x`), a tactic-valued item or an `open`
    may not name a helper (`_check_no_helper_code_is_run`), and Aesop's `tactic` builder and the printing macros
    (`println!`, `dbg_trace`) are refused everywhere by the token checks.

    `statement` (a `FileRequest`'s trusted statement, `theorem NAME … := by`): the main theorem must state exactly
    it, compared token by token with comments and whitespace ignored (glued tokens must stay glued); `lemma` for
    `theorem` and a `_root_.` prefix on the name are the same to Lean and accepted, a different name is not (the
    provers restate the dataset's theorem under its own name, and the name is what `#print axioms` and the
    recheck look up). Its `open … in` prefixes must be the statement's; `set_option maxHeartbeats/
    synthInstance.maxHeartbeats/maxRecDepth … in` may be added. No helper may declare a name whose last
    component is an identifier component of the statement: it could make the statement's text mean something else
    than in the dataset.

    `header` (a `FileRequest`'s trusted header): every header line of the file, comments and whitespace aside,
    must be a line of it (any order, any subset), a plain `open A B …` of namespaces its plain `open` lines open
    (`open Nat` under `open Real Nat`), or a `set_option maxHeartbeats/synthInstance.maxHeartbeats/maxRecDepth VALUE`
    line (bounded as usual: it bounds Lean's work and cannot change what the statement means).
    The REPL runs the trusted header itself, normalized, with those option lines appended.

    A trusted `statement` without a trusted `header` is held to `default_header` (the server's header, `prepare`'s
    `default_header`) as its trusted header, by the same rule: the statement is always read in a trusted scope.
    Were the file's own header run instead, `open Nat` would make the dataset's `sqrt` mean `Nat.sqrt`, and `open
    Real renaming sqrt → cos` would re-point it, so a pass would certify another claim than the dataset's.
    `default_header=None` here means "no default": the file's own header then runs even under a statement (for
    callers that hold no trusted header at all; `prepare` always passes one).

    Without `statement` and `header` the file's own header runs (normalized, see `normalize_header`).

    Without `statement` (a plain `str` request) the file is its own claim: what its main theorem states, with its
    helpers' definitions and its header's `open`s, is what a pass certifies.
    """
    # Offsets in PrecheckErrors are moved to the file: the header starts it, the body follows.
    trusted = None if statement is None else _trusted_statement(statement)
    check_characters(file_text, "file")
    header_text, body = split_header(file_text)
    check_header_options(header_text)
    # The proof's name and option rules hold on header lines too: `open IO.FS` would make `readFile` reachable.
    check_header(header_text, allow_native_decide)
    if header is None and trusted is not None:
        header = default_header
    if header is not None:
        run_header = check_header_against(header_text, header)
    else:
        run_header = normalize_header(header_text)
    with located_at(len(header_text)):
        tokens = lex(body)
        code = [t for t in tokens if t.kind != "comment"]
        declarations = _declarations(body, code, allow_native_decide)
        *helpers, main = declarations
        for helper in helpers:
            _check_helper(body, code, helper, allow_native_decide)
        _check_declaration_head(code, main, allow_native_decide)
        _check_distinct_names(declarations)
        _check_no_helper_code_is_run(code, helpers)
        by = code[main.signature_end + 1] if main.signature_end + 1 < main.end else None
        if by is None or by.text != "by":
            assign = code[main.signature_end - 1]
            raise PrecheckError(
                "`:=`",
                assign.start,
                f" ends the main `{main.keyword.text}` in term mode: no top-level `:= by` found; the main theorem is "
                "proved in tactic mode (write `theorem NAME … := by` followed by the tactics)",
            )
        if trusted is not None:
            _check_against_statement(code, main, helpers, trusted)
    statement_text, proof = body[: by.end], body[by.end :]
    if not proof.strip():
        raise PrecheckError("empty proof body after `:= by`")
    prepared = assemble(
        run_header,
        statement_text,
        "",
        proof,
        tokens,
        main.keyword,
        main.name,
        line_offset=header_text.count("\n"),
        noncomputable_at=[at for at in (_noncomputable_at(code, helper) for helper in helpers) if at is not None],
    )
    with located_at(len(header_text) + len(statement_text)):
        prepared.outermost_tactics = precheck_proof(
            prepared.proof, allow_native_decide, start_column=prepared.proof_column, tokens=_after(tokens, by.end)
        )
    return prepared


def _after(tokens: list[Token], offset: int) -> list[Token] | None:
    """`lex(text[offset:])` from `tokens = lex(text)`, where a token ends at `offset` (the main theorem's `by`): the
    lexer reads on from a token's end as it reads a text starting there (it looks back only from a `'` that opens a
    character literal, and a `'` right after `by` would have made it a name), so these are the tokens after `offset`,
    moved back by it (built in C). None where a token before `offset` runs past it (`by` in a string's `{…}`): there
    the text after `offset` starts inside that token, and only lexing it tells its tokens."""
    first = bisect_left(tokens, offset, key=_START)
    if first and max(map(_END, tokens[:first])) > offset:
        return None
    return list(moved(tokens[first:], -offset))
