"""`trl-verigate coq-doctor`: check the Coq setup step by step (coqidetop, coqc, coqchk, a header load, an honest
proof that must pass, a forged one that must fail) and print how to fix each failing step."""

from __future__ import annotations

import argparse
import time

from trl_verigate.coq.config import INSTALL_COMMAND, CoqProofRequest, CoqServerConfig
from trl_verigate.prover_pool.checks import Check, tool_version

DOCTOR_STATEMENT = "Theorem doctor_check : forall n : nat, n + 0 = n."
HONEST_PROOF = "Proof.\n  induction n as [|n IH].\n  - reflexivity.\n  - simpl. rewrite IH. reflexivity.\nQed."
# Refused by the precheck, and by Print Assumptions and coqchk if it ever got through: a pass here is unsound.
FORGED_PROOF = "Proof. Admitted."
INSTALL_FIX = f"install Coq 8.16: `{INSTALL_COMMAND}`"


def run_doctor(config: CoqServerConfig) -> list[Check]:
    """Every check of `trl-verigate coq-doctor`, in order; never raises for a broken setup."""
    checks = [
        tool_version(config.coqidetop_command[0], INSTALL_FIX + " (or set CoqServerConfig.coqidetop_command)"),
        tool_version(config.coqc_command[0], INSTALL_FIX + " (or set CoqServerConfig.coqc_command)"),
        tool_version(config.coqchk_command[0], INSTALL_FIX + " (or set CoqServerConfig.coqchk_command)"),
    ]
    if any(check.ok is False for check in checks):
        return checks + [Check("verification", None, "skipped: a Coq program is missing")]
    from trl_verigate.coq.server import CoqServer

    started = time.monotonic()
    try:
        with CoqServer(config) as server:
            honest, forged = server.verify(
                [CoqProofRequest(DOCTOR_STATEMENT, HONEST_PROOF), CoqProofRequest(DOCTOR_STATEMENT, FORGED_PROOF)]
            )
            loaded = f"header {config.header!r} loaded in {time.monotonic() - started:.1f} s"
    except Exception as error:  # noqa: BLE001 - the doctor reports every failure as a check
        return checks + [Check("header", False, f"the server failed: {error}", "check the header and the commands")]
    # "error" on the honest proof is a setup failure: a worker that could not start or load the header.
    header_ok = honest.status != "error"
    checks.append(Check("header", header_ok, loaded if header_ok else str(honest.reason), "fix CoqServerConfig.header"))
    recheck = " and confirmed by coqchk" if honest.rechecked else ""
    checks.append(
        Check(
            "honest proof",
            honest.passed,
            f"passed{recheck}" if honest.passed else f"{honest.status}: {honest.reason}",
            "run `trl-verigate coq-doctor` with --sandbox none to see whether the sandbox is the cause",
        )
    )
    checks.append(
        Check(
            "forged proof",
            not forged.passed,
            f"refused ({forged.status}: {forged.reason})" if not forged.passed else "PASSED: the verifier is unsound",
            "do not train against this setup; report the proof",
        )
    )
    return checks


def add_parser(subparsers) -> None:
    summary = "check the Coq setup step by step and print how to fix it"
    parser = subparsers.add_parser("coq-doctor", help=summary, description=summary[0].upper() + summary[1:] + ".")
    defaults = CoqServerConfig(workers=1)
    parser.add_argument("--header", default=defaults.header, help=f"the trusted header (default: {defaults.header!r})")
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "none"),
        default=defaults.sandbox,
        help="run coqidetop in bubblewrap: auto (when it works here), bwrap (required) or none "
        f"(default: {defaults.sandbox})",
    )
    parser.add_argument(
        "--recheck",
        choices=("coqchk", "none"),
        default=defaults.recheck,
        help=f"confirm each pass with coqchk, outside coqidetop, or not (default: {defaults.recheck})",
    )
    parser.set_defaults(func=_run_coq_doctor)


def _run_coq_doctor(args: argparse.Namespace) -> int:
    try:
        config = CoqServerConfig(
            workers=1, spare_workers=0, header=args.header, sandbox=args.sandbox, recheck=args.recheck
        )
    except ValueError as error:
        print(f"✗ config: {error}")
        return 1
    checks = run_doctor(config)
    for check in checks:
        print(check.render())
    failed = [check.name for check in checks if check.ok is False]
    print(f"\n{'all checks passed' if not failed else 'failed: ' + ', '.join(failed)}")
    return 1 if failed else 0
