"""A pasted infotext's `<lora:...>` tags re-linked through `Lora hashes` to renamed local copies, as A1111's paste."""

from __future__ import annotations

import argparse

import torch
from safetensors.torch import save_file

from mixkit.lora import LoraLibrary
from mixkit.lora.lora_file import addnet_hash
from mixkit.lora.relink import library_lookup, parse_lora_hashes, relink_lora_tags


def _library(tmp_path):
    folder = tmp_path / "loras"
    (folder / "styles").mkdir(parents=True)
    save_file({"lora_unet_a.lora_down.weight": torch.ones(2, 4)}, str(folder / "styles" / "my_ink_v2.safetensors"))
    save_file({"lora_unet_a.lora_down.weight": torch.zeros(2, 4)}, str(folder / "detail.safetensors"),
              metadata={"sshs_model_hash": "ABCDEF0123456789" + "0" * 48})
    return LoraLibrary(folder)


def test_lora_hashes_are_parsed_as_a1111_writes_them():
    assert parse_lora_hashes("ink: 1234567890ab, add detail: ABCDEF012345") == {
        "ink": "1234567890ab", "add detail": "abcdef012345"}
    assert parse_lora_hashes("") == {} and parse_lora_hashes("no hash here") == {}


def test_tags_are_renamed_to_the_local_file_with_that_hash(tmp_path):
    library = _library(tmp_path)
    ink = addnet_hash(library.folder / "styles" / "my_ink_v2.safetensors")[:12]
    prompt = "a castle <lora:civitai_ink:0.8> <lora:addDetail:1> <lora:unknown:1> <lora:nohash:0.5>"
    hashes = f"civitai_ink: {ink}, addDetail: abcdef012345, unknown: 000000000000"
    assert relink_lora_tags(prompt, hashes, library_lookup(library)) == (
        "a castle <lora:styles/my_ink_v2:0.8> <lora:detail:1> <lora:unknown:1> <lora:nohash:0.5>")
    assert relink_lora_tags(prompt, None, library_lookup(library)) == prompt


def test_the_stored_hash_is_read_and_computed_hashes_are_kept_per_file_version(tmp_path, monkeypatch):
    library = _library(tmp_path)
    calls = []
    import mixkit.lora.lora_file as lora_file

    real = lora_file.addnet_hash
    monkeypatch.setattr(lora_file, "addnet_hash", lambda path: calls.append(path) or real(path))
    assert library.find_by_short_hash("ABCDEF012345").name == "detail"  # sshs_model_hash, no hashing of bytes
    assert library.find_by_short_hash("ffffffffffff") is None
    assert library.find_by_short_hash("ffffffffffff") is None
    assert len(calls) == 1  # the file without a stored hash was hashed once


def test_generate_infotext_relinks_with_a_lora_dir(tmp_path):
    from webui.cli.generate_infotext import FLAG_KEYS, apply_infotext

    library = _library(tmp_path)
    ink = addnet_hash(library.folder / "styles" / "my_ink_v2.safetensors")[:12]
    args = argparse.Namespace(**dict.fromkeys(FLAG_KEYS), sampler=None, schedule_type=None, eta=None,
                              rng_source=None, lora_dir=str(library.folder))
    text = f'x <lora:civitai_ink:0.8>\nSteps: 2, Sampler: Euler, Seed: 1, Size: 64x64, Lora hashes: "civitai_ink: {ink}", RNG: CPU'
    filled, _ = apply_infotext(args, text)
    assert filled.prompt == "x <lora:styles/my_ink_v2:0.8>"
