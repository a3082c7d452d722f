"""Tiny GFPGAN and CodeFormer files for tests, written in the official key layouts (as GFPGANv1.4.pth and
codeformer.pth store them, under `params_ema` by default) with seeded random weights.

Both restore 512 px faces through the networks' resize-to-own-size path, so they run in well under a second.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.models.face_restorers.codeformer import CodeFormerConfig
from mixkit.models.face_restorers.gfpgan import GFPGANConfig
from mixkit.models.face_restorers.vqgan import VQGANSizes

# 32 px, 4 levels; the official width formula at narrow 1/32 (decoder 16 .. 8, U-Net half of it)
TINY_GFPGAN = GFPGANConfig.official(out_size=32, channel_multiplier=1, narrow=1 / 32, style_dim=8, mlp_layers=2)
# 64 px, three VQGAN levels (GroupNorm's 32 groups set the smallest width), attention at the 16 px latent,
# two transformer layers, a 64-entry codebook, CFT at 32 and 64 px
TINY_CODEFORMER = CodeFormerConfig(
    dim_embd=16, n_head=8, n_layers=2, codebook_size=64, connect_list=(32, 64),
    vqgan=VQGANSizes(base_channels=32, channel_multipliers=(1, 1, 2), res_blocks=1, attn_resolutions=(16,),
                     code_dim=8, image_size=64))


def tiny_face_restorer(config, seed: int = 0):
    """A seeded random network of `config` in eval mode. Every parameter is drawn (biases, noise strengths, the
    position embedding included), so no branch of the forward pass multiplies by an initial zero."""
    import torch

    from mixkit.models.face_restorers.loading import build_face_restorer

    torch.manual_seed(seed)
    model = build_face_restorer(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator) * 0.1
            is_norm_scale = parameter.ndim == 1 and name.endswith("weight")
            parameter.copy_(1 + noise if is_norm_scale else noise)
    return model


def save_face_restorer(model, path: str | Path, *, wrapper: str | None = "params_ema") -> Path:
    """Write `model`'s state dict to `path` as the official trainers do: nested under `wrapper` ("params_ema",
    "params", or None for a bare dict) with torch.save, or as a flat `.safetensors` file."""
    import torch

    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save({wrapper: state} if wrapper else state, path)
    return path


def write_tiny_gfpgan(path: str | Path, *, config: GFPGANConfig = TINY_GFPGAN, wrapper: str | None = "params_ema",
                      seed: int = 0) -> Path:
    """A tiny GFPGANv1Clean file at `path` (GFPGANv1.4.pth's key layout)."""
    return save_face_restorer(tiny_face_restorer(config, seed), path, wrapper=wrapper)


def write_tiny_codeformer(path: str | Path, *, config: CodeFormerConfig = TINY_CODEFORMER,
                          wrapper: str | None = "params_ema", seed: int = 0) -> Path:
    """A tiny CodeFormer file at `path` (codeformer.pth's key layout)."""
    return save_face_restorer(tiny_face_restorer(config, seed), path, wrapper=wrapper)
