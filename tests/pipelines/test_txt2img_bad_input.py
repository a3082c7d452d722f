"""Each bad input: a clear error before any work, nothing written, the pipeline still usable."""

import math

import pytest

from mixkit.errors import UnknownNameError

from .unet_spy import replaced_forward

SMALL = dict(width=64, height=64, steps=2)

BAD = [
    (dict(width=0), ValueError, "width must be in"),
    (dict(height=-64), ValueError, "height must be in"),
    (dict(width=65), ValueError, "multiple of 8"),
    (dict(width=4104), ValueError, "width must be in"),
    (dict(width=4096, height=4096), ValueError, "over the budget"),
    (dict(steps=0), ValueError, "steps must be in"),
    (dict(steps=math.nan), TypeError, "steps must be an integer"),
    (dict(steps=1001), ValueError, "steps must be in"),
    (dict(steps=1e9), TypeError, "steps must be an integer"),
    (dict(cfg_scale=math.nan), ValueError, "cfg_scale must be a finite number"),
    (dict(cfg_scale=math.inf), ValueError, "cfg_scale must be a finite number"),
    (dict(cfg_scale=10 ** 400), ValueError, r"cfg_scale must be in \[0, 100.0\]"),  # no OverflowError
    (dict(batch_size=17), ValueError, "batch_size must be in"),
    (dict(batch_count=0), ValueError, "batch_count must be in"),
    (dict(seed=2**53), ValueError, "seed must be in"),
    (dict(prompt=["a", "b"]), ValueError, "one per image"),
    (dict(prompt="x" * 40_000), ValueError, "characters long"),
    (dict(prompt="a\x00b"), ValueError, "NUL"),
    (dict(clip_skip=0), ValueError, "clip_skip"),
]


@pytest.mark.parametrize("overrides, error, message", BAD, ids=[str(b[0])[:40] for b in BAD])
def test_bad_parameters_are_refused_before_any_work(sd1_pipe, overrides, error, message, tmp_path):
    calls = []
    kwargs = {**SMALL, "prompt": "a", **overrides}
    with pytest.raises(error, match=message):
        sd1_pipe(callback=calls.append, **kwargs)
    assert calls == []  # no step ran
    assert sd1_pipe(prompt="still works", seed=1, **SMALL).images  # the process is still usable


def test_unknown_sampler_lists_the_valid_ones(sd1_pipe):
    with pytest.raises(UnknownNameError) as info:
        sd1_pipe(prompt="a", sampler="Eulr a", **SMALL)
    assert "Euler a" in str(info.value) and "DPM++ 2M" in str(info.value)


def test_unknown_parameter_name_is_a_type_error(sd1_pipe):
    with pytest.raises(TypeError, match="Unknown generation parameter"):
        sd1_pipe(prompt="a", stepz=3)


def test_unknown_name_next_to_a_params_object_lists_the_valid_ones(sd1_pipe):
    """Was: dataclasses' bare "Txt2ImgParams.__init__() got an unexpected keyword argument 'cfg'"."""
    from pipelines.hires import HiresFix, HiresParams
    from pipelines.params import Txt2ImgParams

    params = Txt2ImgParams(prompt="a", seed=1, **SMALL)
    with pytest.raises(TypeError, match=r"Unknown generation parameter\(s\) \['cfg'\]; valid ones: .*'cfg_scale'"):
        sd1_pipe(params, cfg=2)
    with pytest.raises(TypeError, match=r"Unknown generation parameter\(s\) \['hr_scal'\]; valid ones: .*'hr_scale'"):
        HiresFix(sd1_pipe)(HiresParams(prompt="a", seed=1, **SMALL), hr_scal=2)
    assert sd1_pipe(params, cfg_scale=2).infotexts[0] != sd1_pipe(params).infotexts[0]  # a valid override applies
    assert params.cfg_scale == 7.0  # the caller's object is left as given


def test_a_unet_output_with_nan_stops_with_a1111s_nan_check(sd1_pipe):
    original = sd1_pipe.model.unet.forward

    def broken(*args, **kwargs):
        output = original(*args, **kwargs)
        output.sample[0, 0, 0, 0] = float("nan")
        return output

    with replaced_forward(sd1_pipe.model.unet, broken), pytest.raises(ValueError, match="NaN/inf at step 1"):
        sd1_pipe(prompt="a cat", seed=1, steps=2, width=64, height=64)
