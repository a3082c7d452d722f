"""LoraNetwork's optimizer groups: kohya's LoRA+ ratios, shared and per part (networks/lora.py's
loraplus_unet_lr_ratio / loraplus_text_encoder_lr_ratio, each falling back to loraplus_lr_ratio)."""

from __future__ import annotations

import pytest

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.lora_network import LoraNetwork
from mixkit.training.sd_lora_config import SDLoraTrainingConfig


@pytest.fixture(scope="module")
def network(tiny_sd1_dir):
    model = load_diffusion_model(tiny_sd1_dir)
    return LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, train_text_encoder=True)


@pytest.mark.parametrize("shared, unet, text_encoder, rates", [
    (None, 16.0, None, [1e-3, 1e-3 * 16, 5e-4]),  # only the UNet's up weights get LoRA+
    (None, None, 4.0, [1e-3, 5e-4, 5e-4 * 4]),  # only the text encoder's
    (16.0, None, 4.0, [1e-3, 1e-3 * 16, 5e-4, 5e-4 * 4]),  # kohya's documented "loraplus_lr_ratio=16" + te 4
    (16.0, 2.0, None, [1e-3, 1e-3 * 2, 5e-4, 5e-4 * 16]),  # the part's own wins over the shared one
])
def test_each_part_takes_its_own_ratio_or_the_shared_one(network, shared, unet, text_encoder, rates):
    groups = network.parameter_groups(1e-3, 5e-4, up_lr_ratio=shared, unet_up_lr_ratio=unet,
                                      text_encoder_up_lr_ratio=text_encoder)
    assert [g["lr"] for g in groups] == rates
    ups = {id(a.lora_up.weight) for a in network.adapters.values()}
    boosted = [g for g in groups if g["lr"] not in (1e-3, 5e-4)]
    assert all(id(p) in ups for g in boosted for p in g["params"])
    plain = network.parameter_groups(1e-3, 5e-4)
    assert sorted(id(p) for g in groups for p in g["params"]) == sorted(id(p) for g in plain for p in g["params"])


def test_the_config_resolves_the_ratios_as_kohyas_network_does(tmp_path):
    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"))
    assert SDLoraTrainingConfig(**base).loraplus_ratios() == (None, None)
    assert SDLoraTrainingConfig(**base, loraplus_lr_ratio=16).loraplus_ratios() == (16, 16)
    assert SDLoraTrainingConfig(**base, loraplus_lr_ratio=16, loraplus_text_encoder_lr_ratio=4).loraplus_ratios() == \
        (16, 4)
    for name in ("loraplus_unet_lr_ratio", "loraplus_text_encoder_lr_ratio"):
        with pytest.raises(ValueError, match=f"{name} must be a positive number"):
            SDLoraTrainingConfig(**base, **{name: 0}).check()
