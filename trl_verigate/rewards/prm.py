"""Process reward models (PRMs): one score in [0, 1] for every step of a completion.

VeriGate GRPO asks a `StepScorer` for step scores only in groups where the verifier rejects every completion.
The interface is `scorer.score(prompts, steps) -> list[list[float]]`: the question text of each completion and
the list of its step texts in, one float per step out (a completion with no steps gets `[]`). The interface lives
in `step_scorer.py` and the model-free scorer in `symbolic.py`; both are re-exported here.

Backends (pick one with `build_step_scorer(prm_type, ...)`):

- `QwenMathPRM` (``"qwen_math"``): Qwen/Qwen2.5-Math-PRM-7B/72B. Chat template with the system prompt, the
  question as user turn and the steps as assistant turn, each step followed by ``<extra_0>``; score = softmax of
  the 2-class head at each ``<extra_0>``, class 1. Loaded into a local copy of the remote-code architecture
  (`Qwen2ForProcessRewardModel`), always: the hub's ``modeling_qwen2_rm.py`` needs ``trust_remote_code`` and does
  not run on transformers 5, and the local class has the same parameter names, so the real weights load into it.
- `MathShepherdPRM` (``"math_shepherd"``): peiyi9979/math-shepherd-mistral-7b-prm, a causal LM. Input
  ``question + " " + "Step 1: ... ки\\nStep 2: ... ки"``; score = softmax over the logits of the label pieces
  ``▁+`` and ``▁-`` (found by their piece strings) at each ``ки`` tag, taking ``+``.
- `TokenClassificationPRM` (``"token_classification"``): models trained with TRL's former ``PRMTrainer``:
  (bos) + prompt + each step followed by the separator, all tokenized piecewise; score = softmax probability of
  label 1 at the last token of each step's separator, where PRMTrainer put the step label.
- `SymbolicStepScorer` (``"symbolic"``): no model; checks the numeric relations written in each step with SymPy.

A checkpoint whose weights do not all load into the backend's model (another PRM format, a plain LM) is rejected
with the prm_type its ``architectures`` match, instead of scoring with a randomly initialised head.

Every model backend uses its own tokenizer (never the policy's), strips whitespace around steps (as in the model
cards' examples), runs in eval mode under ``torch.inference_mode()`` on ``device`` (default: CUDA when available),
and packs ``batch_size`` sequences per forward pass, right-padded. Right padding keeps every real token at the
position it has unpadded, so scores do not depend on the batch composition or the tokenizer's ``padding_side``.

Long inputs: a sequence is first cut right after its last step tag (a causal model's scores at the tags do not
depend on later tokens), and if it is still longer than ``max_length`` tokens its beginning is dropped (system
prompt / question first). The last step is therefore always scored; steps whose tag fell off take the score of the
earliest step that was scored, the nearest judgement of that prefix the model made.

Memory: the weights take parameters x bytes per parameter (7B in bf16 ≈ 15 GB, in fp32 ≈ 30 GB). They load in
``torch_dtype``; unset (or ``"auto"``) it is the checkpoint's own dtype, from its config.json (bf16 for
Qwen2.5-Math-PRM-7B), so ``"float32"`` is what doubles the memory. Under no-grad nothing is kept for a backward pass and no KV cache is built,
so activations stay near batch_size x seq_len x intermediate_size x bytes for the widest layer (7B, bf16, 8 x 2048
tokens: about 0.6 GB), plus attention scratch that SDPA/flash kernels keep linear in seq_len. The Qwen head and
the causal-LM vocabulary projection run only at tag positions. On a GPU that also trains the policy, put the PRM on
a separate GPU per process (``prm_device="cuda:+1"`` in VeriGateConfig: the local GPU index plus 1) or keep ``prm_batch_size`` small on the same one.
"""

from __future__ import annotations

import bisect
import re

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput

from trl_verigate.rewards.prm_placement import check_dtype_under_zero3, resolve_device, resolve_dtype
from trl_verigate.rewards.step_scorer import StepScorer, as_step_scorer, check_step_inputs
from trl_verigate.rewards.symbolic import SymbolicStepScorer

__all__ = [
    "StepScorer",
    "as_step_scorer",
    "Qwen2ForProcessRewardModel",
    "QwenMathPRM",
    "MathShepherdPRM",
    "TokenClassificationPRM",
    "SymbolicStepScorer",
    "build_step_scorer",
    "PRM_TYPES",
]

QWEN_MATH_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    """Local twin of the remote-code ``Qwen2ForProcessRewardModel`` of Qwen/Qwen2.5-Math-PRM-7B/72B.

    The hub checkpoint ships its own ``modeling_qwen2_rm.py`` (needs ``trust_remote_code``, and it breaks on
    transformers >= 4.54 because of cache API changes). Its weights are a ``Qwen2Model`` under ``model.*`` plus a
    ``score`` head ``Linear(hidden, hidden) -> ReLU -> Linear(hidden, num_labels=2)`` under ``score.0.*`` and
    ``score.2.*``. This class has the same parameter names, so ``from_pretrained`` loads the real checkpoint into it
    without executing any downloaded code.

    `forward(..., score_positions=(rows, columns))` runs the head on those token positions only (logits of shape
    (positions, 2)): the step scores need the head at the tags alone, and going through the top module's forward,
    rather than calling `model` and `score` one after the other, is what DeepSpeed ZeRO-3 needs to reset its
    parameter-fetch trace once per pass (its hook sits on the top module).
    """

    config_class = Qwen2Config
    base_model_prefix = "model"

    def __init__(self, config: Qwen2Config):
        super().__init__(config)
        # The released checkpoints do not store num_labels; their head always has two classes (error / correct).
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.ReLU(),
            nn.Linear(config.hidden_size, self.num_labels),
        )
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        score_positions: tuple[torch.Tensor, torch.Tensor] | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            **kwargs,
        )
        hidden = outputs.last_hidden_state
        logits = self.score(hidden if score_positions is None else hidden[score_positions])
        return TokenClassifierOutput(logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions)


_MISSING_KEYS_SHOWN = 5


def _checkpoint_architectures(model_name_or_path: str) -> list[str] | None:
    """The ``architectures`` of a checkpoint's config.json, or None when it cannot be read."""
    from transformers import PretrainedConfig

    try:
        config, _ = PretrainedConfig.get_config_dict(model_name_or_path)
    except (OSError, ValueError):
        return None
    return config.get("architectures")


def _prm_type_for_architectures(architectures: list[str] | None) -> str | None:
    for architecture in architectures or []:
        if architecture == Qwen2ForProcessRewardModel.__name__:
            return "qwen_math"
        if architecture.endswith("ForTokenClassification"):
            return "token_classification"
        # A causal LM may also be no PRM at all, but math_shepherd is the only causal-LM format read here.
        if architecture.endswith("ForCausalLM"):
            return "math_shepherd"
    return None


class _ModelStepScorer:
    """Shared batching, truncation and scoring for the model backends.

    Subclasses build ``(input_ids, tag_positions)`` per completion (`_encode`) and turn the model's outputs at the
    tag positions into probabilities (`_tag_scores`).
    """

    prm_type: str

    def __init__(
        self,
        model_name_or_path: str,
        device: str | torch.device | None = None,
        batch_size: int = 8,
        torch_dtype: str | torch.dtype | None = None,
        max_length: int = 4096,
    ):
        from transformers import AutoTokenizer

        if not model_name_or_path or not isinstance(model_name_or_path, str):
            raise ValueError(f"{type(self).__name__} needs model_name_or_path (a hub id or a local checkpoint folder)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        self.model_name_or_path = model_name_or_path
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = resolve_device(device)
        dtype = resolve_dtype(torch_dtype)
        check_dtype_under_zero3(torch_dtype, "torch_dtype")
        # Unset means the checkpoint's own dtype (bf16 for the released PRMs), stated here rather than left to the
        # loader's default, which was fp32 before transformers 5.
        load_kwargs = {"dtype": "auto" if dtype is None else dtype}
        self.tokenizer = self._from_checkpoint(AutoTokenizer)
        # Before the weights: a wrong checkpoint should fail in a second, not after loading 15 GB.
        self._check_tokenizer()
        model, loading_info = self._from_checkpoint(self._model_class(), output_loading_info=True, **load_kwargs)
        self._check_loaded_weights(loading_info["missing_keys"])
        self._check_weights_not_all_zero(model)
        self.model = model.to(self.device).eval()
        self._pad_id = next(
            (token for token in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id) if token is not None), 0
        )

    def _from_checkpoint(self, loader, **kwargs):
        """``loader.from_pretrained(model_name_or_path)``, with load failures explained in terms of the config."""
        try:
            return loader.from_pretrained(self.model_name_or_path, **kwargs)
        # transformers reports a missing local folder as a malformed repo id, and an empty one as a tokenizer
        # problem; neither names the setting to change.
        except (OSError, ValueError) as error:
            raise ValueError(
                f"{type(self).__name__} cannot load the PRM checkpoint {self.model_name_or_path!r} "
                "(model_name_or_path; prm_model_name_or_path in VeriGateConfig): set it to a local folder with "
                "config.json, the weights and the tokenizer files, or to a hub id reachable online (or already in "
                f"the cache when HF_HUB_OFFLINE=1). transformers said: {error}"
            ) from error

    def _check_tokenizer(self) -> None:
        """Raise a clear error when `self.tokenizer` lacks what the input format needs."""

    def _model_class(self) -> type:
        """The transformers class (or Auto class) whose ``from_pretrained`` loads this backend's checkpoints."""
        raise NotImplementedError

    def _check_loaded_weights(self, missing_keys) -> None:
        # transformers fills missing weights with random values and only prints a report; a PRM with a random head
        # would still return plausible probabilities, so a checkpoint of another format must fail here.
        if not missing_keys:
            return
        missing = sorted(missing_keys)
        shown = ", ".join(missing[:_MISSING_KEYS_SHOWN]) + (", ..." if len(missing) > _MISSING_KEYS_SHOWN else "")
        raise ValueError(
            f"{type(self).__name__} (prm_type={self.prm_type!r}) cannot score with {self.model_name_or_path!r}: "
            f"the checkpoint has no weights for {len(missing)} of its parameters ({shown}), which would be random. "
            f"{self._format_hint()}"
        )

    def _check_weights_not_all_zero(self, model) -> None:
        # transformers loads real weights only on local rank 0 under accelerate FSDP with CPU-RAM-efficient loading
        # and zeros everywhere else, expecting FSDP to broadcast rank 0's copy when the model is prepared. A PRM that
        # is never prepared would then score every step 0.5 on those ranks without any error.
        # Under DeepSpeed ZeRO-3 every parameter here is an empty placeholder for its shards, which are not zeros.
        # The first non-zero tensor ends the scan, so a real checkpoint costs one tensor's read.
        held = [parameter for parameter in model.parameters() if parameter.numel() > 0]
        if not held or any(bool(parameter.detach().any()) for parameter in held):
            return
        from transformers.integrations import is_fsdp_enabled

        if is_fsdp_enabled():
            cause = (
                "This process runs under accelerate FSDP with CPU-RAM-efficient loading (ACCELERATE_USE_FSDP and "
                "FSDP_CPU_RAM_EFFICIENT_LOADING are true, local rank is not 0), where transformers loads real weights "
                "only on local rank 0 and zeros elsewhere, expecting FSDP to broadcast them; nothing broadcasts the "
                "PRM's. Set fsdp_cpu_ram_efficient_loading: false in the accelerate config, or load the PRM with "
                "FSDP_CPU_RAM_EFFICIENT_LOADING=false."
            )
        else:
            cause = "The checkpoint's weight files hold only zeros; re-save or re-download it."
        raise ValueError(
            f"{type(self).__name__} (prm_type={self.prm_type!r}) loaded {self.model_name_or_path!r} with every "
            f"parameter equal to zero, so every step would score 0.5. {cause}"
        )

    def _format_hint(self) -> str:
        """Which prm_type the checkpoint's ``architectures`` fit, for errors about a checkpoint of the wrong format."""
        architectures = _checkpoint_architectures(self.model_name_or_path)
        matching = _prm_type_for_architectures(architectures)
        if matching is None or matching == self.prm_type:
            return f"Use a {self.prm_type} checkpoint or the prm_type that matches this one."
        return (
            f"Its config.json lists architectures {architectures}, the format of prm_type={matching!r}; set prm_type "
            f"to {matching!r} or use a {self.prm_type} checkpoint."
        )

    def _encode(self, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
        raise NotImplementedError

    def _tag_scores(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, rows, columns) -> torch.Tensor:
        raise NotImplementedError

    def _truncate(self, input_ids: list[int], positions: list[int]) -> tuple[list[int], list[int], int]:
        """Cut after the last tag, then keep at most `max_length` tokens from the end.

        Returns the kept ids, the kept tag positions re-based to them, and how many leading tags were dropped.
        """
        end = positions[-1] + 1
        start = max(0, end - self.max_length)
        kept = [position - start for position in positions if position >= start]
        return input_ids[start:end], kept, len(positions) - len(kept)

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]:
        check_step_inputs(prompts, steps)
        scores: list[list[float]] = [[] for _ in steps]
        encoded = []
        for index, (prompt, completion_steps) in enumerate(zip(prompts, steps, strict=True)):
            if not completion_steps:
                continue
            ids, positions = self._encode(prompt, [step.strip() for step in completion_steps])
            if len(positions) != len(completion_steps):
                raise RuntimeError(
                    f"{type(self).__name__} found {len(positions)} step tags for {len(completion_steps)} steps in "
                    f"completion {index}; the tokenizer or chat template of {self.model_name_or_path} does not keep "
                    "the step format intact"
                )
            ids, positions, dropped = self._truncate(ids, positions)
            encoded.append((index, ids, positions, dropped))
        # Similar lengths share a batch, which keeps padding (and wasted compute) small.
        encoded.sort(key=lambda item: len(item[1]))
        for batch_start in range(0, len(encoded), self.batch_size):
            batch = encoded[batch_start : batch_start + self.batch_size]
            width = max(len(ids) for _, ids, _, _ in batch)
            input_ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
            attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
            rows, columns = [], []
            for row, (_, ids, positions, _) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                attention_mask[row, : len(ids)] = 1
                rows.extend([row] * len(positions))
                columns.extend(positions)
            with torch.inference_mode():
                probabilities = self._tag_scores(
                    input_ids.to(self.device),
                    attention_mask.to(self.device),
                    torch.tensor(rows, device=self.device),
                    torch.tensor(columns, device=self.device),
                )
            flat = probabilities.float().cpu().tolist()
            offset = 0
            for index, _, positions, dropped in batch:
                kept = flat[offset : offset + len(positions)]
                offset += len(positions)
                scores[index] = [kept[0]] * dropped + kept
        return scores

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name_or_path!r}, device={str(self.device)!r})"


def _token_indices_at_char_ends(offsets: list[tuple[int, int]], char_ends: list[int]) -> list[int]:
    """Index of the token covering the character just before each of `char_ends` (the last character of a tag)."""
    token_ends = [end for _, end in offsets]
    indices = []
    for char_end in char_ends:
        index = bisect.bisect_left(token_ends, char_end)
        # Special tokens added by the tokenizer have empty (0, 0) spans; skip past any that tie.
        while index < len(offsets) and offsets[index][0] == offsets[index][1]:
            index += 1
        if index == len(offsets) or offsets[index][0] >= char_end:
            raise RuntimeError(f"no token covers character {char_end - 1} of the PRM input; tag lost in tokenization")
        indices.append(index)
    return indices


class QwenMathPRM(_ModelStepScorer):
    """Qwen2.5-Math-PRM (7B/72B) step scores: P(correct) from the 2-class head at each ``<extra_0>``."""

    prm_type = "qwen_math"
    step_tag = "<extra_0>"

    def __init__(
        self,
        model_name_or_path: str = "Qwen/Qwen2.5-Math-PRM-7B",
        device: str | torch.device | None = None,
        batch_size: int = 8,
        torch_dtype: str | torch.dtype | None = None,
        max_length: int = 4096,
        system_prompt: str = QWEN_MATH_SYSTEM_PROMPT,
    ):
        self.system_prompt = system_prompt
        super().__init__(model_name_or_path, device, batch_size, torch_dtype, max_length)

    def _check_tokenizer(self) -> None:
        if self.tokenizer.chat_template is None:
            raise ValueError(
                f"QwenMathPRM (prm_type='qwen_math'): the tokenizer of {self.model_name_or_path} has no "
                "chat_template, which the Qwen2.5-Math-PRM input format needs. "
                f"{self._format_hint()}"
            )
        if self.tokenizer.convert_tokens_to_ids(self.step_tag) in (None, self.tokenizer.unk_token_id):
            raise ValueError(
                f"QwenMathPRM (prm_type='qwen_math'): the tokenizer of {self.model_name_or_path} has no "
                f"{self.step_tag} token, so it is no Qwen2.5-Math-PRM. {self._format_hint()}"
            )

    def _model_class(self) -> type:
        return Qwen2ForProcessRewardModel

    def _encode(self, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
        # A literal tag inside the text would be read as an extra step boundary, so it is removed first.
        def clean(text: str) -> str:
            return text.replace(self.step_tag, "")

        messages = [
            {"role": "system", "content": clean(self.system_prompt)},
            {"role": "user", "content": clean(prompt)},
            {"role": "assistant", "content": "".join(clean(step) + self.step_tag for step in steps)},
        ]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        char_ends = [match.end() for match in re.finditer(re.escape(self.step_tag), text)]
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return encoding["input_ids"], _token_indices_at_char_ends(encoding["offset_mapping"], char_ends)

    def _tag_scores(self, input_ids, attention_mask, rows, columns) -> torch.Tensor:
        # The head runs on the tag positions only (as the full forward would there), sparing a hidden x hidden
        # matmul over every token; through the top module, whatever wraps it (a DeepSpeed engine under ZeRO-3).
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask, score_positions=(rows, columns)).logits
        return logits.float().softmax(dim=-1)[:, 1]


class MathShepherdPRM(_ModelStepScorer):
    """Math-Shepherd step scores: P(``+``) among {``+``, ``-``} from the LM logits at each ``ки`` tag.

    ``number_steps`` prefixes ``Step i: `` to steps that do not already start with it, the format the model was
    trained on.
    """

    prm_type = "math_shepherd"
    step_tag = "ки"

    def __init__(
        self,
        model_name_or_path: str = "peiyi9979/math-shepherd-mistral-7b-prm",
        device: str | torch.device | None = None,
        batch_size: int = 8,
        torch_dtype: str | torch.dtype | None = None,
        max_length: int = 4096,
        good_token: str = "+",
        bad_token: str = "-",
        number_steps: bool = True,
    ):
        self.good_token = good_token
        self.bad_token = bad_token
        self.number_steps = number_steps
        super().__init__(model_name_or_path, device, batch_size, torch_dtype, max_length)

    def _check_tokenizer(self) -> None:
        bos = self.tokenizer.bos_token_id
        if bos is not None and self.tokenizer("x")["input_ids"][:1] != [bos]:
            # transformers 5 builds such a tokenizer from a checkpoint that ships only tokenizer.model (SentencePiece)
            # and no tokenizer.json: no <s> and no SentencePiece dummy prefix, so every input would differ from the
            # ones the model was trained on.
            raise ValueError(
                f"MathShepherdPRM (prm_type='math_shepherd'): the tokenizer of {self.model_name_or_path} does not "
                f"prepend its bos token {self.tokenizer.bos_token!r}, which the model was trained with. A checkpoint "
                "with only tokenizer.model loads that way in transformers 5; write its tokenizer.json once with "
                "transformers.LlamaTokenizer.from_pretrained(path, add_bos_token=True).save_pretrained(path)."
            )
        self.label_pieces = [self._label_piece(label) for label in (self.good_token, self.bad_token)]
        self.candidate_ids = self.tokenizer.convert_tokens_to_ids(self.label_pieces)

    def _label_piece(self, label: str) -> str:
        """The vocabulary piece the model predicts at a tag for `label`: the one `label` forms after the tag and a
        space, where the training data wrote it ("... ки" became "... +").

        That is ``▁+``/``▁-`` in Mistral's SentencePiece vocabulary (ids 648/387) and ``Ġ+`` in a byte-level one;
        a bare ``+`` (as in "48+24") is another token, and encoding the label alone gives one or the other depending
        on whether the tokenizer adds a leading space.
        """
        tag_pieces = self.tokenizer.tokenize(self.step_tag)
        pieces = self.tokenizer.tokenize(f"{self.step_tag} {label}")
        if (
            pieces[: len(tag_pieces)] != tag_pieces
            or len(pieces) != len(tag_pieces) + 1
            or self.tokenizer.convert_tokens_to_string(pieces[-1:]).strip() != label
        ):
            raise ValueError(
                f"the tokenizer of {self.model_name_or_path} writes {label!r} after the tag {self.step_tag!r} as "
                f"{pieces[len(tag_pieces) :]} instead of one piece; pass good_token/bad_token that are single pieces"
            )
        return pieces[-1]

    def _model_class(self) -> type:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def _encode(self, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
        text = prompt + " "
        char_ends = []
        for number, step in enumerate(steps, start=1):
            if self.number_steps and not re.match(r"step\s*\d+\s*:", step, flags=re.IGNORECASE):
                step = f"Step {number}: {step}"
            text += ("\n" if number > 1 else "") + step + " " + self.step_tag
            char_ends.append(len(text))
        encoding = self.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        return encoding["input_ids"], _token_indices_at_char_ends(encoding["offset_mapping"], char_ends)

    def _tag_scores(self, input_ids, attention_mask, rows, columns) -> torch.Tensor:
        # Vocabulary logits only where they are read: a 32k-vocab LM over 4k tokens would otherwise need GBs.
        needed = torch.unique(columns)
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=needed).logits
        kept_columns = torch.searchsorted(needed, columns)
        candidates = logits[rows, kept_columns][:, self.candidate_ids]
        return candidates.float().softmax(dim=-1)[:, 0]


class TokenClassificationPRM(_ModelStepScorer):
    """Scores from a token-classification PRM trained with TRL's former ``PRMTrainer``.

    The input is built exactly as ``PRMTrainer.tokenize_row`` built it: the prompt, then each step followed by
    ``step_separator``, every piece tokenized on its own without special tokens, and the tokenizer's bos token (if
    any) in front. The score of a step is P(label 1) at the last token of its separator, where the label sat.
    """

    prm_type = "token_classification"

    def __init__(
        self,
        model_name_or_path: str,
        device: str | torch.device | None = None,
        batch_size: int = 8,
        torch_dtype: str | torch.dtype | None = None,
        max_length: int = 4096,
        step_separator: str = "\n",
    ):
        self.step_separator = step_separator
        super().__init__(model_name_or_path, device, batch_size, torch_dtype, max_length)
        if self.model.config.num_labels != 2:
            raise ValueError(
                f"{model_name_or_path} has num_labels={self.model.config.num_labels}; a PRMTrainer model has 2"
            )

    def _check_tokenizer(self) -> None:
        self._separator_ids = self.tokenizer.encode(self.step_separator, add_special_tokens=False)
        if not self._separator_ids:
            raise ValueError(f"step_separator={self.step_separator!r} encodes to no tokens; use e.g. '\\n'")

    def _model_class(self) -> type:
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification

    def _encode(self, prompt: str, steps: list[str]) -> tuple[list[int], list[int]]:
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if self.tokenizer.bos_token_id is not None:
            ids = [self.tokenizer.bos_token_id, *ids]
        positions = []
        for step in steps:
            ids = ids + self.tokenizer(step, add_special_tokens=False)["input_ids"] + self._separator_ids
            positions.append(len(ids) - 1)
        return ids, positions

    def _tag_scores(self, input_ids, attention_mask, rows, columns) -> torch.Tensor:
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits[rows, columns].float().softmax(dim=-1)[:, 1]


MODEL_BACKENDS = {backend.prm_type: backend for backend in (QwenMathPRM, MathShepherdPRM, TokenClassificationPRM)}
PRM_TYPES = (*MODEL_BACKENDS, "symbolic")


def build_step_scorer(
    prm_type: str,
    model_name_or_path: str | None = None,
    batch_size: int = 8,
    device: str | torch.device | None = None,
    torch_dtype: str | torch.dtype | None = None,
) -> StepScorer:
    """Build the step scorer named by `prm_type` (one of `PRM_TYPES`)."""
    if prm_type == "symbolic":
        return SymbolicStepScorer()
    if prm_type not in MODEL_BACKENDS:
        raise ValueError(f"unknown prm_type={prm_type!r}; choose one of {', '.join(PRM_TYPES)}")
    if not model_name_or_path:
        raise ValueError(
            f"prm_type={prm_type!r} needs model_name_or_path (e.g. 'Qwen/Qwen2.5-Math-PRM-7B' for qwen_math, "
            "'peiyi9979/math-shepherd-mistral-7b-prm' for math_shepherd, or a local checkpoint folder)"
        )
    return MODEL_BACKENDS[prm_type](model_name_or_path, device=device, batch_size=batch_size, torch_dtype=torch_dtype)
