"""Wrong refusals of `CoqServer.verify` on honest proofs: lemmas of the installed Coq standard library re-proved with
their own proofs (bench/data/coq_stdlib_lemmas.jsonl.gz, made by bench/coq_stdlib_corpus.py, which keeps only lemmas
that compile standalone with plain `coqc`; nothing here or in the allow-list is derived from them).

Every lemma goes through the real server (precheck, coqidetop, Print Assumptions, coqchk recheck) with its own
trusted header, the corpus's axiom whitelist, and `extra_tactics` set as docs/provers/coq.md tells a user who loads
a library: the tactics the standard library defines (`Ltac` and `Tactic Notation` names in theories/, read from
their definitions). The precheck is also run with the shipped allow-list alone, to count the lemmas that need
those names. A refusal is a policy refusal when docs/provers/coq.md lists it as refused by design:

- `native_compute`;
- `Proof with` (and `Proof using`): vernacular that changes how the proof runs;
- a library's tactic that is not on the allow-list (shipped list alone; `extra_tactics` allows it);
- vernacular inside a proof (`Opaque`, `Hint`, `Set`, `Local Ltac`, ...).

Every other outcome that is not `passed` is a wrong refusal: a precheck refusal for another reason, a failure
coqidetop or the recheck gives to a proof `coqc` accepts, a timeout, an error. Target: wrong refusals <= 1%.

    python bench/coq_false_rejections.py [--every K] [--workers 2] [--timeout 60]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from coq_stdlib_corpus import CORPUS, WHITELIST, theories_dir  # noqa: E402

from trl_verigate.coq import CoqProofRequest, CoqServerConfig  # noqa: E402
from trl_verigate.coq.precheck import prepare, tactics_for  # noqa: E402
from trl_verigate.coq.server import CoqServer  # noqa: E402
from trl_verigate.prover_pool.results import VerificationResult  # noqa: E402

TARGET = 0.01
_LTAC = re.compile(r"^\s*(?:Global\s+)?Ltac\s+([^\W\d][\w']*)", re.M)
_NOTATION = re.compile(r"^\s*(?:Global\s+)?Tactic\s+Notation\s*(?:\([^)]*\)\s*)?\"([^\"\s]+)\"", re.M)
_HEAD = re.compile(r"`([^`]+)` is not an allowed tactic")


def library_tactics() -> tuple[str, ...]:
    """The names the standard library defines tactics under (not `Local`), from their definitions in theories/."""
    names: set[str] = set()
    for path in theories_dir().rglob("*.v"):
        text = path.read_text(encoding="utf-8", errors="replace")
        names.update(_LTAC.findall(text))
        names.update(_NOTATION.findall(text))
    return tuple(sorted(names))


def policy(result: VerificationResult, library: set[str]) -> str | None:
    """The refused-by-design category of a refusal (docs/provers/coq.md), or None."""
    reason = result.reason or ""
    if result.status != "rejected":
        return None
    if "native_compute" in reason:
        return "native_compute"
    if "`Proof with …` / `Proof using …`" in reason:
        return "Proof with / Proof using"
    if "is a vernacular command" in reason:
        return "vernacular inside a proof"
    head = _HEAD.search(reason)
    if head is not None and head.group(1).rsplit(".", 1)[-1] in library:
        return "library tactic not on the shipped allow-list"
    return None


def category(result: VerificationResult) -> str:
    """A wrong refusal's category: its status and the first words of its reason, positions left out."""
    reason = re.sub(r"\d+", "N", (result.reason or "").split(":", 2)[-1].strip())[:70]
    return f"{result.status}: {reason}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=1, help="every K-th lemma of the corpus (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="per-proof timeout (s)")
    args = parser.parse_args()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        lemmas = [json.loads(line) for line in lines][:: args.every]
    library = library_tactics()
    requests = [CoqProofRequest(lemma["statement"], lemma["proof"], lemma["header"]) for lemma in lemmas]

    shipped = CoqServerConfig(workers=1, axiom_whitelist=WHITELIST)
    shipped_refusals = [prepare(request, shipped, tactics_for(shipped)) for request in requests]
    need_library = [policy(r, set(library)) for r in shipped_refusals if isinstance(r, VerificationResult)]

    config = CoqServerConfig(
        workers=args.workers, timeout=args.timeout, axiom_whitelist=WHITELIST, extra_tactics=library
    )
    order = sorted(range(len(requests)), key=lambda i: requests[i].header)  # a worker reloads per header change
    with CoqServer(config) as server:
        ordered = server.verify([requests[i] for i in order], progress=True)
    results: list[VerificationResult] = [None] * len(requests)  # type: ignore[list-item]
    for index, result in zip(order, ordered, strict=True):
        results[index] = result

    passed = sum(result.passed for result in results)
    policies = Counter(p for p in (policy(r, set(library)) for r in results if not r.passed) if p is not None)
    wrong = [
        (lemma, r) for lemma, r in zip(lemmas, results, strict=True) if not r.passed and policy(r, set(library)) is None
    ]
    rate = len(wrong) / max(len(lemmas), 1)
    print(f"{len(lemmas)} standard-library lemmas with their own proofs (Coq 8.16.1, {CORPUS.relative_to(REPO)})")
    print(f"  passed                : {passed}")
    print(f"  policy refusals       : {sum(policies.values())}")
    for name, count in policies.most_common():
        print(f"    {count:4d}  {name}")
    print(
        f"  with the shipped allow-list alone, {need_library.count('library tactic not on the shipped allow-list')} "
        f"more are refused for a library tactic ({len(library)} names in theories/; extra_tactics allows them)"
    )
    print(
        f"  wrong refusals        : {len(wrong)} ({rate:.2%})  target <= {TARGET:.0%}: {'PASS' if rate <= TARGET else 'FAIL'}"
    )
    for name, count in Counter(category(r) for _, r in wrong).most_common():
        example = next(lemma["source"] for lemma, r in wrong if category(r) == name)
        print(f"    {count:4d}  {name}  (e.g. {example})")


if __name__ == "__main__":
    main()
