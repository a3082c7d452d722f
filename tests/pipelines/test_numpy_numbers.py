"""numpy numbers (np.linspace CFG sweeps, np.random seeds) are accepted as the Python numbers they stand for.

Was: `cfg_scale=np.float32(6.5)` was refused as "not a finite number in [0, 100]", and np.int64 steps, sizes and
seeds as "not an integer". Now they give the image and infotext the Python numbers give, bit for bit.
"""

import numpy as np
import pytest

from pipelines.hires import HiresFix

PLAIN = dict(prompt="a red circle", sampler="Euler a", steps=3, width=64, height=64, seed=3, cfg_scale=6.5, eta=0.5,
             skip_early_cond=0.25)


def _same_result(first, second):
    assert first.infotexts == second.infotexts and first.seeds == second.seeds
    assert [np.asarray(i).tobytes() for i in first.images] == [np.asarray(i).tobytes() for i in second.images]


def test_numpy_numbers_give_the_python_numbers_result(sd1_pipe):
    numpy_kwargs = dict(PLAIN, steps=np.int64(3), width=np.int32(64), height=np.uint16(64), seed=np.int64(3),
                        cfg_scale=np.float32(6.5), eta=np.float32(0.5), skip_early_cond=np.float16(0.25))
    _same_result(sd1_pipe(**numpy_kwargs), sd1_pipe(**PLAIN))


def test_float32_is_written_as_the_number_given(sd1_pipe):
    """float(np.float32(6.7)) is 6.699999809265137; the infotext says 6.7, as for the Python float."""
    result = sd1_pipe(**dict(PLAIN, steps=1, cfg_scale=np.float32(6.7)))
    assert "CFG scale: 6.7," in result.infotexts[0]


def test_hires_fields_accept_numpy_numbers(sd1_pipe):
    hires = HiresFix(sd1_pipe)
    extra = dict(hr_scale=1.5, hr_second_pass_steps=2, denoising_strength=0.6, hr_upscaler="Latent")
    numpy_extra = dict(hr_scale=np.float32(1.5), hr_second_pass_steps=np.int64(2),
                       denoising_strength=np.float32(0.6), hr_upscaler="Latent")
    _same_result(hires(**PLAIN, **numpy_extra), hires(**PLAIN, **extra))


@pytest.mark.parametrize("overrides, error, message", [
    (dict(width=np.float32(64.0)), TypeError, r"width must be an integer in \[8, 4096\], got 64.0"),
    (dict(steps=np.bool_(True)), TypeError, r"steps must be an integer"),
    (dict(cfg_scale=np.float32("nan")), ValueError, r"cfg_scale must be a finite number"),
    (dict(cfg_scale=np.float64(101)), ValueError, r"cfg_scale must be in \[0, 100.0\], got 101.0"),
])
def test_numpy_values_that_are_not_valid_are_still_refused(sd1_pipe, overrides, error, message):
    with pytest.raises(error, match=message):
        sd1_pipe(**dict(PLAIN, **overrides))
