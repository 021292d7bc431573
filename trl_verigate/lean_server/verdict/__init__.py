"""The verdict: whether Lean's answer to a prepared request proves it, and where a proof first went wrong."""

from trl_verigate.lean_server.verdict.judging import (
    first_error_tactic_of,
    is_axioms_answer,
    judge,
    parse_axioms_message,
    repl_position,
)

__all__ = ["first_error_tactic_of", "is_axioms_answer", "judge", "parse_axioms_message", "repl_position"]
