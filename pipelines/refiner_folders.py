"""A refiner given as a diffusers folder: complete enough to load, checked before any model runs.

The refiner loads only when a batch reaches its switch (`pipelines.refiner`), after the call's checks and, in a
hires fix whose second pass it finishes, after the first pass has sampled. A folder that cannot become a model (a copy
of configs without weights, kept as a single-file refiner's `refiner_config_dir`; a download missing its UNet or
VAE weights or its text encoder) was refused only then, by the loader, whose message ("re-download the unet/
folder") said neither that the folder was the refiner nor that a config folder is no refiner. So the call's check
(`check_refiner_params`) looks at the folder's files, without reading any weights, and names everything missing at
once.

What is required is what the loader (`mixkit.models.diffusion.diffusers_folder`) reads: `model_index.json`; the
unet/, vae/ and scheduler/ configs; text_encoder/ + tokenizer/ and/or text_encoder_2/ + tokenizer_2/ (an SDXL
refiner has only the second pair); weights in unet/, vae/ and every text encoder folder.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.models.diffusion.diffusers_folder import DIFFUSERS_WEIGHTS, TRANSFORMERS_WEIGHTS, weight_variants

CONFIG_FILES = ("model_index.json", "unet/config.json", "vae/config.json", "scheduler/scheduler_config.json")
TEXT_PAIRS = (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2"))
WEIGHT_PARTS = {"unet": DIFFUSERS_WEIGHTS, "vae": DIFFUSERS_WEIGHTS, "text_encoder": TRANSFORMERS_WEIGHTS,
                "text_encoder_2": TRANSFORMERS_WEIGHTS}


def missing_refiner_parts(folder: Path) -> tuple[list[str], list[str]]:
    """(the configs and folders, the weights) `folder` lacks to be loaded as a model, from its file names."""
    configs = [name for name in CONFIG_FILES if not (folder / name).is_file()]
    encoders = [encoder for encoder, _ in TEXT_PAIRS if (folder / encoder).is_dir()]
    if not encoders:
        configs.append("a text encoder (text_encoder/, or text_encoder_2/ for an SDXL refiner)")
    configs += [f"{tokenizer}/ (next to {encoder}/)" for encoder, tokenizer in TEXT_PAIRS
                if encoder in encoders and not (folder / tokenizer).is_dir()]
    weights = [f"{part}/ weights ({WEIGHT_PARTS[part][0]}.safetensors)" for part in ("unet", "vae", *encoders)
               if not _has_weights(folder / part, WEIGHT_PARTS[part])]
    return configs, weights


def holds_no_weights(folder: Path) -> bool:
    """Whether none of `folder`'s component folders holds weights the loader reads: a copy of configs."""
    return not any(_has_weights(folder / part, stems) for part, stems in WEIGHT_PARTS.items())


def check_refiner_folder(refiner) -> None:
    """ValueError naming the folder and each part it lacks when `refiner` (a checked refiner source) is a local
    folder the loader cannot make a model of; a config-only folder is told apart, with where it does belong."""
    if not isinstance(refiner, str) and not hasattr(refiner, "__fspath__"):
        return  # a loaded model
    folder = Path(refiner).expanduser()
    if not folder.is_dir():
        return  # a single file (`pipelines.refiner_configs`) or a hub id (the loader's download checks it)
    configs, weights = missing_refiner_parts(folder)
    if holds_no_weights(folder):
        also = f"; it also lacks {', '.join(configs)}" if configs else ""
        raise ValueError(f"refiner {str(refiner)!r} holds configs only (no weights), so it cannot be the refiner: "
                         "give a checkpoint (a .safetensors / .ckpt file, or a diffusers folder with its weights). A "
                         "folder of configs serves as the refiner_config_dir of a single-file refiner of its "
                         f"architecture (the web UI's Refiner > Config folder){also}.")
    if configs or weights:
        raise ValueError(f"refiner {str(refiner)!r} is a diffusers folder without the parts a refiner is loaded "
                         f"from: it lacks {', '.join(configs + weights)}. Re-download or complete the folder, or give "
                         "the refiner as a .safetensors / .ckpt checkpoint.")


def _has_weights(part: Path, stems: tuple[str, ...]) -> bool:
    names = [entry.name for entry in part.iterdir() if entry.is_file()] if part.is_dir() else []
    return bool(weight_variants(names, stems))
