"""Tiny IP-Adapters built from configs for a tiny UNet, saved in the layouts users have.

`save_tiny_ip_adapter` writes h94/IP-Adapter's layout: `<folder>/<name>.safetensors` (or `.bin`: a pickled
{"image_proj": ..., "ip_adapter": ...}) next to `<folder>/image_encoder`, a CLIPVisionModelWithProjection whose
projection width is what the adapter's `image_proj` reads. Weights are seeded and large enough to change a picture.
"""

from __future__ import annotations

from pathlib import Path

import torch

TOKENS = 4  # h94's plain IP-Adapter: 4 image tokens per image
PROJECTION_DIM = 16


def save_image_encoder(folder: Path, projection_dim: int = PROJECTION_DIM, seed: int = 0) -> Path:
    """A 2-layer CLIP vision encoder on 32 px images, saved as a transformers folder."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    config = CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                              image_size=32, patch_size=8, projection_dim=projection_dim)
    CLIPVisionModelWithProjection(config).eval().save_pretrained(folder)
    return folder


def tiny_ip_adapter_state(unet, cross_dim: int | None = None, projection_dim: int = PROJECTION_DIM,
                          seed: int = 0) -> dict[str, dict]:
    """{"image_proj", "ip_adapter"} for `unet` (its cross-attention layers in diffusers' key order: 1, 3, 5 ...);
    `cross_dim` other than the UNet's makes an adapter of another family."""
    generator = torch.Generator().manual_seed(seed)
    cross_dim = cross_dim or unet.config.cross_attention_dim

    def weight(*shape):
        return torch.randn(*shape, generator=generator) * 0.5

    image_proj = {"proj.weight": weight(TOKENS * cross_dim, projection_dim), "proj.bias": weight(TOKENS * cross_dim),
                  "norm.weight": torch.ones(cross_dim), "norm.bias": torch.zeros(cross_dim)}
    ip_layers, key_id = {}, 1
    for name in unet.attn_processors:
        if name.endswith("attn1.processor"):
            continue
        attention = unet.get_submodule(name.removesuffix(".processor"))
        hidden = attention.to_k.weight.shape[0]
        ip_layers[f"{key_id}.to_k_ip.weight"] = weight(hidden, cross_dim)
        ip_layers[f"{key_id}.to_v_ip.weight"] = weight(hidden, cross_dim)
        key_id += 2
    return {"image_proj": image_proj, "ip_adapter": ip_layers}


def save_tiny_ip_adapter(folder: Path, unet, name: str = "ip-adapter_tiny", suffix: str = ".safetensors",
                         encoder: bool = True, **state_options) -> Path:
    """Write the adapter file (h94 layout) and, with `encoder`, `image_encoder/` beside it; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    state = tiny_ip_adapter_state(unet, **state_options)
    file = folder / f"{name}{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({f"{part}.{key}": value.contiguous() for part, values in state.items()
                   for key, value in values.items()}, file)
    else:
        torch.save(state, file)
    if encoder and not (folder / "image_encoder").exists():
        save_image_encoder(folder / "image_encoder", state["image_proj"]["proj.weight"].shape[1])
    return file
