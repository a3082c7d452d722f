"""Grounding DINO prompt normalisation and option checks (the model path is tested in test_apps.py)."""

from __future__ import annotations

import pytest

from appflow.tasks.detection import check_threshold, grounding_prompt


@pytest.mark.parametrize("prompt, expected", [("Dog", "dog."), ("a dog. a cat", "a dog. a cat."),
                                              ("  Red car. ", "red car.")])
def test_prompts_become_lower_case_dot_terminated_phrases(prompt, expected):
    assert grounding_prompt(prompt) == expected


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.3", True, None])
def test_thresholds_outside_zero_one_are_refused(value):
    with pytest.raises(ValueError, match="box_threshold must be a number in \\[0, 1\\]"):
        check_threshold("box_threshold", value)


def test_a_bad_threshold_option_fails_before_the_detector_loads(tiny_dino_dir, tiny_sam_dir, photo):
    from appflow import Appflow, ModelCache

    cache = ModelCache()
    with pytest.raises(ValueError, match="box_threshold must be a number in \\[0, 1\\], got 2"):
        Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache, box_threshold=2)
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache)
    with pytest.raises(ValueError, match="box_threshold must be a number in \\[0, 1\\], got 2"):
        flow(image=photo, prompt="dog", box_threshold=2)  # a per-call value too
    assert cache.loads == 0
