"""The SD tasks take diffusers' spellings of their options, as they take PaddleMIX's `guidance_scale`.

A diffusers user writes `num_inference_steps=30, num_images_per_prompt=2` (StableDiffusionPipeline.__call__); those
were refused as unknown options. Oracle: the same flow with mixkit's own names."""

from __future__ import annotations

import numpy as np
import pytest

from appflow import Appflow, ModelCache, describe_app


def test_diffusers_spellings_are_the_options_they_name(tiny_sd1_dir, shared_cache):
    common = dict(models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32, seed=7)
    diffusers_style = Appflow("text2image_generation", num_inference_steps=2, num_images_per_prompt=2, **common)
    mixkit_style = Appflow("text2image_generation", steps=2, batch_size=2, **common)
    got, expected = diffusers_style(prompt="a cat")["images"], mixkit_style(prompt="a cat")["images"]
    assert len(got) == 2 and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, expected))
    per_call = mixkit_style(prompt="a cat", num_inference_steps=3)["result"]  # per call too
    assert np.array_equal(np.asarray(per_call), np.asarray(mixkit_style(prompt="a cat", steps=3)["result"]))
    assert describe_app("text2image_generation")["option_aliases"]["num_inference_steps"] == "steps"


def test_one_option_under_both_spellings_is_refused():
    with pytest.raises(TypeError, match="got option 'steps' twice, as 'steps' and as 'num_inference_steps'"):
        Appflow("image2image_text_guided_generation", steps=2, num_inference_steps=2, cache=ModelCache())
