"""The inert globals A1111 lets old checkpoints import, as stand-ins torch's weights-only unpickler may use.

A1111's `modules/safe.py` (`RestrictedUnpickler.find_class`) accepts, beyond torch's tensors:
`numpy.core.multiarray.scalar/_reconstruct` and `numpy.dtype/ndarray` (Dreambooth-era .ckpt files with a
numpy `global_step`), `torch.nn.modules.container.ParameterDict` (original textual-inversion .pt files),
`pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint` (PyTorch Lightning 1.x wrote the class as
a key of its "callbacks" dict, e.g. in the official sd-v1-4.ckpt) and `__builtin__.set`. torch's
weights-only loader allows `set` itself; the others are registered here for the duration of one load.

Nothing imported by the file runs code of the file's choosing: numpy values are rebuilt by stand-ins that
accept only plain numeric dtypes (bool, int, uint, float, complex) in the exact state numpy itself pickles
them, then copy the file's bytes into a fresh value; ParameterDict becomes a plain dict filled from its
pickled parameters, and the Lightning class becomes an empty marker class that holds no code (it is only
ever a dict key). Every other global stays refused.

Why numpy needs stand-ins: a pickled dtype carries its own `flags`, and numpy trusts them. An object dtype
whose flags were cleared makes `scalar`/`ndarray.__setstate__` (or `ndarray(shape, dtype, buffer)`) read
the file's raw bytes as `PyObject*` pointers, which is an arbitrary-pointer dereference (a crash at best).
torch's own weights-only loader refuses these numpy globals for that kind of reason; A1111's safe.py allows
the real numpy callables. So the file's dtype state is never applied to a real numpy dtype: it is compared
with numpy's own state for that dtype and refused if anything but the byte order differs, and object,
structured, string and datetime dtypes are refused outright (no A1111-era checkpoint needs them; a
`global_step` is an int64 scalar).
"""

from __future__ import annotations

import functools
import importlib.util
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


# numpy dtype kinds whose values are plain bytes: bool, signed/unsigned int, float, complex. Object ('O'),
# structured/void ('V'), string ('S', 'U') and datetime ('M', 'm') dtypes carry pointers, fields or metadata.
PLAIN_NUMPY_KINDS = "biufc"
# numpy writes (version, byte order, subarray, names, fields, elsize, alignment, flags); the byte order
# is the only entry a plain dtype's state may change.
_NUMPY_BYTE_ORDERS = ("<", ">", "|", "=")


def _refuse_numpy(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        f"{what}; mixkit rebuilds only plain numeric numpy values (bool, int, float, complex) as numpy pickles "
        "them, because a tampered dtype makes numpy read the file's bytes as memory pointers. The file is "
        "corrupt or crafted: use a .safetensors version of this model"
    )


class PickledNumpyDtype:
    """Stands for `numpy.dtype` in a pickle: holds a fresh plain numeric dtype, never the file's dtype state.

    numpy pickles a dtype as `numpy.dtype(spec, align, copy)` plus a BUILD state; `__setstate__` accepts the
    state only if it is numpy's own state for that dtype in some byte order, and applies only that byte order.
    """

    __slots__ = ("dtype",)

    def __new__(cls, spec=None, align=False, copy=False):  # REDUCE and NEWOBJ both land here
        import numpy as np

        if not isinstance(spec, str) or not isinstance(align, bool) or not isinstance(copy, bool):
            raise _refuse_numpy(f"a pickled numpy.dtype{repr((spec, align, copy))[:200]} is not how numpy pickles a dtype")
        try:
            dtype = np.dtype(spec, align=align)
        except (TypeError, ValueError) as error:
            raise _refuse_numpy(f"a pickled numpy.dtype({spec!r}) is not a numpy dtype ({error})") from None
        if dtype.kind not in PLAIN_NUMPY_KINDS or dtype.hasobject or dtype.fields is not None or dtype.subdtype:
            raise _refuse_numpy(f"a pickled numpy dtype {spec!r} (kind {dtype.kind!r}) is refused")
        self = object.__new__(cls)
        self.dtype = dtype
        return self

    def __setstate__(self, state) -> None:
        byte_order = state[1] if isinstance(state, tuple) and len(state) > 1 else None
        if byte_order not in _NUMPY_BYTE_ORDERS or state != _numpy_dtype_state(self.dtype.newbyteorder(byte_order)):
            raise _refuse_numpy(
                f"a pickled numpy dtype {self.dtype.str!r} has the state {repr(state)[:200]}, which numpy never writes for it "
                f"(expected {_numpy_dtype_state(self.dtype)!r} up to byte order)"
            )
        self.dtype = self.dtype.newbyteorder(byte_order)

    def __reduce__(self):  # saved again as the real dtype it stands for
        return self.dtype.__reduce__()

    def __repr__(self) -> str:
        return f"PickledNumpyDtype({self.dtype!r})"


def _numpy_dtype_state(dtype) -> tuple:
    return dtype.__reduce__()[2]


def _checked_dtype(dtype, where: str):
    """The real dtype behind a `PickledNumpyDtype`; anything else the file passes as a dtype is refused."""
    if not isinstance(dtype, PickledNumpyDtype):
        raise _refuse_numpy(f"a pickled numpy {where} is given a {type(dtype).__name__} as its dtype, not a numpy.dtype")
    return dtype.dtype


class NumpyNdarrayName(_NeverBuilt):
    """Stands for `numpy.ndarray`, which a pickle only names as `_reconstruct`'s first argument; holds no code.

    The real class is not exposed: calling it with a buffer, or BUILDing a bare ndarray, would apply a dtype
    the file chose without the checks of `LoadedNumpyArray`.
    """

    stands_for = "numpy.ndarray"


@functools.cache
def _loaded_numpy_array_class() -> type:
    """`LoadedNumpyArray`, defined on first use so importing mixkit.io does not import numpy."""
    import numpy as np

    class LoadedNumpyArray(np.ndarray):
        """What a pickled numpy array loads as: an ndarray whose BUILD state is checked before numpy sees it.

        numpy's `ndarray.__setstate__((version, shape, dtype, fortran, data))` trusts the dtype; here the
        dtype must be a checked `PickledNumpyDtype` and the data raw bytes. Saved again, it pickles as a
        plain ndarray.
        """

        def __new__(cls, *args, **kwargs):
            raise pickle.UnpicklingError("the file builds a numpy array directly; only numpy's _reconstruct may")

        def __setstate__(self, state) -> None:
            if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[4], bytes)):
                raise _refuse_numpy("a pickled numpy array's state is not (version, shape, dtype, fortran, bytes)")
            version, shape, dtype, fortran, data = state
            np.ndarray.__setstate__(self, (version, shape, _checked_dtype(dtype, "array"), fortran, data))

        def __reduce__(self):
            return self.view(np.ndarray).__reduce__()

        def __reduce_ex__(self, protocol):
            return self.view(np.ndarray).__reduce_ex__(protocol)

    LoadedNumpyArray.__module__ = __name__
    LoadedNumpyArray.__qualname__ = "LoadedNumpyArray"
    return LoadedNumpyArray


def plain_numpy_values(loaded):
    """`loaded` with every checked `LoadedNumpyArray` in its dicts, lists and tuples turned back into a plain
    `numpy.ndarray` view of the same memory, so callers get the types numpy's own unpickling gives."""
    if importlib.util.find_spec("numpy") is None:
        return loaded
    import numpy as np

    loaded_class = _loaded_numpy_array_class()

    def plain(value):  # containers are updated in place, so an OrderedDict stays one
        if isinstance(value, loaded_class):
            return value.view(np.ndarray)
        if isinstance(value, dict):
            for key, item in value.items():
                value[key] = plain(item)
        elif isinstance(value, list):
            value[:] = [plain(item) for item in value]
        elif type(value) is tuple:
            return tuple(plain(item) for item in value)
        return value

    return plain(loaded)


def _numpy_reconstruct(subtype, shape, dtype):
    """numpy's array-pickle constructor: an empty `LoadedNumpyArray` that the following BUILD fills (checked)."""
    import numpy as np

    if subtype is not NumpyNdarrayName:
        raise pickle.UnpicklingError(f"a pickled numpy array of type {subtype!r} is refused; only numpy.ndarray loads")
    return np.ndarray.__new__(_loaded_numpy_array_class(), (0,), np.uint8)


def _numpy_scalar(dtype, *data):
    """numpy's scalar-pickle constructor (a dtype and its raw bytes), for checked plain numeric dtypes only."""
    real = _checked_dtype(dtype, "scalar")
    if len(data) != 1 or not isinstance(data[0], bytes) or len(data[0]) != real.itemsize:
        raise _refuse_numpy(f"a pickled numpy {real} scalar does not hold exactly {real.itemsize} raw bytes")
    return _numpy_multiarray().scalar(real, data[0])


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
    if importlib.util.find_spec("numpy") is None:  # without numpy, files holding numpy values are refused by name
        return entries
    for module in NUMPY_MULTIARRAY_MODULES:
        entries += [(_numpy_scalar, f"{module}.scalar"), (_numpy_reconstruct, f"{module}._reconstruct")]
    entries += [(PickledNumpyDtype, "numpy.dtype"), (NumpyNdarrayName, "numpy.ndarray")]
    # Registered so torch lets the array's BUILD step through; only _numpy_reconstruct creates instances.
    entries.append((_loaded_numpy_array_class(), f"{__name__}.LoadedNumpyArray"))
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
