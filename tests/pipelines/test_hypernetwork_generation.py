"""`<hypernet:name:strength>` in a generation: applied from the pipeline's `hypernetwork_dir` for the call only,
kept in the infotext's prompt (A1111 1.10 writes no hypernetwork key), so a pasted infotext makes the same image."""

from __future__ import annotations

import numpy as np
import pytest

from mixkit.errors import ModelNotFoundError
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from pipelines.infotext import parse_infotext

SMALL = dict(width=64, height=64, steps=2, seed=9, sampler="Euler")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hypernetworks")
    write_a1111_hypernetwork(root / "anime.pt", widths=(32, 64), seed=0)
    write_a1111_hypernetwork(root / "ink.pt", widths=(32,), seed=1)
    return root


@pytest.fixture(scope="module")
def pipe(sd1_pipe, folder):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pipeline(sd1_pipe, hypernetwork_dir=folder)


def image(result) -> np.ndarray:
    return np.asarray(result.images[0])


@pytest.fixture(scope="module")
def plain(pipe):
    return image(pipe(prompt="a red circle", **SMALL))


def patched_forwards(unet) -> set[str]:
    """The modules whose `forward` is an instance attribute (a patch), by name."""
    return {name for name, module in unet.named_modules() if "forward" in module.__dict__}


def test_the_tag_changes_the_image_for_the_call_only(pipe, plain):
    # the session's shared pipeline may carry other tests' patches: the call must leave the set as it found it
    before = patched_forwards(pipe.model.unet)
    tagged = pipe(prompt="a red circle<hypernet:anime:0.8>", **SMALL)
    assert np.abs(image(tagged).astype(int) - plain).max() > 10
    assert np.array_equal(image(pipe(prompt="a red circle", **SMALL)), plain)  # nothing left on the UNet
    assert patched_forwards(pipe.model.unet) == before


def test_strength_zero_is_the_untagged_image(pipe, plain):
    assert np.array_equal(image(pipe(prompt="a red circle<hypernet:anime:0>", **SMALL)), plain)


def test_two_tags_stack(pipe):
    one = image(pipe(prompt="a red circle<hypernet:anime:0.8>", **SMALL))
    other = image(pipe(prompt="a red circle<hypernet:ink:0.8>", **SMALL))
    both = image(pipe(prompt="a red circle<hypernet:anime:0.8><hypernet:ink:0.8>", **SMALL))
    assert not np.array_equal(both, one) and not np.array_equal(both, other)


def test_the_infotext_keeps_the_tag_and_pastes_back_to_the_same_image(pipe):
    result = pipe(prompt="a red circle <hypernet:anime:0.5>", **SMALL)
    parsed = parse_infotext(result.infotexts[0])
    assert parsed["Prompt"] == "a red circle <hypernet:anime:0.5>"
    assert not any("hypernet" in key.lower() for key in parsed)  # A1111 1.10 writes no Hypernet key or hashes
    again = pipe(prompt=parsed["Prompt"], width=64, height=64, steps=int(parsed["Steps"]), seed=int(parsed["Seed"]),
                 sampler=parsed["Sampler"])
    assert np.array_equal(image(again), image(result))


def test_an_unknown_name_fails_before_anything_changes(pipe, plain):
    with pytest.raises(ModelNotFoundError, match=r"'anim' not found.*Did you mean anime\?"):
        pipe(prompt="a red circle<hypernet:anim:1>", **SMALL)
    assert np.array_equal(image(pipe(prompt="a red circle", **SMALL)), plain)


def test_a_call_that_fails_midway_leaves_the_model_as_it_was(pipe, plain):
    def fail(progress):
        raise RuntimeError("stopped by the test")

    with pytest.raises(RuntimeError, match="stopped by the test"):
        pipe(prompt="a red circle<hypernet:anime:1>", callback=fail, **SMALL)
    assert np.array_equal(image(pipe(prompt="a red circle", **SMALL)), plain)


def test_a_tag_in_the_negative_prompt_is_text(pipe):
    with pytest.warns(UserWarning, match="negative prompt: <hypernet:anime:1> not applied"):
        pipe(prompt="a red circle", negative_prompt="<hypernet:anime:1>", **SMALL)


def test_without_a_folder_the_tag_is_skipped_with_a_warning(sd1_pipe, plain):
    with pytest.warns(UserWarning, match="no hypernetwork folder is set"):
        result = sd1_pipe(prompt="a red circle<hypernet:anime:1>", **SMALL)
    assert np.array_equal(image(result), plain)


def test_img2img_applies_the_tag(pipe, folder):
    from PIL import Image

    from pipelines.img2img import ImageToImage

    img2img = ImageToImage.from_pipeline(pipe)
    assert img2img.session.hypernetwork_dir == folder  # the folders come with the session
    picture = Image.new("RGB", (64, 64), (200, 40, 40))
    options = dict(init_images=[picture], denoising_strength=0.75, **SMALL)
    plain = image(img2img(prompt="a red circle", **options))
    tagged = image(img2img(prompt="a red circle<hypernet:anime:1>", **options))
    assert not np.array_equal(plain, tagged)


def test_a_missing_folder_is_refused_when_the_pipeline_is_made(sd1_pipe, tmp_path):
    from pipelines.txt2img import TextToImage

    with pytest.raises(ModelNotFoundError, match="hypernetwork folder not found"):
        TextToImage.from_pipeline(sd1_pipe, hypernetwork_dir=tmp_path / "missing")


def test_the_refiner_steps_run_with_the_hypernetwork_too(pipe, tmp_path):
    # A1111 keeps its loaded hypernetworks for every attention call of the generation, the refiner's included
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_models import build_tiny_sd1

    refiner = load_diffusion_model(build_tiny_sd1(tmp_path / "sd1-refiner", seed=7))
    patched_at_call = []

    def patched_projections():
        return any("forward" in m.__dict__ for m in refiner.unet.modules() if m is not refiner.unet)

    def spy(*args, **kwargs):
        patched_at_call.append(patched_projections())
        return type(refiner.unet).forward(refiner.unet, *args, **kwargs)

    refiner.unet.forward = spy
    try:
        pipe(prompt="a red circle<hypernet:anime:1>", refiner=refiner, refiner_switch_at=0.5,
             **{**SMALL, "steps": 4})
    finally:
        del refiner.unet.forward
    assert patched_at_call and all(patched_at_call)
    assert not patched_projections()
