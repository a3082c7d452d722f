"""Community LoRA support: kohya LoRA/LoCon/OFT, LyCORIS LoHa/LoKr/IA3/full/norm/GLoRA/OFT/DoRA, diffusers/PEFT and
ComfyUI-saved files.

Read a file with `load_lora`, apply several at once with `apply_loras(unet, text_encoders,
[LoraRequest(...)], mode="merge"|"runtime")` and undo exactly with `handle.remove()`.
"""

from mixkit.lora.algorithms import LORA_ALGORITHMS
from mixkit.lora.apply import LORA_APPLY_MODES, AppliedLoras, apply_loras
from mixkit.lora.errors import LoraMismatchError
from mixkit.lora.formats import LORA_FORMATS
from mixkit.lora.library import LoraLibrary
from mixkit.lora.lora_file import LoraFile, load_lora
from mixkit.lora.requests import LoraRequest, parse_lora_cli_spec, resolve_lora_requests

__all__ = [
    "LORA_ALGORITHMS", "LORA_APPLY_MODES", "LORA_FORMATS", "AppliedLoras", "LoraFile", "LoraLibrary",
    "LoraMismatchError", "LoraRequest", "apply_loras", "load_lora", "parse_lora_cli_spec", "resolve_lora_requests",
]
