"""`PassAtKCallback`: the `trl-verigate evaluate` evaluation inside training, every ``eval_steps`` optimizer steps,
logged as ``eval/pass@k`` (and ``eval/accuracy``, ``eval/maj@k`` for math) through the trainer's loggers.

A recipe switches it on from YAML with `PassAtKArguments` (one more dataclass for `TrlParser`) and::

    if pass_at_k_args.pass_at_k_dataset:
        trainer.add_callback(PassAtKCallback.from_arguments(trainer, pass_at_k_args))

Each process samples an equal share of the problems with the live policy (unwrapped as TRL does for generation), the
rows are gathered, and every process computes the same metrics. Sampling runs under a forked, seeded RNG, so an
evaluation neither depends on nor changes the training run's random stream.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from transformers import Trainer, TrainerCallback

from trl_verigate.evaluate.generation import HFBackend, SamplingConfig, check_attempts, sampling_defaults_from
from trl_verigate.evaluate.metrics import check_ks
from trl_verigate.evaluate.problems import lean_problems, load_rows, math_problems
from trl_verigate.evaluate.runner import Evaluation, compute_metrics, generate_and_score
from trl_verigate.rewards.lean_proofs import DEFAULT_PROMPT_TEMPLATE


@dataclass
class PassAtKArguments:
    """Recipe fields (YAML or command line) of the in-training evaluation; off while `pass_at_k_dataset` is unset."""

    pass_at_k_dataset: str | None = field(
        default=None, metadata={"help": "Problems to evaluate during training (local .json/.jsonl or hub id)."}
    )
    pass_at_k_task: str = field(default="math", metadata={"help": "math or lean."})
    pass_at_k_split: str = field(default="test", metadata={"help": "Dataset split or `split` column value."})
    pass_at_k_format: str = field(default="auto", metadata={"help": "math: auto, math500, math or gsm8k."})
    pass_at_k_limit: int | None = field(default=None, metadata={"help": "Evaluate only the first N problems."})
    pass_at_k_n: int = field(default=4, metadata={"help": "Attempts per problem."})
    pass_at_k_k: str = field(default="1", metadata={"help": "Comma-separated k of pass@k, each <= pass_at_k_n."})
    pass_at_k_steps: int | None = field(
        default=None, metadata={"help": "Evaluate every N optimizer steps (default: the trainer's eval_steps)."}
    )
    pass_at_k_max_new_tokens: int = field(default=256, metadata={"help": "Completion length limit."})
    pass_at_k_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature."})
    pass_at_k_top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling mass."})
    pass_at_k_batch_size: int = field(default=16, metadata={"help": "Sequences per generate call."})
    pass_at_k_seed: int = field(default=0, metadata={"help": "Sampling and bootstrap seed."})

    def __post_init__(self):
        # Checked when the recipe parses its config, before any model loads.
        if self.pass_at_k_task not in ("math", "lean"):
            raise ValueError(f"pass_at_k_task must be math or lean, got {self.pass_at_k_task!r}")
        if self.pass_at_k_dataset:
            self.ks()
            check_attempts(self.pass_at_k_temperature, self.pass_at_k_n, "pass_at_k_temperature", "pass_at_k_n")

    def ks(self) -> list[int]:
        """The k of pass@k from `pass_at_k_k`, sorted, each in [1, pass_at_k_n]."""
        try:
            ks = [int(k) for k in self.pass_at_k_k.split(",") if k.strip()]
        except ValueError as error:
            raise ValueError(f"pass_at_k_k must be comma-separated integers, got {self.pass_at_k_k!r}") from error
        return check_ks(ks, self.pass_at_k_n, flag="pass_at_k_k", n_flag="pass_at_k_n")


def equal_share(num_problems: int, num_processes: int, process_index: int, n: int) -> list[tuple[int, list[int]]]:
    """This process's (problem index, attempt numbers): contiguous blocks of ceil(problems / processes) problems with
    attempts 0..n-1, the short blocks filled up with padding entries (the block's first problem, or problem 0, with
    attempts n..2n-1) so every process generates for the same number of problems. Padding rows are dropped by
    `compute_metrics`, which keeps attempts below n only."""
    per_process = -(-num_problems // num_processes)
    first = process_index * per_process
    mine = list(range(min(first, num_problems), min(first + per_process, num_problems)))
    padding = mine[0] if mine else 0
    return [(index, list(range(n))) for index in mine] + [(padding, list(range(n, 2 * n)))] * (per_process - len(mine))


class PassAtKCallback(TrainerCallback):
    """Runs ``evaluation`` with ``trainer``'s policy every ``eval_steps`` steps and logs its metrics as ``eval/*``.

    Args:
        trainer: the trainer the callback is added to (its model, tokenizer, accelerator and loggers are used).
        evaluation: problems, scorer, n and ks (see `runner.Evaluation`).
        sampling: temperature, top-p, completion length and seed.
        eval_steps: every this many optimizer steps; None: ``trainer.args.eval_steps`` (a fraction of the run
            below 1 is resolved when training begins, as the trainer resolves it).
        batch_size: sequences per generate call.
    """

    def __init__(
        self,
        trainer,
        evaluation: Evaluation,
        sampling: SamplingConfig,
        eval_steps: int | None = None,
        batch_size: int = 16,
    ):
        steps = eval_steps if eval_steps is not None else trainer.args.eval_steps
        if isinstance(steps, float) and steps.is_integer():  # TrainingArguments types eval_steps as a float
            steps = int(steps)
        # The trainer's eval_steps may be a fraction of the run (0.25: every quarter); the trainer turns it into steps
        # once it knows max_steps, and `on_train_begin` takes that number.
        fraction = eval_steps is None and isinstance(steps, float) and 0 < steps < 1
        if not fraction and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(
                f"pass_at_k_steps: the evaluation needs a whole number of steps >= 1, got {steps!r} (the trainer's "
                "eval_steps when unset, which may also be a fraction of the run below 1); set pass_at_k_steps or "
                "eval_steps"
            )
        self.trainer = trainer
        self.evaluation = evaluation
        self.sampling = sampling
        self.eval_steps: int | None = None if fraction else steps
        self.batch_size = batch_size
        self.last_metrics: dict | None = None

    @classmethod
    def from_arguments(
        cls,
        trainer,
        arguments: PassAtKArguments,
        verifier=None,
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        conversational: bool = False,
    ) -> PassAtKCallback:
        """The callback a recipe's `PassAtKArguments` describe. Lean needs a ``verifier`` (LeanServer/LeanClient)
        and the prompt the policy trains with (``prompt_template``, ``conversational``); the statement and header
        columns, completion format and timeout are the trainer's (`ProcessVerifiedConfig`) where it has them."""
        ks = arguments.ks()
        rows = load_rows(arguments.pass_at_k_dataset, arguments.pass_at_k_split)
        if arguments.pass_at_k_task == "math":
            from trl_verigate.evaluate.math_scoring import MathScorer

            problem_set = math_problems(rows, arguments.pass_at_k_format, limit=arguments.pass_at_k_limit)
            scorer = MathScorer()
        elif arguments.pass_at_k_task == "lean":
            from trl_verigate.evaluate.lean_scoring import LeanScorer

            if verifier is None:
                raise ValueError("pass_at_k_task lean: pass the trainer's Lean verifier (a LeanServer or LeanClient)")
            training = trainer.args
            statement_field = getattr(training, "statement_field", "formal_statement")
            problem_set = lean_problems(
                rows, prompt_template, conversational, statement_field, limit=arguments.pass_at_k_limit
            )
            scorer = LeanScorer(
                verifier,
                timeout=getattr(training, "prover_timeout", None) or getattr(verifier.config, "timeout", 15.0),
                completion_format=getattr(training, "completion_format", "auto"),
                statement_field=statement_field,
                header_field=getattr(training, "header_field", "header"),
            )
        else:
            raise ValueError(f"pass_at_k_task must be math or lean, got {arguments.pass_at_k_task!r}")
        evaluation = Evaluation(
            arguments.pass_at_k_task, problem_set, scorer, arguments.pass_at_k_n, ks, arguments.pass_at_k_seed
        )
        policy = trainer.accelerator.unwrap_model(trainer.model)
        sampling = SamplingConfig(
            arguments.pass_at_k_temperature,
            arguments.pass_at_k_top_p,
            arguments.pass_at_k_max_new_tokens,
            arguments.pass_at_k_seed,
            **sampling_defaults_from(getattr(policy, "generation_config", None)),
        )
        return cls(trainer, evaluation, sampling, arguments.pass_at_k_steps, arguments.pass_at_k_batch_size)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.eval_steps is None:  # the trainer's fractional eval_steps, now in steps (TrainerState.compute_steps)
            self.eval_steps = max(1, int(state.eval_steps))
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.eval_steps == 0:
            self.last_metrics = self.run()
            # transformers' Trainer.log, not the GRPO override: that one would flush the step's training metrics
            # into this row. It records the row in log_history and hands it to every reporting callback. Its on_log
            # clears should_log, which would drop this step's training row: the flag is put back.
            should_log = control.should_log
            Trainer.log(self.trainer, {f"eval/{name}": metric["value"] for name, metric in self.last_metrics.items()})
            control.should_log = self.trainer.control.should_log = should_log
        return control

    def run(self) -> dict:
        """The metrics (name -> {"value", "ci_low", "ci_high"}) of one evaluation of the current policy."""
        import torch
        from accelerate.utils import gather_object
        from trl.models import unwrap_model_for_generation

        trainer, evaluation = self.trainer, self.evaluation
        accelerator = trainer.accelerator
        problems = evaluation.problem_set.problems
        rows: list[dict] = []
        # Every process generates for as many problems, so all make the same generate calls: under FSDP every
        # forward pass gathers the sharded weights from all processes (and `generate` keeps decoding until all are
        # done), so one more call on one process would wait forever for the others.
        share = equal_share(len(problems), accelerator.num_processes, accelerator.process_index, evaluation.n)
        local = dataclasses.replace(
            evaluation,
            problem_set=dataclasses.replace(evaluation.problem_set, problems=[problems[i] for i, _ in share]),
        )
        missing = {position: attempts for position, (_, attempts) in enumerate(share)}
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with unwrap_model_for_generation(trainer.model_wrapped, accelerator) as model, torch.random.fork_rng(devices):
            torch.manual_seed(self.sampling.seed + trainer.state.global_step)
            was_training = model.training
            model.eval()
            try:
                backend = HFBackend(model, trainer.processing_class, self.sampling, self.batch_size)
                generate_and_score(local, backend, missing, rows.append, progress=accelerator.is_main_process)
            finally:
                model.train(was_training)
        gathered = gather_object(rows) if accelerator.num_processes > 1 else rows
        unique = {(row["problem_id"], row["attempt"]): row for row in gathered}
        equivalent = getattr(evaluation.scorer, "equivalent", None) if evaluation.task == "math" else None
        ids = [problem.id for problem in problems]
        return compute_metrics(list(unique.values()), ids, evaluation.n, evaluation.ks, equivalent, evaluation.seed)
