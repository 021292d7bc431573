"""Sound, isolated, pooled Lean 4 verification with tactic-level feedback."""

from importlib import import_module

from trl_verigate.lean_server.core import (
    MINIF2F_HEADER,
    FileRequest,
    LeanServerConfig,
    Message,
    Position,
    ProofRequest,
    Tactic,
    VerificationResult,
)

_LAZY = {
    "LeanServer": "trl_verigate.lean_server.service.server",
    "LeanClient": "trl_verigate.lean_server.service.client",
    "Verifier": "trl_verigate.lean_server.service.verifier",
}

__all__ = [
    "MINIF2F_HEADER",
    "FileRequest",
    "LeanClient",
    "LeanServer",
    "LeanServerConfig",
    "Message",
    "Position",
    "ProofRequest",
    "Tactic",
    "VerificationResult",
    "Verifier",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trl_verigate.lean_server' has no attribute {name!r}")
