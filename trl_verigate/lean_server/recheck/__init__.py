"""The recheck tier: a checker in which no submitted code ran confirms the REPL's passes with the Lean kernel."""
