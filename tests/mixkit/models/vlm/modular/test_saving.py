"""save_modular_vlm: complete folders, atomic writes, and arguments checked before anything is written."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.models.vlm import load_vlm
from mixkit.models.vlm.modular import save_modular_vlm
from mixkit.models.vlm.modular import saving as saving_module
from tests.mixkit.models.vlm.conftest import tiny_modular_blip2, word_level_tokenizer


@pytest.fixture(scope="module")
def parts():
    return tiny_modular_blip2("gpt2")


def test_config_holds_processing_and_prompts(parts, tmp_path):
    model, tokenizer = parts
    folder = save_modular_vlm(model, tmp_path / "m", tokenizer=tokenizer, image_mean=(0.5, 0.5, 0.5),
                              image_std=(0.25, 0.5, 1.0), caption_prompt="a photo of", vqa_template="Q: {} A:")
    assert json.loads((folder / "config.json").read_text()) == {
        "model_type": "mixkit-vlm", "image_size": 30, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.5, 1.0],
        "caption_prompt": "a photo of", "vqa_template": "Q: {} A:",
    }
    vlm = load_vlm(folder)
    assert (vlm.caption_prompt, vlm.question_format) == ("a photo of", "Q: {} A:")


def test_existing_folder_needs_overwrite_and_is_replaced_whole(parts, tmp_path):
    model, tokenizer = parts
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "stale.bin").write_bytes(b"old")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_modular_vlm(model, folder, tokenizer=tokenizer)
    save_modular_vlm(model, folder, tokenizer=tokenizer, overwrite=True)
    assert not (folder / "stale.bin").exists() and (folder / "tokenizer").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no scratch or set-aside folders left


def test_a_failure_midway_leaves_no_folder_and_keeps_the_old_one(parts, tmp_path, monkeypatch):
    model, tokenizer = parts

    class BrokenTokenizer(type(tokenizer)):
        def save_pretrained(self, *args, **kwargs):
            raise OSError("disk full")

    broken = word_level_tokenizer()
    broken.__class__ = BrokenTokenizer
    with pytest.raises(OSError, match="disk full"):
        save_modular_vlm(model, tmp_path / "new", tokenizer=broken)
    assert list(tmp_path.iterdir()) == []
    save_modular_vlm(model, tmp_path / "kept", tokenizer=tokenizer)
    before = (tmp_path / "kept" / "model.safetensors").read_bytes()
    with pytest.raises(OSError, match="disk full"):
        save_modular_vlm(model, tmp_path / "kept", tokenizer=broken, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert (tmp_path / "kept" / "model.safetensors").read_bytes() == before


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"image_size": 224}, ValueError, "image_size=224.*30 px"),
    ({"image_std": (0.5, 0.0, 0.5)}, ValueError, "image_std must be positive"),
    ({"image_mean": (0.5, 0.5)}, ValueError, "image_mean must be 3 numbers"),
    ({"vqa_template": "Question: Short answer:"}, ValueError, "exactly one"),
    ({"tokenizer": "gpt2"}, TypeError, "transformers tokenizer"),
])
def test_bad_arguments_are_refused_before_writing(parts, tmp_path, kwargs, error, match):
    model, tokenizer = parts
    with pytest.raises(error, match=match):
        save_modular_vlm(model, tmp_path / "m", **{"tokenizer": tokenizer, **kwargs})
    assert list(tmp_path.iterdir()) == []


def test_tokenizer_larger_than_the_embedding_is_refused(tmp_path):
    model, tokenizer = tiny_modular_blip2("opt")
    tokenizer.add_tokens(["zebra"])
    with pytest.raises(ValueError, match=f"{len(tokenizer)} tokens.*{len(tokenizer) - 1} rows"):
        save_modular_vlm(model, tmp_path / "m", tokenizer=tokenizer)


def test_only_modular_models_are_saved(tmp_path):
    with pytest.raises(TypeError, match="VisionLanguageModel, got Linear"):
        save_modular_vlm(torch.nn.Linear(2, 2), tmp_path, tokenizer=word_level_tokenizer())


def test_unknown_config_key_is_named(parts, tmp_path):
    from mixkit.errors import CheckpointFormatError

    model, tokenizer = parts
    folder = save_modular_vlm(model, tmp_path / "m", tokenizer=tokenizer)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "imagesize": 30}))
    with pytest.raises(CheckpointFormatError, match=r"config.json.*\['imagesize'\]"):
        load_vlm(folder)


def test_move_into_place_restores_the_old_folder_when_the_rename_fails(tmp_path, monkeypatch):
    scratch, folder = tmp_path / "scratch", tmp_path / "target"
    scratch.mkdir()
    folder.mkdir()
    (folder / "weights").write_text("old")
    real_replace = saving_module.os.replace

    def failing_replace(source, destination):
        if str(source) == str(scratch):
            raise OSError("rename refused")
        return real_replace(source, destination)

    monkeypatch.setattr(saving_module.os, "replace", failing_replace)
    with pytest.raises(OSError, match="rename refused"):
        saving_module._move_into_place(scratch, folder)
    assert (folder / "weights").read_text() == "old"
