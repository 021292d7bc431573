"""ESTrainer through TRL's real `VLLMGeneration` over the vLLM stand-ins of fake_vllm.py: each member's weights reach
the engine, members share their sampling noise in colocate mode (also when a request is preempted) and server mode
(copies of a prompt still differ), the PEFT base survives every merge/unmerge, the layouts that cannot work are
refused before any model loads, and a TP group evaluates one member at a time (test_es_multiprocess.py)."""

import hashlib

import numpy as np
import pytest
import torch

from tests import fake_vllm
from trl_verigate.es import es_noise, population_seeds
from trl_verigate.es.generation import generation_seed
from trl_verigate.trainers.es import ESConfig, ESTrainer

from .helpers import es_config, letter_reward, model_weights, prompt_dataset


def member_weights(base: dict, seed: int, sign: int, sigma: float) -> dict:
    """θ + f32(σ·sign)·ε(seed) rounded to each tensor's dtype: what a member generates with."""
    return {
        name: (value.float() + torch.tensor(sigma * sign) * es_noise(seed, name, value.shape)).to(value.dtype)
        for name, value in base.items()
    }


def record_engine_weights(llm) -> list[dict]:
    """The engine's weights at each `generate` call, in order."""
    seen = []
    generate = llm.generate

    def recording(prompts, sampling_params=None, **kwargs):
        seen.append({name: param.detach().clone() for name, param in llm.engine.params.items()})
        return generate(prompts, sampling_params, **kwargs)

    llm.generate = recording
    return seen


def record_completions(trainer) -> list[list[list[int]]]:
    """Each `_generate` call's completion ids (one list per member generation)."""
    calls = []
    generate = trainer._generate

    def recording(prompts):
        result = generate(prompts)
        calls.append([list(ids) for ids in result[1]])
        return result

    trainer._generate = recording
    return calls


def es_trainer(tiny_models, tmp_path, **overrides):
    values = dict(max_steps=1, save_strategy="no", use_vllm=True, vllm_mode="colocate")
    values.update(overrides)
    return ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path, **values),
        train_dataset=prompt_dataset(),
    )


@pytest.fixture
def colocate(monkeypatch):
    fake_vllm.install(monkeypatch)


def test_colocate_engine_generates_each_member_with_its_own_weights(colocate, tiny_models, tmp_path):
    trainer = es_trainer(tiny_models, tmp_path)
    base = model_weights(trainer)
    (llm,) = fake_vllm.LLM.instances
    seen = record_engine_weights(llm)
    trainer.train()
    members = population_seeds(0, 0, 4, True)
    assert len(seen) == len(members)
    for engine, (seed, sign) in zip(seen, members, strict=True):
        expected = member_weights(base, seed, sign, 0.05)
        assert engine.keys() == expected.keys()
        for name, value in expected.items():
            assert torch.equal(engine[name], value), name


def expected_request_seed(iteration_seed: int, index: int) -> int:
    """The documented per-request seed, written out: the first 62 bits of BLAKE2b-64("es-request:{seed}:{j}")."""
    digest = hashlib.blake2b(f"es-request:{iteration_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % 2**62


def test_colocate_members_share_their_sampling_noise_when_a_request_is_preempted(colocate, tiny_models, tmp_path):
    """With σ = 1e-6 the members' weights are all but equal, so with common random numbers their completions are
    the same token for token. The third member's second request is preempted (KV-cache pressure) and added again,
    which would draw it, and every later unseeded request, another seed; each request carries its own seed, a
    function of the iteration and its place in the batch only, so nothing moves."""
    trainer = es_trainer(tiny_models, tmp_path, sigma=1e-6)
    calls = record_completions(trainer)
    (llm,) = fake_vllm.LLM.instances
    llm.preempt = {2: {1}}
    trainer.train()
    assert llm.generate_calls == 4 and len(calls) == 4
    assert all(call == calls[0] for call in calls), "members sampled with different noise"
    # num_generations = 2: completions 0 and 1 answer the same prompt, with seeds of their own.
    assert calls[0][0] != calls[0][1]
    seeds = [seed for _, seed in llm.requests]
    expected = [expected_request_seed(generation_seed(0, 0), index) for index in range(4)]
    assert seeds == expected * 4


def test_the_fake_engine_redraws_a_preempted_unseeded_request_and_keeps_explicit_seeds(tiny_models, monkeypatch):
    """What the test above guards against, on the stand-in engine: a preempted unseeded request is added again with
    a fresh draw, and the later requests' draws move; explicit seeds stay. Seeds of other types are refused."""
    fake_vllm.install(monkeypatch)
    llm = fake_vllm.LLM(tiny_models["policy"])
    prompts = [{"prompt_token_ids": [1, 2, 3]}] * 4

    def seeds_with(preempted: set[int], sampling_params) -> list[int]:
        llm.requests, llm.preempt = [], {llm.generate_calls: preempted}
        np.random.seed(5)
        llm.generate(prompts, sampling_params, use_tqdm=False)
        return [seed for _, seed in llm.requests]

    unseeded = fake_vllm.SamplingParams(max_tokens=1)
    calm, pressed = seeds_with(set(), unseeded), seeds_with({1}, unseeded)
    assert pressed[0] == calm[0] and pressed[1] != calm[1] and pressed[3] != calm[3]
    seeded = [fake_vllm.SamplingParams(max_tokens=1, seed=seed) for seed in (11, 12, 13, 2**63 - 1)]
    assert seeds_with(set(), seeded) == seeds_with({1}, seeded) == [11, 12, 13, 2**63 - 1]
    with pytest.raises(TypeError, match="Encoding objects of type int64"):
        llm.generate(prompts[:1], fake_vllm.SamplingParams(max_tokens=1, seed=np.int64(3)))
    with pytest.raises(OverflowError):
        llm.generate(prompts[:1], fake_vllm.SamplingParams(max_tokens=1, seed=2**63))


@pytest.fixture
def server(monkeypatch, tiny_models):
    server = fake_vllm.VLLMServer(tiny_models["policy"])
    fake_vllm.install(monkeypatch, server)
    return server


def test_server_gets_each_members_weights_and_seed_and_copies_differ(server, tiny_models, tmp_path):
    trainer = es_trainer(tiny_models, tmp_path, vllm_mode="server", sigma=1e-6)
    calls = record_completions(trainer)
    trainer.train()
    assert all(call == calls[0] for call in calls), "members sampled with different noise"
    assert calls[0][0] != calls[0][1], "the copies of a prompt came out identical"
    # One push per member, from the only (main) process; one request per member, with the iteration's seed.
    assert server.pushes == [0] * 4
    assert [body.get("seed") for body in server.requests] == [generation_seed(0, 0)] * 4
    assert all(body["n"] == 2 and len(body["prompt"]) == 2 for body in server.requests)


def test_server_engine_holds_the_members_weights_when_it_generates(server, tiny_models, tmp_path):
    trainer = es_trainer(tiny_models, tmp_path, vllm_mode="server")
    base = model_weights(trainer)
    seen = []
    completions = server.completions

    def recording(body):
        seen.append({name: param.detach().clone() for name, param in server.engine.params.items()})
        return completions(body)

    server.completions = recording
    trainer.train()
    for engine, (seed, sign) in zip(seen, population_seeds(0, 0, 4, True), strict=True):
        for name, value in member_weights(base, seed, sign, 0.05).items():
            assert torch.equal(engine[name], value), name


def test_server_mode_with_several_processes_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(ESConfig, "world_size", property(lambda self: 2))
    with pytest.raises(ValueError, match="vLLM server mode needs one training process per server.*use vllm_mode: colo"):
        es_config(tmp_path, use_vllm=True, vllm_mode="server")
    with pytest.raises(ValueError, match="vllm_tensor_parallel_size=4 must divide the 2 training processes"):
        es_config(tmp_path, use_vllm=True, vllm_mode="colocate", vllm_tensor_parallel_size=4, num_generations=4)


def test_peft_base_weights_survive_every_member_sync_bit_for_bit(colocate, tiny_models, tmp_path):
    """bf16 base, LoRA adapters perturbed: each sync merges the adapters into the base and unmerges them, which in
    bf16 does not give the base back; after two iterations (8 syncs) the base must still be exactly the loaded one,
    while the engine generated with merged (changed) weights."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(
            tmp_path, max_steps=2, save_strategy="no", use_vllm=True, model_init_kwargs={"dtype": "bfloat16"}
        ),
        train_dataset=prompt_dataset(),
        peft_config=lora,
    )
    base = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if ".base_layer." in name}
    assert base and all(value.dtype == torch.bfloat16 for value in base.values())
    (llm,) = fake_vllm.LLM.instances
    seen = record_engine_weights(llm)
    trainer.train()
    for name, param in trainer.model.named_parameters():
        if name in base:
            assert torch.equal(param.detach(), base[name]), f"{name} drifted"
    name = "model.layers.0.self_attn.q_proj.weight"
    base_value = base[f"base_model.model.{name.removesuffix('.weight')}.base_layer.weight"]
    assert len(seen) == 8 and all(not torch.equal(engine[name], base_value) for engine in seen)
