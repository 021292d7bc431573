"""Fixtures of the Coq tests: they run the real coqidetop, coqc and coqchk (no stand-ins for what Coq answers).

Without Coq they skip, naming the install command; under CI they fail instead, so a CI run cannot go green
without them.
"""

import pytest

from trl_verigate.coq.config import CoqServerConfig


@pytest.fixture(autouse=True, scope="session")
def coq_installed(coq_required):
    """Every test here runs the real Coq."""


@pytest.fixture(scope="session")
def coq_server():
    """One long-lived server for the session: two workers, a 5 s timeout, the coqchk recheck on."""
    from trl_verigate.coq.server import CoqServer

    with CoqServer(CoqServerConfig(workers=2, timeout=5.0, spare_workers=0)) as server:
        yield server
