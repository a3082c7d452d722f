"""mixkit-tiny: the small model family trained by mixkit's own recipes on the shapes world and shipped in the package.

`mixkit-tiny-sd` (text-to-image, diffusers format), `mixkit-tiny-clip` (CLIP) and
`mixkit-tiny-blip2` (captioner / VQA, modular BLIP-2) are the default models of the CLI, AppFlow
and the web UI, so a fresh offline install can generate, caption and chain apps. Their names work
anywhere a model path does (see `mixkit.io.sources.resolve_model_source`); a local folder of the
same name wins. Importing this package does not import torch.
"""

from mixkit.tiny.shipped import SHIPPED_MODELS, shipped_model_path

__all__ = ["SHIPPED_MODELS", "shipped_model_path"]
