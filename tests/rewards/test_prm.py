import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from trl_verigate.rewards.prm import (
    QWEN_MATH_SYSTEM_PROMPT,
    MathShepherdPRM,
    Qwen2ForProcessRewardModel,
    QwenMathPRM,
    StepScorer,
    SymbolicStepScorer,
    TokenClassificationPRM,
    as_step_scorer,
    build_step_scorer,
    resolve_device,
)

QUESTION = "Natalia sold clips to 48 of her friends in April, and then half as many in May. How many in total?"
STEPS = ["Natalia sold 48/2 = 24 clips in May.", "She sold 48 + 24 = 72 clips altogether.", "The answer is 72."]

PROMPTS = [QUESTION, "What is 2 + 2?", "Solve 3x = 12.", "ℕ → ∀ ⊢ √ π", "What is 7 * 6?"]
BATCH_STEPS = [
    STEPS,
    ["2 + 2 = 4", "The answer is \\boxed{4}."],
    ["Divide both sides by 3.", "So x = 4.", "Check: 3 * 4 = 12.", "#### 4"],
    ["∀ n : ℕ, n + 0 = n"],
    ["7 * 6 = 42"],
]

BACKENDS = {
    "qwen_math": ("prm_qwen_math", QwenMathPRM),
    "math_shepherd": ("prm_math_shepherd", MathShepherdPRM),
    "token_classification": ("prm_token_classification", TokenClassificationPRM),
}


@pytest.fixture(scope="module")
def scorers(tiny_models):
    return {name: cls(tiny_models[key], device="cpu") for name, (key, cls) in BACKENDS.items()}


def assert_close(actual, expected, tolerance=1e-5):
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert abs(a - b) <= tolerance, (got, want)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_model_scorers_return_one_probability_per_step(scorers, backend):
    scorer = scorers[backend]
    assert isinstance(scorer, StepScorer)
    scores = scorer.score(PROMPTS, BATCH_STEPS)
    assert [len(row) for row in scores] == [len(steps) for steps in BATCH_STEPS]
    assert all(isinstance(value, float) and 0.0 <= value <= 1.0 for row in scores for value in row)
    # Random weights still have to give distinct scores, or the position checks below would prove nothing.
    assert max(max(row) for row in scores) - min(min(row) for row in scores) > 0.01


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_scores_do_not_depend_on_batch_size_or_padding_side(tiny_models, backend):
    key, cls = BACKENDS[backend]
    one_by_one = cls(tiny_models[key], device="cpu", batch_size=1).score(PROMPTS, BATCH_STEPS)
    batched = cls(tiny_models[key], device="cpu", batch_size=4)
    assert_close(batched.score(PROMPTS, BATCH_STEPS), one_by_one)
    for side in ("left", "right"):
        batched.tokenizer.padding_side = side
        assert_close(batched.score(PROMPTS, BATCH_STEPS), one_by_one)


def _neighbour_differs(probabilities: torch.Tensor, positions: torch.Tensor) -> bool:
    """True when reading one token earlier would give other scores, i.e. the comparison checks the positions."""
    return bool((probabilities[positions] - probabilities[positions - 1]).abs().max() > 1e-3)


def test_qwen_math_scores_match_the_model_card_computation(tiny_models, scorers):
    path = tiny_models["prm_qwen_math"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = Qwen2ForProcessRewardModel.from_pretrained(path).eval()
    messages = [
        {"role": "system", "content": QWEN_MATH_SYSTEM_PROMPT},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "<extra_0>".join(STEPS) + "<extra_0>"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    input_ids = tokenizer.encode(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0]
    positions = (input_ids[0] == tokenizer.convert_tokens_to_ids("<extra_0>")).nonzero().squeeze(-1)
    probabilities = logits.softmax(dim=-1)[:, 1]
    assert len(positions) == len(STEPS)
    assert _neighbour_differs(probabilities, positions)
    assert_close(scorers["qwen_math"].score([QUESTION], [STEPS]), [probabilities[positions].tolist()])


def test_math_shepherd_scores_match_the_model_card_computation(tiny_models, scorers):
    path = tiny_models["prm_math_shepherd"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    output = " ки\n".join(f"Step {number}: {step}" for number, step in enumerate(STEPS, start=1)) + " ки"
    input_ids = tokenizer.encode(f"{QUESTION} {output}", return_tensors="pt")
    candidates = tokenizer.encode("+ -", add_special_tokens=False)
    tag_id = tokenizer.encode("ки", add_special_tokens=False)[-1]
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0][:, candidates]
    probabilities = logits.softmax(dim=-1)[:, 0]
    positions = (input_ids[0] == tag_id).nonzero().squeeze(-1)
    assert len(positions) == len(STEPS)
    assert _neighbour_differs(probabilities, positions)
    assert_close(scorers["math_shepherd"].score([QUESTION], [STEPS]), [probabilities[positions].tolist()])
    # Steps already numbered are not numbered twice.
    numbered = [f"Step {number}: {step}" for number, step in enumerate(STEPS, start=1)]
    assert_close(scorers["math_shepherd"].score([QUESTION], [numbered]), [probabilities[positions].tolist()])


def test_math_shepherd_labels_are_the_pieces_with_the_word_start_marker(scorers):
    scorer = scorers["math_shepherd"]
    # As "▁+"/"▁-" (ids 648/387) in Mistral's vocabulary; the tiny vocabulary also has bare "+"/"-" pieces.
    assert scorer.label_pieces == ["▁+", "▁-"]
    assert scorer.tokenizer.convert_ids_to_tokens(scorer.candidate_ids) == ["▁+", "▁-"]


def test_math_shepherd_labels_on_a_byte_level_tokenizer_are_the_pieces_after_a_space(tiny_models):
    # A math-shepherd-format PRM on a byte-level model (the tiny policy stands in): the training data wrote the label
    # after a space, the piece "Ġ+", while encode("+ -") starts with the bare "+" of "48+24".
    scorer = MathShepherdPRM(tiny_models["policy"], device="cpu")
    assert scorer.tokenizer.convert_ids_to_tokens(scorer.candidate_ids) == ["Ġ+", "Ġ-"]


def test_math_shepherd_label_that_is_no_single_piece_is_refused(tiny_models):
    with pytest.raises(ValueError, match=r"writes 'plus' after the tag 'ки' as \[.*\] instead of one piece"):
        MathShepherdPRM(tiny_models["prm_math_shepherd"], device="cpu", good_token="plus")


def test_math_shepherd_checkpoint_with_only_tokenizer_model_is_refused_with_the_fix(tiny_models, scorers, tmp_path):
    import shutil

    from transformers import LlamaTokenizer

    shutil.copytree(tiny_models["prm_math_shepherd"], tmp_path, dirs_exist_ok=True)
    (tmp_path / "tokenizer.json").unlink()
    # transformers 5 converts tokenizer.model alone without <s> and without SentencePiece's dummy prefix.
    converted = AutoTokenizer.from_pretrained(tmp_path)
    assert converted.convert_ids_to_tokens(converted.encode("+ -")) == ["+", "▁-"]
    with pytest.raises(ValueError, match=r"does not prepend its bos token '<s>'.*only tokenizer\.model"):
        MathShepherdPRM(str(tmp_path), device="cpu")
    # The fix the message gives restores the checkpoint's scores.
    LlamaTokenizer.from_pretrained(tmp_path, add_bos_token=True).save_pretrained(tmp_path)
    fixed = MathShepherdPRM(str(tmp_path), device="cpu")
    assert_close(fixed.score([QUESTION], [STEPS]), scorers["math_shepherd"].score([QUESTION], [STEPS]))


def prm_trainer_encoding(tokenizer) -> tuple[list[int], list[int]]:
    """QUESTION and STEPS as PRMTrainer.tokenize_row encoded them, and the label positions: the last token of each
    step + separator."""
    ids = tokenizer(QUESTION, add_special_tokens=False)["input_ids"]
    positions = []
    for step in STEPS:
        ids += tokenizer(step, add_special_tokens=False)["input_ids"] + tokenizer.encode("\n", add_special_tokens=False)
        positions.append(len(ids) - 1)
    return ids, positions


def test_token_classification_scores_match_prm_trainer_label_positions(tiny_models, scorers):
    path = tiny_models["prm_token_classification"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path).eval()
    ids, positions = prm_trainer_encoding(tokenizer)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    probabilities = logits.softmax(dim=-1)[:, 1]
    positions = torch.tensor(positions)
    assert _neighbour_differs(probabilities, positions)
    assert_close(scorers["token_classification"].score([QUESTION], [STEPS]), [probabilities[positions].tolist()])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_empty_step_lists_and_empty_batches(scorers, backend):
    scorer = scorers[backend]
    assert scorer.score([], []) == []
    assert scorer.score([QUESTION], [[]]) == [[]]
    scores = scorer.score([QUESTION, QUESTION, QUESTION], [[], STEPS, []])
    assert scores[0] == [] and scores[2] == []
    assert_close([scores[1]], scorer.score([QUESTION], [STEPS]))
    # Empty and whitespace-only steps still get a score each.
    assert len(scorer.score([QUESTION], [["", "  ", "2 + 2 = 4"]])[0]) == 3


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_long_inputs_keep_the_last_step_and_fill_cut_steps(tiny_models, backend):
    key, cls = BACKENDS[backend]
    long_question = QUESTION * 60
    many_steps = [f"Step work {index}: {index} + 1 = {index + 1}." for index in range(80)]
    scorer = cls(tiny_models[key], device="cpu", max_length=64)
    scores = scorer.score([long_question, "short"], [many_steps, STEPS])
    assert [len(row) for row in scores] == [80, 3]
    assert all(0.0 <= value <= 1.0 for row in scores for value in row)
    # Steps whose tag fell off take the earliest scored step's value; the last steps are all scored.
    first_kept = next(index for index, value in enumerate(scores[0]) if value != scores[0][0])
    assert first_kept > 1
    assert len(set(scores[0][: first_kept - 1])) == 1

    # With room for one token only, the last tag alone is scored and every step takes its score.
    single = cls(tiny_models[key], device="cpu", max_length=1).score([QUESTION], [STEPS])[0]
    assert len(set(single)) == 1


def test_truncation_drops_the_beginning_and_matches_the_model_on_what_is_kept(tiny_models):
    path = tiny_models["prm_token_classification"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path).eval()
    ids, positions = prm_trainer_encoding(tokenizer)
    max_length = len(ids) - positions[0] - 1  # drops exactly the tokens up to and including the first label
    kept = ids[-max_length:]
    with torch.no_grad():
        probabilities = model(input_ids=torch.tensor([kept])).logits[0].softmax(dim=-1)[:, 1]
    offset = len(ids) - max_length
    expected = [probabilities[positions[1] - offset].item(), probabilities[positions[2] - offset].item()]
    scores = TokenClassificationPRM(path, device="cpu", max_length=max_length).score([QUESTION], [STEPS])
    assert_close(scores, [[expected[0], *expected]])


def test_scorer_rejects_mismatched_inputs(scorers):
    scorer = scorers["qwen_math"]
    with pytest.raises(ValueError, match="prompts has 2 entries but steps has 1"):
        scorer.score([QUESTION, QUESTION], [STEPS])
    with pytest.raises(TypeError, match="steps must be a list"):
        scorer.score([QUESTION], ["not a list of steps"])
    with pytest.raises(TypeError, match="prompts must be a list"):
        scorer.score(QUESTION, [STEPS])


def test_constructor_argument_errors_name_the_argument(tiny_models):
    path = tiny_models["prm_qwen_math"]
    with pytest.raises(ValueError, match="batch_size"):
        QwenMathPRM(path, batch_size=0)
    with pytest.raises(ValueError, match="batch_size"):
        QwenMathPRM(path, batch_size=True)  # a bool is an int in Python, but never a batch size
    with pytest.raises(ValueError, match="max_length"):
        QwenMathPRM(path, max_length=0)
    with pytest.raises(ValueError, match="torch_dtype"):
        QwenMathPRM(path, torch_dtype="float42")
    with pytest.raises(ValueError, match="device"):
        QwenMathPRM(path, device="gpu-please")
    with pytest.raises(ValueError, match="<extra_0>"):
        QwenMathPRM(tiny_models["prm_token_classification"])
    with pytest.raises(ValueError, match="step_separator"):
        TokenClassificationPRM(tiny_models["prm_token_classification"], step_separator="")


def test_torch_dtype_is_applied(tiny_models):
    scorer = QwenMathPRM(tiny_models["prm_qwen_math"], device="cpu", torch_dtype="bfloat16")
    assert next(scorer.model.parameters()).dtype == torch.bfloat16
    scores = scorer.score([QUESTION], [STEPS])
    assert all(0.0 <= value <= 1.0 for value in scores[0])


def test_build_step_scorer(tiny_models):
    for prm_type, (key, cls) in BACKENDS.items():
        scorer = build_step_scorer(prm_type, tiny_models[key], batch_size=2, device="cpu")
        assert isinstance(scorer, cls) and scorer.batch_size == 2
    assert isinstance(build_step_scorer("symbolic"), SymbolicStepScorer)
    with pytest.raises(ValueError, match="unknown prm_type='qwen'.*qwen_math, math_shepherd"):
        build_step_scorer("qwen", tiny_models["prm_qwen_math"])
    with pytest.raises(ValueError, match="needs model_name_or_path"):
        build_step_scorer("qwen_math")


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("2 + 2 = 4", 1.0),
        ("2 + 2 = 5", 0.0),
        ("2 + 2 = 4, and 3 * 3 = 10", 0.5),
        ("2 + 2 = 4 and 3 * 3 = 10", 0.5),
        ("We add the two numbers.", 0.5),
        ("3 * 4 = 12", 1.0),
        ("First 3 < 7, then 9 > 10.", 0.5),
        ("x < 7", 0.5),
        ("2 + 2 = 4 = 8 / 2", 1.0),
        ("2 + 2 = 4 = 9", 0.5),
        ("1 <= 2 < 3, 4 != 5, 5 >= 6", 0.75),
        ("\\frac{1}{2} = 0.5", 1.0),
        ("$3 \\times 4 = 12$ and $\\frac{3}{10} = 0.4$", 0.5),
        ("\\sqrt{16} = 4 and \\pi > 3", 1.0),
        ("\\frac{\\frac{1}{2}}{2} = \\frac14", 1.0),
        ("0.1 + 0.2 = 0.3", 1.0),
        ("1/3 = 0.33", 1.0),
        ("2/3 = 0.66", 0.0),
        ("1,000 + 2,500 = 3,500", 1.0),
        ("50% = 0.5", 1.0),
        ("Janet sells 16 - 3 - 4 = 9 duck eggs a day.", 1.0),
        ("She makes 9 * 2 = $<<9*2=18>>18 every day.", 1.0),
        # Not checkable: variables, numbers inside phrases, units glued on, factorials.
        ("x + 3 = 5", 0.5),
        ("half of 10 = 5", 0.5),
        ("6 times 7 = 42", 0.5),
        ("2x = 8", 0.5),
        ("5! = 120", 0.5),
        ("3 = 2 + x", 0.5),
    ],
)
def test_symbolic_scorer_hand_cases(step, expected):
    assert SymbolicStepScorer().score([""], [[step]]) == [[expected]]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # Ratios are equal when a*d = b*c: 3*8 = 24 = 4*6; 3*9 = 27 != 24 = 4*6; 1.5*2 = 3 = 3*1; 3*2 = 6 != 4 = 4*1.
        ("The ratio is 3:4 = 6:8.", 1.0),
        ("The ratio is 3:4 = 6:9.", 0.0),
        ("3 : 4 = 6 : 8", 1.0),
        ("1.5:3 = 1:2", 1.0),
        ("3:4 != 1:2", 1.0),
        ("3:4 = 6:8 and 2 + 2 = 5", 0.5),
        # A ratio or a time against a number, an order between ratios, three terms, a zero term: not checkable.
        ("At 3:30 = 210 minutes", 0.5),
        ("3:4 = 0.75", 0.5),
        ("0.75 = 3:4", 0.5),
        ("2:1 > 1:2", 0.5),
        ("1:2:3 = 2:4:6", 0.5),
        ("3:0 = 6:0", 0.5),
        ("2 + 3:4 = 5", 0.5),
        ("The meeting ran 9:45 to 10:30 = 45 minutes.", 0.5),
        # A label's colon (glued to the number before it, a space after) still leaves the arithmetic checkable.
        ("Step 1: 3 * 4 = 12", 1.0),
        ("Step 2: 3 * 4 = 13", 0.0),
        ("At 3:30, 2 + 2 = 4", 1.0),
    ],
)
def test_symbolic_scorer_reads_colons_as_ratios_or_times_not_as_separators(step, expected):
    assert SymbolicStepScorer().score([""], [[step]]) == [[expected]]


@pytest.mark.parametrize(
    "step",
    [
        "10**10**10 = 5",
        "2^100000 = 1",
        "(10^100)^(10^2) > 1",
        "1/0 = 5",
        "((((",
        "= = =",
        "\\frac{",
        "∀ ε > 0",
        "a" * 50_000,
    ],
)
def test_symbolic_scorer_never_raises_and_bounds_work(step):
    assert SymbolicStepScorer(neutral_score=0.25).score(["q"], [[step]]) == [[0.25]]


def test_symbolic_scorer_shapes_and_neutral_validation():
    scorer = SymbolicStepScorer()
    assert scorer.score(["a", "b"], [[], ["2 + 2 = 4", "no math"]]) == [[], [1.0, 0.5]]
    with pytest.raises(ValueError, match="neutral_score"):
        SymbolicStepScorer(neutral_score=2)


def test_as_step_scorer_wraps_callables_and_checks_shapes():
    def lengths(prompts, steps):
        return [[len(step) / 100 for step in completion] for completion in steps]

    scorer = as_step_scorer(lengths)
    assert isinstance(scorer, StepScorer)
    assert scorer.score(["q", "r"], [["ab", "abcd"], []]) == [[0.02, 0.04], []]
    assert as_step_scorer(scorer) is scorer
    symbolic = as_step_scorer(SymbolicStepScorer())
    assert symbolic.score(["q"], [["2 + 2 = 4"]]) == [[1.0]]

    with pytest.raises(ValueError, match="returned 1 score lists for 2 completions"):
        as_step_scorer(lambda prompts, steps: [[0.5]]).score(["q", "r"], [["a"], ["b"]])
    with pytest.raises(ValueError, match="returned 1 scores for completion 0, which has 2 steps"):
        as_step_scorer(lambda prompts, steps: [[0.5]]).score(["q"], [["a", "b"]])
    with pytest.raises(ValueError, match="non-finite"):
        as_step_scorer(lambda prompts, steps: [[math.nan]]).score(["q"], [["a"]])
    with pytest.raises(TypeError, match="non-numeric"):
        as_step_scorer(lambda prompts, steps: [["high"]]).score(["q"], [["a"]])
    with pytest.raises(TypeError, match="must return a list"):
        as_step_scorer(lambda prompts, steps: 0.5).score(["q"], [["a"]])
    with pytest.raises(TypeError, match="StepScorer"):
        as_step_scorer(0.5)


@pytest.fixture(scope="module")
def qwen_tokenizer_on_a_causal_lm(tiny_models, tmp_path_factory):
    """A plain causal LM (the tiny policy's weights) behind the Qwen PRM's tokenizer, so only the weights are wrong."""
    target = tmp_path_factory.mktemp("qwen_tokenizer_causal_lm")
    AutoModelForCausalLM.from_pretrained(tiny_models["policy"]).save_pretrained(target)
    AutoTokenizer.from_pretrained(tiny_models["prm_qwen_math"]).save_pretrained(target)
    return str(target)


@pytest.mark.parametrize(
    ("backend", "checkpoint", "matching_type", "missing"),
    [
        ("math_shepherd", "prm_qwen_math", "qwen_math", "lm_head.weight"),
        ("math_shepherd", "prm_token_classification", "token_classification", "lm_head.weight"),
        ("token_classification", "prm_qwen_math", "qwen_math", "score.weight"),
        ("token_classification", "prm_math_shepherd", "math_shepherd", "score.weight"),
    ],
)
def test_scorer_on_another_prm_format_raises_instead_of_scoring_with_random_weights(
    tiny_models, backend, checkpoint, matching_type, missing
):
    path = tiny_models[checkpoint]
    with pytest.raises(ValueError) as raised:
        BACKENDS[backend][1](path, device="cpu")
    message = str(raised.value)
    assert f"prm_type={backend!r}" in message
    assert path in message
    assert missing in message
    assert f"prm_type={matching_type!r}" in message


@pytest.mark.parametrize(
    ("checkpoint", "matching_type", "lacking"),
    [
        # Mistral's SentencePiece tokenizer has no chat template, the Qwen-style one no <extra_0>.
        ("prm_math_shepherd", "math_shepherd", "chat_template"),
        ("prm_token_classification", "token_classification", "<extra_0>"),
    ],
)
def test_qwen_math_on_another_prm_format_names_the_matching_prm_type(tiny_models, checkpoint, matching_type, lacking):
    # Caught on the tokenizer, before any weight is loaded.
    with pytest.raises(ValueError, match=rf"prm_type=.qwen_math.*{lacking}.*prm_type={matching_type!r}"):
        QwenMathPRM(tiny_models[checkpoint], device="cpu")


def test_qwen_math_on_a_plain_causal_lm_raises_naming_the_missing_head(qwen_tokenizer_on_a_causal_lm):
    with pytest.raises(ValueError) as raised:
        QwenMathPRM(qwen_tokenizer_on_a_causal_lm, device="cpu")
    message = str(raised.value)
    assert "prm_type='qwen_math'" in message
    assert qwen_tokenizer_on_a_causal_lm in message
    assert "score.0.weight" in message
    assert "Qwen2ForCausalLM" in message and "prm_type='math_shepherd'" in message


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_scorer_on_its_own_format_loads_every_weight_from_the_checkpoint(tiny_models, scorers, backend):
    key, cls = BACKENDS[backend]
    reference = {
        "qwen_math": Qwen2ForProcessRewardModel,
        "math_shepherd": AutoModelForCausalLM,
        "token_classification": AutoModelForTokenClassification,
    }[backend].from_pretrained(tiny_models[key])
    loaded = scorers[backend].model.state_dict()
    for name, tensor in reference.state_dict().items():
        assert torch.equal(loaded[name], tensor), name


@pytest.mark.parametrize("path", ["/nonexistent", "no-such-org/no-such-prm", "empty-folder"])
def test_unloadable_checkpoint_names_the_field_and_the_fix(path, tmp_path):
    if path == "empty-folder":
        path = str(tmp_path)
    with pytest.raises(ValueError) as raised:
        QwenMathPRM(path, device="cpu")
    message = str(raised.value)
    assert f"PRM checkpoint {path!r}" in message
    assert "model_name_or_path" in message and "prm_model_name_or_path" in message
    assert "config.json" in message and "hub id" in message
    assert isinstance(raised.value.__cause__, (OSError, ValueError))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_device_without_cuda_names_the_device_and_the_fix(tiny_models, device):
    with pytest.raises(ValueError, match=r"device=.*cuda.*no CUDA device.*'cpu'"):
        resolve_device(device)
    with pytest.raises(ValueError, match=r"device=.*cuda.*no CUDA device"):
        QwenMathPRM(tiny_models["prm_qwen_math"], device=device)


def test_cuda_index_beyond_the_visible_devices_is_rejected(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match=r"device='cuda:2'.*2 CUDA devices.*cuda:0.*cuda:1"):
        resolve_device("cuda:2")


def test_cpu_and_default_devices_resolve():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cuda" if torch.cuda.is_available() else "cpu")
