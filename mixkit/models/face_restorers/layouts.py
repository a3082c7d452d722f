"""Which face restorer a state dict holds and its sizes, read from the tensors alone (never the file name).

Supported: GFPGANv1Clean (GFPGANv1.3.pth, GFPGANv1.4.pth, GFPGANv1.2 "clean" and community retrains of any width or
output size) and CodeFormer (codeformer.pth v0.1.0 and retrains of any transformer width, depth, codebook size,
fused resolutions or VQGAN widths). Recognised and refused with a reason: the original GFPGANv1 (GFPGANv1.pth, built
on StyleGAN2's compiled CUDA ops) and CodeFormer's stage-1 VQGAN alone.
"""

from __future__ import annotations

import math
import re

import torch

from mixkit.models.face_restorers.codeformer import CodeFormerConfig
from mixkit.models.face_restorers.gfpgan import GFPGANConfig
from mixkit.models.face_restorers.vqgan import VQGANSizes

SUPPORTED = ("GFPGANv1Clean (GFPGANv1.3 / GFPGANv1.4 .pth: conv_body_first.weight, stylegan_decoder.constant_input"
             ".weight ...) or CodeFormer (codeformer.pth: position_emb, ft_layers.0.self_attn.in_proj_weight, "
             "quantize.embedding.weight, encoder.blocks.0.weight ...), bare or under params_ema / params")


class UnknownFaceRestorerError(ValueError):
    """A state dict that is none of the supported face restorers (the message says what it is, if known)."""


def unwrap_trainer_state(loaded: dict) -> tuple[str, dict]:
    """(wrapper, weights) of a BasicSR training file: its EMA weights (`params_ema`) when present, as GFPGANer and
    CodeFormer's inference load them, else `params`; any other dict is taken as the weights (wrapper "")."""
    for key in ("params_ema", "params"):
        if isinstance(loaded.get(key), dict):
            return key, loaded[key]
    return "", loaded


def detect_face_restorer(state: dict[str, torch.Tensor]) -> GFPGANConfig | CodeFormerConfig:
    """The config of the network `state` holds (raises UnknownFaceRestorerError naming what is supported)."""
    if "conv_body_first.0.weight" in state or any(".noise_injection." in key or key.endswith("activate.bias")
                                                   for key in state):
        raise UnknownFaceRestorerError(
            "the original GFPGANv1 (GFPGANv1.pth, StyleGAN2 with compiled CUDA ops), which is not supported; use "
            f"GFPGANv1.4.pth (A1111's default) or GFPGANv1.3.pth. Supported: {SUPPORTED}")
    if "conv_body_first.weight" in state and "stylegan_decoder.constant_input.weight" in state:
        return gfpgan_config(state)
    if "position_emb" in state and "quantize.embedding.weight" in state:
        return codeformer_config(state)
    if "quantize.embedding.weight" in state and "encoder.blocks.0.weight" in state:
        raise UnknownFaceRestorerError(
            "a VQGAN autoencoder alone (CodeFormer's stage-1 vqgan_code1024.pth), not a restorer; use codeformer.pth. "
            f"Supported: {SUPPORTED}")
    raise UnknownFaceRestorerError(f"not a known face restorer. Supported: {SUPPORTED}")


def _indexed(state: dict, pattern: str) -> list[int]:
    """Sorted distinct N of keys matching `pattern` (a regex with one group for N)."""
    regex = re.compile(pattern)
    return sorted({int(match.group(1)) for key in state for match in [regex.match(key)] if match})


def _shape(state: dict, key: str) -> tuple[int, ...]:
    if key not in state:
        raise UnknownFaceRestorerError(f"the key {key!r} is missing; expected {SUPPORTED}")
    return tuple(state[key].shape)


def gfpgan_config(state: dict[str, torch.Tensor]) -> GFPGANConfig:
    """GFPGANv1Clean's sizes: the level count from `conv_body_up.N`, widths from the U-Net's and decoder's convs."""
    ups = _indexed(state, r"conv_body_up\.(\d+)\.conv2\.weight$")
    if not ups:
        raise UnknownFaceRestorerError(f"a GFPGAN-like file without conv_body_up.N layers; expected {SUPPORTED}")
    unet = (_shape(state, "final_conv.weight")[0],) + tuple(
        _shape(state, f"conv_body_up.{level}.conv2.weight")[0] for level in ups)
    decoder = (_shape(state, "stylegan_decoder.constant_input.weight")[1],) + tuple(
        _shape(state, f"stylegan_decoder.to_rgbs.{level}.modulated_conv.weight")[2] for level in ups)
    style_dim = _shape(state, "stylegan_decoder.style_conv1.modulated_conv.modulation.weight")[1]
    out_size = 4 * 2 ** len(ups)
    latents = _shape(state, "final_linear.weight")[0] // style_dim
    sft_out = _shape(state, "condition_scale.0.2.weight")[0]
    try:
        return GFPGANConfig(
            out_size=out_size, style_dim=style_dim,
            mlp_layers=len(_indexed(state, r"stylegan_decoder\.style_mlp\.(\d+)\.weight$")),
            decoder_channels=decoder, unet_channels=unet,
            different_w=latents != 1, sft_half=sft_out == unet[1])
    except ValueError as error:
        raise UnknownFaceRestorerError(f"a GFPGAN-like file with inconsistent sizes ({error})") from None


def codeformer_config(state: dict[str, torch.Tensor]) -> CodeFormerConfig:
    """CodeFormer's sizes: the transformer's from its embeddings and layers, the VQGAN's from the encoder's blocks."""
    tokens, dim_embd = _shape(state, "position_emb")
    codebook_size, code_dim = _shape(state, "quantize.embedding.weight")
    latent_side = math.isqrt(tokens)
    if latent_side * latent_side != tokens:
        raise UnknownFaceRestorerError(f"position_emb has {tokens} rows, not a square latent grid; expected {SUPPORTED}")
    base_channels, res_blocks, multipliers, attn_levels = _encoder_levels(state)
    image_size = latent_side * 2 ** (len(multipliers) - 1)
    connect = tuple(sorted(int(size) for size in
                           {key.split(".")[1] for key in state if key.startswith("fuse_convs_dict.")}))
    try:
        return CodeFormerConfig(
            dim_embd=dim_embd, n_head=8 if dim_embd % 8 == 0 else 1,
            n_layers=len(_indexed(state, r"ft_layers\.(\d+)\.")), codebook_size=codebook_size, connect_list=connect,
            vqgan=VQGANSizes(base_channels=base_channels, channel_multipliers=multipliers, res_blocks=res_blocks,
                             attn_resolutions=tuple(image_size // 2 ** level for level in attn_levels),
                             code_dim=code_dim, image_size=image_size))
    except ValueError as error:
        raise UnknownFaceRestorerError(f"a CodeFormer-like file with inconsistent sizes ({error})") from None


def _encoder_levels(state: dict[str, torch.Tensor]) -> tuple[int, int, tuple[int, ...], list[int]]:
    """(base channels, residual blocks per level, channel multipliers, levels with attention) from the kinds of
    `encoder.blocks.N`: a conv, per level its residual (+ attention) blocks then a downsampler, and a fixed tail of
    residual, attention, residual, norm, conv."""
    kinds = []
    for index in _indexed(state, r"encoder\.blocks\.(\d+)\."):
        prefix = f"encoder.blocks.{index}."
        kind = ("res" if prefix + "conv1.weight" in state else "attn" if prefix + "q.weight" in state
                else "down" if prefix + "conv.weight" in state else "conv" if state.get(prefix + "weight") is not None
                and state[prefix + "weight"].ndim == 4 else "norm")
        kinds.append((kind, state.get(prefix + ("conv1.weight" if kind == "res" else "weight"))))
    if len(kinds) < 7 or [kind for kind, _ in kinds[-5:]] != ["res", "attn", "res", "norm", "conv"] \
            or kinds[0][0] != "conv":
        raise UnknownFaceRestorerError(f"CodeFormer's encoder.blocks are not laid out as a VQGAN encoder; expected "
                                       f"{SUPPORTED}")
    base_channels = kinds[0][1].shape[0]
    levels: list[list[tuple[str, torch.Tensor]]] = [[]]
    for kind, weight in kinds[1:-5]:
        if kind == "down":
            levels.append([])
        else:
            levels[-1].append((kind, weight))
    res_counts = {sum(kind == "res" for kind, _ in level) for level in levels}
    if len(res_counts) != 1 or 0 in res_counts or any(weight.shape[0] % base_channels for level in levels
                                                      for kind, weight in level if kind == "res"):
        raise UnknownFaceRestorerError(f"CodeFormer's encoder levels differ in depth or width ({res_counts} residual "
                                       f"blocks); expected {SUPPORTED}")
    multipliers = tuple([weight for kind, weight in level if kind == "res"][-1].shape[0] // base_channels
                        for level in levels)
    attn_levels = [number for number, level in enumerate(levels) if any(kind == "attn" for kind, _ in level)]
    return base_channels, res_counts.pop(), multipliers, attn_levels
