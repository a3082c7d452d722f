"""Text encoders in the LDM/SGM single-file layout: OpenAI CLIP as-is, OpenCLIP with fused attention.

* SD 1.x (`cond_stage_model.transformer.`) and SDXL's first encoder
  (`conditioner.embedders.0.transformer.`) store the transformers `CLIPTextModel` keys unchanged.
* SD 2.x (`cond_stage_model.model.`), SDXL's second encoder (`conditioner.embedders.1.model.`) and the SDXL
  refiner's only one (`conditioner.embedders.0.model.`)
  store OpenCLIP's own module names: `transformer.resblocks.N.attn.in_proj_weight` holds q, k and
  v stacked along dim 0, `ln_1/ln_2/mlp.c_fc/mlp.c_proj`, `positional_embedding` as a bare tensor,
  and `text_projection` as a (width, embed) matrix used as `x @ P`, i.e. the transposed Linear.
Sizes are read from the tensors, so tiny test encoders convert like full-size ones.
"""

from __future__ import annotations

import torch

CLIP_PREFIX_SD1 = "cond_stage_model.transformer."
CLIP_PREFIX_SDXL = "conditioner.embedders.0.transformer."
OPEN_CLIP_PREFIX_SD2 = "cond_stage_model.model."
OPEN_CLIP_PREFIX_SDXL = "conditioner.embedders.1.model."
OPEN_CLIP_PREFIX_SDXL_REFINER = "conditioner.embedders.0.model."  # the refiner's only embedder: SDXL's second

_OPEN_CLIP_LAYER_RENAMES = {
    "layer_norm1.": "ln_1.", "layer_norm2.": "ln_2.", "mlp.fc1.": "mlp.c_fc.", "mlp.fc2.": "mlp.c_proj.",
    "self_attn.out_proj.": "attn.out_proj.",
}
_OPEN_CLIP_TOP_LEVEL = {
    "text_model.embeddings.token_embedding.weight": "token_embedding.weight",
    "text_model.embeddings.position_embedding.weight": "positional_embedding",
    "text_model.final_layer_norm.weight": "ln_final.weight",
    "text_model.final_layer_norm.bias": "ln_final.bias",
}
_LAYERS = "text_model.encoder.layers."


def canonical_clip_state(text_encoder) -> dict[str, torch.Tensor]:
    """The encoder's parameters named as on disk (`text_model.*`, `text_projection.weight`).

    transformers 5 dropped the `text_model.` level inside `CLIPTextModel` (its checkpoints are
    renamed on load), while files and `CLIPTextModelWithProjection` keep it; LDM files follow the
    on-disk names, so we always convert through them.
    """
    state = text_encoder.state_dict()
    if any(key.startswith("text_model.") for key in state):
        return state
    return {"text_model." + key: tensor for key, tensor in state.items()}


def to_module_keys(canonical: dict[str, torch.Tensor], text_encoder) -> dict[str, torch.Tensor]:
    """Inverse of `canonical_clip_state`: on-disk names to this transformers version's module names."""
    if any(key.startswith("text_model.") for key in text_encoder.state_dict()):
        return canonical
    return {key.removeprefix("text_model."): tensor for key, tensor in canonical.items()}


def clip_to_ldm(text_encoder, prefix: str) -> dict[str, torch.Tensor]:
    """A transformers CLIP text encoder's parameters under an LDM prefix (on-disk names)."""
    return {prefix + key: tensor for key, tensor in canonical_clip_state(text_encoder).items()}


def open_clip_to_ldm(text_encoder, prefix: str) -> dict[str, torch.Tensor]:
    """A transformers CLIP text encoder (with or without projection) in OpenCLIP's layout."""
    state = canonical_clip_state(text_encoder)
    out: dict[str, torch.Tensor] = {}
    fused: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        if key in _OPEN_CLIP_TOP_LEVEL:
            out[prefix + _OPEN_CLIP_TOP_LEVEL[key]] = tensor
        elif key == "text_projection.weight":
            out[prefix + "text_projection"] = tensor.T.contiguous()
        elif key.startswith(_LAYERS):
            layer, rest = key[len(_LAYERS):].split(".", 1)
            base = f"{prefix}transformer.resblocks.{layer}."
            if rest.startswith("self_attn.") and rest.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                _, proj, kind = rest.split(".")
                fused.setdefault(f"{base}attn.in_proj_{kind}", {})[proj] = tensor
                continue
            old = next((o for o in _OPEN_CLIP_LAYER_RENAMES if rest.startswith(o)), None)
            if old is None:
                raise ValueError(f"No OpenCLIP location known for text encoder parameter {key!r}")
            out[base + _OPEN_CLIP_LAYER_RENAMES[old] + rest[len(old):]] = tensor
        else:
            raise ValueError(f"No OpenCLIP location known for text encoder parameter {key!r}")
    for key, parts in fused.items():
        out[key] = torch.cat([parts["q_proj"], parts["k_proj"], parts["v_proj"]], dim=0)
    return out

