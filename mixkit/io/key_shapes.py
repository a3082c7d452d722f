"""A checkpoint's tensor names and shapes without its weights: what a family or layout check needs before a load.

A `.safetensors` file states them in its header (`safetensors_header`, no tensor byte read). A pickled `.ckpt` /
`.pt` / `.bin` has no header: it is unpickled by mixkit's one safe reader (`loading.load_state_dict`: the globals
scan, then `torch.load(weights_only=True)`, never a plain pickle load) onto the meta device, where every tensor keeps
its shape and no storage is filled. For a zip archive (torch.save's format since torch 1.6, that of SD's `.ckpt`
releases) that reads only the archive's small `data.pkl`; a legacy (pre-zip) stream is walked to its end, but
nothing is kept.
A1111 `.ckpt` files nest their weights under "state_dict"; the names are the flattened ones the loaders see.
"""

from __future__ import annotations

import os


def checkpoint_shapes(path: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of a checkpoint file, read without loading its weights. The loaders' own errors for a
    file that is no checkpoint, truncated, or a pickle that imports code (UnsafeCheckpointError naming the global)."""
    from mixkit.io.formats import check_checkpoint_file, detect_checkpoint_format

    file = check_checkpoint_file(path)
    if detect_checkpoint_format(file) == "safetensors":
        from mixkit.io.safetensors_header import read_safetensors_header, tensor_entries

        return {name: tuple(entry["shape"]) for name, entry in tensor_entries(read_safetensors_header(file)).items()}
    from mixkit.io.loading import load_state_dict

    return {name: tuple(tensor.shape) for name, tensor in load_state_dict(file, device="meta").items()}
