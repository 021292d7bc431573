"""The bottom layer: the configuration and the request and result types every other subpackage speaks."""

from trl_verigate.lean_server.core.types import (
    GRANULARITIES,
    MINIF2F_HEADER,
    RECHECKS,
    STATUSES,
    FileRequest,
    LeanServerConfig,
    Message,
    Position,
    ProofRequest,
    Request,
    Status,
    Tactic,
    VerificationResult,
)

__all__ = [
    "GRANULARITIES",
    "MINIF2F_HEADER",
    "RECHECKS",
    "STATUSES",
    "FileRequest",
    "LeanServerConfig",
    "Message",
    "Position",
    "ProofRequest",
    "Request",
    "Status",
    "Tactic",
    "VerificationResult",
]
