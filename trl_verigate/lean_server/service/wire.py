"""What the in-process server, the HTTP service and the client agree on: the service's name, the header a client
names itself with, and how a request's size is counted and its type checked."""

from __future__ import annotations

from collections.abc import Sequence

from trl_verigate.lean_server.core import FileRequest, ProofRequest, Request

SERVICE_NAME = "trl-verigate"
# The header a `LeanClient` sends its own id in, so a server gives it REPLs of its own (`http.caller_of`).
CALLER_HEADER = "X-Verigate-Caller"


def request_bytes(request: Request) -> int:
    """A request's size as `max_request_bytes` counts it: the UTF-8 bytes of all its text fields."""
    if isinstance(request, ProofRequest):
        parts = (request.statement, request.proof, request.header or "")
    elif isinstance(request, FileRequest):
        parts = (request.file, request.statement or "", request.header or "")
    else:
        parts = (request,)
    return sum(len(part.encode("utf-8", "surrogatepass")) for part in parts)


def checked_requests(requests: Sequence[Request]) -> list[Request]:
    if isinstance(requests, (str, ProofRequest, FileRequest)):
        raise TypeError("verify() takes a list of requests; wrap a single request in a list: [request]")
    checked = list(requests)
    for index, request in enumerate(checked):
        if not isinstance(request, (ProofRequest, FileRequest, str)):
            raise TypeError(
                f"requests[{index}] is a {type(request).__name__}; each request must be a ProofRequest "
                "(statement, proof), a FileRequest (file, optional trusted statement/header) or a str holding a "
                "complete Lean file"
            )
    return checked
