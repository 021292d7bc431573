"""The precheck's work grows linearly with the proof, counted rather than timed.

`prepare` runs on every untrusted proof before Lean does, so a hostile proof must not make it quadratic (a 160 KB
`aesop (add unsafe h, …)` once took 20 s). Each shape below is a proof (or complete file) that `prepare` accepts,
built by repeating one unit. For two sizes, the test counts

* the Python lines executed in `trl_verigate.lean_server` (a scan back over the tokens per token shows here), and
* the characters that `str` methods go over on the request's text and every slice of it (`text[i:]` per token, a
  `rfind` back to the line start per token: quadratic work in C that no line count sees),

and asserts that doubling the size at most about doubles each count (a quadratic part quadruples it). Work inside
`re` on the text is not counted; its patterns are written so they never backtrack over more than a token.
`bench/lean_precheck.py` times the same shapes up to 1 MB.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import trl_verigate.lean_server as lean_server
from tests.lean_helpers import prepare
from tests.precheck_shapes import REJECTED_SHAPES, SHAPES, repeated, request_size
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, ProofRequest, Request, VerificationResult
from trl_verigate.lean_server.precheck.layout import parse_proof
from trl_verigate.lean_server.precheck.prepared import Prepared
from trl_verigate.lean_server.precheck.tokens import tokenize


def split_proof(proof: str):
    return parse_proof(tokenize(proof))


class _CountingStr(str):
    """A str that adds to `scanned` the characters its range-taking methods go over; slices stay counting."""

    scanned = 0

    def __getitem__(self, key):
        item = str.__getitem__(self, key)
        if isinstance(key, slice):
            _CountingStr.scanned += len(item)
            return _CountingStr(item)
        return item

    def __iter__(self):
        _CountingStr.scanned += len(self)
        return str.__iter__(self)

    def __contains__(self, sub):
        _CountingStr.scanned += len(self)
        return str.__contains__(self, sub)

    def __add__(self, other):
        result = str.__add__(self, other)
        _CountingStr.scanned += len(result)
        return _CountingStr(result)

    def __radd__(self, other):
        result = str.__add__(other, self)
        _CountingStr.scanned += len(result)
        return _CountingStr(result)

    def _range(self, start, end):
        start, end, _ = slice(start, end).indices(len(self))
        return start, end

    def find(self, sub, start=None, end=None):
        result = str.find(self, sub, start, end)
        low, high = self._range(start, end)
        _CountingStr.scanned += (high if result < 0 else result + len(sub)) - low
        return result

    def rfind(self, sub, start=None, end=None):
        result = str.rfind(self, sub, start, end)
        low, high = self._range(start, end)
        _CountingStr.scanned += high - (low if result < 0 else result)
        return result

    def index(self, sub, start=None, end=None):
        result = str.index(self, sub, start, end)
        _CountingStr.scanned += result + len(sub) - self._range(start, end)[0]
        return result

    def count(self, sub, start=None, end=None):
        low, high = self._range(start, end)
        _CountingStr.scanned += high - low
        return str.count(self, sub, start, end)


for _whole_text_method in ("split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "replace", "lower", "upper"):

    def _counted(self, *args, _method=getattr(str, _whole_text_method), **kwargs):
        _CountingStr.scanned += len(self)
        return _method(self, *args, **kwargs)

    setattr(_CountingStr, _whole_text_method, _counted)


def _counting(request: Request) -> Request:
    if isinstance(request, str):
        return _CountingStr(request)
    return ProofRequest(_CountingStr(request.statement), _CountingStr(request.proof), request.header)


_PACKAGE = str(Path(lean_server.__file__).parent)


def work_of(request: Request, run: Callable[[Request], object] = lambda r: prepare(r, MINIF2F_HEADER)):
    """(Python lines run in trl_verigate.lean_server, characters scanned by str methods, result) of `run(request)`,
    `prepare` by default."""
    lines = 0

    def local(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def global_(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(_PACKAGE) else None

    counted = _counting(request)
    _CountingStr.scanned = 0
    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        result = run(counted)
    finally:
        sys.settrace(previous)
    return lines, _CountingStr.scanned, result


# Sizes small enough for a traced run to stay cheap, large enough that a quadratic part dominates: one rescan per
# token of a 3000-char proof is already ~10x its linear work.
SMALL, LARGE = 3000, 6000
# Linear work doubles (a little less, with the fixed cost of the statement and header); quadratic quadruples.
MAX_GROWTH = 2.5


def _growth(make: Callable[[int], Request], *run) -> tuple[float, float, object]:
    small, large = make(SMALL), make(LARGE)
    small_lines, small_chars, _ = work_of(small, *run)
    large_lines, large_chars, result = work_of(large, *run)
    size_ratio = request_size(large) / request_size(small)
    return large_lines / small_lines / size_ratio * 2, large_chars / max(small_chars, 1) / size_ratio * 2, result


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_prepare_work_grows_linearly(name):
    line_growth, char_growth, result = _growth(SHAPES[name])
    assert isinstance(result, Prepared), f"{name} must be accepted to exercise every check: {result}"
    assert line_growth <= MAX_GROWTH, f"{name}: Python lines x{line_growth:.2f} for twice the proof"
    assert char_growth <= MAX_GROWTH, f"{name}: characters scanned x{char_growth:.2f} for twice the proof"


@pytest.mark.parametrize("name", sorted(REJECTED_SHAPES))
def test_rejection_work_grows_linearly(name):
    line_growth, char_growth, result = _growth(REJECTED_SHAPES[name])
    assert isinstance(result, VerificationResult) and result.status == "rejected", result
    assert line_growth <= MAX_GROWTH, f"{name}: Python lines x{line_growth:.2f} for twice the proof"
    assert char_growth <= MAX_GROWTH, f"{name}: characters scanned x{char_growth:.2f} for twice the proof"


# Declaration suffixes the splitter reads (`where` declarations, termination hints, `let rec`); the precheck refuses
# their keywords until it accepts the suffix, so the splitter's own work is counted.
SUFFIX_SHAPES: dict[str, Callable[[int], str]] = {
    "where_declarations": lambda n: repeated("  a (k : ℕ) : k = k := by\n    simp\n", n, "  exact a\nwhere\n"),
    "where_equations": lambda n: repeated("    | n + 1 => a n\n", n, "  exact a 3\nwhere\n  a : ℕ → ℕ\n    | 0 => 0\n"),
    "termination_measure": lambda n: repeated("(n + 1)", n, "  exact t\ntermination_by ", "", " + "),
    "decreasing_by_tactics": lambda n: repeated("  simp_wf\n", n, "  exact t\ntermination_by n\ndecreasing_by\n"),
    "let_rec_tactics": lambda n: repeated(
        "  let rec g : ℕ → ℕ\n    | 0 => 0\n    | k + 1 => g k\n  termination_by k => k\n", n
    ),
}


@pytest.mark.parametrize("name", sorted(SUFFIX_SHAPES))
def test_splitter_work_on_declaration_suffixes_grows_linearly(name):
    line_growth, char_growth, _ = _growth(SUFFIX_SHAPES[name], split_proof)
    proof = SUFFIX_SHAPES[name](LARGE)
    layout = split_proof(proof)
    # The whole proof is read as tactics and suffix, so the work counted is the suffix's.
    last = layout.suffix[1] if layout.suffix else layout.end
    assert last == len(layout.tokens) and layout.tokens[-1].end == len(proof.rstrip()), name
    assert line_growth <= MAX_GROWTH, f"{name}: Python lines x{line_growth:.2f} for twice the proof"
    assert char_growth <= MAX_GROWTH, f"{name}: characters scanned x{char_growth:.2f} for twice the proof"


def _quadratic_line_start(text: str, offsets: list[int]) -> list[int]:
    # The shape of the bug the counter must catch: a search back to the line start for every token.
    return [text.rfind("\n", 0, offset) + 1 for offset in offsets]


def test_the_counters_see_quadratic_work():
    # The guard guards: a rescan per token, in Python or inside a str method, shows as growth near 4.
    def chars(size: int) -> int:
        text = _CountingStr("x " * size)
        _CountingStr.scanned = 0
        _quadratic_line_start(text, list(range(0, len(text), 2)))
        return _CountingStr.scanned

    assert chars(2 * SMALL) / chars(SMALL) > 3.5
    sliced = _CountingStr("x" * SMALL)
    _CountingStr.scanned = 0
    for i in range(len(sliced)):
        sliced[i:]  # noqa: B018  (the copy is the point)
    assert _CountingStr.scanned == SMALL * (SMALL + 1) // 2
