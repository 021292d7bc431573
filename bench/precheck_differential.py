"""Differential check of the precheck: this tree's `prepare`, `lex` and `split_proof` against another revision's.

A speedup of the precheck must not change a single verdict, so this runs both versions on the same inputs and
compares their full results: `prepare`'s `Prepared` (code, offsets, its outermost tactics) or rejection (status and
reason), the lexer's tokens or its error, and the splitter's `ProofLayout` (tactics at both granularities, tokens,
suffix, clause keywords). The inputs are

* the rows of tests/data/adversarial_proofs.jsonl and the published prover outputs in tests/data/published
  (each as submitted, and each with `allow_native_decide=True`);
* every string constant in the precheck's test files (tests/test_precheck*.py, test_lexer.py, test_tactics.py,
  test_adversarial.py), each as a proof body, as a complete file, and through `lex` and `split_proof`;
* the shapes of tests/test_precheck_linearity.py at a few small sizes;
* seeded random mutations of all of the above: characters inserted, deleted or replaced from an alphabet of what
  matters to Lean's lexing and layout (brackets, quotes, comment markers, guillemets, backslashes, line breaks,
  indentation, keywords, Unicode).

The other revision (`--base`, default HEAD) is extracted with `git archive` into a temporary directory; each side
runs in its own process, so both import `trl_verigate` under its own name. Exit status 1 on any difference.

    python bench/precheck_differential.py [--base HEAD] [--mutations 4000] [--seed 0] [--show 5]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import pickle
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_FILES = ["test_precheck*.py", "test_lexer.py", "test_tactics.py", "test_adversarial.py"]
STATEMENT = "theorem t (a b : ℝ) (n : ℕ) (h : a = b) : a = b := by"
# What a mutation inserts or substitutes: the characters and words that steer the lexer and the layout.
ALPHABET = [
    *"()[]{}⟨⟩«»\"'\\-/#@%$;,.:=|<>+*`_ \n\t\r",
    "--",
    "/-",
    "-/",
    "/--",
    '"{',
    '}"',
    's!"{',
    'r#"',
    '"#',
    "'\"'",
    "''",
    "\n  ",
    "\n    ",
    "\n",
    "  ",
    " by ",
    " := by\n    ",
    "<;>",
    "· ",
    " calc ",
    " sorry",
    " where\n  ",
    " termination_by ",
    " decreasing_by ",
    " let rec ",
    "(config := ",
    "(disch := ",
    " fun x => ",
    " | ",
    " => ",
    "ℝ",
    "λ",
    "α",
    "h₀",
    "²",
    "ｓ",
    "\u200b",
    "\u00a0",
    "\u2003",
    "x.1",
    "Nat.succ",
    "1.5e3",
    "0x1F",
    "theorem ",
    "#eval ",
    " open Real in ",
    "set_option maxRecDepth 100 in ",
]


def test_file_strings() -> list[str]:
    """Every string constant (f-strings' literal parts included) of the precheck's test files."""
    found: list[str] = []
    for pattern in TEST_FILES:
        for path in sorted((REPO / "tests").glob(pattern)):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
                    found.append(node.value)
    return list(dict.fromkeys(found))


def corpus_requests() -> list[tuple]:
    """(kind, …) request descriptions from the adversarial and published corpora."""
    requests: list[tuple] = []
    for line in (REPO / "tests/data/adversarial_proofs.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("file") is not None:
            requests.append(("file", row["file"]))
        else:
            requests.append(("proof", row["statement"], row["proof"], row.get("header")))
    for path in sorted((REPO / "tests/data/published").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as rows:
            for line in rows:
                row = json.loads(line)
                if row["kind"] == "file":
                    requests.append(("file", row["text"]))
                else:
                    requests.append(("proof", row["statement"], row["proof"], row.get("header")))
    return requests


def shape_texts() -> list[tuple]:
    sys.path.insert(0, str(REPO / "tests"))
    from test_precheck_linearity import REJECTED_SHAPES, SHAPES

    requests = []
    for build in {**SHAPES, **REJECTED_SHAPES}.values():
        for size in (200, 1500, 5000):
            request = build(size)
            if isinstance(request, str):
                requests.append(("file", request))
            else:
                requests.append(("proof", request.statement, request.proof, request.header))
    return requests


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        i = rng.randint(0, len(text))
        operation = rng.random()
        if operation < 0.45:
            text = text[:i] + rng.choice(ALPHABET) + text[i:]
        elif operation < 0.7:
            text = text[:i] + text[i + rng.randint(1, 3) :]
        else:
            text = text[:i] + rng.choice(ALPHABET) + text[i + 1 :]
    return text


def build_inputs(mutations: int, seed: int) -> dict[str, list[tuple]]:
    """Category -> request descriptions: ("proof", statement, proof, header), ("file", text), ("text", text)."""
    strings = test_file_strings()
    corpus = corpus_requests()
    shapes = shape_texts()
    inputs = {
        "corpus": corpus,
        "test strings": [("text", s) for s in strings],
        "shapes": shapes,
    }
    rng = random.Random(seed)
    bases = [s for s in strings if len(s) < 4000] + [r[2] for r in corpus + shapes if r[0] == "proof"]
    bases += [r[1] for r in corpus if r[0] == "file"]
    mutated = []
    for _ in range(mutations):
        base = rng.choice(bases)
        if len(base) > 3000:  # a window of a long proof, so the edits are a fair share of it
            start = rng.randint(0, len(base) - 3000)
            base = base[start : start + 3000]
        mutated.append(("text", mutate(rng, base)))
    inputs["mutations"] = mutated
    return inputs


def worker(root: str, inputs_path: str, output_path: str) -> None:
    """Run one side: import `trl_verigate` from `root`, write each input's outcomes (strings) to `output_path`."""
    sys.path.insert(0, root)
    from trl_verigate.lean_server.lexer import PrecheckError, lex
    from trl_verigate.lean_server.tactics import split_proof
    from trl_verigate.lean_server.types import MINIF2F_HEADER, ProofRequest
    from trl_verigate.lean_server.verdict import Prepared, prepare

    assert Path(sys.modules["trl_verigate"].__file__).resolve().is_relative_to(Path(root).resolve())

    def prepared(request, native=False) -> str:
        try:
            result = prepare(request, MINIF2F_HEADER, allow_native_decide=native)
        except Exception as error:  # noqa: BLE001  (a crash is an outcome to compare too)
            return f"raised {type(error).__name__}: {error}"
        if isinstance(result, Prepared):
            return f"{result!r} tactics={result.outermost_tactics!r}"
        return repr(result)

    def lexed(text: str) -> str:
        try:
            return repr(lex(text))
        except PrecheckError as error:
            return f"PrecheckError {error}"
        except Exception as error:  # noqa: BLE001
            return f"raised {type(error).__name__}: {error}"

    def layout(text: str) -> str:
        try:
            return repr(split_proof(text, "all")) + repr(split_proof(text, "outermost", start_column=3))
        except Exception as error:  # noqa: BLE001
            return f"raised {type(error).__name__}: {error}"

    inputs = pickle.loads(Path(inputs_path).read_bytes())
    outcomes = {}
    for category, requests in inputs.items():
        results = []
        for request in requests:
            if request[0] == "proof":
                _, statement, proof, header = request
                proof_request = ProofRequest(statement, proof, header)
                results.append((prepared(proof_request), prepared(proof_request, native=True)))
            elif request[0] == "file":
                results.append((prepared(request[1]), prepared(request[1], native=True)))
            else:
                text = request[1]
                results.append((prepared(ProofRequest(STATEMENT, text)), prepared(text), lexed(text), layout(text)))
        outcomes[category] = results
    Path(output_path).write_bytes(pickle.dumps(outcomes))


def run_side(root: Path, inputs_path: Path, output_path: Path) -> dict:
    subprocess.run(
        [sys.executable, __file__, "--worker", str(root), str(inputs_path), str(output_path)], check=True, cwd=root
    )
    return pickle.loads(output_path.read_bytes())


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="the git revision to compare this working tree with")
    parser.add_argument("--mutations", type=int, default=4000, help="random mutations to add to the inputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=5, help="differences to print")
    args = parser.parse_args()
    inputs = build_inputs(args.mutations, args.seed)
    with tempfile.TemporaryDirectory(prefix="precheck_base_") as scratch:
        base_root = Path(scratch) / "base"
        base_root.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.base, "trl_verigate"], cwd=REPO, check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(base_root, filter="data")
        inputs_path = Path(scratch) / "inputs.pkl"
        inputs_path.write_bytes(pickle.dumps(inputs))
        base = run_side(base_root, inputs_path, Path(scratch) / "base.pkl")
        ours = run_side(REPO, inputs_path, Path(scratch) / "ours.pkl")
    differences = 0
    print(f"{'inputs':<16}{'count':>7}{'outcomes':>10}{'accepted':>10}{'differences':>13}")
    for category, requests in inputs.items():
        different = [
            (request, a, b) for request, a, b in zip(requests, base[category], ours[category], strict=True) if a != b
        ]
        outcomes = sum(len(a) for a in base[category])
        accepted = sum(outcome.startswith("Prepared(") for a in base[category] for outcome in a)
        print(f"{category:<16}{len(requests):>7}{outcomes:>10}{accepted:>10}{len(different):>13}")
        for request, a, b in different[: args.show]:
            print(f"  input {request!r:.300}")
            for old, new in zip(a, b, strict=True):
                if old != new:
                    print(f"    {args.base}: {old:.400}\n    this tree: {new:.400}")
        differences += len(different)
    print(f"\n{differences} inputs with a different outcome")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
