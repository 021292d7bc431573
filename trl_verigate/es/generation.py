"""How ESTrainer has one member generate through TRL: its sampling seeded, its weights pushed into vLLM, its share.

Sampling (common random numbers): every member of iteration t samples with the seed `generation_seed(seed, t)`,
so members differ by their weights, not by their sampling noise. Where that seed has to go depends on the engine:

- HF `generate`: torch's generators (`torch.manual_seed`, CPU and CUDA).
- vLLM colocate: TRL sends each copy of a prompt as its own `n=1` request under one `SamplingParams`, and vLLM
  samples a request with a seed of its own from (that seed, position) whatever the batch. A request without one gets
  a seed drawn from an RNG when it is added, and a request preempted under KV-cache pressure is added again, with a
  fresh draw that shifts the seed of every later request: members' sampling noise would then depend on their
  completion lengths. So every request carries its own seed (`SeededRequests`), a function of the iteration's seed
  and the request's place in the batch (prompt index × copies + copy, the same for every member) and of nothing the
  engine does: preemption or re-queuing cannot move it. The member is deliberately not part of it: members of one
  iteration share their sampling noise. A seed in `generation_kwargs` would not do: it would give every copy of a
  prompt the same completion (ESConfig refuses it).
- vLLM server: the engine runs in another process, so the seed travels in the request
  (`generation_kwargs["seed"]`, one per member generation). TRL sends each prompt once with `n=num_generations`, and
  vLLM gives the copies seeds `seed + copy index` (`ParentRequest`), so copies differ and member i's copy c samples
  with member j's copy c's seed.

Weights: vLLM holds its own copy, so each member's weights are pushed into it (`VLLMGeneration.sync_weights`; TRL
itself only syncs when the step changes). With PEFT that sync merges the adapters into the base weights and unmerges
them, in the base dtype: in bf16 `(w + d) - d` is not `w`, so the base would drift member after member, differently
on every process. The weights the adapters merge into are therefore copied once, exactly, and written back after every
sync (`trl_verigate.peft_sync`, which the GRPO trainers share).

Tensor parallelism (vLLM colocate, `vllm_tensor_parallel_size` k > 1): the k processes of a TP group load one engine,
each its own shard from its own model, so they must hold the same member. A group evaluates one member per slot, each
process generates 1/k of the member's completions (TRL gathers the group's prompts into one engine call and hands
each process its own slice back), and the member's reward is the mean over the group's processes.
"""

from __future__ import annotations

import hashlib

import torch

from trl_verigate.peft_sync import keep_base_exact_across_syncs

# vLLM keeps a request's seed in an int64 and gives the copies of an n > 1 request seed + copy index: 62 bits leave
# room for both.
REQUEST_SEED_BITS = 62


def generation_seed(base_seed: int, iteration: int) -> int:
    """The sampling seed of iteration t, shared by all its members (common random numbers); 31 bits."""
    digest = hashlib.blake2b(f"es-generation:{base_seed}:{iteration}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def request_seeds(iteration_seed: int, count: int) -> list[int]:
    """The sampling seeds of the `count` requests of one member generation in vLLM colocate mode: request j gets the
    first 62 bits of BLAKE2b-64("es-request:{iteration_seed}:{j}"), the same for every member."""
    seeds = []
    for index in range(count):
        digest = hashlib.blake2b(f"es-request:{iteration_seed}:{index}".encode(), digest_size=8).digest()
        seeds.append(int.from_bytes(digest, "little") & ((1 << REQUEST_SEED_BITS) - 1))
    return seeds


class SeededRequests:
    """Stands in for a colocate engine's `LLM.generate`: every request of a call gets its own seed,
    `request_seeds(iteration_seed, number of prompts)[j]` for the call's j-th prompt, on a clone of its
    `SamplingParams` (TRL passes one for all). In a TP group the prompts are the group's, gathered in process order,
    so every process of the group adds the same seeded requests."""

    def __init__(self, generate):
        self.generate = generate
        self.iteration_seed: int | None = None

    def __call__(self, prompts, sampling_params=None, **kwargs):
        if self.iteration_seed is None:
            raise RuntimeError("SeededRequests: no iteration seed set before generation (MemberGeneration.seed)")
        prompts = list(prompts)
        if not isinstance(sampling_params, (list, tuple)):
            sampling_params = [sampling_params] * len(prompts)
        seeded = []
        for params, seed in zip(sampling_params, request_seeds(self.iteration_seed, len(prompts)), strict=True):
            params = params.clone()
            params.seed = seed
            seeded.append(params)
        return self.generate(prompts, sampling_params=seeded, **kwargs)


def generation_group_size(args) -> int:
    """Processes that generate together for one member: the vLLM TP size in colocate mode, else 1."""
    if args.use_vllm and args.vllm_mode == "colocate":
        return args.vllm_tensor_parallel_size
    return 1


def member_slots(population_size: int, num_groups: int, group_index: int) -> tuple[int, list[int]]:
    """(slots per generation group, this group's member indices): contiguous blocks of ceil(P / groups) members.

    A generation group is one process, or the k processes of a vLLM TP group. When P is not a multiple of the group
    count the last groups get fewer members (possibly none) and fill the remaining slots with padding generations,
    because every process must call TRL's generation (which all-gathers lengths for its metrics) the same number of
    times; the wall time is that of ceil(P / groups) members anyway.
    """
    slots = -(-population_size // num_groups)
    first = group_index * slots
    return slots, list(range(min(first, population_size), min(first + slots, population_size)))


def mean_over_groups(gathered: torch.Tensor, num_processes: int, group_size: int) -> torch.Tensor:
    """Rows gathered from every process → one row per (generation group, slot), averaged over the group.

    `gathered` has shape (processes · slots, columns), process-major. Processes g·k … g·k + k − 1 form group g and
    hold equal shares of the same members' completions, so a member's value is the mean of its k rows (the mean of
    its completions when the columns are per-process means). Returns shape (groups · slots, columns); group g's slot
    j is row g · slots + j.
    """
    if group_size == 1:
        return gathered
    slots, columns = gathered.shape[0] // num_processes, gathered.shape[1]
    return gathered.view(num_processes // group_size, group_size, slots, columns).mean(dim=1).reshape(-1, columns)


class MemberGeneration:
    """Seeds a member's sampling and pushes its weights into TRL's vLLM engine (see the module docstring)."""

    def __init__(self, trainer):
        self.vllm = trainer.vllm_generation if trainer.use_vllm else None
        self.server = self.vllm is not None and trainer.vllm_mode == "server"
        self.base_generation_kwargs = dict(self.vllm.generation_kwargs) if self.vllm is not None else {}
        self.seeded_requests = None
        if self.vllm is not None and not self.server:
            self.seeded_requests = SeededRequests(self.vllm.llm.generate)
            self.vllm.llm.generate = self.seeded_requests
        # With PEFT each sync merges the adapters into the frozen base and unmerges them; peft_sync restores it.
        keep_base_exact_across_syncs(trainer)

    def seed(self, seed: int) -> None:
        """Every source of sampling noise of the next generation starts from `seed`."""
        torch.manual_seed(seed)
        if self.server:
            self.vllm.generation_kwargs = {**self.base_generation_kwargs, "seed": seed}
        elif self.seeded_requests is not None:
            self.seeded_requests.iteration_seed = seed

    @torch.no_grad()
    def sync(self) -> None:
        """Push the model's current weights into vLLM; with PEFT, put the base weights back bit for bit after."""
        if self.vllm is None:
            return
        self.vllm.sync_weights()
