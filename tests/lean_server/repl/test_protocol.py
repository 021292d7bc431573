"""REPL framing: requests as one line plus a blank line, responses up to the next blank line."""

import asyncio
import json

import pytest

from trl_verigate.lean_server.repl.protocol import ProtocolError, decode_response, encode_request, read_response


def split_responses(text: str) -> list[dict]:
    """All responses in a complete REPL output (a recorded transcript), in order: the reference the streaming
    `read_response` is checked against."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        raise ProtocolError("truncated", "output ends without the blank line that closes a response", current[-1])
    return [decode_response(block) for block in blocks]


def read_all(data: bytes, count: int, max_bytes: int | None = None) -> list:
    """Read `count` responses from `data` (then EOF); a ProtocolError is returned in place of its response."""

    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        results = []
        for _ in range(count):
            try:
                kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
                results.append(await read_response(reader, **kwargs))
            except ProtocolError as error:
                results.append(error)
        return results

    return asyncio.run(main())


def test_encode_request_is_one_line_and_a_blank_line_even_with_newlines_in_the_code():
    request = {"cmd": "theorem t : 1 = 1 := by\n\n  rfl", "env": 0}
    encoded = encode_request(request)
    assert encoded.endswith(b"\n\n")
    assert encoded.count(b"\n") == 2
    assert json.loads(encoded) == request


def test_encode_request_keeps_unicode_readable():
    assert "⊢ ℕ".encode() in encode_request({"cmd": "⊢ ℕ"})


def test_encode_request_rejects_non_dicts():
    with pytest.raises(TypeError, match="must be a dict"):
        encode_request(["cmd"])


def test_read_response_joins_a_pretty_printed_object_and_stops_at_the_blank_line():
    data = b'\n{"messages":\n [{"data": "unsolved goals\\n\\u22a2 Nat"}],\n "env": 3}\n\n{"env": 4}\n\n'
    first, second = read_all(data, 2)
    assert first == {"messages": [{"data": "unsolved goals\n⊢ Nat"}], "env": 3}
    assert second == {"env": 4}


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"", "eof"),
        (b"\n\n", "eof"),
        (b'{"env":\n', "truncated"),
        (b'{"env": 1', "truncated"),
        (b"PANIC: not json\n\n", "garbage"),
        (b"[1, 2]\n\n", "garbage"),
        (b'{"env": "\xff"}\n\n', "garbage"),
    ],
)
def test_read_response_names_what_went_wrong(data, kind):
    (error,) = read_all(data, 1)
    assert isinstance(error, ProtocolError)
    assert error.kind == kind


def test_read_response_refuses_runaway_output():
    (error,) = read_all(b'{"data": "' + b"x" * 1000 + b'",\n' * 10 + b"}\n\n", 1, max_bytes=4000)
    assert isinstance(error, ProtocolError) and error.kind == "garbage"


def test_split_responses_rejects_an_unterminated_tail():
    assert split_responses('{"env": 0}\n\n{"env":\n 1}\n\n') == [{"env": 0}, {"env": 1}]
    with pytest.raises(ProtocolError, match="truncated"):
        split_responses('{"env": 0}\n\n{"env": 1}')


def transcript_pairs(folder):
    for request_file in sorted(folder.glob("*.in")):
        response_file = request_file.with_name(request_file.name[: -len(".in")] + ".expected.out")
        if response_file.exists():
            yield request_file, response_file


def test_every_recorded_transcript_splits_into_one_response_per_request(transcripts_dir):
    checked = 0
    for request_file, response_file in transcript_pairs(transcripts_dir):
        requests = [b for b in request_file.read_text(encoding="utf-8").split("\n\n") if b.strip()]
        responses = split_responses(response_file.read_text(encoding="utf-8"))
        assert len(responses) == len(requests), request_file.name
        checked += 1
    # The folder holds ~55 pairs; a handful would mean the glob or the split is broken.
    assert checked >= 40


def test_the_async_reader_agrees_with_split_responses_on_every_transcript(transcripts_dir):
    for _, response_file in transcript_pairs(transcripts_dir):
        data = response_file.read_bytes()
        expected = split_responses(data.decode("utf-8"))
        assert read_all(data, len(expected)) == expected, response_file.name
        (after_the_last,) = read_all(data, len(expected) + 1)[-1:]
        assert isinstance(after_the_last, ProtocolError) and after_the_last.kind == "eof"


@pytest.mark.parametrize(
    ("first", "rest"),
    [
        (b"{", b'"env": 2}\n\n'),  # the byte that told the caller output began
        (b'{"env": 2}\n', b"\n"),  # a whole first line
        (b"\n", b'{"env": 2}\n\n'),  # a leading blank line, skipped as without `first`
    ],
)
def test_read_response_continues_from_bytes_already_taken(first, rest):
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(rest + b'{"env": 3}\n\n')
        reader.feed_eof()
        return await read_response(reader, first=first), await read_response(reader)

    assert asyncio.run(main()) == ({"env": 2}, {"env": 3})
