"""Complete files (str requests): the header split, the header-line rules, and the checks on the file's body.

A complete file is untrusted throughout (kimina snippets are model output): its header lines must each be one
`import M`, `set_option NAME VALUE` or `open …` command (see `split_header`); only comments, modifiers and
`open … in` / `set_option NAME VALUE in` may precede the one theorem, proved with `:= by`, whose proof body gets
the same precheck as a `ProofRequest`'s.
"""

from __future__ import annotations

import re

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex
from trl_verigate.lean_server.precheck import (
    COMMAND_WORDS,
    PREFIX_COMMANDS,
    check_characters,
    check_tokens,
    forbidden_option,
    precheck_proof,
    scoped_prefix_in,
)
from trl_verigate.lean_server.prepared import DECLARATIONS, Prepared, assemble, declaration, located_at

_MODIFIERS = frozenset({"private", "protected", "noncomputable", "nonrec"})
_DECLARING_WORDS = frozenset(
    {"theorem", "lemma", "example", "def", "abbrev", "instance", "structure", "class", "inductive", "coinductive"}
    | {"axiom", "opaque", "constant", "mutual", "namespace", "section"}
)


# A complete file's header lines, each exactly one command: the header runs in its own REPL command (cached per
# worker, shared with other requests), so anything else there would escape the checks on the theorem. `open` lines
# are read by `_is_open_line`.
_HEADER_LINE = re.compile(
    r"[ ]*(?:"
    r"import[ ]+[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*"
    r"|set_option[ ]+(?P<option>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)[ ]+"
    r'(?:true|false|[0-9]+|"[^"\\{}\n]*")'
    r")[ ]*(?:--[^\n]*)?\r?",
    re.ASCII,
)
# The forms of Lean's `open` command over its tokens as `_open_line_shape` spells them (N: a name).
_OPEN_FORMS = re.compile(
    r"open (?:(?:scoped )?N(?: N)*|N \( N(?: N)* \)|N hiding N(?: N)*|N renaming N → N(?: , N → N)*)"
)
# Keywords of the `open` command itself, and `in`, which makes the line the `open … in` prefix of what follows.
_OPEN_KEYWORDS = frozenset({"scoped", "hiding", "renaming", "in"})
# A keyword ends `open`'s names, and a command keyword starts a command of its own on the same line.
_NOT_OPEN_NAMES = COMMAND_WORDS | PREFIX_COMMANDS | _OPEN_KEYWORDS
HEADER_RULE = (
    "a file's header lines are single `import M`, `set_option NAME VALUE` (true, false, a number or a string) "
    "or `open` commands (`open [scoped] A B…`, `open A (x y…)`, `open A hiding x…`, `open A renaming x → y, …`), "
    "one per line"
)


def _open_line_shape(line: str) -> str | None:
    """The tokens of `line` as `_OPEN_FORMS` reads them, or None if `line` cannot be a lone `open` command.

    Names are Lean identifiers (dotted, any case, Unicode letters, `«escaped»`) other than keywords; `->` is `→`.
    Only a trailing `--` comment may follow: a block comment could hide where the line's command ends.
    """
    try:
        tokens = lex(line)
    except PrecheckError:
        return None
    if any(t.kind == "comment" and not t.text.startswith("--") for t in tokens):
        return None
    code = [t for t in tokens if t.kind != "comment"]
    shape: list[str] = []
    k = 0
    while k < len(code):
        token = code[k]
        if token.kind == "ident":
            if (token.text == "open" and k == 0) or token.text in _OPEN_KEYWORDS:
                shape.append(token.text)
            else:
                shape.append("X" if token.text in _NOT_OPEN_NAMES else "N")
        elif token.text == "-" and k + 1 < len(code) and code[k + 1].text == ">" and code[k + 1].start == token.end:
            shape.append("→")
            k += 1
        elif token.kind == "symbol" and token.text in ("(", ")", ",", "→"):
            shape.append(token.text)
        else:
            shape.append("X")
        k += 1
    return " ".join(shape)


def _is_open_line(line: str) -> bool:
    """Whether `line` is exactly one `open` command in one of Lean's forms, then at most a `--` comment."""
    shape = _open_line_shape(line)
    return shape is not None and _OPEN_FORMS.fullmatch(shape) is not None


def split_header(file_text: str) -> tuple[str, str]:
    """Split a Lean file into (header, body), header + body == file_text.

    The header is the leading run of lines that are each exactly one `import M`, `set_option NAME VALUE` or
    `open` command in any of its forms (`open [scoped] A B…`, `open A (x…)`, `open A hiding x…`,
    `open A renaming x → y, …`; an optional `--` comment after it), with blank lines and comments among
    them, up to and including the newline after the last command. The first other line starts the body, where
    the precheck treats it as untrusted code: `open … in` and `set_option … in` prefix the theorem, so they end
    the header, and so does any line that holds more than one command.
    """
    if not isinstance(file_text, str):
        raise TypeError(f"split_header(file_text) needs a str, got {type(file_text).__name__}")
    header_end, i, n = 0, 0, len(file_text)
    while i < n:
        line_end = file_text.find("\n", i)
        line_end = n if line_end < 0 else line_end
        line = file_text[i:line_end]
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            i = line_end + 1
            continue
        if stripped.startswith("/-"):
            close = tactic_split.block_comment_end(file_text, i + line.index("/-") + 2)
            if close is None or file_text[close:].split("\n", 1)[0].strip():
                break
            i = file_text.find("\n", close)
            i = n if i < 0 else i + 1
            continue
        if not (_HEADER_LINE.fullmatch(line) or _is_open_line(line)):
            break
        header_end = min(line_end + 1, n)
        i = line_end + 1
    return file_text[:header_end], file_text[header_end:]


def _split_file_body(body: str) -> tuple[str, str]:
    """(statement, proof) of a file body: the statement runs through the declaration's first top-level `:= by`."""
    tokens = lex(body)
    code = [t for t in tokens if t.kind != "comment"]
    declarations = [t for t in code if t.kind == "ident" and t.text in DECLARATIONS]
    if not declarations:
        raise PrecheckError("the file declares no theorem: expected `theorem NAME … := by` after the imports")
    depth = 0
    for k, token in enumerate(code):
        if token.start < declarations[0].start:
            continue
        if token.text in tactic_split.OPENERS:
            depth += 1
        elif token.text in tactic_split.CLOSERS:
            depth -= 1
        elif (
            depth == 0
            and token.text == "by"
            and k >= 2
            and code[k - 1].text == "="
            and code[k - 2].text == ":"
            and code[k - 2].end == code[k - 1].start
        ):
            return body[: token.end], body[token.end :]
    raise PrecheckError(
        "a str request is one theorem proved in tactic mode: no top-level `:= by` found "
        "(write `theorem NAME … := by` followed by the tactics)"
    )


def _check_file_statement(tokens: list[Token], keyword: Token, allow_native_decide: bool) -> None:
    """A file's statement is untrusted too: one declaration, nothing that changes how Lean checks it."""
    for token in tokens:
        if token.kind == "ident" and token.text in _DECLARING_WORDS and token is not keyword:
            raise PrecheckError(
                f"a str request holds exactly one theorem; found `{token.text}`",
                token.start,
                f" besides the `{keyword.text}` theorem",
            )
    check_tokens(tokens, allow_native_decide, allowed_commands=frozenset({keyword.text}) | _MODIFIERS)


def _check_header_options(header: str) -> None:
    for match in re.finditer(r"^[^\n]*$", header, re.MULTILINE):
        line = _HEADER_LINE.fullmatch(match.group(0))
        option = line.group("option") if line else None
        if option and forbidden_option(option):
            raise PrecheckError(f"header: `set_option {option}`", match.start())


def _check_file_preamble(statement: str, tokens: list[Token], keyword: Token) -> None:
    """Before its declaration keyword a file's body may hold only comments, modifiers and `open … in` /
    `set_option NAME VALUE in` prefixes; anything else is another command, which the precheck would have to know.
    """
    code = [t for t in tokens if t.kind != "comment" and t.start < keyword.start]
    k = 0
    while k < len(code):
        token = code[k]
        if token.text in _MODIFIERS:
            k += 1
            continue
        # A forbidden option was refused by `check_tokens` already; only the prefix's form is checked here.
        in_at = scoped_prefix_in(code, k)
        if in_at is not None:
            k = in_at + 1
            continue
        line_start = statement.rfind("\n", 0, token.start) + 1
        line_end = statement.find("\n", token.start)
        line = statement[line_start : len(statement) if line_end < 0 else line_end].strip()
        if token.text in PREFIX_COMMANDS and not statement[line_start : token.start].strip():
            raise PrecheckError(
                f"`{line}`",
                token.start,
                f" is neither a header line nor an `open … in`/`set_option … in` prefix of the theorem: {HEADER_RULE}",
            )
        raise PrecheckError(
            f"`{token.text}`",
            token.start,
            f" before the `{keyword.text}`: a str request is one theorem, preceded only by the header, comments, "
            "modifiers and `open … in` / `set_option NAME VALUE in`",
        )


def _check_single_definition(tokens: list[Token], keyword: Token) -> None:
    """Reject a top-level `:=` before the statement's final `:= by` that no `let`/`have` explains.

    Such a `:=` ends the declaration (`theorem t : P := term`), and the text up to the final `:= by` would be
    further commands, whose words the token checks could not all know.
    """
    code = [t for t in tokens if t.kind != "comment" and t.start >= keyword.end]
    depth, pending_bindings = 0, 0
    for k, token in enumerate(code[:-3]):
        if token.text in tactic_split.OPENERS:
            depth += 1
        elif token.text in tactic_split.CLOSERS:
            depth -= 1
        elif depth == 0 and token.text in ("let", "have", "letI", "haveI"):
            pending_bindings += 1
        elif depth == 0 and token.text == ":" and code[k + 1].text == "=" and code[k + 1].start == token.end:
            if not pending_bindings:
                raise PrecheckError(
                    "`:=`",
                    token.start,
                    f" ends the `{keyword.text}` before its `:= by`: a str request is one theorem proved in tactic mode",
                )
            pending_bindings -= 1


def prepare_file(
    file_text: str, allow_native_decide: bool, statement: str | None = None, header: str | None = None
) -> Prepared:
    """The REPL command for a complete untrusted file (see the module docstring); raises PrecheckError.

    `statement` and `header`: the trusted statement and header the file is held to (`FileRequest`); not checked
    yet, accepted so callers pass them already.
    """
    # Offsets in PrecheckErrors are moved to the file: the header starts it, the statement and then the proof follow.
    check_characters(file_text, "file")
    header_text, body = split_header(file_text)
    _check_header_options(header_text)
    with located_at(len(header_text)):
        statement, proof = _split_file_body(body)
        tokens = lex(statement)
        keyword, name = declaration(tokens, "file")
        _check_file_statement(tokens, keyword, allow_native_decide)
        _check_file_preamble(statement, tokens, keyword)
        _check_single_definition(tokens, keyword)
    if not proof.strip():
        raise PrecheckError("empty proof body after `:= by`")
    header = header_text[:-1] if header_text.endswith("\n") else header_text
    prepared = assemble(header, statement, "", proof, tokens, keyword, name, line_offset=header_text.count("\n"))
    with located_at(len(header_text) + len(statement)):
        prepared.outermost_tactics = precheck_proof(
            prepared.proof, allow_native_decide, start_column=prepared.proof_column
        )
    return prepared
