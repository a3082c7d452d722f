"""Writing a trained embedding: kohya's `.safetensors` (`emb_params`, or SDXL's `clip_l` + `clip_g`) with SAI's model
spec, or A1111's `.pt`; both read by mixkit's embeddings folder, A1111, ComfyUI and kohya's `--weights`."""

from __future__ import annotations

from pathlib import Path

import torch

from mixkit.training.modelspec import STABILITY_IMPLEMENTATION, ModelSpecTexts, lora_modelspec
from mixkit.training.output_path import check_output_path
from mixkit.training.ti_config import EMBEDDING_SUFFIXES

# A1111's Embedding.save writes this token id under its one key "*" (the id of "*" in SD 1.x's CLIP vocabulary); its
# loader ignores it, but writers keep it so older readers find what they expect.
A1111_STRING_TO_TOKEN = {"*": 265}


def check_embedding_output(output: str | Path) -> None:
    """Refuse, before any training, an output the embedding file cannot become (a folder, another suffix, a folder
    that cannot be created or written): finding out when the finished run writes it would lose the run."""
    path = Path(output).expanduser().absolute()
    if path.suffix.lower() not in EMBEDDING_SUFFIXES and not path.is_dir():
        raise ValueError(f"output {str(path)!r} must end in .safetensors (kohya's embedding file) or .pt (A1111's); "
                         f"try {str(path.with_suffix('.safetensors'))!r}")
    # check_output_path covers the folder cases; it knows only .safetensors, which a .pt name stands in for.
    check_output_path(path.with_suffix(".safetensors") if path.suffix.lower() == ".pt" else path,
                      "embedding file", "my_embedding.safetensors")


def embedding_modelspec(*, family: str, v_prediction: bool, title: str, resolution, timestamp: float,
                        texts: ModelSpecTexts, clip_skip: int, version: str) -> dict[str, str]:
    """The `modelspec.*` keys kohya's textual-inversion trainers write: a LoRA's, with the architecture's adapter part
    `textual-inversion` and Stability AI's implementation for every family (kohya's `determine_implementation`)."""
    spec = lora_modelspec(family=family, v_prediction=v_prediction, title=title, resolution=resolution,
                          timestamp=timestamp, texts=texts, clip_skip=clip_skip, version=version)
    spec["modelspec.architecture"] = spec["modelspec.architecture"].rsplit("/", 1)[0] + "/textual-inversion"
    spec["modelspec.implementation"] = STABILITY_IMPLEMENTATION
    return spec


def save_embedding(tensors: dict[str, torch.Tensor], path: str | Path, *, metadata: dict[str, str], name: str,
                   step: int, checkpoint_name: str) -> Path:
    """Write the file atomically, in the format its suffix names. A1111's `.pt` keeps one encoder's vectors as
    `string_to_param["*"]` with its `name`, `step` and `sd_checkpoint_name` (what /sdapi/v1/embeddings reports); an
    SDXL `.pt` holds `clip_l` and `clip_g`, as kohya's SDXL trainer writes it."""
    from mixkit.io.atomic import atomic_output_path
    from mixkit.io.saving import save_safetensors

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".safetensors":
        save_safetensors(tensors, path, metadata)
        return path
    if "emb_params" in tensors:
        data = {"string_to_token": dict(A1111_STRING_TO_TOKEN), "string_to_param": {"*": tensors["emb_params"]},
                "name": name, "step": step, "sd_checkpoint": None, "sd_checkpoint_name": checkpoint_name}
    else:
        data = dict(tensors)
    with atomic_output_path(path) as temp:
        torch.save(data, temp)
    return path
