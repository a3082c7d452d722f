"""Kohya / LyCORIS naming: `lora_unet_<flat path>.<tensor>`, `lora_te[1|2]_<flat path>.<tensor>`.

The flattened path is a diffusers (SD 1.x/2.x trainers) or an LDM/SGM (SDXL trainers) module path
with dots replaced by underscores; `ModelIndex.find_flat` resolves both. LyCORIS used on a bare
module writes `lycoris_<flat path>`; A1111 treats those as UNet modules and so do we, as it does kohya's
`oft_unet_<flat path>`.
"""

from __future__ import annotations

from mixkit.lora.model_index import TE1, TE2, UNET

# Longest prefixes first: `lora_te1_` must not be read as `lora_te_` + `1_...`.
# kohya's own OFT network (sd-scripts `networks/oft.py`, OFT_PREFIX_UNET) names its UNet modules `oft_unet_`; A1111's
# `load_network` reads them as UNet modules ("kohya_ss OFT module"), and so do we.
KOHYA_PREFIXES = (("lora_te1_", TE1), ("lora_te2_", TE2), ("lora_te_", TE1), ("lora_unet_", UNET), ("lycoris_", UNET),
                  ("oft_unet_", UNET))


def split_kohya_key(key: str) -> tuple[str, str, str] | None:
    """`lora_unet_x_y.lora_down.weight` -> ("unet", "x_y", "lora_down.weight"); None if not kohya."""
    module_name, dot, suffix = key.partition(".")
    if not dot:
        return None
    for prefix, component in KOHYA_PREFIXES:
        if module_name.startswith(prefix) and len(module_name) > len(prefix):
            return component, module_name[len(prefix):], suffix
    return None


def kohya_module_name(component: str, flat_name: str, *, two_text_encoders: bool) -> str:
    """The kohya module name of a component's flat path: `lora_te_` for the one text encoder of SD 1.x/2.x
    (kohya's sd-scripts build exactly that name and skip others), `lora_te1_`/`lora_te2_` for SDXL's two."""
    if component == TE1 and not two_text_encoders:
        return "lora_te_" + flat_name
    prefix = {UNET: "lora_unet_", TE1: "lora_te1_", TE2: "lora_te2_"}[component]
    return prefix + flat_name
