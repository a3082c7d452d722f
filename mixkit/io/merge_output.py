"""Writing a merged checkpoint: the baked-in VAE, the file itself (atomically) and the `.yaml` config beside it."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

VAE_PREFIX = "first_stage_model."
# A1111's load_vae_dict drops the training loss and EMA counters a VAE checkpoint may carry.
VAE_IGNORED_KEYS = frozenset({"model_ema.decay", "model_ema.num_updates"})


def bake_vae(tensors: dict, vae_path: Path) -> None:
    """Replace the checkpoint's `first_stage_model.*` weights with the VAE file's (A1111's "Bake in VAE")."""
    from mixkit.io.loading import load_state_dict

    vae = {key: value for key, value in load_state_dict(vae_path).items()
           if not key.startswith("loss") and key not in VAE_IGNORED_KEYS}
    matched = [key for key in vae if VAE_PREFIX + key in tensors]
    if not matched:
        raise ValueError(f"VAE file {str(vae_path)!r} has no key the merged checkpoint's first_stage_model has "
                         f"(its keys look like {sorted(vae)[:3]!r}); bake in an LDM-format VAE (encoder.*, decoder.* "
                         "keys, as A1111's VAE files) of the same architecture.")
    for key in matched:
        if tuple(vae[key].shape) != tuple(tensors[VAE_PREFIX + key].shape):
            raise ValueError(f"VAE file {str(vae_path)!r}: {key!r} has shape {list(vae[key].shape)} but the "
                             f"checkpoint's is {list(tensors[VAE_PREFIX + key].shape)}; the VAE is for another "
                             "architecture. Nothing was written.")
    for key in matched:
        tensors[VAE_PREFIX + key] = vae[key]


def save_merged(tensors: dict, target: Path, checkpoint_format: str, metadata: dict[str, str] | None) -> None:
    """Write the merged state dict as safetensors (with `metadata`) or as a flat torch.save `.ckpt` (A1111's), through
    a temporary file renamed into place: a failed write leaves no half file and an older file of that name intact."""
    from mixkit.io.atomic import atomic_output_path
    from mixkit.io.saving import save_safetensors

    _check_free_space(tensors, target)
    # A tensor viewing a larger storage (keys of a .ckpt sharing one, tied weights) would be refused by safetensors
    # and would make torch.save write the whole storage again for each key: each is written as its own copy.
    owned = {key: value.clone() if _shares_storage(value) else value for key, value in tensors.items()}
    if checkpoint_format == "safetensors":
        save_safetensors(owned, target, metadata)
        return
    import torch

    with atomic_output_path(target) as temp:
        torch.save(owned, temp)


def _check_free_space(tensors: dict, target: Path) -> None:
    """CheckpointWriteError (an OSError, ENOSPC) before writing when the folder cannot hold the tensors: a full disk
    otherwise surfaced after the whole merge as safetensors' "I/O error" or torch.save's "unexpected pos 832 vs 726"."""
    needed = sum(value.numel() * value.element_size() for value in tensors.values())
    free = shutil.disk_usage(target.parent).free
    if needed > free:
        from mixkit.io.atomic import CheckpointWriteError

        raise CheckpointWriteError(errno.ENOSPC, f"The merged checkpoint needs {_size(needed)} but "
                                   f"{str(target.parent)!r} has {_size(free)} free; nothing was written. Free some "
                                   "space, choose another folder, or save as float16.")


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _shares_storage(tensor) -> bool:
    """Whether the tensor is a view of a storage holding more than its own values."""
    return tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size()


def copy_config(target: Path, config_source: str, sources_by_role: tuple) -> Path | None:
    """Copy the `.yaml` beside A, B or C (A1111's "Copy config from") beside the merged file."""
    a, b, c = sources_by_role
    candidates = {"A, B or C": [a, b, c], "B": [b], "C": [c], "Don't": []}[config_source]
    for source in candidates:
        config = source.path.with_suffix(".yaml") if source is not None else None
        if config is not None and config.is_file():
            from mixkit.io.atomic import atomic_output_path

            destination = target.with_suffix(".yaml")
            with atomic_output_path(destination) as temp:
                shutil.copyfile(config, temp)
            return destination
    return None
