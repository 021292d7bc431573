"""The coqidetop XML protocol of Coq 8.16 (protocol version 20220205): the calls we send, the framing of what comes
back, and the reading of answers and feedback.

coqidetop answers each call with any number of top-level `<feedback>` elements and then one `<value>` element
(`val="good"` or `val="fail"`). Everything Coq prints (messages, goals, `idtac` output) goes through its XML printer,
which escapes `<` and `>` in text, so text never contains a tag and a proof cannot write a protocol frame: framing
here reads raw bytes, tag by tag. The printer leaves `&` unescaped before `#`, so a printed "&#60;" arrives as a
character reference: it decodes to text like any other (an invalid one stays literal), never to a tag. Attribute
values are escaped Coq's way (backslash before `\\` and `"`), not XML's.

Calls are built from Coq's typed encoding (`<pair>`, `<string>`, `<state_id val=..>`, ...); text sent to Coq is
XML-escaped here. `Add` parses only the FIRST sentence of its text and silently drops the rest, so a caller sends
one sentence per `Add` (`coq.sentences` splits them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PROTOCOL_VERSION = "20220205"
# Past this an answer is runaway output (real answers are KiBs; a goal list can reach MiBs).
MAX_ANSWER_BYTES = 64 << 20

_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'", "nbsp": " "}
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|[a-z]{2,4});")
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_.\-]*")
_BLANK = b" \t\r\n"


class ProtocolError(Exception):
    """coqidetop's output is not the protocol: `kind` is "eof" (it ended before an answer), "truncated" (it ended
    inside one) or "garbage" (not well-framed XML, or runaway output)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass
class Node:
    """One XML element: its tag, attributes and children (nodes and decoded text, in order)."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list = field(default_factory=list)

    def elements(self) -> list[Node]:
        return [child for child in self.children if isinstance(child, Node)]

    def find(self, tag: str) -> Node | None:
        """The first descendant (depth first) with this tag, or None."""
        for child in self.elements():
            if child.tag == tag:
                return child
            found = child.find(tag)
            if found is not None:
                return found
        return None

    def text(self) -> str:
        """All text below this element, concatenated (richpp's markup dropped)."""
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)


# ---------------------------------------------------------------- encoding calls


def escape(text: str) -> str:
    """`text` as XML character data Coq's parser reads back unchanged."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def _call(name: str, argument: str) -> bytes:
    return f'<call val="{name}">{argument}</call>\n'.encode()


def _pair(first: str, second: str) -> str:
    return f"<pair>{first}{second}</pair>"


def _state(state_id: int) -> str:
    return f'<state_id val="{int(state_id)}"/>'


def about() -> bytes:
    return _call("About", "<unit/>")


def init() -> bytes:
    return _call("Init", '<option val="none"/>')


def add(sentence: str, state_id: int, edit_id: int = 0) -> bytes:
    """Queue ONE sentence after `state_id` (Coq reads only the first sentence of `sentence`)."""
    text = _pair(f"<string>{escape(sentence)}</string>", f"<int>{int(edit_id)}</int>")
    where = _pair(_state(state_id), '<bool val="false"/>')
    # The last two fields place the sentence in a document (byte offset, line, start of line) for error locations;
    # every sentence is its own document here, so locations are relative to the sentence.
    return _call("Add", _pair(_pair(_pair(text, where), "<int>0</int>"), _pair("<int>1</int>", "<int>0</int>")))


def status(force: bool = False) -> bytes:
    """Run the queued sentences up to the tip (or the first error)."""
    return _call("Status", f'<bool val="{"true" if force else "false"}"/>')


def goal() -> bytes:
    return _call("Goal", "<unit/>")


def edit_at(state_id: int) -> bytes:
    return _call("Edit_at", _state(state_id))


def query(text: str, state_id: int, route_id: int = 0) -> bytes:
    """Run a query command (`Check t.`, `Print Assumptions t.`) at `state_id`; its output comes as feedback."""
    return _call(
        "Query",
        _pair(f'<route_id val="{int(route_id)}"/>', _pair(f"<string>{escape(text)}</string>", _state(state_id))),
    )


# ---------------------------------------------------------------- framing


def decode_text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return _ENTITY.sub(_entity, text) if "&" in text else text


def _entity(match: re.Match) -> str:
    name = match.group(1)
    if name[0] != "#":
        return _ENTITIES.get(name, match.group(0))
    code = int(name[2:], 16) if name[1] == "x" else int(name[1:])
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else match.group(0)


def _attribute_value(raw: bytes) -> str:
    return re.sub(rb"\\(.)", rb"\1", raw).decode("utf-8", errors="replace")


class FrameReader:
    """Turns coqidetop's stdout bytes into complete top-level elements, however the bytes are chunked."""

    def __init__(self):
        self._buffer = bytearray()
        self._stack: list[Node] = []
        self._element_bytes = 0

    @property
    def inside_element(self) -> bool:
        return bool(self._stack) or bool(self._buffer.strip(_BLANK))

    def feed(self, data: bytes) -> list[Node]:
        """The top-level elements completed by `data`; ProtocolError("garbage") on anything that is not XML."""
        self._buffer += data
        self._element_bytes += len(data)
        if self._element_bytes > MAX_ANSWER_BYTES:
            raise ProtocolError("garbage", f"an answer longer than {MAX_ANSWER_BYTES} bytes")
        done: list[Node] = []
        buffer = self._buffer
        position = 0
        while position < len(buffer):
            if buffer[position] != ord("<"):
                end = buffer.find(b"<", position)
                if end < 0:
                    break  # text continues in the next chunk (a UTF-8 character may be split)
                self._text(bytes(buffer[position:end]))
                position = end
                continue
            end = self._tag_end(buffer, position)
            if end is None:
                break
            completed = self._tag(bytes(buffer[position:end]))
            position = end
            if completed is not None:
                done.append(completed)
                self._element_bytes = len(buffer) - position
        del buffer[:position]
        return done

    def _text(self, raw: bytes) -> None:
        if not self._stack:
            if raw.strip(_BLANK):
                raise ProtocolError("garbage", f"text outside any element: {raw[:200]!r}")
            return
        self._stack[-1].children.append(decode_text(raw))

    @staticmethod
    def _tag_end(buffer: bytearray, start: int) -> int | None:
        """The index just past the tag starting at `start`, or None when it is not complete yet."""
        position = start + 1
        while position < len(buffer):
            byte = buffer[position]
            if byte == ord(">"):
                return position + 1
            if byte == ord('"'):
                position += 1
                while position < len(buffer) and buffer[position] != ord('"'):
                    position += 2 if buffer[position] == ord("\\") else 1
            position += 1
        return None

    def _tag(self, raw: bytes) -> Node | None:
        """Apply one tag; the finished top-level element when it closes one."""
        if raw.startswith(b"</"):
            name = raw[2:-1].strip(_BLANK).decode("ascii", errors="replace")
            if not self._stack or self._stack[-1].tag != name:
                open_tag = self._stack[-1].tag if self._stack else None
                raise ProtocolError("garbage", f"closing </{name}> where <{open_tag}> is open")
            node = self._stack.pop()
            return None if self._stack else node
        self_closing = raw.endswith(b"/>")
        body = raw[1 : -2 if self_closing else -1]
        name = _NAME.match(body)
        if name is None:
            raise ProtocolError("garbage", f"not a tag: {raw[:200]!r}")
        node = Node(name.group(0).decode("ascii"), _attributes(body[name.end() :], raw))
        if self._stack:
            self._stack[-1].children.append(node)
        if self_closing:
            return None if self._stack else node
        self._stack.append(node)
        return None


_ATTRIBUTE = re.compile(rb'[ \t\r\n]*([A-Za-z_][A-Za-z0-9_.\-]*)="((?:[^"\\]|\\.)*)"')


def _attributes(body: bytes, raw: bytes) -> dict[str, str]:
    attrs: dict[str, str] = {}
    position = 0
    while position < len(body) and body[position:].strip(_BLANK):
        match = _ATTRIBUTE.match(body, position)
        if match is None:
            raise ProtocolError("garbage", f"malformed attributes in {raw[:200]!r}")
        attrs[match.group(1).decode("ascii")] = _attribute_value(match.group(2))
        position = match.end()
    return attrs


# ---------------------------------------------------------------- reading answers


@dataclass
class Answer:
    """A `<value>`: good or not, its payload, and for a failure the state id and location Coq gives."""

    good: bool
    node: Node
    state_id: int | None = None
    loc: tuple[int, int] | None = None
    message: str = ""


@dataclass
class Feedback:
    """A `<feedback>`: the state it is about, its kind (`processed`, `message`, ...) and, for a message, its level
    ("error", "warning", "notice", "info", "debug"), text and location in the sentence."""

    state_id: int | None
    kind: str
    level: str | None = None
    text: str = ""
    loc: tuple[int, int] | None = None


def read_answer(node: Node) -> Answer:
    if node.tag != "value" or node.attrs.get("val") not in ("good", "fail"):
        raise ProtocolError("garbage", f"expected <value val=good|fail>, got <{node.tag} {node.attrs}>")
    if node.attrs["val"] == "good":
        return Answer(True, node)
    state = node.find("state_id")
    loc = None
    if "loc_s" in node.attrs and "loc_e" in node.attrs:
        loc = (_int(node.attrs["loc_s"]), _int(node.attrs["loc_e"]))
    return Answer(False, node, _int(state.attrs.get("val")) if state is not None else None, loc, node.text().strip())


def read_feedback(node: Node) -> Feedback:
    if node.tag != "feedback":
        raise ProtocolError("garbage", f"expected <feedback>, got <{node.tag}>")
    state = next((child for child in node.elements() if child.tag == "state_id"), None)
    content = next((child for child in node.elements() if child.tag == "feedback_content"), None)
    state_id = _int(state.attrs.get("val")) if state is not None else None
    if content is None:
        return Feedback(state_id, "")
    kind = content.attrs.get("val", "")
    message = content.find("message") if kind == "message" else None
    if message is None:
        return Feedback(state_id, kind)
    level = message.find("message_level")
    loc_node = message.find("loc")
    loc = None
    if loc_node is not None and "start" in loc_node.attrs and "stop" in loc_node.attrs:
        loc = (_int(loc_node.attrs["start"]), _int(loc_node.attrs["stop"]))
    richpp = message.find("richpp")
    text = (richpp.text() if richpp is not None else "").strip()
    return Feedback(state_id, kind, level.attrs.get("val") if level is not None else None, text, loc)


def read_coq_info(answer: Answer) -> tuple[str, str]:
    """(Coq version, protocol version) from the answer to `About`."""
    info = answer.node.find("coq_info")
    strings = [child.text() for child in info.elements()] if info is not None else []
    if len(strings) < 2:
        raise ProtocolError("garbage", "the answer to About carries no version")
    return strings[0], strings[1]


def read_state_id(answer: Answer) -> int:
    """The new state id in the answer to `Init` or `Add`."""
    state = answer.node.find("state_id")
    if state is None:
        raise ProtocolError("garbage", "an answer without the state id it should carry")
    return _int(state.attrs.get("val"))


def read_goals(answer: Answer) -> list[str] | None:
    """The foreground goals in the answer to `Goal` ("hyp\\n...\\n====\\nconclusion" each), or None with no proof
    open."""
    goals = answer.node.find("goals")
    if goals is None:
        return None
    lists = [child for child in goals.elements() if child.tag == "list"]
    if not lists:
        return []
    rendered = []
    for item in lists[0].elements():
        parts = item.elements()
        # <goal><string>id</string><list>hyps</list><richpp>conclusion</richpp>...</goal>
        hyps = next((p for p in parts if p.tag == "list"), None)
        conclusion = next((p for p in parts if p.tag == "richpp"), None)
        lines = [h.text().strip() for h in hyps.elements()] if hyps is not None else []
        rendered.append("\n".join([*lines, "=" * 20, conclusion.text().strip() if conclusion is not None else ""]))
    return rendered


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ProtocolError("garbage", f"expected an integer, got {value!r}") from None
