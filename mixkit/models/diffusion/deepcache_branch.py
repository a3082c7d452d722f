"""DeepCache's two halves of a diffusers UNet: where the deep feature is taken, and the shallow branch.

DeepCache (Ma, Fang & Wang 2023) runs the whole UNet every few steps and keeps the feature that enters
the last `shallow_layers` layers of the final up block; in between, only the shallow branch runs on that
feature: the time/text embeddings, `conv_in`, the first down block's first layers (the skips the branch
needs), the final up block's last layers and the output head. This module holds that model-level math,
shared by the eager wrapper (`pipelines.approx.deepcache`) and by fixed-graph backends that export the
two halves as graphs of their own (`mixkit.runtime.openvino_unet`).
"""

from __future__ import annotations

import copy

import torch

SUPPORTED_BLOCKS = {"CrossAttnDownBlock2D", "DownBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"}


def layout_problem(unet) -> str | None:
    """Why DeepCache cannot split this UNet's outer blocks, or None when it can (diffusers' SD layout: known
    block types, a final up block with one layer more than the first down block and no upsampler)."""
    first, last = unet.down_blocks[0], unet.up_blocks[-1]
    for block in (first, last):
        if type(block).__name__ not in SUPPORTED_BLOCKS:
            return (f"DeepCache supports UNets whose outer blocks are {sorted(SUPPORTED_BLOCKS)}; "
                    f"this one has {type(block).__name__}")
    if last.upsamplers is not None or len(last.resnets) != len(first.resnets) + 1:
        return ("DeepCache expects the final up block to have one layer more than the first down block "
                f"and no upsampler (diffusers' SD layout); got {len(last.resnets)} and {len(first.resnets)}")
    return None


def branch_layers(unet) -> int:
    """How many layers the final up block has (the most `shallow_layers` can be); 0 when DeepCache cannot
    split this UNet."""
    return 0 if layout_problem(unet) else len(unet.up_blocks[-1].resnets)


def check_branch_layout(unet, shallow_layers: int) -> None:
    """Refuse a UNet whose outer blocks DeepCache cannot split, or too many shallow layers, naming what is wrong."""
    problem = layout_problem(unet)
    if problem:
        raise ValueError(problem)
    check_shallow_layers(shallow_layers, len(unet.up_blocks[-1].resnets))


def check_shallow_layers(shallow_layers: int, layers: int) -> None:
    """The branch recomputes at most the final up block's `layers` layers."""
    if shallow_layers > layers:
        raise ValueError(f"shallow_layers={shallow_layers} exceeds the {layers} layers of the UNet's final "
                         f"up block; use 1 .. {layers}")


def capture_feature(unet, shallow_layers: int, keep) -> torch.utils.hooks.RemovableHandle:
    """Hook that calls `keep(feature)` on every forward with the feature entering the first recomputed
    layer of the final up block (the block's input when every layer is recomputed)."""
    last = unet.up_blocks[-1]
    first_recomputed = len(last.resnets) - shallow_layers
    if first_recomputed == 0:
        def keep_block_input(module, args, kwargs):
            keep(kwargs["hidden_states"] if "hidden_states" in kwargs else args[0])
        return last.register_forward_pre_hook(keep_block_input, with_kwargs=True)
    layers = last.attentions if hasattr(last, "attentions") else last.resnets

    def keep_layer_output(module, args, output):
        keep(output[0] if isinstance(output, tuple) else output)
    return layers[first_recomputed - 1].register_forward_hook(keep_layer_output)


def shallow_part(unet):
    """A view of `unet` holding only what the shallow branch runs (its first down block and final up block,
    the embeddings, `conv_in` and the output head; the same tensors, no copies), so a backend that drops the
    full torch UNet after exporting it can still export the branch later for a fraction of the memory."""
    part = copy.copy(unet)
    part._modules = dict(unet._modules)
    part._modules["down_blocks"] = torch.nn.ModuleList([unet.down_blocks[0]])
    part._modules["up_blocks"] = torch.nn.ModuleList([unet.up_blocks[-1]])
    part._modules["mid_block"] = None
    return part


def shallow_forward(unet, feature: torch.Tensor, shallow_layers: int, sample: torch.Tensor, timestep,
                    encoder_hidden_states: torch.Tensor, class_labels=None, timestep_cond=None, attention_mask=None,
                    cross_attention_kwargs=None, added_cond_kwargs=None, down_block_additional_residuals=None,
                    mid_block_additional_residual=None, down_intrablock_additional_residuals=None,
                    encoder_attention_mask=None, return_dict: bool = True):
    """The UNet's output computed from `feature` (cached deep feature) and the shallow branch only.

    Given the feature captured from a full call with the same inputs, this equals that full call.
    """
    from diffusers.models.unets.unet_2d_condition import UNet2DConditionOutput

    del mid_block_additional_residual, return_dict  # the mid block is part of the cached deep path
    if down_intrablock_additional_residuals is not None:
        raise ValueError("DeepCache does not support T2I-Adapter residuals (down_intrablock_additional_residuals); "
                         "turn DeepCache off for adapter generations")
    first, last = unet.down_blocks[0], unet.up_blocks[-1]
    if all(getattr(last, name, None) for name in ("s1", "s2", "b1", "b2")):
        raise ValueError("DeepCache and FreeU cannot be combined (FreeU rescales the skip features DeepCache "
                         "reuses); disable one of them")
    if attention_mask is not None:  # the same mask-to-bias conversion the full forward does
        attention_mask = ((1 - attention_mask.to(sample.dtype)) * -10000.0).unsqueeze(1)
    if encoder_attention_mask is not None:
        encoder_attention_mask = ((1 - encoder_attention_mask.to(sample.dtype)) * -10000.0).unsqueeze(1)
    emb, encoder_hidden_states, sample = _embeddings(unet, sample, timestep, encoder_hidden_states, class_labels,
                                                     timestep_cond, added_cond_kwargs)
    attention = dict(encoder_hidden_states=encoder_hidden_states, cross_attention_kwargs=cross_attention_kwargs,
                     attention_mask=attention_mask, encoder_attention_mask=encoder_attention_mask, return_dict=False)

    # Skip features, shallowest first: conv_in, then the first down block's layers.
    hidden = unet.conv_in(sample)
    skips = [hidden]
    for index in range(shallow_layers - 1):
        hidden = first.resnets[index](hidden, emb)
        if hasattr(first, "attentions"):
            hidden = first.attentions[index](hidden, **attention)[0]
        skips.append(hidden)
    if down_block_additional_residuals is not None:  # ControlNet adds to the skips, shallowest first
        skips = [skip + residual for skip, residual in zip(skips, down_block_additional_residuals)]

    # The final up block's last layers consume those skips deepest-first, on the cached feature.
    hidden = feature
    layers = len(last.resnets)
    for index in range(layers - shallow_layers, layers):
        hidden = torch.cat([hidden, skips[layers - 1 - index]], dim=1)
        hidden = last.resnets[index](hidden, emb)
        if hasattr(last, "attentions"):
            hidden = last.attentions[index](hidden, **attention)[0]
    if unet.conv_norm_out is not None:
        hidden = unet.conv_act(unet.conv_norm_out(hidden))
    return UNet2DConditionOutput(sample=unet.conv_out(hidden))


def _embeddings(unet, sample, timestep, encoder_hidden_states, class_labels, timestep_cond, added_cond_kwargs):
    """Time (+class, +SDXL text-time) embedding and projected text states, as the full forward makes them."""
    if unet.config.center_input_sample:
        sample = 2 * sample - 1.0
    emb = unet.time_embedding(unet.get_time_embed(sample=sample, timestep=timestep), timestep_cond)
    class_emb = unet.get_class_embed(sample=sample, class_labels=class_labels)
    if class_emb is not None:
        emb = torch.cat([emb, class_emb], dim=-1) if unet.config.class_embeddings_concat else emb + class_emb
    if unet.config.addition_embed_type == "image_hint":
        raise ValueError("DeepCache does not support image-hint (Kandinsky) UNets")
    aug_emb = unet.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                 added_cond_kwargs=added_cond_kwargs)
    if aug_emb is not None:
        emb = emb + aug_emb
    if unet.time_embed_act is not None:
        emb = unet.time_embed_act(emb)
    encoder_hidden_states = unet.process_encoder_hidden_states(encoder_hidden_states=encoder_hidden_states,
                                                               added_cond_kwargs=added_cond_kwargs)
    return emb, encoder_hidden_states, sample
