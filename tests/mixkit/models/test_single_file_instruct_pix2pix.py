"""8-channel (instruct-pix2pix) single files in A1111's layout: the channel count is read from the first UNet conv (as
A1111 picks its instruct-pix2pix config), a config_dir that says otherwise is refused, and the file edits an image
exactly as its diffusers folder does."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.models.diffusion import single_file_configs
from mixkit.models.diffusion.detect_keys import UNET_IN
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.models.diffusion.single_file import load_single_file
from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


@pytest.fixture(scope="module")
def exported(tiny_ip2p_dir, tmp_path_factory):
    """(the folder's model, its A1111-layout single file written by save_ldm_checkpoint)."""
    model = load_diffusion_model(tiny_ip2p_dir)
    return model, save_ldm_checkpoint(model, tmp_path_factory.mktemp("export") / "ip2p.safetensors")


@pytest.fixture
def shipped_tiny_sd15(tiny_sd1_dir, tmp_path, monkeypatch):
    """The shipped configs describe full-size models; the tiny 4-channel SD 1.x folder stands in for sd15."""
    shipped = tmp_path / "shipped"
    shutil.copytree(tiny_sd1_dir, shipped / "sd15")
    monkeypatch.setattr(single_file_configs, "SHIPPED_CONFIGS", shipped)


def test_the_file_has_a1111_keys_with_an_eight_channel_first_conv(exported):
    from safetensors import safe_open

    _, file = exported
    with safe_open(str(file), "pt") as handle:
        assert handle.get_slice(UNET_IN).get_shape()[1] == 8


def test_eight_channels_are_read_from_the_file_without_config_dir(exported, shipped_tiny_sd15):
    original, file = exported
    loaded = load_single_file(file)
    assert loaded.extras["configs"] == "sd15"
    assert loaded.unet.config.in_channels == 8
    assert loaded.description == "SD 1.x instruct-pix2pix"
    for key, value in original.unet.state_dict().items():
        assert torch.equal(value, loaded.unet.state_dict()[key]), key


def test_a_config_dir_of_a_text_to_image_model_is_refused(exported, tiny_sd1_dir):
    _, file = exported
    with pytest.raises(ValueError, match=r"is an instruct-pix2pix model \(its UNet takes 8 input channels\) but "
                                         r"config_dir .* has unet in_channels=4; pass the folder of an "
                                         r"instruct-pix2pix model"):
        load_single_file(file, config_dir=tiny_sd1_dir)


def test_the_single_file_edits_exactly_as_its_folder(exported, tiny_ip2p_dir, shipped_tiny_sd15):
    from pipelines.img2img import ImageToImage

    _, file = exported
    image = Image.fromarray((np.random.RandomState(0).rand(64, 64, 3) * 255).astype("uint8"))
    kwargs = dict(prompt="make it snow", init_images=[image], image_cfg_scale=1.5, steps=3, seed=1)
    from_folder = ImageToImage.from_pretrained(tiny_ip2p_dir)(**kwargs)
    from_file = ImageToImage.from_pretrained(file)(**kwargs)
    assert np.array_equal(np.asarray(from_folder.images[0]), np.asarray(from_file.images[0]))
    assert "Image CFG scale: 1.5," in from_file.infotexts[0]
