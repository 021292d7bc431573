"""lean_server with and without a spare REPL (LeanServerConfig.spare_workers), side by side on the peers bench's stand-in.

At a batch long enough for REPLs to reach `max_uses_per_worker`, each retirement without a spare leaves its slot idle
for a header load; with one, the replacement has loaded ahead. Rounds alternate the order of the two, so machine load
falls on both alike. Usage:

    python bench/lean_peers_spares.py --batch 1920 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from lean_peers import own_answers, proof_jobs, run
from lean_peers_drivers import LeanServerDriver, StandIn, kill_stand_ins

from trl_verigate.lean_server.core.types import MINIF2F_HEADER


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the stand-in takes per proof (L)")
    parser.add_argument("--import-latency", type=float, default=0.5, help="extra seconds per header load")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1920)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    flags = ["--latency", str(args.latency), "--housekeeping-latency", "0.001"]
    flags += ["--import-latency", str(args.import_latency), "--echo-names"]
    with tempfile.TemporaryDirectory(prefix="lean-spares-") as scratch:
        stand_in = StandIn(Path(scratch), flags)
        drivers = {
            spares: LeanServerDriver(
                stand_in, args.workers, MINIF2F_HEADER, label=f"spare_workers={spares}", spare_workers=spares
            )
            for spares in (0, 1)
        }
        rates: dict[int, list[float]] = {spares: [] for spares in drivers}
        retired: dict[int, list[int]] = {spares: [] for spares in drivers}
        try:
            for spares, driver in drivers.items():  # warm-up: every REPL started and its header loaded
                run(driver, proof_jobs(2 * args.workers, f"warm{spares}"), 3)
            for round_index in range(args.rounds):
                for spares in (0, 1) if round_index % 2 == 0 else (1, 0):
                    driver = drivers[spares]
                    before = driver.recycled()
                    jobs = proof_jobs(args.batch, f"r{round_index}s{spares}")
                    outcomes, wall = run(driver, jobs, 3)
                    if own_answers(jobs, outcomes)["correct"] != len(jobs):
                        raise SystemExit(f"{driver.name}: not every proof got its own pass: {outcomes[0]}")
                    rates[spares].append(args.batch / wall)
                    retired[spares].append(driver.recycled() - before)
                    print(f"round {round_index}: {driver.name}: {rates[spares][-1]:.1f} proofs/s", flush=True)
        finally:
            for driver in drivers.values():
                driver.close()
            kill_stand_ins(scratch)
    for spares in drivers:
        print(
            f"spare_workers={spares}: proofs/s {' / '.join(f'{r:.1f}' for r in rates[spares])} "
            f"(median {statistics.median(rates[spares]):.1f}; ideal {args.workers / args.latency:.0f}), "
            f"REPLs retired {retired[spares]}"
        )
    print(f"ratio spare 1 / 0: {statistics.median(rates[1]) / statistics.median(rates[0]):.3f}x")


if __name__ == "__main__":
    main()
