"""One long-lived coqidetop: the header loaded once, then proof after proof, each undone with `Edit_at` so the next
starts from the header's state. Its isolation (session, RLIMIT_AS, scratch HOME, bubblewrap) is
`prover_pool.worker`'s.

A run (`run_code`) adds the trusted statement, then the proof's sentences one `Add` each (Coq parses only the
first sentence of an `Add`), then `Qed.`, and runs them with one `Status`. Coq stops at the first error: its
answer names the last good state, so the failing sentence is the one after it. The goals before that sentence
come from `Goal` at the last good state. On a pass, `Check <name>.` (and, when asked, `Print Assumptions <name>.`)
run as queries on the final state, and `Locate` gives the full name of each printed axiom a qualified
whitelist entry could stand for (`coq.judge.to_locate`). The statement's own `Check` (with `Admitted.` in place of a proof) is computed
once per statement and kept, for the judge to compare with.

Framing: coqidetop answers every call with feedback and then exactly one `<value>`; a `<value>` nobody asked for
means the output can no longer be matched to calls, and the worker is killed (WorkerCompromised). A proof cannot
print one: Coq escapes what it prints (`coq.protocol`).

Timeout: at the deadline the process gets SIGINT; Coq answers "User interrupt." at the running sentence and the
worker stays (the run comes back with `timeout` set). If it does not answer within INTERRUPT_GRACE_S it is
killed (WorkerTimeout) and the pool replaces it.

Exhaustion: Coq answers "Out of memory." (RLIMIT_AS) or "Stack overflow." as an ordinary error, but the process
stays at its ceiling and would fail every later proof the same way; the run marks the worker used up, and the pool
retires it right after the run, as at `max_uses_per_worker`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import signal
import time

from trl_verigate.coq import protocol
from trl_verigate.coq.config import INSTALL_COMMAND, CoqServerConfig
from trl_verigate.coq.judge import located_constant, read_assumptions, to_locate
from trl_verigate.coq.precheck import CoqJob
from trl_verigate.coq.sentences import split_sentences
from trl_verigate.coq.toolchain import CoqToolProcess
from trl_verigate.prover_pool import procfs
from trl_verigate.prover_pool.worker import WorkerCompromised, WorkerCrashed, WorkerStartError, WorkerTimeout

SUPPORTED_PROTOCOLS = (protocol.PROTOCOL_VERSION,)
INTERRUPT_GRACE_S = 2.0
READ_CHUNK = 1 << 16
# What one proof may make coqidetop print (`do 30000 idtac "…"` makes 30 MB): past it the worker is killed and the
# proof is "crashed", so no flood is parsed on the event loop every worker shares.
MAX_OUTPUT_BYTES = 4 << 20
# Statements whose reference `Check` a process keeps (a GRPO batch repeats each statement once per completion).
REFERENCE_CACHE = 1024
# How Coq reports exhausting its memory (RLIMIT_AS) or stack: an ordinary error that leaves the process unusable.
EXHAUSTED = re.compile(r"(Out of memory|Stack overflow)\.")


class CoqProcess(CoqToolProcess):
    """A coqidetop with a loaded header; not safe for concurrent runs (the pool serialises them)."""

    PROGRAM = "coqidetop"
    PROTOCOL_ERRORS = (protocol.ProtocolError,)

    def __init__(self, config: CoqServerConfig):
        super().__init__(config)
        self.config = config
        self.header: str | None = None
        self.header_state: int | None = None
        self.coq_version: str | None = None
        self.header_loads = 0
        self._frames = protocol.FrameReader()
        self._nodes: asyncio.Queue = asyncio.Queue()
        # Answers owed: calls written whose <value> the reader has not seen yet.
        self._due = 0
        self._output_bytes = 0  # what coqidetop printed during the current run (`run_code`)
        self._breach: str | None = None
        self._references: collections.OrderedDict[str, dict] = collections.OrderedDict()

    # ------------------------------------------------------------ start

    async def start(self, header: str) -> None:
        """Spawn coqidetop, check its protocol (`About`), `Init`, and load `header`; WorkerStartError on any failure."""
        await self.start_and_load(
            list(self.config.coqidetop_command),
            lambda: self._load(header),
            "check the header's libraries are compiled (.vo files)",
            "check CoqServerConfig.coqidetop_command (`trl-verigate coq-doctor`)",
        )

    async def _load(self, header: str) -> None:
        answer, _ = await self._call(protocol.about())
        version, protocol_version = protocol.read_coq_info(answer)
        self.coq_version = version
        if protocol_version not in SUPPORTED_PROTOCOLS:
            raise WorkerStartError(
                f"coqidetop is Coq {version} speaking XML protocol {protocol_version}; this server speaks "
                f"{', '.join(SUPPORTED_PROTOCOLS)} (Coq 8.16): install Coq 8.16 (`{INSTALL_COMMAND}` on Debian 12) "
                "or point CoqServerConfig.coqidetop_command at it"
            )
        answer, _ = await self._call(protocol.init())
        state = protocol.read_state_id(answer)
        for sentence in split_sentences(header):
            answer, _ = await self._call(protocol.add(sentence.text(header), state))
            if not answer.good:
                raise WorkerStartError(
                    f"coqidetop refused the header sentence {sentence.text(header)!r}: {answer.message}; fix "
                    "CoqServerConfig.header (or the request's header) or install the libraries it requires"
                )
            state = protocol.read_state_id(answer)
        answer, feedback = await self._call(protocol.status())
        if not answer.good:
            errors = [f.text for f in feedback if f.level == "error"] or [answer.message]
            raise WorkerStartError(
                f"coqidetop could not load the header {header[:200]!r}: {'; '.join(errors)}; fix "
                "CoqServerConfig.header (or the request's header) or install the libraries it requires"
            )
        self.header, self.header_state = header, state
        self.header_loads += 1

    # ------------------------------------------------------------ one proof

    async def run_code(self, job: CoqJob, timeout: float) -> dict:
        """Coq's account of `job` (see the module docstring): a dict the judge reads."""
        if not self.alive:
            raise WorkerCrashed(f"coqidetop is not running ({self.describe_exit()})")
        self.uses += 1
        self._output_bytes = 0
        started = time.monotonic()
        response: dict = {"timeout": False}
        try:
            await self.answer_or_kill(asyncio.wait_for(self._run(job, response), timeout), started)
        except asyncio.TimeoutError:
            await self._interrupt(response, started)
        if _exhausted(response):
            # Coq answers an ordinary error, but the process stays at its RLIMIT_AS ceiling (or with a spent
            # stack) and every later proof on it would fail the same way: the pool retires a worker at its use
            # limit, right after this run.
            self.uses = max(self.uses, self.config.max_uses_per_worker)
        return response

    async def _run(self, job: CoqJob, response: dict) -> None:
        reference = await self.reference(job)
        response["reference"] = reference
        if reference.get("error") is not None:
            return
        messages: list[dict] = []
        response["messages"] = messages
        chain: list[int] = []  # state ids: the statement's, each sentence's, then Qed's
        state = self.header_state
        parse_failure = None
        for index, text in enumerate((job.statement, *job.sentences, "Qed.")):
            answer, _ = await self._call(protocol.add(text, state))
            if not answer.good:
                parse_failure = (index, answer.message, answer.loc)
                break
            state = protocol.read_state_id(answer)
            chain.append(state)
        answer, feedback = await self._call(protocol.status())
        owner = {state_id: index for index, state_id in enumerate(chain)}
        for item in feedback:
            if item.kind == "message" and item.state_id in owner and item.level != "error":
                messages.append({"index": owner[item.state_id] - 1, "level": item.level, "text": item.text})
        if not answer.good:
            errors = [f for f in feedback if f.level == "error"]
            # The error's own state names the failing sentence; the answer's state is the last good one, except
            # when the kernel refuses at Qed (Coq then names the proof's start).
            if errors and errors[-1].state_id in owner:
                failing = owner[errors[-1].state_id]
            elif answer.state_id == self.header_state or answer.state_id in owner:
                failing = 0 if answer.state_id == self.header_state else owner[answer.state_id] + 1
            else:
                raise protocol.ProtocolError("garbage", f"Status failed after state {answer.state_id}, not this run's")
            text = errors[-1].text if errors else answer.message
            loc = errors[-1].loc if errors else answer.loc
            response["failure"] = {"index": failing - 1, "text": text, "loc": loc}
            if failing >= 1:
                response["goals_before"] = await self._goals_at(chain[failing - 1])
        elif parse_failure is not None:
            index, text, loc = parse_failure
            response["failure"] = {"index": index - 1, "text": text, "loc": loc, "syntax": True}
            if index >= 1:
                response["goals_before"] = await self._goals_at(chain[-1])
        else:
            response["check"] = await self._query(f"Check {job.name}.", state)
            if job.print_assumptions:
                response["assumptions"] = await self._query(f"Print Assumptions {job.name}.", state)
                response["located"] = await self._locate(response["assumptions"], state)
        await self._back_to_header()

    async def reference(self, job: CoqJob) -> dict:
        """{"check": the trusted statement's `Check` output} or {"error": why it does not elaborate}; cached."""
        cached = self._references.get(job.statement)
        if cached is not None:
            self._references.move_to_end(job.statement)
            return cached
        answer, _ = await self._call(protocol.add(job.statement, self.header_state))
        if not answer.good:
            result = {"error": answer.message}
        else:
            statement_state = protocol.read_state_id(answer)
            answer, _ = await self._call(protocol.add("Admitted.", statement_state))
            admitted_state = protocol.read_state_id(answer) if answer.good else None
            answer, feedback = await self._call(protocol.status()) if answer.good else (answer, [])
            if answer.good:
                result = {"check": await self._query(f"Check {job.name}.", admitted_state)}
            else:
                result = {"error": next((f.text for f in feedback if f.level == "error"), answer.message)}
        await self._back_to_header()
        self._references[job.statement] = result
        if len(self._references) > REFERENCE_CACHE:
            self._references.popitem(last=False)
        return result

    async def _locate(self, assumptions: str, state: int) -> dict[str, str]:
        """printed name -> full name, for each printed axiom the whitelist could accept only by its full name."""
        located = {}
        for name in read_assumptions(assumptions)[0]:
            if to_locate(name, self.config.axiom_whitelist):
                full = located_constant(await self._query(f"Locate {name}.", state))
                if full is not None:
                    located[name] = full
        return located

    async def _goals_at(self, state: int) -> list[str]:
        answer, _ = await self._call(protocol.edit_at(state))
        if not answer.good:
            return []
        answer, _ = await self._call(protocol.goal())
        return (protocol.read_goals(answer) or []) if answer.good else []

    async def _query(self, text: str, state: int) -> str:
        answer, feedback = await self._call(protocol.query(text, state))
        if not answer.good:
            return f"error: {answer.message}"
        # "Fetching opaque proofs from disk for ..." notices come before the answer's own message.
        notices = [f.text for f in feedback if f.kind == "message" and not f.text.startswith("Fetching opaque")]
        return notices[-1] if notices else ""

    async def _back_to_header(self) -> None:
        answer, _ = await self._call(protocol.edit_at(self.header_state))
        if not answer.good:
            raise protocol.ProtocolError("garbage", f"Edit_at back to the header's state failed: {answer.message}")

    async def _interrupt(self, response: dict, started: float) -> None:
        """SIGINT the running coqidetop; keep it if it answers "User interrupt." in time, else kill it."""
        try:
            if self._due:
                for pid in procfs.process_tree(self.pid) if self.pid is not None else ():
                    if _is_coqidetop(pid):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGINT)
                await asyncio.wait_for(self._answer(), INTERRUPT_GRACE_S)
            await asyncio.wait_for(self._back_to_header(), INTERRUPT_GRACE_S)
        except (asyncio.TimeoutError, protocol.ProtocolError, WorkerCompromised, BrokenPipeError, ConnectionResetError):
            await self._kill()
            raise WorkerTimeout(
                "no answer within the timeout, nor after SIGINT; coqidetop was killed", time.monotonic() - started
            ) from None
        response["timeout"] = True

    # ------------------------------------------------------------ the wire

    async def _call(self, data: bytes) -> tuple[protocol.Answer, list[protocol.Feedback]]:
        """Send one call; its answer and the feedback that came with it."""
        if self._breach is not None:
            raise WorkerCompromised(self._breach, request_sent=False)
        if self._process.returncode is not None:
            raise protocol.ProtocolError("eof", f"coqidetop exited ({self.describe_exit()})")
        self._due += 1
        self._process.stdin.write(data)
        await self._process.stdin.drain()
        return await self._answer()

    async def _answer(self) -> tuple[protocol.Answer, list[protocol.Feedback]]:
        feedback: list[protocol.Feedback] = []
        while True:
            node = await self._nodes.get()
            if isinstance(node, BaseException):
                raise node
            if node.tag == "feedback":
                feedback.append(protocol.read_feedback(node))
                continue
            return protocol.read_answer(node), feedback

    async def _read_stdout(self) -> None:
        """The only reader of coqidetop's stdout: queues each element; a `<value>` while no call waits is a breach."""
        stdout = self._process.stdout
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                kind = "truncated" if self._frames.inside_element else "eof"
                await self._nodes.put(protocol.ProtocolError(kind, "coqidetop's output ended"))
                return
            self._output_bytes += len(chunk)
            if self._output_bytes > MAX_OUTPUT_BYTES:
                detail = f"the proof made coqidetop print over {MAX_OUTPUT_BYTES >> 20} MiB"
                await self._nodes.put(protocol.ProtocolError("garbage", detail))
                return
            try:
                nodes = self._frames.feed(chunk)
            except protocol.ProtocolError as error:
                await self._nodes.put(error)
                return
            for node in nodes:
                if node.tag == "value":
                    if self._due == 0 and self._breach is None:
                        self._breach = "it wrote an answer when none was due"
                    self._due = max(self._due - 1, 0)
                await self._nodes.put(node)


def _exhausted(response: dict) -> bool:
    """Whether Coq reported running out of memory or stack during the run (its failure or the statement's)."""
    texts = (response.get("failure", {}).get("text"), response.get("reference", {}).get("error"))
    return any(text is not None and EXHAUSTED.match(text) for text in texts)


def _is_coqidetop(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
            return comm.read().strip().startswith("coqidetop")
    except OSError:
        return False
