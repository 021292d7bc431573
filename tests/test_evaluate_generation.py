"""Generation backends of `trl-verigate evaluate`: HF `generate` with left padding (tiny model), and the vLLM backend
against a recording fake of the `vllm.LLM` / `SamplingParams` interface (vllm cannot run here)."""

import json
import sys
import types

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_verigate.cli import main
from trl_verigate.evaluate.generation import HFBackend, SamplingConfig, VLLMBackend, render_prompt


@pytest.fixture(scope="module")
def policy(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"]).eval()
    return model, tokenizer


def test_hf_backend_left_pads_so_batched_equals_alone(policy, tiny_models):
    model, _ = policy
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    # The backend must switch to left padding (and a pad token) for generation, and switch back.
    tokenizer.padding_side, tokenizer.pad_token = "right", None
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=6)
    short, long = "2 + 2 =", "Natalia sold clips to 48 of her friends in April. How many"
    alone = HFBackend(model, tokenizer, greedy, batch_size=1).generate([short], [1])[0][0]
    batched = HFBackend(model, tokenizer, greedy, batch_size=8).generate([long, short], [1, 1])
    assert batched[1][0] == alone
    assert tokenizer.padding_side == "right" and tokenizer.pad_token is None


def test_hf_backend_gives_counts_per_prompt_and_reports_progress(policy):
    model, tokenizer = policy
    done = []
    outputs = HFBackend(model, tokenizer, SamplingConfig(max_new_tokens=4), batch_size=3).generate(
        ["a", [{"role": "user", "content": "b"}], "c"], [2, 0, 3], done.append
    )
    assert [len(texts) for texts in outputs] == [2, 0, 3]
    assert sum(done) == 5 and max(done) <= 3


def test_render_prompt_uses_the_chat_template(policy):
    _, tokenizer = policy
    messages = [{"role": "user", "content": "What is 1 + 1?"}]
    assert render_prompt(tokenizer, messages) == "<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n<|im_start|>assistant\n"
    assert render_prompt(tokenizer, "raw text") == "raw text"


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeTokenizer:
    """Token i is the character chr(i); a chat renders as "CHAT:" + the last message."""

    chat_template = "x"

    def __call__(self, text):
        return {"input_ids": [ord(character) for character in text]}

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, return_dict):
        assert add_generation_prompt and tokenize and return_dict
        return self("CHAT:" + messages[-1]["content"])


class FakeLLM:
    """Records its construction and every generate call; completion j of a prompt is `answers(prompt)[j]`."""

    instances = []
    answers = staticmethod(lambda prompt: [f"sample {j}" for j in range(64)])

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling_params, use_tqdm=True):
        # vLLM takes token prompts ({"prompt_token_ids": ids}); recorded decoded, as text.
        prompts = ["".join(map(chr, prompt["prompt_token_ids"])) for prompt in prompts]
        self.calls.append((list(prompts), [params.kwargs for params in sampling_params]))
        results = []
        for prompt, params in zip(prompts, sampling_params, strict=True):
            texts = FakeLLM.answers(prompt)[: params.kwargs["n"]]
            results.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(text=text) for text in texts]))
        return results


@pytest.fixture
def fake_vllm(monkeypatch):
    FakeLLM.instances = []
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_vllm_backend_passes_sampling_params_per_prompt(fake_vllm):
    sampling = SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=33, seed=5)
    backend = VLLMBackend.from_pretrained("some/model", sampling, tensor_parallel_size=2)
    llm = FakeLLM.instances[0]
    assert llm.kwargs == {"model": "some/model", "tensor_parallel_size": 2, "seed": 5}
    done = []
    outputs = backend.generate(["p0", [{"role": "user", "content": "p1"}], "p2"], [2, 3, 0], done.append)
    assert outputs == [["sample 0", "sample 1"], ["sample 0", "sample 1", "sample 2"], []]
    ((prompts, params),) = llm.calls
    assert prompts == ["p0", "CHAT:p1"]  # nothing asked of p2
    seeds = [p.pop("seed") for p in params]
    assert params == [
        {"n": 2, "temperature": 0.7, "top_p": 0.9, "max_tokens": 33},
        {"n": 3, "temperature": 0.7, "top_p": 0.9, "max_tokens": 33},
    ]
    assert done == [2, 3]
    # Each request its own seed, from a stream set_seed restarts: the same seed draws the same, another differs.
    assert len(set(seeds)) == 2
    backend.set_seed(5)
    backend.generate(["p0", "p1"], [2, 3])
    assert [p["seed"] for p in llm.calls[1][1]] == seeds
    backend.set_seed(6)
    backend.generate(["p0", "p1"], [2, 3])
    assert [p["seed"] for p in llm.calls[2][1]] != seeds


def test_vllm_backend_without_vllm_names_the_flag(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    data = tmp_path / "m.jsonl"
    data.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(SystemExit):
        main(["evaluate", "math", "--model", "x", "--dataset", str(data), "--backend", "vllm", "--output",
              str(tmp_path / "out")])  # fmt: skip
    assert "--backend vllm" in capsys.readouterr().err


def test_math_evaluation_end_to_end_through_the_vllm_backend(fake_vllm, tmp_path):
    """Known completions give known numbers: problem A (gold 1/2) gets answers 1/2, 0.5, 3, 3; problem B (gold 7)
    gets 7, 8, no answer, 8."""
    rows = [
        {"unique_id": "A", "problem": "Half of one?", "answer": "\\frac{1}{2}"},
        {"unique_id": "B", "problem": "Three plus four?", "answer": "7"},
    ]
    data = tmp_path / "math500.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    completions = {
        "Half of one?": ["\\boxed{\\frac12}", "so \\boxed{0.5}", "\\boxed{3}", "\\boxed{3}"],
        "Three plus four?": ["\\boxed{7}", "\\boxed{8}", "no idea", "\\boxed{8}"],
    }
    FakeLLM.answers = staticmethod(lambda prompt: completions[prompt.removeprefix("CHAT:")])
    output = tmp_path / "out"
    argv = ["evaluate", "math", "--model", "m", "--dataset", str(data), "--backend", "vllm", "--n", "4",
            "--k", "1,2,4", "--system-prompt", "", "--output", str(output), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((output / "summary.json").read_text())
    metrics = {name: metric["value"] for name, metric in summary["metrics"].items()}
    # A: c=2 of 4; B: c=1 of 4. pass@1 = (2/4 + 1/4)/2; pass@2 = ((1 - C(2,2)/C(4,2)) + (1 - C(3,2)/C(4,2)))/2.
    assert metrics["accuracy"] == pytest.approx(0.375)
    assert metrics["pass@1"] == pytest.approx(0.375)
    assert metrics["pass@2"] == pytest.approx(((1 - 1 / 6) + (1 - 3 / 6)) / 2)
    assert metrics["pass@4"] == 1.0
    # maj@1: A right, B right. maj@2: A {1/2, 0.5} one class: right; B 7-8 tie, 7 first: right.
    # maj@4: A 1/2-class 2 vs 3-class 2, tie, 1/2 first: right; B 8 wins 2-1: wrong.
    assert (metrics["maj@1"], metrics["maj@2"], metrics["maj@4"]) == (1.0, 1.0, 0.5)
    assert summary["statuses"] == {"correct": 3, "wrong": 4, "no_answer": 1}
    samples = [json.loads(line) for line in (output / "samples.jsonl").read_text().splitlines()]
    assert {(row["problem_id"], row["attempt"]) for row in samples} == {(p, a) for p in "AB" for a in range(4)}
    assert next(row for row in samples if row["problem_id"] == "A" and row["attempt"] == 1)["answer"] == "0.5"


def trl_training_prompt_ids(tokenizer, prompts):
    """The prompt ids TRL's GRPOTrainer trains on (its own `_tokenize_prompts`, on a stand-in trainer)."""
    from trl import GRPOTrainer

    trainer = types.SimpleNamespace(
        processing_class=tokenizer, _is_vlm=False, environment_factories=None, tools=None, chat_template=None,
        chat_template_kwargs={},
    )  # fmt: skip
    prompt_ids, _, _ = GRPOTrainer._tokenize_prompts(trainer, prompts)
    return [list(ids) for ids in prompt_ids]


def test_hf_backend_feeds_the_model_the_prompt_ids_training_used(tiny_models, policy):
    # Math-Shepherd's stand-in is a Mistral with a SentencePiece tokenizer that puts <s> in front of text, as
    # DeepSeek-Prover-V1.5's does: raw-text Lean prompts must keep it, as in training.
    model = AutoModelForCausalLM.from_pretrained(tiny_models["prm_math_shepherd"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["prm_math_shepherd"])
    seen = []
    generate = model.generate

    def recording_generate(input_ids, attention_mask, **kwargs):
        seen.extend(ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask, strict=True))
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    model.generate = recording_generate
    prompts = ["Complete the following Lean 4 code:\n\n```lean4\ntheorem t : 1 = 1 := by\n", "2 + 2 ="]
    HFBackend(model, tokenizer, SamplingConfig(temperature=0.0, max_new_tokens=2), batch_size=2).generate(
        prompts, [1, 1]
    )
    assert seen == trl_training_prompt_ids(tokenizer, prompts)
    assert all(ids[0] == tokenizer.bos_token_id for ids in seen)
    # Chat prompts: the chat template's ids, as training tokenizes them.
    policy_model, policy_tokenizer = policy
    chats = [[{"role": "user", "content": "What is 1 + 1?"}], [{"role": "user", "content": "Prove 2 = 2."}]]
    seen.clear()
    generate = policy_model.generate
    policy_model.generate = recording_generate
    try:
        HFBackend(policy_model, policy_tokenizer, SamplingConfig(temperature=0.0, max_new_tokens=2)).generate(
            chats, [1, 1]
        )
    finally:
        del policy_model.generate
    assert seen == trl_training_prompt_ids(policy_tokenizer, chats)
