"""load_state_dict: safe formats load exactly, anything needing code is refused before it runs."""

from __future__ import annotations

import os
import pickle

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError, ModelNotFoundError, UnsafeCheckpointError
from mixkit.io.loading import load_state_dict


@pytest.fixture
def tensors():
    generator = torch.Generator().manual_seed(0)
    return {
        "model.diffusion_model.w": torch.randn(4, 3, generator=generator),
        "first_stage_model.b": torch.randn(5, generator=generator).to(torch.float16),
        "cond_stage_model.ids": torch.arange(7),
    }


def assert_same(loaded, expected):
    assert set(loaded) == set(expected)
    for key, value in expected.items():
        assert loaded[key].dtype == value.dtype
        assert torch.equal(loaded[key], value), key


@pytest.mark.parametrize("kind", ["pickle", "pickle-protocol2", "torch-zip", "torch-legacy"])
def test_os_system_payload_is_refused_and_named(malicious_checkpoints, sentinel, kind):
    path = malicious_checkpoints[kind]
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system") as info:
        load_state_dict(path)
    message = str(info.value)
    assert path.name in message and "safetensors" in message and "weights_only=False" not in message
    assert not sentinel.exists()
    # the process is still usable: a safe file loads right after the refusal
    ok = path.parent / "ok.safetensors"
    save_file({"x": torch.ones(1)}, ok)
    assert torch.equal(load_state_dict(ok)["x"], torch.ones(1))


@pytest.mark.parametrize("kind", ["pickle", "torch-zip"])
def test_payload_renamed_to_safetensors_is_still_refused(malicious_checkpoints, sentinel, tmp_path, kind):
    renamed = tmp_path / "looks-safe.safetensors"
    renamed.write_bytes(malicious_checkpoints[kind].read_bytes())
    with pytest.raises(UnsafeCheckpointError, match=r"looks-safe\.safetensors.*posix\.system"):
        load_state_dict(renamed)
    assert not sentinel.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol 4")
def test_torch_refusal_is_reported_when_the_scan_sees_no_global(tmp_path):
    # a protocol-4 pickle of plain data: no globals, but FRAME opcodes torch's safe unpickler rejects
    path = tmp_path / "framed.ckpt"
    path.write_bytes(pickle.dumps({"step": 1}, protocol=4))
    with pytest.raises(UnsafeCheckpointError, match="weights-only loader refused it") as info:
        load_state_dict(path)
    assert "weights_only=False" not in str(info.value)


def test_safetensors_loads_exactly(tensors, tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    assert_same(load_state_dict(path), tensors)


def test_safe_torch_zip_loads_exactly(tensors, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(tensors, path)
    assert_same(load_state_dict(path), tensors)


def test_safe_legacy_torch_stream_loads_exactly(tensors, tmp_path):
    path = tmp_path / "model.bin"
    torch.save(tensors, path, _use_new_zipfile_serialization=False)
    assert_same(load_state_dict(path), tensors)


def test_a1111_lightning_ckpt_is_unwrapped(tensors, tmp_path):
    path = tmp_path / "model.ckpt"
    torch.save({"state_dict": tensors, "global_step": 470000, "epoch": 3}, path)
    assert_same(load_state_dict(path), tensors)


def test_non_tensor_entries_are_dropped(tensors, tmp_path):
    path = tmp_path / "mixed.pt"
    torch.save({**tensors, "note": "trained by me", "step": 3}, path)
    assert_same(load_state_dict(path), tensors)


def test_checkpoint_without_tensors_is_rejected(tmp_path):
    path = tmp_path / "config.pt"
    torch.save({"lr": 0.1}, path)
    with pytest.raises(CheckpointFormatError, match=r"config\.pt.*holds no tensors"):
        load_state_dict(path)


def test_non_dict_checkpoint_is_rejected(tmp_path):
    path = tmp_path / "tensor.pt"
    torch.save(torch.ones(2), path)
    with pytest.raises(CheckpointFormatError, match="holds a Tensor, not a dict"):
        load_state_dict(path)


def test_truncated_safetensors(tensors, tmp_path):
    path = tmp_path / "cut.safetensors"
    save_file(tensors, path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CheckpointFormatError, match=r"cut\.safetensors.*truncated"):
        load_state_dict(path)


def test_truncated_torch_zip(tensors, tmp_path):
    path = tmp_path / "cut.pt"
    torch.save(tensors, path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(CheckpointFormatError, match=r"cut\.pt.*(truncated|corrupt)"):
        load_state_dict(path)


def test_truncated_legacy_pickle(tensors, tmp_path):
    path = tmp_path / "cut.ckpt"
    torch.save(tensors, path, _use_new_zipfile_serialization=False)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CheckpointFormatError, match=r"cut\.ckpt.*could not be read \(EOFError\); it is truncated"):
        load_state_dict(path)


def test_garbage_header(tmp_path):
    path = tmp_path / "garbage.safetensors"
    path.write_bytes((9).to_bytes(8, "little") + b"{garbage}" + bytes(16))
    with pytest.raises(CheckpointFormatError, match="not valid UTF-8 JSON"):
        load_state_dict(path)


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.ckpt"
    empty.touch()
    with pytest.raises(CheckpointFormatError, match="empty"):
        load_state_dict(empty)
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_state_dict(tmp_path / "missing.safetensors")
    assert isinstance(ModelNotFoundError("x"), FileNotFoundError)


def test_bad_device_is_a_clear_error(tensors, tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    with pytest.raises(ValueError, match="not a valid torch device"):
        load_state_dict(path, device="gpu0")
    with pytest.raises(TypeError, match="device must be"):
        load_state_dict(path, device=0.5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_gpu_is_not_reported_as_corrupt_file(tensors, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(tensors, path)
    with pytest.raises(ValueError, match="'cuda:0' is not available on this machine"):
        load_state_dict(path, device="cuda:0")


def test_loading_does_not_change_the_file(tensors, tmp_path):
    path = tmp_path / "model.pt"
    torch.save(tensors, path)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    load_state_dict(path)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


def test_control_the_payload_does_run_under_plain_pickle(malicious_checkpoints, sentinel):
    """Shows the refusal tests above can fail: unpickled unsafely, the payload creates the sentinel."""
    with open(malicious_checkpoints["pickle"], "rb") as handle:
        pickle.load(handle)
    assert sentinel.exists()


def test_safe_torch_pickle_named_safetensors_loads_by_content(tensors, tmp_path):
    # torch >= 2.11 hands a *path* ending in .safetensors to safetensors ("header too large"); mixkit reads content.
    for legacy in (False, True):
        path = tmp_path / f"renamed-{legacy}.safetensors"
        torch.save(tensors, path, _use_new_zipfile_serialization=not legacy)
        assert_same(load_state_dict(path), tensors)


@pytest.mark.parametrize("protocol", [0, 1])
def test_old_protocol_pickle_payload_is_refused_naming_the_global(tmp_path, sentinel, protocol):
    class RunsShellCommand:
        def __reduce__(self):
            return (os.system, (f"touch {sentinel}",))

    path = tmp_path / f"p{protocol}.ckpt"
    path.write_bytes(pickle.dumps({"state_dict": {"w": RunsShellCommand()}}, protocol=protocol))
    with pytest.raises(UnsafeCheckpointError, match=r"p\d\.ckpt.*posix\.system"):
        load_state_dict(path)
    assert not sentinel.exists()


def test_read_checkpoint_keeps_non_tensor_entries(tmp_path):
    from mixkit.io import read_checkpoint

    torch.save({"string_to_param": {"*": torch.ones(2, 4)}, "step": 7, "name": "x"}, tmp_path / "emb.pt")
    loaded = read_checkpoint(tmp_path / "emb.pt")
    assert loaded["step"] == 7 and torch.equal(loaded["string_to_param"]["*"], torch.ones(2, 4))


def test_check_pickle_is_safe_names_the_global_and_passes_safe_files(malicious_checkpoints, tensors, tmp_path):
    from mixkit.io import check_pickle_is_safe

    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        check_pickle_is_safe(malicious_checkpoints["torch-zip"])
    torch.save(tensors, tmp_path / "ok.bin")
    save_file(tensors, tmp_path / "ok.safetensors")
    check_pickle_is_safe(tmp_path / "ok.bin")
    check_pickle_is_safe(tmp_path / "ok.safetensors")


def test_any_pickled_checkpoint_with_a_hollow_tensor_is_refused_naming_it(tmp_path):
    """A stride-0 view saved as is claims more values than the file holds: refused for every pickle (a LoRA, an
    embedding nested in `string_to_param`), while the expanded position ids transformers saves (values = storage) load."""
    import torch

    from mixkit.errors import CheckpointFormatError
    from mixkit.io.loading import load_state_dict, read_checkpoint

    torch.save({"string_to_param": {"*": torch.zeros(1, 768).expand(100000, 768)}}, tmp_path / "bomb.pt")
    with pytest.raises(CheckpointFormatError, match=r"bomb\.pt': tensor 'string_to_param\.\*' claims shape "
                                                    r"\(100000, 768\) but the file stores only 3072 bytes"):
        read_checkpoint(tmp_path / "bomb.pt")
    torch.save({"position_ids": torch.arange(77).expand((1, -1)), "w": torch.ones(2, 2)[:, :1]}, tmp_path / "ok.pt")
    loaded = load_state_dict(tmp_path / "ok.pt")
    assert loaded["position_ids"].shape == (1, 77) and loaded["w"].tolist() == [[1.0], [1.0]]
