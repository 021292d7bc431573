"""ESTrainer on the tiny policy: config refusals, metrics, es_state.json in every checkpoint, export and resume
bitwise, async rewards overlapping the next member's generation, greedy members. The vLLM paths: test_es_vllm.py."""

import asyncio
import json
import threading
import time

import pytest
import torch
from safetensors.torch import load_file

from trl_verigate.es import es_noise, population_seeds
from trl_verigate.es.export import main as es_export_main
from trl_verigate.es.export import reconstruct
from trl_verigate.es.generation import member_slots
from trl_verigate.trainers.es import ESConfig, ESTrainer

from .helpers import es_config, letter_reward, model_weights, prompt_dataset


def assert_bitwise_equal(left: dict, right: dict):
    assert left.keys() == right.keys()
    for name in left:
        assert torch.equal(left[name], right[name]), name


@pytest.fixture(scope="module")
def trained(tiny_models, tmp_path_factory):
    """Three ES iterations with a checkpoint after each."""
    output = tmp_path_factory.mktemp("es_run")
    trainer = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(output),
        train_dataset=prompt_dataset(),
    )
    trainer.train()
    trainer.save_model(str(output / "final"))
    return trainer, output


# ----- configuration -----


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"population_size": 5}, "population_size=5 is odd but antithetic=true.*even population_size"),
        ({"sigma": 0.0}, "sigma=0.0"),
        ({"fitness_shaping": "rank"}, "fitness_shaping='rank'.*zscore, centered_rank, none"),
        ({"beta": 0.04}, "set beta: 0"),
        ({"gradient_accumulation_steps": 2}, "gradient_accumulation_steps=2"),
        ({"per_device_train_batch_size": 3}, "per_device_train_batch_size=3.*prompts_per_iteration"),
        ({"es_param_regex": "("}, "es_param_regex='\\(' is not a regex"),
        ({"deepspeed": {"zero_optimization": {"stage": 2}}}, "does not run under DeepSpeed.*ddp.yaml"),
        ({"fsdp": "full_shard"}, "does not run under FSDP"),
        ({"population_size": 1, "antithetic": False}, "population_size=1 without antithetic.*population_size >= 2"),
        ({"greedy": True, "num_generations": 4}, "num_generations=4 with greedy=true.*leave num_generations unset"),
        ({"generation_kwargs": {"seed": 3}}, "generation_kwargs.seed: ES seeds each member's sampling itself"),
        (
            {"use_vllm": True, "vllm_mode": "colocate", "vllm_tensor_parallel_size": 3},
            "vllm_tensor_parallel_size=3: the processes of a TP group share each member's 4 completions",
        ),
    ],
)
def test_bad_combinations_are_refused_naming_the_fix(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        es_config(tmp_path, **overrides)


def test_accelerate_deepspeed_launch_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(ValueError, match="does not run under DeepSpeed"):
        es_config(tmp_path)


def test_greedy_config_answers_each_prompt_once(tmp_path):
    config = es_config(tmp_path, greedy=True, num_generations=None, prompts_per_iteration=3)
    assert (config.num_generations, config.per_device_train_batch_size, config.generation_batch_size) == (1, 3, 3)
    assert es_config(tmp_path, num_generations=None).num_generations == 8  # GRPOConfig's default without greedy


def test_per_device_batch_is_one_members_completions(tmp_path):
    config = es_config(tmp_path, prompts_per_iteration=3, num_generations=4)
    assert config.per_device_train_batch_size == 12
    assert not es_config(tmp_path, antithetic=False, population_size=5).antithetic


def test_members_are_split_in_blocks_with_padding_slots():
    # P = 30 on 8 processes (the case study's population on recipes/accelerate/ddp.yaml): 4 slots each, the last
    # process has members 28 and 29 and two padding slots.
    splits = [member_slots(30, 8, rank) for rank in range(8)]
    assert {slots for slots, _ in splits} == {4}
    assert [members for _, members in splits][0] == [0, 1, 2, 3]
    assert splits[7][1] == [28, 29]
    assert sorted(member for _, members in splits for member in members) == list(range(30))
    assert member_slots(5, 4, 3) == (2, [])  # a process with only padding slots
    assert member_slots(4, 1, 0) == (4, [0, 1, 2, 3])


def test_field_help_states_default_and_meaning():
    from dataclasses import fields

    helps = {f.name: f.metadata.get("help", "") for f in fields(ESConfig)}
    for name in (
        "population_size",
        "sigma",
        "antithetic",
        "fitness_shaping",
        "prompts_per_iteration",
        "es_param_regex",
        "num_generations",
        "greedy",
    ):
        assert "default" in helps[name], name


def test_reward_models_are_refused(tiny_models, tmp_path):
    from transformers import AutoModelForSequenceClassification

    reward_model = AutoModelForSequenceClassification.from_pretrained(tiny_models["policy"], num_labels=1)
    with pytest.raises(TypeError, match="does not support reward models"):
        ESTrainer(
            model=tiny_models["policy"],
            reward_funcs=[reward_model],
            args=es_config(tmp_path),
            train_dataset=prompt_dataset(),
        )


# ----- training, checkpoints, export, resume -----


def test_metrics_are_logged_every_iteration(trained):
    trainer, _ = trained
    rows = [row for row in trainer.state.log_history if "es/reward_mean" in row]
    assert [row["step"] for row in rows] == [1, 2, 3]
    for row, entry in zip(rows, trainer.es_history, strict=True):
        rewards = torch.tensor(entry["rewards"], dtype=torch.float64)
        assert row["es/reward_mean"] == pytest.approx(float(rewards.mean()))
        assert row["es/reward_std"] == pytest.approx(float(rewards.std(unbiased=False)))
        assert row["es/reward_max"] == pytest.approx(float(rewards.max()))
        assert row["es/best_member"] == int(rewards.argmax())
        assert row["es/update_norm"] == pytest.approx(entry["update_norm"])
        assert row["rewards/letter_reward/mean"] == pytest.approx(row["es/reward_mean"])
        for key in ("es/seconds_perturb", "es/seconds_generate", "es/seconds_update", "es/members_per_second"):
            assert row[key] > 0, key
        assert row["es/seconds_restore"] > 0


def test_every_checkpoint_holds_a_small_es_state(trained):
    trainer, output = trained
    for step in (1, 2, 3):
        path = output / f"checkpoint-{step}" / "es_state.json"
        assert path.stat().st_size < 50_000
        state = json.loads(path.read_text())
        assert [entry["iteration"] for entry in state["history"]] == list(range(step))
        assert state["noise_version"] == "es-noise-v1"
        assert state["sigma"] == 0.05 and state["learning_rate"] == 0.05 and state["fitness_shaping"] == "zscore"
        assert state["parameters"] == [name for name, _ in trainer.model.named_parameters()]
        entry = state["history"][step - 1]
        members = population_seeds(0, step - 1, 4, True)
        assert list(zip(entry["seeds"], entry["signs"], strict=True)) == members
        assert len(entry["rewards"]) == len(entry["fitness"]) == 4
        assert (output / f"checkpoint-{step}" / "model.safetensors").is_file()  # TRL's weights are saved too


def test_the_update_moved_the_weights_by_the_recorded_history(trained, tiny_models):
    """Replay by hand, in float64, from the base: θ_T = θ_0 + Σ_t α/P Σ_i F_i sign_i ε(s_i) (fp32 rounding aside)."""
    from transformers import AutoModelForCausalLM

    trainer, _ = trained
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_models["policy"]).named_parameters())
    name = "model.layers.0.mlp.up_proj.weight"
    expected = base[name].detach().double()
    for entry in trainer.es_history:
        for seed, sign, fitness in zip(entry["seeds"], entry["signs"], entry["fitness"], strict=True):
            expected = expected + 0.05 / 4 * fitness * sign * es_noise(seed, name, expected.shape).double()
    actual = dict(trainer.model.named_parameters())[name].detach().double()
    assert not torch.equal(actual, base[name].detach().double())
    assert torch.allclose(actual, expected, atol=1e-5)


def test_reconstruct_and_es_export_equal_the_trained_weights_bitwise(trained, tmp_path):
    trainer, output = trained
    weights = model_weights(trainer)
    assert_bitwise_equal({n: p.detach() for n, p in reconstruct(output / "final").named_parameters()}, weights)
    assert (
        es_export_main(["es-export", "--state", str(output / "final" / "es_state.json"), "--output", str(tmp_path)])
        == 0
    )
    exported = load_file(str(tmp_path / "model.safetensors"))
    assert_bitwise_equal({name: exported[name] for name in weights}, weights)
    # An intermediate checkpoint rebuilds to that checkpoint's saved weights.
    saved = load_file(str(output / "checkpoint-2" / "model.safetensors"))
    rebuilt = dict(reconstruct(output / "checkpoint-2").named_parameters())
    assert_bitwise_equal({name: rebuilt[name].detach() for name in weights}, {name: saved[name] for name in weights})


def test_export_refuses_another_base(trained, tiny_models):
    from transformers import AutoModelForCausalLM

    _, output = trained
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"])
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1.0
    with pytest.raises(ValueError, match="parameters_sha256 mismatch"):
        reconstruct(output / "final", model=model)


def test_resume_equals_the_uninterrupted_run_bitwise(trained, tiny_models, tmp_path):
    trainer, output = trained
    resumed = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path),
        train_dataset=prompt_dataset(),
    )
    resumed.train(resume_from_checkpoint=str(output / "checkpoint-1"))
    assert resumed.es_history == trainer.es_history
    assert_bitwise_equal(model_weights(resumed), model_weights(trainer))


def test_resume_with_other_settings_is_refused(trained, tiny_models, tmp_path):
    _, output = trained
    other = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path, sigma=0.01),
        train_dataset=prompt_dataset(),
    )
    with pytest.raises(ValueError, match="sigma=0.05 but this run has sigma=0.01"):
        other.train(resume_from_checkpoint=str(output / "checkpoint-1"))


# ----- async rewards overlap the next member's generation -----


def test_async_rewards_verify_while_the_next_member_generates(tiny_models, tmp_path):
    """Each member's async reward waits until the last member has started generating: that only completes if the
    trainer leaves verifications running while it generates the next members (waiting per member would time out)."""
    all_generated = threading.Event()
    generations = []
    released = []

    async def slow_letter_reward(completions, **kwargs):
        waited = await asyncio.get_running_loop().run_in_executor(None, all_generated.wait, 60)
        released.append(waited)
        return letter_reward(completions)

    trainer = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[slow_letter_reward],
        args=es_config(tmp_path, max_steps=1, save_strategy="no"),
        train_dataset=prompt_dataset(),
    )
    generate = trainer._generate

    def recording_generate(prompts):
        generations.append(len(prompts))
        if len(generations) == 4:
            all_generated.set()
        return generate(prompts)

    trainer._generate = recording_generate
    started = time.perf_counter()
    trainer.train()
    assert released == [True] * 4, "a verification was awaited before the last member generated"
    assert time.perf_counter() - started < 60
    sync = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path / "sync", max_steps=1, save_strategy="no"),
        train_dataset=prompt_dataset(),
    )
    sync.train()
    assert trainer.es_history == sync.es_history  # same rewards, same update, whichever way they were computed


def test_peft_run_perturbs_the_adapters_and_export_refuses_naming_the_checkpoint_adapter(tiny_models, tmp_path, capsys):
    """With LoRA only the adapters are perturbed; their initial values are not in es_state.json, so es-export and
    reconstruct refuse (before loading any model) and point at the adapter the checkpoint holds, which is the
    trained one."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path / "run", max_steps=1, save_strategy="no"),
        train_dataset=prompt_dataset(),
        peft_config=lora,
    )
    assert trainer.es_param_names and all("lora_" in name for name in trainer.es_param_names)
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    state = json.loads((tmp_path / "final" / "es_state.json").read_text())
    assert state["base_model"]["peft"] is True

    assert es_export_main(["es-export", "--state", str(tmp_path / "final"), "--output", str(tmp_path / "out")]) == 2
    assert "records a PEFT run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="PeftModel.from_pretrained"):
        reconstruct(tmp_path / "final")
    # The advice holds: the saved adapter is the trained one.
    saved = load_file(str(tmp_path / "final" / "adapter_model.safetensors"))
    live = {name: p.detach() for name, p in trainer.model.named_parameters() if name in trainer.es_param_names}
    assert len(saved) == len(live)
    for name, value in live.items():
        saved_name = name.replace(".default", "")
        assert torch.equal(saved[saved_name], value), name


# ----- greedy members -----


def test_greedy_members_answer_each_prompt_once_with_the_argmax_of_their_weights(tiny_models, tmp_path):
    """Expected completions come from HF greedy generation on the member weights rebuilt from es_noise, one prompt at
    a time (no padding)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trainer = ESTrainer(
        model=tiny_models["policy"],
        reward_funcs=[letter_reward],
        args=es_config(tmp_path, greedy=True, num_generations=None, max_steps=1, save_strategy="no"),
        train_dataset=prompt_dataset(),
    )
    calls = []
    generate = trainer._generate

    def recording_generate(prompts):
        result = generate(prompts)
        calls.append((list(prompts), result[1]))
        return result

    trainer._generate = recording_generate
    trainer.train()
    assert len(calls) == 4
    prompts = calls[0][0]
    assert len(prompts) == len(set(prompts)) == 2, "each prompt once per member"
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"]).eval()
    base = {name: param.detach().clone() for name, param in model.named_parameters()}
    for (seen_prompts, completion_ids), (seed, sign) in zip(calls, population_seeds(0, 0, 4, True), strict=True):
        assert seen_prompts == prompts
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(base[name] + torch.tensor(0.05 * sign) * es_noise(seed, name, param.shape))
        for prompt, completion in zip(prompts, completion_ids, strict=True):
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
            expected = model.generate(ids, do_sample=False, max_new_tokens=8, pad_token_id=0)[0, ids.shape[1] :]
            expected = expected.tolist()
            if tokenizer.eos_token_id in expected:
                expected = expected[: expected.index(tokenizer.eos_token_id) + 1]
            assert list(completion) == expected


# ----- es-export on bad input -----


@pytest.mark.parametrize("state", ["missing.json", "empty_dir", "not_json.json"])
def test_es_export_with_a_bad_state_says_one_line_and_exits_2(tmp_path, state):
    import subprocess
    import sys

    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "not_json.json").write_text("nope")
    result = subprocess.run(
        [sys.executable, "-m", "trl_verigate.cli", "es-export", "--state", str(tmp_path / state), "--output", "out"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("es-export: --state ")
    assert not (tmp_path / "out").exists()
