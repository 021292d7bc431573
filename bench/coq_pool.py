"""The Coq pool against a bare coqidetop loop, side by side and interleaved, on the same proofs.

- Throughput: `CoqServer` (2 workers, Print Assumptions and recheck off, so both sides do the same Coq work) against
  2 bare coqidetop processes driven directly over the XML protocol, on the same 200 proofs (25 statements x 8
  completions, as a GRPO batch has them). Both do, per proof: the statement, one `Add` per sentence, `Qed.`,
  `Status`, `Check`, `Edit_at`; and once per statement and process, the statement's reference `Check`. The pool's
  overhead is 1 - pool/bare proofs/s. Target: <= 10% at 2 workers.
- Header loads: counted per process started; the header loads once per worker, not per proof.
- Latency: the same batch with one looping proof, each request timed from the batch's start; the p99 of the others
  against the batch without it. Target: not delayed past one timeout.
- Costs: Print Assumptions on every pass (mostly `lia` proofs), and the coqchk recheck per verify() call.
- Heavy recheck: one pass that coqchk needs seconds for (a `vm_compute` step; coqchk has no VM) among 12 honest
  passes. The rechecks run side by side, so the call takes about the slowest single recheck plus the rest of the
  batch, not their sum. Target: mixed call <= 1.5 x heavy recheck alone + the honest call alone.

Prints ratios; no timed asserts.

    python bench/coq_pool.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time

from trl_verigate.coq import CoqProofRequest, CoqServer, CoqServerConfig, protocol
from trl_verigate.coq.config import default_coqidetop_command
from trl_verigate.coq.precheck import proof_steps
from trl_verigate.coq.sentences import split_sentences

HEADER = "Require Import Arith Lia."
WORKERS = 2
TARGET_OVERHEAD = 0.10
PROOF_STYLES = (
    "intros n. lia.",
    "intros n. induction n as [|n IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity.",
    "intros n; induction n as [|n IH]; simpl; [reflexivity | rewrite IH; reflexivity].",
    "intros n. simpl. reflexivity.",  # fails at sentence 1 for most statements
)


def workload(statements: int = 25, completions: int = 8) -> list[CoqProofRequest]:
    requests = []
    for s in range(statements):
        statement = f"Theorem bench_{s} : forall n : nat, n + 0 = n."
        for c in range(completions):
            requests.append(CoqProofRequest(statement, PROOF_STYLES[c % len(PROOF_STYLES)]))
    return requests


class BareCoq:
    """One coqidetop driven directly: the same calls the pool's worker makes (the goals before a failure included),
    nothing else."""

    def __init__(self):
        self.process = subprocess.Popen(
            default_coqidetop_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.reader = protocol.FrameReader()
        self.references: dict[str, str] = {}
        self.call(protocol.about())
        state = protocol.read_state_id(self.call(protocol.init()))
        for sentence in split_sentences(HEADER):
            state = protocol.read_state_id(self.call(protocol.add(sentence.text(HEADER), state)))
        self.call(protocol.status())
        self.header_state = state

    def call(self, data: bytes) -> protocol.Answer:
        self.process.stdin.write(data)
        self.process.stdin.flush()
        while True:
            for node in self.reader.feed(self.process.stdout.read1(1 << 16)):
                if node.tag == "value":
                    return protocol.read_answer(node)

    def check(self, request: CoqProofRequest) -> bool:
        name = request.statement.split()[1]
        if request.statement not in self.references:
            state = protocol.read_state_id(self.call(protocol.add(request.statement, self.header_state)))
            admitted = protocol.read_state_id(self.call(protocol.add("Admitted.", state)))
            self.call(protocol.status())
            self.references[request.statement] = self.call(protocol.query(f"Check {name}.", admitted)).good
            self.call(protocol.edit_at(self.header_state))
        sentences = [request.statement, *(s.text(request.proof) for s in proof_steps(request.proof)), "Qed."]
        state = self.header_state
        chain = []
        for sentence in sentences:
            answer = self.call(protocol.add(sentence, state))
            if not answer.good:
                break
            state = protocol.read_state_id(answer)
            chain.append(state)
        status = self.call(protocol.status())
        passed = status.good
        if passed:
            self.call(protocol.query(f"Check {name}.", state))
        elif status.state_id in chain:
            self.call(protocol.edit_at(status.state_id))
            self.call(protocol.goal())
        self.call(protocol.edit_at(self.header_state))
        return passed

    def close(self):
        self.process.kill()
        self.process.wait()


def bare_loop(requests: list[CoqProofRequest], processes: list[BareCoq]) -> tuple[float, int]:
    """Seconds for `requests` over the bare processes, one thread each, and how many passed."""
    import concurrent.futures

    shares = [requests[k :: len(processes)] for k in range(len(processes))]
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(processes)) as pool:
        passed = sum(pool.map(lambda pair: sum(pair[0].check(r) for r in pair[1]), zip(processes, shares, strict=True)))
    return time.perf_counter() - started, passed


def pool_run(server: CoqServer, requests: list[CoqProofRequest]) -> tuple[float, int]:
    started = time.perf_counter()
    results = server.verify(requests)
    return time.perf_counter() - started, sum(r.passed for r in results)


def latencies(server: CoqServer, requests: list[CoqProofRequest], timeout: float) -> list[float]:
    """Seconds from the batch's start until each request's own result, all submitted at once."""

    async def main():
        started = time.perf_counter()

        async def one(request):
            await server.averify([request], timeout=timeout)
            return time.perf_counter() - started

        return await asyncio.gather(*(one(r) for r in requests))

    return asyncio.run(main())


def p99(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.99 * len(values))) - 1)]


# coqidetop runs this in well under a second in its VM; coqchk, which has no VM, needs seconds for 2^22 steps.
HEAVY_PROOF = (
    "assert (BinPos.Pos.iter negb true (BinPos.Pos.pow (BinNums.xO BinNums.xH) (BinPos.Pos.of_nat 22)) = true) "
    "by (vm_compute; reflexivity). clear H. intros n. lia."
)
TARGET_HEAVY_RATIO = 1.5


def heavy_recheck(config: CoqServerConfig, rounds: int) -> None:
    """The mixed call (heavy + 12 honest) against the heavy pass alone and the honest ones alone, interleaved."""
    honest = [
        CoqProofRequest(f"Theorem honest_{k} : forall n : nat, n + 0 = n.", PROOF_STYLES[k % 3]) for k in range(12)
    ]
    heavy = CoqProofRequest("Theorem heavy : forall n : nat, n + 0 = n.", HEAVY_PROOF)
    heavy_rechecks, rest_calls, mixed_calls = [], [], []
    with CoqServer(config) as server:
        server.verify(honest[:WORKERS])
        for _ in range(rounds):
            before = server.metrics()["coq/recheck_seconds"]
            seconds, passed = pool_run(server, [heavy])
            assert passed == 1, "the heavy pass must pass and be confirmed"
            heavy_rechecks.append(server.metrics()["coq/recheck_seconds"] - before)
            rest_calls.append(pool_run(server, honest)[0])
            seconds, passed = pool_run(server, [heavy, *honest])
            assert passed == 13, f"{passed} of 13 passed"
            mixed_calls.append(seconds)
    heavy_s, rest_s, mixed_s = (statistics.median(v) for v in (heavy_rechecks, rest_calls, mixed_calls))
    ratio = mixed_s / (heavy_s + rest_s)
    print(f"[heavy recheck] 1 heavy pass + 12 honest, {WORKERS} workers, median of {rounds} interleaved rounds")
    print(f"  heavy pass's recheck alone      : {heavy_s:6.2f} s")
    print(f"  the 12 honest passes alone      : {rest_s:6.2f} s (a whole verify call)")
    print(f"  mixed call                      : {mixed_s:6.2f} s")
    print(
        f"  mixed / (heavy recheck + rest)  : {ratio:.2f}  target <= {TARGET_HEAVY_RATIO}: "
        f"{'PASS' if ratio <= TARGET_HEAVY_RATIO else 'FAIL'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each side (default: 3)")
    parser.add_argument("--timeout", type=float, default=2.0, help="per-proof timeout of the latency run (s)")
    parser.add_argument("--only-heavy", action="store_true", help="run only the heavy-recheck case")
    args = parser.parse_args()
    requests = workload()
    plain = CoqServerConfig(
        workers=WORKERS, spare_workers=0, sandbox="none", print_assumptions="never", recheck="none", header=HEADER
    )
    heavy_recheck(CoqServerConfig(**{**plain.__dict__, "recheck": "coqchk"}), args.rounds)
    if args.only_heavy:
        return

    started = time.perf_counter()
    bare = [BareCoq() for _ in range(WORKERS)]
    bare_start = (time.perf_counter() - started) / WORKERS
    bare_times, pool_times = [], []
    with CoqServer(plain) as server:
        server.verify(requests[:WORKERS])  # both workers have loaded the header
        for _ in range(args.rounds):
            seconds, bare_passed = bare_loop(requests, bare)
            bare_times.append(seconds)
            seconds, pool_passed = pool_run(server, requests)
            pool_times.append(seconds)
        stats = server.stats()
    for process in bare:
        process.close()
    bare_rate = len(requests) / statistics.median(bare_times)
    pool_rate = len(requests) / statistics.median(pool_times)
    overhead = 1 - pool_rate / bare_rate
    print(
        f"[throughput] {len(requests)} proofs, {WORKERS} workers each side, median of {args.rounds} interleaved rounds"
    )
    print(f"  bare coqidetop loop : {bare_rate:7.1f} proofs/s  ({bare_passed} passed)")
    print(f"  CoqServer pool      : {pool_rate:7.1f} proofs/s  ({pool_passed} passed)")
    print(
        f"  pool overhead       : {overhead:+.1%}  target <= {TARGET_OVERHEAD:.0%}: {'PASS' if overhead <= TARGET_OVERHEAD else 'FAIL'}"
    )
    proofs_run = len(requests) * args.rounds + WORKERS
    print(f"[header loads] {stats['started']} for {proofs_run} proofs (one per worker started)")
    print(f"  header load per process (bare start + About/Init/Require): {bare_start:.2f} s")

    with CoqServer(plain) as server:
        server.verify(requests[:WORKERS])
        alone = latencies(server, requests, args.timeout)
        looping = CoqProofRequest(requests[0].statement, "intros n. repeat (assert True by auto).")
        mixed = latencies(server, [looping, *requests[1:]], args.timeout)
    others = mixed[1:]
    delay = p99(others) - p99(alone[1:])
    print(f"[latency] {len(requests)} requests at once, timeout {args.timeout:g} s")
    print(f"  p99 without a looping proof : {p99(alone[1:]):.2f} s")
    print(
        f"  p99 of the others with one  : {p99(others):.2f} s  (delay {delay:+.2f} s, "
        f"{'within' if delay <= args.timeout else 'PAST'} one timeout)"
    )

    costs = []
    for name, overrides in (
        ("plain", {}),
        ("print_assumptions=always", {"print_assumptions": "always"}),
        ("recheck=coqchk", {"recheck": "coqchk"}),
    ):
        config = CoqServerConfig(**{**plain.__dict__, **overrides})
        with CoqServer(config) as server:
            server.verify(requests[:WORKERS])
            seconds, passed = pool_run(server, requests)
            costs.append((name, seconds, passed, server.metrics()))
    base = costs[0][1]
    print(f"[costs] the same {len(requests)} proofs, {WORKERS} workers")
    for name, seconds, passed, metrics in costs:
        extra = (seconds - base) / max(passed, 1)
        print(
            f"  {name:26s}: {seconds:6.2f} s, {passed} passes, {extra * 1000:+7.1f} ms per pass "
            f"(recheck wall {metrics['coq/recheck_seconds']:.2f} s)"
        )


if __name__ == "__main__":
    main()
