"""The proof's own auxiliary definitions (`where` declarations and `let rec`s): named plainly, never run as code.

Split from `precheck`, which calls `check_local_definitions` once the splitter has read the proof's layout (the
`where` clause is the declaration suffix it found, `tactics.ProofLayout`).
"""

from __future__ import annotations

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.code_tokens import CodeTokens
from trl_verigate.lean_server.config_values import config_item_values
from trl_verigate.lean_server.lexer import PrecheckError, Token


def _column(text: str, offset: int) -> int:
    return offset - (text.rfind("\n", 0, offset) + 1)


def _local_definition_names(
    text: str, code: list[Token], layout: tactic_split.ProofLayout, closers: dict[int, int]
) -> list[Token]:
    """The name tokens of the proof's auxiliary definitions (`where` declarations, `let rec`s), from one pass.

    `code`: the code tokens outside literals. A `where` clause (only the theorem's suffix has one) is a block of
    declarations: the first after `where`, each next at the start of a line at that one's column or after a `;`,
    outside brackets (the splitter ends the clause at any other line start at or left of that column). A `let rec`
    names its first definition after `rec` and further ones after a `,` at its own bracket depth (Lean's
    `letRecDecls`), each `name binders… :` (`use a, h.2` declares nothing); it is open until a `;` or closer at
    that depth, a suffix keyword, or a line at or left of its `let`. Open `let rec`s form a stack, so the pass
    stays linear however they nest.
    """
    names: list[Token] = []
    keywords = layout.clause_keywords
    declaration_column = None  # the `where` declarations' column, once the clause has started
    open_let_recs: list[tuple[int, int]] = []  # (bracket depth, column of `let`) of each open `let rec`
    depth = 0
    for k, token in enumerate(code):
        previous = code[k - 1] if k > 0 else None
        at_line_start = previous is None or text.rfind("\n", previous.end, token.start) >= 0
        column = _column(text, token.start) if at_line_start else None
        if token.start in keywords:
            open_let_recs.clear()
            if token.text == "where" and k + 1 < len(code):
                declaration_column = _column(text, code[k + 1].start)
                names.append(code[k + 1])
            continue
        while open_let_recs and (
            (at_line_start and column <= open_let_recs[-1][1])
            or (token.text == ";" and depth == open_let_recs[-1][0])
            or depth < open_let_recs[-1][0]
        ):
            open_let_recs.pop()
        if token.kind == "symbol" and token.text in tactic_split.OPENERS:
            depth += 1
        elif token.kind == "symbol" and token.text in tactic_split.CLOSERS:
            depth -= 1
        elif token.kind != "ident" or previous is None:
            continue
        elif token.text == "rec" and previous.text in ("let", "have") and k + 1 < len(code):
            names.append(code[k + 1])
            open_let_recs.append((depth, _column(text, previous.start)))
        elif previous.text == "," and open_let_recs and depth == open_let_recs[-1][0]:
            if _declares(code, k, closers):
                names.append(token)
        elif (
            declaration_column is not None
            and depth <= 0
            and layout.suffix is not None
            and token.start < layout.suffix[1]
            and (column == declaration_column or previous.text == ";")
        ):
            names.append(token)
    return names


def _declares(code: list[Token], j: int, closers: dict[int, int]) -> bool:
    """Whether the identifier `code[j]` is followed by binders (names, bracketed groups, skipped whole) and a `:`
    or `:=`: the start of a definition. Stops at the first other token, so scans from consecutive `,`s never
    overlap."""
    i = j + 1
    while i < len(code):
        token = code[i]
        if token.text == ":":
            return True
        if token.kind == "ident":
            i += 1
        elif i in closers:
            i = closers[i] + 1
        else:
            return False
    return False


def check_local_definitions(
    tokens: list[Token], text: str, layout: tactic_split.ProofLayout, view: CodeTokens | None = None
) -> None:
    """The proof's `where`/`let rec` definitions are named plainly and never evaluated as code.

    A plain name (no `.`, no `_root_`) keeps a definition out of another namespace, where a `.ctor` configuration
    value could find it (one declared into `Linarith.LinarithConfig` is reached by `(config := .evil)`). And such a
    definition is compiled: Lean makes a `where`/`let rec` of non-`Prop` type a `def` with the theorem's modifiers,
    and generates code for it, so an elaborator that evaluates a constant (`linarith (discharger := NAME)`, a
    configuration value) would run the proof's code inside the REPL. So no tactic-valued item (`disch`,
    `discharger`, `norm`) and no literal configuration value may name one, under any prefix (`aux`, `thm.aux`,
    `.x.aux`), as `files._check_no_helper_code_is_run` does for a file's helper `def`s.

    `view`: `tokens`' `CodeTokens`, when the caller has one.
    """
    view = CodeTokens(tokens) if view is None else view
    # Only a suffix keyword the splitter placed (`where`) or a `rec` starts a definition: without either, none.
    if not layout.clause_keywords and "rec" not in view.outside_texts:
        return
    code = view.outside
    names = _local_definition_names(text, code, layout, view.closers_of_outside)
    for name in names:
        if name.kind != "ident" or len(name.components) > 1:
            raise PrecheckError(
                f"`{name.text}`", name.start, ": a `where`/`let rec` definition is named plainly (no `.`, no `_root_`)"
            )
    defined = {name.text for name in names}
    if not defined:
        return
    for item, value in config_item_values(code, view):
        for token in value:
            if token.kind == "ident" and defined.intersection(token.components):
                raise PrecheckError(
                    f"`{token.text}`",
                    token.start,
                    f" in `({item.text} := …)` names a `where`/`let rec` definition of this proof where Lean "
                    "may evaluate compiled code: its code must never run inside the REPL; use a library tactic or "
                    "a literal",
                )
