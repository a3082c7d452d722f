"""A1111's allow-listed pickle globals load as inert stand-ins; anything that could run code is still refused.

Reference: A1111 modules/safe.py `RestrictedUnpickler.find_class` allows `__builtin__/set`,
`numpy.core.multiarray/scalar,_reconstruct`, `numpy/dtype,ndarray`, `torch.nn.modules.container/ParameterDict`
and `pytorch_lightning.callbacks.model_checkpoint/ModelCheckpoint`, and forbids every other global.
"""

from __future__ import annotations

import pickle
import sys
import types

import numpy as np
import pytest
import torch

from mixkit.errors import UnsafeCheckpointError
from mixkit.io import check_pickle_is_safe, load_state_dict, read_checkpoint
from mixkit.io.pickle_allowlist import LightningModelCheckpointKey, LoadedParameterDict

from .conftest import RunsShellCommand

WEIGHTS = {"model.w": torch.arange(4.0)}


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_python2_set_complex_bytearray_load_as_torch_loads_them(tmp_path, legacy):
    path = tmp_path / "set.ckpt"
    torch.save({"state_dict": WEIGHTS, "s": {1, 2}, "c": 1 + 2j, "b": bytearray(b"ab")}, path,
               _use_new_zipfile_serialization=not legacy)
    loaded = read_checkpoint(path)
    assert (loaded["s"], loaded["c"], loaded["b"]) == ({1, 2}, 1 + 2j, bytearray(b"ab"))
    assert torch.equal(load_state_dict(path)["model.w"], WEIGHTS["model.w"])


def test_numpy_scalar_global_step_and_array_load(tmp_path):
    path = tmp_path / "dreambooth.ckpt"
    torch.save({"state_dict": WEIGHTS, "global_step": np.int64(5), "arr": np.arange(3, dtype=np.float16)}, path)
    loaded = read_checkpoint(path)
    assert loaded["global_step"] == 5 and loaded["global_step"].dtype == np.int64
    assert loaded["arr"].dtype == np.float16 and loaded["arr"].tolist() == [0.0, 1.0, 2.0]
    assert type(loaded["arr"]) is np.ndarray  # a plain array, as numpy's own unpickling gives
    assert list(load_state_dict(path)) == ["model.w"]


def test_rinongal_textual_inversion_parameter_dict_loads_as_dict(tmp_path):
    vectors = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
    path = tmp_path / "emb.pt"
    torch.save({"string_to_token": {"*": torch.tensor(265)},
                "string_to_param": torch.nn.ParameterDict({"*": torch.nn.Parameter(vectors)}),
                "name": "emb", "step": 1000}, path)
    loaded = read_checkpoint(path)
    params = loaded["string_to_param"]
    assert isinstance(params, LoadedParameterDict) and not isinstance(params, torch.nn.Module)
    assert list(params) == ["*"] and torch.equal(params["*"], vectors)
    from mixkit.prompts.embeddings import load_textual_inversion

    assert torch.equal(load_textual_inversion(path).vectors[""], vectors)


def test_lightning_1x_model_checkpoint_key_loads_without_importing_lightning(tmp_path, monkeypatch):
    # PL 1.x (the official sd-v1-4.ckpt) pickled the ModelCheckpoint class as a key of "callbacks"
    path = tmp_path / "pl.ckpt"
    with monkeypatch.context() as patch:
        module = types.ModuleType("pytorch_lightning.callbacks.model_checkpoint")
        model_checkpoint = type("ModelCheckpoint", (), {"__module__": module.__name__})
        module.ModelCheckpoint = model_checkpoint
        for name in ("pytorch_lightning", "pytorch_lightning.callbacks"):
            patch.setitem(sys.modules, name, types.ModuleType(name))
        patch.setitem(sys.modules, module.__name__, module)
        torch.save({"state_dict": WEIGHTS, "callbacks": {model_checkpoint: {"best_model_score": None}}}, path)
    assert "pytorch_lightning" not in sys.modules
    loaded = read_checkpoint(path)
    assert list(loaded["callbacks"]) == [LightningModelCheckpointKey]
    assert "pytorch_lightning" not in sys.modules  # a stand-in, never the real class
    assert torch.equal(load_state_dict(path)["model.w"], WEIGHTS["model.w"])


class _Reduces:
    """Pickles as `function(*args)`: how a hostile file makes the unpickler call something."""

    def __init__(self, function, *args) -> None:
        self.function, self.args = function, args

    def __reduce__(self):
        return (self.function, self.args)


def _save_raw(path, obj):
    with open(path, "wb") as handle:
        pickle.dump(obj, handle, protocol=2)
    return path


def test_malicious_payload_inside_allowed_containers_is_refused(tmp_path, sentinel):
    hostile = RunsShellCommand(f"touch {sentinel}")
    paths = {
        "object array": tmp_path / "a.ckpt", "parameter dict": tmp_path / "p.pt", "set": tmp_path / "s.ckpt",
    }
    torch.save({"state_dict": WEIGHTS, "arr": np.array([hostile, 1], dtype=object)}, paths["object array"])
    parameter_dict = torch.nn.ParameterDict()
    parameter_dict._parameters["*"] = hostile  # bypasses the Parameter check, as a crafted file would
    torch.save({"string_to_param": parameter_dict}, paths["parameter dict"])
    torch.save({"state_dict": WEIGHTS, "s": {hostile}}, paths["set"])
    for what, path in paths.items():
        with pytest.raises(UnsafeCheckpointError, match="posix.system|nt.system"):
            read_checkpoint(path)
        assert not sentinel.exists(), what


def test_numpy_stand_ins_refuse_non_array_types_and_other_numpy_callables(tmp_path):
    multiarray = np._core.multiarray
    # _reconstruct is allowed for numpy arrays only: another allowed class as the "subtype" is refused
    with pytest.raises(UnsafeCheckpointError, match="only numpy.ndarray loads"):
        read_checkpoint(_save_raw(tmp_path / "r.ckpt", _Reduces(multiarray._reconstruct, torch.Tensor, (0,), b"b")))
    # numpy functions A1111 does not list stay refused, with their name
    for function, args in ((np.load, ("x.npy",)), (np.fromfile, ("x",))):
        with pytest.raises(UnsafeCheckpointError, match=f"numpy.*{function.__name__}"):
            read_checkpoint(_save_raw(tmp_path / f"{function.__name__}.ckpt", _Reduces(function, *args)))


def test_other_lightning_globals_are_refused(tmp_path, sentinel):
    # only the ModelCheckpoint class (as a key) is inert; calling anything else from Lightning is refused
    path = tmp_path / "pl2.ckpt"
    path.write_bytes(b"\x80\x02cpytorch_lightning.trainer\nTrainer\n)R.")  # GLOBAL, (), REDUCE: Trainer()
    with pytest.raises(UnsafeCheckpointError, match="pytorch_lightning.trainer.Trainer"):
        read_checkpoint(path)


def test_calling_the_model_checkpoint_stand_in_runs_nothing(tmp_path):
    path = tmp_path / "pl3.ckpt"  # ModelCheckpoint("dirpath"): A1111 would build the real callback
    path.write_bytes(b"\x80\x02cpytorch_lightning.callbacks.model_checkpoint\nModelCheckpoint\nX\x01\x00\x00\x00d\x85R.")
    with pytest.raises(UnsafeCheckpointError, match="only accepted as a dict key"):
        read_checkpoint(path)
    assert "pytorch_lightning" not in sys.modules


def test_pre_check_for_other_libraries_stays_at_torchs_own_allow_list(tmp_path):
    # diffusers/transformers call torch.load themselves, without the stand-ins: the check must refuse what they would
    path = tmp_path / "numpy.bin"
    torch.save({"w": torch.ones(1), "global_step": np.int64(5)}, path)
    with pytest.raises(UnsafeCheckpointError, match="numpy"):
        check_pickle_is_safe(path)
    check_pickle_is_safe(path, a1111_types=True)  # mixkit's own reader loads it
