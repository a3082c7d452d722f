"""LoRA file formats (key naming schemes) as a registry, and detection of a file's format.

A format only says how a key splits into (model component, module name, tensor suffix) and how a
module name is found in the model; the tensor suffixes then say which algorithm family a module
uses (`algorithms`). Detection picks the format that claims the most keys; keys it does not claim
are reported, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mixkit.errors import CheckpointFormatError
from mixkit.lora.comfy_format import find_comfy_module, split_comfy_key
from mixkit.lora.diffusers_format import split_diffusers_key
from mixkit.lora.errors import list_for_humans
from mixkit.lora.kohya import split_kohya_key
from mixkit.lora.model_index import ModelIndex, TargetModule
from mixkit.registry import Registry


@dataclass(frozen=True)
class LoraFormat:
    """A key naming scheme: how to split keys and how to find their modules in a model."""

    name: str
    label: str
    split_key: Callable[[str], tuple[str, str, str] | None]
    find: Callable[[ModelIndex, str, str], TargetModule | None]


LORA_FORMATS: Registry[LoraFormat] = Registry("LoRA format")
LORA_FORMATS.register("kohya", LoraFormat(
    name="kohya", label="kohya / LyCORIS (lora_unet_*, lora_te_*, oft_unet_*)", split_key=split_kohya_key,
    find=lambda index, component, name: index.find_flat(component, name),
))
LORA_FORMATS.register("diffusers", LoraFormat(
    name="diffusers", label="diffusers / PEFT (unet.*, text_encoder.*)", split_key=split_diffusers_key,
    find=lambda index, component, name: index.find_path(component, name),
))

LORA_FORMATS.register("comfyui", LoraFormat(
    name="comfyui", label="ComfyUI (diffusion_model.*, text_encoders.clip_l.*)", split_key=split_comfy_key,
    find=find_comfy_module,
))


def detect_format(keys: list[str], source: str) -> tuple[LoraFormat, dict[str, tuple[str, str, str]]]:
    """The registered format claiming the most keys, with its split of each claimed key.

    CheckpointFormatError if no format claims any key.
    """
    best, best_splits = None, {}
    for name in LORA_FORMATS:
        fmt = LORA_FORMATS.get(name)
        splits = {key: parts for key in keys if (parts := fmt.split_key(key)) is not None}
        if len(splits) > len(best_splits):
            best, best_splits = fmt, splits
    if best is None:
        raise CheckpointFormatError(
            f"{source}: unknown LoRA format: no key follows a known naming ({', '.join(LORA_FORMATS.names())}). "
            f"First keys: {list_for_humans(sorted(keys), 6)}. It may be a full checkpoint or an embedding, not a LoRA."
        )
    return best, best_splits
