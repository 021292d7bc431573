"""What the Lean tests share: `prepare` under the default policy, or with native evaluation allowed."""

from __future__ import annotations

from trl_verigate.lean_server.precheck import policy
from trl_verigate.lean_server.precheck import prepare as _prepare
from trl_verigate.lean_server.types import MINIF2F_HEADER, Request


def prepare(request: Request, header: str = MINIF2F_HEADER, allow_native_decide: bool = False, **settings):
    """`precheck.prepare` with the policy of `LeanServerConfig(allow_native_decide=…, **settings)`."""
    return _prepare(request, header, policy(allow_native_decide, **settings))
