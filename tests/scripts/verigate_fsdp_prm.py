"""Each rank loads VeriGate's PRM under FSDP's CPU-RAM-efficient loading and writes what it scores.

Launched by tests/trainers/test_verigate_multiprocess.py as

    ACCELERATE_USE_FSDP=true FSDP_CPU_RAM_EFFICIENT_LOADING=true \
        python -m torch.distributed.run --nproc_per_node 2 tests/scripts/verigate_fsdp_prm.py PRM_DIR OUT_DIR

With those variables (accelerate sets them from an FSDP config with `fsdp_cpu_ram_efficient_loading: true`) and a
process group up, transformers loads real weights only on local rank 0 and zeros elsewhere, expecting FSDP to
broadcast rank 0's when it wraps the model. The PRM is loaded by `load_step_scorer`, the function the trainer builds it
with; the trainer itself cannot be built here, since accelerate refuses FSDP without a GPU-like device. Each rank
records the sum of its PRM's absolute parameter values and the scores it gives fixed steps.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from trl_verigate.rewards.prm_setup import load_step_scorer  # noqa: E402
from trl_verigate.trainers import VeriGateConfig  # noqa: E402

QUESTIONS = ["What is 2 + 3?", "What is 7 * 6?"]
STEPS = [["2 + 3 = 5.", "The answer is 5."], ["7 * 6 = 42.", "So 42.", "The answer is 42."]]


def main(prm: str, out_dir: str) -> None:
    dist.init_process_group("gloo")
    args = VeriGateConfig(
        output_dir=str(Path(out_dir) / "trainer"),
        use_cpu=True,
        report_to="none",
        bf16=False,
        prm_type="qwen_math",
        prm_model_name_or_path=prm,
        prm_torch_dtype="float32",
    )
    scorer = load_step_scorer(args, torch.device("cpu"))
    rank = dist.get_rank()
    record = {
        "rank": rank,
        "efficient_loading_env": os.environ.get("FSDP_CPU_RAM_EFFICIENT_LOADING"),
        "prm_abs_sum": sum(parameter.abs().sum().item() for parameter in scorer.model.parameters()),
        "scores": scorer.score(QUESTIONS, STEPS),
    }
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
