"""The provers a process-verified trainer trains against: how each turns the config into a verifier and an oracle.

`PROVERS` maps a config's ``prover`` to its `Prover`; each prover's server package is imported when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Statuses that say the prover never ran the proof (it could not start, or died): a verifier that answers a trivial
# proof with one of them cannot verify anything.
DEAD_STATUSES = ("error", "crashed")


class VerifierUnavailable(RuntimeError):
    """A verifier that cannot run a trivial proof: a setup to fix before training, which a recipe reports in one
    line."""


@dataclass(frozen=True)
class Prover:
    """``build_verifier(args)``: the unstarted verifier the config's prover fields describe. ``build_oracle(args,
    verifier)``: the process oracle that verifies completions with it and splits them into tactics.
    ``liveness_request()``: a trivial proof its verifier must be able to run; ``doctor``: the command that checks the
    setup."""

    build_verifier: Callable[[Any], Any]
    build_oracle: Callable[[Any, Any], Any]
    liveness_request: Callable[[], Any]
    doctor: str

    def start_checked(self, verifier) -> None:
        """Start a local pool (LeanServer, CoqServer) and check it with `check_alive`; a remote verifier, which may
        come up later, is left as it is."""
        if not hasattr(verifier, "start"):
            return
        if not getattr(verifier, "started", True):
            verifier.start()
        self.check_alive(verifier)

    def check_alive(self, verifier) -> None:
        """Send one trivial proof through ``verifier`` before training; refuse one that cannot run it (a missing
        project_dir or REPL answers every proof `error`, and training would go on with no reward at all)."""
        result = verifier.verify([self.liveness_request()])[0]
        if getattr(result, "status", None) in DEAD_STATUSES:
            raise VerifierUnavailable(
                f"the verifier cannot run a trivial proof ({result.status}: {result.reason}); fix the prover setup "
                f"it names (run `{self.doctor}` to check it step by step) before training"
            )


def _pool_settings(args) -> dict[str, Any]:
    """The pool settings both provers' server configs take, from the config's prover fields."""
    settings = {"timeout": args.prover_timeout, "memory_limit_mb": args.prover_memory_limit_mb}
    if args.prover_header is not None:
        settings["header"] = args.prover_header
    if args.prover_workers is not None:
        settings["workers"] = args.prover_workers
    return settings


def _oracle_fields(args) -> dict[str, Any]:
    return {"timeout": args.prover_timeout, "statement_field": args.statement_field, "header_field": args.header_field}


def _lean_verifier(args):
    """A local `LeanServer` pool, or a `LeanClient` of remote servers."""
    from trl_verigate.lean_server import LeanClient, LeanServer, LeanServerConfig

    settings = _pool_settings(args) | {"tactic_granularity": args.tactic_granularity}
    if args.lean_server_urls:
        return LeanClient(args.lean_server_urls, timeout=args.prover_timeout, config=LeanServerConfig(**settings))
    if not args.lean_repl_command:
        raise ValueError(
            "No Lean verifier: set lean_repl_command (and prover_project_dir) for a local pool, lean_server_urls "
            "for remote servers, or pass verifier= (a LeanServer or LeanClient) or process_oracle=."
        )
    recheck = {
        "recheck": args.lean_recheck,
        "recheck_command": args.lean_recheck_command,
        "recheck_sample_rate": args.lean_recheck_sample_rate,
    }
    return LeanServer(
        LeanServerConfig(
            repl_command=args.lean_repl_command, project_dir=args.prover_project_dir, **settings, **recheck
        )
    )


def _lean_oracle(args, verifier):
    from trl_verigate.rewards.lean import LeanProcessOracle

    return LeanProcessOracle(verifier, completion_format=args.completion_format, **_oracle_fields(args))


def _coq_verifier(args):
    """A local `CoqServer` pool."""
    from trl_verigate.coq import CoqServer, CoqServerConfig

    settings = _pool_settings(args)
    if args.coq_command:
        settings["coqidetop_command"] = args.coq_command
    if args.prover_project_dir is not None:
        settings["project_dir"] = args.prover_project_dir
    return CoqServer(CoqServerConfig(**settings))


def _lean_liveness_request():
    from trl_verigate.lean_server import ProofRequest

    return ProofRequest("theorem liveness_check : True := by", "  trivial")


def _coq_liveness_request():
    from trl_verigate.coq import CoqProofRequest

    return CoqProofRequest("Theorem liveness_check : True.", "exact I.")


def _coq_oracle(args, verifier):
    from trl_verigate.rewards.coq import CoqProcessOracle

    return CoqProcessOracle(verifier, **_oracle_fields(args))


PROVERS = {
    "lean": Prover(_lean_verifier, _lean_oracle, _lean_liveness_request, "trl-verigate lean-doctor"),
    "coq": Prover(_coq_verifier, _coq_oracle, _coq_liveness_request, "trl-verigate coq-doctor"),
}
