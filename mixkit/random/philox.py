"""Philox 4x32-10 and the normal draws CUDA makes from it: A1111's "NV" RNG source, on any machine.

Philox 4x32-10 is the counter-based generator of Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy
as 1, 2, 3" (SC'11): a 128-bit counter and a 64-bit key go through ten rounds of two 32x32->64-bit multiplications
and xors, the key bumped by two Weyl constants between rounds. There is no state beyond (key, counter), so any
element of a stream is computed on its own, which is what lets a CPU reproduce a GPU's noise.

A1111's RNG source "NV" (`modules/rng_philox.py`) draws a tensor of n elements as torch.randn does on an NVIDIA
GPU: the key is the seed's two 32-bit halves (low word first), element i's counter is (offset, 0, i, 0) where
offset counts the generator's earlier draws, and of the four output words the first two become one normal
through the first half of a Box-Muller transform (curand's `_curand_box_muller`):

    u = x * 2**-32 + 2**-33                  (never 0: the log stays finite)
    v = y * 2**-32 * 2pi + 2**-32 * pi
    normal = sqrt(-2 ln u) * sin(v)

The two scale constants are single-precision values (2.3283064e-10 and 2.3283064e-10 * 6.2831855 rounded to
float32), as curand's are; the arithmetic runs in double precision and rounds to float32 at the end, as A1111's
NumPy does (uint32 times float32 promotes to float64). That makes these draws equal A1111's NV noise bit for bit;
CUDA itself computes in float32, so its numbers agree with these to within float32 rounding, not always exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # the round multipliers (Salmon et al., table 2)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # the key's Weyl increments: the golden ratio and sqrt(3) - 1, as 32-bit fractions
PHILOX_ROUNDS = 10
_WORD = 0xFFFFFFFF
# curand's CURAND_2POW32_INV and CURAND_2POW32_INV_2PI, single precision (see the module docstring)
TWO_POW32_INV = float(np.float32(2.3283064e-10))
TWO_POW32_INV_2PI = float(np.float32(2.3283064e-10 * 6.2831855))
MAX_DRAW = 2**32  # element i of a draw is counter word 2: one draw holds at most 2**32 elements


def philox4x32_10(counter, key) -> np.ndarray:
    """The four output words of Philox 4x32-10 for each column of `counter` [4, N] under `key` [2, N] (uint32).

    Vectorised over N blocks (a key [2, 1] serves them all); a 1-D counter [4] and key [2] give one block [4].
    Each round maps (c0, c1, c2, c3) to (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0)), as
    Random123's reference does.
    """
    counter = np.asarray(counter, dtype=np.uint64)
    key = np.asarray(key, dtype=np.uint64)
    if counter.shape[:1] != (4,) or key.shape[:1] != (2,):
        raise ValueError(f"Philox 4x32 takes a counter of 4 words and a key of 2 (per column); got shapes "
                         f"{counter.shape} and {key.shape}.")
    shape = np.broadcast_shapes(counter.shape[1:], key.shape[1:])
    words = _philox_rounds(*(np.broadcast_to(word, shape) for word in (*counter, *key)))
    return np.stack(words).astype(np.uint32)


def _philox_rounds(c0, c1, c2, c3, k0, k1) -> list[np.ndarray]:
    """Ten Philox rounds on uint64 arrays (or broadcastable scalars) holding 32-bit words: (c0, c1, c2, c3) out.

    Why NumPy uint64, in place: a 32x32-bit product is exact in uint64, so each multiply is one NumPy operation,
    and the xors and masks write into the arrays they read, so a round allocates only its two products and two
    shifted words. In philox_normal the counter words other than the element index are scalars, so the first two
    rounds multiply one array each. Measured against it on one 4x128x128 draw (benchmarks/nv_noise.py's method,
    medians; 2 busy cores, torch on one thread, slower still on two): torch int64 with wrapping multiplies 1.6x
    slower, torch int64 with 16-bit halves (no overflow) 7x slower, torch uint64 (multiplies unvectorised, shifts
    unsupported) 5x slower; NumPy with a fresh array per operation (the first version) 2x slower; preallocated
    `out=` buffers 5% faster, within the noise, not worth the bookkeeping.
    """
    m0, m1, shift, word = np.uint64(PHILOX_M[0]), np.uint64(PHILOX_M[1]), np.uint64(32), np.uint64(_WORD)
    for round_index in range(PHILOX_ROUNDS):
        if round_index:
            k0, k1 = (k0 + PHILOX_W[0]) & _WORD, (k1 + PHILOX_W[1]) & _WORD
        product0, product1 = np.multiply(c0, m0), np.multiply(c2, m1)  # 32 x 32 bits: exact in uint64
        c0 = np.right_shift(product1, shift)
        c0 ^= c1
        c0 ^= k0
        c2 = np.right_shift(product0, shift)
        c2 ^= c3
        c2 ^= k1
        c1, c3 = product1, product0
        c1 &= word
        c3 &= word
    return [c0, c1, c2, c3]


def box_muller_first(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The sine half of curand's Box-Muller transform of two uint32 words: one standard normal each, float32.

    Each step writes into the float64 array it reads (the same operations, in the same order and precision, as
    the allocating form: the same bits). torch's float64 log and sqrt (SLEEF) differ from NumPy's in the last
    bit of about 1 in 300 and 1 in 70 values, which can flip a float32 rounding, so NumPy stays.
    """
    u = x.astype(np.float64)
    u *= TWO_POW32_INV
    u += TWO_POW32_INV / 2
    v = y.astype(np.float64)
    v *= TWO_POW32_INV_2PI
    v += TWO_POW32_INV_2PI / 2
    np.log(u, out=u)
    u *= -2.0
    np.sqrt(u, out=u)
    np.sin(v, out=v)
    u *= v
    return u.astype(np.float32)


def philox_normal(seed: int, offset: int, count: int) -> np.ndarray:
    """`count` standard normals (float32), draw number `offset` of the stream keyed by `seed` (A1111's NV randn)."""
    check_seed(seed)
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= _WORD:
        raise ValueError(f"A Philox draw's offset must be an integer in [0, 2**32 - 1], got {offset!r}.")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_DRAW:
        raise ValueError(f"A Philox draw holds 0 to 2**32 elements (the element index is one 32-bit counter word), "
                         f"got {count!r}.")
    # Element i's counter is (offset, 0, i, 0) under one key: only word 2 is an array, the rest broadcast.
    zero, seed = np.uint64(0), int(seed)
    words = _philox_rounds(np.uint64(offset), zero, np.arange(count, dtype=np.uint64), zero,
                           np.uint64(seed & _WORD), np.uint64(seed >> 32))
    return box_muller_first(words[0], words[1])  # words 2 and 3 are unused, as on the GPU


def check_seed(seed) -> int:
    """A Philox key is 64 bits: seeds are integers in [0, 2**64 - 1]."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise ValueError(f"A Philox seed must be an integer in [0, 2**64 - 1] (its 64-bit key), got {seed!r}.")
    return int(seed)


class PhiloxGenerator:
    """A1111's NV generator: each `randn` is the next draw (offset 0, 1, 2, ...) of the stream keyed by the seed.

    It stands where mixkit passes a CPU torch.Generator for an image (`initial_seed()` gives the seed, `device` is
    the CPU), but it is not one: torch functions cannot draw from it; `pipelines.seeds.randn_from` and
    `pipelines.samplers.noise.sampler_noise` draw from either kind.
    """

    def __init__(self, seed: int, offset: int = 0) -> None:
        import torch

        self.seed = check_seed(seed)
        self.offset = offset
        self.device = torch.device("cpu")

    def initial_seed(self) -> int:
        return self.seed

    def randn(self, shape) -> torch.Tensor:
        """The next draw as a float32 CPU tensor of `shape` (only the element count decides the numbers)."""
        import torch

        shape = tuple(int(side) for side in shape)
        count = int(np.prod(shape, dtype=np.int64))
        values = philox_normal(self.seed, self.offset, count)
        self.offset += 1
        return torch.from_numpy(values).reshape(shape)

    def clone(self) -> "PhiloxGenerator":
        """A generator at the same point of the same stream, whose draws leave this one where it is."""
        return PhiloxGenerator(self.seed, self.offset)

    def __repr__(self) -> str:
        return f"PhiloxGenerator(seed={self.seed}, offset={self.offset})"
