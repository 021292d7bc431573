"""Stand-ins for vLLM (CUDA only, not installable here) that check what vLLM checks, so TRL's real `VLLMGeneration`
and `VLLMClient` code and trl-verigate's evaluate backend run against them unchanged.

What is checked, and where vLLM checks it (vLLM 0.31):

- `SamplingParams`: only its field names (a msgspec Struct: an unknown keyword is a TypeError) and its own validation
  (`_verify_args`, `_verify_greedy_sampling`): n >= 1, temperature in [0, 2], top_p in (0, 1], top_k >= -1, min_p in
  [0, 1], max_tokens >= 1, logprobs >= 0 or -1, and n = 1 when greedy (temperature < 1e-5).
- `LLM(...)`: its keyword names (`LLM.__init__`'s own and `EngineArgs`' fields it forwards; EngineArgs is a dataclass,
  so an unknown one is a TypeError); `generate` takes one SamplingParams or one per prompt (else ValueError).
- Engine weights: `llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights([(name, tensor)])`,
  the path TRL's colocate sync uses; an unknown name is a KeyError. With `tensor_parallel_size` k > 1 (TRL's
  `external_launcher`), each process keeps only its shard of every tensor, the engine runs on the shards of the k
  processes of its TP group together, and those processes must add identical requests.
- Sampling as model runner V2 does it: a request with a seed samples from (seed, position) whatever the batch; a
  request without one gets a seed drawn from numpy's global RNG when it is added (colocate: this process; a server:
  its own process, so a trainer's numpy state cannot reach it). `n > 1` fans out into child requests with seeds
  seed + i (`ParentRequest`). Greedy takes the argmax. A seed must be a Python int within int64: V2 keeps it in an
  int64 array (`SamplingStates.seeds`; a larger int overflows) and the engine core's msgspec serialization cannot
  encode a numpy integer (TypeError).
- KV-cache pressure (`LLM.preempt`): a preempted request is removed from the model runner and added again once the
  next request has been added, so an unseeded one draws a second seed, and every later unseeded request's draw moves
  by one (`SamplingStates.add_request` on the re-added request).
- Server: `FakeVLLMClient` is TRL's real `VLLMClient` with the HTTP layer replaced by `VLLMServer`, which answers
  `/v1/completions` from the request body TRL's client builds (unknown fields refused) and records which process
  pushed weights (`update_named_params`, TRL's server sync).

Token sampling itself (temperature, top-k, top-p, min-p, repetition penalty, processed logprobs) follows vLLM's
definitions on the tiny HF model, one request at a time.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
import types

import numpy as np
import torch

SAMPLING_EPS = 1e-5
MAX_TEMP = 1e-2
NP_INT64_MIN, NP_INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max

# vllm.sampling_params.SamplingParams fields (msgspec Struct) with their defaults.
SAMPLING_FIELDS = {
    "n": 1,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "seed": None,
    "stop": None,
    "stop_token_ids": None,
    "ignore_eos": False,
    "max_tokens": 16,
    "min_tokens": 0,
    "logprobs": None,
    "prompt_logprobs": None,
    "logprob_token_ids": None,
    "flat_logprobs": False,
    "detokenize": True,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "include_stop_str_in_output": False,
    "output_kind": 0,
    "stream_interval": None,
    "skip_clone": False,
    "structured_outputs": None,
    "logit_bias": None,
    "allowed_token_ids": None,
    "extra_args": None,
    "bad_words": None,
    "skip_reading_prefix_cache": None,
    "thinking_token_budget": None,
    "repetition_detection": None,
}

# vllm.LLM.__init__'s keywords, and the EngineArgs fields it forwards that TRL and trl-verigate pass.
LLM_ARGUMENTS = frozenset(
    {
        "runner", "convert", "tokenizer", "tokenizer_mode", "skip_tokenizer_init", "trust_remote_code",
        "allowed_local_media_path", "allowed_media_domains", "tensor_parallel_size", "dtype", "quantization",
        "revision", "tokenizer_revision", "seed", "gpu_memory_utilization", "swap_space", "cpu_offload_gb",
        "enforce_eager", "disable_custom_all_reduce", "hf_token", "hf_overrides", "mm_processor_kwargs",
        "pooler_config", "compilation_config", "logits_processors", "kv_cache_memory_bytes",
        # EngineArgs
        "max_model_len", "max_num_seqs", "max_num_batched_tokens", "enable_sleep_mode", "model_impl",
        "distributed_executor_backend", "logprobs_mode", "generation_config", "enable_prefix_caching",
        "data_parallel_size", "pipeline_parallel_size", "max_logprobs", "kv_cache_dtype", "disable_log_stats",
        "enable_lora", "max_lora_rank", "worker_extension_cls", "load_format",
    }
)  # fmt: skip


class VLLMValidationError(ValueError):
    """vllm.exceptions.VLLMValidationError (a ValueError)."""


class SamplingParams:
    """vllm.SamplingParams: its field names and its own validation (see the module docstring)."""

    def __init__(self, **kwargs):
        for name in kwargs:
            if name not in SAMPLING_FIELDS:
                raise TypeError(f"Unexpected keyword argument '{name}'")
        for name, default in SAMPLING_FIELDS.items():
            setattr(self, name, kwargs.get(name, default))
        if 0 < self.temperature < MAX_TEMP:
            self.temperature = MAX_TEMP
        if self.seed == -1:
            self.seed = None
        if self.logprobs is True:
            self.logprobs = 1
        self._verify_args()
        if self.temperature < SAMPLING_EPS:
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0
            if self.n > 1:
                raise VLLMValidationError(f"n must be 1 when using greedy sampling, got {self.n}.")

    def _verify_args(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise VLLMValidationError(f"n must be at least 1, got {self.n}.")
        if not -2.0 <= self.presence_penalty <= 2.0 or not -2.0 <= self.frequency_penalty <= 2.0:
            raise VLLMValidationError("presence_penalty and frequency_penalty must be in [-2, 2].")
        if not math.isfinite(self.repetition_penalty) or self.repetition_penalty <= 0.0:
            raise VLLMValidationError(f"repetition_penalty must be greater than zero, got {self.repetition_penalty}.")
        if not math.isfinite(self.temperature) or not 0.0 <= self.temperature <= 2.0:
            raise VLLMValidationError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise VLLMValidationError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise VLLMValidationError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if not 0.0 <= self.min_p <= 1.0:
            raise VLLMValidationError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise VLLMValidationError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.logprobs is not None and self.logprobs != -1 and self.logprobs < 0:
            raise VLLMValidationError(f"logprobs must be non-negative or -1, got {self.logprobs}.")

    def clone(self) -> SamplingParams:
        """A deep copy (vLLM's `SamplingParams.clone`)."""
        return copy.deepcopy(self)

    def child_seeds(self) -> list[int | None]:
        """The seeds of the n child requests (`ParentRequest`): seed + i, or None (drawn when added) when unseeded."""
        if self.seed is None:
            return [None] * self.n
        return [self.seed + index for index in range(self.n)]


def checked_seed(seed: int) -> int:
    """`seed` as the engine stores it, or the error vLLM raises for it (see the module docstring)."""
    if type(seed) is not int:
        raise TypeError(f"Encoding objects of type {type(seed).__name__} is unsupported")
    if not NP_INT64_MIN <= seed <= NP_INT64_MAX:
        raise OverflowError(f"Python int too large to convert to C long: seed {seed}")
    return seed


@dataclasses.dataclass
class StructuredOutputsParams:
    regex: str | None = None
    json: object = None
    choice: list | None = None
    grammar: str | None = None


@dataclasses.dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclasses.dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None = None
    finish_reason: str | None = None


@dataclasses.dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


def numpy_global_seed() -> int:
    """Model runner V2's seed for a request without one (`SamplingStates.add_request`)."""
    return int(np.random.randint(NP_INT64_MIN, NP_INT64_MAX))


def processed_logits(logits: torch.Tensor, history: list[int], params: SamplingParams) -> torch.Tensor:
    """The logits vLLM samples from: repetition penalty, then temperature, top-k, top-p and min-p (-inf outside)."""
    logits = logits.float().clone()
    if params.repetition_penalty != 1.0 and history:
        seen = torch.tensor(sorted(set(history)))
        values = logits[seen]
        logits[seen] = torch.where(values > 0, values / params.repetition_penalty, values * params.repetition_penalty)
    if params.temperature < SAMPLING_EPS:
        return logits
    logits = logits / params.temperature
    if params.top_k > 0:
        threshold = torch.topk(logits, min(params.top_k, logits.numel())).values[-1]
        logits[logits < threshold] = -math.inf
    if params.top_p < 1.0:
        ordered, order = torch.sort(logits, descending=True)
        probabilities = ordered.softmax(-1)
        outside = probabilities.cumsum(-1) - probabilities > params.top_p
        logits[order[outside]] = -math.inf
    if params.min_p > 0.0:
        probabilities = logits.softmax(-1)
        logits[probabilities < params.min_p * probabilities.max()] = -math.inf
    return logits


class Engine:
    """One vLLM engine's weights (a HF model of the checkpoint) and its sampler; also the `model` TRL loads into.

    With a TP group (`tp_group`, k processes), `load_weights` keeps this process's shard (a k-th of its elements) of
    each tensor, and every generation runs on the group's shards put together (`assembled`, recorded per generation).
    """

    def __init__(self, model_path: str, tp_group=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model = AutoModelForCausalLM.from_pretrained(model_path).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.params = dict(self.model.named_parameters())
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = {self.tokenizer.eos_token_id} | set(eos if isinstance(eos, list) else [eos] if eos else [])
        self.tp_group = tp_group
        self.shards: dict[str, torch.Tensor] = {}
        self.assembled: list[dict[str, torch.Tensor]] = []
        self.loads = 0

    def named_parameters(self):
        """The engine's weights by name (vLLM's model is an nn.Module; these are the HF names, which vLLM keeps for
        unfused layers such as mlp.down_proj)."""
        return iter(self.params.items())

    def load_weights(self, weights) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            if name not in self.params:
                raise KeyError(name)
            if self.tp_group is None:
                with torch.no_grad():
                    self.params[name].copy_(tensor)
            else:
                size, rank = torch.distributed.get_world_size(self.tp_group), torch.distributed.get_rank(self.tp_group)
                self.shards[name] = tensor.detach().flatten().tensor_split(size)[rank].clone()
            loaded.add(name)
        self.loads += 1
        return loaded

    def assemble_shards(self) -> None:
        """Every process of the TP group contributes its shards; the model runs on the whole (a mix if they
        loaded from different weights)."""
        if self.tp_group is None:
            return
        pieces = [None] * torch.distributed.get_world_size(self.tp_group)
        torch.distributed.all_gather_object(pieces, self.shards, group=self.tp_group)
        whole = {}
        for name, param in self.params.items():
            whole[name] = torch.cat([shards[name] for shards in pieces]).view(param.shape)
            with torch.no_grad():
                param.copy_(whole[name])
        self.assembled.append(whole)

    @torch.no_grad()
    def complete(self, prompt_ids: list[int], params: SamplingParams, seed: int) -> CompletionOutput:
        """One request: tokens sampled from (seed, position) through a generator of its own, as V2 samples."""
        generator = torch.Generator().manual_seed(seed & 0xFFFFFFFFFFFFFFFF)
        tokens, logprobs, past = [], [], None
        inputs = torch.tensor([list(prompt_ids)])
        for _ in range(params.max_tokens or 16):
            output = self.model(input_ids=inputs, past_key_values=past, use_cache=True)
            past = output.past_key_values
            logits = processed_logits(output.logits[0, -1], list(prompt_ids) + tokens, params)
            if params.temperature < SAMPLING_EPS:
                token = int(torch.argmax(logits))
            else:
                token = int(torch.multinomial(logits.softmax(-1), 1, generator=generator))
            logprobs.append({token: Logprob(float(logits.log_softmax(-1)[token]), rank=1)})
            tokens.append(token)
            if token in self.eos_ids and not params.ignore_eos:
                break
            inputs = torch.tensor([[token]])
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return CompletionOutput(0, text, tokens, logprobs if params.logprobs is not None else None, "stop")


class LLM:
    """vllm.LLM (offline engine, as TRL's colocate mode and `trl-verigate evaluate --backend vllm` build it)."""

    instances: list = []

    def __init__(self, model: str, **kwargs):
        unknown = sorted(set(kwargs) - LLM_ARGUMENTS)
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got an unexpected keyword argument '{unknown[0]}'")
        self.model_name = model
        self.kwargs = kwargs
        self.tensor_parallel_size = kwargs.get("tensor_parallel_size", 1)
        tp_group = None
        # Under external_launcher (TRL's colocate) the caller's processes are the TP ranks; otherwise vLLM starts
        # its own workers and the caller sees one whole engine.
        if self.tensor_parallel_size > 1 and kwargs.get("distributed_executor_backend") == "external_launcher":
            world = torch.distributed.get_world_size()
            tp_group, _ = torch.distributed.new_subgroups_by_enumeration(
                [
                    list(range(start, start + self.tensor_parallel_size))
                    for start in range(0, world, self.tensor_parallel_size)
                ]
            )
        self.engine = self._make_engine(model, tp_group)
        runner = types.SimpleNamespace(model=self.engine)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)),
            model_config=types.SimpleNamespace(max_model_len=kwargs.get("max_model_len") or 2048),
        )
        self.requests: list[tuple[list[int], int]] = []  # (prompt ids, seed) of every child request, in order
        # KV-cache pressure: generate call number (0-based) -> positions of the child requests preempted once in it.
        self.preempt: dict[int, set[int]] = {}
        self.generate_calls = 0
        self.sleeping = False
        LLM.instances.append(self)

    def _make_engine(self, model: str, tp_group):
        return Engine(model, tp_group)

    def get_tokenizer(self):
        return self.engine.tokenizer

    def draw_seed(self) -> int:
        return numpy_global_seed()

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None):
        if self.sleeping:
            raise RuntimeError("generate() on a sleeping engine (call wake_up first)")
        prompts = list(prompts)
        if sampling_params is None:
            sampling_params = SamplingParams()
        if isinstance(sampling_params, SamplingParams):
            sampling_params = [sampling_params] * len(prompts)
        elif len(sampling_params) != len(prompts):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        ids = [prompt["prompt_token_ids"] if isinstance(prompt, dict) else self._tokenize(prompt) for prompt in prompts]
        requested = [seed for params in sampling_params for seed in params.child_seeds()]
        added = iter(self._add_requests(requested, self.preempt.get(self.generate_calls, set())))
        self.generate_calls += 1
        seeds = [[next(added) for _ in range(params.n)] for params in sampling_params]
        self._check_identical_requests_in_tp_group(ids, seeds)
        self.requests.extend((list(p), s) for p, child_seeds in zip(ids, seeds, strict=True) for s in child_seeds)
        self.engine_prepare()
        results = []
        for prompt_ids, params, child_seeds in zip(ids, sampling_params, seeds, strict=True):
            outputs = [self._complete(prompt_ids, params, seed) for seed in child_seeds]
            for index, output in enumerate(outputs):
                output.index = index
            results.append(RequestOutput(list(prompt_ids), outputs))
        return results

    def _add_requests(self, requested: list[int | None], preempted: set[int]) -> list[int]:
        """The seed each child request samples with: its own, or one drawn when it is added (a preempted request is
        added again after the next one, and samples with the seed of its last add)."""
        seeds: list[int] = [0] * len(requested)

        def add(position: int) -> None:
            seed = requested[position]
            seeds[position] = checked_seed(seed) if seed is not None else self.draw_seed()

        waiting: list[int] = []
        for position in range(len(requested)):
            add(position)
            for resumed in waiting:
                add(resumed)
            waiting = [position] if position in preempted else []
        for resumed in waiting:
            add(resumed)
        return seeds

    def engine_prepare(self) -> None:
        self.engine.assemble_shards()

    def _complete(self, prompt_ids, params, seed) -> CompletionOutput:
        return self.engine.complete(prompt_ids, params, seed)

    def _tokenize(self, text: str) -> list[int]:
        return list(self.get_tokenizer()(text)["input_ids"])

    def _check_identical_requests_in_tp_group(self, ids, seeds) -> None:
        group = getattr(self.engine, "tp_group", None)
        if group is None:
            return
        gathered = [None] * torch.distributed.get_world_size(group)
        torch.distributed.all_gather_object(gathered, (ids, seeds), group=group)
        if any(other != gathered[0] for other in gathered):
            raise RuntimeError("the processes of a TP group added different requests to their shared engine")

    def reset_prefix_cache(self) -> bool:
        return True

    def sleep(self, level: int = 1) -> None:
        self.sleeping = True

    def wake_up(self, tags=None) -> None:
        self.sleeping = False


class VLLMServer:
    """A `vllm serve` process: its engine, its own RNG for unseeded requests, and what TRL's client sent it."""

    REQUEST_FIELDS = frozenset({"model", "prompt", "return_token_ids", "return_tokens_as_token_ids", "echo"})

    def __init__(self, model_path: str, rng_seed: int = 1234):
        self.model_id = model_path
        self.engine = Engine(model_path)
        self.rng = np.random.RandomState(rng_seed)
        self.pushes: list[int] = []  # the rank of the process of each weight push
        self.requests: list[dict] = []

    def draw_seed(self) -> int:
        return int(self.rng.randint(NP_INT64_MIN, NP_INT64_MAX))

    def completions(self, body: dict) -> dict:
        unknown = sorted(set(body) - self.REQUEST_FIELDS - set(SAMPLING_FIELDS))
        if unknown:
            raise RuntimeError(f"Request failed: 400, unknown fields {unknown}")
        if body["model"] != self.model_id:
            raise RuntimeError(f"Request failed: 404, the model `{body['model']}` does not exist")
        self.requests.append(body)
        params = SamplingParams(**{name: value for name, value in body.items() if name in SAMPLING_FIELDS})
        choices = []
        for prompt_index, prompt_ids in enumerate(body["prompt"]):
            child_seeds = [self.draw_seed() if seed is None else checked_seed(seed) for seed in params.child_seeds()]
            for child, seed in enumerate(child_seeds):
                output = self.engine.complete(prompt_ids, params, seed)
                logprobs = None
                if output.logprobs is not None:
                    tokens = [f"token_id:{token}" for token in output.token_ids]
                    values = [next(iter(entry.values())).logprob for entry in output.logprobs]
                    logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": [None] * len(tokens)}
                choices.append(
                    {
                        "index": prompt_index * params.n + child,
                        "text": output.text,
                        "token_ids": output.token_ids,
                        "prompt_token_ids": list(prompt_ids),
                        "logprobs": logprobs,
                    }
                )
        return {"choices": choices}


def _process_rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


def fake_client_class(server: VLLMServer):
    """TRL's real `VLLMClient` over `server` instead of HTTP and NCCL."""
    from trl.generation.vllm_client import VLLMClient

    class FakeVLLMClient(VLLMClient):
        def __init__(self, base_url=None, host="0.0.0.0", server_port=8000, group_port=51216, connection_timeout=0.0):
            self.base_url = base_url or f"http://{host}:{server_port}"
            self.group_port = group_port
            self.communicator = None
            self._updating_weights = False
            self.server = server
            self.model = server.model_id

        def init_communicator(self, device=0):
            self.communicator = ("rank", _process_rank())

        def update_named_params(self, metadata, named_params):
            server.pushes.append(_process_rank())
            weights = list(named_params)
            sent = [(name, str(tensor.dtype).removeprefix("torch."), list(tensor.shape)) for name, tensor in weights]
            if sent != [tuple(entry) for entry in metadata]:
                raise RuntimeError("the streamed tensors differ from the announced metadata")
            server.engine.load_weights(weights)

        def reset_prefix_cache(self):
            return None

        def get_server_info(self):
            return {
                "weight_transfer_config": {"backend": "nccl"},
                "model_config": {"logprobs_mode": "processed_logprobs"},
            }

        def _post(self, url, **kwargs):
            if url.endswith("/v1/completions"):
                return server.completions(kwargs["json"])
            raise RuntimeError(f"the stand-in server has no endpoint {url}")

    return FakeVLLMClient


def patch_vllm(setattr_, setitem_, server: VLLMServer | None = None) -> None:
    """Make TRL's vLLM generation and `import vllm` use these stand-ins; `setattr_`/`setitem_` are monkeypatch's (or
    plain setattr and dict assignment outside pytest)."""
    import trl.generation.vllm_generation as vllm_generation

    setattr_(vllm_generation, "is_vllm_available", lambda min_version=None: True)
    for name, value in (
        ("LLM", LLM),
        ("SamplingParams", SamplingParams),
        ("StructuredOutputsParams", StructuredOutputsParams),
        ("RequestOutput", RequestOutput),
    ):
        setattr_(vllm_generation, name, value)
    if server is not None:
        setattr_(vllm_generation, "VLLMClient", fake_client_class(server))
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    setitem_(sys.modules, "vllm", module)


# TRL's colocate VLLMGeneration writes these into os.environ (vLLM reads them); left behind in a test process, they
# make every later Accelerator there, and every child process, start a process group.
DISTRIBUTED_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def install(monkeypatch, server: VLLMServer | None = None) -> None:
    """`patch_vllm` for one pytest test; afterwards the stand-ins and the distributed variables are put back."""
    LLM.instances = []

    def setattr_(target, name, value):
        monkeypatch.setattr(target, name, value, raising=False)

    patch_vllm(setattr_, monkeypatch.setitem, server)
    for name in DISTRIBUTED_VARIABLES:
        # setenv records the value to restore (or that there was none); delenv then gives TRL a clean slate.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
