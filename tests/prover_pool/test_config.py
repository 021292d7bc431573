"""`ProverPoolConfig`: the pool's settings, declared and checked once for both provers."""

import dataclasses

import pytest

from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.lean_server import LeanServerConfig
from trl_verigate.prover_pool.config import SANDBOXES, ProverPoolConfig

POOL_FIELDS = {
    "project_dir",
    "workers",
    "timeout",
    "memory_limit_mb",
    "max_uses_per_worker",
    "spare_workers",
    "startup_timeout",
    "sandbox",
    "max_request_bytes",
    "max_batch_bytes",
    "max_workers_per_owner",
}
PROVER_CONFIGS = [
    pytest.param(lambda **kw: LeanServerConfig(repl_command=["repl"], **kw), id="lean"),
    pytest.param(lambda **kw: CoqServerConfig(coqidetop_command=["coqidetop"], **kw), id="coq"),
]


def test_the_pool_fields_are_the_bases_and_each_prover_adds_only_its_own():
    assert {f.name for f in dataclasses.fields(ProverPoolConfig)} == POOL_FIELDS
    lean_own = set(LeanServerConfig.__annotations__)
    coq_own = set(CoqServerConfig.__annotations__)
    assert issubclass(LeanServerConfig, ProverPoolConfig) and issubclass(CoqServerConfig, ProverPoolConfig)
    assert not lean_own & POOL_FIELDS
    # Coq changes only the defaults of four pool fields (its processes start in seconds and need less memory).
    assert coq_own & POOL_FIELDS == {"timeout", "memory_limit_mb", "max_uses_per_worker", "startup_timeout"}
    assert (CoqServerConfig().timeout, CoqServerConfig().startup_timeout) == (10.0, 60.0)
    assert SANDBOXES == ("auto", "bwrap", "none")


@pytest.mark.parametrize("make", PROVER_CONFIGS)
@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("workers", 0, "workers must be >= 1"),
        ("max_uses_per_worker", 0, "max_uses_per_worker must be >= 1"),
        ("spare_workers", -1, "spare_workers must be an int >= 0"),
        ("timeout", float("nan"), "timeout must be a finite number > 0"),
        ("startup_timeout", 0, "startup_timeout must be a finite number > 0"),
        ("sandbox", "docker", "sandbox must be one of ('auto', 'bwrap', 'none')"),
        ("memory_limit_mb", 0.5, "memory_limit_mb must be a whole number"),
        ("max_batch_bytes", True, "max_batch_bytes must be a whole number"),
        ("max_workers_per_owner", 0, "max_workers_per_owner must be >= 1"),
    ],
)
def test_each_pool_field_is_checked_once_and_named_by_the_provers_config(make, field, value, expected):
    owner = "LeanServerConfig" if make(workers=1).__class__ is LeanServerConfig else "CoqServerConfig"
    with pytest.raises((TypeError, ValueError)) as error:
        make(**{field: value})
    assert str(error.value).startswith(f"{owner}.{expected}"), str(error.value)


@pytest.mark.parametrize("make", PROVER_CONFIGS)
@pytest.mark.parametrize("old_name", ["max_uses_per_repl", "spare_repls"])
def test_the_old_lean_named_fields_are_gone(make, old_name):
    with pytest.raises(TypeError, match=old_name):
        make(**{old_name: 1})
