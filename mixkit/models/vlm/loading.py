"""`load_vlm`: one entry point from a hub id or local folder to a task adapter.

The family is chosen from the checkpoint's `config.json` `model_type` through the family
registry, so a new family is one registered adapter class. Checkpoints that need their own
Python code (`auto_map` in the config) are refused unless the caller opts in, because loading
them executes code downloaded with the weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from mixkit.errors import ModelNotFoundError, UnknownNameError, UnsafeCheckpointError
from mixkit.models.vlm.family import VLM_FAMILIES, VisionLanguageAdapter

MODULAR_ARCHITECTURE_NAME = "mixkit_vlm.json"  # what VisionLanguageModel.save_pretrained writes

DTYPES_BY_NAME = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
                  "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
"""The precision names `load_vlm` and `Appflow` accept: torch's, and the short ones kohya / A1111 users type."""
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa", "mixkit")
"""transformers' own kernels fixed at load, or "mixkit": every attention call goes through
`mixkit.attention`, following its `attention_backend(...)` context manager at run time."""


def pick_dtype(device: torch.device, dtype: str | torch.dtype | None) -> torch.dtype:
    """fp32 on CPU (half precision is slow there and loses accuracy), bf16 or fp16 on GPUs."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is not None:
        if dtype not in DTYPES_BY_NAME:
            raise ValueError(f"dtype must be one of {sorted(DTYPES_BY_NAME)} or a torch.dtype, got {dtype!r}")
        return DTYPES_BY_NAME[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def keep_qformer_in_fp32(model: torch.nn.Module) -> None:
    """Put a BLIP-2 / InstructBLIP Q-Former and its query tokens back in fp32.

    The Q-Former was trained in fp32 and its post-LayerNorm BERT layers lose accuracy in half
    precision (the reference code keeps it fp32 too); transformers only does this for fp16, not bf16.
    It is small (~100M parameters), so fp32 costs little. Its inputs (the half-precision vision
    features) are cast up on the way in and its outputs back down before the half-precision
    `language_projection`: transformers' BLIP-2 casts the output itself, InstructBLIP casts neither
    (it assumes the whole model shares one dtype), so the casts are hooks on the modules.
    """
    if hasattr(model, "qformer"):
        model.qformer.float()
        _cast_floating_inputs(model.qformer)
    if isinstance(getattr(model, "query_tokens", None), torch.nn.Parameter):
        model.query_tokens.data = model.query_tokens.data.float()
    if isinstance(getattr(model, "language_projection", None), torch.nn.Linear):
        _cast_floating_inputs(model.language_projection)


_CASTS_INPUTS = "_mixkit_casts_inputs"


def _cast_floating_inputs(module: torch.nn.Module) -> None:
    """Cast every floating tensor argument of `module` to its parameters' dtype when it is called (hooked once)."""
    if getattr(module, _CASTS_INPUTS, False):
        return
    dtype = next(module.parameters()).dtype

    def cast(value):
        return value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    def hook(_module, args, kwargs):
        return tuple(cast(a) for a in args), {key: cast(value) for key, value in kwargs.items()}

    module.register_forward_pre_hook(hook, with_kwargs=True)
    setattr(module, _CASTS_INPUTS, True)


def resolve_config_file(source: str) -> Path:
    """The local `config.json` of a folder or hub id (hub ids come from the cache when HF_HUB_OFFLINE is set)."""
    from mixkit.io.sources import resolve_model_source

    folder = resolve_model_source(source)
    if not (folder / "config.json").is_file() and (folder / MODULAR_ARCHITECTURE_NAME).is_file():
        raise ModelNotFoundError(
            f"{str(folder)!r} holds a modular VisionLanguageModel ({MODULAR_ARCHITECTURE_NAME}) but not the tokenizer, "
            "image preprocessing and prompts that captioning needs; save it with "
            "mixkit.models.vlm.modular.save_modular_vlm(model, folder, tokenizer=...) instead of model.save_pretrained"
        )
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(
            f"{str(folder)!r} has no config.json; pass a folder saved with save_pretrained or a hub id"
        )
    return folder / "config.json"


def family_for_config(config: dict, source: str) -> type[VisionLanguageAdapter]:
    model_type = config.get("model_type")
    for _, adapter in VLM_FAMILIES.items():
        if model_type in adapter.model_types:
            return adapter
    known = sorted(t for _, adapter in VLM_FAMILIES.items() for t in adapter.model_types)
    raise UnknownNameError(
        f"{source!r} has model_type {model_type!r}, which no vision-language family handles; "
        f"supported model types: {', '.join(known)}"
    )


def load_vlm(
    source: str | os.PathLike,
    *,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
    trust_remote_code: bool = False,
    attn_implementation: str = "sdpa",
) -> VisionLanguageAdapter:
    """Load a CLIP / SigLIP / BLIP-2 / InstructBLIP / LLaVA checkpoint with its processor, or a
    mixkit modular VLM folder written by `save_modular_vlm`."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a hub id or folder path, got {type(source).__name__}: {source!r}")
    source = str(source)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from None
    torch_dtype = pick_dtype(device, dtype)
    if attn_implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, got {attn_implementation!r}")
    if attn_implementation == "mixkit":
        from mixkit.attention import register_with_transformers

        register_with_transformers()
    config_file = resolve_config_file(source)
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelNotFoundError(f"{str(config_file)!r} is not a readable JSON config ({error})") from None
    if "auto_map" in config and not trust_remote_code:
        raise UnsafeCheckpointError(
            f"{source!r} needs its own Python code (config.json 'auto_map': {config['auto_map']}); loading it would run "
            "that code. Pass trust_remote_code=True only if you trust its author."
        )
    adapter = family_for_config(config, source)
    return adapter.from_folder(config_file.parent, source=source, device=device, dtype=torch_dtype,
                               attn_implementation=attn_implementation, trust_remote_code=trust_remote_code)


def wrap_vlm(model: torch.nn.Module, processor: object, *, source: str | None = None) -> VisionLanguageAdapter:
    """A transformers VLM already loaded in this process (fine-tuned, quantised, ...) behind the task API.

    `load_vlm` reads a folder; this takes the model and processor objects as they are, picks the family from
    `model.config.model_type` as `load_vlm` does, and keeps the model's device and dtype. AppFlow's captioning
    and zero-shot roles take the result as a loaded model.
    """
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    name = source or getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    if not isinstance(model, torch.nn.Module) or model_type is None:
        raise TypeError(f"wrap_vlm takes a loaded transformers model (with a config), got {type(model).__name__}")
    if model_type == "mixkit-vlm":
        raise TypeError("a mixkit modular VisionLanguageModel needs its tokenizer and task config: save it with "
                        "save_modular_vlm(model, folder, tokenizer=...) and load it with load_vlm(folder)")
    adapter = family_for_config({"model_type": model_type}, name)
    wanted = "generate" if "caption" in adapter.tasks else "get_image_features"
    if not callable(getattr(model, wanted, None)):
        raise TypeError(f"{type(model).__name__} has no {wanted}(); pass the model class a {adapter.family!r} task "
                        f"needs (e.g. {'Blip2ForConditionalGeneration' if wanted == 'generate' else 'CLIPModel'})")
    if not callable(processor) or getattr(processor, "image_processor", None) is None:
        raise TypeError(f"processor must be the model's processor (AutoProcessor.from_pretrained, with an image "
                        f"processor and a tokenizer), got {type(processor).__name__}")
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    dtype = getattr(model, "dtype", None) or (parameter.dtype if parameter is not None else torch.float32)
    return adapter(model.eval(), processor, device=device, dtype=dtype, source=str(name))
