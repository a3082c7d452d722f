"""`mixkit img2img --infotext`: an img2img / inpaint image is made again bit for bit from its own PNG, as A1111's
"Send to img2img / inpaint" pastes it; what the command cannot use is named on stderr; the API's other img2img fields
(per-axis mask blur, soft mask, latent mask, noise settings) have flags, checked before the load."""

import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from webui.cli import main

from .cli_inputs import write_box_mask, write_noise_picture

SIZE = ["--width", "64", "--height", "64", "--steps", "4"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("img2img-infotext")
    write_noise_picture(folder / "init.png", seed=3, width=64, height=64)
    write_box_mask(folder / "mask.png", (64, 64), (16, 16, 48, 40))
    return folder


def _img2img(capsys, *args) -> tuple[str, str]:
    code = main(["img2img", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()[0], captured.err


@pytest.mark.parametrize("flags", [
    ["--sampler", "Euler a", "--denoising-strength", "0.6", "--cfg", "4.5", "--negative", "blurry",
     "--noise-multiplier", "1.1", "--extra-noise", "0.2"],
    ["--mask", "MASK", "--masked-content", "fill", "--mask-blur", "2", "--inpaint-not-masked",
     "--denoising-strength", "0.9", "--subseed", "5", "--subseed-strength", "0.3"],
    ["--mask", "MASK", "--only-masked", "--only-masked-padding", "8", "--masked-content", "latent noise"],
])
def test_an_img2img_image_is_reproduced_bit_for_bit_from_its_own_png(tiny_sd1_dir, files, tmp_path, capsys, flags):
    flags = [str(files / "mask.png") if flag == "MASK" else flag for flag in flags]
    mask = flags[flags.index("--mask"):flags.index("--mask") + 2] if "--mask" in flags else []
    original, _ = _img2img(capsys, str(files / "init.png"), "a red circle", "--model", str(tiny_sd1_dir),
                           "--seed", "77", "-o", str(tmp_path / "a"), *SIZE, *flags)
    # Only the image (and the mask, which no infotext holds) are given again: A1111's paste sets the rest.
    again, err = _img2img(capsys, str(files / "init.png"), "--infotext", original, *mask, "--model",
                          str(tiny_sd1_dir), "-o", str(tmp_path / "b"))
    assert "warning" not in err
    first, second = Image.open(original), Image.open(again)
    assert first.text["parameters"] == second.text["parameters"]
    assert first.tobytes() == second.tobytes()
    if mask:
        assert "Masked content:" in first.text["parameters"]
    else:
        assert "Noise multiplier: 1.1, Extra noise: 0.2" in first.text["parameters"]


def test_flags_win_and_unusable_keys_are_named(tiny_sd1_dir, files, tmp_path, capsys):
    text = ("a blue square\nSteps: 3, Sampler: Euler, CFG scale: 6, Seed: 3, Size: 64x64, Denoising strength: 0.5, "
            "Mask blur: 8, Masked content: fill, Hires upscale: 2, Hires upscaler: Latent, RNG: CPU")
    path, err = _img2img(capsys, str(files / "init.png"), "--infotext", text, "--model", str(tiny_sd1_dir),
                         "--seed", "4", "-o", str(tmp_path / "o"))
    written = Image.open(path).text["parameters"]
    assert written.startswith("a blue square\nSteps: 3, Sampler: Euler,")
    assert "Seed: 4," in written and "Denoising strength: 0.5" in written
    assert "Mask blur" not in written and "Hires" not in written
    warning = [line for line in err.splitlines() if "not honoured" in line]
    assert warning == ["mixkit: warning: --infotext keys not honoured: Mask blur: 8 (an inpaint setting; give --mask "
                       "to inpaint); Masked content: fill (an inpaint setting; give --mask to inpaint); Hires upscale: "
                       "2 (img2img has no hires fix); Hires upscaler: Latent (img2img has no hires fix)"]


def test_an_explicit_prompt_wins_and_an_empty_one_stays_empty(tiny_sd1_dir, files, tmp_path, capsys):
    text = "a cat\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, RNG: CPU"
    path, _ = _img2img(capsys, str(files / "init.png"), "", "--infotext", text, "--model", str(tiny_sd1_dir),
                       "-o", str(tmp_path / "o"))
    assert Image.open(path).text["parameters"].startswith("Steps: 2,")  # A1111 writes no line for an empty prompt


@pytest.mark.parametrize("extra, fragment", [
    (["--infotext", "x\nSteps: 2, Seed: 1, ControlNet 0: \"Module: canny\""],
     "--infotext's ControlNet 0 names no model"),
    (["--infotext", "x\nSteps: 2, Seed: 1, ControlNet 0: \"Module: canny, Model: tiny_canny\""],
     "no --controlnet-dir to look it up by name"),
    (["--infotext", "x\nSteps: 2, Seed: 1, Denoising strength: 2"], "--denoising-strength must be a number in [0, 1]"),
    (["--mask", "MASK", "--infotext", "x\nSteps: 2, Seed: 1, Mask mode: Inpaint sometimes"], "Mask mode: 'Inpaint sometimes'"),
    (["--mask-blur-x", "3"], "--mask-blur-x: inpaint flag without --mask"),
    (["--no-mask-round", "--latent-mask", "MASK"], "--no-mask-round, --latent-mask: inpaint flags without --mask"),
    (["--mask", "MASK", "--mask-blur-y", "200"], "--mask-blur-y must be an integer in [0, 128]"),
    (["--mask", "MASK", "--latent-mask", "MASK", "--only-masked"], "--latent-mask works on the whole picture"),
    (["--mask", "MASK", "--latent-mask", "missing.png"], "--latent-mask 'missing.png' does not exist"),
    (["--noise-multiplier", "-1"], "--noise-multiplier must be a number in [0, 1.5]"),
    (["--extra-noise", "nan"], "--extra-noise must be a number in [0, 1]"),
    (["--inpainting-mask-weight", "2"], "--inpainting-mask-weight must be a number in [0, 1]"),
])
def test_user_errors_are_refused_before_the_load(files, tmp_path, capsys, monkeypatch, extra, fragment):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    extra = [str(files / "mask.png") if value == "MASK" else value for value in extra]
    assert main(["img2img", str(files / "init.png"), "-o", str(tmp_path / "o"), *SIZE, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mixkit: error:") and fragment in err[-1], err
    assert not (tmp_path / "o").exists()


def test_per_axis_blur_soft_mask_and_latent_mask_match_the_python_api(tiny_sd1_dir, files, tmp_path, capsys):
    latent = Image.new("L", (64, 64), 0)
    latent.paste(255, (20, 20, 44, 36))
    latent.save(tmp_path / "latent.png")
    path, _ = _img2img(capsys, str(files / "init.png"), "a dog", "--model", str(tiny_sd1_dir), "--mask",
                       str(files / "mask.png"), "--mask-blur-x", "0", "--mask-blur-y", "6", "--no-mask-round",
                       "--latent-mask", str(tmp_path / "latent.png"), "--masked-content", "fill", "--seed", "5",
                       "-o", str(tmp_path / "o.png"), *SIZE)
    expected = ImageToImage.from_pretrained(tiny_sd1_dir)(
        prompt="a dog", init_images=[Image.open(files / "init.png")], mask=Image.open(files / "mask.png"),
        mask_blur_x=0, mask_blur_y=6, mask_round=False, latent_mask=latent, inpainting_fill="fill", seed=5,
        width=64, height=64, steps=4)
    saved = Image.open(path)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
