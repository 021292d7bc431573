"""How the layout reads a declaration's suffix after its tactic block: termination hints and `where` declarations
(Lean's `declValSimple`: `:= declBody Termination.suffix (whereDecls)?`). `LayoutParser` inherits these readers;
they read tactic blocks with its `sequence` and declarations with its `operand`."""

from __future__ import annotations

from trl_verigate.lean_server.precheck.brackets import CLOSERS, OPENERS
from trl_verigate.lean_server.precheck.grammar import (
    ALTERNATIVE_HEADS,
    ARROW_HEADS,
    BLOCK_ENDING_WORDS,
    EXPECTS_MORE,
    PATTERN_HEADS,
    SEQUENCE_PREFIXES,
    SUFFIX_WORDS,
)


class SuffixReader:
    """The suffix readers of `LayoutParser` (which supplies `tokens`, `text`, `n`, `clause_keywords`,
    `definition_names`, `sequence` and `operand`)."""

    def termination_suffix(self, i: int, anchor_column: int) -> tuple[list, int]:
        """`[termination_by MEASURE] [decreasing_by TACTICS]` at token i (Lean's `Termination.suffix`), if there.

        The measure is a term over lines indented past `anchor_column`; `decreasing_by`'s tactics form a block
        indented past it.
        """
        tokens, text, n = self.tokens, self.text, self.n
        children: list = []
        if i < n and text[i] in ("termination_by", "termination_by?"):
            self.clause_keywords.append(i)
            i += 1
            depth = 0
            while i < n:
                token = text[i]
                if depth == 0 and (
                    token == ";"
                    or token in SUFFIX_WORDS
                    or (tokens[i].line_start and (tokens[i].column <= anchor_column or token in BLOCK_ENDING_WORDS))
                ):
                    break
                if token in OPENERS:
                    depth += 1
                elif token in CLOSERS:
                    if depth == 0:
                        break
                    depth -= 1
                i += 1
        if i < n and text[i] == "decreasing_by":
            self.clause_keywords.append(i)
            children, i = self.sequence(i + 1, anchor_column, False, False, "tactic")
        return children, i

    def declaration_suffix(self, i: int) -> tuple[list, int]:
        """What may follow the theorem's tactic block at token i: its termination hints, then `where` declarations
        (Lean's `declValSimple`: `:= declBody Termination.suffix (whereDecls)?`), each a declaration at the column
        of the first, or after `;`. Returns the tactics inside them and the index after the suffix."""
        tokens, text, n = self.tokens, self.text, self.n
        children, i = self.termination_suffix(i, 0)
        if i >= n or text[i] != "where":
            return children, i
        self.clause_keywords.append(i)
        i += 1
        if i >= n or tokens[i].column == 0 or not self._is_declaration_name(i):
            return children, i
        declaration_column = tokens[i].column
        while True:
            self.definition_names.append(i)
            declaration, i = self.operand(i, declaration_column, False, False, "tactic")
            children += declaration.children
            kids, i = self.termination_suffix(i, declaration_column)
            children += kids
            if i < n and text[i] == ";":
                i += 1
                if (
                    i < n
                    and self._is_declaration_name(i)
                    and not (tokens[i].line_start and tokens[i].column != declaration_column)
                ):
                    continue
                break
            if (
                i < n
                and tokens[i].line_start
                and tokens[i].column == declaration_column
                and self._is_declaration_name(i)
            ):
                continue
            break
        return children, i

    def _is_declaration_name(self, i: int) -> bool:
        token = self.tokens[i]
        return (
            token.kind == "ident"
            and token.text not in BLOCK_ENDING_WORDS
            and token.text not in EXPECTS_MORE
            and token.text not in SEQUENCE_PREFIXES
            and token.text not in ARROW_HEADS
            and token.text not in ALTERNATIVE_HEADS
            and token.text not in PATTERN_HEADS
            and token.text not in SUFFIX_WORDS
            and token.text not in ("by", "fun", "match", "calc", "rec", "only")
        )
