"""Fixtures of the Coq tests: they run the real coqidetop, coqc and coqchk (no stand-ins for what Coq answers).

Without Coq they skip, naming the install command; under CI they fail instead, so a CI run cannot go green
without them.
"""

import asyncio
import shutil

import pytest
from conftest import ci_is_set

from trl_verigate.coq.config import INSTALL_COMMAND, CoqServerConfig
from trl_verigate.coq.precheck import CoqJob

STATEMENT = "Theorem t : forall n : nat, n + 0 = n."


def missing_coq_programs() -> list[str]:
    idetop = shutil.which("coqidetop.opt") or shutil.which("coqidetop")
    return [
        name
        for name, found in (("coqidetop", idetop), ("coqc", shutil.which("coqc")), ("coqchk", shutil.which("coqchk")))
        if not found
    ]


@pytest.fixture(autouse=True, scope="session")
def coq_installed():
    missing = missing_coq_programs()
    if missing:
        message = f"Coq is not installed ({', '.join(missing)} missing): `{INSTALL_COMMAND}`"
        if ci_is_set():
            pytest.fail(f"{message}. CI is set, so the Coq tests fail instead of skipping.", pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def coq_server():
    """One long-lived server for the session: two workers, a 5 s timeout, the coqchk recheck on."""
    from trl_verigate.coq.server import CoqServer

    with CoqServer(CoqServerConfig(workers=2, timeout=5.0, spare_repls=0)) as server:
        yield server


def job(proof_sentences, statement=STATEMENT, name="t", print_assumptions=True) -> CoqJob:
    """A job as the precheck would build it, for tests that run what the precheck refuses."""
    return CoqJob(statement, name, tuple(proof_sentences), print_assumptions)


def run(coroutine):
    return asyncio.get_event_loop_policy().new_event_loop().run_until_complete(coroutine)
