"""Sampling completions: Hugging Face `generate` (batched, left padding) or vLLM.

Both backends take prompts as text or as chat messages and a number of samples per prompt, and return the
completions' text per prompt; they also hand each completion to a callback as soon as it exists (HF: after each
batch of ``batch_size`` sequences; vLLM: when its one call returns). Prompts become token ids as TRL's GRPOTrainer makes them for training
(`prompt_token_ids`), so a model is evaluated on the very prompts it trained on. `set_seed` starts their sampling
stream (an evaluation seeds a resumed run apart from the first, so it cannot redraw the samples it already has).
vLLM is imported only when its backend is built, so this package works without it.

Both backends sample the same distribution, set in full by `SamplingConfig`: left to themselves they would not.
`model.generate` fills what it is not given from the model's generation_config.json and then from transformers'
defaults (top_k 50), while vLLM, given explicit `SamplingParams`, ignores that file (top_k off). So top_k, min_p and
repetition_penalty (the fields vLLM would read from the file, besides the temperature, top_p and length the command
line sets) are read from generation_config.json once (`model_sampling_defaults`) and passed to either backend.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BACKENDS = ("hf", "vllm")
# Called with (prompt index, completion) pairs as soon as a backend has them, so each can be scored and saved while
# the rest is generated.
OnCompletions = Callable[[list[tuple[int, str]]], None]


# What vLLM reads from generation_config.json (`ModelConfig.get_diff_sampling_param`) besides temperature, top_p
# and the length, which `SamplingConfig` always sets.
MODEL_SAMPLING_FIELDS = ("top_k", "min_p", "repetition_penalty")
# vLLM's greedy threshold (`_SAMPLING_EPS` in vllm/sampling_params.py: greedy, and n > 1 refused, below it). vLLM 0.31
# first raises a temperature in (0, 0.01) to 0.01 (`_MAX_TEMP`), so only 0 itself reaches its greedy branch; both
# backends here decode greedily under the threshold instead (the vLLM one passes 0), so a near-zero temperature means
# the same on both and the n > 1 check refuses it before a model loads.
GREEDY_TEMPERATURE = 1e-5


@dataclass(frozen=True)
class SamplingConfig:
    """How attempts are sampled, the same on both backends. top_k 0, min_p 0 and repetition_penalty 1 are off."""

    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 512
    seed: int = 0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"--temperature must be >= 0 (0: greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"--top-k must be a whole number >= 0 (0: off), got {self.top_k}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"--min-p must be in [0, 1] (0: off), got {self.min_p}")
        if not self.repetition_penalty > 0:
            raise ValueError(f"--repetition-penalty must be > 0 (1: off), got {self.repetition_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE

    def model_fields(self) -> dict:
        """top_k, min_p and repetition_penalty (the fields the model's generation_config.json may set)."""
        return {name: getattr(self, name) for name in MODEL_SAMPLING_FIELDS}


def check_attempts(temperature: float, n: int, temperature_flag: str = "--temperature", n_flag: str = "--n") -> None:
    """Greedy decoding (a temperature under `GREEDY_TEMPERATURE`, 0 included) gives a prompt the same completion every
    time: more than one attempt would repeat it (and vLLM refuses n > 1 when greedy). Refused before any model loads."""
    if temperature < GREEDY_TEMPERATURE and n > 1:
        below = "" if temperature == 0 else f" is under vLLM's greedy threshold {GREEDY_TEMPERATURE:g}, so it"
        raise ValueError(
            f"{temperature_flag} {temperature:g}{below} decodes greedily, so the {n} attempts ({n_flag}) of a problem "
            f"would all be the same completion; use {n_flag} 1 with k 1, or a temperature >= {GREEDY_TEMPERATURE:g}"
        )


def sampling_defaults_from(generation_config) -> dict:
    """The `MODEL_SAMPLING_FIELDS` a `GenerationConfig` sets (those it leaves unset are absent)."""
    values = generation_config.to_diff_dict() if generation_config is not None else {}
    return {name: values[name] for name in MODEL_SAMPLING_FIELDS if values.get(name) is not None}


def model_sampling_defaults(model_name_or_path: str) -> dict:
    """`sampling_defaults_from` the model's generation_config.json; {} when it has none (or it cannot be read)."""
    from transformers import GenerationConfig

    try:
        return sampling_defaults_from(GenerationConfig.from_pretrained(model_name_or_path))
    except (OSError, ValueError):
        return {}


def render_prompt(tokenizer, prompt) -> str:
    """A text prompt as is; chat messages through the tokenizer's chat template (with the generation prompt), or,
    for a tokenizer without one, the messages' contents joined by blank lines."""
    if isinstance(prompt, str):
        return prompt
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(message["content"] for message in prompt) + "\n\n"


def prompt_token_ids(tokenizer, prompt) -> list[int]:
    """The prompt's token ids as TRL's GRPOTrainer makes them for training: text with the tokenizer's special tokens
    (a BOS where the tokenizer adds one, as DeepSeek-Prover-V1.5's does), chat messages tokenized by the chat
    template with the generation prompt (the template writes its own BOS)."""
    if isinstance(prompt, str):
        return list(tokenizer(prompt)["input_ids"])
    if getattr(tokenizer, "chat_template", None):
        encoded = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(encoded["input_ids"])
    return list(tokenizer(render_prompt(tokenizer, prompt))["input_ids"])


class HFBackend:
    """`model.generate` over batches of ``batch_size`` sequences, prompts left-padded.

    Takes a loaded model and tokenizer (the training callback passes the live policy) or a path via `from_pretrained`.
    """

    def __init__(self, model, tokenizer, sampling: SamplingConfig, batch_size: int = 16):
        if batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.batch_size = batch_size

    @classmethod
    def from_pretrained(cls, model_path: str, sampling: SamplingConfig, batch_size: int = 16, dtype: str = "auto"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
        return cls(model, tokenizer, sampling, batch_size)

    def set_seed(self, seed: int) -> None:
        from transformers import set_seed

        set_seed(seed)

    def generate(
        self, prompts: Sequence, counts: Sequence[int], on_completions: OnCompletions | None = None
    ) -> list[list[str]]:
        """``counts[i]`` completions of ``prompts[i]``; ``on_completions`` gets each batch's as it is decoded."""
        import torch

        tokenizer = self.tokenizer
        prompt_ids = [prompt_token_ids(tokenizer, prompt) for prompt in prompts]
        flat = [index for index, count in enumerate(counts) for _ in range(count)]
        outputs: list[list[str]] = [[] for _ in prompts]
        # Generation appends on the right, so every row must end at its prompt: left padding, put back afterwards
        # (the training callback shares the trainer's tokenizer).
        padding_side, pad_token = tokenizer.padding_side, tokenizer.pad_token
        tokenizer.padding_side = "left"
        if pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        do_sample = not self.sampling.greedy
        sampling = self._sampling_arguments()
        device = next(self.model.parameters()).device
        try:
            for start in range(0, len(flat), self.batch_size):
                rows = flat[start : start + self.batch_size]
                encoded = tokenizer.pad(
                    {"input_ids": [prompt_ids[index] for index in rows]}, padding=True, return_tensors="pt"
                ).to(device)
                with torch.no_grad():
                    generated = self.model.generate(
                        **encoded,
                        do_sample=do_sample,
                        max_new_tokens=self.sampling.max_new_tokens,
                        pad_token_id=tokenizer.pad_token_id,
                        **sampling,
                    )
                completions = tokenizer.batch_decode(
                    generated[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True
                )
                for index, completion in zip(rows, completions, strict=True):
                    outputs[index].append(completion)
                if on_completions is not None:
                    on_completions(list(zip(rows, completions, strict=True)))
        finally:
            tokenizer.padding_side = padding_side
            if pad_token is None:
                tokenizer.pad_token = None
        return outputs

    def _sampling_arguments(self) -> dict:
        """Every setting explicit, so neither the model's generation_config nor transformers' defaults (top_k 50)
        add one the vLLM backend would not have; off is top_k 0 (no warper) and min_p None. Greedy decoding keeps
        only the repetition penalty, which vLLM applies when greedy too."""
        sampling = self.sampling
        if sampling.greedy:
            return {"repetition_penalty": sampling.repetition_penalty}
        return {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "min_p": sampling.min_p or None,
            "repetition_penalty": sampling.repetition_penalty,
        }


def import_vllm():
    """vLLM's `LLM` and `SamplingParams`; a ValueError naming --backend when vllm cannot be imported."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as error:
        raise ValueError(
            f"--backend vllm: vllm cannot be imported ({error}); `pip install trl-verigate[vllm]` on a GPU "
            "machine, or use --backend hf"
        ) from error
    return LLM, SamplingParams


class VLLMBackend:
    """`vllm.LLM.generate` with one `SamplingParams` per prompt: ``n`` = the samples that prompt still needs, and a
    seed of its own drawn from the backend's seeded stream (so the draws do not depend on how vLLM batches)."""

    def __init__(self, llm, sampling: SamplingConfig, sampling_params_class):
        self.llm = llm
        self.sampling = sampling
        self.sampling_params_class = sampling_params_class
        self._seeds = random.Random(sampling.seed)

    def set_seed(self, seed: int) -> None:
        self._seeds = random.Random(seed)

    @classmethod
    def from_pretrained(cls, model_path: str, sampling: SamplingConfig, tensor_parallel_size: int = 1, **llm_kwargs):
        LLM, SamplingParams = import_vllm()  # noqa: N806 - vLLM's class names
        llm = LLM(model=model_path, tensor_parallel_size=tensor_parallel_size, seed=sampling.seed, **llm_kwargs)
        return cls(llm, sampling, SamplingParams)

    def generate(
        self, prompts: Sequence, counts: Sequence[int], on_completions: OnCompletions | None = None
    ) -> list[list[str]]:
        """``counts[i]`` completions of ``prompts[i]``; ``on_completions`` gets them when the one vLLM call returns."""
        tokenizer = self.llm.get_tokenizer()
        wanted = [(index, count) for index, count in enumerate(counts) if count > 0]
        params = [
            self.sampling_params_class(
                n=count,
                temperature=0.0 if self.sampling.greedy else self.sampling.temperature,
                top_p=self.sampling.top_p,
                max_tokens=self.sampling.max_new_tokens,
                seed=self._seeds.randrange(2**31),
                **self.sampling.model_fields(),
            )
            for index, count in wanted
        ]
        # Token ids, not text: vLLM would put a BOS in front of a chat template's own.
        token_prompts = [{"prompt_token_ids": prompt_token_ids(tokenizer, prompts[index])} for index, _ in wanted]
        outputs: list[list[str]] = [[] for _ in prompts]
        if not wanted:
            return outputs
        results = self.llm.generate(token_prompts, params, use_tqdm=False)
        for (index, count), result in zip(wanted, results, strict=True):
            outputs[index] = [output.text for output in result.outputs]
            if len(outputs[index]) != count:
                raise RuntimeError(f"vllm returned {len(outputs[index])} completions for a prompt asking {count}")
            if on_completions is not None:
                on_completions([(index, text) for text in outputs[index]])
        return outputs
