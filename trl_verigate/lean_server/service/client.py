"""Client for one or more Lean verification services over HTTP.

`LeanClient` has the same `verify` / `averify` as the in-process `LeanServer`, so training code can
switch between a local pool and a fleet of `trl-verigate lean-server` processes (or real
kimina-lean-server deployments) by changing one constructor. A server that is down never raises:
its batches move to another server, and a request that no server could answer comes back with
`status="error"` and the reason.

Sizes: no POST it sends is larger than `config.max_batch_bytes` (a batch is split by bytes as well as by
`max_batch`), and a request over `config.max_request_bytes` comes back `status="rejected"` without being sent, as
`LeanServer` answers it. Both default to the server's defaults; a server that answers 413 with a smaller limit
(`trl-verigate lean-server --max-batch-bytes`) has its limit remembered and the batch re-split to fit.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import math
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from trl_verigate.lean_server.core import FileRequest, LeanServerConfig, ProofRequest, Request, VerificationResult
from trl_verigate.lean_server.precheck import policy_for, prepare
from trl_verigate.lean_server.service.wire import CALLER_HEADER, SERVICE_NAME, request_bytes, request_problem
from trl_verigate.lean_server.verdict import judge
from trl_verigate.prover_pool.service import progress_bar

# `GET /health` of `trl-verigate lean-server` reports this as "service"; kimina-lean-server answers
# {"status": "ok"} only, which is how the client tells the two protocols apart.
PROTOCOLS = ("auto", "verigate", "kimina")
# Slack on top of the worst case (every proof of a batch timing out one after another) before the
# client gives up waiting for a server's answer.
_HTTP_SLACK_S = 60.0
# Bytes of a POST body besides its items: `{"requests":[`, `],"timeout":…}` (kimina: its snippet keys and options).
_ENVELOPE_BYTES = 256


class _RetryableError(Exception):
    """The server could not answer (down, overloaded, 5xx, garbled): try another one."""


class _RejectedBatchError(Exception):
    """The server refused the batch itself (4xx): sending it elsewhere would not help."""


class _PayloadTooLargeError(_RejectedBatchError):
    """HTTP 413: the POST body is over the server's `max_batch_bytes`, `limit` (None when the answer lacks it)."""

    def __init__(self, message: str, limit: int | None):
        super().__init__(message)
        self.limit = limit


@dataclass
class _Endpoint:
    url: str
    protocol: str | None
    in_flight: int = 0
    consecutive_failures: int = 0
    avoid_until: float = 0.0
    # The server's own body limit, once a 413 told it; None: assume `config.max_batch_bytes`.
    max_batch_bytes: int | None = None


def _encode_request(request: Request):
    """A request (one `request_problem` accepts) as the native `{"requests": [...]}` form of `POST /check` takes it."""
    if isinstance(request, ProofRequest):
        return {"statement": request.statement, "proof": request.proof, "header": request.header}
    if isinstance(request, FileRequest):
        fields = {"file": request.file, "statement": request.statement, "header": request.header}
        return {key: value for key, value in fields.items() if value is not None}
    return request


def _json_bytes(payload) -> bytes:
    """The POST body for `payload`; the client sends exactly these bytes, so sizes counted on them hold."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _split_by_bytes(items: list, sizes: list[int], limit: int) -> list[list]:
    """`items` in order, cut into runs whose sizes plus a separator each and the envelope stay within `limit`.

    An item too large to share a POST with anything sits alone in its run.
    """
    runs: list[list] = []
    total = limit  # forces a new run for the first item
    for item, size in zip(items, sizes, strict=True):
        if runs and total + size + 1 <= limit:
            runs[-1].append(item)
            total += size + 1
        else:
            runs.append([item])
            total = _ENVELOPE_BYTES + size
    return runs


def _shift_lines(response: dict, delta: int) -> dict:
    """Copy of a REPL response with every message/sorry line moved by `delta`."""
    shifted = copy.deepcopy(response)
    for key in ("messages", "sorries"):
        for item in shifted.get(key) or []:
            for pos_key in ("pos", "endPos"):
                pos = item.get(pos_key)
                if isinstance(pos, dict) and isinstance(pos.get("line"), int):
                    pos["line"] += delta
    return shifted


def _kimina_code(prepared) -> tuple[str, int]:
    """The full snippet kimina-lean-server receives, and how many lines precede `prepared.code` in it."""
    if not prepared.header.strip():
        return prepared.code, 0
    prefix = prepared.header + "\n"
    return prefix + prepared.code, prefix.count("\n")


class LeanClient:
    """Verify Lean proofs on remote servers: `trl-verigate lean-server` or kimina-lean-server.

    Args:
        urls: base URLs of the servers, e.g. `["http://10.0.0.5:8000", "http://10.0.0.6:8000"]`.
        timeout: per-proof timeout in seconds sent with every batch; None uses the server's default
            (`config.timeout` against kimina-lean-server, which needs an explicit value).
        retries: how many times a batch that failed on one server (connection error, 5xx) is retried,
            preferring servers it has not failed on yet.
        backoff: base delay in seconds before retrying on a server that already failed; doubles each time.
        max_batch: most proofs sent in one HTTP request; a batch is also split so that its POST body stays within
            `config.max_batch_bytes` (set that to the servers' `--max-batch-bytes` when they were started with a
            smaller one; a 413 from a server teaches the client its limit anyway).
        concurrency: most HTTP requests in flight at once (default: 2 per server, so each server always
            has its next batch queued while it works on the current one).
        protocol: "verigate" (our `/check` with verdicts computed server-side), "kimina" (kimina-lean-server's
            `/api/check`; verdicts computed here with `judge`), or "auto" (ask each server's `/health`).
        config: verdict settings used in kimina mode (default header, axiom whitelist, native_decide,
            tactic granularity; a verigate server applies its own), and in every mode the size limits:
            a request over `config.max_request_bytes` is "rejected" without being sent.
        api_key: sent as `Authorization: Bearer <key>` (kimina-lean-server deployments with LEAN_SERVER_API_KEY).
        http_timeout: seconds to wait for one batch's answer; default: `timeout * batch size + 60`.
    """

    def __init__(
        self,
        urls: Sequence[str],
        timeout: float | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        max_batch: int = 64,
        concurrency: int | None = None,
        protocol: str = "auto",
        config: LeanServerConfig | None = None,
        api_key: str | None = None,
        http_timeout: float | None = None,
    ):
        if isinstance(urls, str) or not urls:
            raise ValueError(
                f"LeanClient.urls must be a non-empty list of base URLs, e.g. ['{urls or 'http://127.0.0.1:8000'}']"
            )
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"LeanClient.urls: {url!r} is not an http(s) URL, e.g. 'http://127.0.0.1:8000'")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"LeanClient.timeout must be > 0 seconds or None, got {timeout}")
        if retries < 0:
            raise ValueError(f"LeanClient.retries must be >= 0, got {retries}")
        if backoff < 0:
            raise ValueError(f"LeanClient.backoff must be >= 0 seconds, got {backoff}")
        if max_batch < 1:
            raise ValueError(f"LeanClient.max_batch must be >= 1, got {max_batch}")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"LeanClient.concurrency must be >= 1 or None, got {concurrency}")
        if protocol not in PROTOCOLS:
            raise ValueError(f"LeanClient.protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if http_timeout is not None and http_timeout <= 0:
            raise ValueError(f"LeanClient.http_timeout must be > 0 seconds or None, got {http_timeout}")
        fixed_protocol = None if protocol == "auto" else protocol
        self.endpoints = [_Endpoint(url=url.rstrip("/"), protocol=fixed_protocol) for url in urls]
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_batch = max_batch
        self.concurrency = concurrency or 2 * len(self.endpoints)
        self.config = config or LeanServerConfig()
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # The servers give this client REPLs of its own (`owners.owner_of`: a label within its identity).
        self.caller = uuid.uuid4().hex
        self.http_timeout = http_timeout
        self._rotation = itertools.count()

    def verify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | None = None,
    ) -> list[VerificationResult]:
        """Blocking `averify`; usable from inside a running event loop (e.g. a notebook) too."""
        work = self.averify(requests, timeout=timeout, progress=progress, caller=caller)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(work)
        # asyncio.run refuses to nest in a running loop, so the batch runs on a private thread and loop.
        with ThreadPoolExecutor(max_workers=1) as executor:
            return executor.submit(asyncio.run, work).result()

    async def averify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | None = None,
    ) -> list[VerificationResult]:
        """Verify `requests`; one result per request, in order.

        `progress`: True shows a tqdm bar, False never; None shows one for calls of at least 64 requests
        when stderr is a terminal (as `LeanServer.verify`). `caller`: who asks, sent to the servers, whose REPLs
        serve no other caller (default: this client's own id).
        """
        if timeout is not None and timeout <= 0:
            raise ValueError(f"LeanClient.averify timeout must be > 0 seconds or None, got {timeout}")
        requests = list(requests)
        results: list[VerificationResult | None] = [None] * len(requests)
        sendable, wire_sizes = [], []
        for index, request in enumerate(requests):
            problem = request_problem(request)
            if problem is not None:
                results[index] = VerificationResult(status="rejected", reason=f"requests[{index}]: {problem}; not sent")
                continue
            wire_size = len(_json_bytes(_encode_request(request)))
            refusal = self._size_refusal(index, request, wire_size)
            if refusal is not None:
                results[index] = VerificationResult(status="rejected", reason=refusal)
            else:
                sendable.append(index)
                wire_sizes.append(wire_size)
        if not sendable:
            return results  # type: ignore[return-value]
        timeout = timeout if timeout is not None else self.timeout
        gate = asyncio.Semaphore(self.concurrency)
        bar = progress_bar(progress, len(requests), "Lean verify (remote)")
        if bar is not None:
            bar.update(len(requests) - len(sendable))  # refused unsent: already answered

        async def run(batch: list[int], http: httpx.AsyncClient) -> None:
            async with gate:
                batch_results = await self._run_batch(http, [requests[i] for i in batch], timeout)
            for index, result in zip(batch, batch_results, strict=True):
                results[index] = result
            if bar is not None:
                bar.update(len(batch))

        try:
            caller_header = {CALLER_HEADER: caller or self.caller}
            async with httpx.AsyncClient(headers={**self.headers, **caller_header}) as http:
                await asyncio.gather(*(run(batch, http) for batch in self._batches(sendable, wire_sizes)))
        finally:
            if bar is not None:
                bar.close()
        return results  # type: ignore[return-value]

    def _size_refusal(self, index: int, request: Request, wire_size: int) -> str | None:
        """Why `request` must not be sent (over a size limit), or None. Counted as `LeanServer` counts it."""
        size, limit = request_bytes(request), self.config.max_request_bytes
        if size > limit:
            return (
                f"request too large: requests[{index}] is {size} bytes, over the limit of {limit} bytes per request "
                "(LeanClient's config.max_request_bytes; servers: --max-request-bytes); not sent"
            )
        if wire_size + _ENVELOPE_BYTES > self.config.max_batch_bytes:
            return (
                f"request too large: requests[{index}] takes {wire_size} bytes as JSON, more than one POST may hold "
                f"({self.config.max_batch_bytes} bytes: LeanClient's config.max_batch_bytes; servers: "
                "--max-batch-bytes); not sent"
            )
        return None

    def _batches(self, indices: list[int], wire_sizes: list[int]) -> list[list[int]]:
        # At least one batch per server so a small call still uses the whole fleet, and even sizes so
        # the last batch is not a straggler that keeps one server busy alone.
        n = len(indices)
        n_batches = max(math.ceil(n / self.max_batch), min(n, len(self.endpoints)))
        size, extra = divmod(n, n_batches)
        batches, start = [], 0
        for b in range(n_batches):
            end = start + size + (1 if b < extra else 0)
            # Then by bytes, so no POST is refused by the server's max_batch_bytes.
            batches += _split_by_bytes(indices[start:end], wire_sizes[start:end], self.config.max_batch_bytes)
            start = end
        return batches

    def _pick(self, tried: set[str]) -> _Endpoint:
        now = time.monotonic()
        turn = next(self._rotation)
        ranked = sorted(
            range(len(self.endpoints)),
            key=lambda i: (
                self.endpoints[i].url in tried,
                self.endpoints[i].avoid_until > now,
                self.endpoints[i].in_flight,
                (i - turn) % len(self.endpoints),
            ),
        )
        return self.endpoints[ranked[0]]

    async def _run_batch(
        self, http: httpx.AsyncClient, requests: list[Request], timeout: float | None
    ) -> list[VerificationResult]:
        failures: list[str] = []
        tried: set[str] = set()
        for attempt in range(self.retries + 1):
            endpoint = self._pick(tried)
            if endpoint.url in tried and self.backoff > 0:
                await asyncio.sleep(self.backoff * 2 ** min(attempt - 1, 6))
            tried.add(endpoint.url)
            endpoint.in_flight += 1
            try:
                results = await self._send(http, endpoint, requests, timeout)
            except _RetryableError as exc:
                failures.append(f"{endpoint.url}: {exc}")
                endpoint.consecutive_failures += 1
                endpoint.avoid_until = time.monotonic() + self.backoff * 2 ** min(endpoint.consecutive_failures, 6)
                continue
            except _RejectedBatchError as exc:
                reason = f"{endpoint.url} refused the batch: {exc}"
                return [VerificationResult(status="error", reason=reason) for _ in requests]
            finally:
                endpoint.in_flight -= 1
            endpoint.consecutive_failures = 0
            endpoint.avoid_until = 0.0
            return results
        reason = f"no server could verify this request after {self.retries + 1} attempts: " + "; ".join(failures)
        return [VerificationResult(status="error", reason=reason) for _ in requests]

    async def _send(
        self, http: httpx.AsyncClient, endpoint: _Endpoint, requests: list[Request], timeout: float | None
    ) -> list[VerificationResult]:
        if endpoint.protocol is None:
            endpoint.protocol = await self._detect_protocol(http, endpoint)
        if endpoint.protocol == "verigate":
            return await self._send_verigate(http, endpoint, requests, timeout)
        return await self._send_kimina(http, endpoint, requests, timeout)

    async def _post(self, http: httpx.AsyncClient, url: str, payload: dict, n_proofs: int, timeout: float) -> dict:
        wait = self.http_timeout or timeout * n_proofs + _HTTP_SLACK_S
        try:
            response = await http.post(
                url,
                content=_json_bytes(payload),
                headers={"content-type": "application/json"},
                timeout=httpx.Timeout(wait, connect=10.0),
            )
        except httpx.HTTPError as exc:
            raise _RetryableError(f"{type(exc).__name__}: {exc}") from exc
        # 429 is kimina-lean-server's "No available REPLs": another server may have some.
        if response.status_code >= 500 or response.status_code == 429:
            raise _RetryableError(f"HTTP {response.status_code}: {response.text[:300]}")
        if response.status_code == 413:
            raise _PayloadTooLargeError(f"HTTP 413: {response.text[:300]}", _limit_of_413(response))
        if response.status_code >= 400:
            raise _RejectedBatchError(f"HTTP {response.status_code}: {response.text[:300]}")
        try:
            data = response.json()
        except ValueError as exc:
            raise _RetryableError(f"answer is not JSON: {response.text[:200]!r}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise _RetryableError(f"answer has no 'results' list: {response.text[:200]!r}")
        return data

    async def _detect_protocol(self, http: httpx.AsyncClient, endpoint: _Endpoint) -> str:
        try:
            response = await http.get(f"{endpoint.url}/health", timeout=10.0)
            health = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            raise _RetryableError(f"GET /health failed: {type(exc).__name__}: {exc}") from exc
        if health is None:
            raise _RetryableError(f"GET /health answered HTTP {response.status_code}")
        return "verigate" if isinstance(health, dict) and health.get("service") == SERVICE_NAME else "kimina"

    async def _send_verigate(
        self, http: httpx.AsyncClient, endpoint: _Endpoint, requests: list[Request], timeout: float | None
    ) -> list[VerificationResult]:
        items = [_encode_request(request) for request in requests]
        if endpoint.max_batch_bytes is None:
            return await self._post_verigate(http, endpoint, requests, items, timeout)
        # The server's limit is below config.max_batch_bytes: re-split the batch to fit it, in order.
        sizes = [len(_json_bytes(item)) for item in items]
        results: list[VerificationResult] = []
        for run in _split_by_bytes(list(range(len(items))), sizes, endpoint.max_batch_bytes):
            if len(run) == 1 and sizes[run[0]] + _ENVELOPE_BYTES > endpoint.max_batch_bytes:
                reason = (
                    f"request too large: it takes {sizes[run[0]]} bytes as JSON, more than {endpoint.url} accepts in "
                    f"one POST ({endpoint.max_batch_bytes} bytes, its --max-batch-bytes); not sent"
                )
                results.append(VerificationResult(status="rejected", reason=reason))
                continue
            results += await self._post_verigate(
                http, endpoint, [requests[i] for i in run], [items[i] for i in run], timeout
            )
        return results

    async def _post_verigate(
        self, http: httpx.AsyncClient, endpoint: _Endpoint, requests: list[Request], items: list, timeout: float | None
    ) -> list[VerificationResult]:
        payload: dict = {"requests": items}
        if timeout is not None:
            payload["timeout"] = timeout
        try:
            data = await self._post(
                http, f"{endpoint.url}/check", payload, len(requests), timeout or self.config.timeout
            )
        except _PayloadTooLargeError as exc:
            body_size = len(_json_bytes(payload))
            if exc.limit is None or exc.limit >= body_size:
                raise
            # The server was started with a smaller --max-batch-bytes than config.max_batch_bytes: learn it.
            endpoint.max_batch_bytes = exc.limit
            return await self._send_verigate(http, endpoint, requests, timeout)
        if len(data["results"]) != len(requests):
            raise _RetryableError(f"sent {len(requests)} requests, got {len(data['results'])} results")
        try:
            return [VerificationResult.from_dict(item) for item in data["results"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise _RetryableError(f"malformed result: {type(exc).__name__}: {exc}") from exc

    async def _send_kimina(
        self, http: httpx.AsyncClient, endpoint: _Endpoint, requests: list[Request], timeout: float | None
    ) -> list[VerificationResult]:
        proof_timeout = timeout if timeout is not None else self.config.timeout
        results: list[VerificationResult | None] = [None] * len(requests)
        pending: dict[str, tuple[int, object, int]] = {}
        snippets = []
        for index, request in enumerate(requests):
            prepared = prepare(request, self.config.header, policy_for(self.config))
            if isinstance(prepared, VerificationResult):
                results[index] = prepared
                continue
            code, lines_before = _kimina_code(prepared)
            snippet_id = str(index)
            pending[snippet_id] = (index, prepared, lines_before)
            snippets.append({"id": snippet_id, "code": code})
        if snippets:
            # kimina-lean-server's timeout field is an integer number of seconds.
            payload = {"snippets": snippets, "timeout": max(1, math.ceil(proof_timeout)), "debug": False, "reuse": True}
            data = await self._post(http, f"{endpoint.url}/api/check", payload, len(snippets), proof_timeout)
            for item in data["results"]:
                if not isinstance(item, dict) or str(item.get("id")) not in pending:
                    raise _RetryableError(f"answer holds a result for an id that was not sent: {str(item)[:200]}")
                index, prepared, lines_before = pending.pop(str(item["id"]))
                results[index] = self._kimina_verdict(prepared, item, lines_before)
            if pending:
                raise _RetryableError(f"answer lacks results for snippet ids {sorted(pending)}")
        return results  # type: ignore[return-value]

    def _kimina_verdict(self, prepared, item: dict, lines_before: int) -> VerificationResult:
        time_s = float(item.get("time") or 0.0)
        error = item.get("error")
        if error:
            # kimina-lean-server reports its own timeouts as "Lean REPL ... timed out in N seconds".
            status = "timeout" if "timed out" in str(error) else "error"
            return VerificationResult(status=status, time_s=time_s, reason=f"kimina-lean-server: {error}")
        response = item.get("response")
        if not isinstance(response, dict):
            return VerificationResult(
                status="error", time_s=time_s, reason=f"kimina-lean-server sent no response: {item}"
            )
        # kimina-lean-server reports lines of the whole snippet; judge expects lines of prepared.code.
        try:
            return judge(prepared, _shift_lines(response, -lines_before), self.config, time_s)
        except Exception as error:  # noqa: BLE001 - one odd response must not take down the batch
            return VerificationResult(
                status="error", time_s=time_s, reason=f"cannot judge kimina-lean-server's response: {error!r}"
            )


def _limit_of_413(response: httpx.Response) -> int | None:
    """`limit_bytes` of a trl-verigate 413 answer; None from servers that do not say it."""
    try:
        limit = response.json().get("limit_bytes")
    except (ValueError, AttributeError):
        return None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
