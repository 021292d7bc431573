"""The one verification protocol of `LeanServer` (local pool) and `LeanClient` (remote servers).

Code that only verifies (a trainer, a reward function, a benchmark) takes a `Verifier`, so a local pool and remote
servers are interchangeable. Both methods return exactly one `VerificationResult` per request, in request order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from trl_verigate.lean_server.core import Request, VerificationResult


@runtime_checkable
class Verifier(Protocol):
    """Verify Lean requests (`ProofRequest`, `FileRequest` or a complete-file str).

    `timeout`: seconds per proof (None: the verifier's default). `progress`: True shows a progress bar, False never,
    None only for large batches on a terminal. `caller`: who asks; the REPLs that serve one caller serve no other.
    """

    def verify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | None = None,
    ) -> list[VerificationResult]: ...

    async def averify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | None = None,
    ) -> list[VerificationResult]: ...
