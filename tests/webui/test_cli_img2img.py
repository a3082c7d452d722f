"""`mixkit img2img IMAGE "prompt" [--mask MASK]`: the Python API's img2img and inpaint, PNGs with infotext, one-line
errors with exit code 2 before the model loads, nothing written on an error."""

import numpy as np
import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from pipelines.img2img import ImageToImage
from webui.cli import main

from .cli_inputs import write_box_mask, write_noise_picture

ARGS = ["--steps", "4", "--seed", "21"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A 90x70 noise picture (not a multiple of 8: the default size rounds it down to 88x64) and a mask over part of it."""
    folder = tmp_path_factory.mktemp("img2img-cli")
    write_noise_picture(folder / "init.png", seed=0, width=90, height=70)
    write_box_mask(folder / "mask.png", (90, 70), (50, 20, 70, 40))
    return folder


@pytest.fixture(scope="module")
def i2i(tiny_sd1_dir):
    return ImageToImage.from_pretrained(tiny_sd1_dir)


def written(capsys) -> list[str]:
    return capsys.readouterr().out.split()


def test_img2img_writes_the_python_apis_image_at_the_init_images_size(tiny_sd1_dir, files, tmp_path, capsys, i2i):
    code = main(["img2img", str(files / "init.png"), "a red circle", "--model", str(tiny_sd1_dir),
                 "--denoising-strength", "0.5", "-o", str(tmp_path / "out"), *ARGS])
    assert code == 0
    printed = capsys.readouterr()
    [path] = printed.out.split()
    final_bar = printed.err.replace("\r", "\n").strip().splitlines()[-1]
    assert "| 3/3 [" in final_bar  # the bar ends full at the steps run, int(0.5 x 4) + 1, not at 3 of --steps 4
    saved = Image.open(path)
    expected = i2i(prompt="a red circle", init_images=[Image.open(files / "init.png")], denoising_strength=0.5,
                   steps=4, seed=21)
    assert saved.size == expected.images[0].size == (88, 64)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    fields = parse_infotext(saved.text["parameters"])
    assert (fields["Denoising strength"], fields["Size-1"], fields["Size-2"]) == ("0.5", "88", "64")


def test_inpaint_only_masked_keeps_every_pixel_outside_the_region(tiny_sd1_dir, files, tmp_path, capsys, i2i):
    code = main(["img2img", str(files / "init.png"), "a cat", "--model", str(tiny_sd1_dir), "--mask",
                 str(files / "mask.png"), "--only-masked", "--masked-content", "fill", "--width", "64", "--height", "64",
                 "-o", str(tmp_path / "cat.png"), *ARGS])
    assert code == 0
    assert written(capsys) == [str(tmp_path / "cat.png")]
    saved = Image.open(tmp_path / "cat.png")
    init = Image.open(files / "init.png").convert("RGB")
    assert saved.size == (90, 70)  # "only masked" pastes the region back into the whole picture
    ours, theirs = np.asarray(saved.convert("RGB")), np.asarray(init)
    changed = np.argwhere((ours != theirs).any(axis=2))
    assert len(changed) and changed.min(axis=0).tolist() >= [20 - 12, 50 - 12]  # the mask, blurred by 4 (kernel 21)
    assert changed.max(axis=0).tolist() <= [39 + 12, 69 + 12]
    expected = i2i(prompt="a cat", init_images=[init], mask=Image.open(files / "mask.png"), inpaint_full_res=True,
                   inpainting_fill="fill", width=64, height=64, steps=4, seed=21)
    assert ours.tobytes() == expected.images[0].tobytes()
    fields = parse_infotext(saved.text["parameters"])
    assert (fields["Masked content"], fields["Inpaint area"], fields["Mask blur"]) == ("fill", "Only masked", "4")


@pytest.mark.parametrize("extra, message", [
    (["--denoising-strength", "1.5"], "--denoising-strength must be a number in [0, 1], got 1.5"),
    (["--resize-mode", "stretch"], "Unknown resize mode 'stretch'; valid ones: just resize, crop and resize"),
    (["--only-masked"], "--only-masked: inpaint flag without --mask; add --mask MASK"),
    (["--masked-content", "fill", "--mask-blur", "8"], "--mask-blur, --masked-content: inpaint flags without --mask"),
    (["--mask", "MASK", "--masked-content", "noise"], "Unknown masked content 'noise'; valid ones: original, fill"),
    (["--mask", "MASK", "--only-masked-padding", "600"], "--only-masked-padding must be an integer in [0, 512]"),
    (["--mask", "missing.png"], "--mask 'missing.png' does not exist"),
    (["--width", "60"], "--width must be a multiple of 8, got 60"),
    (["--resize-mode", "just resize (latent upscale)", "--mask", "MASK"], "works on img2img without a mask"),
    (["--scale-by", "4.5"], "--scale-by 4.5 must be in [0.05, 4.0] (A1111's Resize by slider)"),
    (["--scale-by", "2", "--height", "64"], "--scale-by sizes the image from IMAGE's size; leave out --height"),
])
def test_user_errors_are_one_line_with_exit_code_2_before_the_model_loads(files, tmp_path, capsys, monkeypatch, extra,
                                                                          message):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    extra = [str(files / "mask.png") if value == "MASK" else value for value in extra]
    out = tmp_path / "out"
    code = main(["img2img", str(files / "init.png"), "x", "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("mixkit: error:") and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("image, message", [
    ("missing.png", "IMAGE 'missing.png' does not exist"),
    ("folder", "is a folder; give an image file"),
    ("text.png", "is not an image format Pillow can read"),
    ("huge.png", "is 5000x4000, larger than one generation may be (4096 px a side, 4,194,304 pixels); pass --width"),
])
def test_an_init_image_that_cannot_be_used_is_named(tmp_path, capsys, monkeypatch, image, message):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    (tmp_path / "folder").mkdir()
    (tmp_path / "text.png").write_text("not an image")
    Image.new("L", (5000, 4000)).save(tmp_path / "huge.png")
    monkeypatch.chdir(tmp_path)
    assert main(["img2img", image, "x", "-o", "out", *ARGS]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_mask_that_cannot_line_up_is_refused_before_the_load(files, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    Image.new("L", (64, 64), 255).save(tmp_path / "square.png")  # init.png is 90x70
    assert main(["img2img", str(files / "init.png"), "--mask", str(tmp_path / "square.png"),
                 "-o", str(tmp_path / "o")]) == 2
    assert (f"mixkit: error: --mask {tmp_path / 'square.png'}: The mask is 64x64 but the image is 90x70: their aspect "
            "ratios differ") in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_scale_by_is_a1111s_resize_by_each_side_times_it_rounded_down_to_8(tiny_sd1_dir, files, tmp_path, capsys):
    """90x70 x 1.5 = 135x105 -> 128x104, the image a run with --width 128 --height 104 makes; an infotext's Size is
    not taken then (A1111's Resize by tab has no width and height), and the note says so."""
    base = ["img2img", str(files / "init.png"), "x", "--model", str(tiny_sd1_dir), *ARGS,
            "--infotext", "x\nSteps: 4, Sampler: Euler, Seed: 21, Size: 64x64"]
    assert main([*base, "--scale-by", "1.5", "-o", str(tmp_path / "a.png")]) == 0
    assert "--infotext Size 64x64 not honoured: --scale-by 1.5 sizes the image" in capsys.readouterr().err
    assert main([*base, "--width", "128", "--height", "104", "-o", str(tmp_path / "b.png")]) == 0
    scaled, sized = Image.open(tmp_path / "a.png"), Image.open(tmp_path / "b.png")
    assert scaled.size == (128, 104)
    assert scaled.tobytes() == sized.tobytes()


def test_color_correction_flag_gives_the_python_apis_corrected_image(tiny_sd1_dir, files, tmp_path, capsys, i2i):
    code = main(["img2img", str(files / "init.png"), "a red circle", "--model", str(tiny_sd1_dir),
                 "--denoising-strength", "0.6", "--color-correction", "-o", str(tmp_path / "out"), *ARGS])
    assert code == 0
    [path] = written(capsys)
    common = dict(prompt="a red circle", init_images=[Image.open(files / "init.png")], denoising_strength=0.6,
                  steps=4, seed=21)
    corrected, plain = i2i(color_correction=True, **common), i2i(**common)
    saved = Image.open(path).convert("RGB").tobytes()
    assert saved == corrected.images[0].tobytes() != plain.images[0].tobytes()


def test_save_before_color_correction_writes_the_uncorrected_copy_beside(tiny_sd1_dir, files, tmp_path, capsys, i2i):
    code = main(["img2img", str(files / "init.png"), "a red circle", "--model", str(tiny_sd1_dir),
                 "--denoising-strength", "0.6", "--color-correction", "--save-before-color-correction",
                 "-o", str(tmp_path / "out"), *ARGS])
    assert code == 0
    [path] = written(capsys)  # the copy is not listed: it is not a result
    plain = i2i(prompt="a red circle", init_images=[Image.open(files / "init.png")], denoising_strength=0.6, steps=4,
                seed=21)
    before = path.replace(".png", "-before-color-correction.png")
    assert Image.open(before).convert("RGB").tobytes() == plain.images[0].tobytes()


def test_save_before_color_correction_with_an_output_file_name(tiny_sd1_dir, files, tmp_path, capsys, i2i):
    """-o cat.png: the copy is cat-before-color-correction.png beside it (it was not written at all), and cat.png is
    the corrected image."""
    code = main(["img2img", str(files / "init.png"), "a red circle", "--model", str(tiny_sd1_dir),
                 "--denoising-strength", "0.6", "--color-correction", "--save-before-color-correction",
                 "-o", str(tmp_path / "cat.png"), *ARGS])
    assert code == 0
    assert written(capsys) == [str(tmp_path / "cat.png")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cat-before-color-correction.png", "cat.png"]
    common = dict(prompt="a red circle", init_images=[Image.open(files / "init.png")], denoising_strength=0.6,
                  steps=4, seed=21)
    corrected, plain = i2i(color_correction=True, **common), i2i(**common)
    assert Image.open(tmp_path / "cat.png").convert("RGB").tobytes() == corrected.images[0].tobytes()
    before = Image.open(tmp_path / "cat-before-color-correction.png")
    assert before.convert("RGB").tobytes() == plain.images[0].tobytes() != corrected.images[0].tobytes()
