"""What the Lean tests share: `prepare` under the default policy, or with native evaluation allowed, and a file."""

from __future__ import annotations

from trl_verigate.lean_server.core.types import MINIF2F_HEADER, Request
from trl_verigate.lean_server.precheck import policy
from trl_verigate.lean_server.precheck import prepare as _prepare

# A complete miniF2F-style file: the default header, a docstring, one theorem.
FILE = MINIF2F_HEADER + "\n\n/-- The sum. -/\ntheorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  subst h₀\n  rfl"


def prepare(request: Request, header: str = MINIF2F_HEADER, allow_native_decide: bool = False, **settings):
    """`precheck.prepare` with the policy of `LeanServerConfig(allow_native_decide=…, **settings)`."""
    return _prepare(request, header, policy(allow_native_decide, **settings))
