"""Process-verified GRPO for Lean: the Lean verdict as outcome reward and as tactic-level process credit.

Kim & Yun (ICLR 2026). Each completion's proof is split into tactics T_1..T_N by `lean_server` (the REPL's own AST
spans); g_i = 1 exactly when the proof passed. Tactic scores phi (`advantages.tactic_scores`), process advantages
A_proc[i, j] = coef * (phi[i, j] - mean_group(g)) (`advantages.lean_process_advantages`), and token advantages
A[i, t] = A_out[i] + sum of A_proc[i, j] over the tactics assigned to token t (`advantages.tactic_advantages_to_tokens`;
by default the token at which each tactic begins), A_out being TRL's GRPO advantage.
"""

from __future__ import annotations

import shlex
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
from trl_verigate.lean_server.types import STATUSES
from trl_verigate.rewards.lean import LeanProcessOracle, LeanProofReward, ProcessVerdict
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, completion_text
from trl_verigate.steps import decode_with_offsets, span_token_ranges
from trl_verigate.trainers.process_grpo import (
    ProcessGRPOTrainer,
    ScoredBatch,
    refuse_unpipelinable_trainer_arguments,
)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class LeanProcessConfig(GRPOConfig):
    """Configuration of [`LeanProcessGRPOTrainer`]: every [`trl.GRPOConfig`] field plus the fields below."""

    lean_repl_command: list[str] | None = field(
        default=None,
        metadata={
            "help": "Argv of one Lean REPL, e.g. ['lake', 'env', '/path/to/repl/.lake/build/bin/repl'] (a string is "
            "split like a shell). Starts a local LeanServer pool. Unused with `lean_server_urls` or a `lean_server=`."
        },
    )
    lean_project_dir: str | None = field(
        default=None, metadata={"help": "Lean project the REPLs run in (with Mathlib built)."}
    )
    lean_workers: int | None = field(
        default=None, metadata={"help": "REPL processes in the local pool, per training process. None: CPUs - 1."}
    )
    lean_timeout: float = field(
        default=15.0, metadata={"help": "Seconds of verification per proof (the paper's best: 15)."}
    )
    lean_header: str | None = field(
        default=None,
        metadata={
            "help": "Header (imports, options) for rows without a `header` column value. None: miniF2F's header."
        },
    )
    lean_server_urls: list[str] | None = field(
        default=None,
        metadata={"help": "Base URLs of remote `trl-verigate lean-server`s (or kimina-lean-server): a LeanClient."},
    )
    lean_memory_limit_mb: int | None = field(
        default=8192, metadata={"help": "Address-space limit of each local REPL, MiB. None: no limit."}
    )
    lean_tactic_granularity: str = field(
        default="outermost",
        metadata={"help": "Tactics credited: 'outermost' (the top-level sequence, paper) or 'all' (nested too)."},
    )
    completion_format: str = field(
        default="auto",
        metadata={
            "help": "'proof_body': the completion continues the statement (DeepSeek-Prover-V1.5, STP). "
            "'fenced_block': reasoning then a ```lean4 block restating the theorem (Kimina, DeepSeek-Prover-V2). "
            "'auto': a block when the completion opens a ```lean4 fence, else a proof body.",
            "choices": list(COMPLETION_FORMATS),
        },
    )
    statement_field: str = field(
        default="formal_statement", metadata={"help": "Dataset column of the trusted statement (ends in `:= by`)."}
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
    lean_generation_chunks: int = field(
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
            "lean_generation_chunks=1 and, with vLLM, vllm_importance_sampling_correction=False."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.lean_repl_command, str):
            self.lean_repl_command = shlex.split(self.lean_repl_command)
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
        if self.lean_tactic_granularity not in ("outermost", "all"):
            raise ValueError(f"lean_tactic_granularity={self.lean_tactic_granularity!r} must be 'outermost' or 'all'.")
        if not _is_number(self.lean_timeout) or not self.lean_timeout > 0:
            raise ValueError(f"lean_timeout={self.lean_timeout!r} must be a positive number of seconds, e.g. 15.")
        if self.lean_workers is not None and (
            isinstance(self.lean_workers, bool) or not isinstance(self.lean_workers, int) or self.lean_workers < 1
        ):
            raise ValueError(f"lean_workers={self.lean_workers!r} must be a positive integer, or None for CPUs - 1.")
        if (
            isinstance(self.lean_generation_chunks, bool)
            or not isinstance(self.lean_generation_chunks, int)
            or self.lean_generation_chunks < 1
        ):
            raise ValueError(f"lean_generation_chunks={self.lean_generation_chunks!r} must be a positive integer.")
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
        if self.lean_generation_chunks != 1:
            raise ValueError(
                f"pipelined_verification=True already overlaps verification with the next batch's generation; "
                f"lean_generation_chunks={self.lean_generation_chunks} is not supported with it. Set "
                "lean_generation_chunks=1."
            )
        if self.use_vllm and self.vllm_importance_sampling_correction:
            raise ValueError(
                "pipelined_verification=True with use_vllm needs vllm_importance_sampling_correction=False: TRL "
                "computes the vLLM correction when a batch is scored, one update after it was generated. Set "
                "vllm_importance_sampling_correction=False or pipelined_verification=False."
            )


class LeanProcessGRPOTrainer(ProcessGRPOTrainer):
    """GRPO with Lean as outcome reward and process oracle (process-verified RL for Lean; Kim & Yun, ICLR 2026).

    Takes every argument of [`trl.GRPOTrainer`] (``args`` a [`LeanProcessConfig`]) plus

    - ``lean_server``: a started or unstarted `LeanServer`, or a `LeanClient` (anything with the `Verifier`
      protocol); without it one is built from the ``lean_*`` config fields;
    - ``process_oracle``: any object with ``verify(prompts, rows, completions) -> list[ProcessVerdict]``, replacing
      the Lean backend altogether (e.g. a symbolic checker of arithmetic steps).

    The trainer's own reward function ``lean_proof`` (g, 0/1) comes first in the reward table; ``reward_funcs`` are
    added after it (a format or length penalty, say) and enter A_out through TRL, weighted by ``reward_weights`` (one
    weight per function, lean_proof first). A_proc's group mean is over g alone.

    Verification of a batch starts as soon as its completions are decoded and runs while TRL computes the old/ref
    log-probabilities and the other rewards. With ``pipelined_verification`` each step trains on the batch generated
    at the step before, so verification also runs through that step's training and the next batch's generation
    (one step off-policy; ``pipeline/staleness`` logs the lag in optimizer steps).

    Metrics (TRL's, so every ``report_to`` gets them): ``lean/pass_rate``, ``lean/status/<status>``,
    ``lean/tactics_per_proof`` (mean tactics per completion), ``lean/first_error_relative`` (mean first_error /
    num_tactics over failed proofs with tactics), ``lean/verify_seconds`` (slowest process),
    ``lean/verify_hidden_fraction`` (share of verification time overlapped with other work),
    ``lean/proofs_per_second``, ``lean/rechecked_fraction`` (of the REPL's passes, those an independent checker saw;
    0 with the recheck off), ``lean/frac_zero_std_outcome`` and ``lean/verification_failures`` (timeouts,
    crashes, errors and unreachable servers in the batch, all processes).
    """

    _tag_names = ["trl", "grpo", "lean", "process-verified"]
    _name = "LeanProcessGRPO"
    # The paper's arXiv id and exact title are not recorded here; the card names the method and venue only.
    _paper = {"title": "Process-verified reinforcement learning for Lean (Kim & Yun, ICLR 2026)", "id": None}

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: LeanProcessConfig | None = None,
        *trainer_args,
        lean_server=None,
        process_oracle=None,
        **trainer_kwargs,
    ):
        if args is None:
            model_name = model if isinstance(model, str) else get_config_model_id(model.config)
            args = LeanProcessConfig(f"{model_name.split('/')[-1]}-LeanProcessGRPO")
        elif not isinstance(args, LeanProcessConfig):
            raise TypeError(
                f"args must be a LeanProcessConfig, got {type(args).__name__}; build it with "
                "LeanProcessConfig(**your_grpo_kwargs) so the Lean fields have values."
            )
        if args.pipelined_verification:
            refuse_unpipelinable_trainer_arguments("pipelined_verification", trainer_args, trainer_kwargs)
        self._owned_lean_server = None
        if process_oracle is None:
            verifier = lean_server if lean_server is not None else self._build_verifier(args)
            if lean_server is None and hasattr(verifier, "start"):
                self._owned_lean_server = verifier
            if hasattr(verifier, "start") and not getattr(verifier, "started", True):
                verifier.start()
            process_oracle = LeanProcessOracle(
                verifier,
                completion_format=args.completion_format,
                timeout=args.lean_timeout,
                statement_field=args.statement_field,
                header_field=args.header_field,
            )
        elif lean_server is not None:
            raise ValueError("give lean_server or process_oracle, not both: the oracle does its own verification.")
        self.lean_reward = LeanProofReward(process_oracle)
        if reward_funcs is None:
            reward_funcs = []
        elif not isinstance(reward_funcs, list):
            reward_funcs = [reward_funcs]
        weights = args.reward_weights
        if weights is not None and len(weights) != 1 + len(reward_funcs):
            raise ValueError(
                f"reward_weights has {len(weights)} entries for {1 + len(reward_funcs)} reward functions: lean_proof "
                "comes first, then reward_funcs; give one weight each, e.g. [1.0, ...]."
            )
        self._generation_rows: list | None = None
        self._started_verification = None  # the handle of the verification the last `_generate` started
        super().__init__(model, [self.lean_reward, *reward_funcs], args, *trainer_args, **trainer_kwargs)
        self._lean_index = 0
        self._lean_failures_seen = 0

    @staticmethod
    def _build_verifier(args: LeanProcessConfig):
        from trl_verigate.lean_server import LeanServerConfig

        server_config = {"timeout": args.lean_timeout, "memory_limit_mb": args.lean_memory_limit_mb}
        server_config["tactic_granularity"] = args.lean_tactic_granularity
        if args.lean_header is not None:
            server_config["header"] = args.lean_header
        if args.lean_workers is not None:
            server_config["workers"] = args.lean_workers
        if args.lean_server_urls:
            from trl_verigate.lean_server import LeanClient

            return LeanClient(
                args.lean_server_urls, timeout=args.lean_timeout, config=LeanServerConfig(**server_config)
            )
        if not args.lean_repl_command:
            raise ValueError(
                "No Lean verifier: set lean_repl_command (and lean_project_dir) for a local pool, lean_server_urls "
                "for remote servers, or pass lean_server= (a LeanServer or LeanClient) or process_oracle=."
            )
        from trl_verigate.lean_server import LeanServer

        server_config["repl_command"] = args.lean_repl_command
        server_config["project_dir"] = args.lean_project_dir
        return LeanServer(LeanServerConfig(**server_config))

    def train(self, *args, **kwargs):
        try:
            return super().train(*args, **kwargs)
        finally:
            # The verification of a batch generated ahead and dropped (training stopped early, an exception or a
            # KeyboardInterrupt from a callback): cancelled if not yet running; a proof already running cannot be
            # interrupted and finishes within lean_timeout (sooner when close_lean stops the trainer's own pool).
            self.lean_reward.clear_pending()
            self.close_lean()

    def close_lean(self) -> None:
        """Stop the Lean pool this trainer started from its config (a `lean_server=` argument stays the caller's)."""
        if self._owned_lean_server is not None and hasattr(self._owned_lean_server, "close"):
            self._owned_lean_server.close()

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
            self.lean_reward.collect_next(self._replayed_batch.scoring)
            return super()._generate(prompts)
        owned = self._owned_lean_server
        if owned is not None and not owned.started:
            owned.start()  # closed by a previous train()
        pipelined = self.args.pipelined_verification
        if not pipelined:
            self.lean_reward.clear_pending()  # a batch left unscored (an exception mid-step) is not collected
        self._started_verification = None
        result = super()._generate(prompts)
        completions = result[3]
        rows = self._generation_rows
        if rows is not None and len(rows) == len(completions):
            # Chunks already started their verification (on-policy only); a pipelined batch always starts its own,
            # even when its completions repeat the previous batch's.
            if pipelined or not self.lean_reward.is_pending(completions):
                self._started_verification = self.lean_reward.start(prompts, completions, rows)
        # Scored right after (on-policy, evaluation); a batch generated ahead is named again when it is scored.
        self.lean_reward.collect_next(self._started_verification)
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        rows = self._generation_rows
        chunks = self.args.lean_generation_chunks
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
            self.lean_reward.start_chunk([row.get("prompt") for row in chunk_rows], texts, chunk_rows)
        return completion_ids, None

    # ---------------------------------------------------------------- advantages

    def _process_advantages(self, batch: ScoredBatch, output: dict) -> tuple[torch.Tensor, torch.Tensor]:
        verdicts = self.lean_reward.last_verdicts
        local_size = len(batch.completions)
        if verdicts is None or len(verdicts) != local_size:
            raise RuntimeError("the lean_proof reward did not verify this batch; it must be among the reward functions")
        self.lean_reward.last_verdicts = None
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
        outcome = torch.nan_to_num(batch.rewards_per_func[:, self._lean_index], nan=0.0).to(scores.device)
        process = self.args.process_advantage_coef * lean_process_advantages(
            scores, mask, outcome, batch.num_generations
        )
        local_process = process[batch.process_slice]
        self._log_lean_metrics(batch, all_status, all_num_tactics, all_first_error, outcome, all_rechecked)

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

    def _log_lean_metrics(self, batch, status, num_tactics, first_error, outcome, rechecked) -> None:
        metrics = self._metrics[batch.mode]
        metrics["lean/pass_rate"].append(outcome.mean().item())
        # The REPL's passes an independent checker saw (confirmed, or overturned into a failure): 0 while the
        # recheck is off, which the LeanServer says once at start.
        repl_passes = ((status == STATUSES.index("passed")) | rechecked).sum().item()
        metrics["lean/rechecked_fraction"].append(rechecked.sum().item() / repl_passes if repl_passes else 0.0)
        for index, name in enumerate(STATUSES):
            metrics[f"lean/status/{name}"].append((status == index).float().mean().item())
        metrics["lean/tactics_per_proof"].append(num_tactics.float().mean().item())
        failed_with_tactics = (status == STATUSES.index("failed")) & (num_tactics > 0)
        if failed_with_tactics.any():
            relative = first_error[failed_with_tactics].float() / num_tactics[failed_with_tactics].float()
            metrics["lean/first_error_relative"].append(relative.mean().item())
        grouped = outcome.view(-1, batch.num_generations)
        metrics["lean/frac_zero_std_outcome"].append((grouped == grouped[:, :1]).all(dim=1).float().mean().item())
        verify_seconds, waited_seconds = self.lean_reward.last_timing
        timing = torch.tensor(
            [[verify_seconds, waited_seconds, float(len(batch.completions))]], device=self.accelerator.device
        )
        timing = self.accelerator.gather(timing)
        slowest = timing[:, 0].max().item()
        metrics["lean/verify_seconds"].append(slowest)
        total_verify = timing[:, 0].sum().item()
        hidden = 1.0 - timing[:, 1].sum().item() / total_verify if total_verify > 0 else 1.0
        metrics["lean/verify_hidden_fraction"].append(min(1.0, max(0.0, hidden)))
        metrics["lean/proofs_per_second"].append(timing[:, 2].sum().item() / slowest if slowest > 0 else 0.0)
        new_failures = self.lean_reward.failures - self._lean_failures_seen
        self._lean_failures_seen = self.lean_reward.failures
        failures = self.accelerator.gather(torch.tensor([float(new_failures)], device=self.accelerator.device))
        metrics["lean/verification_failures"].append(failures.sum().item())
