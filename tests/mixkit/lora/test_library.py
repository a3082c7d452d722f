"""A folder of LoRAs: listing, searching, resolving names, aliases and paths."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import ModelNotFoundError
from mixkit.lora import LoraLibrary


def _write(path, alias=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"ss_output_name": alias} if alias else None
    save_file({"lora_unet_conv_in.lora_down.weight": torch.zeros(1, 4, 3, 3),
               "lora_unet_conv_in.lora_up.weight": torch.zeros(32, 1, 1, 1)}, str(path), metadata=metadata)
    return path


@pytest.fixture
def library(tmp_path):
    _write(tmp_path / "add_detail.safetensors", alias="detail_tweaker_v2")
    _write(tmp_path / "styles" / "ink.safetensors")
    _write(tmp_path / "styles" / "Paper.safetensors")
    _write(tmp_path / "other" / "ink.safetensors")
    (tmp_path / "notes.txt").write_text("not a lora")
    return LoraLibrary(tmp_path)


def test_lists_every_lora_file(library):
    assert library.names() == ["add_detail", "other/ink", "styles/Paper", "styles/ink"]


def test_resolves_stem_relative_name_alias_and_path(library, tmp_path):
    assert library.resolve("add_detail") == (tmp_path / "add_detail.safetensors").resolve()
    assert library.resolve("detail_tweaker_v2") == (tmp_path / "add_detail.safetensors").resolve()
    assert library.resolve("styles/ink") == (tmp_path / "styles" / "ink.safetensors").resolve()
    assert library.resolve("paper") == (tmp_path / "styles" / "Paper.safetensors").resolve()
    assert library.resolve(str(tmp_path / "other" / "ink.safetensors")) == (tmp_path / "other" / "ink.safetensors").resolve()


def test_ambiguous_name_lists_candidates(library):
    with pytest.raises(ValueError, match="several files.*other/ink.safetensors.*styles/ink.safetensors"):
        library.resolve("ink")


def test_unknown_name_suggests_similar(library):
    with pytest.raises(ModelNotFoundError, match="No LoRA named 'detail'.*add_detail"):
        library.resolve("detail")


def test_search(library):
    assert [e.relative_name for e in library.search("DETAIL")] == ["add_detail"]
    assert [e.relative_name for e in library.search("tweaker")] == ["add_detail"]


def test_missing_folder(tmp_path):
    with pytest.raises(ModelNotFoundError, match="LoRA folder not found"):
        LoraLibrary(tmp_path / "nope")


def test_apply_by_name_through_library(tmp_path, sd1):
    from mixkit.lora import LoraRequest, apply_loras
    from tests.mixkit.lora.conftest import make_peer_lora

    folder = tmp_path / "loras"
    folder.mkdir()
    make_peer_lora(folder, sd1, "lora", seed=31, name="my_style")
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest("my_style", 0.5)], library=LoraLibrary(folder))
    assert handle.names() == ["my_style"]
    handle.remove()
