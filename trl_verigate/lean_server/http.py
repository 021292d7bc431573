"""HTTP front end of a `LeanServer`, compatible with kimina-lean-server's API.

`POST /check` (also `/api/check`, kimina's path) takes kimina's request forms unchanged, so its SDK and
scripts work against this server, and answers in kimina's result shape with our verdict
(`VerificationResult.to_dict()`: status, passed, messages, tactics, first_error_tactic, axioms, time_s,
reason) merged into each result. A kimina result's `response` is the Lean REPL's own answer (with `env`,
`sorries`, messages) in the snippet's coordinates, as kimina reports it (see
`LeanServer.verify_with_responses`), so kimina's SDK judges it as it would on kimina. The native form
`{"requests": [...]}` answers with the verdicts only.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from trl_verigate.lean_server.client import SERVICE_NAME
from trl_verigate.lean_server.server import LeanServer
from trl_verigate.lean_server.types import LeanServerConfig, ProofRequest, VerificationResult

# How often a running /check looks whether its client hung up, to cancel the work and free the REPLs.
DISCONNECT_POLL_S = 0.5
# nginx's code for "client closed request", as kimina-lean-server uses it.
CLIENT_CLOSED_REQUEST = 499


class KiminaSnippet(BaseModel):
    id: str
    code: str


class KiminaCode(BaseModel):
    custom_id: str | int
    proof: str | None = None
    code: str | None = None

    @model_validator(mode="after")
    def _has_content(self) -> KiminaCode:
        if self.proof is None and self.code is None:
            raise ValueError(f"codes entry {self.custom_id!r} needs 'proof' (or 'code') holding the Lean file")
        return self

    @property
    def content(self) -> str:
        return self.proof if self.proof is not None else self.code


class NativeProof(BaseModel):
    model_config = ConfigDict(extra="forbid")
    statement: str
    proof: str
    header: str | None = None


class CheckBody(BaseModel):
    """One of three forms: kimina `snippets`, kimina's older `codes`, or native `requests`."""

    snippets: list[KiminaSnippet] | None = None
    codes: list[KiminaCode] | None = None
    requests: list[NativeProof | str] | None = None
    timeout: float | None = Field(None, gt=0, description="seconds per proof; default: the server's")
    # Accepted for kimina compatibility: REPL reuse is always on (each proof runs in a fresh env branched
    # off the header's), and debug diagnostics do not exist here.
    debug: bool = False
    reuse: bool = True
    infotree: str | None = None
    infotree_type: str | None = None
    disable_cache: bool = False

    @model_validator(mode="after")
    def _one_form(self) -> CheckBody:
        given = [name for name in ("snippets", "codes", "requests") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'snippets' (kimina: [{id, code}]), 'codes' (kimina, older: [{custom_id, proof}]) "
                f"or 'requests' (native: [{{statement, proof, header}} | file text]); got {given or 'none'}"
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


def create_app(server: LeanServer) -> FastAPI:
    """The FastAPI app serving `server`; starts it if needed, and leaves closing it to its owner."""
    stats = {"in_flight": 0, "proofs_total": 0, "started_at": time.time()}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        server.start()
        yield

    app = FastAPI(title="trl-verigate Lean server", lifespan=lifespan)

    async def verify_until_disconnect(raw: Request, requests: list, timeout: float | None):
        """(verdict, REPL response) pairs, or None when the client hung up first."""
        stats["in_flight"] += len(requests)
        task = asyncio.ensure_future(server.averify_with_responses(requests, timeout=timeout, progress=False))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
                if done:
                    stats["proofs_total"] += len(requests)
                    return task.result()
                if await raw.is_disconnected():
                    # Nobody will read the answer (e.g. a client that timed out and retries elsewhere):
                    # cancelling kills the REPLs working on it instead of finishing useless proofs.
                    task.cancel()
                    return None
        finally:
            stats["in_flight"] -= len(requests)

    @app.post("/check")
    @app.post("/api/check")
    @app.post("/verify")
    @app.post("/one_pass_verify_batch")
    async def check(body: CheckBody, raw: Request) -> Response:
        timeout = body.timeout if body.timeout is not None else server.config.timeout
        if body.snippets is not None:
            requests = [s.code for s in body.snippets]
        elif body.codes is not None:
            requests = [c.content for c in body.codes]
        else:
            requests = [r if isinstance(r, str) else ProofRequest(**r.model_dump()) for r in body.requests]
        pairs = await verify_until_disconnect(raw, requests, timeout)
        if pairs is None:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        if body.snippets is not None:
            payload = [
                {"id": snippet.id, **_kimina_fields(result, response, timeout), **result.to_dict()}
                for snippet, (result, response) in zip(body.snippets, pairs, strict=True)
            ]
        elif body.codes is not None:
            payload = []
            for code, (result, response) in zip(body.codes, pairs, strict=True):
                kimina = _kimina_fields(result, response, timeout)
                # The older form puts the time inside the response and always has an `error` key.
                if "response" in kimina:
                    kimina["response"]["time"] = kimina["time"]
                payload.append(
                    {"custom_id": code.custom_id, "error": kimina.get("error"), "response": kimina.get("response")}
                    | result.to_dict()
                )
        else:
            payload = [result.to_dict() for result, _ in pairs]
        return JSONResponse({"results": payload})

    @app.get("/health")
    async def health() -> dict:
        in_flight = stats["in_flight"]
        pool = server.stats() if server.started else {}
        return {
            "status": "ok" if server.started else "stopped",
            "service": SERVICE_NAME,
            "workers": server.config.workers,
            "alive": len(pool.get("live_pids", [])),
            "in_flight": in_flight,
            "queued": max(0, in_flight - server.config.workers),
            "proofs_total": stats["proofs_total"],
            "uptime_s": time.time() - stats["started_at"],
            "timeout": server.config.timeout,
            "pool": {k: v for k, v in pool.items() if k != "live_pids"},
        }

    return app


def serve(config: LeanServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run the HTTP service until interrupted, then kill every REPL."""
    with LeanServer(config) as server:
        uvicorn.run(create_app(server), host=host, port=port, log_level=log_level)
