"""The recheck tier: a separate checker, in which no submitted code has run, confirms the REPL's passes.

Code inside a proof can run during elaboration and forge the REPL's answer (see README, soundness). So a
candidate the REPL judges ``passed`` can be sent to an independent checker that rebuilds the proof term and checks
it with the Lean kernel against the *trusted* statement. `LeanServerConfig.recheck` chooses which passes go:
``"auto"`` (the default: the audit sample, when `trl-verigate lean-doctor`'s self-test verified the checker, see
`self_test`; else none), ``"none"``, ``"passed"`` (all) or ``"sample"`` (the audit sample: a seeded
`recheck_sample_rate` of the passes until the first overturn, every pass after it; see `audit`).

Checker contract (version 1)
============================

A checker is any program; `LeanServerConfig.recheck_command` is its argv. `trl-verigate lean-recheck --backend
replay|comparator` implements it (see `trl_verigate.lean_server.recheck.backends`); a third party may write another.

The server runs the checker once per batch of candidates (one `LeanServer.verify` call; a batch over
`MAX_ITEMS_PER_RUN` items or `MAX_PAYLOAD_BYTES` bytes is split into several runs, one after the other), in its own
session, with `LeanServerConfig.project_dir` as its working directory when that is set (so ``lean-recheck``'s
default ``--project-dir .`` is the REPL's project), and writes ONE JSON object to its stdin, then closes stdin::

    {"version": 1,
     "items": [{"id": "0",
                "header": "import Mathlib\\n...",     # imports and options (trusted for a ProofRequest)
                "statement": "theorem t (x : ℕ) : x + 0 = x := by",
                "theorem": "t",                        # the declaration whose proof to check
                "proof": "  simp",                     # either "proof" ...
                "file": null,                          # ... or "file", never both
                "axiom_whitelist": ["propext", "Classical.choice", "Quot.sound"]},
               ...]}

- ``statement`` is the TRUSTED claim, ending in ``:= by``: the dataset's statement of a `ProofRequest`, or the
  ``statement`` of a `FileRequest`. The checker must elaborate it itself (``header`` + statement + ``sorry``, the
  challenge) and never take the claim from the submission. An ``example`` is sent renamed to
  ``theorem <theorem>`` exactly as the REPL ran it (`Prepared.code`: wherever the keyword stands, after a doc
  comment, an attribute, ``open … in`` or helper declarations; the rest of its line moves to the next line).
- ``proof`` (a `ProofRequest`): the submitted proof body; the submission is ``header + "\\n\\n" + statement +
  "\\n" + proof``.
- ``file`` (a `FileRequest` or a plain ``str`` request): the complete submitted file as the REPL ran it (its
  header, its helper declarations, the main theorem; an ``example`` renamed). For a plain ``str`` request there is
  no trusted statement: ``statement`` is the file's own main statement, so the checker confirms the file against
  itself only (a real kernel-checked proof of what the file claims, with whitelisted axioms), not against a
  dataset.
- ``axiom_whitelist``: the axioms the proof may depend on (`LeanServerConfig.axiom_whitelist`).

The checker writes exactly one line per item to stdout, in any order, each one JSON object::

    {"id": "0", "ok": true, "axioms": ["propext"], "message": "kernel replay ok"}

``ok`` is true only when the theorem named ``theorem`` in the submission is accepted by the kernel, its type is the
challenge's (same name, identical type expression, same universe parameters), and every axiom it depends on is in
``axiom_whitelist``. ``axioms`` is the list of axioms it depends on, or null when the checker does not report them
(the server then relies on the checker's own whitelist check). ``message`` says why, for a refusal.
Blank lines are ignored; the checker's stderr is kept for error reports only. ``ok: false`` is a verdict about
the SUBMISSION only: when the checker's own machinery fails (a tool missing, a project that compiles nothing, a
trusted statement it cannot elaborate, a replay program that fails on a known-good item) it must exit non-zero, so
the run fails closed instead of overturning true proofs. Tools the checker starts must not outlive it (the server
kills only its process group).

What the server makes of it:

- ``ok: true`` (and ``axioms``, when given, inside the whitelist): the candidate stays ``passed``.
- ``ok: false``, or axioms outside the whitelist: the candidate becomes ``failed`` with reason
  ``"recheck: <message>"`` and counts in ``lean/recheck_overturned``.
- A checker failure (non-zero exit, a missing, extra, duplicate or unparsable line, or a run longer than
  `LeanServerConfig.recheck_timeout`, after which its process group is killed) fails CLOSED: every candidate of that
  run becomes ``error`` with reason ``"recheck: checker failed: ..."``; none is passed.

An overturned or failed-closed candidate keeps the REPL's messages and tactics but gets ``first_error_tactic = 0``:
the REPL's judgement of its tactics is exactly what the checker did not confirm.

Metrics (`Rechecker.metrics`, exposed as `LeanServer.metrics`), cumulative since start; a trainer logs the
difference between two steps: ``lean/rechecked`` (candidates sent), ``lean/recheck_overturned`` (passes the checker
refused), ``lean/recheck_checker_failures`` (candidates failed closed), ``lean/recheck_seconds`` (wall time in the
checker).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from trl_verigate.lean_server.core import FileRequest, LeanServerConfig, ProofRequest, Request, VerificationResult
from trl_verigate.lean_server.recheck.audit import Audit

CONTRACT_VERSION = 1
REASON_PREFIX = "recheck: "
# Chunks keep one checker run's stdin and its Lean environments to a size a machine handles.
MAX_ITEMS_PER_RUN = 512
MAX_PAYLOAD_BYTES = 64 << 20
STDERR_TAIL_CHARS = 2000


class CheckerFailure(Exception):
    """The checker did not keep the contract: every candidate of that run fails closed."""


@dataclass(frozen=True)
class RecheckItem:
    """One candidate as the checker receives it (see the module docstring for each field)."""

    id: str
    header: str
    statement: str
    theorem: str
    axiom_whitelist: tuple[str, ...]
    proof: str | None = None
    file: str | None = None

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "header": self.header,
            "statement": self.statement,
            "theorem": self.theorem,
            "proof": self.proof,
            "file": self.file,
            "axiom_whitelist": list(self.axiom_whitelist),
        }


@dataclass(frozen=True)
class CheckerVerdict:
    id: str
    ok: bool
    axioms: list[str] | None
    message: str


def _statement_as_run(prepared) -> str:
    # The REPL ran `prepared.code`: the preamble, then the statement with its `example` (wherever it stands: after a
    # doc comment, an attribute, `open … in`, helper declarations) renamed to `theorem <prepared.theorem_name>`, then
    # the proof.
    return prepared.code[: prepared.proof_start - len(prepared.separator)]


def item_for(request: Request, prepared, whitelist: Sequence[str], item_id: str) -> RecheckItem:
    """The checker's item for `request`, which the REPL ran as `prepared` (a `precheck.Prepared`) and passed.

    The item's header is the trusted header as the REPL read it: its imports, then its preamble (`open`,
    `set_option`); the statement is elaborated under it.
    """
    header = prepared.header + ("\n" + prepared.trusted_preamble if prepared.trusted_preamble else "")
    if isinstance(request, ProofRequest):
        # The trusted statement, renamed exactly as the REPL ran it (only an `example` is).
        statement = _statement_as_run(prepared)[len(prepared.trusted_preamble) :].lstrip("\n")
        proof, file = request.proof, None
    else:
        # A FileRequest's trusted statement is a named `theorem`/`lemma` (files.prepare_file), so never renamed;
        # a plain file has no trusted claim and is checked against its own main statement.
        trusted = request.statement if isinstance(request, FileRequest) else None
        statement = trusted if trusted is not None else _statement_as_run(prepared).strip()
        proof, file = None, prepared.header + "\n" + prepared.code[: prepared.proof_end]
    return RecheckItem(
        id=item_id,
        header=header,
        statement=statement,
        theorem=prepared.theorem_name,
        axiom_whitelist=tuple(whitelist),
        proof=proof,
        file=file,
    )


def chunks(items: list[RecheckItem]) -> list[list[RecheckItem]]:
    """`items` split into runs of at most `MAX_ITEMS_PER_RUN` items and about `MAX_PAYLOAD_BYTES` of JSON."""
    runs: list[list[RecheckItem]] = []
    current: list[RecheckItem] = []
    size = 0
    for item in items:
        item_size = len(json.dumps(item.to_json(), ensure_ascii=False).encode())
        if current and (len(current) >= MAX_ITEMS_PER_RUN or size + item_size > MAX_PAYLOAD_BYTES):
            runs.append(current)
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        runs.append(current)
    return runs


def _verdict_of(line: str, number: int) -> CheckerVerdict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise CheckerFailure(f"stdout line {number} is not JSON ({error.msg}): {line[:200]!r}") from None
    if not isinstance(row, dict):
        raise CheckerFailure(f"stdout line {number} is not a JSON object: {line[:200]!r}")
    item_id, ok, message, axioms = row.get("id"), row.get("ok"), row.get("message"), row.get("axioms")
    if not isinstance(item_id, str) or not isinstance(ok, bool) or not isinstance(message, str):
        raise CheckerFailure(
            f"stdout line {number} needs a string 'id', a boolean 'ok' and a string 'message': {line[:200]!r}"
        )
    if axioms is not None and not (isinstance(axioms, list) and all(isinstance(a, str) for a in axioms)):
        raise CheckerFailure(f"stdout line {number}: 'axioms' must be a list of names or null: {line[:200]!r}")
    return CheckerVerdict(item_id, ok, axioms, message)


def parse_verdicts(stdout: str, ids: Sequence[str]) -> dict[str, CheckerVerdict]:
    """One verdict per id from the checker's stdout; CheckerFailure unless there is exactly one line per id."""
    expected = set(ids)
    verdicts: dict[str, CheckerVerdict] = {}
    for number, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        verdict = _verdict_of(line, number)
        if verdict.id not in expected:
            raise CheckerFailure(f"stdout line {number} answers id {verdict.id!r}, which was not sent")
        if verdict.id in verdicts:
            raise CheckerFailure(f"stdout line {number} answers id {verdict.id!r} a second time")
        verdicts[verdict.id] = verdict
    missing = [item_id for item_id in ids if item_id not in verdicts]
    if missing:
        raise CheckerFailure(f"no verdict for {len(missing)} of {len(ids)} items (ids {missing[:10]})")
    return verdicts


async def run_checker(
    argv: Sequence[str], items: list[RecheckItem], timeout: float, cwd: str | None = None
) -> dict[str, CheckerVerdict]:
    """Run the checker once on `items` in directory `cwd` (None: this process's); their verdicts by id, or
    CheckerFailure (see the contract)."""
    payload = json.dumps({"version": CONTRACT_VERSION, "items": [item.to_json() for item in items]}).encode()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as error:
        where = f" in {cwd}" if cwd is not None else ""
        raise CheckerFailure(f"cannot start recheck_command {list(argv)!r}{where}: {error}") from None
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(payload), timeout)
    except asyncio.TimeoutError:
        raise CheckerFailure(f"no answer within recheck_timeout={timeout:g} s; its process group was killed") from None
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            await process.wait()
    tail = stderr.decode("utf-8", "replace")[-STDERR_TAIL_CHARS:].strip()
    if process.returncode != 0:
        raise CheckerFailure(f"exit status {process.returncode}; stderr: {tail or '(empty)'}")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CheckerFailure(f"stdout is not UTF-8 ({error})") from None
    return parse_verdicts(text, [item.id for item in items])


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def overturned(verdict: CheckerVerdict, whitelist: Sequence[str]) -> str | None:
    """Why the checker's `verdict` refuses the REPL's pass, or None when it confirms it."""
    if not verdict.ok:
        return verdict.message or "the checker refused the proof without a message"
    outside = sorted(set(verdict.axioms or ()) - set(whitelist))
    if outside:
        return f"the checker found axioms outside axiom_whitelist: {outside}"
    return None


def _demoted(result: VerificationResult, status: str, reason: str, extra_s: float) -> VerificationResult:
    return replace(
        result,
        status=status,
        passed=False,
        rechecked=True,
        first_error_tactic=0,
        reason=REASON_PREFIX + reason,
        time_s=result.time_s + extra_s,
    )


class Rechecker:
    """Selects a batch's REPL passes per `config.recheck`, runs the checker on them, and counts what it finds.

    One checker run at a time per server: each imports the header's modules (Mathlib: GBs), so concurrent
    `verify()` calls queue here instead of multiplying that memory.
    """

    def __init__(self, config: LeanServerConfig, mode: str | None = None):
        """`mode`: the recheck mode in force ("none", "passed", "sample"; `self_test.effective_recheck` resolves
        "auto"); None: `config.recheck`, which must then not be "auto"."""
        self.config = config
        self.mode = config.recheck if mode is None else mode
        self.audit = Audit(self.mode, config.recheck_seed, config.recheck_sample_rate)
        self.counters = {"rechecked": 0, "recheck_overturned": 0, "recheck_checker_failures": 0}
        self.seconds = 0.0
        # Made on the loop that uses it: a server started again runs on a new loop.
        self._one_run_at_a_time: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def selects(self, request: Request) -> bool:
        return self.audit.selects(request)

    def metrics(self) -> dict[str, float]:
        """Cumulative `lean/...` metrics (see the module docstring)."""
        return {
            **{f"lean/{name}": count for name, count in self.counters.items()},
            "lean/recheck_seconds": self.seconds,
            "lean/recheck_escalated": float(self.audit.escalated),
        }

    async def audit_batch(
        self, candidates: list[tuple[Request, object, VerificationResult]]
    ) -> list[VerificationResult]:
        """Final results for a batch's REPL passes (request, prepared, passed result), in order: the ones the audit
        selects rechecked in one run; when that run escalated, the batch's other passes in a second, so a hack's
        passes in the step that caught it get no reward either."""
        results = [result for _, _, result in candidates]
        escalated_before = self.audit.escalated
        chosen = [index for index, (request, _, _) in enumerate(candidates) if self.selects(request)]
        await self._recheck_into(candidates, results, chosen)
        if self.audit.escalated and not escalated_before:
            left_out = sorted(set(range(len(candidates))) - set(chosen))
            await self._recheck_into(candidates, results, left_out)
        return results

    async def _recheck_into(self, candidates, results: list[VerificationResult], indices: list[int]) -> None:
        if indices:
            finals = await self.recheck([candidates[index] for index in indices])
            for index, final in zip(indices, finals, strict=True):
                results[index] = final

    async def recheck(self, candidates: list[tuple[Request, object, VerificationResult]]) -> list[VerificationResult]:
        """Final results for `candidates` (request, prepared, passed result), in order."""
        whitelist = self.config.axiom_whitelist
        items = [item_for(request, prepared, whitelist, str(i)) for i, (request, prepared, _) in enumerate(candidates)]
        results = [result for _, _, result in candidates]
        loop = asyncio.get_running_loop()
        if self._lock_loop is not loop:
            self._one_run_at_a_time, self._lock_loop = asyncio.Lock(), loop
        for run in chunks(items):
            failure = None
            async with self._one_run_at_a_time:
                # Timed inside the lock: the metric is time in the checker, not waiting for another batch's run.
                started = time.monotonic()
                try:
                    verdicts = await run_checker(
                        self.config.recheck_command, run, self.config.recheck_timeout, self.config.project_dir
                    )
                except CheckerFailure as error:
                    failure = str(error)
                elapsed = time.monotonic() - started
            self.seconds += elapsed
            self.counters["rechecked"] += len(run)
            share = elapsed / len(run)
            for item in run:
                index = int(item.id)
                if failure is not None:
                    self.counters["recheck_checker_failures"] += 1
                    results[index] = _demoted(results[index], "error", f"checker failed: {failure}", share)
                    continue
                why = overturned(verdicts[item.id], self.config.axiom_whitelist)
                if why is None:
                    results[index] = replace(results[index], time_s=results[index].time_s + share, rechecked=True)
                else:
                    self.counters["recheck_overturned"] += 1
                    results[index] = _demoted(results[index], "failed", why, share)
                    self.audit.record_overturn(candidates[index][0], candidates[index][1].theorem_name, why)
        return results
