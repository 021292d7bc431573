"""Process-verified GRPO on Lean 4 (Kim & Yun, ICLR 2026): Lean's verdict as outcome reward and tactic-level credit.

    accelerate launch --quiet --config_file recipes/accelerate/zero2.yaml recipes/lean_process_grpo.py \
        --config recipes/lean_process_grpo.yaml [--any_field value ...]

(ZeRO-2 keeps the fp32 master of the YAML's bf16 weights; without DeepSpeed or FSDP pass `--dtype float32`.)

Rows in DeepSeek-Prover-V1.5's format (`name`, `split`, `informal_prefix`, `formal_statement`, `goal`, `header`), from
the hub or a local .json/.jsonl file. Every field of `ProcessScriptArguments`, `LeanProcessConfig` and TRL's
`ModelConfig` can be set in the YAML or overridden on the command line. The Coq recipe is
`recipes/coq_process_grpo.py`; both share `recipes/process_verified_recipe.py`.
"""

from process_verified_recipe import ProcessScriptArguments, ProcessVerifiedRecipe
from recipe_tools import check_command

from trl_verigate import LeanProcessConfig, LeanProcessGRPOTrainer
from trl_verigate.rewards.lean_proofs import DEFAULT_PROMPT_TEMPLATE


def check_lean_commands(training_args: LeanProcessConfig) -> None:
    """A Lean verifier is configured, and a local pool's REPL program runs."""
    if not training_args.lean_repl_command and not training_args.lean_server_urls:
        raise ValueError(
            "no Lean verifier: set lean_repl_command (a local pool, e.g. [lake, env, /path/to/repl/.lake/build/bin/"
            "repl]) or lean_server_urls (running `trl-verigate lean-server`s)"
        )
    check_command(
        training_args.lean_repl_command, "lean_repl_command", "[lake, env, /path/to/repl/.lake/build/bin/repl]"
    )


RECIPE = ProcessVerifiedRecipe(LeanProcessConfig, LeanProcessGRPOTrainer, DEFAULT_PROMPT_TEMPLATE, check_lean_commands)
# The recipe's steps under the names every recipe module has (tests and recipes/es.py call them).
parse_args = RECIPE.parse_args
to_prompts = RECIPE.to_prompts
prepare = RECIPE.prepare
train = RECIPE.train
main = RECIPE.main
__all__ = ["RECIPE", "ProcessScriptArguments", "main", "parse_args", "prepare", "to_prompts", "train"]

if __name__ == "__main__":
    RECIPE.run()
