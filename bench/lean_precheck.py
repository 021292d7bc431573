"""How `prepare` (the precheck every untrusted proof goes through before Lean) scales with the proof's size.

For each shape of tests/precheck_shapes.py (long lines, many lines, deep nesting, one token kind repeated,
comments, literals, `;`, `<;>`, bullets, `have … := by` blocks, long names, Unicode, configuration items, complete
files, the nested shapes of issue 26 30 levels deep: `(disch := …)`, `aesop (add … (by …))`, configuration braces,
and shapes refused at their end, among them the same nested 60 deep, past the bound of 32) this prints the time of `prepare` at sizes n, 2n, 4n, … up to
--max-size (64 KiB by default, the server's default request limit), each the best of --repeats runs taken in interleaved rounds over all sizes so that
machine load falls on every size alike, the ratio time(2n)/time(n) (about 2 for linear work, 4 for quadratic), and
the largest request's tokens (as the precheck's tokenizer reads them) with its time per token: every check walks the
tokens, so a shape dense in tokens (brackets, `:=`, numbers) takes longer per megabyte.
Time is this process's CPU time by default (`--clock cpu`), which other processes on a shared machine inflate far
less than the wall clock (`--clock wall`); `prepare` runs in one thread, so on an idle machine the two agree.

The target: `prepare` of a 64 KiB proof (LeanServerConfig.max_request_bytes) in at most 0.25 s on every shape, with
work that stays linear past it (--max-size 262144 shows the doubling ratios further out). The exit status is 1 when a shape's work is clearly
quadratic (the geometric mean of its last two ratios is above 3) or its largest size takes longer than --target
seconds; 0 otherwise. The time is this machine's: on a loaded machine run it again or with more --repeats.

    python bench/lean_precheck.py [--max-size 65536] [--min-size 8192] [--repeats 3] [--shapes a,b] [--target 0.25]
                                  [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests` is a package

from tests.precheck_shapes import REJECTED_SHAPES, SHAPES, request_size  # noqa: E402
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, VerificationResult  # noqa: E402
from trl_verigate.lean_server.precheck import PrecheckError, policy, prepare  # noqa: E402
from trl_verigate.lean_server.precheck.tokens import tokenize  # noqa: E402

# Above this geometric mean of the last two doubling ratios a shape counts as quadratic (linear: 2, quadratic: 4).
QUADRATIC_RATIO = 3.0


DEFAULT_POLICY = policy()
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def timed(request, clock) -> tuple[float, str]:
    started = clock()
    result = prepare(request, MINIF2F_HEADER, DEFAULT_POLICY)
    seconds = clock() - started
    outcome = f"rejected: {result.reason[:60]}" if isinstance(result, VerificationResult) else "accepted"
    return seconds, outcome


def token_count(request) -> int | None:
    """Tokens the precheck's tokenizer reads in the request (its proof, or the whole file), or None if it cannot lex it:
    the work per token is about the same whatever the shape, so this explains most of the differences in time."""
    text = request if isinstance(request, str) else request.proof
    try:
        return len(tokenize(text))
    except PrecheckError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-size", type=int, default=1 << 16, help="largest request, in characters")
    parser.add_argument("--min-size", type=int, default=1 << 13, help="smallest request, in characters")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over all sizes; the best time counts")
    parser.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    parser.add_argument("--target", type=float, default=0.25, help="seconds allowed at the largest size")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="CPU time of this process, or wall")
    args = parser.parse_args()
    shapes = {**SHAPES, **REJECTED_SHAPES}
    names = [name for name in args.shapes.split(",") if name] or list(shapes)
    unknown = sorted(set(names) - set(shapes))
    if unknown:
        parser.error(f"--shapes: unknown {unknown}; known: {sorted(shapes)}")
    sizes = []
    size = args.min_size
    while size <= args.max_size:
        sizes.append(size)
        size *= 2
    if len(sizes) < 2:
        parser.error("--min-size must be at most half of --max-size: the ratios need two sizes")

    print(f"prepare {args.clock} time per size (best of {args.repeats} interleaved rounds), ratio time(2n)/time(n)")
    print(
        f"{'shape':<24}"
        + "".join(f"{s // 1024:>9}K" for s in sizes)
        + f"   {'ratios':<32} {'tokens':>8} {'us/token':>8}  verdict"
    )
    failures = []
    for name in names:
        requests = [shapes[name](size) for size in sizes]
        best = [math.inf] * len(sizes)
        outcome = ""
        for _ in range(args.repeats):
            for k, request in enumerate(requests):
                seconds, outcome_k = timed(request, CLOCKS[args.clock])
                best[k] = min(best[k], seconds)
                if k == len(requests) - 1:
                    outcome = outcome_k
        ratios = [later / max(earlier, 1e-9) for earlier, later in zip(best, best[1:], strict=False)]
        trend = math.sqrt(ratios[-1] * ratios[-2]) if len(ratios) >= 2 else ratios[-1]
        problems = []
        if trend > QUADRATIC_RATIO:
            problems.append(f"quadratic (last ratios x{trend:.1f})")
        if best[-1] > args.target:
            problems.append(f"{best[-1]:.2f}s > {args.target:g}s at {request_size(requests[-1]) // 1024}K")
        verdict = "; ".join(problems) or "ok"
        if problems:
            failures.append(name)
        times = "".join(f"{seconds:>9.3f}s" for seconds in best)
        ratio_text = " ".join(f"{ratio:.2f}" for ratio in ratios)
        tokens = token_count(requests[-1])
        # Per token only where tokens are what the checks walk (not a proof that is one comment or string).
        per_token = f"{best[-1] / tokens * 1e6:.2f}" if tokens and tokens >= 1000 else "-"
        print(
            f"{name:<24}{times}   {ratio_text:<32} {tokens or '':>8} {per_token:>8}  {verdict}  ({outcome})", flush=True
        )
    if failures:
        print(f"\n{len(failures)} of {len(names)} shapes miss the target or scale quadratically: {', '.join(failures)}")
        return 1
    print(f"\nall {len(names)} shapes linear and under {args.target:g}s at {sizes[-1] // 1024}K")
    return 0


if __name__ == "__main__":
    sys.exit(main())
