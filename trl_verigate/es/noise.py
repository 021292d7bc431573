"""Counter-based Gaussian noise: the same float32 values for a (seed, name, index) on every device.

CPU and CUDA random streams differ for the same seed, so noise drawn from `torch.Generator` cannot be replayed on
another device. Here every element is a pure function of (seed, parameter name, element index):

    k0, k1, k2, k3 = the four 32-bit words of BLAKE2b-128("{seed}:{name}")         (in Python, device-free)
    x   = mix32(mix32(lo32(i) ^ k0) ^ hi32(i) ^ k1)                               (element counter i)
    u1  = (2·(mix32(x ^ k2) >> 9) + 1) / 2^24      ∈ (0, 1), never 0
    u2  = (mix32(x ^ k3) >> 8) / 2^24              ∈ [0, 1)
    ε_i = sqrt(−2·ln u1) · cos(2π·u2)                                             (Box–Muller)

with ln, cos and sqrt evaluated as `_log_unit`, `_cos_two_pi` and `_sqrt_positive` describe.

`mix32` is Wellons' lowbias32 integer hash. Integer steps run on int64 tensors with every product kept below 2^63
(a 32-bit multiply is split into 16-bit halves), so no op overflows. The float steps use only IEEE-754 operations that
are correctly rounded on every device (+, −, ×, ÷, frexp, round, abs, int/float bit casts), each as its own torch op so
no backend can fuse two roundings into one (FMA). ln, cos and sqrt are computed from those by fixed polynomials and
Newton steps for the same reason: libm's `log`/`cos` differ between CPU and CUDA in the last bit, and torch's CPU
`sqrt` is not correctly rounded (it differs from numpy's in the last bit for ~15% of float32 inputs). A BLAKE2b key per (seed, name) makes tensors of equal shape
independent, unlike reseeding one generator with the same seed per tensor.
"""

from __future__ import annotations

import hashlib
import math

import torch

# Bump when any step above changes: an es_state.json records it, and a replay with another version is refused.
NOISE_VERSION = "es-noise-v1"

MASK32 = 0xFFFFFFFF
LOWBIAS_MUL_1 = 0x7FEB352D
LOWBIAS_MUL_2 = 0x846CA68B
# Elements per chunk: bounds the int64 temporaries (about 10 live chunk-sized tensors) and keeps them cache-sized.
CHUNK_ELEMENTS = 1 << 18

# ln(m) = 2·atanh(s) with s = (m − 1)/(m + 1), |s| ≤ 0.1716 for m in [√½, √2]: 2·Σ s^(2k+1)/(2k+1), k ≤ 5.
LOG_SERIES = [1.0, 1.0 / 3.0, 1.0 / 5.0, 1.0 / 7.0, 1.0 / 9.0, 1.0 / 11.0]
# sin(t) on [−π/2, π/2]: Σ (−1)^k t^(2k+1)/(2k+1)!, k ≤ 6 (error below 1e-9).
SIN_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]
LN2 = math.log(2.0)
TWO_PI = 2.0 * math.pi
SQRT_HALF = math.sqrt(0.5)
SQRT_CHORD_SLOPE = (math.sqrt(2.0) - math.sqrt(0.5)) / 1.5


def noise_key(seed: int, name: str) -> tuple[int, int, int, int]:
    """The four 32-bit key words of (seed, name): BLAKE2b-128 of "{seed}:{name}", little-endian words."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"noise seed must be a non-negative int, got {seed!r}")
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=16).digest()
    return tuple(int.from_bytes(digest[4 * j : 4 * j + 4], "little") for j in range(4))


def _mul32(x: torch.Tensor, constant: int) -> torch.Tensor:
    """(x · constant) mod 2^32 for x in [0, 2^32), without any int64 product reaching 2^63."""
    low = (x & 0xFFFF) * constant
    high = (((x >> 16) * constant) & 0xFFFF) << 16
    return (low + high) & MASK32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """Wellons' lowbias32: x ^= x>>16; x *= 0x7feb352d; x ^= x>>15; x *= 0x846ca68b; x ^= x>>16 (mod 2^32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, LOWBIAS_MUL_1)
    x = x ^ (x >> 15)
    x = _mul32(x, LOWBIAS_MUL_2)
    return x ^ (x >> 16)


def _f32(value: float, device) -> torch.Tensor:
    """A float32 scalar tensor: the constant is rounded to float32 once, the same way on every device."""
    return torch.tensor(value, dtype=torch.float32, device=device)


def _polynomial(x: torch.Tensor, coefficients: list[float]) -> torch.Tensor:
    """Σ c_k x^k by Horner's rule, one rounded multiply and one rounded add per step."""
    result = _f32(coefficients[-1], x.device).expand_as(x).clone()
    for coefficient in reversed(coefficients[:-1]):
        result = result * x
        result = result + _f32(coefficient, x.device)
    return result


def _log_unit(u: torch.Tensor) -> torch.Tensor:
    """ln(u) for u in (0, 1): u = m·2^e with m in [√½, √2), ln u = e·ln2 + 2·atanh((m−1)/(m+1))."""
    mantissa, exponent = torch.frexp(u)  # mantissa in [0.5, 1)
    low = mantissa < _f32(SQRT_HALF, u.device)
    mantissa = torch.where(low, mantissa * _f32(2.0, u.device), mantissa)
    exponent = torch.where(low, exponent - 1, exponent)
    one = _f32(1.0, u.device)
    s = (mantissa - one) / (mantissa + one)
    series = _polynomial(s * s, LOG_SERIES) * s
    return exponent.to(torch.float32) * _f32(LN2, u.device) + series * _f32(2.0, u.device)


def _cos_two_pi(v: torch.Tensor) -> torch.Tensor:
    """cos(2πv) for v in [0, 1): with a = |v − round(v)| in [0, ½], cos(2πa) = −sin(2π(a − ¼)), |2π(a − ¼)| ≤ π/2."""
    a = torch.abs(v - torch.round(v))
    t = (a - _f32(0.25, v.device)) * _f32(TWO_PI, v.device)
    return -(_polynomial(t * t, SIN_SERIES) * t)


def _sqrt_positive(x: torch.Tensor) -> torch.Tensor:
    """sqrt(x) for x > 0: x = m·2^e with e even and m in [½, 2); y₀ = the chord of sqrt on [½, 2]
    (0.4714·(m + 1)), four Newton steps y ← (y + m/y)·½, then y·2^(e/2) with 2^(e/2) built from its exponent bits."""
    mantissa, exponent = torch.frexp(x)  # mantissa in [0.5, 1)
    odd = (exponent & 1) == 1
    mantissa = torch.where(odd, mantissa * _f32(2.0, x.device), mantissa)
    exponent = torch.where(odd, exponent - 1, exponent)
    y = (mantissa + _f32(1.0, x.device)) * _f32(SQRT_CHORD_SLOPE, x.device)
    for _ in range(4):
        y = (y + mantissa / y) * _f32(0.5, x.device)
    scale = ((exponent // 2 + 127).to(torch.int32) << 23).view(torch.float32)
    return y * scale


def _normal_from_counters(counters: torch.Tensor, key: tuple[int, int, int, int]) -> torch.Tensor:
    k0, k1, k2, k3 = key
    x = _mix32((counters & MASK32) ^ k0)
    x = _mix32(x ^ (counters >> 32) ^ k1)
    u1 = ((_mix32(x ^ k2) >> 9) * 2 + 1).to(torch.float32) * _f32(2.0**-24, counters.device)
    u2 = (_mix32(x ^ k3) >> 8).to(torch.float32) * _f32(2.0**-24, counters.device)
    radius = _sqrt_positive(_log_unit(u1) * _f32(-2.0, counters.device))
    return radius * _cos_two_pi(u2)


def es_noise(seed: int, name: str, shape, device=None, out: torch.Tensor | None = None) -> torch.Tensor:
    """ε(seed, name) ~ N(0, I) of `shape`, float32, bit-identical on every device (see the module docstring).

    Element i (row-major index) depends only on (seed, name, i): a slice of the noise of a larger tensor is the noise
    of the same indices. `out`, if given, is a float32 tensor of `shape` to write into (saves one allocation).
    """
    shape = torch.Size(shape)
    numel = shape.numel()
    key = noise_key(seed, name)
    if out is None:
        out = torch.empty(shape, dtype=torch.float32, device=device)
    elif out.shape != shape or out.dtype != torch.float32:
        raise ValueError(f"`out` must be a float32 tensor of shape {tuple(shape)}, got {out.dtype} {tuple(out.shape)}")
    flat = out.view(-1)
    for start in range(0, numel, CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, numel)
        counters = torch.arange(start, stop, dtype=torch.int64, device=flat.device)
        flat[start:stop] = _normal_from_counters(counters, key)
    return out
