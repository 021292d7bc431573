"""A complete file's header: where it ends (`split_header`), what its lines may be, the key it is cached and run
under (`normalize_header`), and how it is held to a `FileRequest`'s trusted header.
"""

from __future__ import annotations

import re

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.config_values import forbidden_option, option_harm
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex
from trl_verigate.lean_server.token_rules import COMMAND_WORDS, EXTRA_COMMAND_WORDS, PREFIX_COMMANDS

# Words that declare something (or open a scope for declarations): in a file only its keyword may declare.
DECLARING_WORDS = frozenset(
    {"theorem", "lemma", "example", "def", "abbrev", "instance", "structure", "class", "inductive", "coinductive"}
    | {"axiom", "opaque", "constant", "mutual", "namespace", "section"}
)


# Options a file may set beyond a trusted header (as header lines) or a trusted statement (as `set_option … in`
# prefixes of its main theorem): they bound Lean's work and cannot change what the statement means.
RESOURCE_OPTIONS = frozenset({"maxHeartbeats", "synthInstance.maxHeartbeats", "maxRecDepth"})


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
        code_line = _without_block_comments(line)
        if stripped.startswith("/-") and (code_line is None or not code_line.strip()):
            close = tactic_split.block_comment_end(file_text, i + line.index("/-") + 2)
            if close is None or file_text[close:].split("\n", 1)[0].strip():
                break
            i = file_text.find("\n", close)
            i = n if i < 0 else i + 1
            continue
        if code_line is None or not (_HEADER_LINE.fullmatch(code_line) or _is_open_line(code_line)):
            break
        header_end = min(line_end + 1, n)
        i = line_end + 1
    return file_text[:header_end], file_text[header_end:]


def _without_block_comments(line: str) -> str | None:
    """`line` with each block comment that opens and closes on it blanked (spaces, so columns stay), or None when
    it cannot be lexed alone (a comment or string that goes on past the line).

    A comment before or after a header command (`/- c -/ open Real`, `open Real /- c -/`) leaves the command as
    Lean reads it: the lexer, not a pattern, says where the comment ends, so none can hide a second command.
    """
    if "/-" not in line:
        return line
    try:
        tokens = lex(line)
    except PrecheckError:
        return None
    blanked = line
    for token in tokens:
        if token.kind == "comment" and token.text.startswith("/-"):
            blanked = blanked[: token.start] + " " * (token.end - token.start) + blanked[token.end :]
    return blanked


def check_header_options(header: str) -> None:
    """Refuse a header `set_option` line whose option changes how Lean checks or reports proofs, or only floods
    the output, saying which."""
    for match in re.finditer(r"^[^\n]*$", header, re.MULTILINE):
        code_line = _without_block_comments(match.group(0))
        line = None if code_line is None else _HEADER_LINE.fullmatch(code_line)
        option = line.group("option") if line else None
        if option and forbidden_option(option):
            raise PrecheckError(f"header: `set_option {option}`", match.start(), option_harm(option))


# ---------------------------------------------------------------- the header key


def header_lines(header: str) -> list[tuple[int, str]]:
    """(offset of its first token, normalized text) of each command line of `header`; see `normalize_header`."""
    try:
        tokens = lex(header)
    except PrecheckError as error:
        raise PrecheckError(f"header: {error.before}", None, error.after) from None
    lines: list[tuple[int, list[str]]] = []
    previous: Token | None = None
    literal_end = 0
    for token in tokens:
        if token.kind == "comment" or token.start < literal_end:
            continue  # code inside an interpolated string's braces is part of the string token
        if token.kind == "string":
            literal_end = token.end
        column = token.start - (header.rfind("\n", 0, token.start) + 1)
        if previous is None:
            lines.append((token.start, [token.text]))
        elif "\n" not in header[previous.end : token.start]:
            lines[-1][1].append(token.text if token.start == previous.end else " " + token.text)
        elif column > 0 and token.text not in COMMAND_STARTS:
            lines[-1][1].append(" " + token.text)  # an indented continuation of the command above
        else:
            lines.append((token.start, [token.text]))
        previous = token
    return [(offset, "".join(parts)) for offset, parts in lines]


# Words (and `#`) that start a command: a line starting with one is a command of its own, not a continuation.
COMMAND_STARTS = COMMAND_WORDS | EXTRA_COMMAND_WORDS | PREFIX_COMMANDS | DECLARING_WORDS | {"#"}


def normalize_header(header: str) -> str:
    """`header` with comments, blank lines, indentation and spacing that Lean does not read removed: the key the
    worker pool caches header environments by, and the text the REPL runs.

    Two headers that differ only in comments and whitespace get the same key, so a comment between header lines
    neither costs a fresh `import Mathlib` nor evicts other headers' REPLs. What Lean reads is kept: tokens stay in
    order, glued tokens stay glued (`->`, `pp.all`), separated ones get one space, and each command keeps its own
    line; an indented line that starts no command continues the command above and is joined to it with a space.
    Raises PrecheckError (without a position) when the header cannot be lexed, e.g. an unterminated comment.
    """
    if not isinstance(header, str):
        raise TypeError(f"normalize_header(header) needs the header text as a str, got {type(header).__name__}")
    return "\n".join(line for _, line in header_lines(header))


def _plainly_opened(line: str) -> list[str] | None:
    """The namespaces of a normalized `open A B …` line (no `scoped`, `hiding`, `renaming` or `(names)`), else None.

    A file's `open Nat` or `open BigOperators Nat Rat Real Topology` opens only namespaces a trusted header's plain
    `open` lines open already (in another order or grouping), so it changes nothing the trusted header does not.
    """
    shape = _open_line_shape(line)
    if shape is None or not shape.startswith("open N") or set(shape.split(" ")[1:]) != {"N"}:
        return None
    return line.split(" ")[1:]


def check_header_against(header_text: str, trusted_header) -> str:
    """The file's header lines must be lines of the trusted header, plain `open` lines of namespaces its plain `open`
    lines open, or set a `RESOURCE_OPTIONS` option; returns the header to run: the trusted header's key, then those
    option lines (in file order)."""
    if not isinstance(trusted_header, str):
        raise TypeError(f"FileRequest.header must be a str or None, got {type(trusted_header).__name__}")
    try:
        trusted_lines = normalize_header(trusted_header)
    except PrecheckError as error:
        raise PrecheckError(f"FileRequest.{error.before}", None, error.after) from None
    allowed = set(trusted_lines.split("\n"))
    opened = {name for line in allowed for name in _plainly_opened(line) or ()}
    added: list[str] = []
    for offset, line in header_lines(header_text):
        words = line.split(" ")
        if line in allowed:
            continue
        if len(words) == 3 and words[0] == "set_option" and words[1] in RESOURCE_OPTIONS:
            added.append(line)  # its value was bounded by `check_header`
        elif not set(_plainly_opened(line) or ["-"]) <= opened:
            raise PrecheckError(
                f"header line `{line}`",
                offset,
                " is not a line of the trusted header: the file's header may only repeat the trusted header's lines "
                f"(it runs as {trusted_lines!r}; only `open` lines of namespaces it opens and `set_option "
                f"{'/'.join(sorted(RESOURCE_OPTIONS))} VALUE` lines may be added)",
            )
    return "\n".join([trusted_lines, *dict.fromkeys(added)]) if trusted_lines else "\n".join(dict.fromkeys(added))
