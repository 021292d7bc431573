import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from tests.launch import REPO_ROOT
from trl_verigate.rewards.prm import Qwen2ForProcessRewardModel
from trl_verigate.tiny import build_tiny_models

EXPECTED_NAMES = {"policy", "prm_qwen_math", "prm_math_shepherd", "prm_token_classification"}


@pytest.mark.slow  # builds all four tiny models in a subprocess: ~11 s
def test_cli_builds_and_prints_paths(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "trl_verigate.tiny", str(tmp_path / "cli")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        check=True,
    )
    paths = json.loads(result.stdout)
    assert set(paths) == EXPECTED_NAMES
    for path in paths.values():
        assert Path(path).is_absolute()
        assert (Path(path) / "config.json").is_file()
        assert (Path(path) / "tokenizer.json").is_file()


def test_cli_without_directory_shows_usage():
    result = subprocess.run([sys.executable, "-m", "trl_verigate.tiny"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 2
    assert "out_dir" in result.stderr


def test_rebuild_reuses_complete_models_and_replaces_incomplete_ones(tmp_path):
    first = build_tiny_models(tmp_path)
    weights = Path(first["policy"]) / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    assert build_tiny_models(tmp_path) == first
    assert weights.stat().st_mtime_ns == mtime

    # A model folder without the completion marker (e.g. an interrupted build) is rebuilt, identically.
    shepherd = Path(first["prm_math_shepherd"])
    reference = (shepherd / "model.safetensors").read_bytes()
    (shepherd / ".tiny_complete").unlink()
    (shepherd / "model.safetensors").write_bytes(b"truncated")
    assert build_tiny_models(tmp_path) == first
    assert (shepherd / "model.safetensors").read_bytes() == reference
    assert weights.stat().st_mtime_ns == mtime


def test_builds_are_deterministic(tmp_path, tiny_models):
    other = build_tiny_models(tmp_path)
    for name in EXPECTED_NAMES:
        files = sorted(path.name for path in Path(tiny_models[name]).iterdir())
        assert "model.safetensors" in files and "tokenizer.json" in files
        assert sorted(path.name for path in Path(other[name]).iterdir()) == files
        for file_name in files:
            assert (Path(other[name]) / file_name).read_bytes() == (Path(tiny_models[name]) / file_name).read_bytes()


def test_hub_is_offline_in_tests(tmp_path, monkeypatch):
    """A hub id that is not cached fails to load without one DNS look-up or connection.

    The loads below would silently hit the network if the offline switches were missing, or were set after
    huggingface_hub had read them (it reads HF_HUB_OFFLINE once, at import).
    """
    import socket

    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(args)
        raise OSError("a test tried to reach the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(OSError):
        AutoConfig.from_pretrained("Qwen/Qwen2.5-Math-PRM-7B", cache_dir=str(tmp_path))
    assert attempts == []


def test_tokenizer_round_trips_unicode_math_and_has_qwen_special_tokens(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    for text in ["ℕ → ∀ ⊢ √ π", "Natalia sold 48/2 = 24 clips.\n#### 72", "\\frac{1}{2} = \\boxed{0.5}"]:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
    assert 900 <= len(tokenizer) <= 2100
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    for special in ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]:
        assert tokenizer.encode(special, add_special_tokens=False) == [tokenizer.convert_tokens_to_ids(special)]


def test_chat_template_is_chatml_with_generation_prompt(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"
    )
    without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert not without.endswith("<|im_start|>assistant\n")
    parts = [{"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]}]
    assert tokenizer.apply_chat_template(parts, tokenize=False) == "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n"


def test_policy_generates_and_stops_at_eos(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"])
    assert model.config.architectures == ["Qwen2ForCausalLM"]
    assert model.config.tie_word_embeddings
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    output = model.generate(**prompt, max_new_tokens=8, do_sample=True, top_k=0)
    assert output.shape[0] == 1
    assert prompt["input_ids"].shape[1] < output.shape[1] <= prompt["input_ids"].shape[1] + 8


def test_qwen_math_prm_is_in_the_hub_checkpoint_format(tiny_models):
    path = tiny_models["prm_qwen_math"]
    config = AutoConfig.from_pretrained(path)
    assert config.architectures == ["Qwen2ForProcessRewardModel"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    tag_id = tokenizer.convert_tokens_to_ids("<extra_0>")
    assert tokenizer.encode("a<extra_0>b", add_special_tokens=False)[1] == tag_id
    model = Qwen2ForProcessRewardModel.from_pretrained(path)
    state_keys = set(model.state_dict())
    assert {
        "score.0.weight",
        "score.0.bias",
        "score.2.weight",
        "score.2.bias",
        "model.embed_tokens.weight",
    } <= state_keys
    logits = model(input_ids=torch.tensor([[tag_id, tag_id]])).logits
    assert logits.shape == (1, 2, 2)


def test_math_shepherd_prm_has_a_sentencepiece_tokenizer_like_mistrals(tiny_models):
    path = Path(tiny_models["prm_math_shepherd"])
    assert (path / "tokenizer.model").is_file() and (path / "tokenizer.json").is_file()
    backend = json.loads((path / "tokenizer.json").read_text())
    assert backend["model"]["type"] == "BPE" and backend["model"]["byte_fallback"] is True
    assert backend["pre_tokenizer"]["type"] == "Metaspace" and backend["pre_tokenizer"]["replacement"] == "▁"
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert (tokenizer.unk_token, tokenizer.bos_token, tokenizer.eos_token) == ("<unk>", "<s>", "</s>")
    assert tokenizer.convert_tokens_to_ids(["<unk>", "<s>", "</s>", "<0x00>", "<0x0A>"]) == [0, 1, 2, 3, 13]
    # The labels are pieces with the word-start marker, as "▁+"/"▁-" (ids 648/387) in Mistral's vocabulary, and
    # the bare "+"/"-" (as in "48+24") are other pieces, so picking the wrong one would be caught.
    labels = tokenizer.convert_tokens_to_ids(["▁+", "▁-", "+", "-"])
    assert tokenizer.unk_token_id not in labels and len(set(labels)) == 4
    # The model card's reading: encode("+ -") gives <s> and the two label pieces.
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("+ -")) == ["<s>", "▁+", "▁-"]


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        # After a space (how the scorer writes every tag) "ки" is the single piece "▁ки"; a newline has no piece
        # of its own and falls back to its byte, as in Mistral's vocabulary; digits are split one by one.
        ("12. ки\nStep", ["▁", "1", "2", ".", "▁ки", "<0x0A>", "S", "tep"]),
        ("ки", ["▁ки"]),
        # Glued to the text before it, the tag is the piece without the marker.
        ("12.ки", ["▁", "1", "2", ".", "ки"]),
        ("48+24", ["▁", "4", "8", "+", "2", "4"]),
    ],
)
def test_math_shepherd_tokenizer_splits_the_tag_like_sentencepiece(tiny_models, text, pieces):
    import sentencepiece

    path = Path(tiny_models["prm_math_shepherd"])
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.tokenize(text) == pieces
    # transformers' tokenizer.json says what the SentencePiece model itself says.
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path / "tokenizer.model"))
    assert processor.encode(text, out_type=str) == pieces


def test_math_shepherd_tokenizer_round_trips_text_through_byte_fallback(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["prm_math_shepherd"])
    for text in ["ℕ → ∀ ⊢ √ π", "Step 1: 48/2 = 24 ки\nStep 2: 48 + 24 = 72 ки", "∮ 😀 x"]:
        ids = tokenizer.encode(text)
        assert ids[0] == tokenizer.bos_token_id
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert "<0xF0>" in tokenizer.tokenize("😀")  # a character the corpus never had is spelled in bytes


def test_math_shepherd_prm_model_matches_its_tokenizer(tiny_models):
    path = tiny_models["prm_math_shepherd"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.architectures == ["MistralForCausalLM"]
    assert model.config.vocab_size == len(tokenizer)
    assert (model.config.bos_token_id, model.config.eos_token_id) == (1, 2)


def test_token_classification_prm_has_two_labels(tiny_models):
    model = AutoModelForTokenClassification.from_pretrained(tiny_models["prm_token_classification"])
    assert model.config.num_labels == 2


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_every_tokenizer_loads_the_same_way_through_auto_and_raw_tokenizers(tiny_models, name):
    from tokenizers import Tokenizer

    text = "Step 1: 3 * 4 = 12 ки\n ℕ → ∀ ⊢ √ π \\frac{1}{2}"
    auto = AutoTokenizer.from_pretrained(tiny_models[name])
    raw = Tokenizer.from_file(str(Path(tiny_models[name]) / "tokenizer.json"))
    assert auto.encode(text, add_special_tokens=False) == raw.encode(text, add_special_tokens=False).ids


def test_midsize_config_has_qwen2_5_0_5b_parameter_count():
    """494,032,768 parameters, counted by hand from Qwen2.5-0.5B's shape: tied 151936 x 896 embedding, 24 layers of
    q (896 x 896 + bias), k and v (896 x 128 + bias each: 2 KV heads of 64), o (896 x 896), gate/up/down
    (3 x 896 x 4864) and two norms, plus the final norm."""
    from transformers import Qwen2ForCausalLM

    from trl_verigate.tiny import _padded_tokenizer, midsize_policy_config

    hidden, kv, inner = 896, 128, 4864
    layer = (hidden * hidden + hidden) + 2 * (hidden * kv + kv) + hidden * hidden + 3 * hidden * inner + 2 * hidden
    by_hand = 151936 * hidden + 24 * layer + hidden
    assert by_hand == 494_032_768
    tokenizer = _padded_tokenizer(151936)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(midsize_policy_config(tokenizer))
    assert sum(param.numel() for param in model.parameters()) == by_hand


@pytest.mark.slow  # one 0.5B-wide layer and the 151936-token embedding: ~10 s
def test_midsize_policy_builds_offline_and_every_sampled_id_decodes(tmp_path, tiny_models):
    from trl_verigate.tiny import build_midsize_policy

    path = build_midsize_policy(tmp_path, num_hidden_layers=1)
    assert build_midsize_policy(tmp_path, num_hidden_layers=1) == path  # reused, not rebuilt
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.vocab_size == len(tokenizer) == 151936 and model.dtype == torch.bfloat16
    assert model.config.hidden_size == 896 and model.config.num_hidden_layers == 1
    # Text tokenizes as with the tiny policy's tokenizer; the fillers only make high ids decodable.
    tiny = AutoTokenizer.from_pretrained(tiny_models["policy"])
    text = "Natalia sold 48/2 = 24 clips in May. √49 = 7"
    assert tokenizer(text)["input_ids"] == tiny(text)["input_ids"]
    assert tokenizer.decode([151935, 1030]) == "<fill151935><fill1030>"
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "2 + 2?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(chat)["input_ids"]
    out = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=True)
    assert len(tokenizer.decode(out[0, len(ids) :])) > 0
