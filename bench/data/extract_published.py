"""Build bench/data/published_proofs.jsonl.gz, the false-rejection corpus, from git dirs of its sources.

Every row is one `theorem`/`lemma`/`example` (compfiles: `problem`) whose body is a tactic proof (its first `:=`
outside brackets is followed by `by`), taken from a file its authors publish as Lean-checked: the statement (up to
and including that `:= by`), the proof (the lines after it up to the next line at column 0) and the file's header
(its `import`, `open` and `set_option` lines at column 0, not `… in`). A declaration whose proof says `sorry` or `admit` is left out (an unfinished proof is no
honest one), and so is one using a tactic its own file declares. Seed-Prover's miniF2F files are also kept whole,
as file rows (`kind: "file"`, `text`). See SOURCES.md for the sources, commits and licences.

    python bench/data/extract_published.py --mathlib <git dir> --compfiles <git dir> --seed-prover <git dir>
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "published_proofs.jsonl.gz"
# Every source is published under Apache-2.0 (SOURCES.md).
PINS = {
    "leanprover-community/mathlib4": "54df8a3f96ac6f0b356728db732feb977d017aab",
    "dwrensha/compfiles": "8a363976ab59fef22acc2d3926430aeb14cecdcc",
    "ByteDance-Seed/Seed-Prover": "7d3875a2bd68538d1f98ea62f5c9a56035d33b5f",
}
DECLARATION = re.compile(
    r"^(?:@\[[^\]\n]*\]\s*)?(?:(?:private|protected|noncomputable|nonrec)\s+)*(?P<kw>theorem|lemma|example|problem)\b"
    r"(?:\s+(?P<name>[^\s({\[:]+))?",
    re.MULTILINE,
)
BY = re.compile(r":=\s*by\b")
WHERE = re.compile(r"(?<![\w.'])where\b")
HEADER_LINE = re.compile(r"^(?:import|open|set_option)\s(?!.*\sin\s*$)[^\n]*$", re.MULTILINE)
LOCAL_TACTIC = re.compile(
    r'^\s*(?:(?:local|scoped)\s+)?(?:syntax|macro|elab)\b[^\n"]*"([^"\s]+)[^\n]*:\s*tactic', re.MULTILINE
)
UNFINISHED = re.compile(r"(?<![\w.])(?:sorry|admit)(?![\w'!?])")
BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)


def git(gitdir: str, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True).stdout


def body_by(code: str, start: int, end: int) -> re.Match | None:
    """The `:= by` that starts the declaration's body: its first `:=` outside brackets, when `by` follows it. None
    for a term body, equations (`|`) or a structure body (`where`)."""
    depth = 0
    for i in range(start, end):
        c = code[i]
        depth += (c in "([{⟨") - (c in ")]}⟩")
        if depth:
            continue
        if code.startswith(":=", i):
            return BY.match(code, i)
        if c == "|" and code[code.rfind("\n", 0, i) + 1 : i].strip() == "" or WHERE.match(code, i):
            return None
    return None


def proofs_of(text: str, only_name: str | None = None):
    """(name, statement, proof) of each top-level declaration proved by a tactic block; `only_name`: that one only.
    A proof using a tactic its own file declares is left out: as a request on its own, Lean would not know it."""
    local = {re.escape(head) for head in LOCAL_TACTIC.findall(text)}
    uses_local = re.compile(rf"(?<![\w.])(?:{'|'.join(local)})(?![\w'!?])") if local else None
    code = BLOCK_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # same offsets, no comments
    for m in DECLARATION.finditer(code):
        if only_name and (m.group("name") or "").split(".")[-1] != only_name:
            continue
        next_top = re.compile(r"^\S", re.MULTILINE).search(code, code.find("\n", m.end()) + 1)
        end = next_top.start() if next_top else len(code)
        by = body_by(code, m.end(), end)
        if by is None:
            continue
        statement, proof = text[m.start() : by.end()], text[by.end() : end].rstrip()
        if m.group("kw") == "problem":  # compfiles' `problem` is its `theorem` (ProblemExtraction)
            statement = "theorem" + statement[len("problem") :]
        if uses_local and uses_local.search(proof):
            continue
        if proof.strip() and not UNFINISHED.search(BLOCK_COMMENT.sub("", proof)):
            yield m.group("name") or f"example@{text.count(chr(10), 0, m.start()) + 1}", statement, proof


def rows_of_file(source: str, origin: str, licence: str, text: str, only_name: str | None = None) -> list[dict]:
    header = "\n".join(line for line in HEADER_LINE.findall(text) if not line.startswith("import ProblemExtraction"))
    return [
        {
            "id": f"{source}/{origin.rsplit(':', 1)[-1]}/{name}",
            "source": source,
            "kind": "proof",
            "header": header,
            "statement": statement,
            "proof": proof,
            "origin": origin,
            "licence": licence,
        }
        for name, statement, proof in proofs_of(text, only_name)
    ]


def tree_files(gitdir: str, commit: str, prefix: str) -> list[str]:
    names = git(gitdir, "ls-tree", "-r", "--name-only", commit, prefix).decode().splitlines()
    return sorted(n for n in names if n.endswith(".lean"))


def git_rows(source: str, repo: str, gitdir: str, prefix: str, named=lambda path: None) -> list[dict]:
    """The rows of every .lean file under `prefix` of `repo` at its pin; `named(path)`: the one theorem to take."""
    commit, rows = PINS[repo], []
    for path in tree_files(gitdir, commit, prefix):
        text = git(gitdir, "show", f"{commit}:{path}").decode("utf-8", errors="replace")
        rows += rows_of_file(source, f"github.com/{repo}@{commit}:{path}", "Apache-2.0", text, named(path))
    return rows


def theorem_named_by_file(path: str) -> str:
    """miniCTX-v2 names each file after the theorem the prover proved in it (`Namespace.theorem.lean`)."""
    return Path(path).stem.split(".")[-1]


def seed_minif2f_rows(gitdir: str) -> list[dict]:
    commit, rows = PINS["ByteDance-Seed/Seed-Prover"], []
    archive = zipfile.ZipFile(io.BytesIO(git(gitdir, "show", f"{commit}:SeedProver/MiniF2F.zip")))
    for path in sorted(n for n in archive.namelist() if n.endswith(".lean") and not n.startswith("__MACOSX")):
        origin = f"github.com/ByteDance-Seed/Seed-Prover@{commit}:SeedProver/MiniF2F.zip:{path}"
        text = archive.read(path).decode("utf-8")
        rows += rows_of_file("seed-prover-minif2f", origin, "Apache-2.0", text)
        rows.append(
            {
                "id": f"seed-prover-minif2f-files/{path}",
                "source": "seed-prover-minif2f-files",
                "kind": "file",
                "header": "\n".join(HEADER_LINE.findall(text)),
                "text": text,
                "origin": origin,
                "licence": "Apache-2.0",
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, repo in zip(("--mathlib", "--compfiles", "--seed-prover"), PINS, strict=True):
        parser.add_argument(flag, required=True, help=f"git dir holding {repo} at {PINS[repo]}")
    args = parser.parse_args()
    rows = git_rows("mathlib-archive", "leanprover-community/mathlib4", args.mathlib, "Archive")
    rows += git_rows("compfiles", "dwrensha/compfiles", args.compfiles, "Compfiles")
    rows += seed_minif2f_rows(args.seed_prover)
    seed = "ByteDance-Seed/Seed-Prover"
    rows += git_rows("seed-prover-minictx-v2", seed, args.seed_prover, "SeedProver/miniCTX-v2", theorem_named_by_file)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    with gzip.GzipFile(OUT, "wb", mtime=0) as out:  # no timestamp: the same rows give the same bytes
        out.write(text.encode("utf-8"))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["source"]] = counts.get(row["source"], 0) + 1
    print(counts, f"{OUT.stat().st_size / 1000:.0f} KB")


if __name__ == "__main__":
    main()
