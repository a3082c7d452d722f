"""mixkit: models and kernels for multimodal generation and understanding.

Importing this package is deliberately cheap: no torch, diffusers or gradio import happens here.
Submodules (`mixkit.io`, `mixkit.models`, `mixkit.prompts`, `mixkit.lora`, ...) are imported on use.
"""

__version__ = "0.1.0"
