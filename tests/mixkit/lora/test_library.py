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


def test_exact_stem_in_subfolder_wins_over_case_insensitive_top_level_name(tmp_path):
    # A1111's networks.py looks names up in case-sensitive dicts, so `<lora:detail:1>` is sub/detail there.
    _write(tmp_path / "Detail.safetensors")
    _write(tmp_path / "sub" / "detail.safetensors")
    library = LoraLibrary(tmp_path)
    assert library.resolve_name("detail") == (tmp_path / "sub" / "detail.safetensors").resolve()
    assert library.resolve_name("Detail") == (tmp_path / "Detail.safetensors").resolve()


def test_exact_alias_wins_over_case_insensitive_stem(tmp_path):
    _write(tmp_path / "Other.safetensors", alias="style")
    _write(tmp_path / "STYLE.safetensors")
    _write(tmp_path / "Detail.safetensors")
    _write(tmp_path / "other.safetensors", alias="detail")
    library = LoraLibrary(tmp_path)
    assert library.resolve_name("style") == (tmp_path / "Other.safetensors").resolve()
    assert library.resolve_name("STYLE") == (tmp_path / "STYLE.safetensors").resolve()
    assert library.resolve_name("detail") == (tmp_path / "other.safetensors").resolve()


def test_exact_stem_wins_over_exact_alias_of_another_file(tmp_path):
    # A1111 marks an alias that collides with another name as forbidden and looks it up by stem only.
    _write(tmp_path / "a.safetensors", alias="b")
    _write(tmp_path / "b.safetensors")
    assert LoraLibrary(tmp_path).resolve_name("b") == (tmp_path / "b.safetensors").resolve()


def test_case_insensitive_tie_is_an_error(tmp_path):
    _write(tmp_path / "x" / "Ink.safetensors")
    _write(tmp_path / "y" / "INK.safetensors")
    with pytest.raises(ValueError, match="'ink' fits several files.*x/Ink.safetensors.*y/INK.safetensors"):
        LoraLibrary(tmp_path).resolve_name("ink")


def test_headers_of_unchanged_files_are_read_once_across_libraries(tmp_path, monkeypatch):
    """Generation builds a library per call; the aliases of unchanged files come from the first scan, a changed
    file is read again."""
    import os

    import mixkit.lora.library as library_module

    first = _write(tmp_path / "unchanged_once.safetensors", alias="one")
    second = _write(tmp_path / "edited_once.safetensors", alias="two")
    reads = []
    real = library_module.read_safetensors_header
    monkeypatch.setattr(library_module, "read_safetensors_header", lambda path: reads.append(path) or real(path))
    assert [e.alias for e in LoraLibrary(tmp_path).entries()] == ["two", "one"]
    assert [e.alias for e in LoraLibrary(tmp_path).entries()] == ["two", "one"]
    assert sorted(reads) == sorted([first, second])
    _write(second, alias="renamed")
    os.utime(second, ns=(os.stat(second).st_atime_ns, os.stat(second).st_mtime_ns + 10**9))
    assert LoraLibrary(tmp_path).resolve_name("renamed") == second.resolve()
    assert sorted(reads) == sorted([first, second, second])


def test_a_symlinked_file_resolves_to_its_place_in_the_folder_not_its_target(tmp_path):
    """Resolved through the link, a broken file's error named the link's target (a server path outside --lora-dir,
    which the HTTP error redaction cannot know) instead of the folder's file."""
    elsewhere = tmp_path / "disk" / "big.safetensors"
    _write(elsewhere)
    folder = tmp_path / "loras"
    folder.mkdir()
    (folder / "linked.safetensors").symlink_to(elsewhere)
    assert LoraLibrary(folder).resolve_name("linked") == folder / "linked.safetensors"
