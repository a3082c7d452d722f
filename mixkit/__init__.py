"""mixkit: models and kernels for multimodal generation and understanding.

Importing this package is deliberately cheap: no torch, diffusers or gradio import happens here.
Submodules (`mixkit.io`, `mixkit.models`, `mixkit.prompts`, `mixkit.lora`, ...) are imported on use.
"""

__version__ = "0.1.0"


def _quiet_torchao_import_noise() -> None:
    """torchao (the `int8` extra) logs one warning per CUDA kernel library it cannot load, and diffusers
    one more, whenever diffusers imports it, which it does on every model load once torchao is installed.
    On a CPU-only machine those libraries are never needed; real errors (level ERROR) still show.

    The same import makes torch warn twice that torchao registers its Enums (KernelPreference,
    ScaleCalculationMode) as pytree constants, a call torch 2.13 deprecates: torchao's to change, not the
    user's. Only those records are dropped; torch's other pytree warnings, and this one for any other
    library's Enum, still show."""
    import logging

    for name in ("torchao", "diffusers.quantizers.torchao.torchao_quantizer"):
        logging.getLogger(name).setLevel(logging.ERROR)
    logging.getLogger("torch.utils._pytree").addFilter(_not_torchao_enum_registration)


def _not_torchao_enum_registration(record) -> bool:
    """False for torch's "<enum> is an Enum subclass ... register_constant() ... deprecated" about a torchao Enum."""
    registered = record.args[0] if isinstance(record.args, tuple) and record.args else None
    return not (str(record.msg).startswith("%s is an Enum subclass")
                and str(getattr(registered, "__module__", "")).startswith("torchao."))


_quiet_torchao_import_noise()
