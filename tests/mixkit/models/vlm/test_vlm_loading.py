"""load_vlm: sources, remote code, dtype (named apart from tests/mixkit/io/test_loading.py)."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.errors import ModelNotFoundError, UnknownNameError, UnsafeCheckpointError
from mixkit.models.vlm import VLM_FAMILIES, load_vlm, pick_dtype


def test_registry_lists_every_family():
    assert set(VLM_FAMILIES.names()) >= {"clip", "siglip", "blip2", "instructblip", "llava"}


def test_unknown_hub_id_offline_names_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="nobody/no-such-vlm.*HF_HUB_OFFLINE"):
        load_vlm("nobody/no-such-vlm")


def test_missing_folder_and_folder_without_config(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_vlm(str(tmp_path / "absent" / "model"))
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_vlm(tmp_path)


def test_remote_code_refused_unless_opted_in(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "blip-2", "auto_map": {"AutoModel": "x.Y"}}))
    with pytest.raises(UnsafeCheckpointError, match="trust_remote_code=True"):
        load_vlm(tmp_path)


def test_unsupported_model_type_lists_supported(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UnknownNameError, match="'bert'.*blip-2"):
        load_vlm(tmp_path)


def test_dtype_defaults_and_validation():
    assert pick_dtype(torch.device("cpu"), None) is torch.float32
    assert pick_dtype(torch.device("cpu"), "bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="int8"):
        pick_dtype(torch.device("cpu"), "int8")


def test_attention_backend_is_validated(tiny_clip_dir):
    with pytest.raises(ValueError, match="flash"):
        load_vlm(tiny_clip_dir, attn_implementation="flash")


def test_half_precision_keeps_qformer_in_fp32(tiny_blip2_opt_dir, photos):
    model = load_vlm(tiny_blip2_opt_dir, dtype="bfloat16")
    assert model.model.qformer.layernorm.weight.dtype == torch.float32
    assert model.model.language_model.get_input_embeddings().weight.dtype == torch.bfloat16
    assert len(model.caption(photos[:1], max_new_tokens=3)) == 1
