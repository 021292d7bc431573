"""`Owner`: whom a prover process serves, split into what a caller cannot choose and what it may.

- `identity` is the principal: for the HTTP service the owner an API key maps to, or the client's address when no
  keys are configured (`lean_server.service.owners`); in-process, the `caller` a trusted program passes to
  `verify`. REPL quotas (`ProverPoolConfig.max_workers_per_owner`), eviction and the fair precheck queues are per
  identity.
- `label` subdivides one identity's processes (a `LeanClient` names itself with `X-Verigate-Caller`): a process
  serves one (identity, label) pair only, so a proof that compromised one process answers for nobody else, but a
  label is chosen freely and so buys nothing from other identities: a fresh label competes only with its own
  identity's processes.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_IDENTITY = "local"


@dataclass(frozen=True)
class Owner:
    identity: str
    label: str = ""

    @classmethod
    def of(cls, caller: str | Owner | None) -> Owner:
        """`caller` as an Owner: a plain string (an in-process caller) is an identity; None is this process."""
        if isinstance(caller, Owner):
            return caller
        return cls(caller or DEFAULT_IDENTITY)
