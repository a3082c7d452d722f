"""Start a LoRA run from an existing kohya LoRA file (kohya's --network_weights): continue a LoRA with new images,
more steps or other settings, where resume_from would repeat the old run's own schedule and optimizer state.

The file must fit the run's network: every module it adapts must exist in it with the same rank and alpha
(so `ss_network_dim` / `ss_network_alpha` stay true of the new file); modules the file lacks start fresh, as
kohya's non-strict load leaves them. Anything else is refused before the adapters touch the model.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

ADAPTER_TENSORS = ("lora_down.weight", "lora_up.weight", "alpha")
DORA_TENSOR = "dora_scale"  # LyCORIS's DoRA magnitude, in the files of dora_wd runs


def _file_modules(tensors: dict[str, torch.Tensor], path: Path, sgm_to_diffusers: dict[str, str]) -> dict:
    """{module name in the network's layout: {tensor suffix: tensor}}; refuses anything but plain LoRA tensors."""
    modules: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        module, _, suffix = key.partition(".")
        if key.startswith("bundle_emb."):
            raise ValueError(f"network_weights: {path} carries trained word vectors ({key}); starting from them is not "
                             "supported: continue from a file without word vectors, or resume the run that wrote it "
                             "(resume_from)")
        if suffix not in (*ADAPTER_TENSORS, DORA_TENSOR):
            raise ValueError(f"network_weights: {path} is not a kohya LoRA/LoCon file (tensor {key!r}); a run can "
                             "start only from the LoRA tensors lora_down, lora_up and alpha (and DoRA's dora_scale)")
        modules.setdefault(sgm_to_diffusers.get(module, module), {})[suffix] = tensor
    return modules


def load_network_weights(network, path: str | Path, *, unet=None, sdxl: bool = False) -> int:
    """Copy the adapters of the kohya file at `path` into `network` (not yet attached); returns how many.

    SDXL files in the SGM layout (kohya's and this trainer's default) are renamed back with the model's own map."""
    from mixkit.lora.reading import read_lora_file

    path = Path(path)
    sgm_to_diffusers = {}
    if sdxl:
        from mixkit.training.kohya_export import sgm_lora_names

        sgm_to_diffusers = {sgm: flat for flat, sgm in sgm_lora_names(unet).items()}
    modules = _file_modules(read_lora_file(path).tensors, path, sgm_to_diffusers)
    for name, parts in modules.items():
        adapter = network.adapters[name] if name in network.adapters else None
        if adapter is None:
            hint = ("set train_text_encoder: true" if name.startswith("lora_te") else
                    "set train_unet: true (this run trains the text encoder's adapters alone)"
                    if not any(n.startswith("lora_unet") for n in network.adapters) else
                    "use the network it was trained with (network: locon adapts 3x3 convolutions; cross-kv fewer layers)")
            raise ValueError(f"network_weights: {path} adapts {name}, which this run's network does not; {hint}")
        missing = [suffix for suffix in ADAPTER_TENSORS if suffix not in parts]
        if missing:
            raise ValueError(f"network_weights: {path} lacks {name}.{missing[0]}; the file is incomplete")
        down = parts["lora_down.weight"]
        if down.shape != adapter.lora_down.weight.shape or parts["lora_up.weight"].shape != adapter.lora_up.weight.shape:
            raise ValueError(f"network_weights: {path} has rank {down.shape[0]} at {name}, this run {adapter.rank}; "
                             f"set {'conv_rank' if down.ndim == 4 and down.shape[-1] > 1 else 'rank'}: {down.shape[0]} "
                             "(the file's ss_network_dim / conv_dim)")
        # A DoRA magnitude has no plain-LoRA equivalent either way: dropping it or inventing one changes the model.
        if (DORA_TENSOR in parts) != network.dora:
            raise ValueError(f"network_weights: {path} is a {'DoRA' if DORA_TENSOR in parts else 'plain LoRA'} file "
                             f"({name} {'has' if DORA_TENSOR in parts else 'lacks'} dora_scale) and this run trains "
                             f"{'DoRA' if network.dora else 'plain LoRA'}; set dora_wd: "
                             f"{'true' if DORA_TENSOR in parts else 'false'} to continue it")
        if DORA_TENSOR in parts and parts[DORA_TENSOR].numel() != adapter.dora_scale.numel():
            raise ValueError(f"network_weights: {path} has a dora_scale of shape {list(parts[DORA_TENSOR].shape)} at "
                             f"{name}, this layer {list(adapter.dora_scale.shape)}; the file is for another model")
        if float(parts["alpha"]) != float(adapter.alpha):
            raise ValueError(f"network_weights: {path} has alpha {float(parts['alpha']):g} at {name}, this run "
                             f"{float(adapter.alpha):g}; set the alpha the file was trained with")
    with torch.no_grad():
        for name, parts in modules.items():
            adapter = network.adapters[name]
            adapter.lora_down.weight.copy_(parts["lora_down.weight"])
            adapter.lora_up.weight.copy_(parts["lora_up.weight"])
            if DORA_TENSOR in parts:
                adapter.dora_scale.copy_(parts[DORA_TENSOR].reshape(adapter.dora_scale.shape))
    fresh = len(network.adapters) - len(modules)
    logger.info("Started from %s: %d adapters loaded%s", path, len(modules),
                f", {fresh} not in the file start fresh" if fresh else "")
    return len(modules)
