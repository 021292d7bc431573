"""Proof shapes for measuring the precheck as a proof grows: each builds, for a size in characters, a request that
`prepare` accepts (SHAPES) or refuses at its end (REJECTED_SHAPES). Used by
tests/lean_server/precheck/test_linearity.py (work counted) and bench/lean_precheck.py (time measured)."""

from __future__ import annotations

from collections.abc import Callable

from trl_verigate.lean_server.core.types import MINIF2F_HEADER, ProofRequest, Request

STATEMENT = "theorem t (a b : ℝ) (n : ℕ) (h : a = b) (ha : 0 < a) (hb : 0 < b) : a = b := by"


def repeated(unit: str, size: int, prefix: str = "", suffix: str = "", separator: str = "") -> str:
    """`prefix`, copies of `unit` joined by `separator`, `suffix`: the first such text of at least `size` chars."""
    copies = max(1, -(-(size - len(prefix) - len(suffix) + len(separator)) // (len(unit) + len(separator))))
    return prefix + separator.join([unit] * copies) + suffix


def _nested(opening: str, closing: str, depth: int) -> str:
    """`opening` `depth` times, `rfl`, `closing` as often: one tactic nested `depth` deep."""
    return "  " + opening * depth + "rfl" + closing * depth


def _proof(body: str) -> ProofRequest:
    return ProofRequest(STATEMENT, body)


def _file(body: str) -> str:
    return f"{MINIF2F_HEADER}\n\n{STATEMENT}\n{body}"


def _nested_haves(depth: int) -> str:
    """`have … := by` blocks nested `depth` deep (brackets.MAX_NESTING is 32), then the tactic closing the goal."""
    lines = ["  " * (level + 1) + f"have h{level} : a = b := by" for level in range(depth)]
    return "\n".join([*lines, "  " * (depth + 1) + "exact h", "  exact h", ""])


# name -> (size in chars -> request). Each is accepted by `prepare`; together they cover long lines, many lines,
# deep nesting, one token kind repeated, comments, literals, separators, combinators, bullets, blocks, names,
# Unicode, configuration items, and complete files.
SHAPES: dict[str, Callable[[int], Request]] = {
    "one_line_term_list": lambda n: _proof(repeated("sq_nonneg (a - b)", n, "  nlinarith [", "]", ", ")),
    "aesop_unsafe_rules": lambda n: _proof(repeated("unsafe apply h", n, "  aesop (add ", ")", ", ")),
    "many_lines": lambda n: _proof(repeated("  rw [h]\n  simp\n  ring_nf\n", n)),
    "nested_have_by": lambda n: _proof(repeated(_nested_haves(30), n)),
    "nested_brackets": lambda n: _proof(repeated("  exact " + "(" * 30 + "h" + ")" * 30 + "\n", n)),
    # The nested shapes of issue 26, 30 levels deep (just within MAX_NESTING): each level a tactic block or a
    # configuration read again by the rules of the level around it.
    "nested_dischargers": lambda n: _proof(repeated(_nested("simp (disch := ", ")", 30) + "\n", n)),
    "nested_aesop_by": lambda n: _proof(repeated(_nested("aesop (add safe apply (by ", "))", 15) + "\n", n)),
    # One tactic with many configuration items: each item's tactics are found among the tactic's nested ones.
    "many_items": lambda n: _proof(repeated("(disch := positivity) (maxSteps := 10)", n, "  simp ", "", " ")),
    # Binders named like a meta namespace, each with its scope: every occurrence is looked up among them.
    "io_binders": lambda n: _proof(repeated("  have := fun (IO : ℕ) => IO.succ + IO\n", n, "", "  exact h")),
    "nested_config_braces": lambda n: _proof(
        repeated("  simp (config := " + "{ a := " * 30 + "1" + " }" * 30 + ")\n", n)
    ),
    "line_comments": lambda n: _proof(repeated("  -- a comment about the next step\n  simp\n", n)),
    "one_block_comment": lambda n: _proof(repeated("x", n, "  /- ", " -/\n  simp")),
    "many_block_comments": lambda n: _proof(repeated("  /- c /- d -/ -/ simp\n", n)),
    "one_string": lambda n: _proof(repeated("x", n, '  have hs : "', '".length > 0 := by simp\n  exact h')),
    "semicolons": lambda n: _proof(repeated("simp", n, "  ", "", "; ")),
    "then_chain": lambda n: _proof(repeated("simp", n, "  constructor <;> ", "", " <;> ")),
    "bullets": lambda n: _proof(repeated("  · simp\n", n, "  constructor\n")),
    "have_by_blocks": lambda n: _proof(repeated("  have hk : a = b := by\n    rw [h]\n", n, "", "  exact h")),
    "dotted_name": lambda n: _proof(repeated("symm", n, "  exact h.", "", ".")),
    "projections": lambda n: _proof(repeated("1", n, "  exact h.", "", ".")),
    "unicode": lambda n: _proof(repeated("  simp only [h₀, h₁, α, ℝ, x², 𝓝] at h ⊢\n", n)),
    "calc_steps": lambda n: _proof(repeated("\n    _ = b := by rw [h]", n, "  calc a = b := by rw [h]")),
    "numbers": lambda n: _proof(repeated("(2 : ℝ) ^ 10 = 1024", n, "  norm_num [", "]", ", ")),
    "words_starting_with_r": lambda n: _proof(repeated("  rw [h]\n  rfl\n  ring\n", n)),
    "named_arguments": lambda n: _proof(repeated("(m := a)", n, "  exact Nat.le_induction ", "", " ")),
    "config_literals": lambda n: _proof(repeated("  simp (config := { maxSteps := 100000, decide := true }) [h]\n", n)),
    "match_alternatives": lambda n: _proof(
        repeated("  | succ k ih => simp\n", n, "  induction n with\n  | zero => simp\n")
    ),
    "first_alternatives": lambda n: _proof(repeated("simp", n, "  first | ", "", " | ")),
    "file": lambda n: _file(repeated("  rw [h]\n  simp\n  ring_nf\n", n)),
    "file_one_line": lambda n: _file(repeated("sq_nonneg (a - b)", n, "  nlinarith [", "]", ", ")),
    # Whitespace after the last token: a scan that searched on from each blank would be quadratic.
    "trailing_whitespace": lambda n: _proof(repeated(" \n", n, "  simp")),
}
# Shapes refused at their end, after the whole proof was read: the rejection's position and corrected form. The
# `too_deep_*` ones end in the same shape nested 60 deep, past MAX_NESTING.
REJECTED_SHAPES: dict[str, Callable[[int], Request]] = {
    "refused_at_the_end": lambda n: _proof(repeated("  simp\n", n, "", "  sorry")),
    "dedented_at_the_end": lambda n: _proof(repeated("simp", n, "  ", "\nsimp", "; ")),
    "too_deep_dischargers": lambda n: _proof(
        repeated(_nested("simp (disch := ", ")", 30) + "\n", n, "", _nested("simp (disch := ", ")", 60))
    ),
    "too_deep_aesop_by": lambda n: _proof(
        repeated(_nested("aesop (add safe apply (by ", "))", 15) + "\n", n, "", _nested("aesop (by ", ")", 60))
    ),
    "too_deep_config_braces": lambda n: _proof(
        repeated(
            "  simp (config := { a := 1 })\n", n, "", "  simp (config := " + "{ a := " * 60 + "1" + " }" * 60 + ")"
        )
    ),
}


def request_size(request: Request) -> int:
    return len(request) if isinstance(request, str) else len(request.statement) + 1 + len(request.proof)
