"""The grid of a UI result: made when A1111 makes one, saved and shown first (layout: tests/pipelines/test_image_grid.py)."""

from __future__ import annotations

from PIL import Image

from webui.ui.result_grid import grid_for_gallery, with_grid


def test_a_single_image_or_both_options_off_make_no_grid(tmp_path):
    images = [Image.new("RGB", (8, 8))] * 2
    assert grid_for_gallery(images[:1], ["a"], return_grid=True, save_to=tmp_path, cache_dir=tmp_path) is None
    assert grid_for_gallery(images, ["a", "b"], return_grid=False, save_to=None, cache_dir=tmp_path) is None
    assert not list(tmp_path.rglob("*.png"))
    assert grid_for_gallery(images, ["a", "b"], return_grid=False, save_to=tmp_path / "out", cache_dir=tmp_path) is None
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["grid-0000.png"]  # grid_save alone still saves
    shown = grid_for_gallery(images, ["a", "b"], return_grid=True, save_to=None, cache_dir=tmp_path / "cache")
    with Image.open(shown) as grid:
        assert grid.info["parameters"] == "a" and grid.size == (16, 8)
    assert with_grid(["1.png", "2.png"], [5, 6], ["a", "b"], "g.png") == (["g.png", "1.png", "2.png"], [5, 5, 6],
                                                                          ["a", "a", "b"])
    assert with_grid(["1.png"], [5], ["a"], None) == (["1.png"], [5], ["a"])


def test_unsaved_results_older_than_the_limit_are_pruned(tmp_path):
    """Gallery/extras files of unsaved results live in Gradio's cache; a long-running server with saving off used to
    keep every image it ever made there."""
    import os

    from webui.ui.gallery_files import KEEP_UNSAVED_SECONDS, gallery_pngs, prune_stale_results

    images = [Image.new("RGB", (8, 8))]
    old = gallery_pngs(images, [1], ["a"], tmp_path)[0]
    recent = gallery_pngs(images, [2], ["b"], tmp_path)[0]
    old_folder = os.path.dirname(old)
    past = os.stat(old_folder).st_mtime - KEEP_UNSAVED_SECONDS - 10
    os.utime(old_folder, (past, past))
    newest = gallery_pngs(images, [3], ["c"], tmp_path)[0]  # writing a result prunes the stale ones
    assert not os.path.exists(old) and os.path.exists(recent) and os.path.exists(newest)
    assert prune_stale_results(tmp_path / "missing", 1) == []


def test_a_grid_follows_enable_pnginfo_and_save_txt(tmp_path):
    from pipelines.png import InfotextWriting

    images = [Image.new("RGB", (8, 8))] * 2
    saved = grid_for_gallery(images, ["a", "b"], return_grid=True, save_to=tmp_path / "out", cache_dir=tmp_path,
                             writing=InfotextWriting(pnginfo=False, txt=True))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["grid-0000.png", "grid-0000.txt"]
    assert (tmp_path / "out" / "grid-0000.txt").read_text(encoding="utf-8") == "a\n"  # A1111 saves a grid's too
    with Image.open(saved) as grid:
        assert "parameters" not in grid.info
    shown = grid_for_gallery(images, ["a", "b"], return_grid=True, save_to=None, cache_dir=tmp_path / "cache",
                             writing=InfotextWriting(pnginfo=False, txt=True))
    with Image.open(shown) as grid:
        assert "parameters" not in grid.info
    assert [p.suffix for p in (tmp_path / "cache").rglob("*.*")] == [".png"]  # no .txt for a file only shown


def test_gallery_files_leave_the_chunk_out_when_pnginfo_is_off(tmp_path):
    from webui.ui.gallery_files import gallery_pngs

    (kept,) = gallery_pngs([Image.new("RGB", (8, 8))], [1], ["a"], tmp_path)
    (bare,) = gallery_pngs([Image.new("RGB", (8, 8))], [1], ["a"], tmp_path, pnginfo=False)
    with Image.open(kept) as with_chunk, Image.open(bare) as without:
        assert with_chunk.info["parameters"] == "a" and "parameters" not in without.info
