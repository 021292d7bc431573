"""The recheck tier: a checker in which no submitted code ran confirms the REPL's passes with the Lean kernel."""

from trl_verigate.lean_server.recheck.contract import Rechecker
from trl_verigate.lean_server.recheck.self_test import (
    HONEST,
    checker_key,
    effective_recheck,
    record_verified,
    run_self_test,
)

__all__ = ["HONEST", "Rechecker", "checker_key", "effective_recheck", "record_verified", "run_self_test"]
