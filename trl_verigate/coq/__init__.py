"""Coq as a second prover on the shared pool: sound, isolated, pooled verification with tactic-level feedback.

`CoqServer` checks `CoqProofRequest`s (a trusted statement, an untrusted proof) with long-lived coqidetop workers;
`extract_coq_proof` finds the proof in a completion. See `coq.precheck` for the threat model.
"""

from importlib import import_module

from trl_verigate.coq.completions import extract_coq_proof
from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig

__all__ = ["CoqProofRequest", "CoqServer", "CoqServerConfig", "extract_coq_proof"]


def __getattr__(name: str):
    # The server pulls in the pool and asyncio machinery; configs and requests are built without it.
    if name == "CoqServer":
        return import_module("trl_verigate.coq.server").CoqServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
