"""HTTP service and client over loopback, backed by the stand-in REPL.

- `POST /check` in kimina's two forms and the native form, `GET /health`, 422 on bad input;
- `LeanClient` against several servers (a dead one included): order kept, retries elsewhere, errors as results;
- `LeanClient` in kimina mode against a kimina-lean-server emulation (REPL responses only, no verdict
  fields) reaches the same verdicts as against our server.
"""

import asyncio
import contextlib
import json
import select
import socket
import sys
import time

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from tests.adversarial import fake_repl_script, is_file_row, load_corpus
from tests.fake_repl import repl_command, write_script
from tests.launch import refused_url, serving
from trl_verigate.lean_server import FileRequest, LeanClient, LeanServer, LeanServerConfig, ProofRequest
from trl_verigate.lean_server.repl.process import ReplProcess
from trl_verigate.lean_server.service.http import TextSafeJSONResponse, create_app
from trl_verigate.prover_pool.service import PROGRESS_MIN_REQUESTS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

HEADER = "import Mathlib\nimport Aesop"
GOOD = ProofRequest(statement="theorem good_add (a b : Nat) : a + b = b + a := by", proof="  omega", header=HEADER)
SORRY = ProofRequest(statement="theorem uses_sorry : 2 + 2 = 5 := by", proof="  sorry", header=HEADER)
# The stand-in answers this one with an error on the REPL's line 3 (the second tactic), as Lean would.
WRONG_MIDDLE = ProofRequest(
    statement="theorem wrong_middle (a : Nat) (h : a = 1) : a + 1 = 2 := by",
    proof="  subst h\n  linarith [wrong_middle_marker]\n  rfl",
    header=HEADER,
)
# A proof the precheck cannot see through, which Lean answers with a sorry (like `apply?` once did).
SNEAKY = ProofRequest(statement="theorem sneaky : 2 + 2 = 5 := by", proof="  exact sneaky_marker", header=HEADER)
SCRIPT = [
    {
        "match": "sneaky_marker",
        "response": {
            "sorries": [
                {
                    "proofState": 0,
                    "pos": {"line": 2, "column": 8},
                    "goal": "⊢ 2 + 2 = 5",
                    "endPos": {"line": 2, "column": 21},
                }
            ],
            "messages": [
                {
                    "severity": "warning",
                    "pos": {"line": 1, "column": 8},
                    "endPos": {"line": 1, "column": 14},
                    "data": "declaration uses `sorry`",
                }
            ],
            "env": 0,
        },
    },
    {
        "match": "wrong_middle_marker",
        "response": {
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 3, "column": 2},
                    "endPos": {"line": 3, "column": 32},
                    "data": "linarith failed to find a contradiction",
                }
            ],
            "env": 0,
        },
    },
]
# The stand-in never answers this one, so only a cancelled request frees its worker before the timeout.
HANGS = ProofRequest(statement="theorem hangs : True := by", proof="  exact hang_marker", header=HEADER)
SCRIPT.append({"match": "hang_marker", "behaviour": "hang"})
# The corpus's complete-file attacks, which is how every kimina snippet arrives.
# Kimina snippets carry no trusted statement: rows that attack a FileRequest's statement check are bare files
# whose claim is their own, so they are replayed through FileRequest in test_adversarial, not here.
FILE_ATTACKS = [row for row in load_corpus() if is_file_row(row) and not {"statement", "header"} & set(row)]


@pytest.fixture
def dead():
    """The URL of a server that is down: its port refuses connections for the whole test."""
    with refused_url() as url:
        yield url


@pytest.fixture(scope="module")
def script_path(tmp_path_factory):
    script = SCRIPT + fake_repl_script(FILE_ATTACKS, HEADER)
    return write_script(tmp_path_factory.mktemp("script") / "script.jsonl", script)


@pytest.fixture(scope="module")
def lean_server(tmp_path_factory, script_path):
    config = LeanServerConfig(
        repl_command=repl_command("--script", script_path),
        project_dir=str(tmp_path_factory.mktemp("project")),
        header=HEADER,
        workers=2,
        timeout=10.0,
        startup_timeout=20.0,
    )
    with LeanServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def url(lean_server):
    with serving(create_app(lean_server)) as base_url:
        yield base_url


def post(url: str, body: dict, path: str = "/check") -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


def as_file(request: ProofRequest) -> str:
    return f"{request.header}\n{request.statement}\n{request.proof}"


def test_kimina_snippets_form_gets_kimina_results_with_our_verdict(url):
    body = {
        "snippets": [
            {"id": "good", "code": as_file(GOOD)},
            {"id": "bad", "code": as_file(WRONG_MIDDLE)},
            {"id": "sorry", "code": as_file(SORRY)},
            {"id": "sneaky", "code": as_file(SNEAKY)},
        ],
        "timeout": 20,
    }
    response = post(url, body, path="/api/check")
    assert response.status_code == 200
    good, bad, refused, sneaky = response.json()["results"]
    assert [r["id"] for r in (good, bad, refused, sneaky)] == ["good", "bad", "sorry", "sneaky"]
    assert good["status"] == "passed" and good["passed"] is True and "error" not in good
    # Lean's own answer to the snippet: a fresh env after the header's, and no messages once our
    # `#print axioms` answer is taken out (the REPL leaves out an empty list).
    assert set(good["response"]) == {"env"} and good["response"]["env"] >= 1
    assert isinstance(good["time"], float)
    assert good["axioms"] == ["propext"]
    assert bad["status"] == "failed" and bad["first_error_tactic"] == 1
    # kimina reports positions in the snippet's own lines: 2 header lines, the statement, then the proof.
    [error] = bad["response"]["messages"]
    assert (error["severity"], error["pos"], error["endPos"]) == (
        "error",
        {"line": 5, "column": 2},
        {"line": 5, "column": 32},
    )
    assert error["data"] == "linarith failed to find a contradiction"
    # Refused before Lean ran: no REPL response to show, so kimina's `error` carries the reason.
    assert refused["status"] == "rejected" and "response" not in refused
    assert refused["error"].startswith("rejected: ") and "sorry" in refused["error"]
    # The REPL's `sorries` reach the client, which kimina's SDK reads to call a proof incomplete; the
    # scripted sorry on REPL line 2 is on the snippet's line 4, the warning on the name on line 3.
    assert sneaky["status"] == "failed" and sneaky["reason"] == "uses sorry"
    assert sneaky["response"]["sorries"] == [
        {"proofState": 0, "pos": {"line": 4, "column": 8}, "goal": "⊢ 2 + 2 = 5", "endPos": {"line": 4, "column": 21}}
    ]
    assert as_file(SNEAKY).split("\n")[3][8:21] == "sneaky_marker"
    [warning] = sneaky["response"]["messages"]
    assert (warning["pos"], warning["data"]) == ({"line": 3, "column": 8}, "declaration uses `sorry`")
    # Env indices are per REPL process (2 workers here), each proof after its header's env 0.
    assert all(r["response"]["env"] >= 1 for r in (good, bad, sneaky))


def test_file_attacks_sent_as_kimina_snippets_never_pass(url):
    assert len(FILE_ATTACKS) >= 10
    body = {"snippets": [{"id": row["id"], "code": row["file"]} for row in FILE_ATTACKS], "timeout": 2}
    response = post(url, body, path="/api/check")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["id"] for r in results] == [row["id"] for row in FILE_ATTACKS]
    for row, result in zip(FILE_ATTACKS, results, strict=True):
        assert result["passed"] is False, row["id"]
        # Under RLIMIT_AS an "oom" row's REPL dies before Lean could answer for itself.
        assert result["status"] == {"oom": "crashed"}.get(row["behaviour"], row["expect"]), (row["id"], result)
        if row["expect"] == "rejected":
            assert "response" not in result and result["error"].startswith("rejected: "), (row["id"], result)


def test_older_kimina_codes_form_answers_with_custom_ids(url):
    body = {"codes": [{"custom_id": 7, "proof": as_file(GOOD)}, {"custom_id": "x", "code": as_file(WRONG_MIDDLE)}]}
    response = post(url, body, path="/verify")
    assert response.status_code == 200
    first, second = response.json()["results"]
    assert (first["custom_id"], second["custom_id"]) == (7, "x")
    assert first["error"] is None and first["response"]["time"] == first["time_s"]
    assert isinstance(first["response"]["env"], int)
    assert [m["pos"] for m in second["response"]["messages"]] == [{"line": 5, "column": 2}]
    assert (first["status"], second["status"]) == ("passed", "failed")


def test_native_form_returns_verdicts_in_order(url):
    body = {
        "requests": [
            {"statement": SORRY.statement, "proof": SORRY.proof, "header": HEADER},
            as_file(GOOD),
            {"statement": WRONG_MIDDLE.statement, "proof": WRONG_MIDDLE.proof, "header": HEADER},
            {"statement": GOOD.statement, "proof": "  native_decide", "header": HEADER},
        ],
        "timeout": 5,
    }
    response = post(url, body)
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["rejected", "passed", "failed", "rejected"]
    assert results[2]["first_error_tactic"] == 1
    assert [(m["line"], m["column"]) for m in results[2]["messages"]] == [(3, 2)]
    assert "native_decide" in results[3]["reason"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "snippets"),
        ({"snippets": [], "timeout": 5}, "snippets"),
        ({"snippets": [{"id": "a", "code": "x"}, {"id": "a", "code": "y"}]}, "unique"),
        ({"requests": ["theorem t : True := by trivial"], "timeout": -1}, "timeout"),
        ({"snippets": [{"id": "a", "code": "x"}], "infotree": "full"}, "infotree"),
    ],
)
def test_bad_input_is_a_400_with_one_message_naming_the_field(url, body, field):
    response = post(url, body)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    assert field in detail


def test_a_request_missing_its_proof_gets_one_message_not_one_per_form(url):
    response = post(url, {"requests": [{"statement": "theorem t : True := by"}, as_file(GOOD)]})
    assert response.status_code == 200
    missing, good = response.json()["results"]
    assert good["status"] == "passed"
    assert missing["status"] == "rejected"
    assert missing["reason"] == (
        "requests[0].proof: Field required (a request is {statement, proof, header?} | {file, statement?, header?} | "
        "file text)"
    )


# The JSON text of each malformed item, sent between two good ones; what its reason must name, by hand.
MALFORMED_ITEMS = [
    ('"theorem t : True := by trivial \\ud800"', "U+D800"),
    ('{"statement": "theorem t : True := by\\udc00", "proof": "  trivial"}', "the statement holds U+DC00"),
    ('{"statement": "theorem t : True := by", "proof": "  trivial\\u0000"}', "U+0000"),
    ("42", "requests[1] is a JSON int"),
    ("null", "requests[1] is a JSON NoneType"),
    ('["theorem t : True := by trivial"]', "requests[1] is a JSON list"),
    ('{"statement": 5, "proof": "  trivial"}', "requests[1].statement"),
    ('{"file": "x", "proof": "  omega"}', "requests[1].proof: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("item", "named"), MALFORMED_ITEMS)
def test_a_malformed_native_item_is_rejected_alone(url, item, named):
    good = json.dumps(as_file(GOOD))
    body = '{"requests": [' + good + ", " + item + ", " + good + "]}"
    response = httpx.post(url + "/check", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [result["status"] for result in results] == ["passed", "rejected", "passed"]
    assert named in results[1]["reason"]


def test_a_malformed_kimina_snippet_is_rejected_alone(url):
    good = {"id": "good", "code": as_file(GOOD)}
    snippets = [
        good,
        {"id": "number", "code": 5},
        {"id": "none"},
        {"id": "lone", "code": "theorem t : True := by\ud800"},
    ]
    # json.dumps escapes the lone surrogate ("\\ud800"), which is valid JSON; httpx's own encoder cannot send it.
    body = json.dumps({"snippets": [*snippets, {**good, "id": "good2"}]})
    response = httpx.post(url + "/api/check", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == 200, response.text
    by_id = {result["id"]: result for result in response.json()["results"]}
    assert by_id["good"]["status"] == by_id["good2"]["status"] == "passed"
    assert "a int is not a request" in by_id["number"]["error"]
    assert "a NoneType is not a request" in by_id["none"]["error"]
    assert by_id["lone"]["status"] == "rejected" and "U+D800" in by_id["lone"]["reason"]


def test_an_answer_holding_a_lone_surrogate_is_sent_escaped_not_as_an_error():
    # A forged REPL answer may hold "\\ud800" (Lean's own strings cannot); UTF-8 cannot encode it.
    content = {
        "results": [{"status": "failed", "response": {"messages": [{"data": "x\ud800y"}]}}, {"status": "passed"}]
    }
    with pytest.raises(UnicodeEncodeError):
        JSONResponse(content)
    body = TextSafeJSONResponse(content).body
    assert body.isascii() and json.loads(body) == content
    assert TextSafeJSONResponse({"data": "ℕ"}).body == '{"data":"ℕ"}'.encode()


def test_the_client_answers_unsendable_items_itself_and_sends_the_rest(url):
    lone = ProofRequest(statement="theorem t : True := by", proof="  trivial\ud800", header=HEADER)
    results = LeanClient(urls=[url]).verify([GOOD, 42, lone, ProofRequest(GOOD.statement, None), GOOD])
    assert [result.status for result in results] == ["passed", "rejected", "rejected", "rejected", "passed"]
    assert "requests[1]: a int is not a request" in results[1].reason and results[1].reason.endswith("not sent")
    assert "requests[2]: the proof holds U+D800 at offset 9" in results[2].reason
    assert "requests[3]: the proof must be a str" in results[3].reason


def test_a_body_that_is_not_json_is_a_400_saying_so(url):
    response = httpx.post(url + "/check", content=b'{"requests": [', headers={"content-type": "application/json"})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("the body is not valid JSON (") and "send a JSON object" in detail


def test_health_is_not_ok_while_no_repl_can_start(tmp_path):
    config = LeanServerConfig(
        repl_command=[sys.executable, "-c", "raise SystemExit(3)"],
        project_dir=str(tmp_path),
        header=HEADER,
        workers=1,
        spare_workers=0,
        startup_timeout=5.0,
    )
    with LeanServer(config) as server, serving(create_app(server)) as base_url:
        deadline = time.monotonic() + 30
        # Until the first start has failed: before that the REPL may be alive a moment, not yet exited (health "ok").
        # The next start waits 2 s (the pool's backoff), so none is alive right after.
        while True:
            health = httpx.get(base_url + "/health").json()
            if health["pool"].get("start_failures", 0) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert health["alive"] == 0, health
    assert health["status"] == "no_repl"
    assert health["pool"]["start_failures"] >= 1


def test_a_client_that_hangs_up_cancels_its_work(url):
    # Through the body-size middleware, which reads the body itself and hands the app the rest of the channel.
    body = json.dumps({"requests": [{"statement": HANGS.statement, "proof": HANGS.proof}], "timeout": 120}).encode()
    with open_post(url, f"content-length: {len(body)}\r\n") as sock:
        sock.sendall(body)
        deadline = time.monotonic() + 30
        while httpx.get(url + "/health").json()["in_flight"] != 1:
            assert time.monotonic() < deadline, "the request never started"
            time.sleep(0.05)
    # Hung up: the server notices within its polling interval and cancels, long before the 120 s timeout.
    deadline = time.monotonic() + 30
    while httpx.get(url + "/health").json()["in_flight"] != 0:
        assert time.monotonic() < deadline, "the abandoned request kept its worker"
        time.sleep(0.05)


def test_health_reports_workers_and_the_service(url, lean_server):
    deadline = time.monotonic() + 30
    while True:
        health = httpx.get(url + "/health").json()
        if health["alive"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert health["status"] == "ok" and health["service"] == "trl-verigate"
    assert health["workers"] == 2 and health["alive"] == 2
    assert health["in_flight"] == 0 and health["queued"] == 0


def test_client_spreads_over_servers_skips_a_dead_one_and_keeps_order(url, dead):
    requests = [GOOD, SORRY, WRONG_MIDDLE] * 4
    client = LeanClient(urls=[dead, url], max_batch=5, retries=2, backoff=0.01)
    results = client.verify(requests)
    assert [r.status for r in results] == ["passed", "rejected", "failed"] * 4
    assert [r.first_error_tactic for r in results[:3]] == [1, 0, 1]
    assert client.endpoints[0].consecutive_failures > 0 and client.endpoints[1].consecutive_failures == 0


def test_client_turns_a_request_no_server_answers_into_an_error_result():
    with refused_url() as first, refused_url() as second:
        dead = [first, second]
        results = LeanClient(urls=dead, retries=2, backoff=0.01).verify([GOOD, "theorem t : True := trivial"])
    assert [r.status for r in results] == ["error", "error"]
    assert all(dead[0] in r.reason and dead[1] in r.reason for r in results)


def test_client_averify_works_inside_a_running_loop(url):
    async def main():
        client = LeanClient(urls=[url])
        return await client.averify([SORRY, GOOD]), client.verify([GOOD])

    remote, blocking = asyncio.run(main())
    assert [r.status for r in remote] == ["rejected", "passed"]
    assert blocking[0].passed


def test_client_draws_the_servers_progress_bar_on_request(url, capsys):
    client = LeanClient(urls=[url])
    client.verify([GOOD, SORRY], progress=True)
    assert "Lean verify (remote): 100%" in capsys.readouterr().err
    client.verify([SORRY] * PROGRESS_MIN_REQUESTS)  # stderr is no terminal here
    assert "Lean verify" not in capsys.readouterr().err


def test_client_rejects_bad_arguments_naming_them():
    with pytest.raises(ValueError, match="urls"):
        LeanClient(urls="http://127.0.0.1:8000")
    with pytest.raises(ValueError, match="protocol"):
        LeanClient(urls=["http://127.0.0.1:8000"], protocol="grpc")


def kimina_emulation(config: LeanServerConfig) -> FastAPI:
    """kimina-lean-server's /api/check on the stand-in REPL: leading imports as the REPL header, the rest
    run in its env, positions shifted back to snippet lines, and nothing but REPL responses returned."""
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/api/check")
    async def check(body: dict):
        results = []
        for snippet in body["snippets"]:
            lines = snippet["code"].split("\n")
            n_header = 0
            while n_header < len(lines) and (not lines[n_header].strip() or lines[n_header].startswith("import ")):
                n_header += 1
            process = ReplProcess(config)
            try:
                await process.start("\n".join(lines[:n_header]))
                started = time.monotonic()
                response = await process.run({"cmd": "\n".join(lines[n_header:]), "env": process.header_env}, 10)
            finally:
                await process.close()
            for item in response.get("messages", []) + response.get("sorries", []):
                for key in ("pos", "endPos"):
                    if item.get(key):
                        item[key]["line"] += n_header
            results.append({"id": snippet["id"], "time": time.monotonic() - started, "response": response})
        return {"results": results}

    return app


def test_kimina_mode_reaches_the_same_verdicts_via_the_splitter(url, lean_server):
    requests = [GOOD, SORRY, WRONG_MIDDLE, ProofRequest(GOOD.statement, "  native_decide", HEADER), SNEAKY]
    ours = LeanClient(urls=[url]).verify(requests)
    with serving(kimina_emulation(lean_server.config)) as kimina_url:
        client = LeanClient(urls=[kimina_url], config=lean_server.config)
        theirs = client.verify(requests)
        assert client.endpoints[0].protocol == "kimina"
    assert [r.status for r in theirs] == ["passed", "rejected", "failed", "rejected", "failed"]
    for mine, other in zip(ours, theirs, strict=True):
        assert (other.status, other.passed, other.first_error_tactic) == (
            mine.status,
            mine.passed,
            mine.first_error_tactic,
        )
        assert other.tactics == mine.tactics
        assert other.axioms == mine.axioms
        assert other.messages == mine.messages
    assert theirs[2].first_error_tactic == 1
    assert [m.line for m in theirs[2].messages if m.severity == "error"] == [3]
    # The sorry warning Lean puts on the theorem name, moved back from snippet to submitted lines.
    assert [(m.line, m.column, m.text) for m in theirs[4].messages] == [(1, 8, "declaration uses `sorry`")]


def test_kimina_timeouts_and_server_errors_become_statuses():
    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/api/check")
    async def check(body: dict):
        first, second = body["snippets"]
        return {
            "results": [
                {"id": first["id"], "time": 5.0, "error": "Lean REPL command timed out in 5 seconds"},
                {"id": second["id"], "time": 0.1, "error": "REPL process died"},
            ]
        }

    with serving(app) as kimina_url:
        results = LeanClient(urls=[kimina_url], protocol="kimina").verify([GOOD, WRONG_MIDDLE], timeout=5)
    assert [r.status for r in results] == ["timeout", "error"]
    assert "timed out" in results[0].reason and "REPL process died" in results[1].reason


# ---------------------------------------------------------------- size limits

BATCH_LIMIT = 64 << 10
REQUEST_LIMIT = 8 << 10


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory, script_path):
    config = LeanServerConfig(
        repl_command=repl_command("--script", script_path),
        project_dir=str(tmp_path_factory.mktemp("project")),
        header=HEADER,
        workers=1,
        timeout=10.0,
        startup_timeout=20.0,
        max_request_bytes=REQUEST_LIMIT,
        max_batch_bytes=BATCH_LIMIT,
    )
    with LeanServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def post_sizes() -> list[int]:
    """Content-Length of every POST the limited server received, in order (tests clear it first)."""
    return []


@pytest.fixture(scope="module")
def limited_url(limited_server, post_sizes):
    app = create_app(limited_server)

    def record_post_sizes(inner):
        async def middleware(scope, receive, send):
            if scope["type"] == "http" and scope["method"] == "POST":
                post_sizes.append(int(dict(scope["headers"]).get(b"content-length", b"-1")))
            await inner(scope, receive, send)

        return middleware

    # Added last, so outermost: it sees every POST, the refused ones too.
    app.add_middleware(record_post_sizes)
    with serving(app) as base_url:
        yield base_url


def read_http_response(sock: socket.socket) -> tuple[int, dict]:
    """Status and JSON body of one HTTP/1.1 response with a Content-Length, read from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before the response head: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines[1:])}
    length = int(headers["content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the response body"
        body += chunk
    return status, json.loads(body[:length])


def open_post(url: str, headers: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=20)
    sock.sendall(f"POST /check HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n{headers}\r\n".encode())
    return sock


def test_a_declared_body_over_the_batch_limit_is_refused_before_any_byte_is_read(limited_url):
    # Only the head is sent: a server that waited for the announced gigabyte would never answer.
    with open_post(limited_url, "content-length: 1000000000\r\n") as sock:
        status, detail = read_http_response(sock)
    assert status == 413
    assert (detail["limit_bytes"], detail["body_bytes"], detail["body_bytes_complete"]) == (BATCH_LIMIT, 10**9, True)
    assert (detail["setting"], detail["flag"]) == ("max_batch_bytes", "--max-batch-bytes")
    assert f"is 1000000000 bytes, over this server's limit of {BATCH_LIMIT} bytes" in detail["detail"]


def test_a_chunked_body_is_cut_off_once_it_crosses_the_batch_limit(limited_url):
    # An endless chunked body: the answer can only come if the server stops reading at the limit.
    chunk = b'{"requests": [' + b" " * 4000
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    deadline = time.monotonic() + 30
    with open_post(limited_url, "transfer-encoding: chunked\r\n") as sock:
        sock.setblocking(False)
        while True:
            assert time.monotonic() < deadline, "the server kept reading the endless body"
            readable, writable, _ = select.select([sock], [sock], [], 1)
            if readable:
                break
            if writable:
                with contextlib.suppress(BlockingIOError):
                    sock.send(frame)
        sock.setblocking(True)
        status, detail = read_http_response(sock)
    assert status == 413
    assert detail["body_bytes_complete"] is False and detail["limit_bytes"] == BATCH_LIMIT
    # It stopped once past the limit: the HTTP server hands over at most its 64 KiB buffer at a time.
    assert BATCH_LIMIT < detail["body_bytes"] <= BATCH_LIMIT + (64 << 10) + len(chunk)
    assert (
        f"is at least {detail['body_bytes']} bytes (reading stopped there), over this server's limit"
        in (detail["detail"])
    )


def padded_body(size: int) -> bytes:
    """A valid native body of exactly `size` bytes: JSON allows trailing whitespace."""
    body = json.dumps({"requests": [{"statement": GOOD.statement, "proof": GOOD.proof, "header": HEADER}]}).encode()
    assert len(body) < size
    return body + b" " * (size - len(body))


def test_the_batch_limit_is_inclusive_and_a_refused_client_can_go_on(limited_url):
    with httpx.Client(timeout=60) as client:
        headers = {"content-type": "application/json"}
        over = client.post(limited_url + "/check", content=padded_body(BATCH_LIMIT + 1), headers=headers)
        assert over.status_code == 413 and over.json()["body_bytes"] == BATCH_LIMIT + 1
        # The same connection is still usable: the refused body was discarded, not left in the stream.
        at_limit = client.post(limited_url + "/check", content=padded_body(BATCH_LIMIT), headers=headers)
    assert at_limit.status_code == 200
    assert [r["status"] for r in at_limit.json()["results"]] == ["passed"]


def test_health_reports_the_size_limits(limited_url):
    health = httpx.get(limited_url + "/health").json()
    assert (health["max_request_bytes"], health["max_batch_bytes"]) == (REQUEST_LIMIT, BATCH_LIMIT)


def test_one_request_over_the_request_limit_is_rejected_alone(limited_url):
    # 8 KiB + 1 byte of proof alone; the statement and header come on top.
    big_proof = "  omega" + " " * (REQUEST_LIMIT - len("  omega") + 1)
    body = {
        "requests": [
            {"statement": GOOD.statement, "proof": GOOD.proof, "header": HEADER},
            {"statement": GOOD.statement, "proof": big_proof, "header": HEADER},
            {"file": "x" * (REQUEST_LIMIT + 1)},
        ]
    }
    response = post(limited_url, body)
    assert response.status_code == 200
    good, big, big_file = response.json()["results"]
    assert good["status"] == "passed"
    for result in (big, big_file):
        assert result["status"] == "rejected" and result["tactics"] == []
        assert str(REQUEST_LIMIT) in result["reason"] and "max_request_bytes" in result["reason"]
    snippets = {"snippets": [{"id": "small", "code": as_file(GOOD)}, {"id": "huge", "code": "y" * (REQUEST_LIMIT + 1)}]}
    small, huge = post(limited_url, snippets, path="/api/check").json()["results"]
    assert (small["id"], small["status"]) == ("small", "passed")
    assert (huge["id"], huge["status"]) == ("huge", "rejected")
    assert huge["error"].startswith("rejected: ") and str(REQUEST_LIMIT) in huge["error"]


# ---------------------------------------------------------------- FileRequest over the wire, client batch sizes

MISSTATED = "theorem good_add (a b : Nat) : a + b = a + b := by"


def file_requests() -> list[FileRequest]:
    """GOOD as a complete file: held to its own statement and header, to another statement, and to nothing."""
    return [
        FileRequest(as_file(GOOD), statement=GOOD.statement, header=HEADER),
        FileRequest(as_file(GOOD), statement=MISSTATED, header=HEADER),
        FileRequest(as_file(GOOD)),
    ]


def test_native_form_takes_file_requests(url):
    body = {
        "requests": [
            {"file": as_file(GOOD), "statement": GOOD.statement, "header": HEADER},
            {"file": as_file(GOOD), "statement": MISSTATED, "header": HEADER},
            {"file": as_file(GOOD)},
        ]
    }
    response = post(url, body)
    assert response.status_code == 200
    held, misstated, bare = response.json()["results"]
    assert (held["status"], bare["status"]) == ("passed", "passed")
    assert misstated["status"] == "rejected" and "statement" in misstated["reason"]
    # A file object with a field of neither request kind is bad input, not silently a ProofRequest.
    (bad,) = post(url, {"requests": [{"file": as_file(GOOD), "proof": "  omega"}]}).json()["results"]
    assert bad["status"] == "rejected" and "requests[0].proof: Extra inputs are not permitted" in bad["reason"]


def test_client_sends_file_requests_and_kimina_mode_holds_them_to_the_statement(url, lean_server):
    ours = LeanClient(urls=[url]).verify(file_requests())
    assert [r.status for r in ours] == ["passed", "rejected", "passed"]
    with serving(kimina_emulation(lean_server.config)) as kimina_url:
        client = LeanClient(urls=[kimina_url], config=lean_server.config, protocol="kimina")
        theirs = client.verify(file_requests())
    # kimina-lean-server knows no trusted statement: the client refuses the misstated file itself.
    assert [r.status for r in theirs] == ["passed", "rejected", "passed"]
    assert theirs[1].reason == ours[1].reason
    for mine, other in zip(ours, theirs, strict=True):
        assert (other.tactics, other.axioms, other.messages) == (mine.tactics, mine.axioms, mine.messages)


def padded_proof(n_bytes: int) -> ProofRequest:
    """GOOD with its proof padded by a trailing comment to `n_bytes` of request (statement + proof + header)."""
    base = GOOD.statement + GOOD.proof + "\n  -- " + HEADER
    return ProofRequest(GOOD.statement, GOOD.proof + "\n  -- " + "x" * (n_bytes - len(base)), HEADER)


def test_client_splits_batches_by_bytes_to_fit_the_servers_limit(limited_url, post_sizes):
    # 30 requests of 6000 bytes: one batch by count (max_batch=64), about 180 KB, so 3+ POSTs of at most 64 KiB.
    requests = [padded_proof(6000) for _ in range(30)]
    config = LeanServerConfig(max_request_bytes=REQUEST_LIMIT, max_batch_bytes=BATCH_LIMIT)
    client = LeanClient(urls=[limited_url], config=config)
    post_sizes.clear()
    assert [r.status for r in client.verify(requests)] == ["passed"] * 30
    assert len(post_sizes) >= 3 and all(0 < size <= BATCH_LIMIT for size in post_sizes), post_sizes
    assert sum(post_sizes) > 30 * 6000
    # No 413 was needed: the client never had to learn the server's limit.
    assert client.endpoints[0].max_batch_bytes is None


def test_client_learns_a_smaller_server_limit_from_a_413(limited_url, post_sizes):
    requests = [padded_proof(6000) for _ in range(30)]
    # The client assumes the default 64 MiB, the server was started with 64 KiB.
    client = LeanClient(urls=[limited_url], config=LeanServerConfig(max_request_bytes=REQUEST_LIMIT))
    post_sizes.clear()
    assert [r.status for r in client.verify(requests)] == ["passed"] * 30
    assert client.endpoints[0].max_batch_bytes == BATCH_LIMIT
    # One POST of everything, refused; then the same requests again in POSTs that fit.
    first, *rest = post_sizes
    assert first > 30 * 6000 and len(rest) >= 3 and all(size <= BATCH_LIMIT for size in rest), post_sizes


def test_client_rejects_a_request_over_the_size_limit_without_sending_it(capsys, dead):
    # A dead server: whatever is sent comes back "error", so "rejected" proves the client kept it.
    config = LeanServerConfig(max_request_bytes=6000)
    client = LeanClient(urls=[dead], retries=0, config=config)
    small, big, big_file = client.verify([GOOD, padded_proof(6001), FileRequest("x" * 6001)], progress=True)
    assert small.status == "error"
    # The bar counts the requests refused unsent too.
    assert "Lean verify (remote): 100%" in capsys.readouterr().err
    for index, result in ((1, big), (2, big_file)):
        assert result.status == "rejected"
        assert f"requests[{index}] is 6001 bytes, over the limit of 6000 bytes" in result.reason
        assert "max_request_bytes" in result.reason and "not sent" in result.reason
    # A request within the request limit that no POST may hold (batch limit below it) is refused the same way.
    tight = LeanClient(urls=[dead], retries=0, config=LeanServerConfig(max_batch_bytes=1000))
    [alone] = tight.verify([padded_proof(900)])
    assert alone.status == "rejected" and "more than one POST may hold (1000 bytes" in alone.reason
