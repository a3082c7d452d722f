"""Loading a command's helper models (taggers, captioners, CLIPs) before its first image, each failure one error
naming the flag that chose the model.

A command over many images (`mixkit interrogate`, `mixkit extras --caption`, `mixkit img2img --loopback-interrogate`)
would otherwise load such a model at its first image, so a damaged download or a folder of another model failed
after work was done or files were written, with the loader's own message naming no flag. Every failure of the load is
turned into one `ModelLoadError`: the user's file is what is wrong, whatever the loader raised (pickle, safetensors,
torch, transformers).
"""

from __future__ import annotations

from typing import Callable, TypeVar

from mixkit.errors import MixkitError

Loaded = TypeVar("Loaded")


class ModelLoadError(MixkitError, ValueError):
    """A model the flags name was found but cannot be loaded (a damaged file, a folder of another model)."""


def loaded_now(flag: str, source: object, load: Callable[[], Loaded],
               nothing_done: str = "no image was interrogated") -> Loaded:
    """`load()`'s result, any failure turned into a ModelLoadError naming `flag` (the flag, or what of a flag's
    models, the user chose it with), the model `source` and `nothing_done` (what the stop spared)."""
    try:
        return load()
    except Exception as error:  # whatever a damaged or foreign file raises (pickle, safetensors, torch, transformers)
        reason = str(error) or type(error).__name__
        raise ModelLoadError(f"{flag} {str(source)!r} cannot be loaded, so {nothing_done}: {reason}") from error
