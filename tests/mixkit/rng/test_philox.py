"""Philox 4x32-10 against Random123's known answers, and A1111's NV noise against a scalar restatement of curand."""

import math
import struct

import numpy as np
import pytest
import torch

from mixkit.random.philox import PhiloxGenerator, philox4x32_10, philox_normal

# Random123's tests/kat_vectors for philox4x32_10 (Salmon et al. 2011's reference distribution): counter, key, output.
RANDOM123_KATS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),  # the digits of pi
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, expected", RANDOM123_KATS)
def test_philox4x32_10_gives_random123s_known_answers(counter, key, expected):
    assert tuple(int(word) for word in philox4x32_10(counter, key)) == expected


def test_philox4x32_10_computes_each_column_as_its_own_block():
    counter = np.array([kat[0] for kat in RANDOM123_KATS], dtype=np.uint32).T
    key = np.array([kat[1] for kat in RANDOM123_KATS], dtype=np.uint32).T
    assert philox4x32_10(counter, key).T.tolist() == [list(kat[2]) for kat in RANDOM123_KATS]


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _scalar_nv_normal(seed: int, offset: int, index: int) -> float:
    """One element of A1111's NV draw, restated with Python integers and math (no NumPy): the oracle."""
    mask = 0xFFFFFFFF
    c0, c1, c2, c3 = offset, 0, index, 0
    k0, k1 = seed & mask, seed >> 32
    for round_index in range(10):
        if round_index:
            k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
        p0, p1 = c0 * 0xD2511F53, c2 * 0xCD9E8D57
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & mask, (p0 >> 32) ^ c3 ^ k1, p0 & mask
    scale, scale_2pi = _float32(2.3283064e-10), _float32(2.3283064e-10 * 6.2831855)
    u = c0 * scale + scale / 2
    v = c1 * scale_2pi + scale_2pi / 2
    return _float32(math.sqrt(-2.0 * math.log(u)) * math.sin(v))


@pytest.mark.parametrize("seed, offset", [(0, 0), (1, 0), (1234567890, 3), (2**40 + 7, 1), (2**64 - 1, 0)])
def test_normals_equal_a_scalar_restatement_bit_for_bit(seed, offset):
    drawn = philox_normal(seed, offset, 16)
    assert drawn.dtype == np.float32
    assert drawn.tolist() == [_scalar_nv_normal(seed, offset, index) for index in range(16)]


def test_a_large_draw_equals_the_scalar_oracle_far_into_the_stream():
    # the in-place rounds over a latent-sized draw: indices past 2**16 and 2**17 exercise every word of the products
    seed, offset, count = 0xDEADBEEF12345678, 9, 4 * 128 * 128 * 2
    drawn = philox_normal(seed, offset, count)
    indices = [0, 1, 65535, 65536, 65537, 100_003, count - 1]
    assert [drawn[index].item() for index in indices] == [_scalar_nv_normal(seed, offset, index) for index in indices]


def test_philox4x32_10_leaves_its_arguments_as_they_were():
    # its rounds write into their own intermediates: the caller's counter and key must come back untouched
    counter = np.array([kat[0] for kat in RANDOM123_KATS], dtype=np.uint64).T.copy()
    key = np.array([[0xA4093822], [0x299F31D0]], dtype=np.uint64)
    before = counter.copy(), key.copy()
    words = philox4x32_10(counter, key)
    assert np.array_equal(counter, before[0]) and np.array_equal(key, before[1])
    assert words[:, 2].tolist() == list(RANDOM123_KATS[2][2])  # the digits-of-pi block, under a [2, 1] key


def test_seed_0_matches_a1111s_documented_output():
    # modules/rng_philox.py's docstring: Generator(seed=0).randn(shape=(3, 4)), which its author gives as what
    # torch.randn((3, 4), device="cuda") draws after torch.manual_seed(0). Those digits were printed from a run whose
    # 2pi scale was not rounded to float32 as the module's (and curand's) constant is: they agree to ~2e-7, not bit
    # for bit, and the bits are pinned against the scalar oracle above instead.
    documented = [[-0.92466259, -0.42534415, -2.6438457, 0.14518388],
                  [-0.12086647, -0.57972564, -0.62285122, -0.32838709],
                  [-1.07454231, -0.36314407, -1.67105067, 2.26550497]]
    drawn = PhiloxGenerator(0).randn((3, 4))
    assert drawn.shape == (3, 4) and drawn.dtype == torch.float32
    assert torch.allclose(drawn, torch.tensor(documented), rtol=0, atol=3e-7)
    assert not torch.equal(drawn, torch.tensor(documented, dtype=torch.float32))  # the rounding named above


def test_each_draw_advances_the_offset_and_only_the_count_decides_the_numbers():
    generator = PhiloxGenerator(42)
    first, second = generator.randn((2, 3, 4)), generator.randn((24,))
    assert generator.offset == 2
    assert torch.equal(first.flatten(), torch.from_numpy(philox_normal(42, 0, 24)))
    assert torch.equal(second, torch.from_numpy(philox_normal(42, 1, 24)))
    assert not torch.equal(first.flatten(), second)
    assert torch.equal(PhiloxGenerator(42).randn((4, 6)).flatten(), first.flatten())


def test_a_longer_draw_starts_with_the_shorter_ones_numbers():
    # element i's counter is (offset, 0, i, 0): a bigger latent extends the same stream, as CUDA's does
    assert torch.equal(PhiloxGenerator(7).randn((10,)), PhiloxGenerator(7).randn((4, 5)).flatten()[:10])


def test_clone_continues_the_stream_without_moving_the_original():
    generator = PhiloxGenerator(5)
    generator.randn((3,))
    copy = generator.clone()
    assert torch.equal(copy.randn((3,)), generator.randn((3,)))
    assert (copy.offset, generator.offset, copy.initial_seed()) == (2, 2, 5)


def test_the_normals_are_standard_normal():
    values = philox_normal(3, 0, 200_000)
    assert abs(values.mean()) < 0.01 and abs(values.std() - 1) < 0.01
    assert np.isfinite(values).all()


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, "1"])
def test_seeds_outside_the_64_bit_key_are_refused(seed):
    with pytest.raises(ValueError, match=r"Philox seed must be an integer in \[0, 2\*\*64 - 1\]"):
        PhiloxGenerator(seed)


def test_offsets_and_counts_outside_the_counter_words_are_refused():
    with pytest.raises(ValueError, match="offset must be an integer in"):
        philox_normal(0, 2**32, 1)
    with pytest.raises(ValueError, match="0 to 2\\*\\*32 elements"):
        philox_normal(0, 0, 2**32 + 1)
    with pytest.raises(ValueError, match="counter of 4 words and a key of 2"):
        philox4x32_10([0, 0, 0], [0, 0])


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs an NVIDIA GPU: compares with torch.randn on CUDA, the noise NV imitates")
def test_nv_noise_is_what_torch_randn_draws_on_cuda():
    for seed, shape in [(0, (3, 4)), (1234, (4, 64, 64))]:
        expected = torch.randn(shape, generator=torch.Generator("cuda").manual_seed(seed), device="cuda").cpu()
        # CUDA runs the Box-Muller transform in float32: equal to within float32 rounding of sqrt/log/sin
        assert torch.allclose(PhiloxGenerator(seed).randn(shape), expected, rtol=0, atol=1e-5)
