"""Honest proofs pass: tests/data/coq_honest.jsonl holds proofs in the shapes an adversarial review saw refused
(module-qualified tactics, axioms whose type Print Assumptions prints on the next line, CRLF, `now_show`,
`Proof .`, names starting with a non-ASCII letter) and Coq standard-library lemmas re-proved with their own proofs
from theories/. Plain `coqc` says each row is a proof; `CoqServer.verify` must pass every one, while the
adversarial rows and the attacks on what these rows need stay stopped."""

import concurrent.futures
import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.launch import TESTS_DIR
from trl_verigate.coq import CoqProofRequest
from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.precheck import statement_name
from trl_verigate.coq.server import CoqServer

from .helpers import STATEMENT

pytestmark = pytest.mark.timeout(600)
ROWS = [json.loads(line) for line in (TESTS_DIR / "data" / "coq_honest.jsonl").open(encoding="utf-8")]
ADVERSARIAL = [json.loads(line) for line in (TESTS_DIR / "data" / "coq_adversarial.jsonl").open()]
WHITELIST = tuple(sorted({axiom for row in ROWS for axiom in row["axioms"]}))
EXTRA_TACTICS = tuple(sorted({tactic for row in ROWS for tactic in row["extra_tactics"]}))
# The relaxations these rows need, turned against the verifier: each must come back not passed.
ATTACKS = {
    "qualified_admitted": "intros n. Admitted.lia.",
    "qualified_abort": "Abort.lia. Theorem t : True. exact I.",
    "qualified_admit": "intros n. Foo.admit.",
    "qualified_give_up": "intros n. Z.give_up.",
    "qualified_vernacular_at_the_end": "intros n. Axiom.lia : False.",
    "proof_with_a_space_mid_proof": "intros n. Proof . lia.",
    "qed_with_a_space_mid_proof": "intros n. lia. Qed . Theorem u : True. exact I.",
    "crlf_around_a_vernacular": "intros n.\r\nAdmitted.\r\n",
    "lone_carriage_return_splitting_a_sentence": "intros n.\rAdmitted.",
    "non_ascii_vernacular_lookalike": "intros n. Аdmitted.",  # a Cyrillic А: an unknown tactic at best
}


def test_there_are_at_least_forty_rows_with_unique_names():
    assert len(ROWS) >= 40 and len({row["name"] for row in ROWS}) == len(ROWS)


def compile_alone(row: dict) -> subprocess.CompletedProcess:
    name = statement_name(row["statement"])
    closed = re.search(r"(Qed|Defined)\s*\.\s*$", row["proof"]) is not None
    proof = row["proof"] if closed else row["proof"] + "\nQed."
    source = "\n".join([row["header"], row["statement"], proof, f"Print Assumptions {name}.", ""])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "Row.v"
        path.write_bytes(source.encode("utf-8"))
        return subprocess.run(["coqc", "-q", str(path)], capture_output=True, text=True, cwd=scratch, timeout=300)


@pytest.mark.slow
def test_plain_coqc_compiles_every_row_with_only_its_declared_axioms():
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(compile_alone, ROWS))
    for row, run in zip(ROWS, runs, strict=True):
        assert run.returncode == 0, (row["name"], run.stderr[-500:])
        if not row["axioms"]:
            assert "Closed under the global context" in run.stdout, (row["name"], run.stdout)
            continue
        # Print Assumptions starts each axiom at column 0, its name first (the type follows or is indented below).
        printed = {line.split()[0].rsplit(".", 1)[-1] for line in run.stdout.splitlines()[1:] if line[:1].strip()}
        assert printed == set(row["axioms"]), (row["name"], run.stdout)


@pytest.fixture(scope="module")
def honest_server():
    config = CoqServerConfig(
        workers=2, spare_workers=0, timeout=60.0, axiom_whitelist=WHITELIST, extra_tactics=EXTRA_TACTICS
    )
    with CoqServer(config) as server:
        yield server


@pytest.mark.slow
def test_every_honest_row_passes_and_is_rechecked(honest_server):
    # Grouped by header, as a dataset's batches are: a worker reloads only when the header changes.
    rows = sorted(ROWS, key=lambda row: row["header"])
    results = honest_server.verify([CoqProofRequest(r["statement"], r["proof"], r["header"]) for r in rows])
    failures = [(r["name"], res.status, res.reason) for r, res in zip(rows, results, strict=True) if not res.passed]
    assert failures == []
    for row, result in zip(rows, results, strict=True):
        assert result.rechecked, row["name"]
        assert all(any(axiom.endswith(w) for w in row["axioms"]) for axiom in result.axioms), (row, result.axioms)


@pytest.mark.slow
def test_the_adversarial_rows_and_the_attacks_on_these_relaxations_stay_stopped(honest_server):
    requests = [CoqProofRequest(row["statement"], row["proof"]) for row in ADVERSARIAL]
    requests += [CoqProofRequest(STATEMENT, proof) for proof in ATTACKS.values()]
    names = [row["mechanism"] for row in ADVERSARIAL] + list(ATTACKS)
    results = honest_server.verify(requests)
    assert [name for name, result in zip(names, results, strict=True) if result.passed] == []
