"""CoqProcessGRPOTrainer on CPU: the tiny policy, fixed completions, the real coqidetop.

Every verdict is known from what Coq does with each proof, so the (B, T) advantages the loss receives are checked
against values computed here by hand: g from the verdicts, A_out from GRPO's formula, phi from the paper's rules
over Coq's sentences, and the token at which each sentence begins from the tokenizer's own offset mapping.
"""

import os
import statistics

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer

from tests.launch import rollout_of_texts
from trl_verigate.trainers import CoqProcessConfig, CoqProcessGRPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

G = 4
D1, D2 = -0.05, -0.1
STATEMENT = "Theorem add_0_r : forall n : nat, n + 0 = n."
PROMPT = "Complete the following Coq proof:\n\n```coq\n" + STATEMENT + "\nProof.\n"
# What each completion continues with, the sentences Coq runs, and Coq's verdict on them.
COMPLETIONS = [
    "\n  intros n. lia.\nQed.\n```",  # passes: phi = [1, 1]
    "\n  intros n. simpl. reflexivity.\nQed.\n```",  # `reflexivity` cannot close n + 0 = n: [d1, d1, d2]
    "",  # no proof: g = 0, no sentences
    "\n  exact I.\nQed.\n```",  # `I : True` is not a proof of it: [d2]
]
SENTENCES = [["intros n.", "lia."], ["intros n.", "simpl.", "reflexivity."], [], ["exact I."]]
PHI = [[1.0, 1.0], [D1, D1, D2], [], [D2]]
G_OF = [1.0, 0.0, 0.0, 0.0]


def fixed_rollout(prompts, trainer):
    return rollout_of_texts(trainer.processing_class, prompts, [COMPLETIONS[row % G] for row in range(len(prompts))])


@pytest.fixture
def coq_server(coq_required):
    from trl_verigate.coq import CoqServer, CoqServerConfig

    with CoqServer(CoqServerConfig(workers=2, timeout=20.0)) as server:
        yield server


def make_trainer(tiny_models, tmp_path, verifier):
    args = CoqProcessConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=G,
        num_generations=G,
        max_completion_length=64,
        learning_rate=1e-5,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        logging_steps=1,
        max_steps=1,
        prover_timeout=20.0,
    )
    dataset = Dataset.from_dict({"prompt": [PROMPT], "formal_statement": [STATEMENT], "header": [""]})
    return CoqProcessGRPOTrainer(
        model=tiny_models["policy"], args=args, train_dataset=dataset, rollout_func=fixed_rollout, verifier=verifier
    )


def expected_advantages(tokenizer, width: int) -> torch.Tensor:
    mean, std = statistics.mean(G_OF), statistics.stdev(G_OF)
    rows = []
    for k, completion in enumerate(COMPLETIONS):
        a_out = (G_OF[k] - mean) / (std + 1e-4)
        encoding = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
        row = [0.0] * width
        for t in range(len(encoding["input_ids"]) + 1):  # the completion's tokens and its EOS
            row[t] = a_out
        position = 0
        for sentence, score in zip(SENTENCES[k], PHI[k], strict=True):
            start = completion.index(sentence, position)
            position = start + len(sentence)
            first = next(i for i, (_, end) in enumerate(encoding["offset_mapping"]) if end > start)
            row[first] += score - mean
        rows.append(row)
    return torch.tensor(rows)


def test_coq_verdicts_become_sentence_level_advantages_and_coq_metrics(tiny_models, tmp_path, coq_server):
    trainer = make_trainer(tiny_models, tmp_path, coq_server)
    trainer.model.train()
    output = trainer._generate_and_score_completions([{"prompt": PROMPT, "formal_statement": STATEMENT}] * G)
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    expected = expected_advantages(tokenizer, output["completion_ids"].shape[1])
    assert torch.allclose(output["advantages"], expected, atol=1e-5), (output["advantages"] - expected).abs().max()
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    assert metrics["coq/pass_rate"] == pytest.approx(1 / 4)
    assert metrics["coq/status/passed"] == pytest.approx(1 / 4) and metrics["coq/status/failed"] == pytest.approx(3 / 4)
    assert metrics["coq/tactics_per_proof"] == pytest.approx((2 + 3 + 0 + 1) / 4)
    assert metrics["coq/empty_fraction"] == pytest.approx(1 / 4)
    assert metrics["rewards/coq_proof/mean"] == pytest.approx(1 / 4)
    assert not any(name.startswith("lean/") for name in metrics)


def test_the_coq_reward_is_an_ordinary_trl_reward_function(coq_server):
    import asyncio

    from trl_verigate.rewards.coq import CoqProcessOracle, CoqProofReward

    reward = CoqProofReward(CoqProcessOracle(coq_server))
    assert reward.__name__ == "coq_proof"
    rewards = asyncio.run(reward([PROMPT] * G, COMPLETIONS, formal_statement=[STATEMENT] * G))
    assert rewards == G_OF
    reward.close()
