"""The gpu-check tasks that need neither vLLM nor DeepSpeed (run by `trl_verigate.gpu_check_tasks`):

prm_dtypes     the three PRM backends loaded in fp32 and in bf16 on the device: the dtype asked for, scores in
               [0, 1], bf16 within 0.1 of fp32
peft_drift     LoRA adapters merged into a bf16 base and unmerged 100 times (what TRL's vLLM sync does), the
               adapters moving: base weights changed without `peft_sync`'s restore, and with it (0)
trainer_steps  VeriGate (tiny PRM), process-verified GRPO (a stand-in oracle: proofs are the prover's job, not
               the GPU's) and ES, two steps each with HF generate: the steps are logged and the weights move
es_cost        ES's work per member (perturb, then restore) against one HF generate call, on the 0.5B-shaped
               model; the restore bit-exact
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import torch

from trl_verigate.gpu_check_common import length_reward, math_dataset, row, training_device_settings

PRM_PROMPTS = ["What is 3 * 4?", "Tom has 3 boxes of 4 apples. How many apples?"]
PRM_STEPS = [["Three fours.", "3 * 4 = 12, so \\boxed{12}."], ["3 boxes of 4.", "3 * 4 = 12.", "The answer is 12."]]
BF16_TOLERANCE = 0.1


def text_code_reward(completions, **kwargs):
    """A number in [0, 1) from a completion's characters: members that write different text score differently."""
    texts = [c if isinstance(c, str) else "".join(m["content"] for m in c) for c in completions]
    return [sum(map(ord, text)) % 997 / 997 for text in texts]


def task_prm_dtypes(args) -> list[dict]:
    from trl_verigate.rewards.prm import MODEL_BACKENDS

    scores, held = {}, {}
    for dtype in ("float32", "bfloat16"):
        for prm_type, backend in MODEL_BACKENDS.items():
            scorer = backend(str(Path(args.tiny) / f"prm_{prm_type}"), device=args.device, torch_dtype=dtype)
            held[prm_type, dtype] = {str(param.dtype).removeprefix("torch.") for param in scorer.model.parameters()}
            scores[prm_type, dtype] = [score for steps in scorer.score(PRM_PROMPTS, PRM_STEPS) for score in steps]
            del scorer
    rows = []
    for dtype in ("float32", "bfloat16"):
        in_dtype = all(held[prm_type, dtype] == {dtype} for prm_type in MODEL_BACKENDS)
        valid = all(0 <= score <= 1 for prm_type in MODEL_BACKENDS for score in scores[prm_type, dtype])
        figures = (
            f"{', '.join(MODEL_BACKENDS)} on {args.device}: weights in {dtype}: {in_dtype}; scores in [0, 1]: {valid}"
        )
        passed = in_dtype and valid
        if dtype == "bfloat16":
            gaps = {
                prm_type: max(
                    abs(a - b) for a, b in zip(scores[prm_type, "float32"], scores[prm_type, dtype], strict=True)
                )
                for prm_type in MODEL_BACKENDS
            }
            figures += "; largest gap to fp32: " + ", ".join(f"{name} {gap:.4f}" for name, gap in gaps.items())
            passed = passed and max(gaps.values()) < BF16_TOLERANCE
        rows.append(row(f"prm: the three backends in {dtype}", passed, figures))
    return rows


def task_peft_drift(args) -> list[dict]:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trl_verigate.peft_sync import FrozenBase, merged_into

    def changed_after_syncs(restore: bool, syncs: int = 100) -> tuple[int, int]:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to(args.device)
        lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
        frozen = FrozenBase(model)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for _ in range(syncs):
                for name, param in model.named_parameters():
                    if "lora_" in name:  # an optimizer step's worth of movement
                        noise = torch.randn(param.shape, generator=generator).to(param.device, param.dtype)
                        param.add_(noise, alpha=1e-3)
                model.merge_adapter()  # TRL's sync: merge, read the merged weights, unmerge
                model.unmerge_adapter()
                if restore:
                    frozen.restore()
        base = merged_into(model)
        changed = sum(int((param.detach() != frozen.values[name]).sum()) for name, param in base.items())
        return changed, sum(param.numel() for param in base.values())

    drifted, total = changed_after_syncs(restore=False)
    kept, _ = changed_after_syncs(restore=True)
    figures = (
        f"bf16 base on {args.device}, LoRA q/v, 100 merge+unmerge with moving adapters: {drifted} of {total} base "
        f"weights changed without the restore ({drifted / total:.1%}), {kept} with it"
    )
    return [row("peft: frozen base exact across syncs", kept == 0, figures, drifted=drifted, total=total)]


class AlternatingOracle:
    """Process verdicts without a prover: even completions of a batch pass, odd ones fail at their first line."""

    def verify(self, prompts, rows, completions):
        from trl_verigate.rewards.process import ProcessVerdict

        verdicts = []
        for index, completion in enumerate(completions):
            spans = ((0, len(completion)),) if completion else ()
            passed = index % 2 == 0
            first_error = len(spans) if passed else 0
            verdicts.append(
                ProcessVerdict("passed" if passed else "failed", spans, first_error, () if passed else (0,))
            )
        return verdicts


def _grpo_settings(args, folder: str) -> dict:
    return dict(
        output_dir=folder,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=args.max_tokens,
        max_steps=2,
        learning_rate=1e-5,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        model_init_kwargs={"dtype": "float32"},
        **training_device_settings(args),
    )


def _train_and_check(name: str, trainer, started: float) -> dict:
    weights = [param for param in trainer.model.parameters() if param.requires_grad]
    before = [param.detach().clone() for param in weights]
    trainer.train()
    moved = sum(int((param.detach() != old).sum()) for param, old in zip(weights, before, strict=True))
    steps = sorted(
        {entry["step"] for entry in trainer.state.log_history if "loss" in entry or "es/reward_mean" in entry}
    )
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    finite = all(math.isfinite(loss) for loss in losses)
    figures = (
        f"steps logged {steps}, losses finite: {finite}, {moved} weights moved, "
        f"{time.perf_counter() - started:.0f}s with loading"
    )
    return row(f"{name}: 2 steps, HF generate", steps == [1, 2] and finite and moved > 0, figures)


def task_trainer_steps(args) -> list[dict]:
    from trl_verigate import (
        ProcessVerifiedConfig,
        ProcessVerifiedGRPOTrainer,
        VeriGateConfig,
        VeriGateGRPOTrainer,
        accuracy_reward,
    )
    from trl_verigate.trainers.es import ESConfig, ESTrainer

    dataset, rows = math_dataset(8), []
    started = time.perf_counter()
    config = VeriGateConfig(
        prm_type="qwen_math",
        prm_model_name_or_path=str(Path(args.tiny) / "prm_qwen_math"),
        **_grpo_settings(args, tempfile.mkdtemp(prefix="gpu_check_verigate_hf_")),
    )
    trainer = VeriGateGRPOTrainer(args.model, reward_funcs=[accuracy_reward], args=config, train_dataset=dataset)
    rows.append(_train_and_check("verigate", trainer, started))
    del trainer
    started = time.perf_counter()
    config = ProcessVerifiedConfig(**_grpo_settings(args, tempfile.mkdtemp(prefix="gpu_check_process_hf_")))
    trainer = ProcessVerifiedGRPOTrainer(
        args.model, args=config, train_dataset=dataset, process_oracle=AlternatingOracle()
    )
    rows.append(_train_and_check("process-verified", trainer, started))
    del trainer
    started = time.perf_counter()
    settings = _grpo_settings(args, tempfile.mkdtemp(prefix="gpu_check_es_hf_"))
    for name in ("per_device_train_batch_size", "beta"):
        settings.pop(name)
    # σ large enough that members write different completions, so their rewards differ and the update moves.
    config = ESConfig(population_size=4, prompts_per_iteration=2, sigma=0.02, **{**settings, "learning_rate": 5e-3})
    trainer = ESTrainer(model=args.model, reward_funcs=[text_code_reward], args=config, train_dataset=dataset)
    rows.append(_train_and_check("es", trainer, started))
    return rows


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def task_es_cost(args) -> list[dict]:
    from trl_verigate.es import perturb, population_seeds, write_master
    from trl_verigate.trainers.es import ESConfig, ESTrainer

    dtype = "float32" if args.device == "cpu" else "bfloat16"
    config = ESConfig(
        output_dir=tempfile.mkdtemp(prefix="gpu_check_es_cost_"),
        population_size=4,
        prompts_per_iteration=4,
        num_generations=2,
        max_completion_length=args.max_tokens,
        max_steps=1,
        sigma=1e-3,
        model_init_kwargs={"dtype": dtype},
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        **training_device_settings(args),
    )
    dataset = math_dataset(4)
    trainer = ESTrainer(model=args.midsize, reward_funcs=[length_reward], args=config, train_dataset=dataset)
    params, master = trainer._es_parameters(), trainer._es_master
    count = sum(param.numel() for param in params.values())
    prompts = [example["prompt"] for example in dataset for _ in range(2)]
    member_seconds, exact = [], True
    for seed, sign in population_seeds(0, 0, 4, True):
        _synchronize(args.device)
        clock = time.perf_counter()
        perturb(params, master, seed, sign, config.sigma)
        write_master(params, master)
        _synchronize(args.device)
        member_seconds.append(time.perf_counter() - clock)
        exact = exact and all(
            torch.equal(params[name].detach(), master[name].to(params[name].dtype)) for name in params
        )
    with torch.no_grad():
        trainer._generate(prompts)  # warm-up: kernels, caches
        _synchronize(args.device)
        clock = time.perf_counter()
        trainer._generate(prompts)
        _synchronize(args.device)
        generate_seconds = time.perf_counter() - clock
    per_member = sorted(member_seconds)[len(member_seconds) // 2]
    figures = (
        f"{count / 1e6:.1f}M parameters in {dtype} on {args.device}: perturb + restore {per_member * 1e3:.1f} ms per "
        f"member (median of 4), one generate call ({len(prompts)} completions x {args.max_tokens} tokens) "
        f"{generate_seconds:.2f}s: {per_member / generate_seconds:.3f} of it; restores bit-exact: {exact}"
    )
    return [
        row(
            "es: cost per member vs one generate call",
            exact,
            figures,
            per_member_seconds=per_member,
            generate_seconds=generate_seconds,
        )
    ]


TRAINING_TASKS = {
    "prm_dtypes": task_prm_dtypes,
    "peft_drift": task_peft_drift,
    "trainer_steps": task_trainer_steps,
    "es_cost": task_es_cost,
}
