"""Evolution strategies (ESTrainer) on Lean proofs or math answers: no backward pass, the run is its (seed, reward)
history.

    accelerate launch --quiet --config_file recipes/accelerate/ddp.yaml recipes/es.py --config recipes/es_lean.yaml
    accelerate launch --quiet --config_file recipes/accelerate/ddp.yaml recipes/es.py --config recipes/es_math.yaml

`task: lean` rewards a completion with 1.0 when Lean accepts the proof (`lean_proof`, through a local `lean_server`
pool or remote servers) and reads DeepSeek-Prover-format rows; `task: math` uses `accuracy_reward` (math-verify) on
problem/solution rows. Every field of `ESScriptArguments`, `ESConfig` and TRL's `ModelConfig` can be set in the YAML
or overridden on the command line.
"""

from dataclasses import dataclass, field

from lean_process_grpo import ProcessScriptArguments
from lean_process_grpo import to_prompts as lean_prompts
from recipe_tools import (
    ES_SUMMARY,
    RecipeParser,
    check_command,
    check_dataset_name,
    check_model_name,
    run_recipe,
    summarize_run,
)
from trl import ModelConfig, get_peft_config, get_quantization_config
from verigate_math import MathScriptArguments, load_math_dataset, math_reward, set_model_init_kwargs, train_and_save
from verigate_math import to_prompts as math_prompts

from trl_verigate.es.state import STATE_FILENAME
from trl_verigate.trainers.es import ESConfig, ESTrainer
from trl_verigate.trainers.process_verified import PROVERS
from trl_verigate.trainers.utils import argv

TASKS = ("lean", "math")


@dataclass
class ESScriptArguments(ProcessScriptArguments, MathScriptArguments):
    task: str = field(
        default="math",
        metadata={"help": "lean: Lean proofs verified by lean_server; math: accuracy_reward.", "choices": list(TASKS)},
    )
    lean_repl_command: list[str] | None = field(
        default=None,
        metadata={"help": "Argv of one Lean REPL for a local lean_server pool (task lean); a string is shell-split."},
    )
    lean_project_dir: str | None = field(default=None, metadata={"help": "Lean project the REPLs run in."})
    lean_workers: int | None = field(default=None, metadata={"help": "REPLs in the local pool; None: CPUs - 1."})
    lean_timeout: float = field(default=15.0, metadata={"help": "Seconds of verification per proof."})
    lean_memory_limit_mb: int | None = field(default=8192, metadata={"help": "Address-space limit per REPL, MiB."})
    lean_server_urls: list[str] | None = field(
        default=None, metadata={"help": "Remote `trl-verigate lean-server` URLs instead of a local pool."}
    )
    completion_format: str = field(
        default="auto", metadata={"help": "proof_body, fenced_block or auto (see trl_verigate/rewards/lean_proofs)."}
    )


def repl_command(args: ESScriptArguments) -> list[str] | None:
    """The REPL argv of `lean_repl_command`; one string (from the command line) is split like a shell."""
    return argv(args.lean_repl_command)


def lean_reward(args: ESScriptArguments):
    """The async `lean_proof` reward over a lean_server pool (or remote servers): 1.0 for a proof Lean accepts."""
    from trl_verigate.lean_server import LeanClient, LeanServer, LeanServerConfig
    from trl_verigate.rewards.lean import LeanProcessOracle, LeanProofReward

    settings = {"timeout": args.lean_timeout, "memory_limit_mb": args.lean_memory_limit_mb}
    if args.lean_workers is not None:
        settings["workers"] = args.lean_workers
    if args.lean_server_urls:
        verifier = LeanClient(args.lean_server_urls, timeout=args.lean_timeout, config=LeanServerConfig(**settings))
    else:
        config = LeanServerConfig(repl_command=repl_command(args), project_dir=args.lean_project_dir, **settings)
        verifier = LeanServer(config)
        verifier.start()
    oracle = LeanProcessOracle(verifier, completion_format=args.completion_format, timeout=args.lean_timeout)
    return LeanProofReward(oracle), verifier


def check_lean_verifier(args: ESScriptArguments) -> None:
    """Task lean needs remote servers or a REPL command whose program runs."""
    if not args.lean_repl_command and not args.lean_server_urls:
        raise ValueError("task lean needs a verifier: set lean_repl_command (a local pool) or lean_server_urls")
    if not args.lean_server_urls:
        check_command(repl_command(args), "lean_repl_command", "[lake, env, /path/to/repl/.lake/build/bin/repl]")


def prepare(script_args: ESScriptArguments, training_args: ESConfig, model_args: ModelConfig):
    """Every check of the input, then the training dataset; nothing here loads a model or starts a REPL."""
    if script_args.task not in TASKS:
        raise ValueError(f"task={script_args.task!r}: set one of {', '.join(TASKS)}")
    check_dataset_name(script_args.dataset_name)
    check_model_name(model_args.model_name_or_path, revision=model_args.model_revision)
    if script_args.task == "lean":
        check_lean_verifier(script_args)
    set_model_init_kwargs(training_args, model_args)
    to_prompts = lean_prompts if script_args.task == "lean" else math_prompts
    return to_prompts(load_math_dataset(script_args, script_args.dataset_train_split), script_args)


def train(script_args: ESScriptArguments, training_args: ESConfig, model_args: ModelConfig, *, prepared):
    verifier = None
    try:
        if script_args.task == "lean":
            reward, verifier = lean_reward(script_args)
            PROVERS["lean"].start_checked(verifier)  # one trivial proof, before the policy loads
        else:
            reward = math_reward(script_args)
        trainer = ESTrainer(
            model=model_args.model_name_or_path,
            reward_funcs=[reward],
            args=training_args,
            train_dataset=prepared,
            quantization_config=get_quantization_config(model_args),
            peft_config=get_peft_config(model_args),
        )
        train_and_save(trainer, training_args, script_args.dataset_name)
    finally:
        if verifier is not None and hasattr(verifier, "close"):
            verifier.close()
    if trainer.accelerator.is_main_process:
        summarize_run(
            trainer.state.log_history,
            training_args.output_dir,
            training_args.report_to,
            summary=ES_SUMMARY,
            state_file=STATE_FILENAME,
        )


def main(*args):
    train(*args, prepared=prepare(*args))


def parse_args(args: list[str] | None = None):
    return RecipeParser((ESScriptArguments, ESConfig, ModelConfig)).parse_args_and_config(args)


if __name__ == "__main__":
    run_recipe(parse_args, prepare, train)
