"""`mixkit img2img --input-dir` and the X/Y/Z plot / prompt scripts with image prompts (--ip-adapter and IP-Adapter
units): every input / cell is the picture a single run gives, and each reference picture goes through its image
encoder once for the whole run (`pipelines.ip_adapter_reuse`). Loopback and SD upscale stay refused, by name."""

import json

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "2", "--seed", "21", "--sampler", "Euler"]


@pytest.fixture(scope="module")
def folder(tiny_sd1_dir, tmp_path_factory):
    """A --controlnet-dir with the tiny IP-Adapter, its encoder and a tiny ControlNet, a reference picture and two
    batch inputs."""
    from diffusers import UNet2DConditionModel

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    root = tmp_path_factory.mktemp("cli-ip-batch")
    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    save_tiny_ip_adapter(root / "ControlNet", unet)
    build_tiny_controlnet(root / "ControlNet" / "tiny_canny", seed=1)
    write_noise_picture(root / "ref.png", 0, 40, 40)
    (root / "in").mkdir()
    write_noise_picture(root / "in" / "a.png", 1, 64, 64)
    write_noise_picture(root / "in" / "b.png", 2, 64, 64)
    return root


@pytest.fixture
def encoder_calls(monkeypatch):
    """How many pictures each run of an image encoder read, in order."""
    import pipelines.ip_adapter_embeds as embeds

    calls, real = [], embeds.encode_ip_images

    def counted(adapter, images):
        calls.append(len(images))
        return real(adapter, images)

    monkeypatch.setattr(embeds, "encode_ip_images", counted)
    return calls


def flags(folder) -> list[str]:
    return ["--ip-adapter", str(folder / "ControlNet" / "ip-adapter_tiny.safetensors"), "--ip-adapter-image",
            str(folder / "ref.png"), "--ip-adapter-scale", "0.8"]


def img2img(tiny_sd1_dir, image: str | None, out, *extra) -> int:
    head = ["img2img", image, "a cat"] if image is not None else ["img2img", "a cat"]
    return main([*head, "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])


def pixels(path) -> np.ndarray:
    return np.asarray(Image.open(path)).astype(int)


def test_a_batch_encodes_the_reference_once_and_gives_each_inputs_single_run(tiny_sd1_dir, folder, tmp_path,
                                                                              encoder_calls):
    assert img2img(tiny_sd1_dir, None, tmp_path / "batch", "--input-dir", str(folder / "in"), *flags(folder)) == 0
    assert encoder_calls == [1]  # one reference picture, two inputs
    for name in ("a", "b"):
        assert img2img(tiny_sd1_dir, str(folder / "in" / f"{name}.png"), tmp_path / name, *flags(folder)) == 0
        single = next((tmp_path / name).iterdir())
        assert np.array_equal(pixels(tmp_path / "batch" / f"{name}.png"), pixels(single))
        infotext = Image.open(tmp_path / "batch" / f"{name}.png").text["parameters"]
        assert 'IP-Adapter: "ip-adapter_tiny: 0.8"' in infotext
    assert encoder_calls == [1, 1, 1]  # each single run encodes for itself


def test_a_unit_without_picture_takes_each_inputs_picture(tiny_sd1_dir, folder, tmp_path, encoder_calls):
    """As the extension's batch: an img2img unit with no image of its own is guided by the input being redrawn."""
    units = folder / "units.json"
    units.write_text(json.dumps([{"module": "ip-adapter_clip_sd15", "model": "ip-adapter_tiny", "weight": 0.7}]))
    unit_flags = ["--controlnet-dir", str(folder / "ControlNet"), "--controlnet-json", str(units)]
    assert img2img(tiny_sd1_dir, None, tmp_path / "batch", "--input-dir", str(folder / "in"), *unit_flags) == 0
    assert encoder_calls == [1, 1]  # one encoding per input: each is its own reference
    a, b = (pixels(tmp_path / "batch" / f"{name}.png") for name in ("a", "b"))
    assert img2img(tiny_sd1_dir, str(folder / "in" / "b.png"), tmp_path / "b", *unit_flags) == 0
    assert np.array_equal(b, pixels(next((tmp_path / "b").iterdir())))
    assert not np.array_equal(a, b)


def test_a_batch_with_a_controlnet_unit_too(tiny_sd1_dir, folder, tmp_path, encoder_calls):
    canny = ["--controlnet-dir", str(folder / "ControlNet"), "--controlnet", f"tiny_canny:{folder / 'ref.png'}",
             "--cn-module", "none", "--cn-weight", "0.8"]
    assert img2img(tiny_sd1_dir, None, tmp_path / "batch", "--input-dir", str(folder / "in"), *flags(folder),
                   *canny) == 0
    assert encoder_calls == [1]
    assert img2img(tiny_sd1_dir, str(folder / "in" / "a.png"), tmp_path / "a", *flags(folder), *canny) == 0
    single = next((tmp_path / "a").iterdir())
    assert np.array_equal(pixels(tmp_path / "batch" / "a.png"), pixels(single))
    infotext = Image.open(single).text["parameters"]
    assert "ControlNet 0: " in infotext and 'IP-Adapter: "ip-adapter_tiny: 0.8"' in infotext


def test_an_xyz_plot_encodes_once_and_each_cell_is_its_single_run(tiny_sd1_dir, folder, tmp_path, encoder_calls,
                                                                   capsys):
    out = tmp_path / "plot"
    code = main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *flags(folder),
                 "--xyz-x", "Seed:21,22"])
    assert code == 0 and encoder_calls == [1]
    grid, *cells = capsys.readouterr().out.split()
    assert len(cells) == 2
    for seed, cell in zip((21, 22), cells):
        assert 'IP-Adapter: "ip-adapter_tiny: 0.8"' in Image.open(cell).text["parameters"]
        single = tmp_path / f"single-{seed}"
        assert main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(single),
                     *[value if value != "21" else str(seed) for value in ARGS], *flags(folder)]) == 0
        assert np.array_equal(pixels(cell), pixels(next(single.iterdir())))


def test_an_img2img_batch_with_an_xyz_plot_encodes_once(tiny_sd1_dir, folder, tmp_path, encoder_calls, capsys):
    assert img2img(tiny_sd1_dir, None, tmp_path / "batch", "--input-dir", str(folder / "in"), *flags(folder),
                   "--xyz-x", "Steps:1,2") == 0
    assert encoder_calls == [1]
    written = sorted(path.name for path in (tmp_path / "batch").iterdir())
    assert written == ["a-1.png", "a-2.png", "a-xyz_grid.png", "b-1.png", "b-2.png", "b-xyz_grid.png"]


@pytest.mark.parametrize("script, name", [(["--loopback", "2"], "--loopback (Loopback"),
                                          (["--sd-upscale", "2"], "--sd-upscale (SD upscale")])
def test_scripts_that_change_the_init_image_are_refused_before_the_load(tiny_sd1_dir, folder, tmp_path, capsys,
                                                                         script, name):
    code = img2img(tiny_sd1_dir, str(folder / "in" / "a.png"), tmp_path / "out", *flags(folder), *script)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and f"--ip-adapter cannot be combined with {name}" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err) and not (tmp_path / "out").exists()
