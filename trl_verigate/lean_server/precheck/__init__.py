"""Tier 1, the precheck: what is sent to Lean for a request, or why it is refused before Lean runs.

Layered so that imports run one way: `tokens` (the one tokenizer) → `brackets` (matching brackets, the nesting
bound) → `grammar`, `layout` (where each tactic starts and ends, at every nesting level) → `policy` (the allow-lists,
data in `allowlists/`) → `scopes` (where the proof's own names are bound), `configuration` (configuration is data) →
`rules` (the boundary: a proof is object-level mathematics; it may not metaprogram) → `prepared`, `files` →
`prepare`.
"""

from trl_verigate.lean_server.precheck.allowlists import DECLARED_HEADS_COMMAND, heads_difference
from trl_verigate.lean_server.precheck.files import TrustedHeader
from trl_verigate.lean_server.precheck.layout import split_tactics
from trl_verigate.lean_server.precheck.policy import Policy, policy, policy_for
from trl_verigate.lean_server.precheck.prepare import prepare
from trl_verigate.lean_server.precheck.prepared import DECLARATIONS, Prepared, declared_name
from trl_verigate.lean_server.precheck.tokens import PrecheckError, name_components, tokenize

# What the layers above use: `prepare` and its `Prepared`, the header a file is held to, and the one tokenizer (the
# recheck reads declarations with it, the verdict matches names with it); the doctor compares the allow-list with
# the tactics a Lean environment declares.
__all__ = [
    "DECLARATIONS",
    "DECLARED_HEADS_COMMAND",
    "Policy",
    "PrecheckError",
    "Prepared",
    "TrustedHeader",
    "declared_name",
    "heads_difference",
    "name_components",
    "policy",
    "policy_for",
    "prepare",
    "split_tactics",
    "tokenize",
]
