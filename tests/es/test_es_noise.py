"""es_noise: a counter-based N(0, 1) generator that gives the same bits on every device and every run.

The values are pinned by SHA-256 digests of their float32 bits and by hard-coded values. Both were computed by a
second implementation of the documented algorithm, written independently of the torch ops (numpy, native uint32
wrap-around arithmetic, `frexp`/`where` decompositions instead of bit fields), which agreed with the torch ops bit for
bit on all of the cases below; a change of the generator changes a digest. The accuracy of the float stages is checked
against float64 `log`, `sqrt` and `cos` on every input they can see.
"""

import hashlib
import math

import numpy as np
import pytest
import torch

from trl_verigate.es import noise as noise_module
from trl_verigate.es.noise import add_scaled_noise, es_noise

# (seed, name, elements, first element counter): SHA-256 of the float32 bits of ε at counters first, first + 1, ...
# Counter ranges where a word boundary matters: 2^31 (the int32 sign of the low word), 2^32 and beyond (the high word).
INDEPENDENT_DIGESTS = {
    (6, "chunks", 300_000, 0): "66073416102a4105de69a7afeaaaae36dfbc875fc18796825050e3d99c9829ed",
    (8, "far", 3000, 2**31 - 1500): "553813de130c0dd2b3d41b21b84321440058b4b18f4714a18d64ddd6f363e73d",
    (8, "far", 3000, 2**32 - 1500): "035103818dfeb33185d47613166631365b14af0c8a99efa5491ad8d13ee3e25d",
    (0, "w", 7, 0): "769f667b1f5b9d64cac484476c7fd8b536e0f8c1320aa00c7095475a02976866",
    (12345, "model.layers.0.mlp.up_proj.weight", 561, 0): (
        "5ad8e8ab97daaf6ee790b00974a0a24deeb992d438780effdbde711df82785d2"
    ),
    (2**31 - 1, "b", 60, 0): "8b3c5f9cae93ce716b9e47cc801b36f2ed7378165a433456dc5c6b9f89fcad45",
    (9, "big", 6, 2**32 - 3): "861c070d3a17ac703f93fa145fb51bb8d4f9ca5462ca0a549c6c404d9f10beee",
    (3, "big", 40_000, 2**40 + 77): "e2ac39295775ed9231685054314c25cd80aa8d291fee665db6d2f3eec4b32f09",
    (5, "end", 50_000, 2**63 - 50_000): "23897ac62bdcde22cdb293221f526f20b7c8cb071078a01dd37b7ebbb4780b0f",
    (2**40 + 5, "ünïcode.bias", 10_000, 3 * 2**32 + 12_345): (
        "8f57ec6a81d9041ee053903677c80d61d004da9a7d71513b67cfa291097f5216"
    ),
}
# The two float stages on every input they depend on: sqrt(−2 ln u1) for u1 = (2k + 1)/2^24, k < 2^23, and
# cos(2π u2) for u2 = j/2^24, j < 2^24, in order of k and j.
RADIUS_DIGEST = "430b6a106bcfa9a5d2a033430ae4aa594c066a2efa8ea605da424992be6c9666"
COSINE_DIGEST = "5151e97dd220be284dabfddf533eb5ded21524f325c87ac9dc1443689f6a1436"

HARD_CODED = {
    # Computed when the generator was written (es-noise-v1); a change here means every saved ES run changes.
    (7, "w"): [
        0.11586128920316696,
        -1.0666918754577637,
        0.05391087755560875,
        -1.4967639446258545,
        -1.038760781288147,
        0.278131365776062,
    ],
    (2**31 - 1, "model.embed_tokens.weight"): [
        -0.7007086277008057,
        -0.8637095093727112,
        -0.1798536330461502,
        0.4635625183582306,
    ],
}


def bits_digest(values: torch.Tensor) -> str:
    return hashlib.sha256(values.contiguous().view(torch.int32).numpy().tobytes()).hexdigest()


def noise_at(seed: int, name: str, count: int, first: int) -> torch.Tensor:
    """ε of the element counters first, ..., first + count − 1 (counters past a tensor's size need this seam)."""
    out = torch.empty(count)
    noise_module._fill_noise(out, first, noise_module.noise_key(seed, name))
    return out


@pytest.mark.parametrize("case", list(INDEPENDENT_DIGESTS), ids=lambda case: f"{case[1]}@{case[3]}")
def test_values_equal_the_independent_implementations_bit_for_bit(case):
    seed, name, count, first = case
    values = es_noise(seed, name, (count,)) if first == 0 else noise_at(seed, name, count, first)
    assert values.dtype == torch.float32
    assert bits_digest(values) == INDEPENDENT_DIGESTS[case]


@pytest.mark.parametrize("chunk", [1000, 1024, 1 << 17])
def test_chunking_does_not_change_the_values(monkeypatch, chunk):
    """Chunks of any size, including ones that end at 2^31 and 2^32 (where the low word's sign or the high word
    changes) and ones longer than the tensor."""
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", chunk)
    for case in [(6, "chunks", 300_000, 0), (8, "far", 3000, 2**31 - 1500), (8, "far", 3000, 2**32 - 1500)]:
        assert bits_digest(noise_at(*case)) == INDEPENDENT_DIGESTS[case]


def test_counters_beyond_32_bits_do_not_alias_their_low_words():
    """hi32(i) enters the hash: 2^32 + k must not give the noise of k."""
    values = noise_at(9, "big", 6, 2**32 - 3)
    assert len(set(values.tolist())) == 6
    assert not torch.equal(values[3:], noise_at(9, "big", 3, 0))


def test_hard_coded_values():
    for (seed, name), values in HARD_CODED.items():
        assert es_noise(seed, name, (len(values),)).tolist() == values
    assert noise_module.NOISE_VERSION == "es-noise-v1"


def int32_bits(words: np.ndarray) -> torch.Tensor:
    """uint32 words as the int32 tensor with the same bits."""
    return torch.from_numpy(words.astype(np.uint32).view(np.int32).copy())


def test_radius_stage_on_every_u1():
    """sqrt(−2 ln u1) depends on 23 bits of mix32(x ^ k2) only: all 2^23 of them, with random bits in the 9 ignored
    low bits (which must not matter). Against the independent digest, and within 1e-6 relative of float64 math
    (float32 rounding is 6e-8 per operation; the stage has a few dozen)."""
    k = np.arange(0, 1 << 23, dtype=np.uint64)
    low_bits = np.random.default_rng(0).integers(0, 512, len(k), dtype=np.uint64)
    hashed = int32_bits((k << np.uint64(9)) | low_bits)
    buffers = noise_module._Buffers(len(k), "cpu")
    radius = noise_module._box_muller_radius(hashed, buffers.ints[0], buffers.floats[0], buffers.floats[1])
    assert bits_digest(radius) == RADIUS_DIGEST
    exact = np.sqrt(-2.0 * np.log((2.0 * k + 1.0) / 2.0**24))
    assert np.max(np.abs(radius.double().numpy() - exact) / exact) < 1e-6


def test_cosine_stage_on_every_u2():
    """cos(2π u2) depends on the top 24 bits of mix32(x ^ k3) only: all 2^24 of them, with random bits in the 8
    ignored low bits. Against the independent digest, and within 1e-6 of float64 math."""
    j = np.arange(0, 1 << 24, dtype=np.uint64)
    low_bits = np.random.default_rng(1).integers(0, 256, len(j), dtype=np.uint64)
    hashed = int32_bits((j << np.uint64(8)) | low_bits)
    cosine = noise_module._cos_two_pi(hashed, torch.empty(len(j)), torch.empty(len(j)))
    assert bits_digest(cosine) == COSINE_DIGEST
    assert np.max(np.abs(cosine.double().numpy() - np.cos(2.0 * math.pi * j / 2.0**24))) < 1e-6


def test_deterministic_and_out_parameter():
    first = es_noise(3, "layer.weight", (64, 32))
    out = torch.empty(64, 32)
    assert es_noise(3, "layer.weight", (64, 32), out=out) is out
    assert torch.equal(first, out)
    assert torch.equal(first, es_noise(3, "layer.weight", (64, 32)))
    # An element depends on its flat index only, not on the shape it sits in.
    assert torch.equal(first.flatten()[:100], es_noise(3, "layer.weight", (100,)))
    for shape in [(), (1,), (2, 0, 3)]:
        assert es_noise(3, "layer.weight", shape).shape == torch.Size(shape)
    assert es_noise(3, "layer.weight", ()).item() == first.flatten()[0].item()


def test_standard_normal_moments():
    x = es_noise(11, "moments", (1_000_000,)).double()
    # Standard errors at n = 1e6: mean 0.001, variance 0.0014, skewness 0.0025, kurtosis 0.005.
    assert abs(x.mean()) < 0.005
    assert abs(x.var() - 1) < 0.007
    assert abs((x**3).mean()) < 0.0125
    assert abs((x**4).mean() - 3) < 0.025
    # Tails: P(|x| > 2) = 0.0455, P(|x| > 3) = 0.0027 for N(0, 1).
    assert abs((x.abs() > 2).double().mean() - 0.0455) < 0.001
    assert abs((x.abs() > 3).double().mean() - 0.0027) < 0.0003
    assert torch.isfinite(x).all()


def test_equal_shape_tensors_with_one_seed_are_independent():
    """The public implementations' defect: one seed reused per tensor gives equal-shape tensors the same noise."""
    shape = (1000, 1000)
    q = es_noise(42, "layers.0.self_attn.q_proj.weight", shape).flatten().double()
    k = es_noise(42, "layers.0.self_attn.k_proj.weight", shape).flatten().double()
    other_seed = es_noise(43, "layers.0.self_attn.q_proj.weight", shape).flatten().double()
    # The correlation of independent samples has standard error 1/sqrt(n) = 0.001.
    assert abs(torch.corrcoef(torch.stack([q, k]))[0, 1]) < 0.005
    assert abs(torch.corrcoef(torch.stack([q, other_seed]))[0, 1]) < 0.005
    # Neighbouring elements are independent too (a weak hash would correlate consecutive counters).
    assert abs(torch.corrcoef(torch.stack([q[:-1], q[1:]]))[0, 1]) < 0.005


def test_bad_seed_is_refused():
    with pytest.raises(ValueError, match="non-negative int"):
        es_noise(-1, "w", (3,))
    with pytest.raises(ValueError, match="float32 tensor of shape"):
        es_noise(1, "w", (3,), out=torch.empty(4))


@pytest.mark.parametrize("in_place", [False, True], ids=["into out", "accumulate"])
@pytest.mark.parametrize("chunk", [1000, 1 << 15])
def test_add_scaled_noise_is_the_float32_product_then_sum(monkeypatch, in_place, chunk):
    """out = addend + f32(scale)·ε, two roundings, against es_noise and tensor arithmetic, across chunk boundaries;
    zero addends and a zero scale check the signs of zeros (+0 + (−0) = +0); a denormal scale gives denormal
    products, which must be kept, not flushed to zero."""
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", chunk)
    generator = torch.Generator().manual_seed(3)
    addend = torch.randn(50, 100, generator=generator)
    addend[:10] = 0.0
    for scale in (1e-3, -0.37, 0.0, -0.0, 1e-40):
        expected = addend + es_noise(12, "scaled", (50, 100)) * torch.tensor(scale, dtype=torch.float32)
        target = addend.clone()
        out = target if in_place else torch.full((50, 100), float("nan"))
        assert add_scaled_noise(out, target, 12, "scaled", scale) is out
        assert torch.equal(out.view(torch.int32), expected.view(torch.int32)), scale
    assert (add_scaled_noise(torch.empty(10), torch.zeros(10), 12, "scaled", 1e-40) != 0).any()


def test_add_scaled_noise_writes_strided_and_bfloat16_outputs_and_refuses_bad_operands():
    """A strided addend is read in row-major order; a strided or bf16 `out` receives the float32 result rounded to its
    dtype."""
    addend = torch.randn(40, 30).t()
    expected = addend + es_noise(2, "strided", (30, 40)) * torch.tensor(0.5, dtype=torch.float32)
    assert torch.equal(add_scaled_noise(torch.empty(30, 40), addend, 2, "strided", 0.5), expected)
    strided_out = torch.empty(40, 30).t()
    assert torch.equal(add_scaled_noise(strided_out, addend, 2, "strided", 0.5), expected)
    bf16_out = torch.empty(30, 40, dtype=torch.bfloat16)
    assert torch.equal(add_scaled_noise(bf16_out, addend, 2, "strided", 0.5), expected.to(torch.bfloat16))
    with pytest.raises(ValueError, match="w: needs a float32 `addend` and an `out` of its shape"):
        add_scaled_noise(torch.empty(3), torch.empty(4), 1, "w", 1.0)
    with pytest.raises(ValueError, match="float32 `addend`"):
        add_scaled_noise(torch.empty(3), torch.empty(3, dtype=torch.float64), 1, "w", 1.0)


def test_small_tensors_are_computed_together_with_the_values_of_each_alone(monkeypatch):
    """noise_batches groups consecutive tensors up to a chunk (a larger one alone); a group's noise, computed in one
    pass with a key per element, equals each tensor's own es_noise, for fp32, bf16 and strided outputs alike."""
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", 1000)
    generator = torch.Generator().manual_seed(4)
    shapes = {
        "norm.weight": (64,),
        "q.bias": (300,),
        "empty": (0,),
        "big.weight": (50, 30),
        "k.bias": (7, 9),
        "v": (600,),
    }
    addends = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    assert noise_module.noise_batches(addends) == [["norm.weight", "q.bias", "empty"], ["big.weight"], ["k.bias", "v"]]
    outs = {name: torch.empty(shape) for name, shape in shapes.items()}
    outs["q.bias"] = torch.empty(300, dtype=torch.bfloat16)
    outs["k.bias"] = torch.empty(9, 7).t()
    noise_module.add_scaled_noise_each({name: (outs[name], addends[name]) for name in shapes}, 13, -0.02)
    for name, shape in shapes.items():
        expected = addends[name] + es_noise(13, name, shape) * torch.tensor(-0.02, dtype=torch.float32)
        assert torch.equal(outs[name], expected.to(outs[name].dtype)), name
