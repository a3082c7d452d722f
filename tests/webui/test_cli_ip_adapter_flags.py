"""`mixkit generate --ip-adapter ...`: the image prompt reaches the pipeline and the infotext; bad flags fail before
the model loads, with exit code 2 and nothing written."""

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21"]


@pytest.fixture(scope="module")
def adapter(tiny_sd1_dir, tmp_path_factory):
    """A tiny adapter for the tiny SD 1.x UNet in h94's layout (file + image_encoder/ beside it)."""
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    return save_tiny_ip_adapter(tmp_path_factory.mktemp("ip") / "models", unet)


def run(tiny_sd1_dir, out, *extra) -> int:
    return main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])


def test_image_prompt_changes_the_image_and_is_recorded(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    assert run(tiny_sd1_dir, tmp_path / "plain") == 0
    assert run(tiny_sd1_dir, tmp_path / "zero", "--ip-adapter", str(adapter), "--ip-adapter-image", str(image),
               "--ip-adapter-scale", "0") == 0
    assert run(tiny_sd1_dir, tmp_path / "ip", "--ip-adapter", str(adapter), "--ip-adapter-image", str(image),
               "--ip-adapter-scale", "0.6", "--ip-adapter-image-encoder", str(adapter.parent / "image_encoder")) == 0
    plain, zero, guided = (np.asarray(Image.open(next((tmp_path / name).iterdir()))).astype(int)
                           for name in ("plain", "zero", "ip"))
    assert np.abs(zero - plain).max() <= 1
    assert np.abs(guided - plain).mean() > 1
    infotext = Image.open(next((tmp_path / "ip").iterdir())).text["parameters"]
    assert 'IP-Adapter: "ip-adapter_tiny: 0.6"' in infotext


@pytest.mark.parametrize("extra, message", [
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--refiner", "{missing}"],
     "--ip-adapter cannot be combined with --refiner (the refiner's UNet has no adapter layers) yet"),
    (["--ip-adapter-image", "{image}"], "without --ip-adapter"),
    (["--ip-adapter", "{adapter}"], "needs --ip-adapter-image"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-scale", "3"],
     "--ip-adapter-scale must be a number in [0, 2]"),
    (["--ip-adapter", "{adapter}", "--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}"],
     "one image per adapter"),
    (["--ip-adapter", "{missing}", "--ip-adapter-image", "{image}"], "does not exist"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-image-encoder", "{missing}"],
     "image encoder"),
])
def test_bad_flags_are_one_line_errors(tiny_sd1_dir, adapter, tmp_path, capsys, extra, message):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    names = {"adapter": str(adapter), "image": str(image), "missing": str(tmp_path / "nope")}
    out = tmp_path / "out"
    code = run(tiny_sd1_dir, out, *(value.format(**names) for value in extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)  # refused before the model loaded
    assert not out.exists() or not any(out.glob("*.png"))


def test_infotext_gives_the_scale_for_the_adapter_passed(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    flags = ["--ip-adapter", str(adapter), "--ip-adapter-image", str(image)]
    assert run(tiny_sd1_dir, tmp_path / "first", *flags, "--ip-adapter-scale", "0.4") == 0
    first = next((tmp_path / "first").iterdir())
    capsys.readouterr()
    assert main(["generate", "--infotext", str(first), "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "again"),
                 *flags]) == 0
    assert "IP-Adapter" not in capsys.readouterr().err  # taken, not warned about
    again = next((tmp_path / "again").iterdir())
    assert Image.open(again).tobytes() == Image.open(first).tobytes()
    assert 'IP-Adapter: "ip-adapter_tiny: 0.4"' in Image.open(again).text["parameters"]


EXACT = [*ARGS, "--sampler", "Euler", "--cfg", "7"]  # every sampling setting given: the Python call below is the same


def python_api_image(tiny_sd1_dir, **ip_fields) -> np.ndarray:
    """The Python API's picture for `run`'s settings (EXACT) with `ip_fields`."""
    from pipelines.ip_adapter import IPAdapterTextToImage, IPAdapterTxt2ImgParams

    pipe = IPAdapterTextToImage.from_pretrained(str(tiny_sd1_dir))
    params = IPAdapterTxt2ImgParams(prompt="a cat", width=64, height=64, steps=3, seed=21, sampler="Euler",
                                    cfg_scale=7.0, **ip_fields)
    return np.asarray(pipe(params).images[0].convert("RGB"))


def saved(folder) -> np.ndarray:
    return np.asarray(Image.open(next(folder.glob("*.png"))).convert("RGB"))


def left_half_mask(path, size=(64, 64)):
    mask = Image.new("L", size, 0)
    mask.paste(255, (0, 0, size[0] // 2, size[1]))
    mask.save(path)
    return path


def test_mask_and_guidance_window_give_the_python_api_picture(tiny_sd1_dir, adapter, tmp_path):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    mask = left_half_mask(tmp_path / "left.png", (32, 32))  # any size of the output's shape
    flags = ["--ip-adapter", str(adapter), "--ip-adapter-image", str(image), "--ip-adapter-scale", "1.5"]
    assert run(tiny_sd1_dir, tmp_path / "masked", *EXACT, *flags, "--ip-adapter-mask", str(mask),
               "--ip-adapter-guidance", "0", "0.5") == 0
    assert run(tiny_sd1_dir, tmp_path / "whole", *EXACT, *flags, "--ip-adapter-guidance", "0", "0.5") == 0
    expected = python_api_image(tiny_sd1_dir, ip_adapter=str(adapter), ip_adapter_image=Image.open(image),
                                ip_adapter_scale=1.5, ip_adapter_mask=[Image.open(mask)],
                                ip_adapter_guidance=(0.0, 0.5))
    assert np.array_equal(saved(tmp_path / "masked"), expected)
    assert not np.array_equal(saved(tmp_path / "whole"), expected)  # the mask was not ignored
    infotext = Image.open(next((tmp_path / "masked").glob("*.png"))).text["parameters"]
    assert 'IP-Adapter: "ip-adapter_tiny: 1.5", IP-Adapter Guidance: 0-0.5' in infotext


def test_hires_fix_gives_the_python_api_hires_picture(tiny_sd1_dir, adapter, tmp_path):
    """--hr-scale with --ip-adapter: the adapter guides both passes, as `HiresFix` with IPAdapterHiresParams does."""
    from pipelines.hires import HiresFix
    from pipelines.ip_adapter import IPAdapterTextToImage
    from pipelines.ip_adapter_hires import IPAdapterHiresParams

    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    hires = ["--hr-scale", "2", "--hr-upscaler", "Latent", "--denoising-strength", "0.6"]
    assert run(tiny_sd1_dir, tmp_path / "hires", *EXACT, *hires, "--ip-adapter", str(adapter),
               "--ip-adapter-image", str(image), "--ip-adapter-scale", "0.8") == 0
    pipe = IPAdapterTextToImage.from_pretrained(str(tiny_sd1_dir))
    params = IPAdapterHiresParams(prompt="a cat", width=64, height=64, steps=3, seed=21, sampler="Euler", cfg_scale=7.0,
                                  hr_scale=2.0, hr_upscaler="Latent", denoising_strength=0.6, ip_adapter=str(adapter),
                                  ip_adapter_image=Image.open(image), ip_adapter_scale=0.8)
    expected = np.asarray(HiresFix(pipe)(params).images[0].convert("RGB"))
    assert saved(tmp_path / "hires").shape == (128, 128, 3)
    assert np.array_equal(saved(tmp_path / "hires"), expected)
    infotext = Image.open(next((tmp_path / "hires").glob("*.png"))).text["parameters"]
    assert "Hires upscale: 2" in infotext and 'IP-Adapter: "ip-adapter_tiny: 0.8"' in infotext


def test_one_mask_per_image_of_one_adapter_in_order(tiny_sd1_dir, adapter, tmp_path):
    first = write_noise_picture(tmp_path / "a.png", 0, 40, 40)
    second = write_noise_picture(tmp_path / "b.png", 1, 40, 40)
    left = left_half_mask(tmp_path / "left.png")
    right = tmp_path / "right.png"
    Image.eval(Image.open(left), lambda v: 255 - v).save(right)
    assert run(tiny_sd1_dir, tmp_path / "out", *EXACT, "--ip-adapter", str(adapter), "--ip-adapter-image", str(first),
               "--ip-adapter-image", str(second), "--ip-adapter-mask", str(left), "--ip-adapter-mask",
               str(right)) == 0
    expected = python_api_image(tiny_sd1_dir, ip_adapter=str(adapter),
                                ip_adapter_image=[Image.open(first), Image.open(second)],
                                ip_adapter_mask=[[Image.open(left), Image.open(right)]])
    assert np.array_equal(saved(tmp_path / "out"), expected)


def test_infotext_restores_the_guidance_windows(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    flags = ["--ip-adapter", str(adapter), "--ip-adapter-image", str(image)]
    assert run(tiny_sd1_dir, tmp_path / "first", *flags, "--ip-adapter-scale", "1.5",
               "--ip-adapter-guidance", "0.4", "1") == 0
    first = next((tmp_path / "first").iterdir())
    assert 'IP-Adapter Guidance: 0.4-1' in Image.open(first).text["parameters"]
    capsys.readouterr()
    assert main(["generate", "--infotext", str(first), "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "again"),
                 *flags]) == 0
    assert "IP-Adapter" not in capsys.readouterr().err  # both keys taken, neither warned about
    again = next((tmp_path / "again").iterdir())
    assert Image.open(again).tobytes() == Image.open(first).tobytes()
    assert 'IP-Adapter Guidance: 0.4-1' in Image.open(again).text["parameters"]
    # the window matters: without it (every step) the picture differs
    assert run(tiny_sd1_dir, tmp_path / "full", *flags, "--ip-adapter-scale", "1.5") == 0
    assert Image.open(next((tmp_path / "full").iterdir())).tobytes() != Image.open(first).tobytes()


def test_guidance_flag_wins_over_the_infotext_which_is_then_reported(tiny_sd1_dir, adapter, tmp_path, capsys):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    flags = ["--ip-adapter", str(adapter), "--ip-adapter-image", str(image)]
    assert run(tiny_sd1_dir, tmp_path / "first", *flags, "--ip-adapter-guidance", "0.4", "1") == 0
    first = next((tmp_path / "first").iterdir())
    capsys.readouterr()
    assert main(["generate", "--infotext", str(first), "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "again"),
                 *flags, "--ip-adapter-guidance", "0", "1"]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "not honoured" in line]
    assert warning and 'IP-Adapter Guidance: 0.4-1' in warning[0]
    assert "IP-Adapter Guidance" not in Image.open(next((tmp_path / "again").iterdir())).text["parameters"]


@pytest.mark.parametrize("extra, message", [
    (["--ip-adapter-mask", "{left}"], "--ip-adapter-mask given without --ip-adapter"),
    (["--ip-adapter-guidance", "0", "1"], "--ip-adapter-guidance given without --ip-adapter"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-mask", "{left}",
      "--ip-adapter-mask", "{left}"], "--ip-adapter-mask was given 2 times for 1 --ip-adapter-image"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-mask", "{missing}"],
     "does not exist"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-mask", "{image}"],
     "is a colour image; give a grayscale mask"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-mask", "{wide}"],
     "--ip-adapter-mask is 64x32, whose aspect ratio is not the output's 64x64"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-guidance", "0.8", "0.2"],
     "--ip-adapter-guidance window"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-guidance", "0", "1",
      "--ip-adapter-guidance", "0", "1"], "--ip-adapter-guidance was given 2 times for 1 --ip-adapter"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-embeds", "{image}"],
     "--ip-adapter-image and --ip-adapter-embeds were both given"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-embeds", "{image}"], "is not a readable safetensors file"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-embeds", "{missing}"], "--ip-adapter-embeds"),
])
def test_bad_mask_guidance_and_embeds_flags_fail_before_the_load(tiny_sd1_dir, adapter, tmp_path, capsys, extra,
                                                                 message):
    image = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    names = {"adapter": str(adapter), "image": str(image), "missing": str(tmp_path / "nope.png"),
             "left": str(left_half_mask(tmp_path / "left.png")),
             "wide": str(left_half_mask(tmp_path / "wide.png", (64, 32)))}
    out = tmp_path / "out"
    code = run(tiny_sd1_dir, out, *(value.format(**names) for value in extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)  # refused before the model loaded
    assert not out.exists() or not any(out.glob("*.png"))


def test_mask_files_are_read_as_grayscale_weights(tmp_path):
    from webui.cli.ip_adapter_flags import read_grayscale_mask

    deep = np.array([[0, 257, 65535, 32896]], dtype=np.uint16)  # 16-bit PNG values
    Image.fromarray(deep).save(tmp_path / "deep.png")
    assert np.asarray(read_grayscale_mask(str(tmp_path / "deep.png"))).tolist() == [[0, 1, 255, 128]]
    Image.new("RGB", (4, 4), (200, 200, 200)).save(tmp_path / "grey.png")  # black-and-white saved as RGB
    assert np.asarray(read_grayscale_mask(str(tmp_path / "grey.png"))).tolist() == [[200] * 4] * 4
    Image.new("RGBA", (4, 4), (255, 255, 255, 0)).save(tmp_path / "clear.png")
    with pytest.raises(ValueError, match="has transparent pixels"):
        read_grayscale_mask(str(tmp_path / "clear.png"))
