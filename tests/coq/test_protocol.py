"""coq.protocol: framing of coqidetop's output, however it is chunked, and the claim that a proof cannot forge a
frame, tested against the real coqidetop."""

import asyncio

import pytest

from trl_verigate.coq import protocol
from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.process import CoqProcess

from .helpers import job

ANSWER = (
    '<feedback object="state" route="0"><state_id val="5"/><feedback_content val="message"><message>'
    '<message_level val="info"/><option val="none"/><richpp><_><pp>a&nbsp;&lt;b&gt;&amp;&#60;&#99999999;&bogus;'
    "\u03b2</pp></_></richpp></message></feedback_content></feedback>"
    '<value val="fail" loc_s="3" loc_e="7"><state_id val="4"/><richpp><_><pp>Oops</pp></_></richpp></value>'
)


@pytest.mark.parametrize("chunk", [1, 2, 7, 10_000])
def test_frames_complete_elements_however_the_bytes_are_chunked(chunk):
    data = ANSWER.encode("utf-8")
    reader = protocol.FrameReader()
    nodes = []
    for start in range(0, len(data), chunk):
        nodes += reader.feed(data[start : start + chunk])
    assert [node.tag for node in nodes] == ["feedback", "value"]
    feedback = protocol.read_feedback(nodes[0])
    # &nbsp; is a space, entities decode, a too-large or unknown reference stays literal, UTF-8 split over chunks
    # survives.
    assert (feedback.state_id, feedback.level) == (5, "info")
    assert feedback.text == "a <b>&<&#99999999;&bogus;\u03b2"
    answer = protocol.read_answer(nodes[1])
    assert (answer.good, answer.state_id, answer.loc, answer.message) == (False, 4, (3, 7), "Oops")
    assert not reader.inside_element


def test_attribute_values_use_coqs_backslash_escapes():
    (node,) = protocol.FrameReader().feed(b'<value val="good"><x a="q\\"&gt;\\\\"/></value>')
    assert node.elements()[0].attrs["a"] == 'q"&gt;\\'


@pytest.mark.parametrize(
    "garbage", [b"hello<value/>", b"<value></feedback>", b"<<x>", b'<value val="good"><x a=b/></value>']
)
def test_output_that_is_not_xml_is_garbage(garbage):
    with pytest.raises(protocol.ProtocolError) as error:
        protocol.FrameReader().feed(garbage)
    assert error.value.kind == "garbage"


def test_escape_covers_what_xml_needs():
    assert protocol.escape("""a<b>&"'""") == "a&lt;b&gt;&amp;&quot;&apos;"


def test_add_carries_one_sentence_escaped():
    call = protocol.add('idtac "<&>".', 7).decode()
    assert "<string>idtac &quot;&lt;&amp;&gt;&quot;.</string>" in call and '<state_id val="7"/>' in call


def test_a_proof_cannot_forge_a_frame_through_real_coq():
    """An idtac printing a whole fake answer, and character references for one, reach us as message text."""
    forged = '</value><value val="good"><pair><state_id val="1"/></pair></value>'
    references = "&#60;/value&#62;"

    async def main():
        process = CoqProcess(CoqServerConfig(workers=1))
        await process.start("Require Import Arith.")
        try:
            sentences = ["intros n.", f'idtac "{forged.replace(chr(34), chr(34) * 2)}".', f'idtac "{references}".']
            return await process.run_code(job([*sentences, "auto."]), 10.0)
        finally:
            await process.close()

    response = asyncio.run(main())
    assert [m["text"] for m in response["messages"]] == [forged, "</value>"]
    # The real answers went on to the end: the proof passed and was checked.
    assert "failure" not in response and response["check"] == response["reference"]["check"]
