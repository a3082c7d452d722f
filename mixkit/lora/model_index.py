"""Where each LoRA module name points in a loaded model, built from the model's own modules.

LoRA files name modules three ways: kohya's flattened diffusers paths (`lora_unet_down_blocks_0_
attentions_0_proj_in`), kohya's flattened original LDM/SGM paths used by SDXL trainers
(`lora_unet_input_blocks_4_1_proj_in`) and dotted diffusers paths (`unet.down_blocks.0...`).
Text encoders answer to both `text_model.encoder...` (the name every file uses) and the bare
`encoder...` of transformers 5's CLIPTextModel. Underscores are ambiguous (`to_q`, `transformer_blocks`), so names are never patched back into
paths: every name the model can be addressed by is generated from `named_modules()` and looked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

# Components of a Stable Diffusion model a LoRA can target.
UNET, TE1, TE2 = "unet", "te1", "te2"
COMPONENT_LABELS = {UNET: "UNet", TE1: "text encoder", TE2: "second text encoder (SDXL)"}

_RESNET_TO_LDM = {
    "norm1": "in_layers.0", "conv1": "in_layers.2", "time_emb_proj": "emb_layers.1",
    "norm2": "out_layers.0", "conv2": "out_layers.3", "conv_shortcut": "skip_connection",
}
_TOP_LEVEL_TO_LDM = {
    "conv_in": "input_blocks.0.0", "time_embedding.linear_1": "time_embed.0", "time_embedding.linear_2": "time_embed.2",
    "add_embedding.linear_1": "label_emb.0.0", "add_embedding.linear_2": "label_emb.0.2",
    "conv_norm_out": "out.0", "conv_out": "out.2",
}


@dataclass(frozen=True)
class TargetModule:
    """A module of the model that a LoRA module can change."""

    component: str
    path: str
    module: nn.Module


def ldm_block_prefixes(unet: nn.Module) -> dict[str, str]:
    """Map diffusers block prefixes (`down_blocks.1.attentions.0`) to LDM ones (`input_blocks.4.1`).

    The LDM numbering counts every resnet (+ its attention) and every downsampler as one
    `input_blocks` entry; it is derived from the blocks this UNet actually has.
    """
    prefixes: dict[str, str] = {}
    index = 1
    for i, block in enumerate(getattr(unet, "down_blocks", [])):
        for j in range(len(block.resnets)):
            prefixes[f"down_blocks.{i}.resnets.{j}"] = f"input_blocks.{index}.0"
            if getattr(block, "attentions", None) is not None and j < len(block.attentions):
                prefixes[f"down_blocks.{i}.attentions.{j}"] = f"input_blocks.{index}.1"
            index += 1
        if getattr(block, "downsamplers", None):
            prefixes[f"down_blocks.{i}.downsamplers.0.conv"] = f"input_blocks.{index}.0.op"
            index += 1
    index = 0
    for i, block in enumerate(getattr(unet, "up_blocks", [])):
        has_attention = getattr(block, "attentions", None) is not None and len(block.attentions) > 0
        for j in range(len(block.resnets)):
            prefixes[f"up_blocks.{i}.resnets.{j}"] = f"output_blocks.{index}.0"
            if has_attention:
                prefixes[f"up_blocks.{i}.attentions.{j}"] = f"output_blocks.{index}.1"
            index += 1
        if getattr(block, "upsamplers", None):
            slot = 2 if has_attention else 1
            prefixes[f"up_blocks.{i}.upsamplers.0.conv"] = f"output_blocks.{index - 1}.{slot}.conv"
    mid = getattr(unet, "mid_block", None)
    if mid is not None:
        for j in range(len(mid.resnets)):
            prefixes[f"mid_block.resnets.{j}"] = f"middle_block.{2 * j}"
        for j in range(len(getattr(mid, "attentions", None) or [])):
            prefixes[f"mid_block.attentions.{j}"] = f"middle_block.{2 * j + 1}"
    prefixes.update(_TOP_LEVEL_TO_LDM)
    return prefixes


def ldm_name(path: str, prefixes: dict[str, str]) -> str | None:
    """The LDM/SGM path of a diffusers UNet module path, or None if it has no LDM counterpart."""
    match = re.match(r"^((?:down_blocks|up_blocks)\.\d+\.(?:resnets|attentions)\.\d+|mid_block\.(?:resnets|attentions)\.\d+)(?:\.(.*))?$", path)
    if match:
        block, rest = match.group(1), match.group(2)
        if block not in prefixes:
            return None
        if rest and ".resnets." in block:
            rest = _RESNET_TO_LDM.get(rest, rest)
        return prefixes[block] + ("." + rest if rest else "")
    return prefixes.get(path)


class ModelIndex:
    """Lookup tables from every LoRA module naming to the model's modules."""

    def __init__(self, unet: nn.Module, text_encoders: list[nn.Module]) -> None:
        self.unet = unet
        self.text_encoders = list(text_encoders)
        self.components: dict[str, nn.Module] = {UNET: unet}
        for component, encoder in zip((TE1, TE2), self.text_encoders):
            self.components[component] = encoder
        self._by_path: dict[str, dict[str, nn.Module]] = {}
        self._by_flat: dict[str, dict[str, str]] = {}
        for component, root in self.components.items():
            modules = dict(root.named_modules())
            modules.pop("", None)
            if component != UNET and "text_model" not in modules:
                # transformers 5 dropped CLIPTextModel's `text_model.` level; files keep using it.
                modules.update({f"text_model.{path}": module for path, module in list(modules.items())})
            self._by_path[component] = modules
            flat = {path.replace(".", "_"): path for path in modules}
            if component == UNET:
                prefixes = ldm_block_prefixes(unet)
                for path in modules:
                    ldm = ldm_name(path, prefixes)
                    if ldm is not None:
                        flat.setdefault(ldm.replace(".", "_"), path)
            self._by_flat[component] = flat

    def has(self, component: str) -> bool:
        return component in self.components

    def find_flat(self, component: str, flat_name: str) -> TargetModule | None:
        path = self._by_flat.get(component, {}).get(flat_name)
        return None if path is None else TargetModule(component, path, self._by_path[component][path])

    def find_path(self, component: str, path: str) -> TargetModule | None:
        module = self._by_path.get(component, {}).get(path)
        return None if module is None else TargetModule(component, path, module)

    def canonical_path(self, component: str, module: nn.Module) -> str:
        """The module's own `named_modules()` path (not an alias such as an added `text_model.`)."""
        for path, candidate in self.components[component].named_modules():
            if candidate is module:
                return path
        raise KeyError(f"module not part of {component}")

    def family_label(self) -> str:
        """SD 1.x / SD 2.x / SDXL, judged from the model itself (second text encoder, context width)."""
        config = getattr(self.unet, "config", {}) or {}
        get = config.get if hasattr(config, "get") else lambda k, d=None: getattr(config, k, d)
        context = get("cross_attention_dim", None)
        if TE2 in self.components or get("addition_embed_type", None) == "text_time":
            kind = "SDXL"
        elif get("use_linear_projection", False) or context == 1024:
            kind = "SD 2.x"
        else:
            kind = "SD 1.x"
        return f"{kind} (cross-attention dim {context})"
