"""img2img's colour correction (A1111's `img2img_color_correction`): what is matched to what, and when."""

import numpy as np
import pytest
from PIL import Image

import pipelines.color_correction as color_module
from pipelines.color_correction import apply_color_correction, color_correction_target
from pipelines.image_prep import resize_image
from pipelines.img2img import ImageToImage

from .tiny_images import box_mask, noise_picture

SMALL = dict(width=64, height=64, steps=6, seed=5, prompt="a red circle", sampler="Euler")


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


def tinted(seed=3, size=64):
    """Noise pushed toward orange, so the tiny random model's output drifts away from its colours."""
    pixels = np.asarray(noise_picture(seed, size)).astype(np.float64)
    return Image.fromarray((pixels * 0.4 + np.array([150, 90, 20])).astype(np.uint8))


def mean_colour_distance(a, b):
    return float(np.abs(np.asarray(a, np.float64).mean(axis=(0, 1)) - np.asarray(b, np.float64).mean(axis=(0, 1))).sum())


def test_corrected_result_is_the_uncorrected_one_matched_to_the_init_image(i2i):
    init = tinted()
    plain = i2i(init_images=[init], denoising_strength=0.75, **SMALL).images[0]
    corrected = i2i(init_images=[init], denoising_strength=0.75, color_correction=True, **SMALL).images[0]
    expected = apply_color_correction(color_correction_target(init), plain)
    assert np.array_equal(np.asarray(corrected), np.asarray(expected))
    # the drift is pulled back: the mean colour lands nearer the init image's (the luminosity stays the result's,
    # so the brightness part of the drift remains)
    assert mean_colour_distance(corrected, init) < mean_colour_distance(plain, init)


def test_target_is_the_init_image_as_resized_for_the_model(i2i, monkeypatch):
    seen = []
    monkeypatch.setattr(color_module, "apply_color_correction", lambda target, image: seen.append(target) or image)
    init = tinted(size=96)
    i2i(init_images=[init], denoising_strength=0.5, color_correction=True, resize_mode="crop and resize", **SMALL)
    expected = color_correction_target(resize_image(init, 64, 64, "crop and resize"))
    assert len(seen) == 1 and np.array_equal(seen[0], expected)


def test_an_image_given_as_target_corrects_every_image_of_the_batch(i2i, monkeypatch):
    seen = []
    monkeypatch.setattr(color_module, "apply_color_correction", lambda target, image: seen.append(target) or image)
    reference = Image.new("RGB", (10, 7), (20, 200, 40))  # any size: only its histograms count
    i2i(init_images=[tinted()], denoising_strength=0.5, color_correction=reference, batch_size=2, **SMALL)
    assert len(seen) == 2
    assert all(np.array_equal(target, color_correction_target(reference)) for target in seen)


def test_inpainting_corrects_before_the_paste_back(i2i, monkeypatch):
    # A1111's process_images: apply_color_correction, then apply_overlay. A correction that paints everything
    # green shows it: the unmasked area is the original's again, the repainted area green.
    monkeypatch.setattr(color_module, "apply_color_correction",
                        lambda target, image: Image.new("RGB", image.size, (0, 255, 0)))
    init, mask = tinted(), box_mask((16, 16, 48, 40))
    out = np.asarray(i2i(init_images=[init], mask=mask, mask_blur=0, denoising_strength=0.75, color_correction=True,
                         **SMALL).images[0])
    inside = np.asarray(mask) == 255
    assert np.array_equal(out[~inside], np.asarray(init)[~inside])
    assert (out[inside] == [0, 255, 0]).all()


def test_only_masked_matches_the_working_crop_with_its_fill(i2i, monkeypatch):
    from pipelines.inpaint_mask import fill_masked_area

    seen = []
    monkeypatch.setattr(color_module, "apply_color_correction",
                        lambda target, image: seen.append((target, image.size)) or image)
    init, mask = tinted(size=128), box_mask((40, 40, 72, 72), size=128)
    i2i(init_images=[init], mask=mask, mask_blur=0, inpaint_full_res=True, inpaint_full_res_padding=8,
        inpainting_fill="fill", denoising_strength=0.75, color_correction=True, **SMALL)
    crop = (32, 32, 80, 80)  # the mask's box with 8 pixels of padding, already square
    work = resize_image(init.crop(crop), 64, 64, "resize and fill")
    work_mask = resize_image(mask.crop(crop), 64, 64, "resize and fill")
    (target, size), = seen
    assert size == (64, 64)  # the generated crop, before it is put back into the 128x128 picture
    assert np.array_equal(target, color_correction_target(fill_masked_area(work, work_mask)))


@pytest.mark.parametrize("value", [1, "true", None])
def test_color_correction_must_be_a_flag_or_an_image(i2i, value):
    with pytest.raises(TypeError, match="color_correction must be False, True"):
        i2i.check_inputs(i2i.params_class(init_images=[tinted()], color_correction=value, **SMALL))


def test_off_by_default_and_not_in_the_infotext(i2i):
    init = tinted()
    plain = i2i(init_images=[init], denoising_strength=0.5, **SMALL)
    corrected = i2i(init_images=[init], denoising_strength=0.5, color_correction=True, **SMALL)
    assert not np.array_equal(np.asarray(plain.images[0]), np.asarray(corrected.images[0]))
    assert corrected.infotexts == plain.infotexts  # A1111 records nothing for it


def test_a_copy_from_before_the_correction_is_kept_pasted_back_and_saved(i2i, tmp_path):
    init, mask = tinted(), box_mask((16, 16, 48, 40))
    common = dict(init_images=[init], mask=mask, mask_blur=0, denoising_strength=0.75, **SMALL)
    plain = i2i(**common)
    kept = i2i(color_correction=True, save_images_before_color_correction=True, **common)
    assert list(kept.before_color_correction) == [0]
    assert np.array_equal(np.asarray(kept.before_color_correction[0]), np.asarray(plain.images[0]))
    assert not np.array_equal(np.asarray(kept.images[0]), np.asarray(plain.images[0]))
    [path] = kept.save(tmp_path)
    with Image.open(path.with_name(f"{path.stem}-before-color-correction.png")) as before:
        assert np.array_equal(np.asarray(before.convert("RGB")), np.asarray(plain.images[0]))
    # without the correction there is nothing to keep
    assert i2i(save_images_before_color_correction=True, **common).before_color_correction == {}


def test_save_as_writes_the_copy_beside_a_chosen_file_name_without_touching_the_result(i2i, tmp_path):
    """`-o cat.png`: the copy is `cat-before-color-correction.png` (A1111's suffix on the result's own name); with
    several images each gets its own copy, and the results are the corrected images."""
    common = dict(init_images=[tinted()], denoising_strength=0.75, color_correction=True,
                  save_images_before_color_correction=True, **SMALL)
    one = i2i(**common)
    assert one.save_as(tmp_path / "cat.png") == [tmp_path / "cat.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cat-before-color-correction.png", "cat.png"]
    with Image.open(tmp_path / "cat.png") as result, Image.open(tmp_path / "cat-before-color-correction.png") as before:
        assert np.array_equal(np.asarray(result.convert("RGB")), np.asarray(one.images[0]))
        assert np.array_equal(np.asarray(before.convert("RGB")), np.asarray(one.before_color_correction[0]))
        assert not np.array_equal(np.asarray(result.convert("RGB")), np.asarray(before.convert("RGB")))
        assert before.text["parameters"] == result.text["parameters"] == one.infotexts[0]
    two = i2i(**{**common, "batch_size": 2})
    folder = tmp_path / "two"
    assert two.save_as(folder / "dog.png") == [folder / "dog-1.png", folder / "dog-2.png"]
    assert sorted(p.name for p in folder.iterdir()) == ["dog-1-before-color-correction.png", "dog-1.png",
                                                        "dog-2-before-color-correction.png", "dog-2.png"]
    for n in (1, 2):
        with Image.open(folder / f"dog-{n}-before-color-correction.png") as before:
            assert np.array_equal(np.asarray(before.convert("RGB")), np.asarray(two.before_color_correction[n - 1]))
