"""Bad LoRA files: each fails with one clear error naming the file, and nothing half-loaded."""

from __future__ import annotations

import json
import pickle
import struct
import time

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.lora import load_lora
from mixkit.lora.reading import read_lora_file


def _small_lora(path, **extra):
    tensors = {
        "lora_unet_conv_in.lora_down.weight": torch.randn(2, 4, 3, 3),
        "lora_unet_conv_in.lora_up.weight": torch.randn(32, 2, 1, 1),
        "lora_unet_conv_in.alpha": torch.tensor(1.0),
    }
    tensors.update(extra)
    save_file(tensors, str(path))
    return path


def test_truncated_file(tmp_path):
    path = _small_lora(tmp_path / "lora.safetensors")
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(CheckpointFormatError, match="truncated") as caught:
        read_lora_file(path)
    assert str(path) in str(caught.value)


def test_empty_file(tmp_path):
    for name in ("empty.safetensors", "empty.pt"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(CheckpointFormatError, match="empty"):
            read_lora_file(tmp_path / name)


def test_nan_and_inf_tensors(tmp_path):
    for value in (float("nan"), float("inf")):
        bad = torch.zeros(32, 2, 1, 1)
        bad[3, 1] = value
        path = _small_lora(tmp_path / "nan.safetensors", **{"lora_unet_conv_in.lora_up.weight": bad})
        with pytest.raises(CheckpointFormatError, match="lora_unet_conv_in.lora_up.weight.*NaN or Inf"):
            read_lora_file(path)


def test_header_that_is_not_json(tmp_path):
    path = tmp_path / "garbage.safetensors"
    header = b"{not json"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointFormatError, match="not valid JSON"):
        read_lora_file(path)


def test_adapter_metadata_that_is_not_json(tmp_path):
    path = tmp_path / "diffusers.safetensors"
    save_file({"unet.conv_in.lora_A.weight": torch.zeros(2, 4, 3, 3), "unet.conv_in.lora_B.weight": torch.zeros(32, 2, 1, 1)},
              str(path), metadata={"lora_adapter_metadata": "{'r': 4"})
    with pytest.raises(CheckpointFormatError, match="lora_adapter_metadata"):
        load_lora(path)


def test_tag_frequency_that_is_not_json_is_a_warning(tmp_path):
    path = tmp_path / "tags.safetensors"
    save_file({"lora_unet_conv_in.lora_down.weight": torch.zeros(2, 4, 3, 3), "lora_unet_conv_in.lora_up.weight": torch.zeros(32, 2, 1, 1)},
              str(path), metadata={"ss_tag_frequency": "{broken", "ss_network_dim": "2"})
    lora = load_lora(path)
    assert lora.metadata.network_dim == "2"
    assert lora.metadata.warnings and "ss_tag_frequency" in lora.metadata.warnings[0]


class _Sentinel:
    def __reduce__(self):
        return (open, (str(_Sentinel.target), "w"))


def test_pickle_payload_is_refused_and_never_runs(tmp_path):
    sentinel = tmp_path / "pwned.txt"
    _Sentinel.target = sentinel
    path = tmp_path / "evil.pt"
    with path.open("wb") as handle:
        pickle.dump({"lora_unet_conv_in.lora_down.weight": _Sentinel()}, handle)
    with pytest.raises(UnsafeCheckpointError, match="refused"):
        read_lora_file(path)
    assert not sentinel.exists()


def test_plain_tensor_pickle_is_accepted(tmp_path):
    path = tmp_path / "ok.pt"
    torch.save({"lora_unet_conv_in.lora_down.weight": torch.ones(2, 4, 3, 3),
                "lora_unet_conv_in.lora_up.weight": torch.ones(32, 2, 1, 1)}, str(path))
    lora = load_lora(path)
    assert lora.family_counts() == {"LoRA/LoCon": 1}


def test_unknown_format(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    save_file({"model.diffusion_model.out.2.weight": torch.zeros(2, 2)}, str(path))
    with pytest.raises(CheckpointFormatError, match="unknown LoRA format.*model.diffusion_model.out.2.weight"):
        load_lora(path)


def test_incomplete_module_is_reported(tmp_path):
    path = tmp_path / "half.safetensors"
    save_file({"lora_unet_conv_in.lora_down.weight": torch.zeros(2, 4, 3, 3),
               "lora_unet_conv_out.lora_down.weight": torch.zeros(2, 4, 3, 3),
               "lora_unet_conv_out.lora_up.weight": torch.zeros(4, 2, 1, 1)}, str(path))
    lora = load_lora(path)
    assert [m.name for m in lora.modules] == ["conv_out"]
    assert lora.unclaimed_keys and "missing:lora_up.weight" in lora.unclaimed_keys[0]


def _write_zero_safetensors(path, shapes: dict[str, list[int]]) -> None:
    """A valid safetensors file of float32 zeros, written directly (save_file on 30,000 tensors is slow)."""
    header, offset = {}, 0
    for key, shape in shapes.items():
        size = 4 * max(1, int(torch.tensor(shape).prod().item()) if shape else 1)
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def test_thirty_thousand_keys_load_fast(tmp_path):
    shapes = {}
    for i in range(10_000):
        shapes[f"lora_unet_block_{i}_proj.lora_down.weight"] = [1, 2]
        shapes[f"lora_unet_block_{i}_proj.lora_up.weight"] = [2, 1]
        shapes[f"lora_unet_block_{i}_proj.alpha"] = []
    path = tmp_path / "many.safetensors"
    _write_zero_safetensors(path, shapes)
    start = time.perf_counter()
    lora = load_lora(path)
    elapsed = time.perf_counter() - start
    assert len(lora.modules) == 10_000
    # Generous bound for a loaded shared CI core; the point is no quadratic behaviour.
    assert elapsed < 20, f"loading 30,000 keys took {elapsed:.1f}s"


def test_metadata_fields_are_decoded(tmp_path):
    path = tmp_path / "meta.safetensors"
    tags = {"10_style": {"red hat": 4, "blue sky": 7}, "5_extra": {"red hat": 5}}
    save_file({"lora_unet_conv_in.lora_down.weight": torch.zeros(2, 4, 3, 3), "lora_unet_conv_in.lora_up.weight": torch.zeros(32, 2, 1, 1)},
              str(path), metadata={"ss_tag_frequency": json.dumps(tags), "ss_network_dim": "2", "ss_network_alpha": "1.0",
                                   "ss_base_model_version": "sd_v1", "modelspec.title": "Red hats",
                                   "ss_output_name": "redhat_v2"})
    meta = load_lora(path).metadata
    assert meta.top_tags() == [("red hat", 9), ("blue sky", 7)]
    assert (meta.network_dim, meta.network_alpha, meta.output_name, meta.title) == ("2", "1.0", "redhat_v2", "Red hats")
    assert meta.architecture == "sd_v1"
