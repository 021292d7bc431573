"""HTTP front end of a `LeanServer`, compatible with kimina-lean-server's API.

`POST /check` (also `/api/check`, kimina's path) takes kimina's request forms unchanged, so its SDK and
scripts work against this server, and answers in kimina's result shape with our verdict
(`VerificationResult.to_dict()`: status, passed, messages, tactics, first_error_tactic, axioms, time_s,
reason) merged into each result. A kimina result's `response` is the Lean REPL's own answer (with `env`,
`sorries`, messages) in the snippet's coordinates, as kimina reports it (see
`LeanServer.verify_with_responses`), so kimina's SDK judges it as it would on kimina. The native form
`{"requests": [...]}` takes `{"statement", "proof", "header"?}` objects (`ProofRequest`), `{"file",
"statement"?, "header"?}` objects (`FileRequest`: an untrusted file held to a trusted statement/header) and plain
file strings, and answers with the verdicts only.

Size limits (`LeanServerConfig.max_batch_bytes` / `max_request_bytes`, flags `--max-batch-bytes` /
`--max-request-bytes`):

- A POST body over `max_batch_bytes` is refused with HTTP 413 and a JSON `detail` naming the limit, the body's
  size and the setting to raise, before the app reads it: from `Content-Length` without reading a byte, and for a
  body without one (chunked) as soon as the bytes read cross the limit. Such a body is never buffered whole nor
  parsed; the rest of it is discarded by the HTTP server as it arrives.
- One request over `max_request_bytes` inside an acceptable body is refused by `LeanServer` itself: that item's
  result is `status: "rejected"` with a reason naming its size and the limit (for kimina's forms also in `error`),
  and the other items of the batch get their verdicts. A whole-batch 413 would throw away a batch of model outputs
  because of one overlong sample; per item, the answer is the same as `LeanServer.verify` gives in-process, and
  the result's position (or snippet `id`) says which item it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trl_verigate.lean_server.core import FileRequest, LeanServerConfig, ProofRequest, VerificationResult
from trl_verigate.lean_server.service.owners import owner_of
from trl_verigate.lean_server.service.server import LeanServer
from trl_verigate.lean_server.service.wire import SERVICE_NAME
from trl_verigate.prover_pool.owner import Owner

# How often a running /check looks whether its client hung up, to cancel the work and free the REPLs.
DISCONNECT_POLL_S = 0.5
# nginx's code for "client closed request", as kimina-lean-server uses it.
CLIENT_CLOSED_REQUEST = 499
PAYLOAD_TOO_LARGE = 413
BAD_REQUEST = 400
UNAUTHORIZED = 401
# The line `serve` prints on stdout once it accepts connections, followed by the URL (e.g. http://127.0.0.1:41235).
LISTENING_PREFIX = "listening on "


class BodySizeLimit:
    """ASGI middleware: a request body over `max_bytes()` gets HTTP 413 before the app reads or parses any of it.

    A declared `Content-Length` over the limit is refused without reading the body; otherwise the body is read here,
    counting bytes, and refused as soon as the count crosses the limit (a chunked body declares no length). A body
    within the limit is handed to the app unchanged. The 413 keeps the connection open, so the HTTP server discards
    whatever the client still sends and the client reads the answer instead of a reset.
    """

    def __init__(self, app, max_bytes):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes()
        declared = dict(scope["headers"]).get(b"content-length")
        # h11 has already refused a malformed Content-Length with 400, so this parses.
        if declared is not None and int(declared) > limit:
            await _refuse_body(send, limit, int(declared), complete=True)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client hung up before sending its body: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse_body(send, limit, size, complete=False)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        del chunks  # one copy of the body while the app runs, not two
        replayed = False

        async def replay_then_receive():
            # The body once, then the real channel, where the app's disconnect polling listens.
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay_then_receive, send)


async def _refuse_body(send, limit: int, size: int, complete: bool) -> None:
    measured = f"is {size} bytes" if complete else f"is at least {size} bytes (reading stopped there)"
    detail = {
        "detail": (
            f"request body {measured}, over this server's limit of {limit} bytes per POST "
            "(LeanServerConfig.max_batch_bytes, `trl-verigate lean-server --max-batch-bytes`): send fewer or smaller "
            "requests per POST (LeanClient splits its batches to fit) or start the server with a larger "
            "--max-batch-bytes"
        ),
        "limit_bytes": limit,
        "body_bytes": size,
        "body_bytes_complete": complete,
        "setting": "max_batch_bytes",
        "flag": "--max-batch-bytes",
    }
    payload = json.dumps(detail).encode()
    await send(
        {
            "type": "http.response.start",
            "status": PAYLOAD_TOO_LARGE,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})


# `code` and `proof` are taken as sent: one that is no text gets its own `rejected` result from `LeanServer`.
class KiminaSnippet(BaseModel):
    id: str
    code: Any = None


class KiminaCode(BaseModel):
    custom_id: str | int
    proof: Any = None
    code: Any = None

    @property
    def content(self):
        return self.proof if self.proof is not None else self.code


class NativeProof(BaseModel):
    model_config = ConfigDict(extra="forbid")
    statement: str
    proof: str
    header: str | None = None


class NativeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str
    statement: str | None = None
    header: str | None = None


NATIVE_FORMS = "{statement, proof, header?} | {file, statement?, header?} | file text"


@dataclass(frozen=True)
class RefusedItem:
    """A native request item that is none of the request forms: it gets a `rejected` result with `reason`, and the
    other items of its batch run."""

    reason: str


def _native_item(index: int, item):
    """A native request item as the form its keys choose (a `file` key: a file request; else a proof request), so a
    missing field is reported once, for that form, not once per form of the union; a `RefusedItem` when it is
    none."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return RefusedItem(f"requests[{index}] is a JSON {type(item).__name__}; a request is {NATIVE_FORMS}")
    form = NativeFile if "file" in item else NativeProof
    try:
        return form.model_validate(item)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return RefusedItem(f"requests[{index}].{where}: {first['msg']} (a request is {NATIVE_FORMS})")


class CheckBody(BaseModel):
    """One of three forms: kimina `snippets`, kimina's older `codes`, or native `requests`."""

    snippets: list[KiminaSnippet] | None = None
    codes: list[KiminaCode] | None = None
    requests: list[Any] | None = None
    timeout: float | None = Field(None, gt=0, description="seconds per proof; default: the server's")
    # Accepted for kimina compatibility: REPL reuse is always on (each proof runs in a fresh env branched
    # off the header's), and debug diagnostics do not exist here.
    debug: bool = False
    reuse: bool = True
    infotree: str | None = None
    infotree_type: str | None = None
    disable_cache: bool = False

    @field_validator("requests", mode="before")
    @classmethod
    def _native_forms(cls, value):
        return [_native_item(index, item) for index, item in enumerate(value)] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _one_form(self) -> CheckBody:
        given = [name for name in ("snippets", "codes", "requests") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'snippets' (kimina: [{id, code}]), 'codes' (kimina, older: [{custom_id, proof}]) "
                "or 'requests' (native: [{statement, proof, header} | {file, statement, header} | file text]); "
                f"got {given or 'none'}"
            )
        if self.snippets is not None:
            if not self.snippets:
                raise ValueError("'snippets' must not be empty")
            ids = [s.id for s in self.snippets]
            if len(set(ids)) != len(ids):
                raise ValueError("'snippets' must have unique ids")
        if self.infotree is not None or self.infotree_type is not None:
            raise ValueError("'infotree' is not supported by trl-verigate lean-server: omit it or send null")
        return self


def _kimina_fields(result: VerificationResult, response: dict | None, timeout: float) -> dict:
    """kimina's `time` plus exactly one of `error` / `response`, as kimina-lean-server sets them."""
    fields: dict[str, Any] = {"time": result.time_s}
    if result.status in ("passed", "failed"):
        # Lean answered: its own response, so clients that judge it themselves see `sorries` too.
        fields["response"] = response
    elif result.status == "timeout":
        # kimina's wording: its SDK classifies results by "timed out" in the error.
        fields["error"] = f"Lean REPL command timed out in {timeout:g} seconds"
    else:
        fields["error"] = f"{result.status}: {result.reason}"
    return fields


def _native_request(item: NativeProof | NativeFile | str | RefusedItem):
    if isinstance(item, NativeProof):
        return ProofRequest(**item.model_dump())
    if isinstance(item, NativeFile):
        return FileRequest(**item.model_dump())
    return item


def bad_request_detail(errors: list[dict]) -> str:
    """One message for a request FastAPI could not parse or validate: the first error, where it is and what it says
    (a body that is no JSON at all says that), and how many more there are."""
    first = errors[0]
    if first.get("type") == "json_invalid":
        reason = first.get("ctx", {}).get("error", first.get("msg", ""))
        message = f'the body is not valid JSON ({reason}); send a JSON object, e.g. {{"requests": [...]}}'
    else:
        location = [str(part) for part in first.get("loc", ()) if part != "body"]
        text = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        # A validator's own message may already start where it is (requests[0].proof: ...).
        message = text if location and text.startswith(location[-1]) else f"{'.'.join(location) or 'body'}: {text}"
    more = len(errors) - 1
    return message + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")


class TextSafeJSONResponse(JSONResponse):
    """JSON as UTF-8, or with every non-ASCII character escaped when some string is no Unicode text (a lone surrogate
    in a REPL's answer): one item's text never turns the whole batch's answer into an error."""

    def render(self, content) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


@dataclass
class ServiceState:
    """What the routes share: the server and the counters `/health` reports."""

    server: LeanServer
    # API key -> owner name (`owners`); None: owners by client address.
    api_keys: dict[str, str] | None = None
    in_flight: int = 0
    proofs_total: int = 0
    started_at: float = field(default_factory=time.time)


def service_state(raw: Request) -> ServiceState:
    return raw.app.state.service


check_router = APIRouter()
health_router = APIRouter()


async def verify_until_disconnect(state: ServiceState, raw: Request, requests: list, timeout: float, owner: Owner):
    """(verdict, REPL response) pairs, or None when the client hung up first. `RefusedItem`s are answered here."""
    refused = {index: item.reason for index, item in enumerate(requests) if isinstance(item, RefusedItem)}
    runnable = [item for item in requests if not isinstance(item, RefusedItem)]
    state.in_flight += len(runnable)
    task = asyncio.ensure_future(
        state.server.averify_with_responses(runnable, timeout=timeout, progress=False, caller=owner)
    )
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                state.proofs_total += len(runnable)
                pairs = iter(task.result())
                return [
                    (VerificationResult(status="rejected", reason=refused[index]), None)
                    if index in refused
                    else next(pairs)
                    for index in range(len(requests))
                ]
            if await raw.is_disconnected():
                # Nobody will read the answer (e.g. a client that timed out and retries elsewhere): cancelling kills
                # the REPLs working on it instead of finishing useless proofs.
                task.cancel()
                return None
    finally:
        state.in_flight -= len(runnable)


def _kimina_codes_payload(codes: list[KiminaCode], pairs: list, timeout: float) -> list[dict]:
    payload = []
    for code, (result, response) in zip(codes, pairs, strict=True):
        kimina = _kimina_fields(result, response, timeout)
        # The older form puts the time inside the response and always has an `error` key.
        if "response" in kimina:
            kimina["response"]["time"] = kimina["time"]
        payload.append(
            {"custom_id": code.custom_id, "error": kimina.get("error"), "response": kimina.get("response")}
            | result.to_dict()
        )
    return payload


@check_router.post("/check")
@check_router.post("/api/check")
@check_router.post("/verify")
@check_router.post("/one_pass_verify_batch")
async def check(body: CheckBody, raw: Request) -> Response:
    state = service_state(raw)
    owner = owner_of(raw, state.api_keys)
    if owner is None:
        detail = "this server takes only requests with a known API key: send `Authorization: Bearer <key>`"
        return JSONResponse({"detail": detail}, status_code=UNAUTHORIZED)
    timeout = body.timeout if body.timeout is not None else state.server.config.timeout
    if body.snippets is not None:
        requests = [s.code for s in body.snippets]
    elif body.codes is not None:
        requests = [c.content for c in body.codes]
    else:
        requests = [_native_request(r) for r in body.requests]
    pairs = await verify_until_disconnect(state, raw, requests, timeout, owner)
    if pairs is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    if body.snippets is not None:
        payload = [
            {"id": snippet.id, **_kimina_fields(result, response, timeout), **result.to_dict()}
            for snippet, (result, response) in zip(body.snippets, pairs, strict=True)
        ]
    elif body.codes is not None:
        payload = _kimina_codes_payload(body.codes, pairs, timeout)
    else:
        payload = [result.to_dict() for result, _ in pairs]
    return TextSafeJSONResponse({"results": payload})


@health_router.get("/health")
async def health(raw: Request) -> dict:
    state = service_state(raw)
    server, in_flight = state.server, state.in_flight
    pool = server.stats() if server.started else {}
    alive = len(pool.get("live_pids", []))
    return {
        "status": health_status(server.started, alive, pool.get("start_failures", 0)),
        "service": SERVICE_NAME,
        "workers": server.config.workers,
        "alive": alive,
        "in_flight": in_flight,
        "queued": max(0, in_flight - server.config.workers),
        "proofs_total": state.proofs_total,
        "uptime_s": time.time() - state.started_at,
        "timeout": server.config.timeout,
        "max_request_bytes": server.config.max_request_bytes,
        "max_batch_bytes": server.config.max_batch_bytes,
        "pool": {k: v for k, v in pool.items() if k != "live_pids"},
    }


async def bad_request(request: Request, error: RequestValidationError) -> JSONResponse:
    # FastAPI answers 422 with every error of every union branch; a client needs one line to fix its request.
    return JSONResponse({"detail": bad_request_detail(list(error.errors()))}, status_code=BAD_REQUEST)


def create_app(server: LeanServer, api_keys: dict[str, str] | None = None) -> FastAPI:
    """The FastAPI app serving `server`; starts it if needed, and leaves closing it to its owner. `api_keys` maps
    each accepted API key to its owner (`owners`); None: any client, owned by its address."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        server.start()
        yield

    app = FastAPI(title="trl-verigate Lean server", lifespan=lifespan)
    app.state.service = ServiceState(server, api_keys)
    # Read at each request, so the limit is the served config's.
    app.add_middleware(BodySizeLimit, max_bytes=lambda: server.config.max_batch_bytes)
    app.add_exception_handler(RequestValidationError, bad_request)
    app.include_router(check_router)
    app.include_router(health_router)
    return app


def health_status(started: bool, alive: int, start_failures: int) -> str:
    """`/health`'s status: "ok" only while at least one REPL is alive; "starting" before the first has started;
    "no_repl" when none is alive and starts have failed (a REPL that cannot run: see the server's log and
    `trl-verigate lean-doctor`); "stopped" once the server is closed. The HTTP status stays 200: the body says it."""
    if not started:
        return "stopped"
    if alive:
        return "ok"
    return "no_repl" if start_failures else "starting"


class ReportingServer(uvicorn.Server):
    """uvicorn's server on one socket it binds itself, which says where it listens once it accepts connections.

    One socket, so `port=0` gets one port from the OS even for a host name with several addresses (uvicorn's own
    `create_server` would bind each address to a different free port). Once listening it prints
    `LISTENING_PREFIX + url` on stdout and, given `port_file`, writes the port there, so a launcher learns the port
    the server holds instead of guessing a free one and racing other processes for it.
    """

    def __init__(self, config: uvicorn.Config, port_file: str | os.PathLike | None = None):
        super().__init__(config)
        self.port_file = Path(port_file) if port_file is not None else None

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        # bind_socket exits with uvicorn's status 3 (STARTUP_FAILURE), its error logged, when the port is taken.
        super().run(sockets=sockets if sockets is not None else [self.config.bind_socket()])

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.report(self.servers[0].sockets[0].getsockname())

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Here and not after `run`: uvicorn re-raises a caught SIGTERM once serving ends, which kills the process.
        if self.port_file is not None:
            # Gone with the server, so a launcher never reads the port of one that stopped.
            self.port_file.unlink(missing_ok=True)
        await super().shutdown(sockets=sockets)

    def report(self, address: tuple) -> None:
        host, port = address[0], address[1]
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        print(LISTENING_PREFIX + url, flush=True)
        if self.port_file is not None:
            # Written whole and then renamed, so a reader polling for the file never sees half a number.
            partial = self.port_file.with_name(self.port_file.name + ".partial")
            partial.write_text(f"{port}\n")
            os.replace(partial, self.port_file)


def serve(
    config: LeanServerConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    port_file: str | os.PathLike | None = None,
    api_keys: dict[str, str] | None = None,
) -> None:
    """Run the HTTP service until interrupted, then kill every REPL.

    `port=0` lets the OS pick a free port; the server reports it on stdout (`listening on http://HOST:PORT`) and,
    given `port_file`, in that file (the port and a newline), once it accepts connections; the file is removed
    when the server shuts down. `api_keys`: see `create_app`.
    """
    with LeanServer(config) as server:
        uvicorn_config = uvicorn.Config(create_app(server, api_keys), host=host, port=port, log_level=log_level)
        ReportingServer(uvicorn_config, port_file=port_file).run()
