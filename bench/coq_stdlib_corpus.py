"""Extract the corpus of bench/coq_false_rejections.py: lemmas of the installed Coq standard library with their own
proofs, each a trusted header, statement and proof that compiles standalone with `coqc`.

Selection, fixed before anything is measured: every `.v` file under `coqc -where`/theories, in sorted order; in
each, the first `--per-file` lemmas (`Lemma`, `Theorem`, ... with a proof ending in `Qed.` or `Defined.`) declared
at the top level or in a plain `Module X.`, not in a `Section` (whose variables a standalone statement lacks) nor
in a functor or module type. Each becomes:

- header: `Require Import <its library>.`, the file's own `Require`/`Import` sentences before it, `Import <module>.`
  for the module it sits in, and the scopes the file opened before it;
- statement: its declaration as written (attributes and `Local` dropped);
- proof: its proof as written, `Proof.` to `Qed.`.

A lemma enters the corpus only when that header, statement and proof compile with `coqc` alone and `Print
Assumptions` lists no axiom or only the Reals axioms (`WHITELIST`, fixed from what `Require Import Reals` loads).
Nothing here runs the precheck or `CoqServer`: the corpus does not depend on what the bench measures.

    python bench/coq_stdlib_corpus.py [--per-file 3] [--jobs 2]   # writes bench/data/coq_stdlib_lemmas.jsonl.gz
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trl_verigate.coq.config import header_problem  # noqa: E402
from trl_verigate.coq.judge import read_assumptions, whitelisted  # noqa: E402
from trl_verigate.coq.precheck import STATEMENT_KEYWORDS  # noqa: E402
from trl_verigate.coq.sentences import split_sentences  # noqa: E402

CORPUS = REPO / "bench" / "data" / "coq_stdlib_lemmas.jsonl.gz"
# The axioms `Require Import Reals` loads (Coq 8.16): the classical Dedekind reals rest on them.
WHITELIST = ("sig_forall_dec", "sig_not_dec", "functional_extensionality_dep", "classic")
COQC_TIMEOUT_S = 60
_DECLARATION = re.compile(
    r"(?:#\[[^\]]*\]\s*)?(?:Local\s+|Global\s+)?((?:{})\s+([^\W\d][\w']*)[\s\S]*)".format("|".join(STATEMENT_KEYWORDS))
)
_PROOF_END = re.compile(r"(Qed|Defined|Admitted|Abort|Save)\b.*")
_PLAIN_MODULE = re.compile(r"Module\s+(?:Import\s+|Export\s+)?([^\W\d][\w']*)\s*\.")
_SCOPE = re.compile(r"(?:Local\s+|Global\s+)?Open\s+Scope\s+([\w.']+)\s*\.")


def theories_dir() -> Path:
    where = subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(where) / "theories"


def library_name(path: Path, theories: Path) -> str:
    return "Coq." + ".".join(path.relative_to(theories).with_suffix("").parts)


def lemmas_of(path: Path, theories: Path, per_file: int) -> list[dict]:
    """The first `per_file` candidate lemmas of one file, each with its header (see the module docstring)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    sentences = split_sentences(text)
    library = library_name(path, theories)
    requires: list[str] = []
    scopes: list[str] = []
    blocks: list[str | None] = []  # a module's name, or None for a section, functor or module type
    found: list[dict] = []
    index = 0
    while index < len(sentences) and len(found) < per_file:
        sentence = " ".join(sentences[index].text(text).split())
        index += 1
        if sentence.startswith(("Section ", "Module Type ", "Declare Module")):
            blocks.append(None) if not sentence.startswith("Declare") else None
        elif sentence.startswith("Module "):
            plain = _PLAIN_MODULE.fullmatch(sentence)
            if plain is not None:
                blocks.append(plain.group(1))
            elif ":=" not in sentence:
                blocks.append(None)
        elif sentence.startswith("End ") and blocks:
            blocks.pop()
        elif not blocks and re.match(r"(From\s+\S+\s+)?Require\s|Import\s|Export\s", sentence):
            if header_problem(sentence) is None:
                requires.append(sentence)
        elif (scope := _SCOPE.fullmatch(sentence)) is not None and None not in blocks:
            scopes.append(f"Open Scope {scope.group(1)}.")
        elif (declaration := _DECLARATION.fullmatch(sentence)) is not None and None not in blocks:
            proof_start = index
            while index < len(sentences) and not _PROOF_END.fullmatch(sentences[index].text(text)):
                index += 1
            if index >= len(sentences):
                break
            end = sentences[index]
            if not end.text(text).startswith(("Qed", "Defined")) or proof_start == index:
                continue
            statement = _DECLARATION.fullmatch(sentences[proof_start - 1].text(text).strip()).group(1)
            module = ".".join(block for block in blocks if block)
            header = [f"Require Import {library}.", *requires]
            if module:
                header.append(f"Import {library}.{module}.")
            found.append(
                {
                    "source": f"{path.relative_to(theories)}:{declaration.group(2)}",
                    "header": "\n".join([*dict.fromkeys(header), *dict.fromkeys(scopes)]),
                    "statement": statement,
                    "proof": text[sentences[proof_start].start : end.end],
                    "name": declaration.group(2),
                }
            )
            index += 1
    return found


def compiles_alone(lemma: dict) -> tuple[bool, list[str]]:
    """Whether the lemma compiles with coqc alone with no axiom outside WHITELIST; and the axioms it uses."""
    source = "\n".join([lemma["header"], lemma["statement"], lemma["proof"], f"Print Assumptions {lemma['name']}.", ""])
    with tempfile.TemporaryDirectory() as scratch:
        file = Path(scratch) / "Lemma.v"
        file.write_text(source, encoding="utf-8")
        try:
            run = subprocess.run(
                ["coqc", "-q", str(file)], capture_output=True, text=True, timeout=COQC_TIMEOUT_S, cwd=scratch
            )
        except subprocess.TimeoutExpired:
            return False, []
    if run.returncode != 0:
        return False, []
    axioms, findings = read_assumptions(run.stdout)
    return not findings and all(whitelisted(name, WHITELIST) for name in axioms), axioms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-file", type=int, default=3, help="candidate lemmas taken from each file (default: 3)")
    parser.add_argument("--jobs", type=int, default=2, help="coqc processes at a time (default: 2)")
    args = parser.parse_args()
    theories = theories_dir()
    candidates = [lemma for path in sorted(theories.rglob("*.v")) for lemma in lemmas_of(path, theories, args.per_file)]
    print(f"{len(candidates)} candidate lemmas from {theories}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        verdicts = list(pool.map(compiles_alone, candidates))
    kept = []
    for lemma, (ok, axioms) in zip(candidates, verdicts, strict=True):
        if ok:
            kept.append({key: lemma[key] for key in ("source", "header", "statement", "proof")} | {"axioms": axioms})
    CORPUS.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(CORPUS, "wt", encoding="utf-8") as out:
        for lemma in kept:
            out.write(json.dumps(lemma, ensure_ascii=False) + "\n")
    print(f"{len(kept)} compile alone with coqc (no axiom outside {', '.join(WHITELIST)}): {CORPUS}")


if __name__ == "__main__":
    main()
