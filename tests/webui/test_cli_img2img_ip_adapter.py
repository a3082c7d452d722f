"""`mixkit img2img --ip-adapter ...` (the flags of `mixkit generate`), and --ip-adapter with --controlnet units in
both commands: the image prompt reaches the pipeline and the infotext; what cannot run together fails before the
model loads, with exit code 2 and nothing written."""

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21"]


@pytest.fixture(scope="module")
def adapter(tiny_sd1_dir, tmp_path_factory):
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    return save_tiny_ip_adapter(tmp_path_factory.mktemp("ip") / "models", unet)


@pytest.fixture(scope="module")
def controlnet_dir(tmp_path_factory):
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    folder = tmp_path_factory.mktemp("cn")
    build_tiny_controlnet(folder / "tiny_canny", seed=1)
    return folder


def img2img(tiny_sd1_dir, init, out, *extra) -> int:
    return main(["img2img", str(init), "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])


def pixels(folder) -> np.ndarray:
    return np.asarray(Image.open(next(folder.iterdir()))).astype(int)


def test_img2img_image_prompt_changes_the_image_and_is_recorded(tiny_sd1_dir, adapter, tmp_path):
    init = write_noise_picture(tmp_path / "init.png", 1, 64, 64)
    reference = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    flags = ["--ip-adapter", str(adapter), "--ip-adapter-image", str(reference)]
    assert img2img(tiny_sd1_dir, init, tmp_path / "plain") == 0
    assert img2img(tiny_sd1_dir, init, tmp_path / "zero", *flags, "--ip-adapter-scale", "0") == 0
    assert img2img(tiny_sd1_dir, init, tmp_path / "ip", *flags, "--ip-adapter-scale", "0.7") == 0
    plain, zero, guided = (pixels(tmp_path / name) for name in ("plain", "zero", "ip"))
    assert np.abs(zero - plain).max() <= 1  # scale 0: diffusers skips the adapter (another attention kernel: +-1)
    assert np.abs(guided - plain).mean() > 1
    infotext = Image.open(next((tmp_path / "ip").iterdir())).text["parameters"]
    assert 'IP-Adapter: "ip-adapter_tiny: 0.7"' in infotext and "Denoising strength" in infotext


@pytest.mark.parametrize("command", ["generate", "img2img"])
def test_ip_adapter_with_a_controlnet_unit(tiny_sd1_dir, adapter, controlnet_dir, tmp_path, command):
    init = write_noise_picture(tmp_path / "init.png", 1, 64, 64)
    reference = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    unit = ["--controlnet-dir", str(controlnet_dir), "--controlnet", f"tiny_canny:{init}", "--cn-module", "none"]
    head = ["generate", "a cat"] if command == "generate" else ["img2img", str(init), "a cat"]

    def run(out, *extra):
        return main([*head, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / out), *ARGS, *unit, *extra])

    assert run("unit") == 0
    assert run("both", "--ip-adapter", str(adapter), "--ip-adapter-image", str(reference)) == 0
    infotext = Image.open(next((tmp_path / "both").iterdir())).text["parameters"]
    assert "ControlNet 0:" in infotext and 'IP-Adapter: "ip-adapter_tiny: 1"' in infotext
    assert np.abs(pixels(tmp_path / "both") - pixels(tmp_path / "unit")).mean() > 1


@pytest.mark.parametrize("extra, message", [
    (["--ip-adapter", "{adapter}"], "needs --ip-adapter-image"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-scale", "3"],
     "--ip-adapter-scale must be a number in [0, 2]"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--loopback", "2"],
     "--ip-adapter cannot be combined with --loopback (Loopback: its init image changes at every generation"),
    (["--ip-adapter", "{missing}", "--ip-adapter-image", "{image}"], "does not exist"),
])
def test_bad_img2img_flags_are_one_line_errors(tiny_sd1_dir, adapter, tmp_path, capsys, extra, message):
    init = write_noise_picture(tmp_path / "init.png", 1, 64, 64)
    reference = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    names = {"adapter": str(adapter), "image": str(reference), "missing": str(tmp_path / "nope")}
    out = tmp_path / "out"
    code = img2img(tiny_sd1_dir, init, out, *(value.format(**names) for value in extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert not any(line.startswith("Loaded ") for line in err)
    assert not out.exists() or not any(out.glob("*.png"))


def test_img2img_mask_against_the_init_images_size(tiny_sd1_dir, adapter, tmp_path, capsys):
    """Without --width/--height the output takes the init image's size: a mask of its shape runs (the Python API's
    picture), one of another shape fails before the model loads."""
    from pipelines.ip_adapter import IPAdapterImageToImage, IPAdapterImg2ImgParams

    init = write_noise_picture(tmp_path / "init.png", 1, 64, 32)
    reference = write_noise_picture(tmp_path / "ref.png", 0, 40, 40)
    left = Image.new("L", (64, 32), 0)
    left.paste(255, (0, 0, 32, 32))
    left.save(tmp_path / "left.png")
    Image.new("L", (64, 64), 255).save(tmp_path / "square.png")
    flags = ["--model", str(tiny_sd1_dir), "--steps", "3", "--seed", "21", "--sampler", "Euler", "--cfg", "7",
             "--ip-adapter", str(adapter), "--ip-adapter-image", str(reference)]
    assert main(["img2img", str(init), "a cat", "-o", str(tmp_path / "out"), *flags,
                 "--ip-adapter-mask", str(tmp_path / "left.png")]) == 0
    params = IPAdapterImg2ImgParams(prompt="a cat", width=64, height=32, steps=3, seed=21, sampler="Euler",
                                    cfg_scale=7.0, init_images=[Image.open(init).convert("RGB")],
                                    ip_adapter=str(adapter), ip_adapter_image=Image.open(reference),
                                    ip_adapter_mask=[left])
    expected = np.asarray(IPAdapterImageToImage.from_pretrained(str(tiny_sd1_dir))(params).images[0].convert("RGB"))
    assert np.array_equal(pixels(tmp_path / "out")[..., :3], expected.astype(int))
    capsys.readouterr()
    assert main(["img2img", str(init), "a cat", "-o", str(tmp_path / "bad"), *flags,
                 "--ip-adapter-mask", str(tmp_path / "square.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--ip-adapter-mask is 64x64, whose aspect ratio is not the output's 64x32" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err) and not (tmp_path / "bad").exists()
