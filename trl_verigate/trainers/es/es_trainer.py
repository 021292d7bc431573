"""ESTrainer: evolution strategies on TRL's generation path; the whole training state is a (seeds, rewards) history.

Iteration t (= `state.global_step`):

1. P members (s_i, sign_i) = `population_seeds(args.seed, t, P, antithetic)`.
2. Every member sees the same `prompts_per_iteration` prompts × `num_generations` completions (one greedy completion
   per prompt with `greedy`). Member i generates with weights θ + σ·sign_i·ε(s_i) (written from the fp32 master, see
   `trl_verigate.es.update`) and TRL's own generation (`_generate`: HF `generate`, or vLLM colocate/server after a
   per-member weight sync). Sampling is seeded by (args.seed, t), the same for every member (common random numbers),
   so members differ by their weights only; `trl_verigate.es.generation` says how the seed reaches each engine.
3. r_i = mean over its completions of TRL's weighted reward sum. Async reward functions keep verifying member i while
   member i+1 generates; the update waits for the last ones.
4. F = shape_fitness(r, fitness_shaping); θ ← θ·(1 − α·wd); θ ← θ + α·(1/P)·Σ_i F_i·sign_i·ε(s_i), α = the
   scheduler's learning rate at this step (constant by default); all F_i = 0 → no update.

With several processes, members are split in contiguous blocks of ceil(P / groups) over generation groups (one
process each, or the k processes of a vLLM tensor-parallel group, see `member_slots`); only the rewards (floats) are
all-gathered and every process applies the same update to its own master, so the weights stay bitwise identical
without any weight broadcast. No backward pass, no optimizer state: the Trainer's optimizer is a placeholder over one
empty tensor that carries the learning-rate schedule.

vLLM server mode runs with one training process only: TRL pushes weights to the server from the main process and
gathers every process's prompts into one server call, so with several processes all of them would be scored with
the main process's member. ESConfig refuses it (use colocate).
"""

from __future__ import annotations

import os
import re
import time

import torch
from torch.utils.data import DataLoader
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from trl_verigate.es.generation import (
    MemberGeneration,
    generation_group_size,
    generation_seed,
    mean_over_groups,
    member_slots,
)
from trl_verigate.es.noise import NOISE_VERSION
from trl_verigate.es.population import population_seeds, shape_fitness
from trl_verigate.es.rewards import member_reward, start_member_rewards
from trl_verigate.es.state import (
    STATE_FILENAME,
    STATE_FORMAT,
    STATE_FORMAT_VERSION,
    history_entry,
    parameters_sha256,
    read_state,
    replay_history,
    write_state,
)
from trl_verigate.es.update import es_update, make_master, perturb, write_master
from trl_verigate.trainers.es.es_config import ESConfig
from trl_verigate.trainers.utils import refuse_datasets_without_prompt


class ESTrainer(GRPOTrainer):
    """Evolution strategies with TRL's generation, rewards, logging and checkpoints (see the module docstring).

    Takes every `GRPOTrainer` argument; `args` must be an `ESConfig`. The perturbed parameters are those with
    `requires_grad` whose name matches `args.es_param_regex`. State: `self.es_history`, one dict per iteration
    (`trl_verigate.es.state` documents the format), written as es_state.json into every checkpoint and by
    `save_model`.
    """

    def __init__(self, model, reward_funcs, args: ESConfig | None = None, **kwargs):
        if not isinstance(args, ESConfig):
            raise TypeError(f"ESTrainer needs args=ESConfig(...), got {type(args).__name__}")
        refuse_datasets_without_prompt(kwargs)
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, **kwargs)
        for func, name in zip(self.reward_funcs, self.reward_func_names, strict=True):
            if isinstance(func, torch.nn.Module):
                raise TypeError(
                    f"ESTrainer does not support reward models ('{name}' is an nn.Module); pass reward functions "
                    "(prompts, completions, **kwargs) -> list[float]"
                )
        self.es_param_names = self._select_parameter_names()
        params = self._es_parameters()
        self._es_master = make_master(params)
        self.es_history: list[dict] = []
        unwrapped = self.accelerator.unwrap_model(self.model)
        config = getattr(unwrapped, "config", None)
        self._es_base_model = {
            "name_or_path": model if isinstance(model, str) else getattr(config, "_name_or_path", None),
            "revision": (args.model_init_kwargs or {}).get("revision"),
            "dtype": str(next(iter(params.values())).dtype).removeprefix("torch."),
            "parameters_sha256": parameters_sha256(params),
            "peft": hasattr(unwrapped, "peft_config"),
        }
        if args.greedy:
            self._use_greedy_decoding()
        self._member_generation = MemberGeneration(self)

    def _use_greedy_decoding(self) -> None:
        """One completion per prompt (the sampler repeats none), decoded greedily by whichever engine generates."""
        self.num_generations = 1
        self.generation_config.do_sample = False
        for name in ("temperature", "top_p", "top_k", "min_p"):  # sampling-only settings, unused when greedy
            setattr(self.generation_config, name, None)
        if self.use_vllm:
            self.vllm_generation.temperature = 0.0

    # ----- parameters and state -----

    def _select_parameter_names(self) -> list[str]:
        pattern = re.compile(self.args.es_param_regex) if self.args.es_param_regex else None
        names = [
            name
            for name, param in self.accelerator.unwrap_model(self.model).named_parameters()
            if param.requires_grad and (pattern is None or pattern.search(name))
        ]
        if not names:
            raise ValueError(
                f"No parameter to perturb: none has requires_grad and matches es_param_regex={self.args.es_param_regex!r}"
            )
        return names

    def _es_parameters(self) -> dict[str, torch.Tensor]:
        """The live parameters to perturb, looked up by name each time (a device move may replace the tensors)."""
        named = dict(self.accelerator.unwrap_model(self.model).named_parameters())
        return {name: named[name] for name in self.es_param_names}

    def es_state(self) -> dict:
        """The es_state.json content for the current history (`trl_verigate.es.state`)."""
        args = self.args
        return {
            "format": STATE_FORMAT,
            "format_version": STATE_FORMAT_VERSION,
            "noise_version": NOISE_VERSION,
            "base_model": self._es_base_model,
            "sigma": args.sigma,
            "learning_rate": args.learning_rate,
            "weight_decay": args.weight_decay,
            "fitness_shaping": args.fitness_shaping,
            "population_size": args.population_size,
            "antithetic": args.antithetic,
            "seed": args.seed,
            "parameters": self.es_param_names,
            "history": self.es_history,
        }

    def _write_es_state(self, directory: str) -> None:
        if self.args.should_save:
            os.makedirs(directory, exist_ok=True)
            write_state(self.es_state(), os.path.join(directory, STATE_FILENAME))

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        folder = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self._write_es_state(os.path.join(self._get_output_dir(trial=trial), folder))

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        super().save_model(output_dir, _internal_call)
        if not _internal_call:
            self._write_es_state(output_dir or self.args.output_dir)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        """Load TRL's weights, then rebuild the fp32 master from the base by replaying the checkpoint's history.

        The replayed master, rounded to the model dtype, must equal the checkpoint's saved weights; anything else
        means the history and the weights disagree, and resuming is refused.
        """
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = os.path.join(resume_from_checkpoint, STATE_FILENAME)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{resume_from_checkpoint} has no {STATE_FILENAME}; it was not written by ESTrainer"
            )
        if self.es_history:
            raise RuntimeError("resume_from_checkpoint needs a fresh ESTrainer (this one has already trained)")
        state = read_state(path)
        current = self.es_state()
        for key in ("sigma", "weight_decay", "fitness_shaping", "population_size", "antithetic", "seed", "parameters"):
            if state[key] != current[key]:
                raise ValueError(
                    f"{path} has {key}={state[key]!r} but this run has {key}={current[key]!r}; resume with the "
                    "checkpoint's settings"
                )
        if state["base_model"]["parameters_sha256"] != self._es_base_model["parameters_sha256"]:
            raise ValueError(f"{path} was trained from other base weights than this trainer's model (hash mismatch)")
        replay_history(self._es_master, state["history"], self.args.weight_decay)
        params = self._es_parameters()
        for name, param in params.items():
            if not torch.equal(param.detach(), self._es_master[name].to(param.dtype)):
                raise ValueError(f"{resume_from_checkpoint}: weight {name} differs from the replay of {STATE_FILENAME}")
        write_master(params, self._es_master)
        self.es_history = list(state["history"])

    # ----- data: every process and every member sees the same prompts -----

    def get_train_dataloader(self):
        dataset = self.train_dataset
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise ValueError("ESTrainer needs a map-style train_dataset (every process draws the same prompts)")
        dataset = self._remove_unused_columns(dataset, description="Training")
        sampler = RepeatSampler(
            data_source=dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.prompts_per_iteration,
            repeat_count=1,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )
        # Not passed through accelerator.prepare: that would give each process different prompts.
        return DataLoader(
            dataset,
            batch_size=self.args.prompts_per_iteration * self.num_generations,
            sampler=sampler,
            collate_fn=self.data_collator,
            drop_last=True,
        )

    def create_optimizer(self, model=None):
        """A placeholder optimizer over one empty tensor: it holds the learning-rate schedule, never any state."""
        if self.optimizer is None:
            self._es_schedule_holder = torch.nn.Parameter(torch.zeros(0))
            self.optimizer = torch.optim.SGD([self._es_schedule_holder], lr=self.args.learning_rate)
        return self.optimizer

    # ----- the ES iteration -----

    def training_step(self, model, inputs, num_items_in_batch=None):
        args = self.args
        model.train()  # as Trainer.training_step does: TRL's generation logs under "train" in training mode
        iteration = self.state.global_step
        if len(self.es_history) != iteration:
            raise RuntimeError(
                f"ES history has {len(self.es_history)} iterations but the trainer is at step {iteration}"
            )
        members = population_seeds(args.seed, iteration, args.population_size, args.antithetic)
        group_size = generation_group_size(args)
        processes, process = self.accelerator.num_processes, self.accelerator.process_index
        slots, mine = member_slots(args.population_size, processes // group_size, process // group_size)
        # A TP group's processes share each member's completions: this process generates its slice of them.
        share = len(inputs) // group_size
        inputs = inputs[process % group_size * share : (process % group_size + 1) * share]
        params = self._es_parameters()
        prompts = [example["prompt"] for example in inputs]
        timings = dict.fromkeys(("perturb", "sync", "generate", "restore", "update", "reward_wait"), 0.0)
        started = time.perf_counter()
        pending = []
        for slot in range(slots):
            clock = time.perf_counter()
            if slot < len(mine):
                seed, sign = members[mine[slot]]
                perturb(params, self._es_master, seed, sign, args.sigma)
            else:  # a padding slot: generate at θ and discard, so TRL's generation collectives stay in lockstep
                write_master(params, self._es_master)
            timings["perturb"] += time.perf_counter() - clock
            clock = time.perf_counter()
            self._member_generation.sync()
            self._last_loaded_step = self.state.global_step  # so that TRL's own per-step sync does not run again
            timings["sync"] += time.perf_counter() - clock
            clock = time.perf_counter()
            self._member_generation.seed(generation_seed(args.seed, iteration))
            _, completion_ids, _, completions, _, _, _, _ = self._generate(prompts)
            timings["generate"] += time.perf_counter() - clock
            if slot < len(mine):
                pending.append(start_member_rewards(self, inputs, prompts, completions, completion_ids))
        clock = time.perf_counter()
        write_master(params, self._es_master)  # restore θ
        timings["restore"] = time.perf_counter() - clock
        clock = time.perf_counter()
        per_member = [rewards.result() for rewards in pending]
        timings["reward_wait"] = time.perf_counter() - clock

        columns = 1 + len(self.reward_funcs)
        local = torch.full((slots, columns), float("nan"), dtype=torch.float64)
        for row, rewards_per_func in enumerate(per_member):
            local[row, 0] = member_reward(rewards_per_func, self.reward_weights)
            local[row, 1:] = rewards_per_func.double().nanmean(dim=0)
        # Group g's slot j is member g·slots + j, so the first P rows are the members in order.
        gathered = self.accelerator.gather(local.to(self.accelerator.device)).cpu()
        gathered = mean_over_groups(gathered, processes, group_size)[: args.population_size]
        rewards = gathered[:, 0]
        fitness = shape_fitness(rewards, args.fitness_shaping)
        learning_rate = self.optimizer.param_groups[0]["lr"]
        clock = time.perf_counter()
        update_norm = es_update(self._es_master, members, fitness.tolist(), learning_rate, args.weight_decay)
        write_master(params, self._es_master)
        timings["update"] = time.perf_counter() - clock
        self.es_history.append(
            history_entry(iteration, members, rewards.tolist(), fitness.tolist(), learning_rate, update_norm)
        )
        self._log_es_metrics(gathered, update_norm, timings, len(mine) / (time.perf_counter() - started))
        return torch.tensor(-float(rewards.mean()), device=self.accelerator.device)

    def _log_es_metrics(self, gathered, update_norm, timings, members_per_second):
        metrics = self._metrics["train"]
        rewards = gathered[:, 0]
        metrics["es/reward_mean"].append(float(rewards.mean()))
        metrics["es/reward_std"].append(float(rewards.std(unbiased=False)))
        metrics["es/reward_max"].append(float(rewards.max()))
        metrics["es/best_member"].append(int(torch.argmax(rewards)))
        metrics["es/update_norm"].append(update_norm)
        for name, seconds in timings.items():
            metrics[f"es/seconds_{name}"].append(seconds)
        metrics["es/members_per_second"].append(members_per_second)
        # TRL's reward metrics, over every completion of every member.
        metrics["reward"].append(float(rewards.mean()))
        for column, name in enumerate(self.reward_func_names, start=1):
            metrics[f"rewards/{name}/mean"].append(float(gathered[:, column].nanmean()))
