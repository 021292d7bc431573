"""The coqchk recheck tier: each pass of a `CoqServer.verify` call compiled again outside coqidetop and checked by
coqchk, Coq's independent kernel checker.

Each pass gets a file of its own::

    <trusted header>
    <trusted statement>
    Proof.
    <the proof's sentences, one per line>
    Qed.
    Locate verigate_<nonce>_begin.  Check <name>.  Locate verigate_<nonce>_middle.
    [Print Assumptions <name>.]  Locate verigate_<nonce>_end.

`coqc` compiles it (Coq's own parser splits the proof here, not ours), and `coqchk -o -norec` checks the compiled
library with its own kernel and prints the context summary. A pass stays passed when it compiled, its `Check`
(between two markers whose random nonce a proof cannot know, so it cannot print a fake) is the trusted
statement's, and the summary lists no axiom declared in the file and no constant relying on type-in-type, an
unsafe (co)fixpoint or an assumed positivity. coqchk exits 0 whatever it reports, so the summary is parsed; no
summary is a checker failure. The summary covers every library loaded, so the axioms of the header's libraries
are judged by `Print Assumptions` against `axiom_whitelist`: in coqidetop (`coq.judge`), or in this file for a pass
whose coqidetop run skipped it (`print_assumptions` "sample" or "never").

The passes are rechecked side by side, at most `recheck_workers` at a time, each with its own limits: coqc and
coqchk together get `recheck_timeout` seconds, and each runs under `recheck_memory_limit_mb`. A pass they refuse
becomes "failed" ("recheck: ..."); so does a pass they cannot recheck within its limits (coqchk has no VM, so a
`vm_compute` step coqidetop runs in a moment can cost it minutes and gigabytes), without delaying the others.
Checkers that fail for any other reason (missing, crashed, no summary) fail their pass closed ("error"). coqc and
coqchk run sandboxed like the workers (`coq.toolchain`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets
import time
from pathlib import Path

from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.judge import located_constant, qualified_suffixes, read_assumptions, whitelisted
from trl_verigate.coq.precheck import Prepared
from trl_verigate.coq.toolchain import CoqToolProcess
from trl_verigate.prover_pool.results import VerificationResult
from trl_verigate.prover_pool.worker import WorkerError

LIBRARY = "VG"
MODULE = "Pass"
OUTPUT_TAIL = 600
_UNSAFE_SECTIONS = (
    "Constants/Inductives relying on type-in-type",
    "Constants/Inductives relying on unsafe (co)fixpoints",
    "Inductives whose positivity is assumed",
)
# How coqc and coqchk report running out of the memory RLIMIT_AS leaves them (OCaml's Out_of_memory, or an abort).
_OUT_OF_MEMORY = re.compile(r"out of memory|stack overflow", re.I)


class CheckerFailure(Exception):
    """coqc or coqchk gave no verdict. `costly`: because the pass did not fit its time or memory limit (the pass
    fails); otherwise the checker itself is broken (missing, crashed, no summary: the pass fails closed)."""

    def __init__(self, detail: str, costly: bool = False):
        super().__init__(detail)
        self.costly = costly


@dataclasses.dataclass
class ToolOutput:
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def out_of_memory(self) -> bool:
        return self.returncode is not None and self.returncode < 0 or bool(_OUT_OF_MEMORY.search(self.stderr))


class CoqTool(CoqToolProcess):
    """One run of coqc or coqchk in a fresh scratch directory holding `files` (name -> text or bytes)."""

    def __init__(self, settings, files: dict[str, str | bytes]):
        super().__init__(settings)
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
            raise CheckerFailure(f"{argv[0]} ran out of its time", costly=True) from None
        except WorkerError as error:
            raise CheckerFailure(str(error)) from None
        finally:
            await self.close()


def tool_settings(config: CoqServerConfig) -> CoqServerConfig:
    """The settings coqc and coqchk run under: the workers', with the recheck's own memory limit."""
    return dataclasses.replace(config, memory_limit_mb=config.recheck_memory_limit_mb)


async def compile_source(config: CoqServerConfig, source: str, timeout: float) -> tuple[ToolOutput, bytes | None]:
    """coqc's output on `source` (as the library VG.Pass) and the `.vo` it wrote, or None."""
    coqc = [*config.coqc_command, "-q", "-native-compiler", "no", "-R", "{scratch}", LIBRARY, f"{{scratch}}/{MODULE}.v"]
    return await CoqTool(tool_settings(config), {f"{MODULE}.v": source}).run(coqc, timeout, keep=f"{MODULE}.vo")


async def kernel_check(config: CoqServerConfig, vo: bytes, timeout: float) -> ToolOutput:
    """coqchk's output on the compiled VG.Pass; it prints its context summary on stderr."""
    coqchk = [*config.coqchk_command, "-silent", "-o", "-R", "{scratch}", LIBRARY, "-norec", f"{LIBRARY}.{MODULE}"]
    checked, _ = await CoqTool(tool_settings(config), {f"{MODULE}.vo": vo}).run(coqchk, timeout)
    return checked


def pass_source(header: str, prepared: Prepared, nonce: str, whitelist: tuple[str, ...] = ()) -> str:
    """The file coqc compiles. A pass whose `Print Assumptions` coqidetop skipped (`print_assumptions="sample"` or
    "never") gets one here, so the axiom whitelist holds for every pass the recheck confirms, and a `Locate` of
    every shorter name a qualified whitelist entry could be printed as (`located_names`)."""
    job = prepared.code
    locates = [] if job.print_assumptions else qualified_suffixes(whitelist)
    parts = [
        header.strip(),
        job.statement,
        "Proof.",
        *job.sentences,
        "Qed.",
        f"Locate verigate_{nonce}_begin.",
        f"Check {job.name}.",
        f"Locate verigate_{nonce}_middle.",
        "" if job.print_assumptions else f"Print Assumptions {job.name}.",
        f"Locate verigate_{nonce}_end.",
        *(line for name in locates for line in (f"Locate {name}.", f"Locate verigate_{nonce}_located.")),
    ]
    return "\n".join(parts) + "\n"


def check_printed(stdout: str, nonce: str) -> tuple[str, str] | None:
    """(`Check` output, `Print Assumptions` output or ""), read between the markers; None when they are missing."""
    marker = f"No object of basename verigate_{nonce}"
    match = re.search(rf"{marker}_begin\n(.*?)\n{marker}_middle\b\n?(.*?)\n?{marker}_end\b", stdout, re.S)
    return (match.group(1).strip(), match.group(2).strip()) if match else None


def located_names(stdout: str, nonce: str, whitelist: tuple[str, ...]) -> dict[str, str]:
    """printed name -> full name, from the `Locate`s after the end marker (`pass_source`): each answer ends with
    a marker no proof can print, since it cannot know the nonce."""
    marker = f"No object of basename verigate_{nonce}"
    _, found, after = stdout.partition(f"{marker}_end\n")
    answers = after.split(f"{marker}_located")[:-1] if found else []
    names = qualified_suffixes(whitelist)
    if len(answers) != len(names):
        return {}  # unreadable: a qualified entry then admits only an axiom printed in full
    located = {}
    for name, answer in zip(names, answers, strict=True):
        full = located_constant(answer)
        if full is not None:
            located[name] = full
    return located


def summary_sections(output: str) -> dict[str, list[str]]:
    """coqchk's context summary, section title -> entries; CheckerFailure when there is none."""
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
    return sections


def summary_problems(output: str) -> list[str]:
    """What coqchk's context summary holds against the checked library; CheckerFailure when there is none."""
    sections = summary_sections(output)
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
    """Rechecks passes with coqc and coqchk, side by side under a bound; counts what it found (`metrics`)."""

    def __init__(self, config: CoqServerConfig):
        self.config = config
        self._slots: asyncio.Semaphore | None = None
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
        """The final result of each candidate, in order; the candidates are rechecked concurrently."""
        started = time.monotonic()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.recheck_workers or self.config.workers)
        outcomes = await asyncio.gather(*(self._recheck_one(candidate) for candidate in candidates))
        results = [
            self._final(candidate.result, verdict, failed_closed)
            for candidate, (verdict, failed_closed) in zip(candidates, outcomes, strict=True)
        ]
        self.seconds += time.monotonic() - started
        return results

    async def _recheck_one(self, candidate: Candidate) -> tuple[str | None, bool]:
        """(None when the checkers confirm the pass, else why not; whether that fails it closed)."""
        async with self._slots:
            try:
                return await self._check(candidate), False
            except CheckerFailure as error:
                if not error.costly:
                    return f"checker failed: {error}", True
                limits = f"recheck_timeout={self.config.recheck_timeout:g} s"
                if self.config.recheck_memory_limit_mb is not None:
                    limits += f", recheck_memory_limit_mb={self.config.recheck_memory_limit_mb}"
                return f"too costly to recheck within CoqServerConfig.{limits}: {error}", False

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

    async def _check(self, candidate: Candidate) -> str | None:
        """None when coqc and coqchk confirm the pass within `recheck_timeout`, else why not."""
        deadline = time.monotonic() + self.config.recheck_timeout
        nonce = secrets.token_hex(8)
        prepared = candidate.prepared
        whitelist = self.config.axiom_whitelist
        source = pass_source(prepared.header, prepared, nonce, whitelist)
        output, vo = await compile_source(self.config, source, self.config.recheck_timeout)
        if output.returncode != 0 or vo is None:
            tail = (output.stdout + output.stderr)[-OUTPUT_TAIL:]
            if output.out_of_memory:
                raise CheckerFailure(f"coqc ran out of its memory: {tail}", costly=True)
            return f"coqc refused it (exit {output.returncode}): {tail}"
        checked = await kernel_check(self.config, vo, max(deadline - time.monotonic(), 0.001))
        try:
            problems = summary_problems(checked.stdout + "\n" + checked.stderr)
        except CheckerFailure as error:
            if checked.out_of_memory:
                raise CheckerFailure(f"coqchk ran out of its memory: {error}", costly=True) from None
            raise
        if problems:
            return "coqchk: " + "; ".join(problems)
        check, assumptions = check_printed(output.stdout, nonce) or (None, "")
        if check != candidate.statement_check:
            return f"the compiled theorem is not the trusted statement: Check gives {check!r}"
        if not assumptions:
            return None
        return self._assumption_problem(assumptions, located_names(output.stdout, nonce, whitelist))

    def _assumption_problem(self, assumptions: str, located: dict[str, str]) -> str | None:
        """Why `Print Assumptions` output refuses a pass (an axiom off the whitelist, a bypass), else None;
        `located` gives the full name of a printed name a qualified entry could stand for."""
        axioms, findings = read_assumptions(assumptions)
        whitelist = self.config.axiom_whitelist
        outside = sorted(name for name in set(axioms) if not whitelisted(located.get(name, name), whitelist))
        if findings or outside:
            return "Print Assumptions: " + "; ".join([*findings, *(f"axiom {name}" for name in outside)])
        return None


async def header_axioms(config: CoqServerConfig, header: str) -> list[str]:
    """The axioms the libraries `header` loads, as `Print Assumptions` names them; CheckerFailure when coqc or
    coqchk cannot tell.

    coqchk's summary of a file that is only the header lists every axiom loaded, and with them the fields of
    opaquely sealed modules (`ssrunder`'s, the Reals' `RbaseSymbolsImpl`), which have bodies: `Print Assumptions`
    on each keeps the axioms ("Closed under the global context" for a field)."""
    output, vo = await compile_source(config, header.strip() + "\n", config.recheck_timeout)
    if output.returncode != 0 or vo is None:
        raise CheckerFailure(f"coqc could not compile the header: {(output.stdout + output.stderr)[-OUTPUT_TAIL:]}")
    checked = await kernel_check(config, vo, config.recheck_timeout)
    listed = summary_sections(checked.stdout + "\n" + checked.stderr)["Axioms"]
    if not listed:
        return []
    queries = "\n".join([header.strip(), *(f"Print Assumptions {name}." for name in listed)]) + "\n"
    printed, _ = await compile_source(config, queries, config.recheck_timeout)
    if printed.returncode != 0:
        raise CheckerFailure(f"coqc could not print the header's assumptions: {printed.stderr[-OUTPUT_TAIL:]}")
    return sorted(set(read_assumptions(printed.stdout)[0]))
