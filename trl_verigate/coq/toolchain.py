"""What every Coq program started here shares: the toolchain's environment variables and the setup messages.
`coq.process` (coqidetop) and `coq.recheck` (coqc, coqchk) run their programs as these workers."""

from __future__ import annotations

import os
from pathlib import Path

from trl_verigate.coq.config import INSTALL_COMMAND
from trl_verigate.prover_pool.worker import WorkerProcess

OCAMLFIND_CONF = "/etc/ocamlfind.conf"


class CoqToolProcess(WorkerProcess):
    """A Coq program under the pool's isolation (see `prover_pool.worker`)."""

    ENV_PREFIXES = ("COQ", "OCAML")
    SETTINGS_NAME = "CoqServerConfig"
    NOT_FOUND_FIX = (
        f"install Coq 8.16 (`{INSTALL_COMMAND}`) or set the CoqServerConfig command that names it; "
        "`trl-verigate coq-doctor` checks the setup"
    )

    def scratch_env(self, scratch: Path) -> dict[str, str]:
        env = super().scratch_env(scratch)
        # Coq starts findlib, which needs its config; naming it here also binds it into the sandbox, whose /etc
        # holds only the loader's files.
        if "OCAMLFIND_CONF" not in env and os.path.isfile(OCAMLFIND_CONF):
            env["OCAMLFIND_CONF"] = OCAMLFIND_CONF
        return env
