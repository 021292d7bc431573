"""PassAtKCallback.run on a policy sharded with FSDP2 (torch's fully_shard) over two gloo processes.

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/pass_at_k_fsdp2.py POLICY_DIR OUT_DIR

Three problems on two processes, two attempts each, two sequences per generate call. Every forward pass of the
sharded policy gathers its weights from both processes, and `generate` on an FSDP-managed model keeps both in step
token by token (transformers' synced_gpus), so the processes must make the same number of generate calls or one
waits forever. Writes OUT_DIR/rank{r}.json: the generate calls this process made and the metrics it computed.
"""

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from accelerate import Accelerator  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from trl_verigate.evaluate import PassAtKCallback  # noqa: E402
from trl_verigate.evaluate.generation import SamplingConfig  # noqa: E402
from trl_verigate.evaluate.math_scoring import MathScorer  # noqa: E402
from trl_verigate.evaluate.problems import math_problems  # noqa: E402
from trl_verigate.evaluate.runner import Evaluation  # noqa: E402


def main(policy: str, out_dir: str) -> None:
    accelerator = Accelerator(cpu=True)
    model = AutoModelForCausalLM.from_pretrained(policy)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    calls = []
    generate = model.generate

    def counting_generate(**kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return generate(**kwargs)

    model.generate = counting_generate
    trainer = SimpleNamespace(
        accelerator=accelerator,
        model=model,
        model_wrapped=model,
        processing_class=AutoTokenizer.from_pretrained(policy),
        state=SimpleNamespace(global_step=1),
        args=SimpleNamespace(eval_steps=1),
    )
    rows = [{"problem": f"What is {k} + {k}?", "answer": str(2 * k)} for k in range(3)]
    evaluation = Evaluation("math", math_problems(rows, "math500", None), MathScorer(), n=2, ks=[1, 2])
    callback = PassAtKCallback(trainer, evaluation, SamplingConfig(max_new_tokens=4), eval_steps=1, batch_size=2)
    metrics = callback.run()
    record = {"calls": calls, "metrics": metrics}
    (Path(out_dir) / f"rank{accelerator.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
