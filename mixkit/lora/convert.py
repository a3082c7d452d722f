"""Convert LoRA files between kohya naming (A1111, ComfyUI) and diffusers/PEFT naming.

kohya names SD 1.x/2.x UNet modules by their flattened diffusers paths, but SDXL UNet modules by
their original SGM paths (`lora_unet_input_blocks_4_1_proj_in`: kohya's `sdxl_train_network` builds
Stability's UNet, and A1111, ComfyUI and Civitai files use those names), so SDXL kohya output
takes the SGM names too, from the model's own block layout (`model_index.ldm_name`, the map
mixkit's loader and trainer use).

Only plain low-rank LoRA modules exist in both worlds: LoHa, LoKr, IA3, full, norm, Tucker LoCon
and DoRA have no PEFT LoRA equivalent, so converting them to diffusers is refused with the list
of modules, never approximated. Alphas are carried exactly: kohya keeps one `.alpha` per module,
PEFT a default `lora_alpha` plus an `alpha_pattern` of exact module paths.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch

from mixkit.io.atomic import atomic_output_path
from mixkit.lora.bundled_embeddings import bundled_embedding_tensors
from mixkit.lora.diffusers_format import METADATA_KEY
from mixkit.lora.errors import LoraMismatchError, list_for_humans
from mixkit.lora.kohya import kohya_module_name
from mixkit.lora.lora_file import LoraFile, LoraModule, load_lora
from mixkit.lora.matching import guess_base_model
from mixkit.lora.model_index import TE1, TE2, UNET, ModelIndex, ldm_block_prefixes, ldm_name
from mixkit.registry import Registry

_DIFFUSERS_PREFIX = {UNET: "unet", TE1: "text_encoder", TE2: "text_encoder_2"}


def _kohya_flat_name(module: LoraModule) -> str:
    if module.component != UNET and not module.name.startswith(("text_model.", "text_model_")):
        return "text_model_" + module.name.replace(".", "_")
    return module.name.replace(".", "_")


def _has_two_text_encoders(lora: LoraFile, index: ModelIndex | None) -> bool:
    """SDXL naming (`lora_te1_`) when the model given has a second text encoder, else when the file looks SDXL."""
    if index is not None:
        return index.has(TE2)
    return any(m.component == TE2 for m in lora.modules) or guess_base_model(lora) == "SDXL"


# The first part of every SGM (original SDXL) UNet module path; diffusers paths start otherwise.
_SGM_ROOTS = ("input_blocks_", "middle_block_", "output_blocks_", "time_embed_", "label_emb_", "out_")


def _sgm_flat_names(lora: LoraFile, index: ModelIndex | None) -> dict[str, str]:
    """module name -> its flattened SGM path, for every UNet module of an SDXL LoRA.

    Names that already are SGM paths (a kohya SDXL file) stay; the others are found in the model
    and renamed from its block layout, which only the model knows (SD 1.x-style numbering differs
    with the number of resnets per block), so they need `index`.
    """
    names, pending = {}, []
    for module in lora.modules:
        if module.component != UNET:
            continue
        if lora.format.name == "kohya" and module.name.startswith(_SGM_ROOTS):
            names[module.name] = module.name
        else:
            pending.append(module)
    if pending and index is None:
        raise ValueError(
            f"{lora.path}: kohya names SDXL UNet modules by their SGM paths (lora_unet_input_blocks_4_1_...), and "
            f"mapping {len(pending)} diffusers-named module(s) (e.g. {pending[0].name}) to them needs the model's "
            "block layout; pass --model DIR (in Python: index=ModelIndex(unet, text_encoders))."
        )
    if pending:
        prefixes = ldm_block_prefixes(index.unet)
        for module in pending:
            target = lora.format.find(index, UNET, module.name)
            if target is None:
                raise LoraMismatchError(f"{lora.path}: module {module.weights.keys[0]} matches no module of the given "
                                        "model; pass the model the LoRA was made for.", [module.weights.keys[0]])
            sgm = ldm_name(index.canonical_path(UNET, target.module), prefixes)
            if sgm is None:
                raise ValueError(f"{lora.path}: UNet module {module.name} has no SGM (original SDXL) name; "
                                 "convert it with --to diffusers instead.")
            names[module.name] = sgm.replace(".", "_")
    return names


def to_kohya(lora: LoraFile, index: ModelIndex | None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Kohya keys for every module: diffusers paths become `lora_unet_<path_with_underscores>` on SD 1.x/2.x,
    SGM paths (`lora_unet_input_blocks_...`) on SDXL, as kohya's trainers write them."""
    tensors: dict[str, torch.Tensor] = {}
    sdxl = _has_two_text_encoders(lora, index)
    sgm = _sgm_flat_names(lora, index) if sdxl else {}
    for module in lora.modules:
        flat = sgm[module.name] if module.component == UNET and sdxl else _kohya_flat_name(module)
        name = kohya_module_name(module.component, flat, two_text_encoders=sdxl)
        for suffix, tensor in module.weights.tensors.items():
            tensors[f"{name}.{suffix}"] = tensor
        rank = module.weights.rank()
        if rank is not None:
            alpha = module.weights.alpha if module.weights.alpha is not None else float(rank)
            tensors[f"{name}.alpha"] = torch.tensor(float(alpha))
        if module.weights.dora_scale is not None:
            tensors[f"{name}.dora_scale"] = module.weights.dora_scale
        if "lora_up.bias" in module.weights.tensors:
            raise ValueError(f"{lora.path}: {module.name} has a LoRA bias (PEFT's lora_bias, `lora_B.bias`), which "
                             "kohya files cannot express (A1111 and ComfyUI would drop it); keep the file in diffusers "
                             "format (mixkit and diffusers read it)")
        if module.weights.peft_magnitude is not None:
            raise ValueError(f"{lora.path}: {module.name} is DoRA in PEFT's form (lora_magnitude_vector), which kohya "
                             "files cannot express (LyCORIS's dora_scale applies the strength differently); keep the "
                             "file in diffusers format (mixkit and diffusers read it)")
    metadata = {k: v for k, v in lora.metadata.raw.items() if k != METADATA_KEY}
    return tensors, metadata


def to_diffusers(lora: LoraFile, index: ModelIndex | None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """PEFT keys + `lora_adapter_metadata`; kohya names need the model to recover dotted paths."""
    blocked = [m.weights.keys[0].split(".")[0] for m in lora.modules
               if m.weights.family != "lora" or m.weights.is_dora or "lora_mid.weight" in m.weights.tensors]
    if blocked:
        raise ValueError(
            f"{lora.path}: {len(blocked)} module(s) are not plain LoRA and have no diffusers/PEFT form: "
            f"{list_for_humans(blocked)}. Keep this file in kohya format (A1111, ComfyUI and mixkit read it)."
        )
    if lora.format.name != "diffusers" and index is None:
        raise ValueError(
            f"{lora.path}: converting kohya names to diffusers paths needs the base model "
            "(underscores in names are ambiguous); pass --model DIR."
        )
    tensors: dict[str, torch.Tensor] = {}
    per_component: dict[str, list[tuple[str, int, float]]] = {}
    for module in lora.modules:
        if lora.format.name == "diffusers":
            path = module.name
        else:
            target = lora.format.find(index, module.component, module.name)
            if target is None:
                raise LoraMismatchError(f"{lora.path}: module {module.weights.keys[0]} matches no module of the given model.",
                                        [module.weights.keys[0]])
            path = index.canonical_path(module.component, target.module)
        prefix = _DIFFUSERS_PREFIX[module.component]
        down, up = module.weights.tensors["lora_down.weight"], module.weights.tensors["lora_up.weight"]
        tensors[f"{prefix}.{path}.lora_A.weight"] = down
        tensors[f"{prefix}.{path}.lora_B.weight"] = up
        if "lora_up.bias" in module.weights.tensors:  # diffusers infers PEFT's lora_bias from these keys
            tensors[f"{prefix}.{path}.lora_B.bias"] = module.weights.tensors["lora_up.bias"]
        rank = int(down.shape[0])
        alpha = module.weights.alpha if module.weights.alpha is not None else float(rank)
        per_component.setdefault(prefix, []).append((path, rank, alpha))
    adapter: dict[str, object] = {}
    for prefix, entries in per_component.items():
        rank = Counter(r for _, r, _ in entries).most_common(1)[0][0]
        alpha = Counter(a for _, _, a in entries).most_common(1)[0][0]
        adapter[f"{prefix}.r"] = rank
        adapter[f"{prefix}.lora_alpha"] = alpha
        # PEFT reads pattern keys as regexes matched at the end of module paths; full paths are exact enough.
        adapter[f"{prefix}.rank_pattern"] = {p: r for p, r, _ in entries if r != rank}
        adapter[f"{prefix}.alpha_pattern"] = {p: a for p, _, a in entries if a != alpha}
        adapter[f"{prefix}.target_modules"] = sorted(p for p, _, _ in entries)
    metadata = {k: v for k, v in lora.metadata.raw.items() if k != METADATA_KEY}
    metadata[METADATA_KEY] = json.dumps(adapter, sort_keys=True)
    return tensors, metadata


LORA_CONVERTERS: Registry = Registry("LoRA output format")
LORA_CONVERTERS.register("kohya", to_kohya)
LORA_CONVERTERS.register("diffusers", to_diffusers)


def convert_lora(source: str | Path, to: str, output: str | Path, index: ModelIndex | None = None) -> Path:
    """Write `source` in format `to` at `output` (atomic: a temp file renamed into place)."""
    from safetensors.torch import save_file

    converter = LORA_CONVERTERS.get(to)
    output = Path(output)
    if output.suffix.lower() != ".safetensors":
        raise ValueError(f"output {output} must end in .safetensors (converted LoRAs are always written as safetensors)")
    if output.resolve() == Path(source).resolve():
        raise ValueError(f"output {output} is the input file; choose another path")
    lora = load_lora(source)
    if lora.unclaimed_keys:
        raise LoraMismatchError(f"{lora.path}: keys that cannot be converted: {list_for_humans(lora.unclaimed_keys)}",
                                lora.unclaimed_keys)
    tensors, metadata = converter(lora, index)
    for word, embedding in lora.embeddings.items():  # bundled trigger words travel with either layout
        tensors.update(bundled_embedding_tensors(word, embedding.vectors))
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(output) as temp:  # readable like any saved file (0644), never half-written
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(temp), metadata=metadata)
    return output
