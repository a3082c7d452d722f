"""The static pickle scan names imported globals; torch's own scanner is the oracle for zip files."""

from __future__ import annotations

import io
import pickle

import torch

from mixkit.io.pickle_scan import globals_in_checkpoint, globals_in_pickle, torch_allowed_globals, unsafe_globals


def test_plain_pickle_stack_global_is_named():
    data = pickle.dumps({"f": print, "c": torch.Size}, protocol=4)
    assert globals_in_pickle(io.BytesIO(data)) == ["builtins.print", "torch.Size"]


def test_protocol_2_global_is_named():
    data = pickle.dumps([torch.Size], protocol=2)
    assert globals_in_pickle(io.BytesIO(data)) == ["torch.Size"]


def test_memoized_module_names_are_followed():
    # protocol 4 memoizes "builtins" once and fetches it with BINGET for the second global
    data = pickle.dumps([print, len], protocol=4)
    assert globals_in_pickle(io.BytesIO(data)) == ["builtins.print", "builtins.len"]


def test_zip_scan_agrees_with_torch(malicious_checkpoints, tmp_path):
    allowed = torch_allowed_globals()
    assert allowed is not None, "torch no longer exposes its weights-only allowlist"
    safe = tmp_path / "safe.pt"
    torch.save({"w": torch.ones(2), "h": torch.ones(1, dtype=torch.float16)}, safe)
    for path in (safe, malicious_checkpoints["torch-zip"]):
        ours = unsafe_globals(globals_in_checkpoint(path, "torch-zip"), allowed)
        assert sorted(ours) == sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    assert unsafe_globals(globals_in_checkpoint(malicious_checkpoints["torch-zip"], "torch-zip"), allowed) == [
        "posix.system"
    ]


def test_legacy_stream_is_scanned_past_its_header_pickles(malicious_checkpoints):
    found = globals_in_checkpoint(malicious_checkpoints["torch-legacy"], "pickle")
    assert "posix.system" in found and "torch._utils._rebuild_tensor_v2" in found


def test_protocol_0_global_in_a_file_is_named(tmp_path):
    path = tmp_path / "p0.ckpt"
    path.write_bytes(pickle.dumps({"f": print}, protocol=0))
    # protocol < 3 writes the Python 2 name __builtin__.print; the unpickler (and torch's) resolves it as builtins.print
    assert globals_in_checkpoint(path, "pickle") == ["builtins.print"]


def test_python2_names_are_mapped_as_the_unpickler_maps_them():
    # torch.save writes protocol 2, which spells builtins as __builtin__; torch maps it before its allow-list
    data = pickle.dumps([{1, 2}, complex(1, 2), bytearray(b"x")], protocol=2)
    found = globals_in_pickle(io.BytesIO(data))
    assert found == ["builtins.set", "builtins.complex", "builtins.bytearray", "_codecs.encode"]
    assert unsafe_globals(found, torch_allowed_globals()) == []


def test_scan_agrees_with_torch_on_python2_names(tmp_path):
    path = tmp_path / "set.ckpt"
    torch.save({"state_dict": {"a": torch.ones(2)}, "s": {1, 2}, "c": 1j, "b": bytearray(b"x")}, path)
    ours = unsafe_globals(globals_in_checkpoint(path, "torch-zip"), torch_allowed_globals())
    assert ours == torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
