"""Load a checkpoint file into a flat name -> tensor dict, refusing anything that would run code.

safetensors is read directly (memory-mapped by the safetensors library). Pickle-based files
(`.ckpt/.pt/.bin`, zip or legacy) are scanned for imported globals first and then loaded only
with `torch.load(weights_only=True)`, which also accepts the inert types A1111's safe unpickler
allows (numpy values, ParameterDict, Lightning's ModelCheckpoint key; see `pickle_allowlist`).
There is deliberately no `allow_unsafe` switch and no retry with `weights_only=False`: a
checkpoint that needs arbitrary globals must be converted to safetensors by someone who trusts it.
"""

from __future__ import annotations

import logging
import os
import pickle
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.io.formats import check_checkpoint_file, detect_checkpoint_format
from mixkit.io.pickle_allowlist import inert_global_names, inert_globals_allowed, plain_numpy_values
from mixkit.io.pickle_scan import DYNAMIC_GLOBAL, globals_in_checkpoint, torch_allowed_globals, unsafe_globals
from mixkit.io.safetensors_header import read_safetensors_header

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# A1111/LDM `.ckpt` files are PyTorch Lightning checkpoints: the weights sit under "state_dict"
# next to bookkeeping such as "global_step" and "epoch".
NESTED_STATE_DICT_KEY = "state_dict"


def load_state_dict(path: str | os.PathLike, device: "str | torch.device" = "cpu") -> dict[str, "torch.Tensor"]:
    """Load every tensor of a checkpoint file onto `device`, choosing the reader by file content."""
    file = check_checkpoint_file(path)
    return _flatten_to_tensors(file, read_checkpoint(file, device))


def read_checkpoint(path: str | os.PathLike, device: "str | torch.device" = "cpu") -> Any:
    """What a checkpoint file holds, as saved: a safetensors file's tensors, or a pickle's object (usually a dict).

    For files whose non-tensor entries matter (an A1111 embedding's `step` and `sd_checkpoint`, nested
    `string_to_param`); `load_state_dict` is this flattened to tensors. The same refusals apply.
    """
    file = check_checkpoint_file(path)
    device = _check_device(device)
    checkpoint_format = detect_checkpoint_format(file)
    if checkpoint_format == "safetensors":
        return _load_safetensors(file, device)
    return _load_pickled(file, checkpoint_format, device)


def check_pickle_is_safe(path: str | os.PathLike, *, a1111_types: bool = False) -> None:
    """Refuse (UnsafeCheckpointError naming the globals) a pickled file that imports anything torch's weights-only
    loader would not allow; safetensors files pass. For files another library (diffusers, transformers) is about
    to load itself: its refusal would be a raw UnpicklingError that does not name the global.

    `a1111_types=True` when mixkit's own reader (`read_checkpoint`, `load_state_dict`) will load the file: it also
    accepts the inert types A1111 allows (`pickle_allowlist`), which another library's torch.load would refuse.
    """
    if not isinstance(a1111_types, bool):
        raise TypeError(f"a1111_types must be True or False, got {a1111_types!r}")
    file = check_checkpoint_file(path)
    checkpoint_format = detect_checkpoint_format(file)
    if checkpoint_format != "safetensors":
        _refuse_unsafe_globals(file, checkpoint_format, a1111_types=a1111_types)


def _check_device(device) -> "torch.device":
    import torch

    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str or torch.device such as 'cpu' or 'cuda:0', got {device!r}")
    try:
        device = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"device {device!r} is not a valid torch device ({error}); use e.g. 'cpu' or 'cuda:0'") from None
    try:  # checked here so a missing GPU is not later misreported as a corrupt checkpoint
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:
        raise ValueError(f"device {str(device)!r} is not available on this machine ({error}); use 'cpu'") from None
    return device


def _load_safetensors(file: Path, device: "torch.device") -> dict[str, "torch.Tensor"]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    read_safetensors_header(file)  # validates offsets, so a truncated download fails with a clear message
    try:
        return load_file(file, device=str(device))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointFormatError(
            f"safetensors file {str(file)!r} could not be read ({error}); it is corrupt. Re-download or re-export it."
        ) from None


def _refuse_unsafe_globals(file: Path, checkpoint_format: str, a1111_types: bool) -> None:
    allowed = torch_allowed_globals()
    if allowed is not None:
        allowed = allowed | inert_global_names() if a1111_types else allowed
        refused = unsafe_globals(globals_in_checkpoint(file, checkpoint_format), allowed)
        if refused:
            raise _unsafe(file, checkpoint_format, refused)


def _load_pickled(file: Path, checkpoint_format: str, device: "torch.device") -> Any:
    """The pickle's object; a tensor claiming more values than the file stores for it (a stride-0 view, which a
    loader sizing anything from the file's shapes would expand) is refused, whatever the file is for."""
    from mixkit.io.tensor_checks import nested_tensors, refuse_hollow_tensors

    loaded = _unpickle(file, checkpoint_format, device)
    refuse_hollow_tensors(file, nested_tensors(loaded))
    return loaded


def _unpickle(file: Path, checkpoint_format: str, device: "torch.device") -> Any:
    import torch
    from safetensors import SafetensorError

    _refuse_unsafe_globals(file, checkpoint_format, a1111_types=True)
    try:
        # A1111's allow-list (numpy values, ParameterDict, Lightning's ModelCheckpoint key) as inert stand-ins.
        with inert_globals_allowed():
            if file.name.endswith(".safetensors"):
                # torch >= 2.11 hands any *path* ending in .safetensors to the safetensors reader, whatever the
                # content; a pickle renamed so must be read as what it is, so torch gets a file object (no mmap).
                with open(file, "rb") as handle:
                    return plain_numpy_values(torch.load(handle, map_location=device, weights_only=True))
            return plain_numpy_values(torch.load(file, map_location=device, weights_only=True,
                                                 mmap=checkpoint_format == "torch-zip"))
    except pickle.UnpicklingError as error:
        raise _unsafe(file, checkpoint_format, [], torch_reason=_core_reason(error)) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, TypeError, OSError, SafetensorError) as error:
        raise CheckpointFormatError(
            f"{checkpoint_format} checkpoint {str(file)!r} could not be read ({_core_reason(error)}); "
            "it is truncated, corrupt or not a torch.save file. Re-download it."
        ) from None


def _flatten_to_tensors(file: Path, loaded: Any) -> dict[str, "torch.Tensor"]:
    import torch

    if isinstance(loaded, dict) and isinstance(loaded.get(NESTED_STATE_DICT_KEY), dict):
        loaded = loaded[NESTED_STATE_DICT_KEY]
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(
            f"{str(file)!r} holds a {type(loaded).__name__}, not a dict of tensors; it is not a model checkpoint."
        )
    tensors = {key: value for key, value in loaded.items() if isinstance(key, str) and isinstance(value, torch.Tensor)}
    skipped = [key for key in loaded if key not in tensors]
    if not tensors:
        raise CheckpointFormatError(
            f"{str(file)!r} holds no tensors (keys: {list(loaded)[:10]!r}); it is not a model checkpoint."
        )
    if skipped:
        # Training bookkeeping (step counters, optimizer names) is expected in .ckpt files; weights are not lost.
        logger.debug("%s: ignored %d non-tensor entries: %s", file, len(skipped), skipped[:10])
    return tensors


def _unsafe(file: Path, checkpoint_format: str, refused: list[str], torch_reason: str = "") -> UnsafeCheckpointError:
    if refused:
        named = [name for name in refused if name != DYNAMIC_GLOBAL] or refused
        what = (f"it imports {', '.join(named)}, which is neither a tensor type nor one of the inert types A1111 "
                "allows (numpy values, ParameterDict, set ...); an imported callable can run arbitrary code")
    else:
        what = f"torch's weights-only loader refused it ({torch_reason})"
    return UnsafeCheckpointError(
        f"Refusing to load {checkpoint_format} checkpoint {str(file)!r}: {what}. mixkit only loads pickles "
        "with torch.load(weights_only=True) and never falls back to unsafe loading. Use a .safetensors "
        "version of this model, or convert the file in a sandbox you trust."
    )


def _core_reason(error: BaseException) -> str:
    """The informative lines of a torch error, without its advice to pass weights_only=False."""
    message = str(error)
    lines = [
        line.strip() for line in message.splitlines()
        if line.strip() and "weights_only" not in line and "Please file an issue" not in line
        and not line.startswith("Check the documentation")
    ]
    return " ".join(lines)[:500] or type(error).__name__
