"""9-channel (inpainting) single files: mixkit's own export loads back with `config_dir`, and without it the
channel count is read from the file's first UNet conv (as A1111 picks its inpainting config)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.models.diffusion import single_file_configs
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.models.diffusion.single_file import load_single_file
from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

FAMILIES = ["tiny_sd1_dir", "tiny_sdxl_dir"]
SHIPPED_NAME = {"tiny_sd1_dir": "sd15", "tiny_sdxl_dir": "sdxl-base"}


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


@pytest.fixture(scope="module")
def inpainting_dirs(request, tmp_path_factory):
    """Each tiny text-to-image folder with its UNet swapped for a 9-channel one of the same shape."""
    from diffusers import UNet2DConditionModel

    folders = {}
    for name in FAMILIES:
        source = request.getfixturevalue(name)
        folder = tmp_path_factory.mktemp(name.replace("_dir", "-inpaint")) / "model"
        shutil.copytree(source, folder)
        config = UNet2DConditionModel.load_config(source / "unet")
        torch.manual_seed(3)
        unet = UNet2DConditionModel.from_config({**config, "in_channels": 9}).eval()
        shutil.rmtree(folder / "unet")
        unet.save_pretrained(folder / "unet", safe_serialization=True)
        folders[name] = folder
    return folders


@pytest.fixture(scope="module")
def exported(inpainting_dirs, tmp_path_factory):
    """name -> (the folder's model, its single file written by save_ldm_checkpoint)."""
    out = {}
    for name, folder in inpainting_dirs.items():
        model = load_diffusion_model(folder)
        out[name] = model, save_ldm_checkpoint(model, tmp_path_factory.mktemp("export") / f"{name}.safetensors")
    return out


def _same_parameters(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


@pytest.mark.parametrize("name", FAMILIES)
def test_own_export_loads_back_with_config_dir(name, inpainting_dirs, exported):
    original, file = exported[name]
    loaded = load_single_file(file, config_dir=inpainting_dirs[name])
    assert loaded.family is original.family
    assert loaded.unet.config.in_channels == 9
    for a, b in [(original.unet, loaded.unet), (original.vae, loaded.vae),
                 *zip(original.text_encoders, loaded.text_encoders)]:
        _same_parameters(a, b)


@pytest.mark.parametrize("name", FAMILIES)
def test_nine_channels_are_detected_from_the_keys_without_config_dir(request, name, exported, tmp_path, monkeypatch):
    """The family's shipped (4-channel) configs get the file's 9 channels. The shipped configs describe the
    full-size architectures, so the tiny 4-channel folder stands in for them here."""
    shipped = tmp_path / "shipped"
    shutil.copytree(request.getfixturevalue(name), shipped / SHIPPED_NAME[name])
    monkeypatch.setattr(single_file_configs, "SHIPPED_CONFIGS", shipped)
    original, file = exported[name]
    loaded = load_single_file(file)
    assert loaded.extras["configs"] == SHIPPED_NAME[name]
    assert loaded.family is original.family and loaded.unet.config.in_channels == 9
    _same_parameters(original.unet, loaded.unet)


def test_text_to_image_file_still_gets_four_channels(request, tmp_path, monkeypatch):
    folder = request.getfixturevalue("tiny_sd1_dir")
    shipped = tmp_path / "shipped"
    shutil.copytree(folder, shipped / "sd15")
    monkeypatch.setattr(single_file_configs, "SHIPPED_CONFIGS", shipped)
    file = save_ldm_checkpoint(load_diffusion_model(folder), tmp_path / "t2i.safetensors")
    assert load_single_file(file).unet.config.in_channels == 4


def test_config_dir_with_other_channels_is_refused(request, exported):
    _, file = exported["tiny_sd1_dir"]
    with pytest.raises(ValueError, match=r"is an inpainting model \(its UNet takes 9 input channels\) but config_dir "
                                         r".* has unet in_channels=4; pass the folder of an inpainting model"):
        load_single_file(file, config_dir=request.getfixturevalue("tiny_sd1_dir"))


@pytest.mark.parametrize("name", FAMILIES)
def test_single_file_inpaints_exactly_as_its_folder(name, inpainting_dirs, exported):
    from pipelines.img2img import ImageToImage
    from pipelines.txt2img import TextToImage

    _, file = exported[name]
    image = Image.fromarray((np.random.RandomState(0).rand(64, 64, 3) * 255).astype("uint8"))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, (16, 16, 48, 48))
    kwargs = dict(prompt="a cat", init_images=[image], mask=mask, denoising_strength=0.75, steps=3, seed=1)
    from_folder = ImageToImage.from_pipeline(TextToImage.from_pretrained(inpainting_dirs[name]))(**kwargs)
    from_file = ImageToImage.from_pipeline(
        TextToImage.from_pretrained(file, config_dir=inpainting_dirs[name]))(**kwargs)
    # Same weights, configs, latents and masks; SDXL's pooled text embedding differs by float rounding (2.4e-7)
    # between the two loaders, which A1111's per-call inpainting blend can carry to one level in a few pixels.
    difference = np.abs(np.asarray(from_folder.images[0]).astype(int) - np.asarray(from_file.images[0]).astype(int))
    assert difference.max() <= 1 and (difference > 0).mean() < 0.001


def test_sdxl_inpainting_unet_is_conditioned_on_the_rounded_mask_even_with_mask_round_off(inpainting_dirs):
    # A1111's img2img_image_conditioning: the SDXL-inpaint branch leaves round_image_mask at True, so mask_round=False
    # softens only the blend there; SD 1.x/2.x inpainting UNets get the soft mask.
    from pipelines.img2img import ImageToImage
    from pipelines.txt2img import TextToImage

    pipe = ImageToImage.from_pipeline(TextToImage.from_pretrained(inpainting_dirs["tiny_sdxl_dir"]))
    image = Image.fromarray((np.random.RandomState(0).rand(64, 64, 3) * 255).astype("uint8"))
    mask = Image.new("L", (64, 64), 0)
    mask.paste(100, (16, 16, 48, 48))  # a grey (soft) mask
    seen = []
    handle = pipe.model.unet.register_forward_pre_hook(lambda module, args: seen.append(args[0][:, 4].clone()))
    try:
        pipe(prompt="a cat", init_images=[image], mask=mask, mask_round=False, mask_blur=0, steps=2, seed=1)
    finally:
        handle.remove()
    assert set(torch.unique(seen[0]).tolist()) <= {0.0, 1.0}
