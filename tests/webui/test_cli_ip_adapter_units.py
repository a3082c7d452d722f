"""IP-Adapter units on the command line (`--controlnet-json` units, or `--controlnet` ones, with an IP-Adapter
module): the same adapter, scale and window as the `--ip-adapter` flags give the same image; img2img's unit without a
picture takes the init image; bad units fail before the model loads, exit code 2, nothing written."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21"]


@pytest.fixture(scope="module")
def folder(tiny_sd1_dir, tmp_path_factory):
    """--controlnet-dir as the extension's users fill it: a ControlNet, an IP-Adapter and its image encoder, plus
    the pictures and JSON files the tests write."""
    from diffusers import UNet2DConditionModel

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    root = tmp_path_factory.mktemp("cli-ip-units")
    build_tiny_controlnet(root / "ControlNet" / "tiny_canny", seed=1)
    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    save_tiny_ip_adapter(root / "ControlNet", unet)
    write_noise_picture(root / "ref.png", 0, 40, 40)
    write_noise_picture(root / "other.png", 3, 40, 40)
    return root


def unit(**fields) -> dict:
    return {"module": "ip-adapter_clip_sd15", "model": "ip-adapter_tiny [1a2b3c4d]", "weight": 0.6, "image": "ref.png",
            **fields}


def units_file(folder, name: str, units: list) -> str:
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"alwayson_scripts": {"controlnet": {"args": units}}}))
    return str(path)


def run(command: str, tiny_sd1_dir, folder, out, *extra) -> int:
    first = [command, str(folder / "init.png"), "a cat"] if command == "img2img" else [command, "a cat"]
    return main([*first, "--model", str(tiny_sd1_dir), "-o", str(out), "--controlnet-dir", str(folder / "ControlNet"),
                 *ARGS, *extra])


def output(out) -> Image.Image:
    return Image.open(next(out.iterdir()))


def test_a_json_unit_gives_the_image_of_the_same_ip_adapter_flags(tiny_sd1_dir, folder, tmp_path):
    flags = ["--ip-adapter", str(folder / "ControlNet" / "ip-adapter_tiny.safetensors"),
             "--ip-adapter-image", str(folder / "ref.png"), "--ip-adapter-scale", "0.6"]
    assert run("generate", tiny_sd1_dir, folder, tmp_path / "flags", *flags) == 0
    assert run("generate", tiny_sd1_dir, folder, tmp_path / "json", "--controlnet-json",
               units_file(folder, "one", [{"enabled": False, "model": "tiny_canny"}, unit()])) == 0
    assert run("generate", tiny_sd1_dir, folder, tmp_path / "cn", "--controlnet",
               f"ip-adapter_tiny:{folder / 'ref.png'}", "--cn-module", "ip-adapter-auto", "--cn-weight", "0.6") == 0
    from_flags, from_json, from_cn = (output(tmp_path / name) for name in ("flags", "json", "cn"))
    assert from_json.tobytes() == from_flags.tobytes() == from_cn.tobytes()
    assert 'IP-Adapter: "ip-adapter_tiny: 0.6"' in from_json.text["parameters"]
    assert "ControlNet 0" not in from_json.text["parameters"]  # an image prompt, not a ControlNet unit
    assert run("generate", tiny_sd1_dir, folder, tmp_path / "plain") == 0
    assert np.abs(np.asarray(from_json).astype(int) - np.asarray(output(tmp_path / "plain")).astype(int)).mean() > 1


def test_the_guidance_window_and_a_picture_list_reach_the_adapter(tiny_sd1_dir, folder, tmp_path):
    """3 steps: fractions 0, 1/3, 2/3 of the steps; a window (0.9, 1) holds none of them: the adapter at scale 0."""
    for name, units in (("off", [unit(weight=0.0)]), ("late", [unit(guidance_start=0.9)]),
                        ("one", [unit()]), ("two", [unit(image=[{"image": "ref.png"}, {"image": "other.png"}])])):
        assert run("generate", tiny_sd1_dir, folder, tmp_path / name, "--controlnet-json",
                   units_file(folder, name, units)) == 0
    off, late, one, two = (np.asarray(output(tmp_path / name)).astype(int) for name in ("off", "late", "one", "two"))
    assert np.array_equal(late, off)
    assert np.abs(two - one).mean() > 1


def test_img2img_unit_without_picture_takes_the_init_image_and_runs_with_a_controlnet(tiny_sd1_dir, folder, tmp_path):
    write_noise_picture(folder / "init.png", 1, 64, 64)
    canny = {"module": "canny", "model": "tiny_canny", "weight": 0.8}
    assert run("img2img", tiny_sd1_dir, folder, tmp_path / "none", "--controlnet-json",
               units_file(folder, "none", [canny, unit(image=None)])) == 0
    assert run("img2img", tiny_sd1_dir, folder, tmp_path / "init", "--controlnet-json",
               units_file(folder, "init", [canny, unit(image="init.png")])) == 0
    without, given = output(tmp_path / "none"), output(tmp_path / "init")
    assert without.tobytes() == given.tobytes()
    assert "ControlNet 0: " in given.text["parameters"] and "tiny_canny" in given.text["parameters"]
    assert 'IP-Adapter: "ip-adapter_tiny: 0.6"' in given.text["parameters"]


class Payload:  # a pickled global torch's weights-only loader refuses
    pass


@pytest.mark.parametrize("units, extra, message", [
    ([unit(image=None)], [], "--controlnet-json unit 0: an IP-Adapter unit needs 'image'"),
    ([unit(weight=2.5)], [], "--controlnet-json unit 0 weight (the IP-Adapter's scale) must be a number in [0.0, 2.0]"),
    ([unit(guidance_start=0.8, guidance_end=0.2)], [], "--controlnet-json unit 0: --cn-start 0.8 is after --cn-end"),
    ([unit(model="ip-adapter_nope")], [], "Unknown ControlNet model 'ip-adapter_nope'"),
    ([unit(model="ip-adapter_evil")], [], "--controlnet-json unit 0: IP-Adapter file 'ip-adapter_evil.bin' cannot "
                                          "be used"),
    ([unit(module="ip-adapter_face_id")], [], "FaceID / PuLID adapters need insightface"),
    ([unit(image="missing.png")], [], "missing.png"),
    ([unit()] * 5, [], "the IP-Adapter units: 5 IP-Adapters were given; at most 4"),
    ([unit()], ["--refiner", "missing"], "an IP-Adapter unit (a unit with an ip-adapter module) cannot be combined "
                                         "with --refiner"),
])
def test_bad_units_fail_before_the_model_loads(tiny_sd1_dir, folder, tmp_path, capsys, units, extra, message):
    torch.save({"image_proj": {"x": Payload()}, "ip_adapter": {}}, folder / "ControlNet" / "ip-adapter_evil.bin")
    out = tmp_path / "out"
    try:
        code = run("generate", tiny_sd1_dir, folder, out, "--controlnet-json", units_file(folder, "bad", units), *extra)
    finally:
        (folder / "ControlNet" / "ip-adapter_evil.bin").unlink()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith("mixkit: error:") and message in err[-1], err[-1]
    assert not any(line.startswith("Loaded ") for line in err)  # refused before the model loaded
    assert not out.exists() or not any(out.glob("*.png"))


def test_flag_masks_and_windows_join_a_masked_unit_as_one_call(tiny_sd1_dir, folder, tmp_path):
    """--ip-adapter with --ip-adapter-mask / --ip-adapter-guidance, then a unit with effective_region_mask: the
    Python API's picture for the two adapters with their masks and windows."""
    from pipelines.ip_adapter import IPAdapterTextToImage, IPAdapterTxt2ImgParams
    from pipelines.ip_adapter_files import IPAdapterSource

    left = Image.new("L", (64, 64), 0)
    left.paste(255, (0, 0, 32, 64))
    left.save(tmp_path / "left.png")
    right = Image.eval(left, lambda v: 255 - v)
    right.save(tmp_path / "right.png")
    weights = folder / "ControlNet" / "ip-adapter_tiny.safetensors"
    flags = ["--ip-adapter", str(weights), "--ip-adapter-image", str(folder / "ref.png"), "--ip-adapter-scale", "1.2",
             "--ip-adapter-mask", str(tmp_path / "left.png"), "--ip-adapter-guidance", "0", "0.5",
             "--sampler", "Euler", "--cfg", "7"]
    masked_unit = unit(image=str(folder / "other.png"), weight=0.8, guidance_start=0.3,
                       effective_region_mask="right.png")  # relative to the JSON file, as the unit's other files
    assert run("generate", tiny_sd1_dir, folder, tmp_path / "out", *flags, "--controlnet-json",
               units_file(tmp_path, "masked", [masked_unit])) == 0
    source = IPAdapterSource(str(weights), image_encoder_folder=str((folder / "ControlNet" / "image_encoder")))
    params = IPAdapterTxt2ImgParams(
        prompt="a cat", width=64, height=64, steps=3, seed=21, sampler="Euler", cfg_scale=7.0,
        ip_adapter=[source, source], ip_adapter_scale=[1.2, 0.8], ip_adapter_guidance=[(0.0, 0.5), (0.3, 1.0)],
        ip_adapter_image=[[Image.open(folder / "ref.png")], [Image.open(folder / "other.png")]],
        ip_adapter_mask=[[left], [right]])
    expected = np.asarray(IPAdapterTextToImage.from_pretrained(str(tiny_sd1_dir))(params).images[0].convert("RGB"))
    got = output(tmp_path / "out")
    assert np.array_equal(np.asarray(got.convert("RGB")), expected)
    assert 'IP-Adapter Guidance: "0-0.5, 0.3-1"' in got.text["parameters"]


def test_a_unit_mask_of_another_shape_fails_before_the_load(tiny_sd1_dir, folder, tmp_path, capsys):
    Image.new("L", (64, 32), 255).save(tmp_path / "wide.png")
    code = run("generate", tiny_sd1_dir, folder, tmp_path / "out", "--controlnet-json",
               units_file(tmp_path, "wide", [unit(image=str(folder / "ref.png"), effective_region_mask="wide.png")]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "--controlnet-json unit 0 effective_region_mask is 64x32, whose aspect ratio is not the output's" in err[-1]
    assert not any(line.startswith("Loaded ") for line in err) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["generate", "img2img"])
def test_a_bin_unit_is_read_once_by_its_check_and_its_generation(tiny_sd1_dir, folder, tmp_path, monkeypatch,
                                                                  command):
    """A pickled `.bin` has no header: the unit check reads it whole; the generation takes what it read."""
    from diffusers import UNet2DConditionModel

    from pipelines import ip_adapter_files

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    save_tiny_ip_adapter(folder / "ControlNet", unet, name="ip-adapter_pickled", suffix=".bin", encoder=False)
    write_noise_picture(folder / "init.png", 1, 64, 64)
    reads, read = [], ip_adapter_files.read_ip_adapter_weights

    def counted(file):
        reads.append(file.name)
        return read(file)

    monkeypatch.setattr(ip_adapter_files, "read_ip_adapter_weights", counted)
    pickled = units_file(folder, f"pickled-{command}", [unit(model="ip-adapter_pickled")])
    assert run(command, tiny_sd1_dir, folder, tmp_path / "bin", "--controlnet-json", pickled) == 0
    assert reads == ["ip-adapter_pickled.bin"]
    same = units_file(folder, f"same-{command}", [unit()])  # the same weights (seed 0) as safetensors
    assert run(command, tiny_sd1_dir, folder, tmp_path / "safetensors", "--controlnet-json", same) == 0
    assert output(tmp_path / "bin").tobytes() == output(tmp_path / "safetensors").tobytes()


def test_a_bin_unit_is_read_once_in_an_img2img_batch(tiny_sd1_dir, folder, tmp_path, monkeypatch):
    """`--input-dir` goes through its own run: the store the unit check filled reaches its pipeline too."""
    from diffusers import UNet2DConditionModel

    from pipelines import ip_adapter_files

    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    save_tiny_ip_adapter(folder / "ControlNet", unet, name="ip-adapter_pickled", suffix=".bin", encoder=False)
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_noise_picture(inputs / "a.png", 1, 64, 64)
    write_noise_picture(inputs / "b.png", 2, 64, 64)
    reads, read = [], ip_adapter_files.read_ip_adapter_weights

    def counted(file):
        reads.append(file.name)
        return read(file)

    monkeypatch.setattr(ip_adapter_files, "read_ip_adapter_weights", counted)
    pickled = units_file(folder, "pickled-batch", [unit(model="ip-adapter_pickled", image=str(folder / "ref.png"))])
    assert main(["img2img", "--input-dir", str(inputs), "a cat", "--model", str(tiny_sd1_dir), "-o",
                 str(tmp_path / "out"), "--controlnet-dir", str(folder / "ControlNet"), *ARGS,
                 "--controlnet-json", pickled]) == 0
    assert reads == ["ip-adapter_pickled.bin"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.png", "b.png"]
