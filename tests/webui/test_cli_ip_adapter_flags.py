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
    (["--ip-adapter-image", "{image}"], "without --ip-adapter"),
    (["--ip-adapter", "{adapter}"], "needs --ip-adapter-image"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-scale", "3"],
     "--ip-adapter-scale must be a number in [0, 2]"),
    (["--ip-adapter", "{adapter}", "--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}"],
     "one image per adapter"),
    (["--ip-adapter", "{missing}", "--ip-adapter-image", "{image}"], "does not exist"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--ip-adapter-image-encoder", "{missing}"],
     "image encoder"),
    (["--ip-adapter", "{adapter}", "--ip-adapter-image", "{image}", "--hr-scale", "2"], "hires fix"),
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
