"""False-rejection rate and speed of the precheck on published prover outputs (tests/data/published).

Every row is a proof its authors published as Lean-verified, so `prepare` should refuse one only by policy:
native evaluation, which passes with allow_native_decide=True. For each source this prints the rows, how many
`prepare` accepts, how many it refuses by that policy, how many it refuses otherwise (false rejections, found by
running again with allow_native_decide=True) and their rate. Then the false rejections grouped by their category
in the test's KNOWN_FALSE_REJECTIONS and their reason (line and column numbers left out), one example each. Last,
the time `prepare` takes per row (total, mean, max, and the slowest row's size): it runs before every proof.

    python bench/false_rejections.py
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests` is a package

from tests.published_proofs import KNOWN_FALSE_REJECTIONS, load_rows, request_of  # noqa: E402
from trl_verigate.lean_server.precheck import policy, prepare  # noqa: E402
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, VerificationResult  # noqa: E402

POLICIES = {allowed: policy(allow_native_decide=allowed) for allowed in (False, True)}
_POSITION = re.compile(r"line \d+, column \d+")


def timed_prepare(row: dict, allow_native_decide: bool) -> tuple[VerificationResult | None, float]:
    """The rejection `prepare` gives the row (None when it would go on to Lean) and the seconds it took."""
    started = time.perf_counter()
    prepared = prepare(request_of(row), MINIF2F_HEADER, POLICIES[allow_native_decide])
    seconds = time.perf_counter() - started
    return (prepared if isinstance(prepared, VerificationResult) else None), seconds


def request_text(row: dict) -> str:
    return row["text"] if row["kind"] == "file" else row["statement"] + "\n" + row["proof"]


def reason_group(reason: str) -> str:
    return _POSITION.sub("line L, column C", reason)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    rows = load_rows()
    per_source: dict[str, Counter] = defaultdict(Counter)
    seconds_per_source: dict[str, list[float]] = defaultdict(list)
    false_rejections: dict[str, list[tuple[str, str]]] = defaultdict(list)
    slowest = (0.0, "", 0)
    for row in rows:
        refused, seconds = timed_prepare(row, allow_native_decide=False)
        refused_with_native, _ = timed_prepare(row, allow_native_decide=True)
        counts = per_source[row["source"]]
        counts["rows"] += 1
        if refused is None:
            counts["accepted"] += 1
        elif refused_with_native is None:
            counts["native"] += 1
        if refused_with_native is not None:
            counts["false"] += 1
            category = KNOWN_FALSE_REJECTIONS.get(row["id"], "not in KNOWN_FALSE_REJECTIONS")
            group = f"[{category}] {reason_group(refused_with_native.reason)}"
            false_rejections[group].append((row["id"], refused_with_native.reason))
        seconds_per_source[row["source"]].append(seconds)
        slowest = max(slowest, (seconds, row["id"], len(request_text(row).encode())))

    total = Counter()
    print(f"{'source':<32} {'rows':>5} {'accepted':>8} {'native':>6} {'false':>5} {'false rate':>10}")
    for source, counts in per_source.items():
        total.update(counts)
        print(
            f"{source:<32} {counts['rows']:>5} {counts['accepted']:>8} {counts['native']:>6} {counts['false']:>5}"
            f" {counts['false'] / counts['rows']:>10.2%}"
        )
    print(
        f"{'all':<32} {total['rows']:>5} {total['accepted']:>8} {total['native']:>6} {total['false']:>5}"
        f" {total['false'] / total['rows']:>10.2%}"
    )
    print("\n(native: refused by the native-evaluation policy, passes with allow_native_decide=True;")
    print(" false: refused even with allow_native_decide=True, a false rejection)")

    print(f"\nfalse rejections by reason ({len(false_rejections)} reasons):")
    for group, examples in sorted(false_rejections.items(), key=lambda item: -len(item[1])):
        row_id, reason = examples[0]
        print(f"  {len(examples):>4}  {group}\n        e.g. {row_id}: {reason}")

    print(f"\n{'prepare time':<32} {'total s':>8} {'mean ms':>8} {'max ms':>8}")
    for source, seconds in seconds_per_source.items():
        print(
            f"{source:<32} {sum(seconds):>8.2f} {1000 * sum(seconds) / len(seconds):>8.2f} {1000 * max(seconds):>8.2f}"
        )
    every = [s for seconds in seconds_per_source.values() for s in seconds]
    print(f"{'all':<32} {sum(every):>8.2f} {1000 * sum(every) / len(every):>8.2f} {1000 * max(every):>8.2f}")
    print(f"slowest row: {slowest[1]} ({1000 * slowest[0]:.1f} ms for {slowest[2] / 1000:.1f} KB)")


if __name__ == "__main__":
    main()
