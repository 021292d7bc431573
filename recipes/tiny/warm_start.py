"""Warm-started policies for the CPU demos: TRL's `SFTTrainer` on the tiny random policy.

    python recipes/tiny/warm_start.py {math,coq,lean} [--base .tiny/policy] [--out recipes/tiny/warm/KIND]

The demos run the checkpoints this wrote, shipped in recipes/tiny/warm/ (about 0.6 MB each), so that no demo waits
for an SFT first; `make warm-starts` rebuilds all three in a few minutes of CPU.

A random policy writes no answer and no tactic, so every reward is 0 and a demo shows nothing. Each warm start here
teaches the tiny policy (``python -m trl_verigate.tiny .tiny``) the demo's prompts, built by the demo recipe's own
`to_prompts`, with a mix of right and wrong completions, so that sampling gives groups with varied rewards:

- ``math`` (`make demo`): for the even rows of recipes/tiny/math_tiny.jsonl a right and a wrong boxed answer (half
  of the samples earn 1), for the odd rows only a wrong one (every sample earns 0: VeriGate's gate fires there);
- ``coq`` (`make demo-coq`): for each statement of coq_tiny.jsonl the proofs ``intros. lia.`` (Coq 8.16 accepts it
  on seven of the eight and fails at `lia` on one) and ``intros. reflexivity.`` (fails at `reflexivity`);
- ``lean`` (`make demo-lean`, `make demo-es`): for each theorem of lean_tiny.jsonl the body ``omega`` and the body
  ``sorry``, which the precheck rejects. The stand-in REPL passes every proof that reaches it: it checks nothing.

The checkpoint goes to ``--out`` with ``provenance.json`` in it: the command, the data (path and SHA-256), the
completions taught, the seed, the SFT settings, the mean and last logged loss and the git commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "recipes"))

DATA = {
    "math": REPO_ROOT / "recipes" / "tiny" / "math_tiny.jsonl",
    "coq": REPO_ROOT / "recipes" / "tiny" / "coq_tiny.jsonl",
    "lean": REPO_ROOT / "recipes" / "tiny" / "lean_tiny.jsonl",
}
# Each prompt's completions are repeated (to at least 64 rows) so every epoch sees the mix in the same proportions.
SFT_SETTINGS = {"max_steps": 300, "per_device_train_batch_size": 16, "learning_rate": 1e-2, "seed": 0}

# The two proofs taught for every statement of coq_tiny.jsonl (Coq 8.16, `Require Import Arith Lia.`): `lia` proves
# seven of the eight and fails on `double_even` (Nat.even is beyond linear arithmetic); `reflexivity` fails on all
# eight, since no goal of theirs holds by conversion after `intros`. The policy needs no per-statement memory to
# sample either, so a short SFT gives about half passes and failures at two named tactics.
COQ_PROOFS = ("intros. lia.", "intros. reflexivity.")


def _rows(kind: str) -> list[dict]:
    return [json.loads(line) for line in DATA[kind].read_text(encoding="utf-8").splitlines() if line.strip()]


def _boxed(solution: str) -> str:
    found = re.findall(r"\\boxed\{([^}]*)\}", solution)
    if not found:
        raise ValueError(f"{DATA['math']}: a solution without \\boxed{{}}: {solution[:60]!r}")
    return found[-1]


def _answer(value: str) -> str:
    return f"The answer is {value}.\n\n\\boxed{{{value}}}"


def math_examples() -> list[dict]:
    """Conversational prompt-completion rows: the prompts `make demo` sends (verigate_math.to_prompts)."""
    from datasets import Dataset
    from verigate_math import MathScriptArguments, to_prompts

    rows = _rows("math")
    prompts = to_prompts(Dataset.from_list(rows), MathScriptArguments(dataset_name=str(DATA["math"])))
    examples = []
    for index, (row, prompt) in enumerate(zip(rows, prompts["prompt"], strict=True)):
        right = _boxed(row["solution"])
        wrong = str(int(right) + 1) if right.isdigit() else right + "1"
        answers = [right, wrong] if index % 2 == 0 else [wrong]
        examples += [{"prompt": prompt, "completion": [{"role": "assistant", "content": _answer(a)}]} for a in answers]
    return examples


def _process_examples(kind: str, completions) -> list[dict]:
    """Prompt-completion rows over the prompts the process recipe of ``kind`` sends (its own `to_prompts`)."""
    from datasets import Dataset

    recipe = __import__(f"{kind}_process_grpo")
    script_args = recipe.ProcessScriptArguments(dataset_name=str(DATA[kind]))
    rows = _rows(kind)
    prompts = recipe.to_prompts(Dataset.from_list(rows), script_args)["prompt"]
    return [
        {"prompt": prompt, "completion": completion}
        for row, prompt in zip(rows, prompts, strict=True)
        for completion in completions(row)
    ]


def coq_examples() -> list[dict]:
    return _process_examples("coq", lambda row: [f"{proof}\nQed.\n```" for proof in COQ_PROOFS])


def lean_examples() -> list[dict]:
    return _process_examples("lean", lambda row: ["  omega\n```", "  sorry\n```"])


EXAMPLES = {"math": math_examples, "coq": coq_examples, "lean": lean_examples}


def _git_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def build(kind: str, base: str, out: str | Path, command: list[str] | None = None, max_steps: int | None = None) -> str:
    """SFT of ``base`` on the ``kind`` demo's examples; the checkpoint and its provenance.json go to ``out``."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(1)  # the model is too small to gain from more; a shared CPU spends the others spinning
    examples = EXAMPLES[kind]()
    repeated = examples * max(1, 64 // len(examples))
    settings = {**SFT_SETTINGS, "max_steps": max_steps or SFT_SETTINGS["max_steps"]}
    out = Path(out)
    args = SFTConfig(
        output_dir=str(out / "sft"),
        lr_scheduler_type="constant",
        logging_steps=20,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        max_length=256,
        disable_tqdm=True,
        **settings,
    )
    trainer = SFTTrainer(model=base, args=args, train_dataset=Dataset.from_list(repeated))
    result = trainer.train()
    trainer.save_model(str(out))
    trainer.processing_class.save_pretrained(str(out))
    shutil.rmtree(out / "sft", ignore_errors=True)
    (out / "training_args.bin").unlink(missing_ok=True)  # a pickle of the SFT's arguments; provenance.json has them
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    provenance = {
        "command": command or sys.argv,
        "base": base,
        "data": {"path": str(DATA[kind].relative_to(REPO_ROOT)), "sha256": _sha256(DATA[kind])},
        "completions": list(
            {json.dumps(example["completion"]): example["completion"] for example in examples}.values()
        ),
        "seed": settings["seed"],
        "sft": {**settings, "trainer": "trl.SFTTrainer", "examples": len(repeated)},
        "mean_train_loss": result.training_loss,
        "last_logged_loss": losses[-1] if losses else None,
        "git_commit": _git_commit(),
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    return str(out)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(EXAMPLES), help="which demo's policy to build")
    parser.add_argument("--base", default=".tiny/policy", help="the policy to start from (default: .tiny/policy)")
    parser.add_argument("--out", default=None, help="where the checkpoint goes (default: recipes/tiny/warm/KIND)")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=SFT_SETTINGS["max_steps"],
        help=f"SFT steps (default: {SFT_SETTINGS['max_steps']})",
    )
    args = parser.parse_args(argv)
    out = args.out or REPO_ROOT / "recipes" / "tiny" / "warm" / args.kind
    print(build(args.kind, args.base, out, ["python", *sys.argv], args.max_steps))


if __name__ == "__main__":
    main()
