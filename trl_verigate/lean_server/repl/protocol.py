"""Framing of the Lean REPL protocol (leanprover-community/repl).

Requests and responses are JSON objects separated by blank lines. A response may span several
lines (the REPL pretty-prints), but JSON escapes newlines inside strings, so a blank line only
ever appears between objects.

This module only frames; `process` decides whether a framed answer is the REPL's real one (its env,
nothing after it, the REPL still alive).
"""

from __future__ import annotations

import asyncio
import json

# Real responses are a few KiB; infotrees can reach MiBs. Anything past this is runaway output.
MAX_RESPONSE_BYTES = 64 << 20


class ProtocolError(Exception):
    """The REPL's output is not a well-framed JSON object.

    `kind` is "eof" (output ended before a response began: the process exited), "truncated"
    (output ended inside a response) or "garbage" (not a JSON object, or runaway output).
    """

    def __init__(self, kind: str, detail: str, output: str = ""):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.output = output


def encode_request(request: dict) -> bytes:
    """One request as the REPL reads it: a single-line JSON object and a blank line."""
    if not isinstance(request, dict):
        raise TypeError(f"a REPL request must be a dict, got {type(request).__name__}")
    # No indent: every newline inside a string is escaped, so the object is one line.
    return (json.dumps(request, ensure_ascii=False) + "\n\n").encode("utf-8")


def decode_response(text: str) -> dict:
    """Parse one framed response; ProtocolError("garbage") unless it is a JSON object."""
    try:
        response = json.loads(text)
    except json.JSONDecodeError as error:
        raise ProtocolError("garbage", f"not JSON ({error})", text) from None
    if not isinstance(response, dict):
        raise ProtocolError("garbage", f"expected a JSON object, got {type(response).__name__}", text)
    return response


async def read_response(reader: asyncio.StreamReader, max_bytes: int = MAX_RESPONSE_BYTES, first: bytes = b"") -> dict:
    """Read the lines up to the next blank line and parse them as one response.

    `first`: bytes of the response already taken from `reader` (the process module reads one byte to
    learn that output began).
    """
    lines: list[bytes] = []
    size = 0
    while True:
        try:
            if first:
                line = first if first.endswith(b"\n") else first + await reader.readline()
                first = b""
            else:
                line = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError) as error:
            raise ProtocolError("garbage", f"a line longer than the reader's buffer ({error})") from None
        if not line:
            partial = b"".join(lines).decode("utf-8", errors="replace")
            if lines:
                raise ProtocolError("truncated", "output ended inside a response", partial)
            raise ProtocolError("eof", "output ended before a response")
        if not line.strip():
            if lines:
                break
            continue
        if not line.endswith(b"\n"):
            lines.append(line)
            partial = b"".join(lines).decode("utf-8", errors="replace")
            raise ProtocolError("truncated", "output ended inside a response", partial)
        lines.append(line)
        size += len(line)
        if size > max_bytes:
            raise ProtocolError("garbage", f"response exceeds {max_bytes} bytes without a closing blank line")
    try:
        text = b"".join(lines).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError("garbage", f"not UTF-8 ({error})") from None
    return decode_response(text)
