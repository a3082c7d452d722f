"""Where each diffusers UNet/VAE parameter lives in the original LDM/SGM (A1111) layout.

The maps are built by walking the diffusers modules, so any UNet2DConditionModel/AutoencoderKL
shape (SD 1.x, 2.x, XL, tiny test models) gets its layout without a hand-written key table.
Facts used (from CompVis `openaimodel.py` / `autoencoder` and diffusers' conversion scripts):

* UNet `input_blocks` are a flat list: conv_in, then per level `layers_per_block` entries of
  [ResBlock, SpatialTransformer?], then one downsampler (`.0.op`) except on the last level.
* `output_blocks` mirror it with `layers_per_block + 1` entries per level; a level's upsampler
  sits in its last entry, after the optional transformer (`.1.conv` or `.2.conv`).
* Transformer internals (attn1/attn2/ff/norm1-3/proj_in/proj_out) keep their diffusers names.
* The VAE decoder's `up` list is stored in reverse order; its attention uses 1x1 convs named
  q/k/v/proj_out where diffusers has linear to_q/to_k/to_v/to_out.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

UNET_RESNET_RENAMES = {
    "norm1.": "in_layers.0.", "conv1.": "in_layers.2.", "time_emb_proj.": "emb_layers.1.",
    "norm2.": "out_layers.0.", "conv2.": "out_layers.3.", "conv_shortcut.": "skip_connection.",
}
VAE_RESNET_RENAMES = {"conv_shortcut.": "nin_shortcut."}
VAE_ATTENTION_RENAMES = {
    "group_norm.": "norm.", "to_q.": "q.", "to_k.": "k.", "to_v.": "v.", "to_out.0.": "proj_out.",
}


@dataclass(frozen=True)
class PrefixRule:
    """Parameters under `diffusers` move under `ldm`; `renames` rewrite the first part of the rest."""

    diffusers: str
    ldm: str
    renames: dict = field(default_factory=dict)
    conv_1x1: bool = False  # linear weights stored as 1x1 conv kernels in the LDM file


def unet_rules(unet) -> list[PrefixRule]:
    """Prefix rules for a diffusers `UNet2DConditionModel`, derived from its module structure."""
    rules = [
        PrefixRule("conv_in.", "input_blocks.0.0."),
        PrefixRule("time_embedding.linear_1.", "time_embed.0."),
        PrefixRule("time_embedding.linear_2.", "time_embed.2."),
        PrefixRule("add_embedding.linear_1.", "label_emb.0.0."),
        PrefixRule("add_embedding.linear_2.", "label_emb.0.2."),
        PrefixRule("class_embedding.linear_1.", "label_emb.0.0."),
        PrefixRule("class_embedding.linear_2.", "label_emb.0.2."),
        PrefixRule("conv_norm_out.", "out.0."),
        PrefixRule("conv_out.", "out.2."),
    ]
    index = 1
    for level, block in enumerate(unet.down_blocks):
        attentions = getattr(block, "attentions", None)
        for j, _ in enumerate(block.resnets):
            rules.append(PrefixRule(f"down_blocks.{level}.resnets.{j}.", f"input_blocks.{index}.0.", UNET_RESNET_RENAMES))
            if attentions is not None:
                rules.append(PrefixRule(f"down_blocks.{level}.attentions.{j}.", f"input_blocks.{index}.1."))
            index += 1
        if block.downsamplers is not None:
            rules.append(PrefixRule(f"down_blocks.{level}.downsamplers.0.conv.", f"input_blocks.{index}.0.op."))
            index += 1

    mid = unet.mid_block
    rules.append(PrefixRule("mid_block.resnets.0.", "middle_block.0.", UNET_RESNET_RENAMES))
    if getattr(mid, "attentions", None) is not None:
        rules.append(PrefixRule("mid_block.attentions.0.", "middle_block.1."))
        rules.append(PrefixRule("mid_block.resnets.1.", "middle_block.2.", UNET_RESNET_RENAMES))
    else:
        rules.append(PrefixRule("mid_block.resnets.1.", "middle_block.1.", UNET_RESNET_RENAMES))

    index = 0
    for level, block in enumerate(unet.up_blocks):
        attentions = getattr(block, "attentions", None)
        for j, _ in enumerate(block.resnets):
            rules.append(PrefixRule(f"up_blocks.{level}.resnets.{j}.", f"output_blocks.{index}.0.", UNET_RESNET_RENAMES))
            if attentions is not None:
                rules.append(PrefixRule(f"up_blocks.{level}.attentions.{j}.", f"output_blocks.{index}.1."))
            index += 1
        if block.upsamplers is not None:
            slot = 2 if attentions is not None else 1
            rules.append(PrefixRule(f"up_blocks.{level}.upsamplers.0.conv.", f"output_blocks.{index - 1}.{slot}.conv."))
    return rules


def vae_rules(vae) -> list[PrefixRule]:
    """Prefix rules for a diffusers `AutoencoderKL` (encoder/decoder, quant convs)."""
    rules = [
        PrefixRule("quant_conv.", "quant_conv."),
        PrefixRule("post_quant_conv.", "post_quant_conv."),
    ]
    for part in ("encoder", "decoder"):
        rules += [
            PrefixRule(f"{part}.conv_in.", f"{part}.conv_in."),
            PrefixRule(f"{part}.conv_out.", f"{part}.conv_out."),
            PrefixRule(f"{part}.conv_norm_out.", f"{part}.norm_out."),
        ]
        coder = getattr(vae, part)
        for j, _ in enumerate(coder.mid_block.resnets):
            rules.append(PrefixRule(f"{part}.mid_block.resnets.{j}.", f"{part}.mid.block_{j + 1}.", VAE_RESNET_RENAMES))
        if coder.mid_block.attentions is not None:
            rules.append(PrefixRule(f"{part}.mid_block.attentions.0.", f"{part}.mid.attn_1.", VAE_ATTENTION_RENAMES, True))

    for level, block in enumerate(vae.encoder.down_blocks):
        for j, _ in enumerate(block.resnets):
            rules.append(PrefixRule(f"encoder.down_blocks.{level}.resnets.{j}.", f"encoder.down.{level}.block.{j}.", VAE_RESNET_RENAMES))
        if block.downsamplers is not None:
            rules.append(PrefixRule(f"encoder.down_blocks.{level}.downsamplers.0.conv.", f"encoder.down.{level}.downsample.conv."))
    levels = len(vae.decoder.up_blocks)
    for level, block in enumerate(vae.decoder.up_blocks):
        ldm_level = levels - 1 - level
        for j, _ in enumerate(block.resnets):
            rules.append(PrefixRule(f"decoder.up_blocks.{level}.resnets.{j}.", f"decoder.up.{ldm_level}.block.{j}.", VAE_RESNET_RENAMES))
        if block.upsamplers is not None:
            rules.append(PrefixRule(f"decoder.up_blocks.{level}.upsamplers.0.conv.", f"decoder.up.{ldm_level}.upsample.conv."))
    return rules


def apply_rules(state_dict: dict, rules: list[PrefixRule], ldm_prefix: str, component: str) -> dict:
    """Rename a diffusers state dict to LDM keys under `ldm_prefix`; every key must match a rule."""
    ordered = sorted(rules, key=lambda r: len(r.diffusers), reverse=True)
    out = {}
    for key, tensor in state_dict.items():
        rule = next((r for r in ordered if key.startswith(r.diffusers)), None)
        if rule is None:
            raise ValueError(f"No LDM location known for {component} parameter {key!r}; this model shape is not supported")
        rest = key[len(rule.diffusers):]
        for old, new in rule.renames.items():
            if rest.startswith(old):
                rest = new + rest[len(old):]
                break
        if rule.conv_1x1 and rest.endswith(".weight") and tensor.ndim == 2:
            tensor = tensor[:, :, None, None]
        out[ldm_prefix + rule.ldm + rest] = tensor
    return out


def unet_to_ldm(unet, prefix: str = "model.diffusion_model.") -> dict[str, torch.Tensor]:
    """The UNet's parameters under LDM names (`model.diffusion_model.input_blocks...`)."""
    return apply_rules(unet.state_dict(), unet_rules(unet), prefix, "UNet")


def vae_to_ldm(vae, prefix: str = "first_stage_model.") -> dict[str, torch.Tensor]:
    """The VAE's parameters under LDM names (`first_stage_model.encoder.down.0.block.0...`)."""
    return apply_rules(vae.state_dict(), vae_rules(vae), prefix, "VAE")
