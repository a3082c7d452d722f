"""Every task option's value is checked when the flow is built (and per call), before any model loads, and the
error names the app, the step and the option. Before, five tasks checked theirs only inside `run`, after the models
had loaded, with a bare `float() argument must be ... not 'NoneType'`."""

from __future__ import annotations

import pytest

from appflow import Appflow, ModelCache
from appflow.chain import Chain, Step

NOT_A_NUMBER = float("nan")


def _single_step(task: str) -> Chain:
    """A one-step chain, for tasks whose apps need models that are not available offline (SD 1.5, a ControlNet)."""
    return Chain(f"only-{task}", [Step(task, id=task)])


@pytest.mark.parametrize("app, options, message", [
    ("openset_det_sam", {"mask_threshold": None}, r"step 'segment': mask_threshold must be a number, got None"),
    ("openset_det_sam", {"mask_threshold": "high"}, r"step 'segment': mask_threshold must be a number, got 'high'"),
    ("openset_det_sam", {"mask_threshold": NOT_A_NUMBER}, r"step 'segment': mask_threshold must be a number, got nan"),
    ("openset_det_sam", {"box_threshold": NOT_A_NUMBER}, r"step 'detect': box_threshold must be a number in \[0, 1\]"),
    ("text_guided_inpainting", {"dilate": -3},
     r"step 'mask': dilate \(pixels\) must be an integer in \[0, 256\], got -3"),
    ("text_guided_inpainting", {"dilate": 2.5}, r"step 'mask': dilate \(pixels\) must be an integer"),
    ("dialog_image_editing", {"max_new_tokens": "64"},
     r"step 'parse': max_new_tokens must be an integer in \[1, 1024\]"),
    ("auto_label", {"image_path": 3}, r"step 'annotate': image_path must be a string or path"),
    ("image2text_generation", {"temperature": NOT_A_NUMBER},
     r"step 'caption': .*temperature must be None or a number above 0, got nan"),
    (_single_step("qr_code"), {"qr_error": "x"}, r"step 'qr_code': qr_error must be one of"),
    (_single_step("qr_code"), {"width": 10}, r"step 'qr_code': width must be an integer in \[29, 8192\], got 10"),
    (_single_step("controlnet_text_to_image"), {"controlnet_weight": NOT_A_NUMBER},
     r"controlnet_weight must be a number in"),
    (_single_step("controlnet_text_to_image"), {"guidance_start": 0.8, "guidance_end": 0.2},
     "guidance_start 0.8 is after guidance_end 0.2"),
    ("dual_text_and_image_guided_generation", {"image_weights": [1, NOT_A_NUMBER]},
     r"step 'generate': image_weights\[1\] must be a number >= 0"),
])
def test_option_values_are_refused_at_build_and_per_call_naming_the_step_before_any_model_loads(app, options, message):
    cache = ModelCache()
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow(app, cache=cache, **options)
    flow = Appflow(app, cache=cache)  # defaults are fine; the same value per call is refused the same way
    with pytest.raises((ValueError, TypeError), match=message):
        flow(**options)
    assert cache.loads == 0


def test_sam_mask_threshold_takes_any_finite_logit_threshold():
    """transformers' `post_process_masks` thresholds SAM's mask logits, so negative values are meaningful."""
    flow = Appflow("openset_det_sam", cache=ModelCache(), mask_threshold=-1.5)
    assert flow.tasks["segment"].settings["mask_threshold"] == -1.5


def test_numpy_numbers_are_taken_as_the_pipelines_take_them():
    """QA: the new option checks refused np.float32 / np.int64 (and an array of image weights) that the pipelines'
    own checks accept."""
    import numpy as np

    from appflow.task import check_int_option, check_number_option
    from appflow.tasks.dual_guided import as_weight_list, blend_images
    from PIL import Image

    assert check_number_option("mask_threshold", np.float32(0.5), 0, 1) == 0.5
    assert check_int_option("dilate", np.int64(3), 0, 256) == 3
    with pytest.raises(ValueError, match="NaN and infinities are refused"):
        check_number_option("mask_threshold", np.float32("nan"))
    assert as_weight_list(np.array([1.0, 3.0])) == [1.0, 3.0]
    images = [Image.new("RGB", (4, 4), (0, 0, 0)), Image.new("RGB", (4, 4), (200, 200, 200))]
    assert blend_images(images, np.array([1.0, 3.0])).getpixel((0, 0)) == (150, 150, 150)
