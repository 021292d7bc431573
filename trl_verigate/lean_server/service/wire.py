"""What the in-process server, the HTTP service and the client agree on: the service's name, the header a client
names itself with, how a request's size is counted, and which items are no request Lean can run."""

from __future__ import annotations

from collections.abc import Sequence

from trl_verigate.lean_server.core import FileRequest, ProofRequest, Request

SERVICE_NAME = "trl-verigate"
# The header a `LeanClient` sends its own id in, so a server gives it REPLs of its own (`owners.owner_of`: a label within its identity).
CALLER_HEADER = "X-Verigate-Caller"


FORMS = (
    "a ProofRequest (statement, proof), a FileRequest (file, optional trusted statement/header) or a str holding a "
    "complete Lean file"
)


def _fields(request) -> tuple[tuple[str, object, bool], ...] | None:
    """(name, value, optional) of each text field of `request`, or None when it is no request."""
    if isinstance(request, ProofRequest):
        return (
            ("statement", request.statement, False),
            ("proof", request.proof, False),
            ("header", request.header, True),
        )
    if isinstance(request, FileRequest):
        return ("file", request.file, False), ("statement", request.statement, True), ("header", request.header, True)
    if isinstance(request, str):
        return (("file", request, False),)
    return None


def request_bytes(request: Request) -> int:
    """A request's size as `max_request_bytes` counts it: the UTF-8 bytes of all its text fields (0 for what is no
    request, which `request_problem` refuses)."""
    fields = _fields(request) or ()
    return sum(len(value.encode("utf-8", "surrogatepass")) for _, value, _ in fields if isinstance(value, str))


def request_problem(request) -> str | None:
    """Why `request` cannot be sent to Lean, or None: it is no request, a field is not text, or a field holds what
    is not Unicode text (a lone surrogate, as from bytes decoded with errors='surrogateescape'). Each such request
    gets its own `rejected` result; the others of its batch run."""
    fields = _fields(request)
    if fields is None:
        return f"a {type(request).__name__} is not a request: send {FORMS}"
    for name, value, optional in fields:
        if value is None and optional:
            continue
        if not isinstance(value, str):
            return f"the {name} must be a str, got {type(value).__name__}: send {FORMS}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            return (
                f"the {name} holds U+{ord(value[error.start]):04X} at offset {error.start}, a lone surrogate, which is "
                "not Unicode text: send valid text (decode bytes with errors='replace')"
            )
    return None


def checked_requests(requests: Sequence[Request]) -> list[Request]:
    """The batch as a list; a single request given bare is refused (its items are checked one by one later)."""
    if isinstance(requests, (str, ProofRequest, FileRequest)):
        raise TypeError("verify() takes a list of requests; wrap a single request in a list: [request]")
    return list(requests)
