"""lean_server against its peers, kimina-lean-server and LeanInteract, on the same stand-in REPL, in one run.

All of them run the same stand-in (tests/fake_repl.py) with the same worker count W and the same requests. The
stand-in charges L to each proof command only; housekeeping (kimina's `#eval 1` liveness check, a header of
imports and options) costs H (default 1 ms, as the real REPL answers it) and each import adds I (a header load).
Sections, printed as one table (and a PNG bar chart):

1. throughput: proofs/s, overhead per proof above L (wall * W / n - L), time to first result and p50/p99 of the
   time until the caller holds each result, at batch sizes 64 and 3,840 (the small batch is repeated, each round
   in a rotated order, and the median kept, so machine load falls on every peer alike);
2. header reuse: proofs under two headers, interleaved; header loads = commands with an `import` the REPLs ran;
3. faults in one stream (a hanging proof, a crashing REPL, garbage output, a proof over the memory limit), then a
   REPL killed while idle: each fault's own status, and whether every other request got its own answer (the
   stand-in echoes each theorem's name, so a crossed answer shows);
4. verdicts: the adversarial corpus (tests/data/adversarial_proofs.jsonl) plus three forgeries written from inside
   the REPL, through each peer's own pass rule; lean_server also with the recheck tier on (tests/fake_checker.py);
5. scale-out: two `trl-verigate lean-server` instances behind one LeanClient against one.

Install the peers first: `pip install -r bench/requirements-peers.txt` (make bench-peers does). Always exits 0
after printing; the targets are printed as PASS/FAIL.

    python bench/lean_peers.py --latency 0.05 --workers 4 --batches 64,3840
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

from lean_peers_drivers import (
    CHUNK,
    REPO,
    Driver,
    Job,
    KiminaDriver,
    LeanInteractDriver,
    LeanServerDriver,
    LeanServerHttpDriver,
    StandIn,
    kill_stand_ins,
    pids_running,
    split_imports,
)

from trl_verigate.lean_server import LeanClient, ProofRequest
from trl_verigate.lean_server.core.types import MINIF2F_HEADER

sys.path.insert(0, str(REPO))  # `tests` is a package
from tests.adversarial import fake_repl_script, is_file_row, load_corpus, request_of  # noqa: E402
from tests.fake_repl import IMPORT_LINE, read_log, write_script  # noqa: E402

OTHER_HEADER = "import Mathlib\nset_option maxHeartbeats 400000"
MEMORY_MB = 8192
FAULTS = ("hang", "crash", "garbage", "oom")
# Forgeries made from inside the REPL (see tests/fake_repl.py): a false statement whose real answer is an error.
REPL_FORGERIES = ("forge", "forge-env", "forge-exit")
AXIOMS_ANSWER = re.compile(r"depends on axioms|does not depend on any axioms")
PEERS = ("lean_server", "lean_server HTTP", "kimina-lean-server", "LeanInteract")
COLUMNS = (*PEERS, "lean_server + recheck")


def proof_job(name: str, i: int, header: str = MINIF2F_HEADER) -> Job:
    statement, proof = f"theorem {name} : {i} + 0 = {i} := by", "  simp"
    return Job(name, ProofRequest(statement, proof, header), f"{header}\n\n{statement}\n{proof}")


def proof_jobs(n: int, tag: str, header: str = MINIF2F_HEADER) -> list[Job]:
    return [proof_job(f"bench_{tag}_{i}", i, header) for i in range(n)]


def run(driver: Driver, jobs: list[Job], timeout: float, **kwargs) -> tuple[list, float]:
    started = time.perf_counter()
    outcomes = asyncio.run(driver.run(jobs, timeout, **kwargs))
    return outcomes, time.perf_counter() - started


def own_answers(jobs: list[Job], outcomes) -> dict[str, int]:
    """Counts of answers that are the request's own pass, another request's (crossed), or none (lost)."""
    names = {job.name for job in jobs}
    counts = {"correct": 0, "crossed": 0, "lost": 0}
    for job, outcome in zip(jobs, outcomes, strict=True):
        if any(echo != job.name and echo in names for echo in outcome.echoes):
            counts["crossed"] += 1
        elif outcome.passed and outcome.echoes == [job.name]:
            counts["correct"] += 1
        else:
            counts["lost"] += 1
    return counts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------- sections


def throughput(drivers: list[Driver], args, results: dict) -> None:
    for driver in drivers:  # warm-up: every REPL started and its header loaded
        run(driver, proof_jobs(2 * args.workers, "warm"), args.timeout)
    for n in args.batches:
        rounds = args.rounds if n <= 256 else 1
        measured: dict[str, list[dict]] = {driver.name: [] for driver in drivers}
        for round_index in range(rounds):
            order = drivers[round_index % len(drivers) :] + drivers[: round_index % len(drivers)]
            for driver in order:
                jobs = proof_jobs(n, f"n{n}r{round_index}")
                recycled = driver.recycled()
                outcomes, wall = run(driver, jobs, args.timeout)
                done = [outcome.done_s for outcome in outcomes]
                measured[driver.name].append(
                    {
                        "recycled": None if recycled is None else driver.recycled() - recycled,
                        "proofs_per_s": n / wall,
                        "overhead_ms": (wall * args.workers / n - args.latency) * 1000,
                        "first_result_s": min(done),
                        "p50_s": percentile(done, 0.5),
                        "p99_s": percentile(done, 0.99),
                        "wrong": n - own_answers(jobs, outcomes)["correct"],
                    }
                )
        for name, rows in measured.items():
            rows.sort(key=lambda row: row["proofs_per_s"])
            results.setdefault(name, {})[f"batch_{n}"] = rows[len(rows) // 2]


def header_reuse(make_driver, names: list[str], scratch: Path, args, results: dict) -> None:
    n = args.reuse_proofs
    jobs = []
    for i in range(n):
        header = MINIF2F_HEADER if i % 2 == 0 else OTHER_HEADER
        jobs.extend(proof_jobs(1, f"reuse{i}", header))
    for name in names:
        folder = scratch / f"reuse-{name.replace(' ', '-')}"
        log = folder / "repl.log"
        driver = make_driver(name, StandIn(folder, [*args.stand_in, "--log", str(log)]))
        try:
            outcomes, wall = run(driver, jobs, args.timeout)
        finally:
            driver.close()
        loads = sum(bool(IMPORT_LINE.search(row["request"].get("cmd", ""))) for row in read_log(log))
        results.setdefault(name, {})["header_reuse"] = {
            "proofs": n,
            "header_loads": loads,
            "proofs_per_s": n / wall,
            "wrong": n - own_answers(jobs, outcomes)["correct"],
        }


def faults(make_driver, names: list[str], scratch: Path, args, results: dict) -> None:
    script = [{"match": f"fault_{kind}", "behaviour": kind} for kind in FAULTS]
    clean = proof_jobs(args.fault_proofs, "clean")
    stream = proof_jobs(args.fault_proofs, "other")
    spacing = len(stream) // len(FAULTS) + 1
    for position, kind in enumerate(FAULTS):
        stream.insert(position * spacing + spacing // 2, proof_job(f"fault_{kind}", position))
    after_kill = proof_jobs(args.fault_proofs, "afterkill")
    for name in names:
        folder = scratch / f"faults-{name.replace(' ', '-')}"
        folder.mkdir(parents=True, exist_ok=True)
        driver = make_driver(
            name, StandIn(folder, [*args.stand_in, "--script", write_script(folder / "s.jsonl", script)])
        )
        try:
            _, clean_wall = run(driver, clean, args.timeout)
            outcomes, wall = run(driver, stream, args.timeout)
            row = {kind: outcome.status for job, outcome in zip(stream, outcomes, strict=True)
                   for kind in FAULTS if job.name == f"fault_{kind}"}  # fmt: skip
            others = [
                (job, outcome) for job, outcome in zip(stream, outcomes, strict=True) if job.name.startswith("bench")
            ]
            row.update(own_answers([job for job, _ in others], [outcome for _, outcome in others]))
            row["added_wall_s"] = wall - clean_wall
            # Then a REPL dies while idle (the OOM killer, a node drain): does the next batch lose answers to it?
            time.sleep(args.timeout)  # replacements for the faults' REPLs are up by now
            victims = pids_running(str(folder))
            if not victims:
                raise SystemExit(f"bench/lean_peers.py: no REPL of {name} found to kill")
            os.kill(min(victims), signal.SIGKILL)
            kill_outcomes, _ = run(driver, after_kill, args.timeout)
            kill_counts = own_answers(after_kill, kill_outcomes)
            row["idle_kill_lost"] = kill_counts["lost"] + kill_counts["crossed"]
        finally:
            driver.close()
            kill_stand_ins(str(folder))
        results.setdefault(name, {})["faults"] = row


def verdict_jobs(corpus_limit: int | None = None) -> tuple[list[Job], list[dict], set[str]]:
    """Jobs for the corpus rows (the first `corpus_limit`) and the REPL forgeries, the stand-in script, and the names
    with Lean's own answer."""
    rows = load_corpus()[:corpus_limit]
    jobs, peer_script, recorded = [], [], set()
    for row in rows:
        request = request_of(row)
        if is_file_row(row):
            code = row["file"]
        else:
            code = f"{MINIF2F_HEADER}\n{row['statement']}\n{row['proof']}"
        jobs.append(Job(row["id"], request, code))
        body = split_imports(code)[1].strip()
        if "lean_response" in row and body:
            recorded.add(row["id"])
            if row["behaviour"]:
                peer_script.append({"match": body, "behaviour": row["behaviour"]})
            else:
                response = dict(row["lean_response"])
                kept = [m for m in response.get("messages", []) if not AXIOMS_ANSWER.search(m.get("data", ""))]
                response["messages"] = kept
                peer_script.append({"match": body, "response": response})
    forgery_script = []
    for kind in REPL_FORGERIES:
        name = "adv_repl_" + kind.replace("-", "_")
        statement, proof = f"theorem {name} : 2 + 2 = 5 := by", "  simp"
        jobs.append(Job(name, ProofRequest(statement, proof), f"{MINIF2F_HEADER}\n{statement}\n{proof}"))
        unsolved = {"severity": "error", "pos": {"line": 1, "column": 0}, "endPos": None, "data": "unsolved goals"}
        forgery_script.append({"match": name, "behaviour": kind, "response": {"env": 0, "messages": [unsolved]}})
        recorded.add(name)
    # lean_server's rows match its exact command (with `#print axioms`), which no peer sends; the peers' rows match
    # the code after the imports, longest first so no row answers another's command.
    peer_script.sort(key=lambda script_row: -len(script_row["match"]))
    script = forgery_script + fake_repl_script(rows, MINIF2F_HEADER) + peer_script
    return jobs, script, recorded


def verdicts(make_driver, names: list[str], scratch: Path, args, results: dict) -> None:
    jobs, script, recorded = verdict_jobs(args.corpus_limit)
    for name in names:
        folder = scratch / f"verdicts-{name.replace(' ', '-')}"
        folder.mkdir(parents=True, exist_ok=True)
        driver = make_driver(name, StandIn(folder, ["--latency", str(args.latency), "--script",
                                                   write_script(folder / "script.jsonl", script)]))  # fmt: skip
        driver.chunk = 1 if isinstance(driver, KiminaDriver) else CHUNK  # one attack's 500 must not hide another
        try:
            outcomes, _ = run(driver, jobs, args.timeout)
        finally:
            driver.close()
            kill_stand_ins(str(folder))
        passed = [job.name for job, outcome in zip(jobs, outcomes, strict=True) if outcome.passed]
        results.setdefault(name, {})["verdicts"] = {
            "attacks": len(jobs),
            "passed_recorded": sorted(n for n in passed if n in recorded),
            "passed_stand_in": sorted(n for n in passed if n not in recorded),
        }


def scale_out(stand_in: StandIn, args, results: dict) -> None:
    driver = LeanServerHttpDriver(stand_in, args.workers, MINIF2F_HEADER, instances=2, scratch=stand_in.folder)
    try:
        one, two = LeanClient(urls=driver.urls[:1]), LeanClient(urls=driver.urls)
        run(driver, proof_jobs(4 * args.workers, "scalewarm"), args.timeout, client=two)
        _, one_wall = run(driver, proof_jobs(args.scale_proofs, "scale1"), args.timeout, client=one)
        _, two_wall = run(driver, proof_jobs(args.scale_proofs, "scale2"), args.timeout, client=two)
    finally:
        driver.close()
    n = args.scale_proofs
    results.setdefault("lean_server HTTP", {})["scale_out"] = {
        "proofs": n,
        "one_per_s": n / one_wall,
        "two_per_s": n / two_wall,
        "ratio": one_wall / two_wall,
    }


# ---------------------------------------------------------------- report


def cell(results: dict, name: str, *path: str, fmt: str = "{}") -> str:
    value = results.get(name, {})
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return "-"
        value = value[key]
    return "-" if value is None else fmt.format(value)


def table_rows(results: dict, args) -> list[tuple[str, dict[str, str]]]:
    def row(label: str, *path: str, fmt: str = "{}") -> tuple[str, dict[str, str]]:
        return label, {name: cell(results, name, *path, fmt=fmt) for name in COLUMNS}

    rows = []
    for n in args.batches:
        batch = f"batch_{n}"
        rows += [
            row(f"proofs/s, batch {n} (ideal {args.workers / args.latency:.0f})", batch, "proofs_per_s", fmt="{:.1f}"),
            row(f"overhead ms/proof above L, batch {n}", batch, "overhead_ms", fmt="{:.2f}"),
            row(f"first result s, batch {n}", batch, "first_result_s", fmt="{:.2f}"),
            row(f"p50 / p99 s until held, batch {n}", batch, "p50_s", fmt="{:.2f}"),
            row(f"wrong or lost answers, batch {n}", batch, "wrong"),
            row(f"REPLs retired after max_uses_per_worker, batch {n}", batch, "recycled"),
        ]
        for name in PEERS:  # p50 and p99 in one cell
            if rows[-3][1][name] != "-":
                rows[-3][1][name] += " / " + cell(results, name, batch, "p99_s", fmt="{:.2f}")
    reuse = f"{args.reuse_proofs} proofs, 2 headers"
    rows += [
        row(f"header loads ({reuse}; {args.workers} REPLs)", "header_reuse", "header_loads"),
        row(f"proofs/s ({reuse})", "header_reuse", "proofs_per_s", fmt="{:.1f}"),
        row(f"wrong or lost answers ({reuse})", "header_reuse", "wrong"),
    ]
    rows += [row(f"fault '{kind}': its own status", "faults", kind) for kind in FAULTS]
    rows += [
        row(f"faults: others correct of {args.fault_proofs}", "faults", "correct"),
        row("faults: others crossed / lost", "faults", "crossed"),
        row("faults: added wall s (vs the stream without them)", "faults", "added_wall_s", fmt="{:.2f}"),
        row(f"REPL killed while idle: answers lost of {args.fault_proofs}", "faults", "idle_kill_lost"),
    ]
    for name in PEERS:
        if rows[-3][1][name] != "-":
            rows[-3][1][name] += " / " + cell(results, name, "faults", "lost")
    passed = (
        "attacks passed (Lean's recorded answer)",
        "attacks passed, upper bound (no recorded answer)",
    )
    for label, key in zip(passed, ("passed_recorded", "passed_stand_in"), strict=True):
        counts = {}
        for name in COLUMNS:
            value = results.get(name, {}).get("verdicts", {}).get(key)
            counts[name] = "-" if value is None else str(len(value))
        rows.append((label, counts))
    rows.append(row("scale-out: 2 instances / 1, throughput ratio", "scale_out", "ratio", fmt="{:.2f}x"))
    return rows


def print_table(results: dict, args) -> list[tuple[str, dict[str, str]]]:
    rows = table_rows(results, args)
    names = [name for name in COLUMNS if any(cells[name] != "-" for _, cells in rows)]
    width = max(len(label) for label, _ in rows)
    print(f"{'':<{width}}  " + "  ".join(f"{name:>18}" for name in names))
    for label, cells in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{cells[name]:>18}" for name in names))
    return rows


def targets(results: dict, args) -> list[tuple[str, bool]]:
    """The issue's targets: lean_server's overhead <= and throughput >= the best peer's; no crossed or lost answer
    under faults; no attack passed."""
    peers = ("kimina-lean-server", "LeanInteract")
    checks = []
    for n in args.batches:
        ours = results.get("lean_server", {}).get(f"batch_{n}")
        theirs = [results[p][f"batch_{n}"] for p in peers if f"batch_{n}" in results.get(p, {})]
        if ours and theirs:
            best = max(theirs, key=lambda row: row["proofs_per_s"])
            checks.append((f"batch {n}: throughput >= best peer's", ours["proofs_per_s"] >= best["proofs_per_s"]))
            lowest = min(row["overhead_ms"] for row in theirs)
            checks.append((f"batch {n}: overhead <= best peer's", ours["overhead_ms"] <= lowest))
    fault_row = results.get("lean_server", {}).get("faults")
    if fault_row:
        checks.append(("faults: 0 crossed or lost answers", fault_row["crossed"] + fault_row["lost"] == 0))
    for name in ("lean_server", "lean_server + recheck"):
        verdict = results.get(name, {}).get("verdicts")
        if verdict:
            count = len(verdict["passed_recorded"]) + len(verdict["passed_stand_in"])
            checks.append((f"{name}: 0 attacks passed", count == 0))
    return checks


def chart(results: dict, args, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name in PEERS if any(f"batch_{n}" in results.get(name, {}) for n in args.batches)]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(args.batches))
    for index, n in enumerate(args.batches):
        xs = [i + index * width for i in range(len(names))]
        per_s = [results[name].get(f"batch_{n}", {}).get("proofs_per_s", 0) for name in names]
        overhead = [results[name].get(f"batch_{n}", {}).get("overhead_ms", 0) for name in names]
        axes[0].bar(xs, per_s, width, label=f"batch {n}")
        axes[1].bar(xs, overhead, width, label=f"batch {n}")
    axes[0].axhline(args.workers / args.latency, color="black", linestyle="--", linewidth=1, label="ideal W/L")
    axes[0].set_ylabel("proofs/s")
    axes[1].set_ylabel("overhead per proof above L (ms)")
    for axis in axes:
        axis.set_xticks([i + width * (len(args.batches) - 1) / 2 for i in range(len(names))], names, fontsize=8)
        axis.legend(fontsize=8)
    figure.suptitle(
        f"Same stand-in REPL: L={args.latency * 1000:g} ms per proof, housekeeping {args.housekeeping_latency * 1000:g}"
        f" ms, W={args.workers}"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the stand-in takes per proof (L)")
    parser.add_argument("--housekeeping-latency", type=float, default=0.001, help="seconds for `#eval 1`, a header (H)")
    parser.add_argument("--import-latency", type=float, default=0.5, help="extra seconds per import command (I)")
    parser.add_argument("--workers", type=int, default=4, help="REPL processes per peer (W)")
    parser.add_argument("--batches", default="64,3840", help="comma-separated batch sizes")
    parser.add_argument("--rounds", type=int, default=3, help="repeats of batches up to 256 (median kept)")
    parser.add_argument("--timeout", type=int, default=3, help="whole seconds per proof for every peer (kimina's unit)")
    parser.add_argument("--reuse-proofs", type=int, default=128, help="proofs in the header-reuse section")
    parser.add_argument("--fault-proofs", type=int, default=64, help="healthy proofs around the faults")
    parser.add_argument("--scale-proofs", type=int, default=1024, help="proofs per scale-out measurement")
    parser.add_argument("--corpus-limit", type=int, help="only the first N rows of the adversarial corpus")
    parser.add_argument("--chart", default=str(REPO / "outputs" / "lean_peers.png"), help="PNG bar chart path")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args(argv)
    args.batches = [int(n) for n in args.batches.split(",") if n.strip()]
    if args.latency <= 0 or args.workers < 1 or not args.batches or min(args.batches) < 1 or args.timeout < 1:
        parser.error("--latency must be > 0, --workers and --timeout >= 1, and --batches positive sizes")
    args.stand_in = [
        "--latency", str(args.latency), "--housekeeping-latency", str(args.housekeeping_latency),
        "--import-latency", str(args.import_latency), "--echo-names",
    ]  # fmt: skip
    return args


def driver_factory(args):
    checker = [sys.executable, str(REPO / "tests" / "fake_checker.py")]

    def make(name: str, stand_in: StandIn) -> Driver:
        if name == "lean_server":
            return LeanServerDriver(stand_in, args.workers, MINIF2F_HEADER)
        if name == "lean_server + recheck":
            return LeanServerDriver(stand_in, args.workers, MINIF2F_HEADER, label=name, recheck_command=checker)
        if name == "lean_server HTTP":
            return LeanServerHttpDriver(stand_in, args.workers, MINIF2F_HEADER)
        if name == "kimina-lean-server":
            return KiminaDriver(stand_in, args.workers, MINIF2F_HEADER, MEMORY_MB)
        if name == "LeanInteract":
            return LeanInteractDriver(stand_in, args.workers, MINIF2F_HEADER, MEMORY_MB)
        raise ValueError(name)

    return make


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    make = driver_factory(args)
    results: dict = {}
    print(
        f"stand-in REPL: L={args.latency * 1000:g} ms charged to proof commands only; housekeeping (`#eval 1`, a "
        f"header) {args.housekeeping_latency * 1000:g} ms; +{args.import_latency * 1000:g} ms per import command; "
        f"W={args.workers} REPLs per peer; per-proof timeout {args.timeout:g} s; batches {args.batches}"
    )
    with tempfile.TemporaryDirectory(prefix="lean-peers-") as scratch_name:
        scratch = Path(scratch_name)
        started = time.perf_counter()
        steps = [
            ("throughput", lambda: _throughput(make, scratch, args, results)),
            ("header reuse", lambda: header_reuse(make, ["lean_server", "kimina-lean-server", "LeanInteract"],
                                                  scratch, args, results)),
            ("faults", lambda: faults(make, ["lean_server", "kimina-lean-server", "LeanInteract"], scratch, args,
                                      results)),
            ("verdicts", lambda: verdicts(make, ["lean_server", "lean_server + recheck", "kimina-lean-server",
                                                 "LeanInteract"], scratch, args, results)),
            ("scale-out", lambda: scale_out(StandIn(scratch / "scale", args.stand_in), args, results)),
        ]  # fmt: skip
        for title, step in steps:
            print(f"... {title} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
            step()
    rows = print_table(results, args)
    granularity = {
        "lean_server": LeanServerDriver.granularity,
        "lean_server HTTP": LeanServerHttpDriver.granularity,
        "kimina-lean-server": KiminaDriver.granularity,
        "LeanInteract": LeanInteractDriver.granularity,
    }
    for name in COLUMNS:
        verdict = results.get(name, {}).get("verdicts")
        if verdict and verdict["passed_recorded"]:
            print(f"{name} passed (Lean's recorded answer): {', '.join(verdict['passed_recorded'])}")
    print(
        "upper bound: rows lean_server's precheck refuses have no recorded Lean answer; the stand-in answers them "
        "clean (sorry: a warning), so a peer's count there is at most what real Lean would let through"
    )
    print("results reach the caller per: " + "; ".join(f"{name}: {what}" for name, what in granularity.items()))
    checks = targets(results, args)
    for label, ok in checks:
        print(f"target {label}: {'PASS' if ok else 'FAIL'}")
    chart(results, args, Path(args.chart))
    print(f"chart: {args.chart}")
    if args.json:
        payload = {"args": {k: v for k, v in vars(args).items() if k != "stand_in"}, "results": results,
                   "table": rows, "targets": checks}  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return 0


def _throughput(make, scratch: Path, args, results: dict) -> None:
    stand_in = StandIn(scratch / "throughput", args.stand_in)
    drivers: list[Driver] = []
    try:
        for name in PEERS:
            drivers.append(make(name, stand_in))
        throughput(drivers, args, results)
    finally:
        for driver in drivers:
            driver.close()
        kill_stand_ins(str(stand_in.folder))


if __name__ == "__main__":
    sys.exit(main())
