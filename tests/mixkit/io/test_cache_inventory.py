"""mixkit's disk cache: one root for every part, listed and cleared by kind and age (`mixkit cache`)."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from mixkit.io.cache_inventory import cache_entries, oldest_until_under, parse_size, remove_entries, select_entries
from mixkit.io.cache_root import cache_root


def write(path, size: int, age_days: float = 0.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    stamp = time.time() - age_days * 86400
    os.utime(path, (stamp, stamp))


@pytest.fixture
def filled(isolated_hash_cache):
    root = isolated_hash_cache
    ov = root / "openvino"
    write(ov / "vae-decoder-abc.xml", 10, age_days=40)
    write(ov / "vae-decoder-abc.bin", 1000, age_days=40)
    (ov / "vae-decoder-abc.json").write_text(json.dumps({"part": "vae-decoder", "model_hash": "0e82eca28a",
                                                         "loras": ["detail:1a2b:0.8"], "shapes": [[1, 4, 32, 32]]}))
    os.utime(ov / "vae-decoder-abc.json", (time.time() - 40 * 86400,) * 2)
    write(ov / "unet-def.xml", 20)
    write(ov / "unet-def.bin", 5000)
    write(ov / "unet-xyz.tmp.bin", 7)  # a conversion that crashed
    write(ov / "blobs" / "1234.blob", 300)
    write(root / "compile" / "fxgraph" / "a", 50, age_days=3)
    write(root / "world_tensors" / "world-1.npz", 400, age_days=10)
    write(root / "hashes.json", 5)
    write(root / "latents" / "f00dfeed1234" / "ab.safetensors", 60, age_days=2)
    write(root / "latents" / "f00dfeed1234" / "cd.safetensors", 60, age_days=2)
    (root / "latents" / "f00dfeed1234" / "about.json").write_text(json.dumps({"vae": "AutoencoderKL", "dtype": "float32"}))
    return root


def test_every_part_of_the_cache_lives_under_one_root(isolated_hash_cache):
    from mixkit.io.hash_cache import hash_cache_file
    from mixkit.runtime.compile import default_cache_dir
    from mixkit.runtime.openvino_cache import openvino_cache_dir
    from mixkit.tiny.world_data import default_cache_dir as world_cache_dir

    assert cache_root() == isolated_hash_cache
    for path in (hash_cache_file(), default_cache_dir(), openvino_cache_dir(), world_cache_dir()):
        assert path.parent == isolated_hash_cache


def test_entries_group_a_graph_with_its_weights_and_describe_it(filled):
    entries = cache_entries()
    graph = next(e for e in entries if e.path.name == "vae-decoder-abc.xml")
    assert {p.name for p in graph.files} == {"vae-decoder-abc.xml", "vae-decoder-abc.bin", "vae-decoder-abc.json"}
    assert graph.size == 1010 + len((filled / "openvino" / "vae-decoder-abc.json").read_bytes())
    assert graph.detail == "vae-decoder; model 0e82eca28a; LoRAs detail:1a2b:0.8; shape 1x4x32x32"
    assert 39.9 < graph.age_days() < 40.1
    kinds = sorted(e.kind for e in entries)
    assert kinds == ["compile", "hashes", "latents", "openvino", "openvino", "openvino", "openvino", "world"]
    latents = next(e for e in entries if e.kind == "latents")
    assert latents.detail == "training latents of 2 images (AutoencoderKL encoder in float32, fingerprint f00dfeed12)"
    assert any(e.detail.startswith("unfinished conversion") for e in entries)
    assert [e.size for e in entries] == sorted((e.size for e in entries), reverse=True)


def test_clear_by_kind_and_age_removes_whole_entries_only(filled):
    old_graphs = select_entries(cache_entries(), ("openvino",), older_than_days=30)
    assert [e.path.name for e in old_graphs] == ["vae-decoder-abc.xml"]
    freed = remove_entries(old_graphs)
    assert freed == old_graphs[0].size
    assert not list((filled / "openvino").glob("vae-decoder-abc.*"))
    assert (filled / "openvino" / "unet-def.bin").exists() and (filled / "world_tensors" / "world-1.npz").exists()
    remove_entries(select_entries(cache_entries(), ("all",)))
    assert cache_entries() == []


@pytest.mark.parametrize("kinds, days, message", [
    (("models",), None, r"unknown cache kind\(s\) \['models'\]; choose from"),
    ((), None, "unknown cache kind"),
    (("all",), -1, "older_than_days must be >= 0"),
])
def test_bad_selections_name_the_choices(filled, kinds, days, message):
    with pytest.raises(ValueError, match=message):
        select_entries(cache_entries(), kinds, days)


def test_nothing_outside_the_cache_is_deleted(filled, tmp_path):
    from mixkit.io.cache_inventory import CacheEntry

    outside = tmp_path / "precious.safetensors"
    outside.write_bytes(b"weights")
    inside = cache_entries()
    with pytest.raises(ValueError, match="is not inside the mixkit cache"):
        remove_entries([*inside, CacheEntry("openvino", outside, (outside,), 7, 0.0, "")])
    assert outside.exists() and len(cache_entries()) == len(inside)  # refused before deleting anything


def test_cli_lists_and_clears(filled, capsys):
    from webui.cli import main

    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert str(filled) in out and "8 entries" in out and "vae-decoder; model 0e82eca28a" in out
    assert main(["cache", "clear", "world", "hashes", "--dry-run"]) == 0
    assert "would remove world" in capsys.readouterr().out and (filled / "hashes.json").exists()
    assert main(["cache", "clear", "world", "hashes"]) == 0
    assert not (filled / "hashes.json").exists() and not list((filled / "world_tensors").iterdir())
    assert main(["cache", "clear", "latents"]) == 0
    assert not (filled / "latents" / "f00dfeed1234").exists()
    assert main(["cache", "clear", "models"]) == 2
    assert "unknown cache kind(s) ['models']" in capsys.readouterr().err


def test_keep_under_removes_the_oldest_of_the_chosen_until_the_whole_cache_fits(filled):
    entries = cache_entries()
    total = sum(e.size for e in entries)
    graphs = select_entries(entries, ("openvino",))
    # the 40-day-old decoder (1010 + its .json) goes first; that is enough for total - 1000
    first = oldest_until_under(entries, graphs, total - 1000)
    assert [e.path.name for e in first] == ["vae-decoder-abc.xml"]
    assert oldest_until_under(entries, graphs, total) == []  # already fits: nothing
    everything = oldest_until_under(entries, graphs, 0)  # not enough: every candidate, oldest first
    assert len(everything) == len(graphs) and everything[0].path.name == "vae-decoder-abc.xml"
    assert [e.modified for e in everything] == sorted(e.modified for e in everything)
    with pytest.raises(ValueError, match="size limit must be a number of bytes >= 0"):
        oldest_until_under(entries, graphs, -1)


@pytest.mark.parametrize("text, expected", [("4096", 4096), ("10G", 10 * 1024 ** 3), ("1.5 GB", 3 * 1024 ** 3 // 2),
                                            ("500m", 500 * 1024 ** 2), ("800KB", 800 * 1024), ("2T", 2 * 1024 ** 4)])
def test_sizes_are_read_in_the_units_the_listing_prints(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "ten G", "10 parsecs", "-5G", "1e9"])
def test_unreadable_sizes_say_how_to_write_one(text):
    with pytest.raises(ValueError, match="give a number with an optional unit K, M, G or T"):
        parse_size(text)


def test_cli_keep_under_stops_as_soon_as_the_cache_fits(filled, capsys):
    from webui.cli import main

    assert main(["cache", "clear", "all", "--keep-under", "6K"]) == 0  # 7037 bytes -> at most 6144
    captured = capsys.readouterr()
    assert "removing openvino" in captured.out and "vae-decoder" in captured.out
    assert (filled / "openvino" / "unet-def.bin").exists()  # newer and not needed
    assert sum(e.size for e in cache_entries()) <= 6 * 1024
    assert main(["cache", "clear", "world", "--keep-under", "10"]) == 0
    assert "the cache still holds" in capsys.readouterr().err
    assert main(["cache", "clear", "all", "--keep-under", "lots"]) == 2
    assert "cannot read the size 'lots'" in capsys.readouterr().err


def test_a_cache_root_that_is_a_file_is_refused_naming_the_variable(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "afile"))
    with pytest.raises(NotADirectoryError) as refused:
        cache_root()
    assert str(refused.value) == (f"MIXKIT_CACHE_DIR={tmp_path / 'afile'} is a file, not a folder; point "
                                  "MIXKIT_CACHE_DIR at a folder (it is created when needed) or unset it for "
                                  "~/.cache/mixkit.")
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "afile" / "cache"))
    with pytest.raises(NotADirectoryError, match=re.escape(f"cache cannot be created: {tmp_path / 'afile'} is a file")):
        cache_entries()
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "new" / "cache"))  # a folder yet to be made is fine
    assert cache_root() == tmp_path / "new" / "cache" and cache_entries() == []
