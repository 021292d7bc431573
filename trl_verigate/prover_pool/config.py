"""`ProverPoolConfig`: the settings of a pool of prover workers, which `LeanServerConfig` and `CoqServerConfig` extend
with their prover's own; each is checked when the config is made, with one line naming `<Config>.<field>`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from trl_verigate.prover_pool import settings

# "bwrap": every worker in a bubblewrap sandbox (fails to start without it); "auto": bwrap when it works here,
# otherwise none, said once in the log; "none": only the session, RLIMIT_AS and scratch HOME.
Sandbox = Literal["auto", "bwrap", "none"]
SANDBOXES: tuple[str, ...] = get_args(Sandbox)


@dataclass
class ProverPoolConfig:
    """How the pool starts and polices its worker processes; a prover's config adds how to run its worker.

    `project_dir` is the workers' cwd. Each request runs within `timeout` seconds on a worker limited to
    `memory_limit_mb` (None: no limit); a worker retires after `max_uses_per_worker` requests, and up to
    `spare_workers` replacements may start (and load their header, within `startup_timeout`) before the worker they
    replace retires, so a retirement costs no idle time (0: each replacement starts only when its predecessor
    retires). `max_request_bytes` bounds one request in UTF-8 bytes, `max_batch_bytes` one verify() call.
    `max_workers_per_owner` is the per-owner quota of a shared pool (see `pool` for the eviction rule).
    """

    project_dir: str | None = field(default=None, metadata={"help": "The workers' working directory."})
    workers: int = field(
        default_factory=settings.default_workers, metadata={"help": "Worker processes (default: cores - 1)."}
    )
    timeout: float = field(default=15.0, metadata={"help": "Seconds one request may run on a worker."})
    memory_limit_mb: int | None = field(
        default=8192, metadata={"help": "Address-space limit per worker, MiB (None: no limit)."}
    )
    max_uses_per_worker: int = field(default=200, metadata={"help": "Requests a worker serves before it retires."})
    spare_workers: int = field(
        default=1,
        metadata={
            "help": "Replacements that may start (and load their header) before the worker they replace retires, "
            "so a retirement costs no idle time (0: each starts only when its predecessor retires)."
        },
    )
    startup_timeout: float = field(
        default=300.0, metadata={"help": "Seconds a new worker may take to start and load its header."}
    )
    sandbox: Sandbox = field(
        default="auto",
        metadata={"help": "'bwrap': every worker in bubblewrap; 'auto': bwrap when it works here, else none; 'none'."},
    )
    max_request_bytes: int = field(default=64 << 10, metadata={"help": "Largest request, in UTF-8 bytes."})
    max_batch_bytes: int = field(default=64 << 20, metadata={"help": "Largest verify() call, in UTF-8 bytes."})
    # Within the quota no other owner evicts an owner's workers (`pool.WorkerPool`).
    max_workers_per_owner: int | None = field(
        default=None, metadata={"help": "The most workers one owner identity holds (None: `workers`)."}
    )

    @property
    def owner(self) -> str:
        """How messages name this config's fields: `<owner>.<field>`."""
        return type(self).__name__

    def __post_init__(self):
        owner = self.owner
        self.project_dir = settings.check_project_dir(owner, self.project_dir)
        settings.check_choice(owner, "sandbox", self.sandbox, SANDBOXES)
        for name in ("timeout", "startup_timeout"):
            settings.check_positive_number(owner, name, getattr(self, name), "seconds")
        for name, unit in (
            ("workers", "worker processes"),
            ("max_uses_per_worker", "requests"),
            ("max_request_bytes", "bytes"),
            ("max_batch_bytes", "bytes"),
        ):
            settings.check_positive_int(owner, name, getattr(self, name), unit)
        settings.check_spare_workers(owner, self.spare_workers)
        if self.max_workers_per_owner is not None:
            settings.check_positive_int(owner, "max_workers_per_owner", self.max_workers_per_owner, "worker processes")
        if self.memory_limit_mb is not None:
            settings.check_positive_int(owner, "memory_limit_mb", self.memory_limit_mb, "MiB (or None for no limit)")
