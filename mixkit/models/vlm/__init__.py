"""Vision-language models: loading real checkpoints behind one task API, and mixkit's modular BLIP-2."""

from mixkit.models.vlm import contrastive as _contrastive  # noqa: F401  (registers clip, siglip)
from mixkit.models.vlm import generative as _generative  # noqa: F401  (registers blip2, instructblip, llava)
from mixkit.models.vlm import modular_family as _modular_family  # noqa: F401  (registers modular)
from mixkit.models.vlm.family import VLM_FAMILIES, Retrieval, VisionLanguageAdapter
from mixkit.models.vlm.loading import load_vlm, pick_dtype, wrap_vlm
from mixkit.models.vlm.modular.saving import save_modular_vlm

__all__ = ["VLM_FAMILIES", "Retrieval", "VisionLanguageAdapter", "load_vlm", "pick_dtype", "save_modular_vlm", "wrap_vlm"]
