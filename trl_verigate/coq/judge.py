"""The verdict on coqidetop's account of one proof (`coq.process.CoqProcess.run_code`).

Passed only when every sentence ran, our `Qed.` closed the proof, `Check <name>.` prints what it printed for the
trusted statement (Coq prints the type after beta-iota reduction, so this compares the elaborated statements, not
their spelling), and `Print Assumptions <name>.` (when it ran) lists nothing outside
`CoqServerConfig.axiom_whitelist` (a qualified entry matched by the axiom's full name, from `Locate`): no other axiom, no `Admitted` lemma, no guard, positivity or universe bypass.

Steps: `tactics` are the proof's sentences, bullets and braces each a step of their own, as Coq runs them (a wrong
bullet or a `}` with goals left fails on its own sentence, so the step that failed is the sentence Coq refused).
`first_error_tactic` is the failing sentence's index; `len(tactics)` when every sentence ran but goals remained
(`Qed.` refused the proof: incomplete, as the Lean side counts "unsolved goals"); 0 when a pass is overturned by the
statement or assumption check (no tactic is then known good). `goals` holds the goals before the failing sentence,
or those left open at `Qed.`.
"""

from __future__ import annotations

import re

from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.precheck import Prepared
from trl_verigate.prover_pool.results import Message, Position, VerificationResult

CLOSED = "Closed under the global context"
# An axiom's name as Print Assumptions prints it (the `Locate` query takes nothing else).
_NAME = re.compile(r"[^\W\d][\w']*(\.[^\W\d][\w']*)*")


def position_in(text: str, offset: int) -> Position:
    """The 1-based line and 0-based column of character `offset` in `text`."""
    before = text[:offset]
    line = before.count("\n") + 1
    return Position(line, offset - (before.rfind("\n") + 1))


def _char_offset(sentence: str, byte_offset: int) -> int:
    """Coq's locations count bytes of the sentence; this is the character offset."""
    return len(sentence.encode("utf-8")[: max(byte_offset, 0)].decode("utf-8", errors="ignore"))


def read_assumptions(text: str) -> tuple[list[str], list[str]]:
    """(axiom names, other findings such as "f is assumed to be guarded.") from `Print Assumptions` output.

    An axiom is a line that starts with its name: `classic : forall P : Prop, P \\/ ~ P`, or the name alone with
    the type on the next, indented lines (`functional_extensionality_dep` then `  : forall ...`)."""
    if text.strip() == CLOSED:
        return [], []
    axioms: list[str] = []
    findings: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.strip() or line[:1].isspace() or line.rstrip().endswith(":") and " " not in line.strip():
            continue  # a type's continuation, or a section title such as "Axioms:"
        name, colon, _ = line.partition(" : ")
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if colon and " " not in name:
            axioms.append(name)
        elif " " not in line.strip() and following[:1].isspace() and following.lstrip().startswith(": "):
            axioms.append(line.strip())
        else:
            findings.append(line.strip())
    if not axioms and not findings:
        findings.append(f"unreadable Print Assumptions output {text[:200]!r}")
    return axioms, findings


def whitelisted(name: str, whitelist: tuple[str, ...]) -> bool:
    """Whether the axiom `name` is on the whitelist, `name` being its full name or as `Print Assumptions` printed
    it. A plain entry (`classic`) matches by the last component; a qualified one only a name that ends with it
    (`Coq.Reals.ClassicalDedekindReals.sig_forall_dec` ends with `ClassicalDedekindReals.sig_forall_dec`), never a
    shorter name: Coq prints the shortest name that is unambiguous, so a bare `add_spec` may be
    `Coq.Floats.FloatAxioms.add_spec` while the entry names `Coq.Numbers.Cyclic.Int63.Uint63.add_spec`."""
    short = name.rpartition(".")[2]
    return any(name == entry or name.endswith("." + entry) if "." in entry else short == entry for entry in whitelist)


def to_locate(name: str, whitelist: tuple[str, ...]) -> bool:
    """Whether the printed axiom `name` needs its full name (`Locate`) before the whitelist can accept it: it is
    shorter than a qualified entry that ends with it."""
    return (
        _NAME.fullmatch(name) is not None
        and not whitelisted(name, whitelist)
        and any("." in entry and entry.endswith("." + name) for entry in whitelist)
    )


def qualified_suffixes(whitelist: tuple[str, ...]) -> list[str]:
    """Every shorter name a qualified entry could be printed as (`to_locate` holds for each that is an axiom)."""
    suffixes = set()
    for entry in whitelist:
        parts = entry.split(".")
        suffixes.update(".".join(parts[start:]) for start in range(1, len(parts)))
    return sorted(suffixes)


def located_constant(text: str) -> str | None:
    """The full name `Locate <name>.` gives first (the referent of `name` where it ran), when it is a constant."""
    match = re.match(r"Constant (\S+)\s*$", text.strip().split("\n", 1)[0])
    return match.group(1) if match else None


def judge(prepared: Prepared, response: dict, config: CoqServerConfig, time_s: float) -> VerificationResult:
    tactics = list(prepared.tactics)
    proof = prepared.request.proof
    count = len(tactics)
    if response.get("timeout"):
        return VerificationResult(
            status="timeout", tactics=tactics, time_s=time_s, reason="Coq did not finish within the timeout"
        )
    reference = response.get("reference", {})
    if reference.get("error") is not None:
        return VerificationResult(
            status="error",
            tactics=tactics,
            time_s=time_s,
            reason=f"the trusted statement does not elaborate in the header: {reference['error']}",
        )
    messages = [
        _message(proof, tactics, item["index"], item.get("level") or "info", item["text"], None)
        for item in response.get("messages", [])
        if 0 <= item["index"] < count
    ]
    failure = response.get("failure")
    if failure is not None and failure["index"] < 0:
        return VerificationResult(
            status="error",
            tactics=tactics,
            time_s=time_s,
            reason=f"Coq refused the trusted statement after elaborating it once: {failure['text']}",
        )
    if failure is not None:
        index = failure["index"]
        messages.append(_message(proof, tactics, min(index, count), "error", failure["text"], failure.get("loc")))
        what = "Qed refused the proof" if index >= count else f"sentence {index} failed"
        return VerificationResult(
            status="failed",
            messages=messages,
            tactics=tactics,
            first_error_tactic=min(index, count),
            time_s=time_s,
            reason=f"{what}: {failure['text']}",
            goals=list(response.get("goals_before", [])),
        )
    check = response.get("check")
    if check != reference.get("check"):
        return VerificationResult(
            status="failed",
            messages=messages,
            tactics=tactics,
            time_s=time_s,
            reason=f"the proved theorem is not the trusted statement: Check gives {check!r}, the statement "
            f"{reference.get('check')!r}",
        )
    axioms: list[str] = []
    if "assumptions" in response:
        axioms, findings = read_assumptions(response["assumptions"])
        located = response.get("located", {})
        outside = [name for name in axioms if not whitelisted(located.get(name, name), config.axiom_whitelist)]
        if outside or findings:
            return VerificationResult(
                status="failed",
                messages=messages,
                tactics=tactics,
                axioms=axioms,
                time_s=time_s,
                reason="Print Assumptions: "
                + "; ".join([*(f"axiom {name} is not whitelisted" for name in outside), *findings]),
            )
    return VerificationResult(
        status="passed", messages=messages, tactics=tactics, first_error_tactic=count, axioms=axioms, time_s=time_s
    )


def _message(proof: str, tactics: list, index: int, severity: str, text: str, loc) -> Message:
    """A message on step `index` (the end of the proof for `len(tactics)`), at `loc` inside it when Coq gave one."""
    if index < len(tactics):
        step = tactics[index]
        start = step.start + (_char_offset(step.text, loc[0]) if loc else 0)
        end = step.start + _char_offset(step.text, loc[1]) if loc else step.end
    else:
        start = end = len(proof.rstrip())
    where = position_in(proof, start)
    return Message(severity, where.line, where.column, position_in(proof, end), text)
