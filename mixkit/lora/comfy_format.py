"""ComfyUI naming: `diffusion_model.<LDM path>.lora_up.weight`, `text_encoders.clip_l.transformer.<path>.<tensor>`.

ComfyUI's LoRA extraction and save nodes (`comfy_extras/nodes_lora_extract.py`) write the model's own
state-dict names with the LoRA tensor suffix appended: the UNet by its original LDM/SGM path under
`diffusion_model.`, the text encoders as `text_encoders.` + ComfyUI's CLIP key (`clip_l.transformer.text_model...`,
`clip_g....` for SDXL's second encoder, `clip_h....` for SD 2.x's one). ComfyUI's loader maps them back
(`model_lora_keys_unet` / `model_lora_keys_clip`, its "generic lora format"). The suffixes are kohya's (the
vocabulary of `algorithms`), so only the prefix and the dotted path are new; `ModelIndex` already resolves
LDM paths.
"""

from __future__ import annotations

from mixkit.lora.model_index import TE1, TE2, UNET, ModelIndex, TargetModule

UNET_PREFIX = "diffusion_model."
# ComfyUI's CLIP names: clip_l is SD 1.x's and SDXL's first encoder, clip_g SDXL's second, clip_h SD 2.x's only one.
TEXT_ENCODER_PREFIXES = (("text_encoders.clip_l.transformer.", TE1), ("text_encoders.clip_g.transformer.", TE2),
                         ("text_encoders.clip_h.transformer.", TE1))


def _tensor_suffixes() -> tuple[str, ...]:
    """Every tensor name a LoRA family reads, longest first (`lora_up.weight` before `weight`).

    IA3's bare `weight` is left out: `diffusion_model.<path>.weight` is a full checkpoint's key, which must stay
    reported as "not a LoRA" rather than read as IA3 (ComfyUI writes no IA3 files)."""
    from mixkit.lora.algorithms import LORA_ALGORITHMS, SHARED_KEYS

    keys = {key for name in LORA_ALGORITHMS for key in LORA_ALGORITHMS.get(name).known_keys} | set(SHARED_KEYS)
    keys -= {"weight", "on_input"}
    return tuple(sorted(keys, key=len, reverse=True))


def split_comfy_key(key: str) -> tuple[str, str, str] | None:
    """`diffusion_model.input_blocks.1.1.proj_in.lora_up.weight` -> ("unet", "input_blocks.1.1.proj_in",
    "lora_up.weight"); None if not ComfyUI naming."""
    if key.startswith(UNET_PREFIX):
        component, rest = UNET, key[len(UNET_PREFIX):]
    else:
        match = next(((prefix, part) for prefix, part in TEXT_ENCODER_PREFIXES if key.startswith(prefix)), None)
        if match is None:
            return None
        component, rest = match[1], key[len(match[0]):]
    for suffix in _tensor_suffixes():
        if rest.endswith("." + suffix) and len(rest) > len(suffix) + 1:
            return component, rest[: -len(suffix) - 1], suffix
    return None


def find_comfy_module(index: ModelIndex, component: str, path: str) -> TargetModule | None:
    """UNet modules by their LDM/SGM path (ComfyUI's own model layout), text-encoder modules by their HF path."""
    if component == UNET:
        return index.find_flat(component, path.replace(".", "_"))
    return index.find_path(component, path)
