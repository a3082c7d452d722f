"""Crafted numpy values in a pickled checkpoint are refused before numpy builds anything from them.

Reference: A1111 modules/safe.py (`RestrictedUnpickler.find_class`) lets `numpy.core.multiarray.scalar`,
`_reconstruct`, `numpy.dtype` and `numpy.ndarray` through as the real numpy callables, so a dtype whose
pickled flags were cleared (an object dtype that no longer says "my items are pointers") makes numpy read the
file's raw bytes as `PyObject*`. mixkit promises more: those files are refused with UnsafeCheckpointError,
while the plain numeric numpy values of Dreambooth-era checkpoints (an int64 `global_step`) still load.

Each hostile file is loaded in a subprocess: a regression is a segfault, which must fail the test, not
kill pytest.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from mixkit.io import read_checkpoint

POINTER = (0x4141414141414141).to_bytes(8, "little")  # what the crafted file wants numpy to dereference


def _object_dtype_with_flags_cleared() -> np.dtype:
    """The hunter's dtype: a fresh object dtype whose state says flags 0 (no NPY_LIST_PICKLE / ITEM_REFCOUNT)."""
    dtype = np.dtype(*np.dtype(object).__reduce__()[1])
    dtype.__setstate__((3, "|", None, None, None, -1, -1, 0))
    return dtype


def _float_dtype_with_object_flags() -> np.dtype:
    """A plain float dtype whose pickled state claims other flags: numpy never writes this."""
    dtype = np.dtype(*np.dtype("<f8").__reduce__()[1])
    dtype.__setstate__((3, "<", None, None, None, -1, -1, 63))
    return dtype


class _Reduces:
    """Pickles as whatever `reduce_value` says (how a crafted file is written with ordinary torch.save)."""

    def __init__(self, reduce_value):
        self.reduce_value = reduce_value

    def __reduce__(self):
        return self.reduce_value


def _scalar_payload(dtype):
    return _Reduces((np.core.multiarray.scalar, (dtype, POINTER)))


def _array_payload(dtype):
    state = (1, (2,), dtype, False, POINTER * 2)
    return _Reduces((np.core.multiarray._reconstruct, (np.ndarray, (0,), b"b"), state))


def _buffer_payload(dtype):
    # numpy.ndarray(shape, dtype, buffer): numpy's own "no object arrays from a buffer" check reads the flags
    return _Reduces((np.ndarray, ((1,), dtype, POINTER)))


HOSTILE = {
    "scalar_object_flags_0": lambda: _scalar_payload(_object_dtype_with_flags_cleared()),  # the hunter's evil.ckpt
    "array_object_flags_0": lambda: _array_payload(_object_dtype_with_flags_cleared()),  # np_trick_zip.ckpt
    "buffer_object_flags_0": lambda: _buffer_payload(_object_dtype_with_flags_cleared()),
    "scalar_float_tampered_flags": lambda: _scalar_payload(_float_dtype_with_object_flags()),
    "array_float_tampered_flags": lambda: _array_payload(_float_dtype_with_object_flags()),
    "object_array_untampered": lambda: np.array([1, "a"], dtype=object),
    "structured_array": lambda: np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]),
}

LOAD_AND_REPORT = textwrap.dedent(
    """
    import sys
    from mixkit.errors import UnsafeCheckpointError
    from mixkit.io import load_state_dict, read_checkpoint
    for path in sys.argv[1:]:
        print(path, end="\\t", flush=True)
        try:
            loaded = read_checkpoint(path)
            load_state_dict(path)
        except UnsafeCheckpointError as error:
            print("REFUSED", str(error).replace("\\n", " "), flush=True)
        except Exception as error:
            print("RAISED", type(error).__name__, str(error).replace("\\n", " ")[:300], flush=True)
        else:
            print("LOADED", repr(loaded["payload"])[:200].replace("\\n", " "), flush=True)
    """
)


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, str]:
    """Load every HOSTILE payload (zip and legacy torch.save) in one subprocess: file stem -> what happened."""
    folder = tmp_path_factory.mktemp("hostile")
    paths = []
    for payload in sorted(HOSTILE):
        for legacy in (False, True):
            paths.append(folder / f"{payload}{'-legacy' if legacy else ''}.ckpt")
            torch.save({"w": torch.zeros(1), "payload": HOSTILE[payload]()}, paths[-1],
                       _use_new_zipfile_serialization=not legacy)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # one interpreter for all files (each start imports torch); a crash stops it and fails here with its output
    result = subprocess.run([sys.executable, "-c", LOAD_AND_REPORT, *map(str, paths)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, f"loader died (exit {result.returncode}) after:\n{result.stdout}{result.stderr[-2000:]}"
    lines = dict(line.split("\t", 1) for line in result.stdout.splitlines())
    return {os.path.basename(path)[: -len(".ckpt")]: outcome for path, outcome in lines.items()}


@pytest.mark.parametrize("legacy", ["", "-legacy"], ids=["zip", "legacy"])
@pytest.mark.parametrize("payload", sorted(HOSTILE))
def test_crafted_numpy_values_are_refused_without_crashing(refusals, payload, legacy):
    outcome = refusals[payload + legacy]
    assert outcome.startswith("REFUSED ") and "numpy" in outcome and ".safetensors" in outcome, outcome


def test_refusal_names_the_dtype_and_why(refusals):
    assert re.search(r"numpy dtype 'O8'.*read the file's bytes as memory pointers", refusals["scalar_object_flags_0"])


def test_plain_dtype_with_tampered_state_names_expected_state(refusals):
    assert re.search(r"'<f8' has the state .*63\).*which numpy never writes", refusals["scalar_float_tampered_flags"])


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_plain_numeric_numpy_values_load_exactly(tmp_path, legacy):
    values = {
        "global_step": np.int64(470000), "loss": np.float64(0.125), "flag": np.bool_(True), "c": np.complex64(1 - 2j),
        "half": np.arange(6, dtype=np.float16).reshape(2, 3), "big_endian": np.array([1, 258], dtype=">i4"),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3)),
    }
    path = tmp_path / "dreambooth.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, **values}, path, _use_new_zipfile_serialization=not legacy)
    loaded = read_checkpoint(path)
    for key, value in values.items():
        expected = pickle.loads(pickle.dumps(value, protocol=2))  # numpy's own unpickling is the oracle
        assert loaded[key].dtype == expected.dtype, key  # (numpy 2 turns '>i4' into native int32 on unpickling)
        assert loaded[key].shape == expected.shape and loaded[key].tobytes() == expected.tobytes(), key
    assert type(loaded["global_step"]) is np.int64 and loaded["global_step"] == 470000
    assert loaded["big_endian"].tolist() == [1, 258] and loaded["fortran"].flags.f_contiguous
    assert isinstance(loaded["half"], np.ndarray)


def test_loaded_numpy_array_saves_again_as_a_plain_ndarray(tmp_path):
    path = tmp_path / "a.ckpt"
    torch.save({"a": np.arange(3, dtype=np.int16)}, path)
    again = tmp_path / "again.ckpt"
    torch.save(read_checkpoint(path), again)
    reloaded = torch.load(again, weights_only=False)  # our own trusted file: plain numpy, no mixkit class named
    assert type(reloaded["a"]) is np.ndarray and reloaded["a"].tolist() == [0, 1, 2]
