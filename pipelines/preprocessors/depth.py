"""Depth preprocessors: monocular depth models from transformers, loaded from the local hub cache.

Weights are never downloaded implicitly (a preprocessor call should not start a multi-hundred-MB
download): a model missing from the cache fails with an error naming its id and how to fetch it.
"""

from __future__ import annotations

from functools import lru_cache

from pipelines.preprocessors.registry import Preprocessor, register_preprocessor

# Preprocessor name -> Hugging Face model id (the models sd-webui-controlnet's depth modules run).
DEPTH_MODELS = {
    "depth_anything": "LiheYoung/depth-anything-small-hf",
    "depth_midas": "Intel/dpt-hybrid-midas",
}


class PreprocessorWeightsMissing(FileNotFoundError):
    """A preprocessor's model weights are not in the local cache."""


@lru_cache(maxsize=2)
def _depth_pipeline(model_id: str):
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(model_id, local_files_only=True)
        from transformers import pipeline  # slow to import: only once the weights are known to be there

        return pipeline("depth-estimation", model=folder)
    except (OSError, ValueError) as error:
        raise PreprocessorWeightsMissing(
            f"The depth model {model_id!r} is not in the Hugging Face cache ({error.__class__.__name__}). "
            f"Download it once with `huggingface-cli download {model_id}`, "
            "or use a preprocessor that needs no weights, or pass an already computed depth map with preprocessor 'none'."
        ) from error


def estimate_depth(image, model_id: str):
    """Greyscale depth map (near = bright, as the depth ControlNets expect), at the image's size."""
    depth = _depth_pipeline(model_id)(image)["depth"]
    return depth.resize(image.size).convert("RGB")


for _name, _model_id in DEPTH_MODELS.items():
    register_preprocessor(Preprocessor(_name, lambda image, _a, _b, model_id=_model_id: estimate_depth(image, model_id),
                                       needs_weights=True))
