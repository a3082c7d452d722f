"""The inert globals A1111 lets old checkpoints import, as stand-ins torch's weights-only unpickler may use.

A1111's `modules/safe.py` (`RestrictedUnpickler.find_class`) accepts, beyond torch's tensors:
`numpy.core.multiarray.scalar/_reconstruct` and `numpy.dtype/ndarray` (Dreambooth-era .ckpt files with a
numpy `global_step`), `torch.nn.modules.container.ParameterDict` (original textual-inversion .pt files),
`pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint` (PyTorch Lightning 1.x wrote the class as
a key of its "callbacks" dict, e.g. in the official sd-v1-4.ckpt) and `__builtin__.set`. torch's
weights-only loader allows `set` itself; the others are registered here for the duration of one load.

Nothing imported by the file runs code of the file's choosing: numpy's scalar/array/dtype constructors
only copy bytes into a value (checked to build nothing but numpy arrays), ParameterDict becomes a plain
dict filled from its pickled parameters, and the Lightning class becomes an empty marker class that
holds no code (it is only ever a dict key). Every other global stays refused.
"""

from __future__ import annotations

import pickle
import threading
from contextlib import contextmanager
from typing import Iterator

# numpy 1.x pickles name numpy.core.multiarray, numpy 2.x numpy._core.multiarray; A1111 lists the former.
NUMPY_MULTIARRAY_MODULES = ("numpy.core.multiarray", "numpy._core.multiarray")
PARAMETER_DICT = "torch.nn.modules.container.ParameterDict"
LIGHTNING_MODEL_CHECKPOINT = "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint"
LIGHTNING_MODEL_CHECKPOINT_MODULE = "pytorch_lightning.callbacks.model_checkpoint"
# torch keeps user-allowed globals in one process-wide set; loads that add and remove ours must not interleave.
_REGISTRATION_LOCK = threading.Lock()


class LoadedParameterDict(dict):
    """What a pickled `torch.nn.ParameterDict` loads as: a plain dict of its parameters, in their order.

    The pickle holds the module's `__dict__` (`_parameters`, and `_keys` for the order since torch 1.12);
    only those two entries are read, nothing of the module is rebuilt.
    """

    def __setstate__(self, state) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("_parameters", {}), dict):
            raise pickle.UnpicklingError(f"a pickled {PARAMETER_DICT} has no '_parameters' dict; the file is corrupt")
        parameters = state.get("_parameters", {})
        order = state.get("_keys") if isinstance(state.get("_keys"), dict) else parameters
        self.update({key: parameters[key] for key in order if key in parameters})


class _NeverBuilt:
    """A stand-in that is only ever a value: a file that calls it (REDUCE/NEWOBJ) is refused."""

    def __new__(cls, *args, **kwargs):
        raise pickle.UnpicklingError(
            f"the file calls {cls.stands_for}, which is only accepted as a dict key or value (as PyTorch "
            "Lightning 1.x saved it), never built"
        )


class LightningModelCheckpointKey(_NeverBuilt):
    """Stands for PyTorch Lightning's ModelCheckpoint class, which PL 1.x pickled as a dict key; holds no code."""

    stands_for = LIGHTNING_MODEL_CHECKPOINT



class LightningModelCheckpointModule(_NeverBuilt):
    """Stands for the `pytorch_lightning.callbacks.model_checkpoint` module A1111 also allows; holds no code."""

    stands_for = LIGHTNING_MODEL_CHECKPOINT_MODULE


def _numpy_reconstruct(subtype, shape, dtype):
    """numpy's array-pickle constructor, limited to plain `ndarray` (a subtype's constructor could be anything)."""
    import numpy as np

    if subtype is not np.ndarray:
        raise pickle.UnpicklingError(f"a pickled numpy array of type {subtype!r} is refused; only numpy.ndarray loads")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _numpy_scalar(dtype, *data):
    """numpy's scalar-pickle constructor (a dtype and its raw bytes), refusing anything but a real dtype."""
    import numpy as np

    if not isinstance(dtype, np.dtype):
        raise pickle.UnpicklingError(f"a pickled numpy scalar with dtype {dtype!r} is refused; the file is corrupt")
    return _numpy_multiarray().scalar(dtype, *data)


def _numpy_multiarray():
    import numpy as np

    core = getattr(np, "_core", None) or np.core
    return core.multiarray


def inert_globals() -> list[tuple[object, str]]:
    """(stand-in, `module.name` in the pickle) for every A1111-allowed global torch does not allow itself."""
    entries: list[tuple[object, str]] = [
        (LoadedParameterDict, PARAMETER_DICT),
        (LightningModelCheckpointKey, LIGHTNING_MODEL_CHECKPOINT),
        (LightningModelCheckpointModule, LIGHTNING_MODEL_CHECKPOINT_MODULE),
    ]
    try:
        import numpy as np
    except ImportError:  # without numpy, files holding numpy values are refused by name as before
        return entries
    for module in NUMPY_MULTIARRAY_MODULES:
        entries += [(_numpy_scalar, f"{module}.scalar"), (_numpy_reconstruct, f"{module}._reconstruct")]
    entries += [(np.dtype, "numpy.dtype"), (np.ndarray, "numpy.ndarray")]
    # A loaded dtype's type is its DType class (numpy.dtypes.Int64DType ...): torch's BUILD step (restoring
    # the byte order) applies only to allowed types, so these classes are allowed too; they only build dtypes.
    dtype_classes = {type(np.dtype(code)) for code in np.typecodes["All"] + "O"}
    entries += [(cls, f"{cls.__module__}.{cls.__qualname__}") for cls in sorted(dtype_classes, key=str)]
    return entries


def inert_global_names() -> set[str]:
    """The `module.name` strings of `inert_globals()`, for the pre-load scan."""
    return {name for _, name in inert_globals()}


@contextmanager
def inert_globals_allowed() -> Iterator[None]:
    """Let torch's weights-only unpickler use `inert_globals()` within the block (and only there)."""
    import torch

    with _REGISTRATION_LOCK, torch.serialization.safe_globals(inert_globals()):
        yield
