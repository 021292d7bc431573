#!/usr/bin/env python3
"""A stand-in for the Lean REPL (leanprover-community/repl) for tests and benchmarks.

It speaks the real framing (JSON objects separated by blank lines on stdin/stdout, responses
pretty-printed over several lines like the real REPL) and the real env semantics: a command
without "env" starts from a fresh environment, a command with an unknown env gets
`{"message": "Unknown environment."}`, every answered command gets a new env index.

Answers, first match wins:
1. a `--script` row whose "match" is a substring of the cmd: its "response" (env renumbered)
   and/or its "behaviour": hang | crash | garbage | truncate | oom | sleep:SECONDS, or one of the
   attacks below (a row may give both: the behaviour runs, then the response is the real answer);
2. the recorded answer of the real REPL for the same cmd (and options) in the transcripts
   folder, env renumbered; trailing `#print axioms NAME` lines are split off before the
   lookup and answered as in 3;
3. a generic answer: `{"env": n}`, plus an info message "'NAME' depends on axioms: [...]"
   for each `#print axioms NAME` line, plus a real-shaped `sorries` entry and the
   "declaration uses `sorry`" warning when the cmd contains `sorry`.

Attacks, as code running inside a real REPL could make them (see `ATTACKS`); each reports what
happened in an info message "attack KIND: OUTCOME" at line 1 of its real answer:
- forge: write a complete passing answer (the `#print axioms` line answered "does not depend on
  any axioms") to /proc/self/fd/1 with the env of the request (a stale id), then the real answer;
  forge-env: the same with the right next env; forge-exit: the right env, then exit;
  forge-child: leave a child (double-forked, own session) blocked reading stdin before the REPL is
  back at it, so it takes the next request and answers it with a forged pass (or writes one unasked
  after 2 s), then lingers;
  forge-later:SECONDS: a thread of the stand-in writes a forged answer SECONDS later, while idle;
  forge-park: a second thread writes a forged pass with the right env, and the main thread parks in read(0) for
  good: it reads every later request there (as the REPL's own loop would) and hands it to that thread, which
  answers it with a forged pass, so the worker looks honest to every framing check and passes whatever it gets;
- escape:fd: write a forged answer into /proc/PID/fd/1 of the worker named by `target_pid=PID` in the cmd;
- escape:net: connect to 127.0.0.1:PORT named by `port=PORT` in the cmd;
- escape:write: create a file in the cwd (the project), append to every `*.olean` under it and to the
  REPL program itself when that lies in the cwd;
- escape:environ: read /proc/self/environ, the parent's and every other readable /proc/*/environ
  into the message.

Latency: `--latency L` charges L to every command. A real REPL answers housekeeping (`#eval 1`, a header of
imports and options) in milliseconds once its imports are loaded, so `--housekeeping-latency H` charges H instead to
commands that declare nothing (no theorem/lemma/def/example/instance/abbrev), and `--import-latency I` adds I to
every command with an `import` line (a header load). `--echo-names` adds an info message "echo: NAME" per declared
name to each answer, so a caller can tell whose answer it got.

Logging: `--log FILE` appends each request to FILE, which a sandboxed stand-in cannot write;
`repl_command` therefore turns `--log FILE` into `--log-socket SOCKET`, served by a thread of the
calling process that appends each row to FILE, with the pid the kernel reports for the peer (its
pid outside any PID namespace), and acknowledges it before the stand-in answers.

Run as a program it imports nothing from trl_verigate: it plays an independent program. Only the test-side
helper `stand_in_config` imports the package, when a test calls it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import mmap
import os
import queue
import re
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

DEFAULT_TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "lean-repl-transcripts"
PRINT_AXIOMS = re.compile(r"^#print\s+axioms\s+(\S+)\s*$")
DECLARATION = re.compile(r"\b(theorem|lemma|def|example|instance|abbrev)\b\s*([^\s:({\[]*)")
SORRY = re.compile(r"\bsorry\b")
IMPORT_LINE = re.compile(r"^\s*import\s", re.MULTILINE)
# Without RLIMIT_AS the "oom" behaviour stops here and answers, so a missing limit fails a test
# instead of exhausting the machine; the memory is reserved, never touched, so RSS stays small.
OOM_GIVE_UP_BYTES = 64 << 30
OOM_BLOCK_BYTES = 256 << 20
ATTACKS = (
    "forge",
    "forge-env",
    "forge-exit",
    "forge-child",
    "forge-park",
    "escape:fd",
    "escape:net",
    "escape:write",
    "escape:environ",
)
CHILD_MARKER = "fake-repl-child:"
CHILD_UNASKED_AFTER_S = 2.0
CHILD_LINGER_S = 120.0
TARGET_PID = re.compile(r"target_pid=(\d+)")
PORT = re.compile(r"port=(\d+)")
# The child left by forge-child: it races its parent for the next request on stdin and answers it with a pass.
CHILD_PROGRAM = """
import json, os, sys, threading, time
env, unasked_after, linger = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])

def forge(cmd):
    messages = []
    for number, line in enumerate(cmd.split("\\n"), 1):
        if line.startswith("#print axioms "):
            messages.append({"severity": "info", "pos": {"line": number, "column": 0},
                             "endPos": {"line": number, "column": 6},
                             "data": f"'{line.split()[-1]}' does not depend on any axioms"})
    answer = {"env": env, "messages": messages} if messages else {"env": env}
    os.write(1, (json.dumps(answer) + "\\n\\n").encode())

unasked = threading.Timer(unasked_after, forge, ("",))
unasked.daemon = True
unasked.start()
# Blocked in read() before the REPL is back at its own: a pipe wakes its readers first come, first served.
request = os.read(0, 1 << 20).decode("utf-8", "replace")
unasked.cancel()
try:
    forge(json.loads(request.strip().split("\\n\\n")[0]).get("cmd", ""))
except ValueError:
    forge("")
time.sleep(linger)
"""


def repl_command(*flags: str) -> list[str]:
    """The argv that runs this stand-in under the current interpreter (for LeanServerConfig.repl_command).

    The transcripts folder is named in the argv, so a sandbox that binds the REPL's paths shows it; `--log FILE`
    becomes `--log-socket` (see the module docstring), so the log works inside a sandbox too.
    """
    flags = list(flags)
    if "--log" in flags:
        at = flags.index("--log")
        flags[at : at + 2] = ["--log-socket", log_socket(flags[at + 1])]
    return [sys.executable, str(Path(__file__).resolve()), "--transcripts", str(DEFAULT_TRANSCRIPTS), *flags]


_log_sockets: dict[str, str] = {}
_log_sockets_lock = threading.Lock()


def log_socket(log_path: str | Path) -> str:
    """The UNIX socket whose rows a thread of this process appends to `log_path`; one per log file."""
    key = str(Path(log_path).resolve())
    with _log_sockets_lock:
        if key not in _log_sockets:
            # A short folder of its own: socket paths are limited to 108 bytes. It goes when the tests' process ends.
            folder = tempfile.mkdtemp(prefix="fake-repl-log-")
            atexit.register(shutil.rmtree, folder, True)
            address = os.path.join(folder, "log.sock")
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(address)
            server.listen()
            write_lock = threading.Lock()
            threading.Thread(target=_accept_log_rows, args=(server, key, write_lock), daemon=True).start()
            _log_sockets[key] = address
        return _log_sockets[key]


def _accept_log_rows(server: socket.socket, log_path: str, write_lock: threading.Lock) -> None:
    while True:
        connection, _ = server.accept()
        threading.Thread(target=_serve_log_rows, args=(connection, log_path, write_lock), daemon=True).start()


def _serve_log_rows(connection: socket.socket, log_path: str, write_lock: threading.Lock) -> None:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    peer_pid = struct.unpack("3i", credentials)[0]
    with connection, connection.makefile("rb") as rows:
        try:
            for line in rows:
                row = {"pid": peer_pid, "request": json.loads(line)["request"]}
                with write_lock, open(log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps(row, ensure_ascii=False) + "\n")
                connection.sendall(b"\n")
        except (BrokenPipeError, ConnectionResetError):
            return  # a stand-in killed mid-exchange (a test's crash or timeout): nothing left to log or acknowledge


def write_script(path: str | Path, rows: list[dict]) -> str:
    """Write `--script` rows to `path`; returns the path as a str for the flag."""
    Path(path).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def stand_in_config(tmp_path: str | Path, *flags: str, script=(), **overrides):
    """A `LeanServerConfig` running this stand-in, logging requests to `tmp_path/repl.log`.

    `script` rows go to `--script`; one worker and short timeouts unless `overrides` say otherwise.
    """
    from trl_verigate.lean_server.core.types import LeanServerConfig  # the stand-in itself runs without the package

    argv = ["--log", str(Path(tmp_path) / "repl.log"), *flags]
    if script:
        argv += ["--script", write_script(Path(tmp_path) / "script.jsonl", list(script))]
    overrides.setdefault("workers", 1)
    overrides.setdefault("timeout", 5.0)
    overrides.setdefault("startup_timeout", 10.0)
    return LeanServerConfig(repl_command=repl_command(*argv), project_dir=str(tmp_path), **overrides)


def read_log(path: str | Path) -> list[dict]:
    """The `--log` file's rows, {"pid": ..., "request": ...}, in the order the requests arrived.

    "pid" is the stand-in's pid on this machine, also when it runs in a sandbox's own PID namespace.
    """
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", default=str(DEFAULT_TRANSCRIPTS), help="folder of recorded REPL transcripts")
    parser.add_argument("--no-transcripts", action="store_true", help="answer every cmd generically")
    parser.add_argument("--axioms", default="propext", help="comma-separated axioms reported by #print axioms")
    parser.add_argument("--script", help="JSONL rows {match, response} or {match, behaviour}")
    parser.add_argument("--startup-delay", type=float, default=0.0, help="seconds to sleep before reading stdin")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to sleep before each answer")
    parser.add_argument(
        "--housekeeping-latency",
        type=float,
        help="seconds for a command that declares nothing (`#eval 1`, a header), instead of --latency",
    )
    parser.add_argument("--import-latency", type=float, default=0.0, help="extra seconds for a command that imports")
    parser.add_argument("--echo-names", action="store_true", help="answer each declared name with 'echo: NAME'")
    parser.add_argument("--log", help="append every request, with this process's pid, as a JSON line")
    parser.add_argument("--log-socket", help="send every request to this UNIX socket and wait for its ack")
    parser.add_argument("--exit-after", type=int, help="answer N commands, then exit with status 1 on the next one")
    return parser.parse_args(argv)


def read_blocks(path: Path) -> list[str]:
    return [block for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def request_key(request: dict) -> tuple[str, str]:
    options = {k: v for k, v in request.items() if k not in ("cmd", "env")}
    return request["cmd"], json.dumps(options, sort_keys=True)


def load_transcripts(folder: Path) -> dict[tuple[str, str], dict]:
    """Map (cmd, options) to the real REPL's response; error objects come from env semantics instead."""
    answers: dict[tuple[str, str], dict] = {}
    if not folder.is_dir():
        return answers
    for request_file in sorted(folder.glob("*.in")):
        response_file = request_file.with_name(request_file.name[: -len(".in")] + ".expected.out")
        if not response_file.exists():
            continue
        requests, responses = read_blocks(request_file), read_blocks(response_file)
        if len(requests) != len(responses):
            continue
        for request_text, response_text in zip(requests, responses, strict=True):
            try:
                request = json.loads(request_text, strict=False)
                response = json.loads(response_text)
            except json.JSONDecodeError:
                continue
            if "cmd" in request and "env" in response:
                answers.setdefault(request_key(request), response)
    return answers


def load_script(path: str | None) -> list[dict]:
    if not path:
        return []
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "match" not in row or not ("response" in row or "behaviour" in row):
            raise SystemExit(f"fake_repl: {path}:{number}: a row needs 'match' and 'response' or 'behaviour'")
        rows.append(row)
    return rows


def read_request(stdin) -> str | None:
    """The lines up to the next blank line; None at end of input."""
    lines: list[str] = []
    for line in stdin:
        if line.strip():
            lines.append(line)
        elif lines:
            return "".join(lines)
    return "".join(lines) if lines else None


def write_response(response: dict) -> None:
    sys.stdout.write(json.dumps(response, ensure_ascii=False, indent=1) + "\n\n")
    sys.stdout.flush()


def axioms_message(line_number: int, name: str, axioms: list[str]) -> dict:
    if axioms:
        text = f"'{name}' depends on axioms: [{', '.join(axioms)}]"
    else:
        text = f"'{name}' does not depend on any axioms"
    return {
        "severity": "info",
        "pos": {"line": line_number, "column": 0},
        "endPos": {"line": line_number, "column": len("#print")},
        "data": text,
    }


def split_print_axioms(cmd: str) -> tuple[str, list[tuple[int, str]]]:
    """The cmd without its trailing `#print axioms` lines, and those lines as (1-based line, name)."""
    lines = cmd.split("\n")
    found = []
    end = len(lines)
    while end > 0:
        stripped = lines[end - 1].strip()
        match = PRINT_AXIOMS.match(stripped)
        if match:
            found.append((end, match.group(1)))
        elif stripped:
            break
        end -= 1
    return "\n".join(lines[:end]), sorted(found)


def line_column(text: str, offset: int) -> dict:
    line = text.count("\n", 0, offset) + 1
    return {"line": line, "column": offset - (text.rfind("\n", 0, offset) + 1)}


def sorry_fields(cmd: str, proof_state: int) -> dict:
    sorry = SORRY.search(cmd)
    declarations = [d for d in DECLARATION.finditer(cmd) if d.start() < sorry.start()]
    if declarations:
        declaration = declarations[-1]
        name_start, name_end = declaration.span(2) if declaration.group(2) else declaration.span(1)
    else:
        name_start, name_end = sorry.span()
    return {
        "sorries": [
            {
                "proofState": proof_state,
                "pos": line_column(cmd, sorry.start()),
                "goal": "⊢ False",
                "endPos": line_column(cmd, sorry.end()),
            }
        ],
        "messages": [
            {
                "severity": "warning",
                "pos": line_column(cmd, name_start),
                "endPos": line_column(cmd, name_end),
                "data": "declaration uses `sorry`",
            }
        ],
    }


class FakeRepl:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.axioms = [a.strip() for a in args.axioms.split(",") if a.strip()]
        self.script = load_script(args.script)
        self.transcripts = {} if args.no_transcripts else load_transcripts(Path(args.transcripts))
        self.envs: set[int] = set()
        self.next_env = 0
        self.next_proof_state = 0
        self.commands = 0
        self.log_connection: socket.socket | None = None
        # Reports of attacks, put into the real answer as info messages.
        self.attack_reports: list[str] = []

    def log(self, request_text: str) -> None:
        if not (self.args.log or self.args.log_socket):
            return
        try:
            request = json.loads(request_text, strict=False)
        except json.JSONDecodeError:
            request = request_text
        line = json.dumps({"pid": os.getpid(), "request": request}, ensure_ascii=False) + "\n"
        if self.args.log_socket:
            if self.log_connection is None:
                self.log_connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.log_connection.connect(self.args.log_socket)
            self.log_connection.sendall(line.encode("utf-8"))
            # The row is in the log before the answer leaves, so a test reads every row of every answered request.
            self.log_connection.recv(1)
            return
        try:
            fd = os.open(self.args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise SystemExit(
                f"fake_repl: cannot write the --log file ({error}); inside a sandbox run the stand-in through "
                "fake_repl.repl_command(), which logs through a socket"
            ) from None
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def new_env(self) -> int:
        env = self.next_env
        self.next_env += 1
        self.envs.add(env)
        return env

    def answer(self, request: dict) -> dict:
        if "env" in request and request["env"] not in self.envs:
            return {"message": "Unknown environment."}
        if "cmd" not in request:
            return {"message": f"fake_repl only answers commands, got keys {sorted(request)}"}
        cmd = request["cmd"]
        for row in self.script:
            if row["match"] in cmd and "response" in row:
                response = dict(row["response"])
                if "env" in response:
                    response["env"] = self.new_env()
                return response
        response = self.recorded_answer(request)
        if response is None:
            response = self.generic_answer(cmd)
        response["env"] = self.new_env()
        return response

    def recorded_answer(self, request: dict) -> dict | None:
        cmd, options = request_key(request)
        if (cmd, options) in self.transcripts:
            return json.loads(json.dumps(self.transcripts[cmd, options]))
        body, axiom_lines = split_print_axioms(cmd)
        if not axiom_lines or (body, options) not in self.transcripts:
            return None
        response = json.loads(json.dumps(self.transcripts[body, options]))
        response.setdefault("messages", []).extend(self.axioms_messages(cmd, axiom_lines))
        return response

    def axioms_messages(self, cmd: str, axiom_lines: list[tuple[int, str]]) -> list[dict]:
        # Real Lean reports sorryAx for a proof that uses sorry; the stand-in approximates "uses" by "mentions".
        axioms = self.axioms + (["sorryAx"] if SORRY.search(cmd) else [])
        return [axioms_message(line, name, sorted(axioms)) for line, name in axiom_lines]

    def generic_answer(self, cmd: str) -> dict:
        response: dict = {}
        messages: list[dict] = []
        if SORRY.search(cmd):
            fields = sorry_fields(cmd, self.next_proof_state)
            self.next_proof_state += 1
            response["sorries"] = fields["sorries"]
            messages.extend(fields["messages"])
        _, axiom_lines = split_print_axioms(cmd)
        messages.extend(self.axioms_messages(cmd, axiom_lines))
        if messages:
            response["messages"] = messages
        return response

    def behave(self, behaviour: str, request: dict) -> bool:
        """Act out a scripted misbehaviour; True when the request still needs its normal answer."""
        if behaviour == "hang":
            while True:
                time.sleep(3600)
        if behaviour == "crash":
            sys.stderr.write("fake_repl: scripted crash\n")
            sys.stderr.flush()
            os._exit(1)
        if behaviour == "garbage":
            sys.stdout.write("PANIC at Lean.Elab: this is not JSON\n\n")
            sys.stdout.flush()
            return False
        if behaviour == "truncate":
            text = json.dumps(self.answer(request), indent=1)
            sys.stdout.write(text[: len(text) // 2])
            sys.stdout.flush()
            os._exit(1)
        if behaviour == "oom":
            reserved = []
            try:
                while len(reserved) * OOM_BLOCK_BYTES < OOM_GIVE_UP_BYTES:
                    reserved.append(mmap.mmap(-1, OOM_BLOCK_BYTES))
            except (OSError, MemoryError):
                sys.stderr.write(f"INTERNAL PANIC: out of memory after {len(reserved) * OOM_BLOCK_BYTES >> 20} MiB\n")
                sys.stderr.flush()
                os._exit(1)
            return True
        if behaviour.startswith("sleep:"):
            time.sleep(float(behaviour[len("sleep:") :]))
            return True
        if behaviour in ATTACKS or behaviour.startswith("forge-later:"):
            outcome = self.attack(behaviour, request)
            self.attack_reports.append(f"attack {behaviour}: {outcome}")
            return True
        raise SystemExit(f"fake_repl: unknown behaviour {behaviour!r}")

    def forged_answer(self, cmd: str, env) -> dict:
        """A clean answer to `cmd`: its `#print axioms` lines answered "does not depend on any axioms"."""
        _, axiom_lines = split_print_axioms(cmd)
        messages = [axioms_message(line, name, []) for line, name in axiom_lines]
        return {"env": env, "messages": messages} if messages else {"env": env}

    def attack(self, kind: str, request: dict) -> str:
        """Try the attack `kind` from inside the REPL; a sentence saying what happened."""
        cmd = request.get("cmd", "")
        if kind in ("forge", "forge-env", "forge-exit"):
            # The real answer will get self.next_env; a naive forger reuses the env the request names.
            env = request.get("env") if kind == "forge" else self.next_env
            fd = os.open("/proc/self/fd/1", os.O_WRONLY)
            try:
                os.write(fd, (json.dumps(self.forged_answer(cmd, env)) + "\n\n").encode("utf-8"))
            finally:
                os.close(fd)
            if kind == "forge-exit":
                os._exit(0)
            return f"forged an answer with env {env}"
        if kind == "forge-child":
            return self.leave_child()
        if kind == "forge-park":
            self.park_and_forge(cmd)
        if kind.startswith("forge-later:"):
            # A thread of the REPL itself (no process to find) forges an answer for the next request while idle.
            forged = json.dumps(self.forged_answer("", self.next_env + 1)) + "\n\n"
            timer = threading.Timer(float(kind.split(":", 1)[1]), os.write, (1, forged.encode("utf-8")))
            timer.daemon = True
            timer.start()
            return "a thread will write a forged answer while the REPL is idle"
        if kind == "escape:fd":
            pid = int(TARGET_PID.search(cmd).group(1))
            forged = json.dumps({"env": 1, "messages": [{"severity": "info", "data": "forged by escape:fd"}]}) + "\n\n"
            return attempt(lambda: f"wrote {write_file(f'/proc/{pid}/fd/1', forged)} bytes")
        if kind == "escape:net":
            port = int(PORT.search(cmd).group(1))
            return attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close() or "connected")
        if kind == "escape:write":
            return "; ".join(self.write_attempts())
        if kind == "escape:environ":
            return "; ".join(read_environs())
        raise SystemExit(f"fake_repl: unknown attack {kind!r}")

    def park_and_forge(self, cmd: str) -> None:
        """The forge-park attack (see the module docstring); never returns."""
        requests: queue.Queue = queue.Queue()

        def forger() -> None:
            while True:
                forged_cmd, env = requests.get()
                os.write(1, (json.dumps(self.forged_answer(forged_cmd, env)) + "\n\n").encode("utf-8"))

        threading.Thread(target=forger, daemon=True).start()
        env = self.next_env
        requests.put((cmd, env))
        while True:
            request_text = read_request(sys.stdin)  # the main thread, parked in read(0)
            if request_text is None:
                os._exit(0)
            self.log(request_text)
            env += 1
            requests.put((json.loads(request_text, strict=False).get("cmd", ""), env))

    def leave_child(self) -> str:
        # The next request will be answered with env next_env + 1: this request takes next_env.
        child_argv = [
            sys.executable,
            "-c",
            CHILD_PROGRAM,
            str(self.next_env + 1),
            str(CHILD_UNASKED_AFTER_S),
            str(CHILD_LINGER_S),
            CHILD_MARKER + str(self.args.script),
        ]
        first = os.fork()
        if first == 0:
            # Double fork in a new session: the child is nobody's child and outside the REPL's process group.
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, child_argv)
            os._exit(0)
        os.waitpid(first, 0)
        # Answer only once the child waits on stdin, ahead of this REPL, as a careful payload would.
        marker = child_argv[-1].encode()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid in [name for name in os.listdir("/proc") if name.isdigit()]:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                        if marker not in cmdline.read():
                            continue
                    with open(f"/proc/{pid}/syscall", "rb") as syscall:
                        if syscall.read().split()[:2] in ([b"0", b"0x0"], [b"63", b"0x0"]):  # read(0, ...)
                            return "left a child to answer the next request"
                except OSError:
                    continue
            time.sleep(0.005)
        return "left a child, which did not get to read stdin"

    def write_attempts(self) -> list[str]:
        cwd = Path.cwd()
        targets = [cwd / "escape-written.txt", *sorted(cwd.rglob("*.olean"))]
        program = Path(sys.argv[0]).resolve()
        if cwd in program.parents:  # never the stand-in's own source outside a test's project
            targets.append(program)
        return [
            f"{target}: " + attempt(lambda t=target: f"wrote {write_file(t, 'PWNED', 'a')} bytes") for target in targets
        ]

    def with_reports(self, response: dict) -> dict:
        if self.attack_reports:
            reports = [
                {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": None, "data": report}
                for report in self.attack_reports
            ]
            response["messages"] = reports + list(response.get("messages", []))
            self.attack_reports = []
        return response

    def serve(self) -> None:
        time.sleep(self.args.startup_delay)
        while True:
            request_text = read_request(sys.stdin)
            if request_text is None:
                return
            self.log(request_text)
            if self.args.exit_after is not None and self.commands >= self.args.exit_after:
                sys.stderr.write(f"fake_repl: exiting after {self.commands} commands\n")
                sys.stderr.flush()
                os._exit(1)
            self.commands += 1
            try:
                request = json.loads(request_text, strict=False)
            except json.JSONDecodeError as error:
                write_response({"message": f"Could not parse JSON:\n{error}"})
                continue
            cmd = request.get("cmd", "")
            delay = self.latency_of(cmd)
            if delay:
                time.sleep(delay)
            behaviours = [row["behaviour"] for row in self.script if "behaviour" in row and row["match"] in cmd]
            if behaviours and not self.behave(behaviours[0], request):
                continue
            write_response(self.with_echo(cmd, self.with_reports(self.answer(request))))

    def latency_of(self, cmd: str) -> float:
        declares = DECLARATION.search(cmd) is not None
        delay = (
            self.args.latency if declares or self.args.housekeeping_latency is None else self.args.housekeeping_latency
        )
        return delay + (self.args.import_latency if IMPORT_LINE.search(cmd) else 0.0)

    def with_echo(self, cmd: str, response: dict) -> dict:
        if self.args.echo_names and "env" in response:
            echoes = [
                {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": None, "data": f"echo: {match.group(2)}"}
                for match in DECLARATION.finditer(cmd)
                if match.group(2)
            ]
            if echoes:
                response["messages"] = list(response.get("messages", [])) + echoes
        return response


def attempt(action) -> str:
    """What `action` returned, or "failed: " and the error it raised."""
    try:
        return action()
    except OSError as error:
        return f"failed: {error}"


def write_file(path: str | Path, text: str, mode: str = "w") -> int:
    with open(path, mode, encoding="utf-8") as target:
        return target.write(text)


def read_environs() -> list[str]:
    """Every environment this process can read from /proc: its own, its parent's, then all others."""
    pids = ["self", str(os.getppid())] + sorted(name for name in os.listdir("/proc") if name.isdigit())
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                text = environ.read().replace(b"\0", b" ").decode("utf-8", errors="replace")
        except OSError:
            continue
        found.append(f"/proc/{pid}/environ: {text}")
    return found


def main(argv: list[str] | None = None) -> None:
    FakeRepl(parse_args(sys.argv[1:] if argv is None else argv)).serve()


if __name__ == "__main__":
    main()
