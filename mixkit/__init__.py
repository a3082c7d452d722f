"""mixkit: models and kernels for multimodal generation and understanding.

Importing this package is deliberately cheap: no torch, diffusers or gradio import happens here.
Submodules (`mixkit.io`, `mixkit.models`, `mixkit.prompts`, `mixkit.lora`, ...) are imported on use.
"""

__version__ = "0.1.0"


def _quiet_torchao_import_noise() -> None:
    """torchao (the `int8` extra) logs one warning per CUDA kernel library it cannot load, and diffusers
    one more, whenever diffusers imports it, which it does on every model load once torchao is installed.
    On a CPU-only machine those libraries are never needed; real errors (level ERROR) still show."""
    import logging

    for name in ("torchao", "diffusers.quantizers.torchao.torchao_quantizer"):
        logging.getLogger(name).setLevel(logging.ERROR)


_quiet_torchao_import_noise()
