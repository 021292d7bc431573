"""Names a proof binds, and where each binder is in scope.

The meta-name rule refuses a name under `IO`, `ST` or `EST` unless the proof's own hypothesis of that name is meant:
a binder exempts only its own occurrences, within its scope. The scopes read here are Lean's or narrower (a name
read as out of scope is refused, never the other way round):

* a binder of the declaration's signature (`(IO : a = b)`): the whole declaration;
* `fun IO => body`, `∀ IO, body`, `∃ IO, body`: the body, up to the end of the bracket or tactic the binder stands in;
* a pattern before `=>` (`case _ IO =>`, `| succ IO ih =>`, `next IO =>`): the block after that `=>`, and in a term
  `match` up to the next alternative;
* a tactic that introduces a name (`intro IO`, `have IO := …`, `obtain ⟨IO, h⟩ := …`): the tactics after it in its
  block, not its own value.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from trl_verigate.lean_server.precheck.brackets import CLOSERS, OPENERS, enclosing_openers
from trl_verigate.lean_server.precheck.layout import Node, ProofLayout
from trl_verigate.lean_server.precheck.tokens import Token

# Tokens after which a run of plain names are binders (`intro a IO`, `obtain ⟨EST, h⟩`, `fun ST =>`).
BINDER_INTRODUCERS = frozenset(
    {
        "intro", "intros", "rintro", "fun", "λ", "∀", "∃", "∃!", "have", "haveI", "let", "letI", "set", "obtain",
        "rename_i", "next", "case", "case'", "by_contra", "by_contra!", "by_cases", "generalize", "choose", "ext",
        "funext", "with", "|", "rcases", "cases'", "induction'", "peel", "lift", "wlog", "suffices",
    }
)  # fmt: skip
_TERM_BINDERS = {"fun": ("=>", "↦"), "λ": ("=>", "↦"), "∀": (",",), "∃": (",",), "∃!": (",",)}
_BINDER_RUN = frozenset({"_", "⟨", "⟩", ",", "(", ")", "|"})
# Tokens that end a binder's body at its own depth: what follows is outside the binder.
_BODY_ENDS = (",", ";", "|", ":=", "then", "else", "with", "from", "at", "using", "<;>")
# How far a look for a binder's introducer, or for the `=>`/`,` that starts its scope, reaches: the work stays linear.
_REACH = 16


def _introducer(tokens: list[Token], k: int) -> int | None:
    """The index of the token that introduces the plain name at k as a binder (back over names and pattern brackets),
    or None."""
    j = k - 1
    reach_start = max(0, k - _REACH)
    while (
        j >= reach_start
        and tokens[j].text not in BINDER_INTRODUCERS
        and (tokens[j].text in _BINDER_RUN or (tokens[j].kind == "ident" and "." not in tokens[j].text))
    ):
        j -= 1
    return j if j >= 0 and tokens[j].text in BINDER_INTRODUCERS else None


def _plain(token: Token) -> bool:
    return token.kind == "ident" and "." not in token.text and not token.text.startswith("«")


def signature_binders(tokens: list[Token]) -> set[str]:
    """The names a declaration's binder groups bind, for its whole body: `theorem t (a b EST : T) {α : Type} : P`.
    Only groups before the signature's top-level `:` are binders; after it, `(IO : Type → Type)` is a type ascription,
    which binds nothing, and a `∀`'s binder is in scope in the type only."""
    bound: set[str] = set()
    depth = 0
    for k, token in enumerate(tokens):
        if depth == 0 and token.text in (":", ":="):
            break
        if token.text in OPENERS:
            depth += 1
            j = k + 1  # a run of plain names right after the bracket, then `:`
            while j < min(len(tokens), k + _REACH) and _plain(tokens[j]):
                j += 1
            if j > k + 1 and j < len(tokens) and tokens[j].text == ":":
                bound.update(name.text for name in tokens[k + 1 : j])
        elif token.text in CLOSERS:
            depth -= 1
    return bound


def bound_names(tokens: list[Token], *, signature: bool = False) -> set[str]:
    """Plain names the tokens bind anywhere (`intro`, `fun`, `∀`, `have`, `obtain ⟨…⟩`, `case … =>`, …) and, in a
    declaration's `signature`, its binder groups (`signature_binders`). Each look around a token stops after `_REACH`
    tokens, so the work stays linear."""
    bound = signature_binders(tokens) if signature else set()
    for k, token in enumerate(tokens):
        if _plain(token) and _introducer(tokens, k) is not None:
            bound.add(token.text)
    return bound


@dataclass(frozen=True)
class Scopes:
    """Where the proof's own names are bound. `everywhere`: the signature's binders; `spans`: for the names the
    scopes were read for, the `[start, end)` character spans their binders cover; `bound`: every plain name bound
    anywhere (what `#s` may take as a local: see `rules`)."""

    everywhere: frozenset[str] = frozenset()
    # Per name, the starts and the ends of its disjoint spans, in order: one lookup is a bisection.
    spans: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)
    bound: frozenset[str] = frozenset()

    def binds(self, name: str, offset: int) -> bool:
        """Whether a binder of the proof covers `name` at character `offset`."""
        if name in self.everywhere:
            return True
        starts, ends = self.spans.get(name, ((), ()))
        at = bisect.bisect_right(starts, offset) - 1
        return at >= 0 and offset < ends[at]


def _disjoint(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """The union of `spans` as the starts and the ends of disjoint spans, in order."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(spans):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def read_scopes(
    layout: ProofLayout, names: frozenset[str], everywhere: frozenset[str], start: int = 0, stop: int | None = None
) -> Scopes:
    """The scopes of the binders of `names` among `layout.tokens[start:stop]`; `everywhere`: names bound for the whole
    range (the signature's)."""
    tokens = layout.tokens
    stop = len(tokens) if stop is None else stop
    reader = None  # read only where a binder of `names` stands
    spans: dict[str, list[tuple[int, int]]] = {}
    for k in range(start, stop):
        token = tokens[k]
        if token.kind != "ident" or token.text not in names:
            continue
        introducer = _introducer(tokens, k)
        if introducer is None:
            continue
        named = spans.setdefault(token.text, [])
        named.append((token.start, token.end))  # the binder itself
        reader = reader or _ScopeReader(layout, stop)
        scope = reader.scope(k, introducer)
        if scope is not None and scope[0] < scope[1]:
            named.append((tokens[scope[0]].start, tokens[scope[1] - 1].end))
    bound = frozenset(bound_names(tokens[start:stop])) | everywhere
    return Scopes(everywhere, {name: _disjoint(named) for name, named in spans.items()}, bound)


class _ScopeReader:
    """Reads binders' scopes in one layout; what it looks up is computed once, so the work stays linear."""

    def __init__(self, layout: ProofLayout, stop: int):
        self.layout, self.tokens, self.closers, self.stop = layout, layout.tokens, layout.closers, stop
        self.enclosing = enclosing_openers(layout.tokens)
        self.roots = layout.tactics + layout.suffix_tactics
        self.firsts: dict[int, list[int]] = {}  # id of a list of nodes (each kept alive by its parent) -> their firsts

    def scope(self, k: int, introducer: int) -> tuple[int, int] | None:
        """The `[first, end)` token range the binder at k covers, or None where none is read."""
        node = self._innermost(introducer)
        term_end = self._term_end(node, introducer)
        starts = _TERM_BINDERS.get(self.tokens[introducer].text)
        if starts:  # `fun x => body`, `∀ x, body`: the body ends at a separator (`(fun x => a, b)`)
            found, at = self._scan(introducer + 1, term_end, starts)
            return (at + 1, self._scan(at + 1, term_end, _BODY_ENDS)[1]) if found else None
        found, arrow = self._scan(k + 1, term_end, ("=>",), stop_at=(":=", ";", "|"))
        if found:  # a pattern: the block after its `=>`, or a term `match` alternative up to the next one
            if arrow in self.layout.arrow_ends:
                return arrow + 1, self.layout.arrow_ends[arrow]
            return arrow + 1, self._scan(arrow + 1, term_end, ("|",))[1]
        if node is None or node.block_end < 0:
            return None
        return node.end, node.block_end  # the tactics after the introducing one, in its block

    def _innermost(self, k: int) -> Node | None:
        """The innermost tactic whose tokens include token k, or None."""
        nodes, found = self.roots, None
        while nodes:
            firsts = self.firsts.get(id(nodes))
            if firsts is None:
                firsts = self.firsts[id(nodes)] = [node.first for node in nodes]
            at = bisect.bisect_right(firsts, k) - 1
            if at < 0 or not nodes[at].first <= k < nodes[at].end:
                return found
            found = nodes[at]
            nodes = found.children
        return found

    def _term_end(self, node: Node | None, k: int) -> int:
        """The end of the innermost bracket or tactic that token k stands in."""
        end = self.stop if node is None else node.end
        opener = self.enclosing[k]
        if opener >= 0 and (node is None or opener >= node.first):
            end = min(end, self.closers[opener])
        return end

    def _scan(self, k: int, end: int, wanted: tuple[str, ...], stop_at: tuple[str, ...] = ()) -> tuple[bool, int]:
        """(True, its index) for the first token in `wanted` from k on, outside brackets opened after k, within
        `_REACH` tokens or groups before `end`; else (False, where the look stopped: at `end`, a closer, a token in
        `stop_at`, or the reach)."""
        for _ in range(_REACH):
            if k >= end:
                return False, end
            text = self.tokens[k].text
            if text in wanted:
                return True, k
            if text in stop_at or text in CLOSERS:
                return False, k
            k = self.closers[k] + 1 if self.closers[k] >= 0 else k + 1
        return False, min(k, end)
