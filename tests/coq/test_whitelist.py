"""A qualified `axiom_whitelist` entry holds only for the axiom of that full name, in coqidetop's judge and in the
coqchk recheck: `Print Assumptions` prints the shortest unambiguous name, so `Require Import Floats` prints
`Coq.Floats.FloatAxioms.add_spec` as bare `add_spec`, which a match by spelling takes for Uint63's `add_spec`."""

import pytest

from trl_verigate.coq import CoqProofRequest, CoqServer, CoqServerConfig

pytestmark = pytest.mark.timeout(300)
HEADER = "Require Import Arith Lia Floats FunctionalExtensionality."
FLOAT_STATEMENT = "Theorem t : forall x y : float, Prim2SF (x + y)%float = SF64add (Prim2SF x) (Prim2SF y)."
FLOAT_ADD = CoqProofRequest(FLOAT_STATEMENT, "intros; apply add_spec.")
FLOAT_ADD_QUALIFIED = CoqProofRequest(FLOAT_STATEMENT, "intros x y. apply Coq.Floats.FloatAxioms.add_spec.")
FUNEXT = CoqProofRequest(
    "Theorem t : forall f g : nat -> nat, (forall n, f n = g n) -> f = g.",
    "intros f g H. apply functional_extensionality. exact H.",
)
UINT63_ADD_SPEC = "Coq.Numbers.Cyclic.Int63.Uint63.add_spec"
FLOAT_ADD_SPEC = "Coq.Floats.FloatAxioms.add_spec"
FUNEXT_DEP = "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep"


@pytest.fixture(scope="module", params=["coqidetop", "recheck"])
def verify(request):
    """verify(requests, whitelist) on one server per place the whitelist is applied: coqidetop's Print Assumptions
    (without the recheck), or the recheck's alone (coqidetop skips Print Assumptions)."""
    where = {"print_assumptions": "always", "recheck": "none"}
    if request.param == "recheck":
        where = {"print_assumptions": "never", "recheck": "coqchk"}
    servers = {}

    def run(requests, whitelist):
        if whitelist not in servers:
            config = CoqServerConfig(workers=1, spare_workers=0, header=HEADER, axiom_whitelist=whitelist, **where)
            servers[whitelist] = CoqServer(config).start()
        return servers[whitelist].verify(requests)

    yield run
    for server in servers.values():
        server.close()


def test_a_qualified_entry_does_not_admit_another_axiom_of_the_same_short_name(verify):
    results = verify([FLOAT_ADD, FLOAT_ADD_QUALIFIED], ("float", UINT63_ADD_SPEC))
    assert [result.status for result in results] == ["failed", "failed"], [result.reason for result in results]
    assert all("add_spec" in result.reason for result in results)


def test_a_qualified_entry_admits_its_own_axiom_however_it_is_printed(verify):
    results = verify([FLOAT_ADD, FLOAT_ADD_QUALIFIED, FUNEXT], ("float", FLOAT_ADD_SPEC, FUNEXT_DEP))
    assert [result.status for result in results] == ["passed"] * 3, [result.reason for result in results]


def test_a_plain_entry_still_matches_by_the_short_name(verify):
    results = verify([FLOAT_ADD, FUNEXT], ("float", "add_spec", "functional_extensionality_dep"))
    assert [result.status for result in results] == ["passed"] * 2, [result.reason for result in results]
