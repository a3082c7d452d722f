"""ControlNet units on `mixkit generate` / `mixkit img2img`: the Python API's image and infotext, units recreated from
an infotext, and every unit checked (the API's checks, in flag terms) before the model loads."""

import pytest
from PIL import Image, ImageDraw

from pipelines.img2img import ImageToImage
from pipelines.txt2img import TextToImage
from webui.cli import main

RUN = ["--steps", "2", "--seed", "5", "--sampler", "Euler", "--cfg", "5", "--width", "64", "--height", "64"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A ControlNet folder with an SD 1.x ControlNet (and SDXL ones: a diffusers folder, a zip and a legacy .ckpt),
    and a control picture."""
    import torch

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet, tiny_controlnet

    root = tmp_path_factory.mktemp("cli-controlnet")
    build_tiny_controlnet(root / "controlnets" / "tiny_canny", seed=1)
    build_tiny_controlnet(root / "xl" / "xl_canny", seed=1, sdxl=True)
    torch.save(tiny_controlnet(seed=1, sdxl=True).state_dict(), root / "xl" / "xl_pickle.ckpt")  # a zip pickle
    torch.save(tiny_controlnet(seed=1, sdxl=True).state_dict(), root / "xl" / "xl_legacy.ckpt",
               _use_new_zipfile_serialization=False)  # a pre-zip pickle, as old ControlNet releases are
    edges = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(edges).rectangle((16, 16, 48, 48), outline="white", width=3)
    edges.save(root / "edges.png")
    return root


def _run(capsys, *argv) -> tuple[str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()[0], captured.err


def test_generate_with_a_unit_writes_the_python_apis_image_and_infotext(tiny_sd1_dir, files, tmp_path, capsys):
    from pipelines.controlnet import ControlNetTextToImage, ControlNetUnit, load_controlnet

    path, _ = _run(capsys, "generate", "a box", "--model", str(tiny_sd1_dir), *RUN, "--controlnet-dir",
                   str(files / "controlnets"), "--controlnet", f"tiny_canny [0123abcd]:{files / 'edges.png'}",
                   "--cn-module", "canny", "--cn-weight", "1.5", "--cn-end", "0.5", "--cn-threshold-a", "50",
                   "--cn-control-mode", "My prompt is more important", "-o", str(tmp_path / "cn.png"))
    unit = ControlNetUnit(load_controlnet(files / "controlnets" / "tiny_canny"), Image.open(files / "edges.png"),
                          weight=1.5, guidance_end=0.5, preprocessor="canny", threshold_a=50, soft_injection=True,
                          processor_res=512)
    expected = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)(
        prompt="a box", steps=2, seed=5, sampler="Euler", cfg_scale=5, width=64, height=64, controlnets=[unit])
    saved = Image.open(path)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    assert ('ControlNet 0: "Module: canny, Model: tiny_canny, Weight: 1.5, Resize Mode: Crop and Resize, Processor '
            'Res: 512, Threshold A: 50, Threshold B: 200, Guidance Start: 0, Guidance End: 0.5, Pixel Perfect: False, '
            'Control Mode: My prompt is more important"') in saved.text["parameters"]
    plain = TextToImage.from_pretrained(tiny_sd1_dir)(prompt="a box", steps=2, seed=5, sampler="Euler", cfg_scale=5,
                                                      width=64, height=64)
    assert saved.convert("RGB").tobytes() != plain.images[0].tobytes()  # the unit acted


def test_infotext_recreates_the_units_and_the_image(tiny_sd1_dir, files, tmp_path, capsys):
    """The unit's settings come from the infotext's `ControlNet 0`; the picture, which no infotext holds, from
    MODEL:IMAGE; the model, named there, from --controlnet-dir."""
    first, _ = _run(capsys, "generate", "a box", "--model", str(tiny_sd1_dir), *RUN, "--controlnet-dir",
                    str(files / "controlnets"), "--controlnet", f"tiny_canny:{files / 'edges.png'}", "--cn-module",
                    "canny", "--cn-weight", "0.7", "--cn-pixel-perfect", "--cn-resize-mode", "Just Resize",
                    "-o", str(tmp_path / "first.png"))
    again, err = _run(capsys, "generate", "--infotext", first, "--model", str(tiny_sd1_dir), "--controlnet-dir",
                      str(files / "controlnets"), "--controlnet", f"tiny_canny:{files / 'edges.png'}",
                      "-o", str(tmp_path / "again.png"))
    assert "not honoured" not in err
    assert Image.open(again).tobytes() == Image.open(first).tobytes()
    assert Image.open(again).text["parameters"] == Image.open(first).text["parameters"]
    # a flag given for the unit wins over the infotext's field
    changed, _ = _run(capsys, "generate", "--infotext", first, "--model", str(tiny_sd1_dir), "--controlnet-dir",
                      str(files / "controlnets"), "--controlnet", f"tiny_canny:{files / 'edges.png'}",
                      "--cn-weight", "0.2", "-o", str(tmp_path / "changed.png"))
    text = Image.open(changed).text["parameters"]
    assert "Weight: 0.2, Resize Mode: Just Resize" in text and "Pixel Perfect: True" in text


def test_unit_masks_reach_the_unit(tiny_sd1_dir, files, tmp_path, capsys):
    """--cn-region-mask limits where the unit acts (the extension's effective_region_mask); --cn-mask on an inpaint
    module is the area it fills. Both as the Python API's units take them."""
    from pipelines.controlnet import ControlNetImageToImage, ControlNetUnit, load_controlnet

    region = Image.new("L", (64, 64), 0)
    region.paste(255, (0, 0, 32, 64))
    region.save(tmp_path / "region.png")
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (20, 20, 44, 44))
    mask.save(tmp_path / "mask.png")
    model = files / "controlnets" / "tiny_canny"
    path, _ = _run(capsys, "img2img", str(files / "edges.png"), "a box", "--model", str(tiny_sd1_dir), *RUN,
                   "--controlnet", f"{model}:{files / 'edges.png'}", "--cn-region-mask", str(tmp_path / "region.png"),
                   "--controlnet", f"{model}:{files / 'edges.png'}", "--cn-module", "inpaint_only",
                   "--cn-mask", str(tmp_path / "mask.png"), "-o", str(tmp_path / "masked.png"))
    picture = Image.open(files / "edges.png")
    units = [ControlNetUnit(load_controlnet(model), picture, processor_res=512, effective_region_mask=region),
             ControlNetUnit(load_controlnet(model), picture, processor_res=512, preprocessor="inpaint_only", mask=mask)]
    expected = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)(
        prompt="a box", init_images=[picture], steps=2, seed=5, sampler="Euler", cfg_scale=5, width=64, height=64,
        controlnets=units)
    assert Image.open(path).convert("RGB").tobytes() == expected.images[0].tobytes()
    assert Image.open(path).text["parameters"] == expected.infotexts[0]


def test_hires_fix_with_a_unit_is_the_python_apis_image(tiny_sd1_dir, files, tmp_path, capsys):
    from pipelines.controlnet import ControlNetUnit, load_controlnet
    from pipelines.hires import HiresFix

    path, _ = _run(capsys, "generate", "a box", "--model", str(tiny_sd1_dir), *RUN, "--hr-scale", "1.5",
                   "--hr-steps", "1", "--denoising-strength", "0.6", "--hr-upscaler", "Lanczos",
                   "--controlnet", f"{files / 'controlnets' / 'tiny_canny'}:{files / 'edges.png'}",
                   "-o", str(tmp_path / "hires.png"))
    unit = ControlNetUnit(load_controlnet(files / "controlnets" / "tiny_canny"), Image.open(files / "edges.png"),
                          processor_res=512)
    expected = HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))(
        prompt="a box", steps=2, seed=5, sampler="Euler", cfg_scale=5, width=64, height=64, hr_scale=1.5,
        hr_second_pass_steps=1, denoising_strength=0.6, hr_upscaler="Lanczos", controlnets=[unit])
    saved = Image.open(path)
    assert saved.size == (96, 96)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]


def test_img2img_unit_without_a_picture_uses_the_init_image_and_a_path_names_the_model(tiny_sd1_dir, files,
                                                                                       tmp_path, capsys):
    from pipelines.controlnet import ControlNetImageToImage, ControlNetUnit, load_controlnet

    model = files / "controlnets" / "tiny_canny"
    path, _ = _run(capsys, "img2img", str(files / "edges.png"), "a box", "--model", str(tiny_sd1_dir), *RUN,
                   "--controlnet", str(model), "--cn-module", "invert", "-o", str(tmp_path / "i2i.png"))
    unit = ControlNetUnit(load_controlnet(model), None, preprocessor="invert", processor_res=512)
    expected = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)(
        prompt="a box", init_images=[Image.open(files / "edges.png")], steps=2, seed=5, sampler="Euler", cfg_scale=5,
        width=64, height=64, controlnets=[unit])
    saved = Image.open(path)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    # the img2img infotext recreates the unit, the init image again its picture
    again, _ = _run(capsys, "img2img", str(files / "edges.png"), "--infotext", path, "--model", str(tiny_sd1_dir),
                    "--controlnet-dir", str(files / "controlnets"), "-o", str(tmp_path / "again.png"))
    assert Image.open(again).tobytes() == saved.tobytes()


@pytest.mark.parametrize("argv, fragment", [
    (["--controlnet", "tiny_canny"], "ControlNet 0 (--controlnet tiny_canny): it has no control picture; write "
                                     "--controlnet MODEL:IMAGE or add --cn-image IMAGE"),
    (["--infotext", "x\nSteps: 2, Seed: 1, ControlNet 0: \"Module: canny, Model: tiny_canny [0123abcd]\""],
     "--infotext's ControlNet 0: it has no control picture (an infotext holds none); write --controlnet MODEL:IMAGE"),
    (["--controlnet", "nope:EDGES"], "Unknown ControlNet model 'nope'; available: tiny_canny. (models in "
                                     "--controlnet-dir"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-start", "0.9", "--cn-end", "0.1"],
     "--cn-start 0.9 is after --cn-end 0.1; the unit would never act"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-weight", "-1"], "edges.png) --cn-weight must be a finite number >= 0"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-module", "openpose"], "unknown module 'openpose'"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-control-mode", "strict"], "--cn-control-mode 'strict' is not one of 'Balanced'"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-processor-res", "9"], "--cn-processor-res must be an integer"),
    (["--controlnet", "tiny_canny:missing.png"], "IMAGE 'missing.png' does not exist"),
    (["--controlnet", "XL:EDGES"], "ControlNet 'xl_canny' is made for SDXL-like (cross-attention width 64) models, but the checkpoint"),
    (["--controlnet", "XLCKPT:EDGES"], "ControlNet 'xl_pickle' is made for SDXL-like (cross-attention width 64) models"),
    (["--controlnet", "XLLEGACY:EDGES"], "ControlNet 'xl_legacy' is made for SDXL-like (cross-attention width 64) "
                                         "models"),
    (["--controlnet", "EDGES"], "is not a ControlNet file (.safetensors"),
    (["--controlnet", "tiny_canny:EDGES", "--cn-mask", "SMALL"], "the mask is 32x32 but the unit's image is 64x64"),
    (["--controlnet", "tiny_canny:EDGES"] * 5, "5 ControlNet units (--controlnet-json, --controlnet and --infotext's "
                                               "ControlNet keys); at most 4"),
])
def test_bad_units_are_refused_before_the_load(tiny_sd1_dir, files, tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.setattr(TextToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    Image.new("L", (32, 32), 255).save(tmp_path / "small.png")
    argv = [value.replace("EDGES", str(files / "edges.png")).replace("XLCKPT", str(files / "xl" / "xl_pickle.ckpt"))
            .replace("XLLEGACY", str(files / "xl" / "xl_legacy.ckpt"))
            .replace("XL", str(files / "xl" / "xl_canny"))
            .replace("SMALL", str(tmp_path / "small.png")) for value in argv]
    assert main(["generate", "x", "--model", str(tiny_sd1_dir), *RUN, "--controlnet-dir", str(files / "controlnets"),
                 *argv, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mixkit: error:") and fragment in err[-1], err
    assert not (tmp_path / "o").exists()


def test_a_model_name_needs_a_controlnet_folder(files, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    assert main(["img2img", str(files / "edges.png"), "--controlnet", "tiny_canny", "-o", str(tmp_path / "o")]) == 2
    assert "no --controlnet-dir to look it up by name; pass the model's path" in capsys.readouterr().err
    assert main(["img2img", str(files / "edges.png"), "--controlnet-dir", str(tmp_path / "none"),
                 "--controlnet", "tiny_canny"]) == 2
    assert "fix --controlnet-dir" in capsys.readouterr().err


def test_a_hub_checkpoint_in_the_hub_cache_is_checked_before_the_load(files, tmp_path, capsys, monkeypatch,
                                                                     tiny_sdxl_dir):
    """`--model org/name`: its unet/config.json in the hub cache tells its family, with no download."""
    import json

    from mixkit.testing.tiny_hub_cache import write_hub_cache_entry

    monkeypatch.setattr(TextToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    unet_config = json.loads((tiny_sdxl_dir / "unet" / "config.json").read_text())
    write_hub_cache_entry(tmp_path / "hub", "org/tiny-xl", {"model_index.json": {}, "unet/config.json": unet_config})
    unit = f"{files / 'controlnets' / 'tiny_canny'}:{files / 'edges.png'}"
    assert main(["generate", "x", "--model", "org/tiny-xl", *RUN, "--controlnet", unit, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert ("ControlNet 'tiny_canny' is made for SD-like (cross-attention width 32) models, but the checkpoint "
            "'org/tiny-xl' is SDXL-like (cross-attention width 64)") in err
    assert not (tmp_path / "o").exists()


def test_a_legacy_pickled_checkpoint_is_checked_before_the_load(files, tmp_path, capsys, monkeypatch,
                                                                single_file_checkpoints):
    """`--model old.ckpt` saved in torch's pre-zip format: its tensor shapes are read onto the meta device, so an SDXL
    ControlNet is refused before the SD 1.x checkpoint loads (such a checkpoint used to be left to the pipeline)."""
    import torch
    from safetensors.torch import load_file

    monkeypatch.setattr(TextToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    state = load_file(single_file_checkpoints / "sd1.safetensors")
    torch.save({"state_dict": state}, tmp_path / "old.ckpt", _use_new_zipfile_serialization=False)
    unit = f"{files / 'xl' / 'xl_canny'}:{files / 'edges.png'}"
    assert main(["generate", "x", "--model", str(tmp_path / "old.ckpt"), *RUN, "--controlnet", unit,
                 "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert ("ControlNet 'xl_canny' is made for SDXL-like (cross-attention width 64) models, but the checkpoint "
            f"'{tmp_path / 'old.ckpt'}' is SD-like (cross-attention width 32)") in err
    assert not (tmp_path / "o").exists()
