"""diffusers / PEFT naming: `unet.<path>.lora_A.weight`, `text_encoder[_2].<path>.lora_B.weight`.

Also the older attention-processor layout (`...attn1.processor.to_q_lora.down.weight`), the
`lora_linear_layer` text-encoder layout and LoRACompatible layers (`<path>.lora.down.weight`),
all written by earlier diffusers releases. PEFT keeps alpha in the safetensors metadata
(`lora_adapter_metadata`: `unet.lora_alpha`, `unet.alpha_pattern`, ...); without it diffusers
uses scale 1 (alpha = rank), and so do we.
"""

from __future__ import annotations

import json
import math
import re

from mixkit.errors import CheckpointFormatError
from mixkit.lora.model_index import TE1, TE2, UNET

COMPONENT_PREFIXES = (("text_encoder_2.", TE2), ("text_encoder.", TE1), ("unet.", UNET))
# Tensor-name endings -> kohya suffixes (the common vocabulary of `algorithms`).
_SUFFIXES = (
    (".lora_A.weight", "lora_down.weight"), (".lora_B.weight", "lora_up.weight"), (".lora_B.bias", "lora_up.bias"),
    (".lora_linear_layer.down.weight", "lora_down.weight"), (".lora_linear_layer.up.weight", "lora_up.weight"),
    (".lora.down.weight", "lora_down.weight"), (".lora.up.weight", "lora_up.weight"),
    (".lora_magnitude_vector", "lora_magnitude_vector"), (".alpha", "alpha"),
)
_PROCESSOR = re.compile(r"^(.*)\.processor\.(to_q|to_k|to_v|to_out)_lora\.(down|up)\.weight$")
_PROCESSOR_TARGET = {"to_q": "to_q", "to_k": "to_k", "to_v": "to_v", "to_out": "to_out.0"}
METADATA_KEY = "lora_adapter_metadata"


def split_diffusers_key(key: str) -> tuple[str, str, str] | None:
    """`unet.a.b.lora_A.weight` -> ("unet", "a.b", "lora_down.weight"); None if not diffusers naming."""
    for prefix, component in COMPONENT_PREFIXES:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            break
    else:
        return None
    processor = _PROCESSOR.match(rest)
    if processor:
        path = f"{processor.group(1)}.{_PROCESSOR_TARGET[processor.group(2)]}"
        return component, path, f"lora_{processor.group(3)}.weight"
    for ending, suffix in _SUFFIXES:
        if rest.endswith(ending):
            return component, rest[: -len(ending)], suffix
    return None


def parse_adapter_metadata(metadata: dict[str, str], source: str) -> dict:
    """The decoded `lora_adapter_metadata` JSON, {} if absent; a clear error if it is not JSON."""
    raw = metadata.get(METADATA_KEY)
    if raw is None:
        return {}
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError as error:
        raise CheckpointFormatError(
            f"{source}: metadata key {METADATA_KEY!r} is not valid JSON ({error}); it holds the LoRA's alpha, "
            "so the strength would be wrong. Re-save the file with diffusers' save_lora_weights."
        ) from None
    if not isinstance(decoded, dict):
        raise CheckpointFormatError(f"{source}: metadata key {METADATA_KEY!r} must be a JSON object, got {type(decoded).__name__}.")
    return decoded


_PEFT_PREFIX = {UNET: "unet", TE1: "text_encoder", TE2: "text_encoder_2"}


def peft_alpha(adapter_metadata: dict, component: str, path: str, rank: int) -> float | None:
    """The effective alpha of one module from PEFT config metadata, folded for rsLoRA; None if unknown.

    `alpha_pattern` keys are PEFT regexes matched against the end of the module path.
    """
    prefix = _PEFT_PREFIX[component]
    alpha = adapter_metadata.get(f"{prefix}.lora_alpha")
    if alpha is None:
        return None
    for pattern, value in (adapter_metadata.get(f"{prefix}.alpha_pattern") or {}).items():
        if re.fullmatch(rf"(.*\.)?(?:{pattern})", path):
            alpha = value
            break
    if adapter_metadata.get(f"{prefix}.use_rslora"):
        # rsLoRA scales by alpha/sqrt(r); express it as an alpha for the alpha/r rule.
        return float(alpha) * rank / math.sqrt(rank)
    return float(alpha)
