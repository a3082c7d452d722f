"""Tiny IP-Adapters built from configs for a tiny UNet, saved in the layouts users have.

`save_tiny_ip_adapter` writes h94/IP-Adapter's layout: `<folder>/<name>.safetensors` (or `.bin`: a pickled
{"image_proj": ..., "ip_adapter": ...}) next to `<folder>/image_encoder`, a CLIPVisionModelWithProjection whose
projection width is what the adapter's `image_proj` reads. Weights are seeded and large enough to change a picture.

`kind="plus"` writes an IP-Adapter Plus (h94's `ip-adapter-plus_sd15` / `ip-adapter-plus-face_sd15`): its
`image_proj` is the Resampler in h94's own key names (`latents`, `proj_in`, `layers.N.0.to_kv`, `layers.N.1.1` ...,
which diffusers converts into `IPAdapterPlusImageProjection`), reading the encoder's penultimate hidden states.
"""

from __future__ import annotations

from pathlib import Path

import torch

TOKENS = 4  # h94's plain IP-Adapter: 4 image tokens per image
PROJECTION_DIM = 16
ENCODER_HIDDEN = 32  # the tiny encoder's hidden_size: what a plus adapter's proj_in reads
PLUS_TOKENS = 16  # h94's plus adapters: 16 resampler queries per image
PLUS_WIDTH = 64  # the resampler's width; diffusers reads its heads as to_q rows // 64, so one head
PLUS_DEPTH = 4  # h94's resampler depth (diffusers' key conversion knows layers 0-3)


def save_image_encoder(folder: Path, projection_dim: int = PROJECTION_DIM, seed: int = 0) -> Path:
    """A 2-layer CLIP vision encoder on 32 px images, saved as a transformers folder."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    config = CLIPVisionConfig(hidden_size=ENCODER_HIDDEN, intermediate_size=37, num_hidden_layers=2,
                              num_attention_heads=4,
                              image_size=32, patch_size=8, projection_dim=projection_dim)
    CLIPVisionModelWithProjection(config).eval().save_pretrained(folder)
    return folder


def tiny_ip_adapter_state(unet, cross_dim: int | None = None, projection_dim: int = PROJECTION_DIM,
                          seed: int = 0, kind: str = "plain") -> dict[str, dict]:
    """{"image_proj", "ip_adapter"} for `unet` (its cross-attention layers in diffusers' key order: 1, 3, 5 ...);
    `cross_dim` other than the UNet's makes an adapter of another family; `kind` "plain" or "plus"."""
    generator = torch.Generator().manual_seed(seed)
    cross_dim = cross_dim or unet.config.cross_attention_dim

    def weight(*shape):
        return torch.randn(*shape, generator=generator) * 0.5

    if kind == "plain":
        image_proj = {"proj.weight": weight(TOKENS * cross_dim, projection_dim),
                      "proj.bias": weight(TOKENS * cross_dim),
                      "norm.weight": torch.ones(cross_dim), "norm.bias": torch.zeros(cross_dim)}
    elif kind == "plus":
        image_proj = _plus_resampler(weight, cross_dim)
    else:
        raise ValueError(f"kind must be 'plain' or 'plus', got {kind!r}.")
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


def _plus_resampler(weight, cross_dim: int) -> dict:
    """h94's Resampler keys: per layer a PerceiverAttention (`0.norm1/norm2/to_q/to_kv/to_out`, no biases) and a
    FeedForward `Sequential(LayerNorm, Linear, GELU, Linear)` (`1.0`, `1.1`, `1.3`)."""
    width = PLUS_WIDTH
    state = {"latents": weight(1, PLUS_TOKENS, width) / width ** 0.5,
             "proj_in.weight": weight(width, ENCODER_HIDDEN), "proj_in.bias": weight(width),
             "proj_out.weight": weight(cross_dim, width), "proj_out.bias": weight(cross_dim),
             "norm_out.weight": torch.ones(cross_dim), "norm_out.bias": torch.zeros(cross_dim)}
    for layer in range(PLUS_DEPTH):
        prefix = f"layers.{layer}"
        for norm in (f"{prefix}.0.norm1", f"{prefix}.0.norm2", f"{prefix}.1.0"):
            state[f"{norm}.weight"], state[f"{norm}.bias"] = torch.ones(width), torch.zeros(width)
        state[f"{prefix}.0.to_q.weight"] = weight(width, width) / width ** 0.5
        state[f"{prefix}.0.to_kv.weight"] = weight(2 * width, width) / width ** 0.5
        state[f"{prefix}.0.to_out.weight"] = weight(width, width) / width ** 0.5
        state[f"{prefix}.1.1.weight"] = weight(4 * width, width) / width ** 0.5
        state[f"{prefix}.1.3.weight"] = weight(width, 4 * width) / width ** 0.5
    return state


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
        projection = state["image_proj"]["proj.weight"].shape[1] if "proj.weight" in state["image_proj"] \
            else PROJECTION_DIM  # a plus adapter reads the hidden states; the projection is unused
        save_image_encoder(folder / "image_encoder", projection)
    return file
