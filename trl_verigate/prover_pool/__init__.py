"""What every proof checker here shares: sandboxed, memory-limited worker processes, a pool of them keyed by the
header they loaded, fair scheduling of the prechecks across callers, and the batch API with a status per request.

The Lean REPL (`trl_verigate.lean_server`) and Coq's `coqidetop` (`trl_verigate.coq`) are workers of this pool.
"""
