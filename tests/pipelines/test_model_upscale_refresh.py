"""Model upscaler files tiled by A1111's option pair for their network, compiled on request, a release file's stem as an
alias, and a refresh of the folders: new files in, removed and broken ones out, unchanged ones not read again."""

import warnings

import numpy as np
import pytest

from mixkit.runtime.report import RuntimeFallbackWarning
from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_RRDB, TINY_SRVGG, TINY_SWINIR, save_upscaler, tiny_upscaler
from pipelines.model_upscale import LOADED, ModelUpscaler, set_model_upscaler_tiling
from pipelines.upscale import UPSCALERS
from tests.pipelines.test_model_upscale import random_image, run_network


def test_a_stem_that_is_already_an_upscalers_name_stays_that_upscalers(tmp_path, registered, caplog):
    save_upscaler(tiny_upscaler(TINY_DAT, seed=2), tmp_path / "DAT_x2.pth", "dat")
    mine = UPSCALERS.register("DAT_x2", lambda image, width, height: image)
    try:
        scan = registered(tmp_path, tile_size=0)
        assert scan.names == ["DAT x2"] and scan.refused == {}  # the file is still registered under its own name
        assert UPSCALERS.get("DAT_x2") is mine and UPSCALERS.aliases("DAT x2") == []
        assert ("is not also available as 'DAT_x2': upscaler alias 'DAT_x2' is already the name of 'DAT_x2'"
                in caplog.text)
    finally:
        UPSCALERS.unregister("DAT_x2")


def test_each_network_tiles_with_its_own_a1111_option_pair(release_files, registered):
    registered(release_files, tiling={"ESRGAN": (64, 8), "SWIN": (32, 4), "DAT": (0, 0)})
    tiles = {name: (UPSCALERS.get(name).tile_size, UPSCALERS.get(name).tile_overlap)
             for name in ("4x-UltraSharp", "R-ESRGAN General 4xV3", "SwinIR 4x", "DAT x2")}
    assert tiles == {"4x-UltraSharp": (64, 8), "R-ESRGAN General 4xV3": (64, 8), "SwinIR 4x": (32, 4), "DAT x2": (0, 0)}
    set_model_upscaler_tiling(48, 2, option="SWIN")
    assert (UPSCALERS.get("SwinIR 4x").tile_size, UPSCALERS.get("DAT x2").tile_size) == (48, 0)
    assert UPSCALERS.get("4x-UltraSharp").tile_size == 64
    with pytest.raises(ValueError, match=r"tile_overlap must be an integer in \[0, 7\] for tile_size 16, got 8"):
        registered(release_files, tiling={"SWIN": (16, 8)})
    with pytest.raises(ValueError, match=r"option must be one of \['DAT', 'ESRGAN', 'SCUNET', 'SWIN'\] or None, got 'HAT'"):
        set_model_upscaler_tiling(48, 2, option="HAT")  # HAT files tile with the ESRGAN pair, as A1111's


def test_a_failing_compiler_falls_back_to_the_eager_network_with_a_warning(tmp_path, monkeypatch):
    import torch

    model = tiny_upscaler(TINY_SWINIR, seed=5)
    upscaler = ModelUpscaler(save_upscaler(model, tmp_path / "SwinIR_4x.pth", "swinir"), tile_size=0)
    upscaler.compile = True

    def broken_compile(function, **kwargs):
        def run(*args, **kwargs):
            raise RuntimeError("no C++ compiler")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    image = random_image(12, 10)
    with pytest.warns(RuntimeFallbackWarning, match="compiled upscaler SwinIR_4x.pth failed on first use"):
        out = upscaler.upscale(image, 24, 20)
    assert np.array_equal(np.asarray(out), np.asarray(run_network(model, image)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # eager for good: no second warning
        upscaler.upscale(image, 24, 20)
    LOADED.clear()


def test_a_refresh_adds_new_files_drops_removed_ones_and_reads_only_changed_ones(tmp_path, registered):
    first = save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), tmp_path / "a.pth", "esrgan")
    dat = save_upscaler(tiny_upscaler(TINY_DAT, seed=2), tmp_path / "DAT_x2.pth", "dat")
    scan = registered(tmp_path, tile_size=0)
    kept, removed = UPSCALERS.get("a"), UPSCALERS.get("DAT x2")
    removed.upscale(random_image(8, 8), 16, 16)  # its network is the loaded one
    dat.unlink()
    save_upscaler(tiny_upscaler(TINY_SRVGG, seed=3), tmp_path / "b.safetensors", "srvgg")
    scan = registered(tmp_path, tile_size=0, previous=scan)
    assert scan.names == ["a", "b"] and scan.refused == {}
    assert UPSCALERS.get("a") is kept  # unchanged: not read again
    assert "DAT x2" not in UPSCALERS and "DAT_x2" not in UPSCALERS and LOADED.model is None
    with pytest.raises(FileNotFoundError, match=r"Upscaler 'DAT x2': its file .*DAT_x2.pth' was removed; put it back "
                                                r"or refresh the upscaler list"):
        removed.upscale(random_image(8, 8), 16, 16)  # a job that still holds the old entry
    # a file rewritten (a copy being written: truncated) is dropped and reported; the rest stay
    first.write_bytes(first.read_bytes()[:200])
    scan = registered(tmp_path, tile_size=0, previous=scan)
    assert scan.names == ["b"] and list(scan.refused) == [str(first)] and "a" not in UPSCALERS


def test_a_refresh_of_a_folder_that_went_missing_changes_nothing(tmp_path, registered):
    folder = tmp_path / "ESRGAN"
    folder.mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), folder / "a.pth", "esrgan")
    scan = registered(folder, tile_size=0)
    entry = UPSCALERS.get("a")
    (folder / "a.pth").rename(tmp_path / "a.pth"), folder.rmdir()
    with pytest.raises(NotADirectoryError, match="Upscaler models folder .*ESRGAN' does not exist"):
        registered(folder, tile_size=0, previous=scan)
    assert UPSCALERS.get("a") is entry


def test_a_file_that_changes_while_it_is_read_is_refused_until_the_next_refresh(tmp_path, registered, monkeypatch):
    from mixkit.models.upscalers import loading

    path = save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), tmp_path / "a.pth", "esrgan")
    read = loading.read_upscaler_weights

    def read_while_a_copy_appends(file):
        result = read(file)
        with open(file, "ab") as copy:
            copy.write(b"more")
        return result

    monkeypatch.setattr(loading, "read_upscaler_weights", read_while_a_copy_appends)
    scan = registered(tmp_path, tile_size=0)
    assert scan.names == [] and "a" not in UPSCALERS
    assert scan.refused == {str(path): f"{str(path)!r} changed while it was read (still being copied?); refresh "
                                       "again once it is complete."}
