"""Process-verified GRPO: a proof assistant's verdict as outcome reward and as tactic-level process credit.

Kim & Yun (ICLR 2026), for Lean; the same method runs on Coq. Each completion's proof is split into tactics
T_1..T_N by the prover's verifier (`lean_server`: the REPL's own AST spans; `coq`: Coq's sentences); g_i = 1
exactly when the proof passed. Tactic scores phi (`advantages.tactic_scores`), process advantages
A_proc[i, j] = coef * (phi[i, j] - mean_group(g)) (`advantages.lean_process_advantages`), and token advantages
A[i, t] = A_out[i] + sum of A_proc[i, j] over the tactics assigned to token t (`advantages.tactic_advantages_to_tokens`;
by default the token at which each tactic begins), A_out being TRL's GRPO advantage.
"""

from __future__ import annotations

import shlex
import warnings
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig
from trl.trainer.utils import get_config_model_id

from trl_verigate.advantages import (
    TACTIC_ASSIGNMENTS,
    lean_process_advantages,
    tactic_advantages_to_tokens,
    tactic_scores,
)
from trl_verigate.prover_pool.results import STATUSES
from trl_verigate.rewards.lean import LeanProcessOracle
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, completion_text
from trl_verigate.rewards.process import ProcessVerdict, ProofReward
from trl_verigate.steps import decode_with_offsets, span_token_ranges
from trl_verigate.trainers.process_grpo import (
    ProcessGRPOTrainer,
    ScoredBatch,
    refuse_too_few_generations,
    refuse_unpipelinable_trainer_arguments,
)


def _argv(command: str | list[str] | None) -> list[str] | None:
    """A command as argv: a string, or the one-item list a command-line flag gives (`--coq_command "a -b"`), is
    split like a shell."""
    if isinstance(command, list) and len(command) == 1:
        command = command[0]
    return shlex.split(command) if isinstance(command, str) else command


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


PROVERS = ("lean", "coq")
# Fields named for Lean before the trainer took other provers: old name -> new name. The old names still work, with a
# FutureWarning.
RENAMED_FIELDS = {
    "lean_timeout": "prover_timeout",
    "lean_workers": "prover_workers",
    "lean_memory_limit_mb": "prover_memory_limit_mb",
    "lean_header": "prover_header",
    "lean_project_dir": "prover_project_dir",
    "lean_tactic_granularity": "tactic_granularity",
    "lean_generation_chunks": "generation_chunks",
}


@dataclass
class ProcessVerifiedConfig(GRPOConfig):
    """Configuration of [`ProcessVerifiedGRPOTrainer`]: every [`trl.GRPOConfig`] field plus the fields below."""

    prover: str = field(
        default="lean",
        metadata={
            "help": "The proof assistant that verifies: 'lean' (lean_server) or 'coq' (coqidetop).",
            "choices": list(PROVERS),
        },
    )
    lean_repl_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of one Lean REPL, e.g. ['lake', 'env', '/path/to/repl/.lake/build/bin/repl'] (a string is "
            "split like a shell). Starts a local LeanServer pool. Unused with `lean_server_urls` or a `verifier=`."
        },
    )
    lean_server_urls: list[str] | None = field(
        default=None,
        metadata={"help": "Base URLs of remote `trl-verigate lean-server`s (or kimina-lean-server): a LeanClient."},
    )
    coq_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of coqidetop with its options (a string is split like a shell). None: `coqidetop.opt` or "
            "`coqidetop` from PATH. Used with prover='coq'."
        },
    )
    prover_project_dir: str | None = field(
        default=None,
        metadata={"help": "Directory the prover runs in: the Lean project with Mathlib built, or the Coq project."},
    )
    prover_workers: int | None = field(
        default=None, metadata={"help": "Prover processes in the local pool, per training process. None: CPUs - 1."}
    )
    prover_timeout: float = field(
        default=15.0, metadata={"help": "Seconds of verification per proof (the paper's best for Lean: 15)."}
    )
    prover_header: str | None = field(
        default=None,
        metadata={
            "help": "Header for rows without a `header` column value: Lean imports and options (None: miniF2F's), "
            "or Coq `Require Import` sentences (None: the Coq server's default)."
        },
    )
    prover_memory_limit_mb: int | None = field(
        default=8192, metadata={"help": "Address-space limit of each local prover process, MiB. None: no limit."}
    )
    tactic_granularity: str = field(
        default="outermost",
        metadata={
            "help": "Lean tactics credited: 'outermost' (the top-level sequence, paper) or 'all' (nested too). Coq "
            "credits each sentence."
        },
    )
    completion_format: str = field(
        default="auto",
        metadata={
            "help": "Lean: 'proof_body': the completion continues the statement (DeepSeek-Prover-V1.5, STP). "
            "'fenced_block': reasoning then a ```lean4 block restating the theorem (Kimina, DeepSeek-Prover-V2). "
            "'auto': a block when the completion opens a ```lean4 fence, else a proof body. Coq reads the proof "
            "from a ```coq block, else the whole completion.",
            "choices": list(COMPLETION_FORMATS),
        },
    )
    statement_field: str = field(
        default="formal_statement",
        metadata={"help": "Dataset column of the trusted statement (Lean: ends in `:= by`; Coq: `Theorem name : T.`)."},
    )
    header_field: str = field(default="header", metadata={"help": "Dataset column of the trusted header."})
    partial_tactic_score: float = field(
        default=-0.05, metadata={"help": "d1: a failed proof's tactics before the first error."}
    )
    error_tactic_score: float = field(
        default=-0.1, metadata={"help": "d2: a failed proof's first failing tactic and all after it."}
    )
    first_error_propagation: bool = field(
        default=True,
        metadata={
            "help": "True (paper): every tactic from the first failing one on gets d2. False: a failed proof's tactic "
            "gets d2 only when an error message starts inside it, d1 otherwise."
        },
    )
    process_token_assignment: str = field(
        default="first",
        metadata={
            "help": "Tokens that get a tactic's process advantage: 'first' (its first token, paper), 'all' or 'last'.",
            "choices": list(TACTIC_ASSIGNMENTS),
        },
    )
    generation_chunks: int = field(
        default=1,
        metadata={
            "help": "Generate each batch in this many chunks (transformers generation only, not vLLM) and start "
            "verifying a chunk as soon as it is decoded, so verification overlaps the generation of the next chunks. "
            "1: verification overlaps TRL's old/ref log-prob passes and other rewards only."
        },
    )
    process_advantage_coef: float = field(
        default=1.0, metadata={"help": "Multiplies A_proc: 1.0 is the paper, 0.0 is outcome-only GRPO."}
    )
    pipelined_verification: bool = field(
        default=False,
        metadata={
            "help": "False (default, the paper): on-policy; each step generates a batch, verifies it and trains on "
            "it, so a step lasts about generation + verification. True: one step off-policy; each step generates the "
            "next batch (its old log-probs from the generating weights, its verification started at once) and trains "
            "on the batch generated at the step before, whose verification ran meanwhile, so a step lasts about "
            "max(generation + training, verification). Trade-off: the trained batch was sampled from the weights "
            "one update older; the PPO ratio and clipping against the generating weights correct for it. Data: the "
            "first step of train() waits for its own batch and trains on it, and generates the next step's batch "
            "from the same prompts, so the first step's prompts are trained twice (at steps 0 and 1, two samples of "
            "completions) and the last step's prompts are never trained. A checkpoint does not hold the batch "
            "generated ahead: resumed from checkpoint-s, the prompts of step s - 1 (generated ahead, not saved) are "
            "never trained and those of step s, the first resumed step, are trained twice. Needs num_iterations=1, steps_per_generation=gradient_accumulation_steps, "
            "generation_chunks=1 and, with vLLM, vllm_importance_sampling_correction=False."
        },
    )

    lean_timeout: float | None = field(default=None, metadata={"help": "Deprecated: use prover_timeout."})
    lean_workers: int | None = field(default=None, metadata={"help": "Deprecated: use prover_workers."})
    lean_memory_limit_mb: int | None = field(default=None, metadata={"help": "Deprecated: use prover_memory_limit_mb."})
    lean_header: str | None = field(default=None, metadata={"help": "Deprecated: use prover_header."})
    lean_project_dir: str | None = field(default=None, metadata={"help": "Deprecated: use prover_project_dir."})
    lean_tactic_granularity: str | None = field(default=None, metadata={"help": "Deprecated: use tactic_granularity."})
    lean_generation_chunks: int | None = field(default=None, metadata={"help": "Deprecated: use generation_chunks."})

    def __post_init__(self):
        refuse_too_few_generations(self)
        super().__post_init__()
        self._take_renamed_fields()
        if self.prover not in PROVERS:
            raise ValueError(f"prover={self.prover!r} is not supported; use one of {list(PROVERS)}.")
        self.coq_command = _argv(self.coq_command)
        if self.prover == "coq" and (self.lean_repl_command or self.lean_server_urls):
            raise ValueError(
                "prover='coq' with lean_repl_command or lean_server_urls set: those configure Lean; drop them or set "
                "prover='lean'."
            )
        self.lean_repl_command = _argv(self.lean_repl_command)
        if isinstance(self.lean_server_urls, str):
            self.lean_server_urls = [url for url in self.lean_server_urls.replace(",", " ").split() if url]
        if self.lean_server_urls is not None and len(self.lean_server_urls) == 1 and "," in self.lean_server_urls[0]:
            self.lean_server_urls = [url.strip() for url in self.lean_server_urls[0].split(",") if url.strip()]
        if self.lean_repl_command and self.lean_server_urls:
            raise ValueError(
                "lean_repl_command and lean_server_urls are both set: give lean_repl_command for a local pool or "
                "lean_server_urls for remote servers, not both."
            )
        if self.completion_format not in COMPLETION_FORMATS:
            raise ValueError(
                f"completion_format={self.completion_format!r} is not supported; use one of {list(COMPLETION_FORMATS)}."
            )
        if self.process_token_assignment not in TACTIC_ASSIGNMENTS:
            raise ValueError(
                f"process_token_assignment={self.process_token_assignment!r} is not supported; use one of "
                f"{list(TACTIC_ASSIGNMENTS)}."
            )
        if self.tactic_granularity not in ("outermost", "all"):
            raise ValueError(f"tactic_granularity={self.tactic_granularity!r} must be 'outermost' or 'all'.")
        if not _is_number(self.prover_timeout) or not self.prover_timeout > 0:
            raise ValueError(f"prover_timeout={self.prover_timeout!r} must be a positive number of seconds, e.g. 15.")
        if self.prover_workers is not None and (
            isinstance(self.prover_workers, bool) or not isinstance(self.prover_workers, int) or self.prover_workers < 1
        ):
            raise ValueError(
                f"prover_workers={self.prover_workers!r} must be a positive integer, or None for CPUs - 1."
            )
        if (
            isinstance(self.generation_chunks, bool)
            or not isinstance(self.generation_chunks, int)
            or self.generation_chunks < 1
        ):
            raise ValueError(f"generation_chunks={self.generation_chunks!r} must be a positive integer.")
        if self.pipelined_verification:
            self._check_pipelined_verification()
        for name in ("partial_tactic_score", "error_tactic_score", "process_advantage_coef"):
            if not _is_number(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)!r} must be a number.")

    def _check_pipelined_verification(self) -> None:
        """Refuse what one-step pipelining does not support (each generated batch trains exactly one optimizer step,
        one step after its generation)."""
        if self.num_iterations != 1:
            raise ValueError(
                f"pipelined_verification=True trains each batch once, one step after it was generated; "
                f"num_iterations={self.num_iterations} would reuse it for more updates. Set num_iterations=1 or "
                "pipelined_verification=False."
            )
        if self.steps_per_generation != self.gradient_accumulation_steps:
            raise ValueError(
                f"pipelined_verification=True generates one batch per optimizer step; steps_per_generation="
                f"{self.steps_per_generation} differs from gradient_accumulation_steps="
                f"{self.gradient_accumulation_steps}. Leave steps_per_generation (and generation_batch_size) unset or "
                "set pipelined_verification=False."
            )
        if self.generation_chunks != 1:
            raise ValueError(
                f"pipelined_verification=True already overlaps verification with the next batch's generation; "
                f"generation_chunks={self.generation_chunks} is not supported with it. Set generation_chunks=1."
            )
        if self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(
                "pipelined_verification=True with use_vllm needs vllm_importance_sampling_correction=False: TRL "
                "computes the vLLM correction when a batch is scored, one update after it was generated. Set "
                "vllm_importance_sampling_correction=False or pipelined_verification=False."
            )

    def _take_renamed_fields(self) -> None:
        for old, new in RENAMED_FIELDS.items():
            value = getattr(self, old)
            if value is None:
                continue
            warnings.warn(f"{old} is deprecated; use {new}", FutureWarning, stacklevel=4)
            setattr(self, new, value)
            setattr(self, old, None)


class ProcessVerifiedGRPOTrainer(ProcessGRPOTrainer):
    """GRPO with a proof assistant as outcome reward and process oracle (process-verified RL; Kim & Yun, ICLR 2026,
    for Lean; the same method on Coq with ``prover="coq"``).

    Takes every argument of [`trl.GRPOTrainer`] (``args`` a [`ProcessVerifiedConfig`]) plus

    - ``verifier``: a started or unstarted `LeanServer`, a `LeanClient` or a `CoqServer` (anything with a batch
      ``verify`` like the `Verifier` protocol); without it one is built from the config's prover fields;
    - ``process_oracle``: any object with ``verify(prompts, rows, completions) -> list[ProcessVerdict]``, replacing
      the prover backend altogether (e.g. a symbolic checker of arithmetic steps).

    The trainer's own reward function ``lean_proof`` or ``coq_proof`` (g, 0/1) comes first in the reward table;
    ``reward_funcs`` are added after it (a format or length penalty, say) and enter A_out through TRL, weighted by
    ``reward_weights`` (one weight per function, the proof reward first). A_proc's group mean is over g alone.

    Verification of a batch starts as soon as its completions are decoded and runs while TRL computes the old/ref
    log-probabilities and the other rewards. With ``pipelined_verification`` each step trains on the batch generated
    at the step before, so verification also runs through that step's training and the next batch's generation
    (one step off-policy; ``pipeline/staleness`` logs the lag in optimizer steps).

    Metrics (TRL's, so every ``report_to`` gets them), under the prover's name (``lean/`` or ``coq/``):
    ``pass_rate``, ``status/<status>``, ``tactics_per_proof`` (mean tactics per completion), ``empty_fraction``
    (completions with no tactic), ``first_error_relative`` (mean first_error / num_tactics over failed proofs with
    tactics), ``verify_seconds`` (slowest process), ``verify_hidden_fraction`` (share of verification time overlapped
    with other work), ``proofs_per_second``, ``rechecked_fraction`` (of the prover's passes, those an independent
    checker saw; 0 with the recheck off), ``frac_zero_std_outcome`` and ``verification_failures`` (timeouts,
    crashes, errors and unreachable servers in the batch, all processes).
    """

    _tag_names = ["trl", "grpo", "process-verified"]
    _name = "ProcessVerifiedGRPO"
    # The paper's arXiv id and exact title are not recorded here; the card names the method and venue only.
    _paper = {"title": "Process-verified reinforcement learning for Lean (Kim & Yun, ICLR 2026)", "id": None}

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: ProcessVerifiedConfig | None = None,
        *trainer_args,
        verifier=None,
        process_oracle=None,
        lean_server=None,
        **trainer_kwargs,
    ):
        if args is None:
            model_name = model if isinstance(model, str) else get_config_model_id(model.config)
            args = ProcessVerifiedConfig(f"{model_name.split('/')[-1]}-ProcessVerifiedGRPO")
        elif not isinstance(args, ProcessVerifiedConfig):
            raise TypeError(
                f"args must be a ProcessVerifiedConfig, got {type(args).__name__}; build it with "
                "ProcessVerifiedConfig(**your_grpo_kwargs) so the prover fields have values."
            )
        if lean_server is not None:
            warnings.warn("lean_server= is deprecated; use verifier=", FutureWarning, stacklevel=2)
            if verifier is not None:
                raise ValueError("give verifier= only (lean_server= is its deprecated name), not both.")
            verifier = lean_server
        if args.pipelined_verification:
            refuse_unpipelinable_trainer_arguments("pipelined_verification", trainer_args, trainer_kwargs)
        self._owned_verifier = None
        if process_oracle is None:
            given = verifier is not None
            verifier = verifier if given else build_verifier(args)
            if not given and hasattr(verifier, "start"):
                self._owned_verifier = verifier
            if hasattr(verifier, "start") and not getattr(verifier, "started", True):
                verifier.start()
            process_oracle = build_oracle(args, verifier)
        elif verifier is not None:
            raise ValueError("give verifier or process_oracle, not both: the oracle does its own verification.")
        self.metric_prefix = args.prover
        self.proof_reward = ProofReward(process_oracle, name=f"{args.prover}_proof")
        if reward_funcs is None:
            reward_funcs = []
        elif not isinstance(reward_funcs, list):
            reward_funcs = [reward_funcs]
        weights = args.reward_weights
        if weights is not None and len(weights) != 1 + len(reward_funcs):
            raise ValueError(
                f"reward_weights has {len(weights)} entries for {1 + len(reward_funcs)} reward functions: "
                f"{self.proof_reward.__name__} comes first, then reward_funcs; give one weight each, e.g. [1.0, ...]."
            )
        self._generation_rows: list | None = None
        self._started_verification = None  # the handle of the verification the last `_generate` started
        super().__init__(model, [self.proof_reward, *reward_funcs], args, *trainer_args, **trainer_kwargs)
        self._proof_reward_index = 0
        self._failures_seen = 0

    def train(self, *args, **kwargs):
        try:
            return super().train(*args, **kwargs)
        finally:
            # The verification of a batch generated ahead and dropped (training stopped early, an exception or a
            # KeyboardInterrupt from a callback): cancelled if not yet running; a proof already running cannot be
            # interrupted and finishes within prover_timeout (sooner when close_verifier stops the trainer's own pool).
            self.proof_reward.clear_pending()
            self.close_verifier()

    def close_verifier(self) -> None:
        """Stop the prover pool this trainer started from its config (a `verifier=` argument stays the caller's)."""
        if self._owned_verifier is not None and hasattr(self._owned_verifier, "close"):
            self._owned_verifier.close()

    # ---------------------------------------------------------------- verification overlapped with TRL's work

    def _generate_and_score_completions(self, inputs):
        self._generation_rows = inputs
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._generation_rows = None

    def _pipelines_generation(self) -> bool:
        return self.args.pipelined_verification

    def _take_scoring_started(self):
        started, self._started_verification = self._started_verification, None
        return started

    def _generate(self, prompts: list):
        if self._replayed_batch is not None:
            # Generated at the step before, its verification under way: collect that one, never another batch's
            # with the same completions (an evaluation's, say).
            self.proof_reward.collect_next(self._replayed_batch.scoring)
            return super()._generate(prompts)
        owned = self._owned_verifier
        if owned is not None and not owned.started:
            owned.start()  # closed by a previous train()
        pipelined = self.args.pipelined_verification
        if not pipelined:
            self.proof_reward.clear_pending()  # a batch left unscored (an exception mid-step) is not collected
        self._started_verification = None
        result = super()._generate(prompts)
        completions = result[3]
        rows = self._generation_rows
        if rows is not None and len(rows) == len(completions):
            # Chunks already started their verification (on-policy only); a pipelined batch always starts its own,
            # even when its completions repeat the previous batch's.
            if pipelined or not self.proof_reward.is_pending(completions):
                self._started_verification = self.proof_reward.start(prompts, completions, rows)
        # Scored right after (on-policy, evaluation); a batch generated ahead is named again when it is scored.
        self.proof_reward.collect_next(self._started_verification)
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        rows = self._generation_rows
        chunks = self.args.generation_chunks
        if (
            chunks <= 1
            or self.use_vllm
            or self.use_transformers_continuous_batching
            or images is not None
            or self.tools
            or rows is None
            or len(rows) != len(prompt_ids)
        ):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        # Every process runs the same number of chunks (equal local batches), so ZeRO-3 parameter gathers match.
        size = -(-len(prompt_ids) // chunks)
        completion_ids = []
        for start in range(0, len(prompt_ids), size):
            chunk_ids, _ = super()._generate_single_turn(
                prompt_ids[start : start + size], None, multimodal_fields, num_generations, has_tool_images
            )
            completion_ids.extend(chunk_ids)
            # Decoded as TRL decodes them; if TRL's text differs (a response parser), the reward verifies again.
            texts = self.processing_class.batch_decode(chunk_ids, skip_special_tokens=True)
            chunk_rows = rows[start : start + size]
            if isinstance(chunk_rows[0].get("prompt"), list):
                texts = [[{"role": "assistant", "content": text}] for text in texts]
            self.proof_reward.start_chunk([row.get("prompt") for row in chunk_rows], texts, chunk_rows)
        return completion_ids, None

    # ---------------------------------------------------------------- advantages

    def _process_advantages(self, batch: ScoredBatch, output: dict) -> tuple[torch.Tensor, torch.Tensor]:
        verdicts = self.proof_reward.last_verdicts
        local_size = len(batch.completions)
        if verdicts is None or len(verdicts) != local_size:
            raise RuntimeError(
                f"the {self.proof_reward.__name__} reward did not verify this batch; it must be among the reward "
                "functions"
            )
        self.proof_reward.last_verdicts = None
        device = self.accelerator.device
        num_tactics = torch.tensor([len(v.spans) for v in verdicts], dtype=torch.long, device=device)
        first_error = torch.tensor([v.first_error for v in verdicts], dtype=torch.long, device=device)
        status = torch.tensor([STATUSES.index(v.status) for v in verdicts], dtype=torch.long, device=device)
        rechecked = torch.tensor([v.rechecked for v in verdicts], dtype=torch.bool, device=device)
        width = max(1, int(num_tactics.max()) if local_size else 1)
        error_tactics = torch.zeros(local_size, width, dtype=torch.bool)
        for row, verdict in enumerate(verdicts):
            error_tactics[row, list(verdict.error_tactics)] = True

        all_num_tactics = self.accelerator.gather(num_tactics)
        all_first_error = self.accelerator.gather(first_error)
        all_status = self.accelerator.gather(status)
        all_rechecked = self.accelerator.gather(rechecked)
        all_error_tactics = self._gather_padded(error_tactics)
        passed = all_status == STATUSES.index("passed")
        scores, mask = tactic_scores(
            passed,
            all_num_tactics,
            all_first_error,
            partial_score=self.args.partial_tactic_score,
            error_score=self.args.error_tactic_score,
            error_tactics=None if self.args.first_error_propagation else all_error_tactics,
        )
        outcome = torch.nan_to_num(batch.rewards_per_func[:, self._proof_reward_index], nan=0.0).to(scores.device)
        process = self.args.process_advantage_coef * lean_process_advantages(
            scores, mask, outcome, batch.num_generations
        )
        local_process = process[batch.process_slice]
        self._log_prover_metrics(batch, all_status, all_num_tactics, all_first_error, outcome, all_rechecked)

        token_spans = self._tactic_token_spans(batch, verdicts, local_process.shape[1])
        num_tokens = output["completion_ids"].shape[1]
        token_values = tactic_advantages_to_tokens(
            local_process, token_spans.to(local_process.device), num_tokens, self.args.process_token_assignment
        )
        return token_values, torch.zeros(local_size, dtype=torch.bool, device=token_values.device)

    def _tactic_token_spans(self, batch: ScoredBatch, verdicts: list[ProcessVerdict], width: int) -> torch.Tensor:
        """(B, width, 2) [first, end) token range of each tactic of this process's completions; -1 for none."""
        spans = torch.full((len(verdicts), width, 2), -1, dtype=torch.long)
        for row, (verdict, ids, completion) in enumerate(
            zip(verdicts, batch.completion_ids, batch.completions, strict=True)
        ):
            if not verdict.spans:
                continue
            text, offsets = decode_with_offsets(self._tokenizer, ids)
            if text != completion_text(completion):
                # The reward saw another text than the tokens decode to (a response parser rewrote it): character
                # spans cannot be placed on these tokens, so the completion gets A_out only.
                continue
            for column, token_range in enumerate(span_token_ranges(offsets, verdict.spans)):
                spans[row, column] = torch.tensor(token_range)
        return spans

    def _log_prover_metrics(self, batch, status, num_tactics, first_error, outcome, rechecked) -> None:
        metrics = self._metrics[batch.mode]
        prefix = self.metric_prefix
        metrics[f"{prefix}/pass_rate"].append(outcome.mean().item())
        # The prover's passes an independent checker saw (confirmed, or overturned into a failure): 0 while the
        # recheck is off, which the server says once at start.
        repl_passes = ((status == STATUSES.index("passed")) | rechecked).sum().item()
        metrics[f"{prefix}/rechecked_fraction"].append(rechecked.sum().item() / repl_passes if repl_passes else 0.0)
        for index, name in enumerate(STATUSES):
            metrics[f"{prefix}/status/{name}"].append((status == index).float().mean().item())
        metrics[f"{prefix}/tactics_per_proof"].append(num_tactics.float().mean().item())
        metrics[f"{prefix}/empty_fraction"].append((num_tactics == 0).float().mean().item())
        failed_with_tactics = (status == STATUSES.index("failed")) & (num_tactics > 0)
        if failed_with_tactics.any():
            relative = first_error[failed_with_tactics].float() / num_tactics[failed_with_tactics].float()
            metrics[f"{prefix}/first_error_relative"].append(relative.mean().item())
        grouped = outcome.view(-1, batch.num_generations)
        metrics[f"{prefix}/frac_zero_std_outcome"].append((grouped == grouped[:, :1]).all(dim=1).float().mean().item())
        verify_seconds, waited_seconds = self.proof_reward.last_timing
        timing = torch.tensor(
            [[verify_seconds, waited_seconds, float(len(batch.completions))]], device=self.accelerator.device
        )
        timing = self.accelerator.gather(timing)
        slowest = timing[:, 0].max().item()
        metrics[f"{prefix}/verify_seconds"].append(slowest)
        total_verify = timing[:, 0].sum().item()
        hidden = 1.0 - timing[:, 1].sum().item() / total_verify if total_verify > 0 else 1.0
        metrics[f"{prefix}/verify_hidden_fraction"].append(min(1.0, max(0.0, hidden)))
        metrics[f"{prefix}/proofs_per_second"].append(timing[:, 2].sum().item() / slowest if slowest > 0 else 0.0)
        new_failures = self.proof_reward.failures - self._failures_seen
        self._failures_seen = self.proof_reward.failures
        failures = self.accelerator.gather(torch.tensor([float(new_failures)], device=self.accelerator.device))
        metrics[f"{prefix}/verification_failures"].append(failures.sum().item())


def build_verifier(args: ProcessVerifiedConfig):
    """The verifier `args` describes: a local `LeanServer` pool, a `LeanClient` of remote servers, or a local
    `CoqServer` pool (unstarted)."""
    settings = {"timeout": args.prover_timeout, "memory_limit_mb": args.prover_memory_limit_mb}
    if args.prover_header is not None:
        settings["header"] = args.prover_header
    if args.prover_workers is not None:
        settings["workers"] = args.prover_workers
    if args.prover == "coq":
        from trl_verigate.coq import CoqServer, CoqServerConfig

        if args.coq_command:
            settings["coqidetop_command"] = args.coq_command
        if args.prover_project_dir is not None:
            settings["project_dir"] = args.prover_project_dir
        return CoqServer(CoqServerConfig(**settings))
    from trl_verigate.lean_server import LeanServerConfig

    settings["tactic_granularity"] = args.tactic_granularity
    if args.lean_server_urls:
        from trl_verigate.lean_server import LeanClient

        return LeanClient(args.lean_server_urls, timeout=args.prover_timeout, config=LeanServerConfig(**settings))
    if not args.lean_repl_command:
        raise ValueError(
            "No Lean verifier: set lean_repl_command (and prover_project_dir) for a local pool, lean_server_urls "
            "for remote servers, or pass verifier= (a LeanServer or LeanClient) or process_oracle=."
        )
    from trl_verigate.lean_server import LeanServer

    return LeanServer(
        LeanServerConfig(repl_command=args.lean_repl_command, project_dir=args.prover_project_dir, **settings)
    )


def build_oracle(args: ProcessVerifiedConfig, verifier):
    """The process oracle of `args.prover` over `verifier`."""
    fields = {
        "timeout": args.prover_timeout,
        "statement_field": args.statement_field,
        "header_field": args.header_field,
    }
    if args.prover == "coq":
        from trl_verigate.rewards.coq import CoqProcessOracle

        return CoqProcessOracle(verifier, **fields)
    return LeanProcessOracle(verifier, completion_format=args.completion_format, **fields)


class LeanProcessConfig(ProcessVerifiedConfig):
    """Deprecated name of [`ProcessVerifiedConfig`], whose `prover` defaults to "lean"."""

    def __post_init__(self):
        warnings.warn("LeanProcessConfig is deprecated; use ProcessVerifiedConfig", FutureWarning, stacklevel=3)
        super().__post_init__()


class LeanProcessGRPOTrainer(ProcessVerifiedGRPOTrainer):
    """Deprecated name of [`ProcessVerifiedGRPOTrainer`]."""

    def __init__(self, *args, **kwargs):
        warnings.warn(
            "LeanProcessGRPOTrainer is deprecated; use ProcessVerifiedGRPOTrainer", FutureWarning, stacklevel=2
        )
        super().__init__(*args, **kwargs)
