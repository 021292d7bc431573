"""Process reward models (PRMs): score every step of a completion.

Model architecture for Qwen2.5-Math-PRM.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    """Local twin of the remote-code ``Qwen2ForProcessRewardModel`` of Qwen/Qwen2.5-Math-PRM-7B/72B.

    The hub checkpoint ships its own ``modeling_qwen2_rm.py`` (needs ``trust_remote_code``, and it breaks on
    transformers >= 4.54 because of cache API changes). Its weights are a ``Qwen2Model`` under ``model.*`` plus a
    ``score`` head ``Linear(hidden, hidden) -> ReLU -> Linear(hidden, num_labels=2)`` under ``score.0.*`` and
    ``score.2.*``. This class has the same parameter names, so ``from_pretrained`` loads the real checkpoint into it
    without executing any downloaded code.
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
        logits = self.score(outputs.last_hidden_state)
        return TokenClassifierOutput(logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions)
