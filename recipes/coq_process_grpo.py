"""Process-verified GRPO on Coq (the method of Kim & Yun, ICLR 2026, with Coq's sentences as the tactics).

    accelerate launch --quiet --config_file recipes/accelerate/zero2.yaml recipes/coq_process_grpo.py \
        --config recipes/coq_process_grpo.yaml [--any_field value ...]

(ZeRO-2 keeps the fp32 master of the YAML's bf16 weights; without DeepSpeed or FSDP pass `--dtype float32`.)

Rows with `formal_statement` (`Theorem name : T.`) and an optional `header` (`Require Import …`), from the hub or a
local .json/.jsonl file. Every field of `ProcessScriptArguments`, `CoqProcessConfig` and TRL's `ModelConfig` can be
set in the YAML or overridden on the command line. The Lean recipe is `recipes/lean_process_grpo.py`; both share
`recipes/process_verified_recipe.py`.
"""

from process_verified_recipe import ProcessScriptArguments, ProcessVerifiedRecipe
from recipe_tools import check_command

from trl_verigate import CoqProcessConfig, CoqProcessGRPOTrainer
from trl_verigate.coq.config import default_coqidetop_command
from trl_verigate.rewards.coq import COQ_PROMPT_TEMPLATE


def check_coq_commands(training_args: CoqProcessConfig) -> None:
    """coqidetop runs, and so do coqc and coqchk, which recheck every pass."""
    check_command(training_args.coq_command or default_coqidetop_command(), "coq_command", "[coqidetop.opt, ...]")
    for program in ("coqc", "coqchk"):
        check_command([program], f"{program} (the coqchk recheck)", "apt-get install coq")


RECIPE = ProcessVerifiedRecipe(CoqProcessConfig, CoqProcessGRPOTrainer, COQ_PROMPT_TEMPLATE, check_coq_commands)
# The recipe's steps under the names every recipe module has (tests and recipes/es.py call them).
parse_args = RECIPE.parse_args
to_prompts = RECIPE.to_prompts
prepare = RECIPE.prepare
train = RECIPE.train
main = RECIPE.main
__all__ = ["RECIPE", "ProcessScriptArguments", "main", "parse_args", "prepare", "to_prompts", "train"]

if __name__ == "__main__":
    RECIPE.run()
