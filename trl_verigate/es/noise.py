"""Counter-based Gaussian noise: the same float32 values for a (seed, name, index) on every device, from torch ops.

CPU and CUDA random streams differ for the same seed, so noise drawn from `torch.Generator` cannot be replayed on
another device. Here every element is a pure function of (seed, parameter name, element index):

    k0, k1, k2, k3 = the four 32-bit words of BLAKE2b-128("{seed}:{name}")         (in Python, device-free)
    x   = mix32(mix32(lo32(i) ^ k0) ^ hi32(i) ^ k1)                               (element counter i)
    u1  = (2·(mix32(x ^ k2) >> 9) + 1) / 2^24      ∈ (0, 1), never 0
    u2  = (mix32(x ^ k3) >> 8) / 2^24              ∈ [0, 1)
    ε_i = sqrt(−2·ln u1) · cos(2π·u2)                                             (Box–Muller)

with ln, sqrt and cos evaluated as `_box_muller_radius` and `_cos_two_pi` describe.

`mix32` is Wellons' lowbias32 integer hash. The float steps use only IEEE-754 operations that are correctly rounded
on every device (+, −, ×, ÷, int/float conversions and bit casts), each as its own torch op so no backend can fuse two
roundings into one (FMA). ln, cos and sqrt are computed from those by fixed polynomials and Newton steps for the same
reason: libm's `log`/`cos` differ between CPU and CUDA in the last bit, and torch's CPU `sqrt` is not correctly
rounded (it differs from numpy's in the last bit for ~15% of float32 inputs). A BLAKE2b key per (seed, name) makes
tensors of equal shape independent, unlike reseeding one generator with the same seed per tensor.

How it is computed (the values above are the definition; this is only how torch reaches them on any device):

- Chunks of `CHUNK_ELEMENTS` (CPU) or `ACCELERATOR_CHUNK_ELEMENTS` run through preallocated int32/float32 buffers
  with in-place ops and 0-dim constant operands, so the ~115 elementwise steps of a chunk stay in the CPU's L2 cache,
  allocate nothing and convert no Python number per op.
- The hash runs on int32 words: products wrap mod 2^32 in two's complement, logical right shifts are arithmetic
  shifts masked to the shifted width.
- The float stages read exponents and mantissas from the bits instead of `frexp`/`where`: the decompositions
  `_box_muller_radius` defines are unique, so any exact way of reaching them gives the same bits.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import struct

import torch

# Bump when any value above changes: an es_state.json records it, and a replay with another version is refused.
NOISE_VERSION = "es-noise-v1"

MASK32 = 0xFFFFFFFF
LOWBIAS_MUL_1 = 0x7FEB352D
LOWBIAS_MUL_2 = 0x846CA68B
# Elements per chunk on the CPU: torch's parallel grain (32768 elements), so every op of a chunk runs in one thread
# (torch splits an op into ceil(elements / grain) tasks). A parallel op waits at a barrier for its second thread, and
# on a shared or oversubscribed CPU that wait (a scheduler time slice) costs more than the op: measured 2 M vs 17 M
# elements/s at 2^16 vs 2^15 with 2 threads under load. The chunk buffers (1 MiB) stay in L2 and each op is long
# enough that dispatch is a small part of it.
CHUNK_ELEMENTS = 1 << 15
# On an accelerator each op is a kernel launch: larger chunks (8 buffers of 16 MiB, 128 MiB) keep the launches few.
ACCELERATOR_CHUNK_ELEMENTS = 1 << 22


def _f32(value: float) -> float:
    """`value` rounded to float32 once (in Python), so a scalar operand means the same float32 on every device."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _f32_bits(value: float) -> int:
    return struct.unpack("<i", struct.pack("<f", value))[0]


# ln(m) = 2·atanh(s) with s = (m − 1)/(m + 1), |s| ≤ 0.1716 for m in [√½, √2]: 2·Σ s^(2k+1)/(2k+1), k ≤ 5.
LOG_SERIES = [1.0, 1.0 / 3.0, 1.0 / 5.0, 1.0 / 7.0, 1.0 / 9.0, 1.0 / 11.0]
# sin(t) on [−π/2, π/2]: Σ (−1)^k t^(2k+1)/(2k+1)!, k ≤ 6 (error below 1e-9).
SIN_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]
LN2 = math.log(2.0)
TWO_PI = 2.0 * math.pi
SQRT_HALF = math.sqrt(0.5)
SQRT_CHORD_SLOPE = (math.sqrt(2.0) - math.sqrt(0.5)) / 1.5

_LOG_SERIES_F32 = [_f32(c) for c in LOG_SERIES]
_SIN_SERIES_F32 = [_f32(c) for c in SIN_SERIES]
# −2·f32(ln 2) is exact in float32 (a power-of-two multiple).
_MINUS_TWO_LN2_F32 = -2.0 * _f32(LN2)
# f32(2π)·2^-24 is exact in float32: a product by it is the product by 2^-24 (exact) then by f32(2π).
_TWO_PI_OVER_2_24 = _f32(TWO_PI) * 2.0**-24
_SQRT_CHORD_SLOPE_F32 = _f32(SQRT_CHORD_SLOPE)
_SQRT_HALF_BITS = _f32_bits(SQRT_HALF)
_HALF_BITS = _f32_bits(0.5)


def noise_key(seed: int, name: str) -> tuple[int, int, int, int]:
    """The four 32-bit key words of (seed, name): BLAKE2b-128 of "{seed}:{name}", little-endian words."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"noise seed must be a non-negative int, got {seed!r}")
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=16).digest()
    return tuple(int.from_bytes(digest[4 * j : 4 * j + 4], "little") for j in range(4))


def _signed32(word: int) -> int:
    """The int32 whose bits are the uint32 `word`."""
    word &= MASK32
    return word - (1 << 32) if word >= 1 << 31 else word


@functools.lru_cache(maxsize=None, typed=True)
def _constant(value: int | float, device: torch.device) -> torch.Tensor:
    """A 0-dim int32 (for an int) or float32 (for a float) operand on `device`: a Python number costs a conversion
    per op, which at ~120 ops per chunk is most of the time for small chunks. Only the module's fixed constants go
    through here (the cache never grows with seeds or scales)."""
    return torch.tensor(value, dtype=torch.int32 if isinstance(value, int) else torch.float32, device=device)


class _Buffers:
    """Chunk-sized scratch tensors: `counters` (0, 1, ..., size − 1), three int32 (the hash state, a second hash,
    exponents and shift temporaries), three float32 (each also read as int32 bits where a step works on a float's
    exponent and mantissa, and the other way) and `noise`, where a chunk's ε lands when it is not written straight
    into its destination."""

    def __init__(self, size: int, device):
        self.counters = torch.arange(size, dtype=torch.int32, device=device)
        self.ints = [torch.empty(size, dtype=torch.int32, device=device) for _ in range(3)]
        self.floats = [torch.empty(size, dtype=torch.float32, device=device) for _ in range(3)]
        self.noise = torch.empty(size, dtype=torch.float32, device=device)


def _shift_right_logical_xor_(x: torch.Tensor, shift: int, scratch: torch.Tensor) -> None:
    """x ^= x >>> shift on the uint32 bits of int32 `x` (an arithmetic shift, its sign copies masked off)."""
    torch.bitwise_right_shift(x, _constant(shift, x.device), out=scratch)
    scratch.bitwise_and_(_constant((1 << (32 - shift)) - 1, x.device))
    x.bitwise_xor_(scratch)


def _mix32_(x: torch.Tensor, scratch: torch.Tensor) -> None:
    """Wellons' lowbias32 in place: x ^= x>>16; x *= 0x7feb352d; x ^= x>>15; x *= 0x846ca68b; x ^= x>>16 (mod 2^32).

    The products are int32 products with the constants' int32 bit patterns: they wrap mod 2^32 (two's complement)
    in torch's CPU and CUDA kernels."""
    _shift_right_logical_xor_(x, 16, scratch)
    x.mul_(_constant(_signed32(LOWBIAS_MUL_1), x.device))
    _shift_right_logical_xor_(x, 15, scratch)
    x.mul_(_constant(_signed32(LOWBIAS_MUL_2), x.device))
    _shift_right_logical_xor_(x, 16, scratch)


def _polynomial_(result: torch.Tensor, x: torch.Tensor, coefficients: list[float]) -> torch.Tensor:
    """result ← Σ c_k x^k by Horner's rule (c_n·x, + c_{n−1}, ·x, ..., + c_0), one rounded op per step."""
    torch.mul(x, _constant(coefficients[-1], x.device), out=result)
    for position, coefficient in enumerate(reversed(coefficients[:-1])):
        if position:
            result.mul_(x)
        result.add_(_constant(coefficient, x.device))
    return result


def _cos_two_pi(hashed: torch.Tensor, out: torch.Tensor, square: torch.Tensor) -> torch.Tensor:
    """cos(2π·u2), u2 = (h >>> 8)/2^24, for the int32 bits h in `hashed` (overwritten), into float32 `out`.

    With a = |u2 − round(u2)| in [0, ½]: cos(2πa) = −sin(2π(a − ¼)), |2π(a − ¼)| ≤ π/2, t = (a − ¼)·f32(2π) and
    cos = −(P_sin(t·t)·t), P_sin the SIN_SERIES polynomial. In integers, with j = h >>> 8: a − ¼ = e/2^24 exactly
    for e = 2^22 − |j − 2^23|, and j − 2^23 = (h ^ 2^31) >> 8 (an arithmetic shift). So t' = −t = e·(−f32(2π)/2^24)
    and cos = P_sin(t'·t')·t': the same roundings, and the same −0 where t = +0 (a product by a negative constant,
    unlike the negation of an integer). `square` (float32) is scratch.
    """
    device = hashed.device
    hashed.bitwise_xor_(_constant(-(1 << 31), device)).bitwise_right_shift_(_constant(8, device)).abs_()
    torch.sub(_constant(1 << 22, device), hashed, out=hashed)
    minus_t = out
    minus_t.copy_(hashed)
    minus_t.mul_(_constant(-_TWO_PI_OVER_2_24, device))
    torch.mul(minus_t, minus_t, out=square)
    sine_series = _polynomial_(hashed.view(torch.float32), square, _SIN_SERIES_F32)
    return minus_t.mul_(sine_series)


def _box_muller_radius(hashed: torch.Tensor, exponent: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sqrt(−2·ln u1), u1 = (2·(h >>> 9) + 1)/2^24, for the int32 bits h in `hashed` (overwritten); returns `a`.

    - u1: 2·(h >>> 9) + 1 = (h >>> 8) | 1 =: n, an odd integer below 2^24, so float32(n) is exact and
      bits(u1) = bits(float32(n)) − 24·2^23.
    - ln u1: u1 = m·2^e with m in [f32(√½), 2·f32(√½)) (unique), s = (m − 1)/(m + 1),
      ln u1 = e·f32(ln2) + (P_log(s·s)·s)·2, P_log the LOG_SERIES polynomial. With w = bits(u1) − bits(f32(√½)):
      e = w >> 23 (floor) and bits(m) = (w & 0x7FFFFF) + bits(f32(√½)).
    - x = ln u1·(−2), computed as e·f32(−2·ln2) + (P_log(s·s)·s)·(−4): scaling by a power of two is exact, so each
      rounding is the same one.
    - sqrt(x): x = m·4^q with m in [½, 2) (unique); y₀ = the chord of sqrt on [½, 2] (f32(0.4714)·(m + 1)), four
      Newton steps y ← (y + m/y)·½, then y·2^q. With w = bits(x) − bits(½): q = w >> 24 (floor) and
      bits(m) = (w & 0xFFFFFF) + bits(½). The last step's ½ and 2^q are one exact product by 2^(q − 1), added to y's
      exponent field.

    `exponent` (int32), `a` and `b` (float32) are scratch.
    """
    device = hashed.device
    hashed.bitwise_right_shift_(_constant(8, device)).bitwise_and_(_constant(0xFFFFFF, device))
    hashed.bitwise_or_(_constant(1, device))
    a.copy_(hashed)
    bits = a.view(torch.int32)
    bits.sub_(_constant(_SQRT_HALF_BITS + (24 << 23), device))
    torch.bitwise_right_shift(bits, _constant(23, device), out=exponent)
    bits.bitwise_and_(_constant(0x7FFFFF, device)).add_(_constant(_SQRT_HALF_BITS, device))
    mantissa = a
    one = _constant(1.0, device)
    torch.add(mantissa, one, out=b)
    s = mantissa.sub_(one).div_(b)
    torch.mul(s, s, out=b)
    series = _polynomial_(hashed.view(torch.float32), b, _LOG_SERIES_F32).mul_(s)
    b.copy_(exponent)
    b.mul_(_constant(_MINUS_TWO_LN2_F32, device))
    x = series.mul_(_constant(-4.0, device)).add_(b)

    bits = x.view(torch.int32)
    bits.sub_(_constant(_HALF_BITS + (1 << 24), device))
    torch.bitwise_right_shift(bits, _constant(24, device), out=exponent)  # q − 1
    bits.bitwise_and_(_constant(0xFFFFFF, device)).add_(_constant(_HALF_BITS, device))
    mantissa = x
    y = torch.add(mantissa, one, out=a).mul_(_constant(_SQRT_CHORD_SLOPE_F32, device))
    half = _constant(0.5, device)
    for step in range(4):
        y.add_(torch.div(mantissa, y, out=b))
        if step < 3:
            y.mul_(half)
    y.view(torch.int32).add_(exponent.mul_(_constant(1 << 23, device)))
    return y


def _hash_to_normal_(buffers: _Buffers, count: int, words, out: torch.Tensor) -> None:
    """out ← ε of `count` elements whose lo32(i) ^ k0 is in the first int buffer, given `words` = (hi32(i) ^ k1, k2,
    k3): int32 bit patterns as ints (one tensor's chunk) or as int32 tensors of one word per element (a batch)."""
    high_k1, k2, k3 = words
    (x, hashed, scratch), (a, b, c) = ([t[:count] for t in group] for group in (buffers.ints, buffers.floats))
    _mix32_(x, scratch)
    x.bitwise_xor_(high_k1)
    _mix32_(x, scratch)
    torch.bitwise_xor(x, k3, out=hashed)
    _mix32_(hashed, scratch)
    cosine = _cos_two_pi(hashed, c, a)
    hashed = x.bitwise_xor_(k2)
    _mix32_(hashed, scratch)
    radius = _box_muller_radius(hashed, scratch, a, b)
    torch.mul(radius, cosine, out=out)


def _normal_(buffers: _Buffers, start: int, count: int, key: tuple[int, int, int, int], out: torch.Tensor) -> None:
    """out ← ε of the element counters start, ..., start + count − 1 of one tensor, which lie within one multiple of
    2^31: their low words are one int32 range (no wrap-around when the offsets are added) and their high word is one
    int."""
    k0, k1, k2, k3 = key
    low = buffers.ints[0][:count]
    torch.add(buffers.counters[:count], _signed32(start & MASK32), out=low).bitwise_xor_(_signed32(k0))
    _hash_to_normal_(buffers, count, (_signed32((start >> 32) ^ k1), _signed32(k2), _signed32(k3)), out)


def _normal_of_batch_(buffers: _Buffers, keys: list[tuple[int, int, int, int]], sizes: list[int], out) -> None:
    """out ← ε of the counters 0, ..., size − 1 of several tensors (one key and size each), concatenated: one pass of
    the ops for them all. Their total is at most the buffers' size, so every counter is below 2^31 (high word 0)."""
    total, device = sum(sizes), out.device
    repeats = torch.tensor(sizes, device=device)
    words = torch.tensor([[_signed32(word) for word in key] for key in keys], dtype=torch.int32, device=device)
    words = words.repeat_interleave(repeats, dim=0, output_size=total).t().contiguous()
    starts = torch.tensor([0, *itertools.accumulate(sizes)][:-1], dtype=torch.int32, device=device)
    low = buffers.ints[0][:total]
    torch.sub(buffers.counters[:total], starts.repeat_interleave(repeats, output_size=total), out=low)
    low.bitwise_xor_(words[0])
    _hash_to_normal_(buffers, total, (words[1], words[2], words[3]), out)


def _chunk_size(device: torch.device) -> int:
    return CHUNK_ELEMENTS if device.type == "cpu" else ACCELERATOR_CHUNK_ELEMENTS


def _chunks(count: int, first: int, chunk_size: int):
    """(offset, length) pieces of counters first, ..., first + count − 1: at most `chunk_size` long, and never across
    a multiple of 2^31 (the int32 sign of a low word, and every change of the high word)."""
    offset = 0
    while offset < count:
        start = first + offset
        length = min(chunk_size, count - offset, (((start >> 31) + 1) << 31) - start)
        yield offset, length
        offset += length


def _fill_noise(flat: torch.Tensor, first: int, key: tuple[int, int, int, int]) -> None:
    """flat[j] ← ε of element counter first + j (`flat`: a 1-d float32 tensor, any device)."""
    chunk_size = _chunk_size(flat.device)
    buffers = _Buffers(max(min(len(flat), chunk_size), 1), flat.device)
    for offset, length in _chunks(len(flat), first, chunk_size):
        _normal_(buffers, first + offset, length, key, flat[offset : offset + length])


def es_noise(seed: int, name: str, shape, device=None, out: torch.Tensor | None = None) -> torch.Tensor:
    """ε(seed, name) ~ N(0, I) of `shape`, float32, bit-identical on every device (see the module docstring).

    Element i (row-major index) depends only on (seed, name, i): a slice of the noise of a larger tensor is the noise
    of the same indices. `out`, if given, is a contiguous float32 tensor of `shape` to write into (saves one
    allocation).
    """
    shape = torch.Size(shape)
    key = noise_key(seed, name)
    if out is None:
        out = torch.empty(shape, dtype=torch.float32, device=device)
    elif out.shape != shape or out.dtype != torch.float32 or not out.is_contiguous():
        raise ValueError(
            f"`out` must be a contiguous float32 tensor of shape {tuple(shape)}, got {out.dtype} {tuple(out.shape)}"
        )
    _fill_noise(out.view(-1), 0, key)
    return out


def noise_batches(tensors: dict[str, torch.Tensor]) -> list[list[str]]:
    """The names of `tensors` in order, grouped as `add_scaled_noise_each` computes their noise: a tensor larger than
    a chunk alone (chunk by chunk), consecutive smaller ones on one device together up to a chunk's size (one pass of
    the ~115 ops for the group instead of one per tensor: a model's norms and biases are many small tensors)."""
    batches, current, current_size = [], [], 0
    for name, tensor in tensors.items():
        size, chunk_size = tensor.numel(), _chunk_size(tensor.device)
        if current and (
            size > chunk_size or current_size + size > chunk_size or tensors[current[0]].device != tensor.device
        ):
            batches.append(current)
            current, current_size = [], 0
        current.append(name)
        current_size += size
    return batches + [current] if current else batches


def _store_(destination: torch.Tensor, addend: torch.Tensor, scaled_noise: torch.Tensor) -> None:
    """destination ← addend + scaled_noise rounded to float32, then to the destination's dtype (`scaled_noise` may be
    overwritten)."""
    if destination.dtype == torch.float32:
        torch.add(addend, scaled_noise, out=destination)
    else:
        destination.copy_(scaled_noise.add_(addend))


def _scaled_noise_into(destinations: dict[str, torch.Tensor], addends: dict[str, torch.Tensor], seed, scale) -> None:
    """destination ← addend + f32(scale)·ε(seed, name) for the flat float32 addends of one `noise_batches` batch,
    into flat destinations of any dtype."""
    names = list(addends)
    device = addends[names[0]].device
    sizes = [addends[name].numel() for name in names]
    buffers = _Buffers(max(min(sum(sizes), _chunk_size(device)), 1), device)
    scale_f32 = torch.tensor(scale, dtype=torch.float32, device=device)
    if len(names) == 1:
        name = names[0]
        for offset, length in _chunks(sizes[0], 0, _chunk_size(device)):
            noise, piece = buffers.noise[:length], slice(offset, offset + length)
            _normal_(buffers, offset, length, noise_key(seed, name), noise)
            _store_(destinations[name][piece], addends[name][piece], noise.mul_(scale_f32))
        return
    noise = buffers.noise[: sum(sizes)]
    _normal_of_batch_(buffers, [noise_key(seed, name) for name in names], sizes, noise)
    noise.mul_(scale_f32)
    for name, piece in zip(names, torch.split(noise, sizes), strict=True):
        _store_(destinations[name], addends[name], piece)


def add_scaled_noise_each(targets: dict[str, tuple[torch.Tensor, torch.Tensor]], seed: int, scale: float) -> None:
    """For each name → (out, addend): out ← addend + f32(scale)·ε(seed, name), rounded to float32, then to out's dtype.

    Two float32 roundings per element, the product then the sum: the values of `es_noise(...) * f32(scale)` followed
    by `+ addend` in float32, computed chunk by chunk (`noise_batches`), so no tensor-sized noise is held. `addend`
    is float32; `out` has its shape, any dtype, and may be `addend` (an accumulator). A non-contiguous `out`, or one
    on another device, receives the result through one float32 tensor of its size.
    """
    for name, (out, addend) in targets.items():
        if addend.dtype != torch.float32 or out.shape != addend.shape:
            raise ValueError(
                f"add_scaled_noise {name}: needs a float32 `addend` and an `out` of its shape, got {addend.dtype} "
                f"{tuple(addend.shape)} and {out.dtype} {tuple(out.shape)}"
            )
    for names in noise_batches({name: addend for name, (_, addend) in targets.items()}):
        addends = {name: targets[name][1].reshape(-1) for name in names}
        indirect = [
            name
            for name in names
            if not targets[name][0].is_contiguous() or targets[name][0].device != addends[name].device
        ]
        destinations = {name: targets[name][0].view(-1) for name in names if name not in indirect}
        destinations.update({name: torch.empty_like(addends[name]) for name in indirect})
        _scaled_noise_into(destinations, addends, seed, scale)
        for name in indirect:
            out = targets[name][0]
            out.copy_(destinations[name].view(out.shape))


def add_scaled_noise(out: torch.Tensor, addend: torch.Tensor, seed: int, name: str, scale: float) -> torch.Tensor:
    """out ← addend + f32(scale)·ε(seed, name) for one tensor (`add_scaled_noise_each`); returns `out`."""
    add_scaled_noise_each({name: (out, addend)}, seed, scale)
    return out
