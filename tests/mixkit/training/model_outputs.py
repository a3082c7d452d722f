"""The UNet's and text encoder's outputs at fixed inputs: what a trained network's file, loaded another way, must
reproduce (shared by the DoRA and PiSSA trainer tests)."""

from __future__ import annotations

import torch


def unet_and_text_outputs(model) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 100, (2, 8), generator=generator)
    with torch.no_grad():
        text = model.text_encoders[0](ids)[0]
        latents = torch.randn(2, model.unet.config.in_channels, 8, 8, generator=generator)
        return [text, model.unet(latents, torch.tensor([10, 500]), encoder_hidden_states=text).sample]
