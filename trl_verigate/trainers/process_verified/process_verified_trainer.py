"""Process-verified GRPO: a proof assistant's verdict as outcome reward and as tactic-level process credit.

Kim & Yun (ICLR 2026), for Lean; the same method runs on Coq. Each completion's proof is split into tactics
T_1..T_N by the prover's verifier (`lean_server`: the REPL's own AST spans; `coq`: Coq's sentences); g_i = 1
exactly when the proof passed. Tactic scores phi (`advantages.tactic_scores`), process advantages
A_proc[i, j] = coef * (phi[i, j] - mean_group(g)) (`advantages.tactic_process_advantages`), and token advantages
A[i, t] = A_out[i] + sum of A_proc[i, j] over the tactics assigned to token t (`advantages.tactic_advantages_to_tokens`;
by default the token at which each tactic begins), A_out being TRL's GRPO advantage.
"""

from __future__ import annotations

import torch
from trl.trainer.utils import get_config_model_id

from trl_verigate.advantages import tactic_advantages_to_tokens, tactic_process_advantages, tactic_scores
from trl_verigate.prover_pool.results import STATUSES
from trl_verigate.rewards.lean_proofs import completion_text
from trl_verigate.rewards.process import ProcessVerdict, ProofReward
from trl_verigate.steps import decode_with_offsets, span_token_ranges
from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch
from trl_verigate.trainers.process_verified.process_verified_config import ProcessVerifiedConfig
from trl_verigate.trainers.process_verified.provers import PROVERS
from trl_verigate.trainers.utils import (
    given_trainer_arguments,
    refuse_datasets_without_prompt,
    refuse_unpipelinable_trainer_arguments,
)


class ProcessVerifiedGRPOTrainer(ProcessGRPOTrainer):
    """GRPO with a proof assistant as outcome reward and process oracle (process-verified RL; Kim & Yun, ICLR 2026,
    for Lean; the same method on Coq), the prover chosen by the config's ``prover``. `LeanProcessGRPOTrainer` and
    `CoqProcessGRPOTrainer` are this trainer with the prover fixed (``config_class``).

    Takes every argument of `trl.GRPOTrainer` (``args`` a ``config_class``, here `ProcessVerifiedConfig`) plus

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
    checker saw; 0 with the recheck off), ``recheck_overturned`` (passes the checker refused, all processes: each
    a failure, reward 0), ``recheck_escalated`` (1 once an overturn made the recheck see every pass; Lean's
    `LeanServer`), ``frac_zero_std_outcome`` and ``verification_failures`` (timeouts,
    crashes, errors and unreachable servers in the batch, all processes).
    """

    _tag_names = ["trl", "grpo", "process-verified"]
    _name = "ProcessVerifiedGRPO"
    # The paper's arXiv id and exact title are not recorded here; the card names the method and venue only.
    _paper = {"title": "Process-verified reinforcement learning for Lean (Kim & Yun, ICLR 2026)", "id": None}

    config_class = ProcessVerifiedConfig

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: ProcessVerifiedConfig | None = None,
        *trainer_args,
        verifier=None,
        process_oracle=None,
        **trainer_kwargs,
    ):
        config_name = self.config_class.__name__
        if args is None:
            model_name = model if isinstance(model, str) else get_config_model_id(model.config)
            args = self.config_class(f"{model_name.split('/')[-1]}-{self._name}")
        elif not isinstance(args, self.config_class):
            raise TypeError(
                f"args must be a {config_name}, got {type(args).__name__}; build it with "
                f"{config_name}(**your_grpo_kwargs) so the prover fields have values."
            )
        refuse_datasets_without_prompt(given_trainer_arguments(trainer_args, trainer_kwargs))
        if args.pipelined_verification:
            refuse_unpipelinable_trainer_arguments("pipelined_verification", trainer_args, trainer_kwargs)
        self._owned_verifier = None
        if process_oracle is None:
            process_oracle = self._build_process_oracle(args, verifier)
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

    def _build_process_oracle(self, args: ProcessVerifiedConfig, verifier):
        """The prover's oracle over ``verifier``, started here; without one, over a pool built from ``args``, which
        this trainer owns and closes."""
        prover = PROVERS[args.prover]
        if verifier is None:
            verifier = prover.build_verifier(args)
            if hasattr(verifier, "start"):
                self._owned_verifier = verifier
        try:
            prover.start_checked(verifier)
        except RuntimeError:
            self.close_verifier()
            raise
        return prover.build_oracle(args, verifier)

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
        process = self.args.process_advantage_coef * tactic_process_advantages(
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
        # Overturned passes are failures (reward 0); the count, and whether the recheck now sees every pass.
        overturned = ((status == STATUSES.index("failed")) & rechecked).sum().item()
        metrics[f"{prefix}/recheck_overturned"].append(overturned)
        verifier_metrics = getattr(getattr(self.proof_reward.oracle, "verifier", None), "metrics", dict)()
        escalated = torch.tensor([float(verifier_metrics.get(f"{prefix}/recheck_escalated", 0.0))])
        metrics[f"{prefix}/recheck_escalated"].append(self.accelerator.gather(escalated.to(status.device)).max().item())
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
