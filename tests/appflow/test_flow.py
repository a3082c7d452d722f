"""Appflow's user-facing checks: unknown apps, wrong models, missing or mistyped inputs."""

from __future__ import annotations

import pytest
from PIL import Image

from appflow import APPS, Appflow, ModelCache
from mixkit.errors import ModelNotFoundError, UnknownNameError


def test_unknown_app_lists_the_valid_ones():
    with pytest.raises(UnknownNameError) as error:
        Appflow(app="openset_det_samm")
    message = str(error.value)
    assert "Did you mean 'openset_det_sam'?" in message
    for name in APPS.names():
        assert repr(name) in message


def test_every_registered_app_validates_and_has_a_default_model_per_role():
    for name in APPS.names():
        flow = Appflow(name)  # defaults are hub ids, not cached here: building must not load or download
        assert flow.models and all(isinstance(source, str) and source for source in flow.models.values())
        assert "result" in flow.outputs


def test_a_model_that_does_not_fit_its_role_fails_when_the_flow_is_built(tiny_sam_dir, tiny_dino_dir):
    cache = ModelCache()
    with pytest.raises(ValueError) as error:
        Appflow("openset_det_sam", models=[tiny_sam_dir, tiny_dino_dir], cache=cache)
    message = str(error.value)
    assert "model role 'detector'" in message and "'sam' model" in message and str(tiny_sam_dir) in message
    assert cache.loads == 0


def test_a_vlm_where_stable_diffusion_is_expected_is_refused(tiny_clip_dir):
    with pytest.raises(ValueError, match="needs a Stable Diffusion .* is a 'clip' model"):
        Appflow("text2image_generation", models=[tiny_clip_dir])


def test_missing_model_folder_and_wrong_model_argument_shapes(tmp_path, tiny_dino_dir, tiny_sam_dir):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        Appflow("openset_det_sam", models=[str(tmp_path / "nope") + "/", tiny_sam_dir])
    with pytest.raises(ValueError, match=r"takes 2 model\(s\) \['detector', 'segmenter'\], got 3"):
        Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir, tiny_sam_dir])
    with pytest.raises(ValueError, match=r"no model role\(s\) \['depth'\]"):
        Appflow("openset_det_sam", models={"depth": tiny_sam_dir})
    with pytest.raises(TypeError, match="wrap it in a list"):
        Appflow("openset_det_sam", models=str(tiny_dino_dir))
    with pytest.raises(ModelNotFoundError, match="neither an existing path nor a Hugging Face id"):
        Appflow("openset_det_sam", models=["bad id with spaces", tiny_sam_dir])
    with pytest.raises(TypeError, match="got int"):
        Appflow("openset_det_sam", models=[3, tiny_sam_dir])


def test_unknown_option_and_bad_device_or_dtype():
    with pytest.raises(TypeError, match="has no option 'box_treshold'.*box_threshold"):
        Appflow("openset_det_sam", box_treshold=0.3)
    with pytest.raises(ValueError, match="device must be"):
        Appflow("openset_det_sam", device="gpu")
    with pytest.raises(ValueError, match="dtype must be one of"):
        Appflow("openset_det_sam", dtype="float8")


def test_missing_input_wrong_type_and_unknown_keyword_fail_before_loading(tiny_dino_dir, tiny_sam_dir):
    cache = ModelCache()
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache)
    image = Image.new("RGB", (32, 32))
    with pytest.raises(ValueError, match="input 'prompt' \\(read by step 'detect'\\) is required"):
        flow(image=image)
    with pytest.raises(TypeError, match="input 'prompt' \\(read by step 'detect'\\) expects text \\(a string\\), got Image"):
        flow(image=image, prompt=image)
    with pytest.raises(ValueError, match="input 'image' .*: image file 'dog' does not exist"):
        flow(image="dog", prompt="dog")  # a string for an image is a path
    with pytest.raises(TypeError, match="input 'image' .* expects image \\(a PIL image, or an image file path or "
                                        "numpy array\\), got int"):
        flow(image=3, prompt="dog")
    with pytest.raises(TypeError, match="unknown keyword 'promt'"):
        flow(image=image, promt="dog")
    assert cache.loads == 0


def test_image_inputs_also_accept_a_path(tmp_path, tiny_dino_dir, tiny_sam_dir):
    path = tmp_path / "in.png"
    Image.new("RGB", (40, 24), (10, 200, 10)).save(path)
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], box_threshold=0.0, text_threshold=0.0,
                   cache=ModelCache())
    assert flow(image=path, prompt="dog")["seg_masks"].shape[1:] == (24, 40)


def test_image_inputs_take_path_strings_and_arrays_and_name_the_input_when_unreadable(tmp_path, tiny_dino_dir,
                                                                                        tiny_sam_dir):
    import numpy as np

    path = tmp_path / "in.png"
    Image.new("RGBA", (40, 24), (10, 200, 10, 255)).save(path)
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], box_threshold=0.0, text_threshold=0.0,
                   cache=ModelCache())
    assert flow(image=str(path), prompt="dog")["seg_masks"].shape[1:] == (24, 40)
    assert flow(image=np.zeros((24, 40, 3), dtype=np.uint8), prompt="dog")["seg_masks"].shape[1:] == (24, 40)
    # diffusers' output_type="np": float32 in [0, 1]
    assert flow(image=np.full((24, 40, 3), 0.5, dtype=np.float32), prompt="dog")["seg_masks"].shape[1:] == (24, 40)
    with pytest.raises(ValueError, match=r"input 'image' .*float images must be in \[0, 1\]"):
        flow(image=np.full((24, 40, 3), 255.0, dtype=np.float32), prompt="dog")
    with pytest.raises(ValueError, match="input 'image' .*nope.png.* does not exist"):
        flow(image=str(tmp_path / "nope.png"), prompt="dog")
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="input 'image'"):
        flow(image=tmp_path / "bad.png", prompt="dog")
