"""coq.sentences against Coq itself: every span is compared with the span `coqc -time` reports for the same file
(byte offsets, converted from our character offsets), never with a hand-written expectation."""

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trl_verigate.coq.sentences import split_sentences

STDLIB = Path("/usr/lib/ocaml/coq/theories")
_SPAN = re.compile(r"^Chars (\d+) - (\d+) ", re.M)

# Each proof holds a trap for a splitter: dots in comments and strings, nested comments with strings that hold
# `*)`, doubled quotes, qualified names, numbers, `..` of a recursive notation, `...`, bullets, braces, `N: {`.
TRICKY = r"""Require Import Arith.
(* a comment. with (* a nested one. *) and "a string *) inside." *)
Notation "'ex3' x .. y , p" := (ex (fun x => .. (ex (fun y => p)) ..)) (at level 200, x binder, y binder).
Lemma one : forall n : nat, n + 0 = n.
Proof.
  intros n. (* "*)" still a comment. *) induction n as [|n IH].
  - reflexivity.
  - simpl. rewrite IH. reflexivity.
Qed.
Lemma two : 1 + 1 = 2 /\ 2 = 2 /\ True.
Proof.
  split; [reflexivity|split].
  { idtac "a ""quoted"". string. (* not a comment *)". reflexivity. }
  1: { exact I. }
Qed.
Lemma two' : (1 = 1 /\ 2 = 2) /\ 3 = 3.
Proof.
  split.
  + split.
    ++ reflexivity.
    ++ reflexivity.
  + reflexivity.
Qed.
Definition three := Nat.add 1 2.
Lemma four : True.
Proof with auto.
  idtac;auto...
Qed.
Lemma five : 2 = 2.
Proof. cbv. - idtac. reflexivity.
Qed.
"""


def coqc_spans(source: Path, out_dir: Path, extra: tuple[str, ...] = ()) -> tuple[int, list[tuple[int, int]]]:
    """(coqc's exit status, the spans it timed, in order; a span Coq replays at Qed, such as an `Open Scope` inside a
    proof, is printed again and dropped here)."""
    done = subprocess.run(
        ["coqc", "-time", "-q", *extra, "-o", str(out_dir / (source.stem + ".vo")), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    spans: list[tuple[int, int]] = []
    for match in _SPAN.finditer(done.stdout):
        span = (int(match.group(1)), int(match.group(2)))
        if not spans or span[0] >= spans[-1][1]:
            spans.append(span)
    return done.returncode, spans


def our_spans(text: str) -> list[tuple[int, int]]:
    byte_offsets = [0]
    for char in text:
        byte_offsets.append(byte_offsets[-1] + len(char.encode("utf-8")))
    return [(byte_offsets[s.start], byte_offsets[s.end]) for s in split_sentences(text)]


def test_tricky_sentences_match_coqc(tmp_path):
    source = tmp_path / "Tricky.v"
    source.write_text(TRICKY, encoding="utf-8")
    returncode, expected = coqc_spans(source, tmp_path)
    assert returncode == 0
    assert our_spans(TRICKY) == expected
    assert len(expected) > 40


def test_an_unterminated_last_sentence_is_marked():
    (*_, last) = split_sentences("intros n. lia  \n")
    assert (last.start, last.end, last.terminated) == (10, 13, False)


def stdlib_files() -> list[Path]:
    files = sorted(STDLIB.rglob("*.v"))
    # Every fifth file keeps CI near two minutes on two cores; TRL_VERIGATE_COQ_ALL_STDLIB=1 checks all 562.
    return files if os.environ.get("TRL_VERIGATE_COQ_ALL_STDLIB") else files[::5]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_spans_match_coqc_over_the_standard_library(tmp_path):
    if not STDLIB.is_dir():
        pytest.skip(f"the Coq standard library sources are not at {STDLIB}")

    def compare(path: Path):
        out_dir = tmp_path / str(abs(hash(path)))
        out_dir.mkdir()
        init = ("-noinit",) if path.parent.name == "Init" else ()
        returncode, expected = coqc_spans(path, out_dir, (*init, "-R", str(STDLIB), "Coq"))
        return path, returncode, expected, our_spans(path.read_text(encoding="utf-8"))

    compared = sentences = 0
    mismatches = []
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for path, returncode, expected, ours in pool.map(compare, stdlib_files()):
            if returncode != 0:
                # A few files compile only inside Coq's own build (flags, native primitives); their printed prefix
                # is still compared.
                ours = ours[: len(expected)]
            compared += 1
            sentences += len(expected)
            if ours != expected:
                first = next(
                    i for i, (a, b) in enumerate(zip(ours + [None], expected + [None], strict=False)) if a != b
                )
                mismatches.append(
                    f"{path}: sentence {first}: ours {ours[first : first + 1]}, coqc {expected[first : first + 1]}"
                )
    assert not mismatches, "\n".join(mismatches[:20])
    assert compared >= 100 and sentences > 10_000
