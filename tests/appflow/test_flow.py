"""Appflow's user-facing checks: unknown apps, wrong models, missing or mistyped inputs."""

from __future__ import annotations

import pytest
from PIL import Image

from appflow import APPS, Appflow, Chain, ChainError, ModelCache, Step, validate_chain
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
    with pytest.raises(ValueError, match="device='gpu' is not a device name"):
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
    with pytest.raises(TypeError, match="input 'image' .* expects image \\(a PIL image, or an image file path, "
                                        "http\\(s\\) URL or numpy array\\), got int"):
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


# -- PaddleMIX's call conventions ------------------------------------------------------------------
def test_task_is_paddlemix_spelling_of_app_and_giving_both_is_an_error():
    assert Appflow(task="openset_det_sam").name == "openset_det_sam"  # PaddleMIX README: Appflow(task=...)
    with pytest.raises(TypeError, match="Pass the app once"):
        Appflow(app="openset_det_sam", task="openset_det_sam")
    with pytest.raises(TypeError, match="needs an app"):
        Appflow()


def test_paddlemix_app_names_open_the_same_app():
    flow = Appflow(app="inpainting")  # PaddleMIX's name for Grounding DINO -> SAM -> SD inpainting
    assert flow.name == "text_guided_inpainting" and list(flow.models) == ["detector", "segmenter", "generator"]
    assert APPS.get("inpainting") is APPS.get("text_guided_inpainting")
    assert "inpainting" not in APPS.names()  # listed once, under its own name
    with pytest.raises(UnknownNameError, match="Did you mean 'inpainting'.*aliases: 'inpainting'"):
        Appflow(app="inpaintin")


@pytest.mark.parametrize("app, alias, option, value", [
    ("text2image_generation", "guidance_scale", "cfg_scale", 7.5),
    ("image2image_text_guided_generation", "strength", "denoising_strength", 0.5),
    ("image2image_text_guided_generation", "guidance_scale", "cfg_scale", 6.0),
    ("dual_text_and_image_guided_generation", "text_to_image_strength", "denoising_strength", 0.75),
    ("image2image_text_guided_upscaling", "guidance_scale", "cfg_scale", 5.0),  # the upscaler's earlier spelling
])
def test_paddlemix_option_spellings_are_aliases(app, alias, option, value):
    cache = ModelCache()
    flow = Appflow(app, cache=cache, **{alias: value})
    [task] = flow.tasks.values()
    assert task.settings[option] == value and alias not in task.settings
    with pytest.raises(TypeError, match=f"got option '{option}' twice, as '{alias}' and as '{option}'"):
        Appflow(app, cache=cache, **{alias: value, option: value})
    with pytest.raises(TypeError, match=f"got option '{option}' twice"):
        flow(prompt="x", **{alias: value, option: value})  # per call too, before anything runs
    assert cache.loads == 0


def test_a_step_option_in_a_chain_may_use_an_alias_and_is_checked_when_validated():
    chain = Chain("aliased", [Step("text_to_image", options={"guidance_scale": 3.0})], inputs=["prompt"])
    assert Appflow(chain).tasks["text_to_image"].settings["cfg_scale"] == 3.0
    with pytest.raises(ChainError, match="step 'text_to_image': steps must be in"):
        validate_chain(Chain("bad", [Step("text_to_image", options={"steps": 0})], inputs=["prompt"]))


# -- checks before any model loads ----------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"steps": 0}, r"step 'generate': steps must be in \[1, 1000\], got 0"),
    ({"cfg_scale": -1}, r"cfg_scale must be in \[0, 100.0\]"),
    ({"sampler": "Eulr"}, "Did you mean 'Euler'"),
    ({"seed": -2}, "seed must be in"),
    ({"width": 5000}, "width must be in"),
    ({"batch_size": 0}, "batch_size must be in"),
])
def test_generation_option_values_are_checked_at_build_and_per_call_before_loading(options, message):
    cache = ModelCache()
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow("text2image_generation", cache=cache, **options)
    flow = Appflow("text2image_generation", cache=cache)
    with pytest.raises((ValueError, TypeError), match=message):
        flow(prompt="x", **options)
    assert cache.loads == 0


@pytest.mark.parametrize("app, options, message", [
    ("image2image_text_guided_generation", {"denoising_strength": 1.5}, "denoising_strength must be a number in"),
    ("text_guided_inpainting", {"inpainting_fill": "blur"}, "Unknown masked content 'blur'"),
    ("text_guided_inpainting", {"mask_blur": -1}, "mask_blur must be an integer"),
    ("image2image_text_guided_upscaling", {"steps": 0}, r"steps must be an integer in \[1, 1000\]"),
    ("image2image_text_guided_upscaling", {"tile_overlap": 64}, r"tile_overlap must be an integer in \[0, 63\]"),
    ("image2text_generation", {"max_new_tokens": 0}, "max_new_tokens must be an integer"),
])
def test_other_option_values_are_checked_when_the_flow_is_built(app, options, message):
    with pytest.raises(ValueError, match=message):
        Appflow(app, cache=ModelCache(), **options)


def test_a_device_this_torch_cannot_use_is_refused_when_the_flow_is_built():
    import torch

    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="numbered"):
            Appflow("text2image_generation", device=f"cuda:{torch.cuda.device_count()}")
    else:
        with pytest.raises(ValueError, match="device='cuda': .*device='cpu'"):
            Appflow("text2image_generation", device="cuda")
    assert Appflow("text2image_generation", device="cpu").device == "cpu"


@pytest.mark.parametrize("name, suggestion", [("mixkit-tiny-xx", "mixkit-tiny-sd"), ("mixkit-tiny-sdd", "mixkit-tiny-sd"),
                                              ("mixkt-tiny-clip", "mixkit-tiny-clip")])
def test_a_misspelt_shipped_model_name_is_refused_when_the_flow_is_built(name, suggestion):
    cache = ModelCache()
    with pytest.raises(ModelNotFoundError, match=f"{name!r} is neither a local path nor a shipped tiny model. "
                                                 f"Did you mean {suggestion!r}"):
        Appflow("text2image_generation", models=[name], cache=cache)
    assert cache.loads == 0


def test_empty_images_are_refused_for_every_image_input_before_loading(tmp_path):
    cache = ModelCache()
    empty = Image.new("RGB", (0, 0))
    with pytest.raises(ValueError, match=r"input 'image' \(read by step 'classify'\) is an empty 0x0 image"):
        Appflow("zero_shot_classification", cache=cache)(image=empty, labels=["a", "b"])
    with pytest.raises(ValueError, match=r"input 'images' .* is an empty 5x0 image"):
        Appflow("dual_text_and_image_guided_generation", cache=cache)(
            images=[Image.new("RGB", (4, 4)), Image.new("RGB", (5, 0))], prompt="x")
    assert cache.loads == 0


# -- LoRA and textual-inversion folders ------------------------------------------------------------
def test_a_lora_tag_without_a_lora_folder_names_the_appflow_way_to_set_it_before_loading():
    cache = ModelCache()
    flow = Appflow(app="text2image_generation", cache=cache)
    with pytest.raises(ValueError, match=r"'<lora:x:0.5>' names a LoRA but this flow has no LoRA folder; build it "
                                         r"with Appflow\(app=..., lora_dir="):
        flow(prompt="a <lora:x:0.5>")
    assert cache.loads == 0


def test_a_lora_tag_the_folder_lacks_is_refused_before_loading(tmp_path):
    cache = ModelCache()
    flow = Appflow(app="text2image_generation", cache=cache, lora_dir=tmp_path)
    with pytest.raises(ValueError, match=r"Task 'text_to_image': No LoRA named 'nowhere' in .*0 LoRA file"):
        flow(prompt="a <lora:nowhere:0.5>")
    assert cache.loads == 0


def test_lora_and_embeddings_folders_must_exist(tmp_path):
    with pytest.raises(ValueError, match="lora_dir .*nope.* is not an existing folder"):
        Appflow("text2image_generation", lora_dir=tmp_path / "nope")
    with pytest.raises(ValueError, match="embeddings_dir .* is not an existing folder"):
        Appflow("text2image_generation", embeddings_dir=str(tmp_path / "nope"))
    flow = Appflow("text2image_generation", lora_dir=tmp_path, embeddings_dir=tmp_path)
    assert flow.lora_dir == flow.embeddings_dir == str(tmp_path)


def test_a_hypernetwork_folder_must_exist_and_its_tags_are_checked_before_loading(tmp_path):
    from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork

    with pytest.raises(ValueError, match="hypernetwork_dir .* is not an existing folder; .* hypernetwork .pt files"):
        Appflow("text2image_generation", hypernetwork_dir=tmp_path / "nope")
    write_a1111_hypernetwork(tmp_path / "anime.pt", widths=(32,))
    cache = ModelCache()
    flow = Appflow("text2image_generation", cache=cache, hypernetwork_dir=tmp_path)
    with pytest.raises(ValueError, match=r"Task 'text_to_image': hypernetwork 'anim' not found.*Did you mean anime"):
        flow(prompt="a <hypernet:anim:0.5>")
    with pytest.raises(ValueError, match="strength must be a number"):
        flow(prompt="a <hypernet:anime:x>")
    assert cache.loads == 0
