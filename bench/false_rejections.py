"""False rejections of the precheck on honest published proofs that no list was built from (bench/data).

Every row is a tactic proof its authors publish as Lean-checked (bench/data/SOURCES.md: Mathlib's Archive,
compfiles, Seed-Prover's miniF2F and miniCTX-v2 outputs; none of them among tests/data/published, from which
nothing here is derived either). Each goes through `prepare`, the precheck `LeanServer.verify` runs before the REPL,
as a `ProofRequest` (trusted header and statement, checked proof); Seed-Prover's miniF2F files also go whole, as a
file request. A refusal is a policy refusal when the documented
policy explains it: native evaluation (the row passes with allow_native_decide=True), `#print axioms` in a file
(the file passes without those lines), or a tactic that
allowlists/tactic_exclusions.txt keeps out by rule (code, `sorry`-like, waiting). Every other refusal is a wrong
refusal. Per source this prints rows, accepted, policy and wrong refusals and the wrong rate (target: <= 1% of each
source); then the wrong refusals grouped by reason (positions left out), most first, with an example each, and
`--summary FILE` writes that grouping as Markdown.

    python bench/false_rejections.py [--summary /tmp/team/h5_refusals.md] [--source NAME]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trl_verigate.lean_server.core.types import ProofRequest, VerificationResult  # noqa: E402
from trl_verigate.lean_server.precheck import policy, prepare  # noqa: E402

CORPUS = REPO / "bench" / "data" / "published_proofs.jsonl.gz"
EXCLUSIONS = REPO / "trl_verigate" / "lean_server" / "precheck" / "allowlists" / "tactic_exclusions.txt"
POLICIES = {allowed: policy(allow_native_decide=allowed) for allowed in (False, True)}
_POSITION = re.compile(r"line \d+, column \d+")
_PRINT_AXIOMS = re.compile(r"^#print axioms[^\n]*$", re.MULTILINE)


def load_rows(source: str | None = None) -> list[dict]:
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [row for row in rows if source is None or row["source"] == source]


def excluded_heads() -> set[str]:
    lines = EXCLUSIONS.read_text(encoding="utf-8").splitlines()
    return {line.split("\t")[1] for line in lines if line and not line.startswith("#")}


def refusal(row: dict, allow_native_decide: bool, text: str | None = None) -> VerificationResult | None:
    """The refusal `prepare` gives a proof row (a `ProofRequest`) or a file row (its text, or `text`), or None."""
    if row["kind"] == "file":
        request = row["text"] if text is None else text
    else:
        request = ProofRequest(row["statement"], row["proof"], row["header"])
    prepared = prepare(request, row["header"], POLICIES[allow_native_decide])
    return prepared if isinstance(prepared, VerificationResult) else None


def classify(row: dict, excluded: set[str]) -> tuple[str, str]:
    """("accepted" | "policy" | "wrong", the refusal's reason). A file's `#print axioms` lines are policy (the
    server prints the axioms itself): a file refused for them is judged again without them."""
    refused = refusal(row, allow_native_decide=False)
    if refused is None:
        return "accepted", ""
    if refusal(row, allow_native_decide=True) is None:
        return "policy", "native evaluation"
    if row["kind"] == "file" and _PRINT_AXIOMS.search(row["text"]):
        verdict, reason = classify({**row, "text": _PRINT_AXIOMS.sub("", row["text"])}, excluded)
        return ("policy", "#print axioms") if verdict == "accepted" else (verdict, reason)
    named = set(re.findall(r"`([^`\s]+)`", refused.reason))
    return ("policy" if named & excluded else "wrong"), refused.reason


# Which precheck rule a refusal's reason comes from, for the summary: (pattern, rule).
RULES = [
    (re.compile(r"names `[^`]+`, metaprogramming"), "meta name (meta_names.txt)"),
    (re.compile(r"closes the `by` block"), "layout: block end"),
    (re.compile(r"is not on the allow-list"), "tactic not on tactics.txt"),
    (re.compile(r"^command `"), "command word in a proof"),
    (re.compile(r"set_option"), "option or its bound"),
    (re.compile(r"elaborators run code"), "`%` elaborator"),
]


def rule_of(reason: str) -> str:
    return next((rule for pattern, rule in RULES if pattern.search(reason)), "other")


def summary_markdown(wrong: dict[str, list[tuple[str, str]]], counts: dict[str, Counter]) -> str:
    lines = ["# Precheck refusals of honest published proofs (bench/false_rejections.py)", ""]
    lines += ["| source | rows | accepted | policy | wrong | wrong rate |", "|---|---|---|---|---|---|"]
    for source, c in counts.items():
        lines.append(
            f"| {source} | {c['rows']} | {c['accepted']} | {c['policy']} | {c['wrong']} |"
            f" {c['wrong'] / c['rows']:.2%} |"
        )
    by_rule = Counter()
    for group, examples in wrong.items():
        by_rule[rule_of(group)] += len(examples)
    lines += ["", "## Wrong refusals by precheck rule", "", "| rule | refusals |", "|---|---|"]
    lines += [f"| {rule} | {count} |" for rule, count in by_rule.most_common()]
    lines += ["", "## Wrong refusals by reason (most first)", ""]
    for group, examples in sorted(wrong.items(), key=lambda item: -len(item[1])):
        row_id, _ = examples[0]
        lines.append(f"- **{len(examples)}** × {group}  \n  e.g. `{row_id}`")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="only this source's rows")
    parser.add_argument("--summary", type=Path, help="also write the wrong refusals by reason here (Markdown)")
    args = parser.parse_args()
    excluded = excluded_heads()
    counts: dict[str, Counter] = defaultdict(Counter)
    wrong: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in load_rows(args.source):
        verdict, reason = classify(row, excluded)
        counts[row["source"]]["rows"] += 1
        counts[row["source"]][verdict] += 1
        if verdict == "wrong":
            wrong[_POSITION.sub("line L, column C", reason)].append((row["id"], reason))
    print(f"{'source':<26} {'rows':>6} {'accepted':>8} {'policy':>6} {'wrong':>6} {'wrong rate':>10}")
    for source, c in counts.items():
        print(
            f"{source:<26} {c['rows']:>6} {c['accepted']:>8} {c['policy']:>6} {c['wrong']:>6}"
            f" {c['wrong'] / c['rows']:>10.2%}"
        )
    print(f"\nwrong refusals by reason ({len(wrong)} reasons):")
    for group, examples in sorted(wrong.items(), key=lambda item: -len(item[1])):
        print(f"  {len(examples):>5}  {group}\n         e.g. {examples[0][0]}")
    if args.summary:
        args.summary.write_text(summary_markdown(wrong, counts), encoding="utf-8")


if __name__ == "__main__":
    main()
