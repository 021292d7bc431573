"""The checks `python -m trl_verigate.gpu_check` runs, one per process: `python -m trl_verigate.gpu_check_tasks TASK`.

Each task writes {"rows": [{"check", "status": PASS|FAIL|SKIP, "figures", "data"}]} to --json. On --device cpu they run on
the CPU (noise: the same torch ops on both sides, so only a GPU run checks it; the vLLM ones need --fake-vllm, the stand-in of
tests/fake_vllm.py), which is how tests/test_gpu_check.py rehearses them on a machine without a GPU.

    noise           ε on the device bit-equal to ε on the CPU for the same (seed, name, shape), past 2^31 elements
    es_vllm         member weights reach the vLLM engine; the es/seconds_* split; one member twice, one seed, the
                    same completions (and copies of a prompt differ)
    ddp_dtype_step  one AdamW step at lr 1e-6 on fp32 weights with bf16 autocast (what the GRPO recipes need under
                    DDP) changes the weights; pure bf16 weights beside it
    verigate_vllm   VeriGate with colocate vLLM for 3 steps with the tiny PRM
    evaluate_vllm   `trl-verigate evaluate math --backend vllm` on 16 problems
    zero3_prm       the PRM's DeepSpeed ZeRO-3 parameter-fetch trace after 1 and after 50 scoring calls, and a PRM
                    dtype other than DeepSpeed's refused (launched by gpu_check under `accelerate launch`, ZeRO-3)
    prm_dtypes, peft_drift, trainer_steps, es_cost: see trl_verigate.gpu_check_training
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from trl_verigate.gpu_check_common import (
    install_fake_vllm,
    length_reward,
    math_dataset,
    math_rows,
    row,
    training_device_settings,
)
from trl_verigate.gpu_check_training import TRAINING_TASKS


def cpu_reference_noise(seed: int, name: str, runs: list[tuple[int, int]]):
    """ε at the element counters of each (first counter, length) run, concatenated, computed on the CPU."""

    from trl_verigate.es import noise

    out = torch.empty(sum(length for _, length in runs))
    offset = 0
    for first, length in runs:
        noise._fill_noise(out[offset : offset + length], first, noise.noise_key(seed, name))
        offset += length
    return out


def task_noise(args) -> list[dict]:

    from trl_verigate.es import noise

    def device_noise(seed, name, shape):
        if args.device == "cpu":  # a second computation through the chunk seam, as the CUDA comparison reads it
            out = torch.empty(shape, dtype=torch.float32)
            noise._fill_noise(out.view(-1), 0, noise.noise_key(seed, name))
            return out
        return noise.es_noise(seed, name, shape, device=args.device)

    compared = differing = 0
    for seed, name, shape in (
        (7, "model.norm.weight", (3, 5)),
        (11, "model.layers.0.mlp.down_proj.weight", (1536, 8960)),
    ):
        on_device = device_noise(seed, name, shape).cpu()
        on_cpu = noise.es_noise(seed, name, shape)
        compared += on_cpu.numel()
        differing += int((on_device.view(torch.int32) != on_cpu.view(torch.int32)).sum())
    theta = torch.randn(1000, 1000)
    scaled = noise.add_scaled_noise(torch.empty_like(theta), theta, 5, "w", 1e-3)
    on_device = noise.add_scaled_noise(
        torch.empty_like(theta, device=args.device), theta.to(args.device), 5, "w", 1e-3
    ).cpu()
    if args.device == "cpu":  # the torch-ops path of add_scaled_noise: noise × f32(scale), then + θ
        on_device = theta + device_noise(5, "w", theta.shape) * torch.tensor(1e-3)
    differing += int((on_device.view(torch.int32) != scaled.view(torch.int32)).sum())
    compared += theta.numel()
    figures = f"{compared} elements (3x5, 1536x8960, θ + σ·ε on 1000x1000): {differing} differ"
    if args.device == "cpu":
        return [row("noise: device == CPU, bit for bit", differing == 0, figures + "; past 2^31: CUDA only")]
    big = 2**31 + 4097
    torch.cuda.synchronize()
    started = time.perf_counter()
    tensor = noise.es_noise(3, "big", (big,), device=args.device)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    generator = torch.Generator().manual_seed(0)
    random_starts = torch.randint(0, big - 4096, (16,), generator=generator).tolist()
    runs = [(0, 65536), (2**31 - 32768, 65536), (big - 65536, 65536), *[(start, 4096) for start in random_starts]]
    counters = torch.cat([torch.arange(first, first + length) for first, length in runs])
    picked = tensor[counters.to(args.device)].cpu()
    del tensor
    reference = cpu_reference_noise(3, "big", runs)
    big_differing = int((picked.view(torch.int32) != reference.view(torch.int32)).sum())
    figures += (
        f"; {big}-element tensor: {counters.numel()} elements (at 0, around 2^31, at the end, random) compared, "
        f"{big_differing} differ; {big / seconds / 1e9:.2f} G elements/s on {args.device}"
    )
    return [row("noise: device == CPU, bit for bit", differing == 0 and big_differing == 0, figures)]


def member_in_engine_row(check: str, trainer, seed: int, sign: int, sigma: float) -> dict:
    """Perturb to one member and sync: a weight inside the vLLM engine sums like the member's, not like the base's."""
    from trl_verigate.es import perturb

    params, master = trainer._es_parameters(), trainer._es_master
    engine = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    engine_params = dict(engine.named_parameters())
    name = next(n for n in ("model.layers.0.mlp.down_proj.weight", "model.norm.weight") if n in engine_params)
    perturb(params, master, seed, sign, sigma)
    trainer._member_generation.sync()
    engine_value = dict(engine.named_parameters())[name].detach().cpu()
    member_sum = float(params[name].detach().cpu().to(engine_value.dtype).double().sum())
    base_sum = float(master[name].cpu().to(engine_value.dtype).double().sum())
    engine_sum = float(engine_value.double().sum())
    figures = f"sum of {name} in the engine {engine_sum:.6f}, member {member_sum:.6f}, base {base_sum:.6f}"
    return row(check, engine_sum == member_sum and member_sum != base_sum, figures)


def task_es_vllm(args) -> list[dict]:
    checks = ("es: member weights reach vLLM", "es: es/seconds_* split", "es: one member, one seed, same completions")
    install_fake_vllm(args)
    from datasets import Dataset

    from trl_verigate.es import perturb, population_seeds, write_master
    from trl_verigate.trainers.es import ESConfig, ESTrainer

    sigma = 1e-3
    config = ESConfig(
        output_dir=tempfile.mkdtemp(prefix="gpu_check_es_"),
        seed=0,
        population_size=4,
        prompts_per_iteration=4,
        num_generations=2,
        max_completion_length=args.max_tokens,
        max_steps=2,
        sigma=sigma,
        learning_rate=5e-4,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.35,
        model_init_kwargs={"dtype": "float32" if args.device == "cpu" else "bfloat16"},
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        **training_device_settings(args),
    )
    topics = ("the sea", "a mountain", "a city at night", "an old library")
    dataset = Dataset.from_list([{"prompt": f"Write two sentences about {topic}."} for topic in topics])
    trainer = ESTrainer(model=args.model, reward_funcs=[length_reward], args=config, train_dataset=dataset)
    params, master = trainer._es_parameters(), trainer._es_master
    seed, sign = population_seeds(0, 0, 4, True)[0]
    rows = [member_in_engine_row(checks[0], trainer, seed, sign, sigma)]
    write_master(params, master)
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "es/seconds_generate" in entry][-1]
    parts = ("perturb", "sync", "generate", "restore", "update", "reward_wait")
    seconds = {part: logged.get(f"es/seconds_{part}") for part in parts}
    fraction = (seconds["perturb"] + seconds["sync"]) / seconds["generate"] if seconds["generate"] else float("nan")
    split = ", ".join(f"{part} {value:.3f}s" for part, value in seconds.items() if value is not None)
    rows.append(
        row(
            checks[1],
            all(value is not None for value in seconds.values()) and seconds["generate"] > 0,
            f"iteration 2 of P=4: {split}; noise+sync per member = {fraction:.3f} of its generation",
        )
    )
    prompts = [example["prompt"] for example in dataset for _ in range(2)]
    completions = []
    for _ in range(2):
        perturb(params, master, seed, sign, sigma)
        trainer._member_generation.sync()
        trainer._member_generation.seed(1234)
        with torch.no_grad():
            completions.append([list(ids) for ids in trainer._generate(prompts)[1]])
    write_master(params, master)
    same = completions[0] == completions[1]
    copies_differ = sum(completions[0][i] != completions[0][i + 1] for i in range(0, len(prompts), 2))
    rows.append(
        row(
            checks[2],
            same and copies_differ > 0,
            f"{len(prompts)} completions equal in both generations: {same}; prompt copies that differ: "
            f"{copies_differ} of {len(prompts) // 2}",
        )
    )
    return rows


def task_ddp_dtype_step(args) -> list[dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    batch = tokenizer(["The answer to 3 * 4 is 12, because three fours make twelve."] * 4, return_tensors="pt")
    batch = {key: value.to(args.device) for key, value in batch.items()}

    def changed_fraction(dtype) -> float:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(args.device)
        before = [p.detach().clone() for p in model.parameters()]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)
        with torch.autocast(args.device, dtype=torch.bfloat16):
            loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        changed = sum(int((p.detach() != b).sum()) for p, b in zip(model.parameters(), before, strict=True))
        return changed / sum(b.numel() for b in before)

    fp32, bf16 = changed_fraction(torch.float32), changed_fraction(torch.bfloat16)
    figures = (
        f"one AdamW step, lr 1e-6: fp32 weights + bf16 autocast (what DDP needs) changed {fp32:.1%} of the weights; "
        f"pure bf16 weights (refused under DDP) {bf16:.1%}"
    )
    return [row("ddp: one optimizer step changes the weights", fp32 > 0.5, figures)]


def task_verigate_vllm(args) -> list[dict]:
    check = "verigate: colocate vLLM, 3 steps, tiny PRM"
    install_fake_vllm(args)
    from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer, accuracy_reward

    config = VeriGateConfig(
        output_dir=tempfile.mkdtemp(prefix="gpu_check_verigate_"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=args.max_tokens,
        max_steps=3,
        learning_rate=1e-6,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.35,
        prm_type="qwen_math",
        prm_model_name_or_path=str(Path(args.tiny) / "prm_qwen_math"),
        model_init_kwargs={"dtype": "float32"},
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        **training_device_settings(args),
    )
    started = time.perf_counter()
    trainer = VeriGateGRPOTrainer(
        model=args.model, reward_funcs=[accuracy_reward], args=config, train_dataset=math_dataset(32)
    )
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "verigate/gate_rate" in entry]
    gates = ", ".join(f"{entry['verigate/gate_rate']:.2f}" for entry in steps)
    scored = sum(entry.get("verigate/prm_completions_scored", 0) for entry in steps)
    figures = (
        f"{len(steps)} steps in {time.perf_counter() - started:.0f}s (with loading); gate rate per step {gates}; "
        f"{scored:.0f} completions scored by the PRM"
    )
    return [row(check, [entry["step"] for entry in steps] == [1, 2, 3], figures)]


def task_evaluate_vllm(args) -> list[dict]:
    check = "evaluate math --backend vllm, 16 problems"
    install_fake_vllm(args)
    from trl_verigate.cli import main

    folder = Path(tempfile.mkdtemp(prefix="gpu_check_evaluate_"))
    problems = folder / "problems.jsonl"
    problems.write_text("".join(json.dumps(problem) + "\n" for problem in math_rows(16)))
    output = folder / "out"
    started = time.perf_counter()
    code = main(
        ["evaluate", "math", "--model", args.model, "--dataset", str(problems), "--limit", "16", "--backend", "vllm"]
        + ["--n", "2", "--k", "1,2", "--max-new-tokens", str(args.max_tokens), "--output", str(output), "--no-progress"]
    )
    summary = json.loads((output / "summary.json").read_text())
    figures = (
        f"exit {code}; {summary['problems']} problems, {summary['attempts']} attempts in "
        f"{time.perf_counter() - started:.0f}s; accuracy {summary['metrics']['accuracy']['value']:.3f}, "
        f"pass@2 {summary['metrics']['pass@2']['value']:.3f}; statuses {summary['statuses']}"
    )
    return [row(check, code == 0 and summary["problems"] == 16 and summary["attempts"] == 32, figures)]


def parameter_coordinator(engine):
    """The ZeRO-3 parameter coordinator of a DeepSpeed engine (an inference engine's optimizer is the offload)."""
    offload = engine.optimizer
    offload = getattr(offload, "parameter_offload", offload)
    return offload.get_param_coordinator()


def trace_lengths(coordinator) -> dict:
    """Submodules fetched since the last reset (`__step_id`), the recorded trace, and whether prefetch is on."""
    private = "_PartitionedParameterCoordinator__"
    return {
        "fetched": getattr(coordinator, private + "step_id"),
        "trace": len(getattr(coordinator, private + "submodule_order")),
        "complete": coordinator.is_complete_trace(),
    }


def task_zero3_prm(args) -> list[dict]:
    """Under accelerate's ZeRO-3 launch: the PRM sharded as VeriGateGRPOTrainer shards it (TRL's prepare_deepspeed)."""
    from accelerate import Accelerator
    from trl.models import prepare_deepspeed

    from trl_verigate.rewards.prm import QwenMathPRM

    accelerator = Accelerator()
    plugin = accelerator.state.deepspeed_plugin
    if plugin is None or plugin.zero_stage != 3:
        return [row("zero3: PRM trace", False, "not launched under DeepSpeed ZeRO-3 (accelerate zero3.yaml)")]
    # What the Trainer fills in for its own engine; the PRM's inference engine only needs them consistent with
    # DeepSpeed's world size (the launcher's, which accelerate does not count on the CPU).
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    plugin.deepspeed_config.update(
        train_micro_batch_size_per_gpu=1, gradient_accumulation_steps=1, train_batch_size=world_size
    )
    # In bf16 on a GPU, as the training recipes load their PRM (prm_torch_dtype: bfloat16).
    dtype = None if args.device == "cpu" else "bfloat16"
    path = str(Path(args.tiny) / "prm_qwen_math")
    scorer = QwenMathPRM(path, device=accelerator.device, batch_size=4, torch_dtype=dtype)
    dtype_row = zero3_dtype_row(scorer, path, accelerator.device)
    scorer.model = prepare_deepspeed(scorer.model, accelerator)
    coordinator = parameter_coordinator(scorer.model)
    prompts, steps = ["What is 3 * 4?"], [["Three fours.", "3 * 4 = 12, so \\boxed{12}."]]
    scorer.score(prompts, steps)
    after_one = trace_lengths(coordinator)
    for _ in range(args.calls - 1):
        scorer.score(prompts, steps)
    after_many = trace_lengths(coordinator)
    figures = (
        f"after 1 call: {after_one['fetched']} submodules fetched, trace {after_one['trace']}; after {args.calls}: "
        f"{after_many['fetched']} fetched, trace {after_many['trace']}, prefetch trace complete: "
        f"{after_many['complete']}"
    )
    passed = after_one["fetched"] == after_many["fetched"] and after_many["complete"]
    trace_row = row("zero3: PRM trace stays one pass long", passed, figures, after_one=after_one, after_many=after_many)
    return [trace_row, dtype_row]


def zero3_dtype_row(scorer, path: str, device) -> dict:
    """The PRM's partitions are in DeepSpeed's dtype, and asking for the other dtype is refused before loading."""
    from trl_verigate.rewards.prm import QwenMathPRM
    from trl_verigate.rewards.prm_placement import zero3_build_dtype

    built = zero3_build_dtype()
    held = sorted({str(param.ds_tensor.dtype).removeprefix("torch.") for param in scorer.model.parameters()})
    other = "float32" if built == torch.bfloat16 else "bfloat16"
    try:
        QwenMathPRM(path, device=device, torch_dtype=other)
        refusal = None
    except ValueError as error:
        refusal = str(error)
    passed = held == [str(built).removeprefix("torch.")] and refusal is not None and "ZeRO-3" in refusal
    figures = f"partitions in {held} under DeepSpeed's {str(built).removeprefix('torch.')}; torch_dtype={other!r}: " + (
        "refused before loading" if refusal else "loaded (should be refused)"
    )
    return row("zero3: PRM in DeepSpeed's dtype, another refused", passed, figures)


TASKS = {
    "noise": task_noise,
    "es_vllm": task_es_vllm,
    "ddp_dtype_step": task_ddp_dtype_step,
    "verigate_vllm": task_verigate_vllm,
    "evaluate_vllm": task_evaluate_vllm,
    "zero3_prm": task_zero3_prm,
    **TRAINING_TASKS,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trl_verigate.gpu_check_tasks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task", choices=tuple(TASKS))
    parser.add_argument("--json", required=True, help="where to write the task's rows")
    parser.add_argument("--model", required=True, help="the policy: a local folder")
    parser.add_argument("--midsize", required=True, help="the 0.5B-shaped policy es_cost times (a local folder)")
    parser.add_argument("--tiny", required=True, help="tiny models folder (trl_verigate.tiny.build_tiny_models)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--max-tokens", type=int, default=128, help="completion length of the generating checks")
    parser.add_argument("--calls", type=int, default=50, help="zero3_prm: scoring calls")
    parser.add_argument(
        "--fake-vllm", action="store_true", help="tests only: the vLLM checks against tests/fake_vllm.py, on the CPU"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    rows = TASKS[args.task](args)
    if int(os.environ.get("RANK", "0")) == 0:
        Path(args.json).write_text(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
