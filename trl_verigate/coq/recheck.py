"""The coqchk recheck tier: the passes of one `CoqServer.verify` call compiled again outside coqidetop and checked
by coqchk, Coq's independent kernel checker.

For each header, one file holds every pass of the batch, each in its own module::

    <trusted header>
    Module VG_0.
    <trusted statement>
    Proof.
    <the proof's sentences, one per line>
    Qed.
    Locate verigate_<nonce>_begin_0.  Check <name>.  Locate verigate_<nonce>_end_0.
    End VG_0.

`coqc` compiles it (Coq's own parser splits the proof here, not ours), and `coqchk -o -norec` checks the compiled
library with its own kernel and prints the context summary. A pass stays passed when its module compiled, its
`Check` (between the two markers, whose random nonce a proof cannot know, so it cannot print a fake) is the
trusted statement's, and the summary lists no axiom declared in the file and no constant relying on type-in-type,
an unsafe (co)fixpoint or an assumed positivity. coqchk exits 0 whatever it reports, so the summary is parsed; no
summary is a checker failure. The summary covers every library loaded, so the axioms of the header's libraries
are judged by `Print Assumptions` against `axiom_whitelist`: in coqidetop (`coq.judge`), or in this file for a pass
whose coqidetop run skipped it (`print_assumptions` "sample" or "never").

When the batch file fails to compile, its summary shows a problem, or the checkers fail on it, each pass is
compiled on its own to find which: a refused pass becomes "failed" ("recheck: ..."), a pass the checkers fail on
alone while they check the others is "failed" as too costly to check, and checkers that cannot check even one pass
alone fail their candidates closed ("error"). coqc and coqchk run sandboxed like the workers (`coq.toolchain`), with `recheck_timeout` each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets
import time
from pathlib import Path

from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.judge import read_assumptions, whitelisted
from trl_verigate.coq.precheck import Prepared
from trl_verigate.coq.toolchain import CoqToolProcess
from trl_verigate.prover_pool.results import VerificationResult
from trl_verigate.prover_pool.worker import WorkerError

LIBRARY = "VG"
MODULE = "Batch"
OUTPUT_TAIL = 600
_UNSAFE_SECTIONS = (
    "Constants/Inductives relying on type-in-type",
    "Constants/Inductives relying on unsafe (co)fixpoints",
    "Inductives whose positivity is assumed",
)


class CheckerFailure(Exception):
    """coqc or coqchk could not check anything (missing, crashed, no summary): the candidates fail closed."""


@dataclasses.dataclass
class ToolOutput:
    returncode: int | None
    stdout: str
    stderr: str


class CoqTool(CoqToolProcess):
    """One run of coqc or coqchk in a fresh scratch directory holding `files` (name -> text or bytes)."""

    def __init__(self, config: CoqServerConfig, files: dict[str, str | bytes]):
        super().__init__(config)
        self.files = files

    def prepare_scratch(self, scratch: Path, argv: list[str]) -> list[str]:
        for name, content in self.files.items():
            if isinstance(content, bytes):
                (scratch / name).write_bytes(content)
            else:
                (scratch / name).write_text(content, encoding="utf-8")
        return [arg.replace("{scratch}", str(scratch)) for arg in argv]

    async def run(self, argv: list[str], timeout: float, keep: str | None = None) -> tuple[ToolOutput, bytes | None]:
        """Run `argv` ("{scratch}" stands for the scratch directory) to its exit, killed past `timeout`; its output
        and the bytes of the file `keep` it wrote (None when it wrote none)."""
        try:
            await self.spawn(argv)
            self._process.stdin.close()
            stdout = await asyncio.wait_for(self._process.stdout.read(), timeout)
            await asyncio.wait_for(self._process.wait(), timeout)
            for task in self.reader_tasks():
                await task
            output = ToolOutput(self._process.returncode, stdout.decode("utf-8", errors="replace"), self.stderr_tail())
            written = self._scratch / keep if keep is not None else None
            return output, written.read_bytes() if written is not None and written.is_file() else None
        except asyncio.TimeoutError:
            raise CheckerFailure(f"{argv[0]} took longer than CoqServerConfig.recheck_timeout={timeout:g} s") from None
        except WorkerError as error:
            raise CheckerFailure(str(error)) from None
        finally:
            await self.close()


def batch_source(header: str, candidates: list[Prepared], nonce: str) -> str:
    """The file coqc compiles. A pass whose `Print Assumptions` coqidetop skipped (`print_assumptions="sample"` or
    "never") gets one here, so the axiom whitelist holds for every pass the recheck confirms."""
    parts = [header.strip()]
    for index, prepared in enumerate(candidates):
        job = prepared.code
        parts += [
            f"Module VG_{index}.",
            job.statement,
            "Proof.",
            *job.sentences,
            "Qed.",
            f"Locate verigate_{nonce}_begin_{index}.",
            f"Check {job.name}.",
            f"Locate verigate_{nonce}_middle_{index}.",
            "" if job.print_assumptions else f"Print Assumptions {job.name}.",
            f"Locate verigate_{nonce}_end_{index}.",
            f"End VG_{index}.",
        ]
    return "\n".join(parts) + "\n"


def checks_printed(stdout: str, nonce: str, count: int) -> list[tuple[str, str] | None]:
    """Each module's (`Check` output, `Print Assumptions` output or ""), read between its markers; None where the
    markers are missing."""
    found: list[tuple[str, str] | None] = []
    for index in range(count):
        marker = f"No object of basename verigate_{nonce}"
        match = re.search(
            rf"{marker}_begin_{index}\n(.*?)\n{marker}_middle_{index}\b\n?(.*?)\n?{marker}_end_{index}\b",
            stdout,
            re.S,
        )
        found.append((match.group(1).strip(), match.group(2).strip()) if match else None)
    return found


def summary_problems(output: str) -> list[str]:
    """What coqchk's context summary holds against the checked library; CheckerFailure when there is none."""
    if "CONTEXT SUMMARY" not in output:
        raise CheckerFailure(f"coqchk printed no context summary: {output[-OUTPUT_TAIL:]!r}")
    sections: dict[str, list[str]] = {}
    current = None
    for line in output[output.index("CONTEXT SUMMARY") :].splitlines():
        heading = re.match(r"\* (.+?):(.*)$", line.strip())
        if heading:
            current = heading.group(1)
            rest = heading.group(2).strip()
            sections[current] = [] if rest in ("", "<none>") else [rest]
        elif current is not None and line.strip():
            sections[current].append(line.strip())
    if "Axioms" not in sections:
        raise CheckerFailure(f"coqchk's summary has no Axioms section: {output[-OUTPUT_TAIL:]!r}")
    problems = [f"axiom {name}" for name in sections["Axioms"] if name.startswith(f"{LIBRARY}.")]
    for title in _UNSAFE_SECTIONS:
        problems += [f"{name} ({title.lower()})" for name in sections.get(title, [])]
    return problems


@dataclasses.dataclass
class Candidate:
    """A pass to recheck: what coqidetop ran, its result, and the trusted statement's `Check` output."""

    prepared: Prepared
    result: VerificationResult
    statement_check: str


class CoqRechecker:
    """Rechecks passes with coqc and coqchk; counts what it found (`metrics`)."""

    def __init__(self, config: CoqServerConfig):
        self.config = config
        self.counters = {"rechecked": 0, "recheck_overturned": 0, "recheck_checker_failures": 0}
        self.seconds = 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "coq/rechecked": self.counters["rechecked"],
            "coq/recheck_overturned": self.counters["recheck_overturned"],
            "coq/recheck_checker_failures": self.counters["recheck_checker_failures"],
            "coq/recheck_seconds": self.seconds,
        }

    async def recheck(self, candidates: list[Candidate]) -> list[VerificationResult]:
        """The final result of each candidate, in order."""
        started = time.monotonic()
        results: list[VerificationResult] = [candidate.result for candidate in candidates]
        by_header: dict[str, list[int]] = {}
        for index, candidate in enumerate(candidates):
            by_header.setdefault(candidate.prepared.header, []).append(index)
        for header, indices in by_header.items():
            group = [candidates[i] for i in indices]
            try:
                verdicts = await self._check_batch(header, group)
            except CheckerFailure as error:
                verdicts = [f"checker failed: {error}"] * len(group)
                failed_closed = True
            else:
                failed_closed = False
            for index, verdict in zip(indices, verdicts, strict=True):
                results[index] = self._final(results[index], verdict, failed_closed)
        self.seconds += time.monotonic() - started
        return results

    def _final(self, result: VerificationResult, verdict: str | None, failed_closed: bool) -> VerificationResult:
        self.counters["rechecked"] += 1
        if verdict is None:
            return dataclasses.replace(result, rechecked=True)
        self.counters["recheck_checker_failures" if failed_closed else "recheck_overturned"] += 1
        return dataclasses.replace(
            result,
            status="error" if failed_closed else "failed",
            passed=False,
            first_error_tactic=0,
            rechecked=True,
            reason=f"recheck: {verdict}",
        )

    async def _check_batch(self, header: str, group: list[Candidate]) -> list[str | None]:
        """None for each candidate the checkers confirm, else why not; the batch at once, then one by one.

        CheckerFailure only when the checkers cannot check even one candidate alone: then they do not work here.
        A candidate they fail on alone while they check the others (coqchk has no VM, so a `vm_compute` proof can
        cost it minutes and gigabytes) is refused as too costly to check, and cannot take its batch down with it.
        """
        try:
            verdicts = await self._check_file(header, group)
        except CheckerFailure:
            if len(group) == 1:
                raise
        else:
            if len(group) == 1 or all(verdict is None for verdict in verdicts):
                return verdicts
        # The batch does not say whose problem it is: each candidate alone.
        alone: list[str | None | CheckerFailure] = []
        for candidate in group:
            try:
                alone.append((await self._check_file(header, [candidate]))[0])
            except CheckerFailure as error:
                alone.append(error)
        if all(isinstance(verdict, CheckerFailure) for verdict in alone):
            raise alone[0]
        return [f"too costly to check on its own: {v}" if isinstance(v, CheckerFailure) else v for v in alone]

    async def _check_file(self, header: str, group: list[Candidate]) -> list[str | None]:
        nonce = secrets.token_hex(8)
        source = batch_source(header, [candidate.prepared for candidate in group], nonce)
        library = f"{LIBRARY}.{MODULE}"
        timeout = self.config.recheck_timeout
        output, vo = await CoqTool(self.config, {f"{MODULE}.v": source}).run(
            [
                *self.config.coqc_command,
                "-q",
                "-native-compiler",
                "no",
                "-R",
                "{scratch}",
                LIBRARY,
                f"{{scratch}}/{MODULE}.v",
            ],
            timeout,
            keep=f"{MODULE}.vo",
        )
        if output.returncode != 0 or vo is None:
            reason = f"coqc refused it (exit {output.returncode}): {(output.stdout + output.stderr)[-OUTPUT_TAIL:]}"
            return [reason] * len(group)
        checked, _ = await CoqTool(self.config, {f"{MODULE}.vo": vo}).run(
            [*self.config.coqchk_command, "-silent", "-o", "-R", "{scratch}", LIBRARY, "-norec", library], timeout
        )
        # coqchk prints its summary on stderr.
        problems = summary_problems(checked.stdout + "\n" + checked.stderr)
        printed = checks_printed(output.stdout, nonce, len(group))
        verdicts: list[str | None] = []
        for candidate, found in zip(group, printed, strict=True):
            check, assumptions = found if found is not None else (None, "")
            if problems:
                verdicts.append("coqchk: " + "; ".join(problems))
            elif check != candidate.statement_check:
                verdicts.append(f"the compiled theorem is not the trusted statement: Check gives {check!r}")
            else:
                verdicts.append(self._assumption_problem(assumptions) if assumptions else None)
        return verdicts

    def _assumption_problem(self, assumptions: str) -> str | None:
        """Why `Print Assumptions` output refuses a pass (an axiom off the whitelist, a bypass), else None."""
        axioms, findings = read_assumptions(assumptions)
        outside = sorted(name for name in set(axioms) if not whitelisted(name, self.config.axiom_whitelist))
        if findings or outside:
            return "Print Assumptions: " + "; ".join([*findings, *(f"axiom {name}" for name in outside)])
        return None
