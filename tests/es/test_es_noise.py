"""es_noise: a counter-based N(0, 1) generator that gives the same bits on every device.

The numpy twin below is a second implementation of the documented algorithm (native uint32 wrap-around arithmetic
instead of the int64 limb splitting torch needs, numpy float32 ops instead of torch ops); bitwise agreement with it,
plus values hard-coded when the generator was written, pins the generator down."""

import hashlib
import logging
import math
import shutil

import numpy as np
import pytest
import torch

from trl_verigate.es import noise as noise_module
from trl_verigate.es import noise_kernel
from trl_verigate.es.noise import es_noise

HAS_COMPILER = shutil.which(noise_kernel.compiler_command()[0]) is not None
needs_compiler = pytest.mark.skipif(not HAS_COMPILER, reason="no C compiler (CC or cc) to build the CPU noise kernel")


@pytest.fixture(params=["kernel", "torch ops"])
def cpu_path(request, monkeypatch):
    """Run a test through the C kernel (es_noise's CPU path) and again through the torch ops (the definition)."""
    if request.param == "kernel":
        if not HAS_COMPILER:
            pytest.skip("no C compiler (CC or cc) to build the CPU noise kernel")
        assert noise_kernel.load_kernel() is not None, "the CPU noise kernel did not build (see the logged warning)"

        def no_torch_ops(*args):
            raise AssertionError("the torch ops ran although the kernel is available")

        monkeypatch.setattr(noise_module, "_fill_noise_ops", no_torch_ops)
    else:
        monkeypatch.setattr(noise_kernel, "load_kernel", lambda: None)
    return request.param


F32 = np.float32


def numpy_mix32(x):
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def numpy_horner(x, coefficients):
    result = np.full_like(x, F32(coefficients[-1]))
    for c in reversed(coefficients[:-1]):
        result = result * x
        result = result + F32(c)
    return result


def numpy_sqrt(x):
    """The documented sqrt: x = m 2^e (e even, m in [1/2, 2)), chord start, 4 Newton steps, times 2^(e/2)."""
    mantissa, exponent = np.frexp(x)
    odd = (exponent % 2) == 1
    mantissa = np.where(odd, mantissa * F32(2), mantissa).astype(np.float32)
    exponent = np.where(odd, exponent - 1, exponent)
    y = (mantissa + F32(1)) * F32((math.sqrt(2) - math.sqrt(0.5)) / 1.5)
    for _ in range(4):
        y = (y + mantissa / y) * F32(0.5)
    return y * np.ldexp(F32(1), exponent // 2).astype(np.float32)


def numpy_es_noise(seed: int, name: str, numel: int, first: int = 0) -> np.ndarray:
    """The noise of element counters first, ..., first + numel - 1."""
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=16).digest()
    k0, k1, k2, k3 = (np.uint32(int.from_bytes(digest[4 * j : 4 * j + 4], "little")) for j in range(4))
    index = np.arange(first, first + numel, dtype=np.uint64)
    low = (index & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (index >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        x = numpy_mix32(numpy_mix32(low ^ k0) ^ high ^ k1)
        u1 = ((numpy_mix32(x ^ k2) >> np.uint32(9)).astype(np.float32) * F32(2) + F32(1)) * F32(2.0**-24)
        u2 = (numpy_mix32(x ^ k3) >> np.uint32(8)).astype(np.float32) * F32(2.0**-24)
    return numpy_radius(u1) * numpy_cosine(u2)


def numpy_radius(u1):
    """sqrt(-2 ln u1) as documented."""
    # ln u1 = e ln 2 + 2 atanh((m - 1)/(m + 1)), m in [sqrt(1/2), sqrt(2))
    mantissa, exponent = np.frexp(u1)
    low_mantissa = mantissa < F32(math.sqrt(0.5))
    mantissa = np.where(low_mantissa, mantissa * F32(2), mantissa).astype(np.float32)
    exponent = np.where(low_mantissa, exponent - 1, exponent)
    s = (mantissa - F32(1)) / (mantissa + F32(1))
    log_u1 = exponent.astype(np.float32) * F32(math.log(2.0)) + numpy_horner(
        s * s, [1.0, 1 / 3, 1 / 5, 1 / 7, 1 / 9, 1 / 11]
    ) * s * F32(2)
    return numpy_sqrt(log_u1 * F32(-2))


def numpy_cosine(u2):
    """cos(2 pi u2) as documented: -sin(2 pi (|u2 - round(u2)| - 1/4))."""
    t = (np.abs(u2 - np.round(u2)) - F32(0.25)) * F32(2 * math.pi)
    sine = numpy_horner(t * t, [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]) * t
    return -sine


@pytest.mark.parametrize(
    "seed,name,shape",
    [(0, "w", (7,)), (12345, "model.layers.0.mlp.up_proj.weight", (33, 17)), (2**31 - 1, "b", (3, 4, 5))],
)
def test_matches_the_numpy_twin_bit_for_bit(cpu_path, seed, name, shape):
    expected = numpy_es_noise(seed, name, math.prod(shape)).reshape(shape)
    actual = es_noise(seed, name, shape).numpy()
    assert actual.dtype == np.float32
    np.testing.assert_array_equal(actual.view(np.uint32), expected.view(np.uint32))


def test_chunking_does_not_change_the_values(monkeypatch):
    monkeypatch.setattr(noise_kernel, "load_kernel", lambda: None)  # chunks are the torch ops' only
    whole = es_noise(5, "x", (2500,))
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", 1000)
    assert torch.equal(es_noise(5, "x", (2500,)), whole)
    np.testing.assert_array_equal(whole.numpy().view(np.uint32), numpy_es_noise(5, "x", 2500).view(np.uint32))


def test_element_counters_beyond_32_bits_match_the_twin():
    """hi32(i) enters the hash: check it through the private counter function, with indices above 2^32."""
    counters = torch.arange(2**32 - 3, 2**32 + 3, dtype=torch.int64)
    values = noise_module._normal_from_counters(counters, noise_module.noise_key(9, "big"))
    assert len(set(values.tolist())) == 6  # 2^32 + k must not alias k
    low = noise_module._normal_from_counters(torch.arange(0, 3, dtype=torch.int64), noise_module.noise_key(9, "big"))
    assert not torch.equal(values[3:], low)


HARD_CODED = {
    # Produced once when the generator was written (es-noise-v1); a change here means every saved ES run changes.
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


def test_hard_coded_values(cpu_path):
    for (seed, name), values in HARD_CODED.items():
        assert es_noise(seed, name, (len(values),)).tolist() == values
    assert noise_module.NOISE_VERSION == "es-noise-v1"


def test_deterministic_and_out_parameter():
    first = es_noise(3, "layer.weight", (64, 32))
    out = torch.empty(64, 32)
    assert es_noise(3, "layer.weight", (64, 32), out=out) is out
    assert torch.equal(first, out)
    assert torch.equal(first, es_noise(3, "layer.weight", (64, 32)))
    # An element depends on its flat index only, not on the shape it sits in.
    assert torch.equal(first.flatten()[:100], es_noise(3, "layer.weight", (100,)))


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


def _as_int32_bits(words: np.ndarray) -> torch.Tensor:
    """uint32 words as the int32 tensor with the same bits."""
    return torch.from_numpy(words.astype(np.uint32).view(np.int32).copy())


def kernel_stages(hashed: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The C kernel's radius and cosine of the given hash words (its `es_noise_stages` entry point)."""
    library = noise_kernel.load_kernel()
    assert library is not None, "the CPU noise kernel did not build (see the logged warning)"
    radius, cosine = torch.empty(len(hashed)), torch.empty(len(hashed))
    library.es_noise_stages(
        hashed.data_ptr(), radius.data_ptr(), cosine.data_ptr(), len(hashed), *noise_module.KERNEL_CONSTANTS
    )
    return radius.numpy(), cosine.numpy()


def test_radius_stage_matches_the_twin_on_every_u1():
    """The radius sqrt(-2 ln u1) depends on 23 bits of mix32(x ^ k2) only: all 2^23 of them, against the twin (with
    random bits in the 9 ignored low bits, which must not matter), through the torch ops and the C kernel."""
    rng = np.random.default_rng(0)
    for first in range(0, 1 << 23, 1 << 21):
        k = np.arange(first, first + (1 << 21), dtype=np.uint64)
        hashed = _as_int32_bits((k << np.uint64(9)) | rng.integers(0, 512, len(k), dtype=np.uint64))
        buffers = noise_module._Buffers(len(k), "cpu")
        kernel_radius = kernel_stages(hashed)[0] if HAS_COMPILER else None
        actual = noise_module._box_muller_radius(hashed, buffers.ints[0], buffers.floats[0], buffers.floats[1])
        u1 = (k.astype(np.float32) * F32(2) + F32(1)) * F32(2.0**-24)
        expected = numpy_radius(u1).view(np.uint32)
        np.testing.assert_array_equal(actual.numpy().view(np.uint32), expected)
        if HAS_COMPILER:
            np.testing.assert_array_equal(kernel_radius.view(np.uint32), expected)


def test_cosine_stage_matches_the_twin_on_every_u2():
    """cos(2 pi u2) depends on the top 24 bits of mix32(x ^ k3) only: all 2^24 of them, against the twin, through the
    torch ops and the C kernel."""
    rng = np.random.default_rng(1)
    for first in range(0, 1 << 24, 1 << 22):
        j = np.arange(first, first + (1 << 22), dtype=np.uint64)
        hashed = _as_int32_bits((j << np.uint64(8)) | rng.integers(0, 256, len(j), dtype=np.uint64))
        kernel_cosine = kernel_stages(hashed)[1] if HAS_COMPILER else None
        out, square = torch.empty(len(j)), torch.empty(len(j))
        actual = noise_module._cos_two_pi(hashed, out, square)
        expected = numpy_cosine(j.astype(np.float32) * F32(2.0**-24)).view(np.uint32)
        np.testing.assert_array_equal(actual.numpy().view(np.uint32), expected)
        if HAS_COMPILER:
            np.testing.assert_array_equal(kernel_cosine.view(np.uint32), expected)


@pytest.mark.parametrize("chunk", [1000, 1024])
@pytest.mark.parametrize("first", [2**31 - 1500, 2**32 - 1500])
def test_counters_across_2_to_the_31_and_32_match_the_twin(cpu_path, monkeypatch, chunk, first):
    """Chunks split at multiples of 2^31 (the int32 sign of the low word) and 2^32 (the high word); unaligned chunk
    starts (chunk 1000) take the add path, aligned ones (chunk 1024 after the boundary) the xor path."""
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", chunk)
    out = torch.empty(3000)
    noise_module._fill_noise(out, first, noise_module.noise_key(8, "far"))
    expected = numpy_es_noise(8, "far", 3000, first=first)
    np.testing.assert_array_equal(out.numpy().view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("chunk", [1000, 4096, 1 << 17])
def test_every_chunk_path_matches_the_twin(monkeypatch, chunk):
    """Unaligned chunks (add the offsets), aligned chunks of at most 2^16 (mix32's first step folded into the
    counter xor) and aligned larger chunks (the accelerator chunking: a plain xor)."""
    monkeypatch.setattr(noise_kernel, "load_kernel", lambda: None)
    monkeypatch.setattr(noise_module, "CHUNK_ELEMENTS", chunk)
    values = es_noise(6, "chunks", (300_000,))
    np.testing.assert_array_equal(values.numpy().view(np.uint32), numpy_es_noise(6, "chunks", 300_000).view(np.uint32))


# Counter ranges where a word boundary matters (2^31: the int32 sign of the low word; 2^32 and beyond: the high word).
FAR_STARTS = [0, 1, 2**31 - 7_000, 2**32 - 7_000, 2**32, 3 * 2**32 + 12_345, 2**40 + 77, 2**63 - 50_000]


@needs_compiler
def test_kernel_equals_the_torch_ops_and_the_twin_on_many_tensors():
    """Random (seed, name, size, first counter) through both CPU paths and the numpy twin, bit for bit."""
    rng = np.random.default_rng(2)
    names = ["w", "model.layers.3.self_attn.o_proj.weight", "lm_head.weight", "ünïcode.bias", ""]
    for case in range(24):
        seed = int(rng.integers(0, 2**40)) if case % 3 else case
        name = names[case % len(names)]
        size = int(rng.integers(1, 40_000))
        first = FAR_STARTS[case % len(FAR_STARTS)]
        key = noise_module.noise_key(seed, name)
        kernel, ops = torch.empty(size), torch.empty(size)
        noise_module._fill_noise(kernel, first, key)
        noise_module._fill_noise_ops(ops, first, key)
        expected = numpy_es_noise(seed, name, size, first=first).view(np.uint32)
        np.testing.assert_array_equal(ops.numpy().view(np.uint32), expected)
        np.testing.assert_array_equal(kernel.numpy().view(np.uint32), expected)


@needs_compiler
def test_es_noise_uses_the_kernel_for_any_shape_on_the_cpu(monkeypatch):
    """es_noise of several shapes (the flat row-major order) through the kernel equals the torch ops' values."""
    assert noise_kernel.load_kernel() is not None
    shapes = [(), (1,), (3, 5, 7), (1536, 40), (2, 0, 3)]
    with_kernel = [es_noise(31, "shaped", shape) for shape in shapes]
    monkeypatch.setattr(noise_kernel, "load_kernel", lambda: None)
    for shape, values in zip(shapes, with_kernel, strict=True):
        assert values.shape == torch.Size(shape)
        assert torch.equal(values.view(torch.int32), es_noise(31, "shaped", shape).view(torch.int32))


@pytest.mark.parametrize(
    "compiler", ["/nonexistent/cc", "cc -fno-such-option-anywhere"], ids=["no compiler", "build fails"]
)
def test_without_the_kernel_the_torch_ops_give_the_same_values_and_one_warning(
    kernel_cache, monkeypatch, caplog, compiler
):
    if compiler.startswith("cc") and not HAS_COMPILER:
        pytest.skip("no cc to make a failing build with")
    monkeypatch.setenv("CC", compiler)
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        first = es_noise(7, "w", (6,))
        second = es_noise(8, "far", (3000,))
    warnings = [record for record in caplog.records if record.name == noise_kernel.__name__]
    assert len(warnings) == 1 and "torch ops" in warnings[0].getMessage()
    assert first.tolist() == HARD_CODED[(7, "w")]
    np.testing.assert_array_equal(second.numpy().view(np.uint32), numpy_es_noise(8, "far", 3000).view(np.uint32))
    assert not list(kernel_cache.glob("*.so"))


@needs_compiler
def test_the_kernel_is_built_once_into_the_cache(kernel_cache, kernel_builds):
    assert noise_kernel.load_kernel() is not None
    libraries = list(kernel_cache.glob("noise_kernel-*.so"))
    assert len(kernel_builds) == 1 and len(libraries) == 1
    for flag in ("-ffp-contract=off", "-fno-fast-math", "-fno-unsafe-math-optimizations"):
        assert flag in kernel_builds[0]
    noise_kernel.forget_kernel()
    assert noise_kernel.load_kernel() is not None  # a second process: loads the cached library, builds nothing
    assert len(kernel_builds) == 1
    assert es_noise(7, "w", (6,)).tolist() == HARD_CODED[(7, "w")]
    assert not [path for path in kernel_cache.iterdir() if path not in libraries]  # no scratch left behind


@pytest.mark.parametrize("in_place", [False, True], ids=["into out", "accumulate"])
def test_add_scaled_noise_is_the_float32_product_then_sum(cpu_path, in_place):
    """out = addend + f32(scale)·ε, two roundings, against es_noise and tensor arithmetic; zero addends and a zero
    scale check the signs of zeros (+0 + (−0) = +0)."""
    generator = torch.Generator().manual_seed(3)
    addend = torch.randn(5000, generator=generator)
    addend[:1000] = 0.0
    for scale in (1e-3, -0.37, 0.0, -0.0):
        expected = addend + es_noise(12, "scaled", (5000,)) * torch.tensor(scale, dtype=torch.float32)
        target = addend.clone()
        out = target if in_place else torch.full((5000,), float("nan"))
        assert noise_module.add_scaled_noise(out, target, 12, "scaled", scale) is out
        np.testing.assert_array_equal(out.numpy().view(np.uint32), expected.numpy().view(np.uint32))
    with pytest.raises(ValueError, match="float32 `out` and `addend` of one shape"):
        noise_module.add_scaled_noise(torch.empty(3), torch.empty(4), 1, "w", 1.0)
