"""Generation backends of `trl-verigate evaluate`: HF `generate` with left padding (tiny model), the vLLM backend
against the vLLM stand-ins of fake_vllm.py (vllm cannot run here), and the one sampling distribution both use."""

import json
import sys
import types

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests import fake_vllm
from trl_verigate.cli import main
from trl_verigate.evaluate.generation import HFBackend, SamplingConfig, VLLMBackend, check_attempts, render_prompt


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


def test_hf_backend_gives_counts_per_prompt_and_hands_over_each_batch(policy):
    model, tokenizer = policy
    done = []
    outputs = HFBackend(model, tokenizer, SamplingConfig(max_new_tokens=4), batch_size=3).generate(
        ["a", [{"role": "user", "content": "b"}], "c"], [2, 0, 3], done.append
    )
    assert [len(texts) for texts in outputs] == [2, 0, 3]
    # 5 sequences in batches of 3: a, a, c then c, c, each batch handed over as soon as it is decoded.
    assert [[index for index, _ in batch] for batch in done] == [[0, 0, 2], [2, 2]]
    assert [text for batch in done for _, text in batch] == outputs[0] + outputs[2]


def test_render_prompt_uses_the_chat_template(policy):
    _, tokenizer = policy
    messages = [{"role": "user", "content": "What is 1 + 1?"}]
    assert render_prompt(tokenizer, messages) == "<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n<|im_start|>assistant\n"
    assert render_prompt(tokenizer, "raw text") == "raw text"


class FakeTokenizer:
    """Token i is the character chr(i); a chat renders as "CHAT:" + the last message."""

    chat_template = "x"

    def __call__(self, text):
        return {"input_ids": [ord(character) for character in text]}

    def apply_chat_template(self, messages, add_generation_prompt, tokenize, return_dict):
        assert add_generation_prompt and tokenize and return_dict
        return self("CHAT:" + messages[-1]["content"])


class ScriptedLLM(fake_vllm.LLM):
    """vLLM's LLM (argument names, SamplingParams per prompt, seeds as vLLM derives them) answering from a script:
    completion j of a prompt is `answers(prompt)[j]`; records every generate call."""

    answers = staticmethod(lambda prompt: [f"sample {j}" for j in range(64)])

    def _make_engine(self, model, tp_group):
        self.calls = []
        return types.SimpleNamespace(tokenizer=FakeTokenizer(), assemble_shards=lambda: None)

    def generate(self, prompts, sampling_params=None, **kwargs):
        # vLLM takes token prompts ({"prompt_token_ids": ids}); recorded decoded, as text.
        texts = ["".join(map(chr, prompt["prompt_token_ids"])) for prompt in prompts]
        self.calls.append((texts, list(sampling_params)))
        self._child = {}
        return super().generate(prompts, sampling_params, **kwargs)

    def _complete(self, prompt_ids, params, seed):
        prompt = "".join(map(chr, prompt_ids))
        index = self._child[prompt] = self._child.get(prompt, -1) + 1
        return fake_vllm.CompletionOutput(index, ScriptedLLM.answers(prompt)[index], [])


@pytest.fixture
def fake_vllm_module(monkeypatch):
    fake_vllm.install(monkeypatch)
    monkeypatch.setattr(ScriptedLLM, "answers", staticmethod(lambda prompt: [f"sample {j}" for j in range(64)]))
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = ScriptedLLM, fake_vllm.SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


SAMPLED = ("n", "temperature", "top_p", "max_tokens", "top_k", "min_p", "repetition_penalty")


def test_vllm_backend_passes_sampling_params_per_prompt(fake_vllm_module):
    sampling = SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=33, seed=5)
    backend = VLLMBackend.from_pretrained("some/model", sampling, tensor_parallel_size=2)
    llm = fake_vllm.LLM.instances[0]
    assert (llm.model_name, llm.kwargs) == ("some/model", {"tensor_parallel_size": 2, "seed": 5})
    done = []
    outputs = backend.generate(["p0", [{"role": "user", "content": "p1"}], "p2"], [2, 3, 0], done.append)
    assert outputs == [["sample 0", "sample 1"], ["sample 0", "sample 1", "sample 2"], []]
    ((prompts, params),) = llm.calls
    assert prompts == ["p0", "CHAT:p1"]  # nothing asked of p2
    seeds = [p.seed for p in params]
    assert [tuple(getattr(p, name) for name in SAMPLED) for p in params] == [
        (2, 0.7, 0.9, 33, 0, 0.0, 1.0),
        (3, 0.7, 0.9, 33, 0, 0.0, 1.0),
    ]
    # Each prompt's completions are handed over with its index as soon as the call returns.
    assert done == [[(0, "sample 0"), (0, "sample 1")], [(1, "sample 0"), (1, "sample 1"), (1, "sample 2")]]
    # Each request its own seed, from a stream set_seed restarts: the same seed draws the same, another differs.
    assert len(set(seeds)) == 2
    backend.set_seed(5)
    backend.generate(["p0", "p1"], [2, 3])
    assert [p.seed for p in llm.calls[1][1]] == seeds
    backend.set_seed(6)
    backend.generate(["p0", "p1"], [2, 3])
    assert [p.seed for p in llm.calls[2][1]] != seeds


def test_vllm_backend_without_vllm_names_the_flag(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    data = tmp_path / "m.jsonl"
    data.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(SystemExit):
        main(["evaluate", "math", "--model", "x", "--dataset", str(data), "--backend", "vllm", "--output",
              str(tmp_path / "out")])  # fmt: skip
    assert "--backend vllm" in capsys.readouterr().err


def test_math_evaluation_end_to_end_through_the_vllm_backend(fake_vllm_module, tmp_path):
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
    ScriptedLLM.answers = staticmethod(lambda prompt: completions[prompt.removeprefix("CHAT:")])
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


def test_greedy_with_several_attempts_is_refused_before_vllm_loads(fake_vllm_module, tmp_path, capsys):
    """vLLM's SamplingParams refuses n > 1 when greedy; the command refuses it first, before the engine starts."""
    with pytest.raises(ValueError, match="n must be 1 when using greedy sampling, got 4"):
        fake_vllm.SamplingParams(n=4, temperature=0.0)
    data = tmp_path / "m.jsonl"
    data.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    argv = ["evaluate", "math", "--model", "m", "--dataset", str(data), "--backend", "vllm", "--temperature", "0",
            "--n", "4", "--k", "1", "--output", str(tmp_path / "out")]  # fmt: skip
    with pytest.raises(SystemExit):
        main(argv)
    assert "--temperature 0 decodes greedily" in capsys.readouterr().err
    assert fake_vllm.LLM.instances == []
    # One greedy attempt is what vLLM accepts.
    base = ["evaluate", "math", "--model", "m", "--dataset", str(data), "--backend", "vllm", "--temperature", "0"]
    assert main([*base, "--n", "1", "--k", "1", "--no-progress", "--output", str(tmp_path / "out")]) == 0
    ((_, params),) = fake_vllm.LLM.instances[0].calls
    assert [(p.n, p.temperature) for p in params] == [(1, 0.0)]


def test_a_temperature_under_the_greedy_threshold_is_greedy_on_both_backends(
    fake_vllm_module, policy, tmp_path, capsys
):
    """Under 1e-5 (vLLM's `_SAMPLING_EPS`) a temperature is refused with n > 1 before vLLM loads, and with n = 1 it
    reaches vLLM as 0 (vLLM itself would raise it to 0.01 and sample) and HF generate as greedy decoding."""
    data = tmp_path / "m.jsonl"
    data.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    base = ["evaluate", "math", "--model", "m", "--dataset", str(data), "--backend", "vllm", "--temperature", "5e-6"]
    with pytest.raises(SystemExit):
        main([*base, "--n", "3", "--k", "1", "--output", str(tmp_path / "refused")])
    assert "--temperature 5e-06 is under vLLM's greedy threshold 1e-05" in capsys.readouterr().err
    assert fake_vllm.LLM.instances == []
    assert main([*base, "--n", "1", "--k", "1", "--no-progress", "--output", str(tmp_path / "out")]) == 0
    ((_, params),) = fake_vllm.LLM.instances[0].calls
    assert [(p.n, p.temperature) for p in params] == [(1, 0.0)]
    # At the threshold itself vLLM samples, and so does the check let several attempts through.
    check_attempts(1e-5, 4)
    near_zero = HFBackend(*policy, SamplingConfig(temperature=5e-6, max_new_tokens=6))
    greedy = HFBackend(*policy, SamplingConfig(temperature=0.0, max_new_tokens=6))
    assert near_zero._sampling_arguments() == greedy._sampling_arguments() == {"repetition_penalty": 1.0}


@pytest.fixture
def policy_with_generation_config(tiny_models, tmp_path):
    """The tiny policy with a generation_config.json that sets top_k and repetition_penalty, as Qwen2.5's does."""
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"])
    model.generation_config.update(do_sample=True, top_k=20, repetition_penalty=1.1)
    model.save_pretrained(tmp_path / "policy")
    AutoTokenizer.from_pretrained(tiny_models["policy"]).save_pretrained(tmp_path / "policy")
    return str(tmp_path / "policy")


@pytest.mark.parametrize("with_file", [True, False], ids=["generation_config_sets_top_k", "no_top_k_anywhere"])
def test_both_backends_sample_with_the_same_settings(
    fake_vllm_module, tiny_models, policy_with_generation_config, with_file
):
    """HF `generate` reads generation_config.json and then transformers' defaults (top_k 50); vLLM, given
    SamplingParams, reads neither. Both must get the file's top_k and repetition_penalty, and top_k off without it."""
    from argparse import Namespace

    from trl_verigate.evaluate.command import resolve_model_sampling

    path = policy_with_generation_config if with_file else tiny_models["policy"]
    args = Namespace(model=path, top_k=None, min_p=None, repetition_penalty=None)
    sampling = SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=3, **resolve_model_sampling(args))
    expected = {"top_k": 20, "min_p": 0.0, "repetition_penalty": 1.1} if with_file else {
        "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0
    }  # fmt: skip
    assert sampling.model_fields() == expected

    model = AutoModelForCausalLM.from_pretrained(path).eval()
    seen = []
    generate = model.generate

    def recording_generate(**kwargs):
        seen.append(kwargs)
        return generate(**kwargs)

    model.generate = recording_generate
    HFBackend(model, AutoTokenizer.from_pretrained(path), sampling).generate(["2 + 2 ="], [1])
    hf = {name: seen[0][name] for name in ("top_k", "min_p", "repetition_penalty")}
    assert hf == {**expected, "min_p": None}  # min_p None: no warper, as 0 is off in vLLM

    backend = VLLMBackend(ScriptedLLM(model=path), sampling, fake_vllm.SamplingParams)
    backend.generate(["2 + 2 ="], [1])
    (params,) = backend.llm.calls[0][1]
    assert {name: getattr(params, name) for name in expected} == expected
    # An explicit flag wins over the file.
    assert resolve_model_sampling(Namespace(model=path, top_k=5, min_p=None, repetition_penalty=None))["top_k"] == 5
