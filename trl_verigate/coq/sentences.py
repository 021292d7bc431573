"""Coq's sentence boundaries, found without running Coq: the spans `coqc -time` reports for a `.v` file.

A sentence is one of:

- text up to a `.` followed by a blank or the end of the text (not a `.` inside a qualified name `Nat.add`, a number
  or the `..` of a recursive notation; `...` does end one, as in `auto...`);
- a bullet at the start of a sentence: a run of one of `-`, `+`, `*` (`-`, `--`, `+++`);
- a brace at the start of a sentence, `{` or `}`, or a goal selector opening one (`2: {`, `[x]: {`).

Comments `(* ... *)` nest and may hold strings; strings `"..."` escape a quote by doubling it (`""`). Neither
ends a sentence, and a sentence's span starts at its first character that is not blank or comment.

Coq's own `Add` call reads only the first sentence of its text, so `coq.process` sends the sentences found here one
by one; the slow test in tests/coq/test_sentences.py holds these spans to `coqc -time`'s over the installed standard
library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BLANKS = " \t\r\n\f\v"
BULLET_CHARS = "-+*"
_SELECTOR_BRACE = re.compile(r"(?:\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|\[\s*[A-Za-z_][\w']*\s*\])\s*:\s*\{")


@dataclass(frozen=True)
class Sentence:
    """One sentence: [start, end) character offsets into the text; `kind` "bullet", "brace" or "command";
    `terminated` is False for text left after the last sentence end (an unfinished sentence, which Coq refuses)."""

    start: int
    end: int
    kind: str = "command"
    terminated: bool = True

    def text(self, source: str) -> str:
        return source[self.start : self.end]


def skip_comment(text: str, start: int) -> int:
    """The index just past the comment opening at `start` (nested comments and strings inside it skipped); the
    text's length when it never closes."""
    depth = 0
    position = start
    length = len(text)
    while position < length:
        if text.startswith("(*", position):
            depth += 1
            position += 2
        elif text.startswith("*)", position):
            depth -= 1
            position += 2
            if depth == 0:
                return position
        elif text[position] == '"':
            position = skip_string(text, position)
        else:
            position += 1
    return length


def skip_string(text: str, start: int) -> int:
    """The index just past the string opening at `start` (`""` is an escaped quote); the text's length when it
    never closes."""
    position = start + 1
    length = len(text)
    while position < length:
        if text[position] == '"':
            if position + 1 < length and text[position + 1] == '"':
                position += 2
                continue
            return position + 1
        position += 1
    return length


def skip_blanks_and_comments(text: str, position: int) -> int:
    """The first index at or after `position` that is neither blank nor inside a comment."""
    length = len(text)
    while position < length:
        if text[position] in BLANKS:
            position += 1
        elif text.startswith("(*", position):
            position = skip_comment(text, position)
        else:
            break
    return position


def _ends_sentence(text: str, dot: int) -> bool:
    """Whether the `.` at `dot` ends a sentence: followed by a blank or the end, and not the second dot of `..`."""
    after = dot + 1
    if after < len(text) and text[after] not in BLANKS:
        return False
    if dot >= 1 and text[dot - 1] == ".":
        # "..": a recursive notation's token; "...": the `tac...` terminator.
        return dot >= 2 and text[dot - 2] == "."
    return True


def _sentence_end(text: str, start: int) -> tuple[int, bool]:
    """(the index just past the sentence starting at `start`, whether a `.` ended it)."""
    position = start
    length = len(text)
    while position < length:
        char = text[position]
        if char == '"':
            position = skip_string(text, position)
        elif text.startswith("(*", position):
            position = skip_comment(text, position)
        elif char == "." and _ends_sentence(text, position):
            return position + 1, True
        else:
            position += 1
    return length, False


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of `text`, in order (see the module docstring); blanks and comments between them belong to
    none. A last sentence without its `.` comes back with `terminated=False`."""
    sentences: list[Sentence] = []
    position = skip_blanks_and_comments(text, 0)
    length = len(text)
    while position < length:
        char = text[position]
        if char in BULLET_CHARS:
            end = position
            while end < length and text[end] == char:
                end += 1
            sentence = Sentence(position, end, "bullet")
        elif char in "{}":
            sentence = Sentence(position, position + 1, "brace")
        elif (selector := _SELECTOR_BRACE.match(text, position)) is not None:
            sentence = Sentence(position, selector.end(), "brace")
        else:
            end, terminated = _sentence_end(text, position)
            # Trailing blanks of an unterminated sentence are not part of it.
            if not terminated:
                end = len(text[:end].rstrip(BLANKS))
            sentence = Sentence(position, end, "command", terminated)
        sentences.append(sentence)
        position = skip_blanks_and_comments(text, sentence.end)
    return sentences
