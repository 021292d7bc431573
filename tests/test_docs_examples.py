"""The examples in docs/lean_setup.md (and README.md's Lean examples) work as written, so the docs cannot drift.

- every example request (JSON in backticks, the JSON body of every curl command, every `ProofRequest(...)` /
  `FileRequest(...)` in a Python block) passes the precheck (`precheck.prepare`): an example the precheck rejects is a doc bug;
- every curl command is sent, as written, to the real HTTP service on loopback (stand-in REPL) and every result
  passes; the `LeanClient` blocks run as written against it, only their URLs replaced;
- every `trl-verigate` command line parses with the real CLI, every `--flag` and `TRL_VERIGATE_*` variable the
  guide names exists, every `make` target exists, and the default header shown is `MINIF2F_HEADER`.
"""

import ast
import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import httpx
import pytest
from fake_repl import stand_in_config
from lean_helpers import prepare
from test_lean_http import serving

import trl_verigate.lean_server as lean_server_module
from trl_verigate import cli
from trl_verigate.lean_server import cli_options
from trl_verigate.lean_server.service.client import LeanClient
from trl_verigate.lean_server.service.http import create_app
from trl_verigate.lean_server.service.server import LeanServer
from trl_verigate.lean_server.types import MINIF2F_HEADER, FileRequest, ProofRequest, VerificationResult

REPO_ROOT = Path(__file__).resolve().parent.parent
GUIDE = REPO_ROOT / "docs" / "lean_setup.md"
README = REPO_ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
# "<full Lean file>" and the like stand for text the reader supplies.
PLACEHOLDER = re.compile(r"^<[^<>]*>$")
# The stand-in answers the doc's false theorem as Lean does: `decide` (line 2 of the command) fails.
FALSE_THEOREM_ANSWER = {
    "match": "theorem u : (2 : Nat) + 2 = 5",
    "response": {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 2, "column": 2},
                "endPos": {"line": 2, "column": 8},
                "data": "decide failed to prove the proposition\n  2 + 2 = 5\nsince it reduces to False",
            }
        ],
        "env": 0,
    },
}


def code_blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text(encoding="utf-8")) if lang == language]


def prose(path: Path) -> str:
    """The text outside fenced blocks, where the inline `code` spans are."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def shell_lines(path: Path) -> list[str]:
    """The logical lines of the sh blocks, `\\`-continuations joined."""
    lines = []
    for block in code_blocks(path, "sh"):
        lines += block.replace("\\\n", " ").splitlines()
    return lines


def curl_commands(path: Path) -> list[tuple[str, dict]]:
    """(URL path, parsed JSON body) of every `curl ... -d '...'` posting JSON; multi-line bodies included."""
    commands = []
    for block in code_blocks(path, "sh"):
        # A single-quoted -d body may span lines; shlex reads it whole from the block's text.
        words = shlex.split(block.replace("\\\n", " "), comments=True)
        for k, word in enumerate(words):
            if word == "curl" and "-d" in words[k:]:
                data_at = words.index("-d", k)
                url = next(w for w in words[k:data_at] if "localhost" in w)
                commands.append(("/" + url.split("/", 1)[1], json.loads(words[data_at + 1])))
    return commands


def as_requests(item) -> list:
    """The requests an example JSON value holds (a whole body, or one native request), placeholders left out."""
    if isinstance(item, dict) and {"requests", "snippets", "codes"} & item.keys():
        found = []
        for request in item.get("requests") or []:
            found += as_requests(request)
        found += [s["code"] for s in item.get("snippets") or [] if not PLACEHOLDER.match(s["code"])]
        found += [c["proof"] for c in item.get("codes") or [] if not PLACEHOLDER.match(c["proof"])]
        return found
    texts = [item] if isinstance(item, str) else [v for v in item.values() if isinstance(v, str)]
    if any(PLACEHOLDER.match(text) for text in texts):
        return []
    if isinstance(item, str):
        return [item]
    if "file" in item:
        return [FileRequest(**item)]
    return [ProofRequest(**item)]


def inline_json_requests(path: Path) -> list:
    found = []
    for span in INLINE.findall(prose(path)):
        # `{"id": "a", "code": ...}`-style fragments inside a body are read with their body.
        if not span.startswith("{") or not re.search(r'"(requests|snippets|codes|statement|file)"', span):
            continue
        try:
            value = json.loads(span)
        except json.JSONDecodeError:
            continue  # shapes such as `{"detail": "...", ...}` describe fields, not requests
        found += as_requests(value)
    return found


def python_requests(path: Path) -> list:
    """Every ProofRequest(...) / FileRequest(...) call with literal arguments in the Python blocks."""
    kinds = {"ProofRequest": ProofRequest, "FileRequest": FileRequest}
    found = []
    for block in code_blocks(path, "python"):
        assignments = {}
        for node in ast.walk(ast.parse(block)):
            # `completion = "..."` then `FileRequest(file=completion, ...)`: literal names are resolved.
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                assignments.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in kinds:
                args = [literal(a, assignments) for a in node.args]
                kwargs = {k.arg: literal(k.value, assignments) for k in node.keywords}
                found.append(kinds[node.func.id](*args, **kwargs))
    return found


def literal(node: ast.expr, assignments: dict):
    return assignments[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)


def assert_accepted(request, where: str) -> None:
    prepared = prepare(request, MINIF2F_HEADER)
    assert not isinstance(prepared, VerificationResult), f"{where}: {request!r} is {prepared.status}: {prepared.reason}"


def test_every_example_request_of_the_guide_passes_the_precheck():
    inline = inline_json_requests(GUIDE)
    curl = [r for _, body in curl_commands(GUIDE) for r in as_requests(body)]
    python = python_requests(GUIDE)
    # Counted by hand in the guide, so an extraction that silently finds nothing fails here.
    assert (len(inline), len(curl), len(python)) == (1, 3, 3)
    assert {type(r) for r in inline + curl + python} == {ProofRequest, FileRequest, str}
    for where, requests in (("inline JSON", inline), ("curl body", curl), ("Python block", python)):
        for request in requests:
            assert_accepted(request, f"docs/lean_setup.md {where}")


def test_every_lean_example_request_of_the_readme_passes_the_precheck():
    requests = python_requests(README) + [r for _, body in curl_commands(README) for r in as_requests(body)]
    assert requests, "README.md's Lean section shows a ProofRequest example"
    for request in requests:
        assert_accepted(request, "README.md")


def test_an_unindented_body_like_the_old_examples_is_rejected():
    # What the guide's examples used to send; the guide now says why it fails.
    old = ProofRequest("theorem t (a b : Nat) : a + b = b + a := by", "omega")
    rejected = prepare(old, MINIF2F_HEADER)
    assert isinstance(rejected, VerificationResult) and rejected.status == "rejected"
    assert '"proof": "omega"' in GUIDE.read_text(encoding="utf-8")  # shown only as the wrong form


@pytest.fixture(scope="module")
def guide_server(tmp_path_factory):
    config = stand_in_config(
        tmp_path_factory.mktemp("docs"), script=[FALSE_THEOREM_ANSWER], header=MINIF2F_HEADER, workers=2
    )
    with LeanServer(config) as server, serving(create_app(server)) as url:
        yield url


@pytest.mark.slow
def test_the_guides_curl_commands_pass_through_the_http_service(guide_server):
    commands = curl_commands(GUIDE)
    assert [path for path, _ in commands] == ["/check", "/check", "/api/check"]
    for path, body in commands:
        response = httpx.post(guide_server + path, json=body, timeout=60)
        assert response.status_code == 200, (path, response.text)
        for result in response.json()["results"]:
            assert result["status"] == "passed", (path, body, result)


@pytest.mark.slow
def test_the_guides_lean_client_blocks_run_as_written(guide_server, monkeypatch):
    class LocalClient(LeanClient):
        def __init__(self, urls, **kwargs):
            super().__init__([guide_server], **kwargs)

    monkeypatch.setattr(lean_server_module, "LeanClient", LocalClient, raising=False)
    blocks = [block for block in code_blocks(GUIDE, "python") if "LeanClient(" in block]
    assert len(blocks) == 2
    printed = []
    for block in blocks:
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(block, str(GUIDE), "exec"), {})
        printed.append(output.getvalue().splitlines())
    [good, false_theorem], [file_result] = printed
    assert good == "passed True 1 []"
    # `decide` is the only tactic and fails on the false statement: tactic 0.
    assert false_theorem.startswith("failed False 0 ['decide failed to prove the proposition")
    assert file_result == "passed None"


def documented_flags() -> set[str]:
    flags = set()
    for line in shell_lines(GUIDE):
        if line.lstrip().startswith("trl-verigate"):
            flags |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))  # comments too: they name flags
    for span in INLINE.findall(prose(GUIDE)):
        flags |= set(re.findall(r"^--[a-z][a-z-]*", span))
    return flags


def test_every_trl_verigate_command_and_flag_in_the_guide_exists():
    parser = cli.build_parser()
    commands = [line for line in shell_lines(GUIDE) if line.lstrip().startswith("trl-verigate")]
    assert len(commands) == 3
    for line in commands:
        argv = shlex.split(line, comments=True)[1:]
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"docs/lean_setup.md: `{line.strip()}` does not parse")
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    known = {flag for sub in subparsers.values() for flag in sub._option_string_actions}
    flags = documented_flags()
    assert {"--max-batch-bytes", "--max-request-bytes", "--sandbox", "--recheck-command", "--backend"} <= flags
    assert flags - known == set(), "flags the guide names that no trl-verigate command has"


def test_the_guides_variables_targets_and_default_header_are_the_codes():
    text = GUIDE.read_text(encoding="utf-8")
    assert set(re.findall(r"TRL_VERIGATE_[A-Z_]+", text)) == {cli_options.REPL_ENV, cli_options.PROJECT_ENV}
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
    for target in re.findall(r"\bmake ([\w-]+)", text):
        assert target in targets, f"docs/lean_setup.md names `make {target}`, which the Makefile lacks"
    assert code_blocks(GUIDE, "lean") == [MINIF2F_HEADER + "\n"]
