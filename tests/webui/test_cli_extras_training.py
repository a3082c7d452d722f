"""`mixkit extras` with A1111's training-data steps: several files per source under A1111's suffixes, captions in
`.txt` files beside them, the target size from --focal-crop / --scale-to, refusals before anything is written."""

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
from webui.cli import main


def _square_on_black(path, size=(192, 64), where=(140, 16), side=32):
    image = Image.new("RGB", size)
    image.paste(Image.fromarray(np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)), where)
    image.save(path)
    return image


@pytest.fixture()
def folder(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(np.arange(64 * 192 * 3, dtype=np.uint32).astype(np.uint8).reshape(192, 64, 3)).save(
        folder / "tall.png")
    _square_on_black(folder / "wide.png")
    return folder


def run(capsys, *args) -> list[str]:
    code = main(["extras", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()


def test_a_folder_split_and_flipped_gets_a1111s_names(folder, tmp_path, capsys):
    out = tmp_path / "out"
    written = run(capsys, str(folder / "tall.png"), "--upscaler", "None", "--scale-to", "64x64", "--no-crop",
                  "--split-oversized", "--flip", "horizontal", "-o", str(out / "one.png"))
    # 1 picture + its flip, each split into 4 (1:3 at overlap 0.2): one.png, one-1.png ... one-7.png
    assert written == [str(out / "one.png")] + [str(out / f"one-{n}.png") for n in range(1, 8)]
    source = np.asarray(Image.open(folder / "tall.png").convert("RGB"))
    assert (np.asarray(Image.open(out / "one.png").convert("RGB")) == source[:64]).all()
    # A1111's order: the pictures there were (the source's first crop, the flip's first crop), then the new crops
    assert (np.asarray(Image.open(out / "one-1.png").convert("RGB")) == source[:64, ::-1]).all()
    assert (np.asarray(Image.open(out / "one-4.png").convert("RGB")) == source[128:]).all()
    assert (np.asarray(Image.open(out / "one-7.png").convert("RGB")) == source[128:, ::-1]).all()
    names = run(capsys, str(folder), "--upscaler", "None", "--scale-to", "64x64", "--no-crop", "--split-oversized",
                "-o", str(tmp_path / "batch"))
    assert [p.split("/")[-1] for p in names] == ["tall.png", "tall-1.png", "tall-2.png", "tall-3.png", "wide.png",
                                                 "wide-1.png", "wide-2.png", "wide-3.png"]


def test_focal_crop_keeps_the_textured_square_and_saves_the_debug_image(folder, tmp_path, capsys):
    out = tmp_path / "out"
    written = run(capsys, str(folder / "wide.png"), "--focal-crop", "64x64", "--focal-debug", "-o", str(out))
    assert written == [str(out / "00000.png"), str(out / "00001-focal-crop-debug.png")]
    crop = Image.open(out / "00000.png")
    assert crop.size == (64, 64)
    assert crop.text["postprocessing"] == "Postprocess upscale to: 64x64, Postprocess upscaler: Lanczos"
    # Lanczos to cover 64x64 is the picture's own size: the crop holds the whole square
    square = np.asarray(Image.open(folder / "wide.png").convert("RGB"), dtype=np.int64).sum()
    assert abs(np.asarray(crop.convert("RGB"), dtype=np.int64).sum() - square) < square * 0.01
    assert Image.open(out / "00001-focal-crop-debug.png").size == (192, 64)


def test_captions_are_written_beside_every_file(folder, tmp_path, capsys, monkeypatch):
    import pipelines.extras_training as training

    seen = []
    monkeypatch.setattr(training, "vlm_captioner", lambda source: lambda image: seen.append(source) or "a star")
    out = tmp_path / "out"
    run(capsys, str(folder), "--upscaler", "None", "--caption", "blip", "--flip", "vertical", "--save-txt",
        "--caption-model", "my-blip", "-o", str(out))
    assert sorted(p.name for p in out.iterdir()) == ["tall-1.png", "tall-1.txt", "tall.png", "tall.txt",
                                                     "wide-1.png", "wide-1.txt", "wide.png", "wide.txt"]
    assert all((out / name).read_text(encoding="utf8") == "a star" for name in ("tall.txt", "tall-1.txt"))
    assert seen == ["my-blip", "my-blip"]  # one caption per source; its flip keeps it
    (out / "wide.txt").write_text("old words", encoding="utf8")
    run(capsys, str(folder / "wide.png"), "--upscaler", "None", "--caption", "blip", "--existing-caption", "append",
        "-o", str(out / "wide.png"))
    assert (out / "wide.txt").read_text(encoding="utf8") == "a star old words"


@pytest.fixture()
def deepbooru_folder(tmp_path):
    """A tagger scoring solo 0.881, 1girl 0.953, hat_(object) 0.269, long_hair 0.622 on every image."""
    folder = tmp_path / "torch_deepdanbooru"
    folder.mkdir()
    save_deepbooru(folder / "model-resnet_custom_v3.pt", crafted_deepbooru_state([2.0, 3.0, -1.0, 0.5]),
                   ["solo", "1girl", "hat_(object)", "long_hair"])
    return folder


def test_deepbooru_tags_then_the_blip_caption_as_a1111s(folder, deepbooru_folder, tmp_path, capsys, monkeypatch):
    import pipelines.extras_training as training

    monkeypatch.setattr(training, "vlm_captioner", lambda source: lambda image: "a star")
    out = tmp_path / "out"
    run(capsys, str(folder / "wide.png"), "--upscaler", "None", "--caption", "blip", "--caption", "deepbooru",
        "--deepdanbooru-models-path", str(deepbooru_folder), "--flip", "horizontal", "-o", str(out / "wide.png"))
    expected = "1girl, long hair, solo, a star"  # A1111's default DeepBooru settings, then BLIP
    assert [(out / name).read_text(encoding="utf8") for name in ("wide.txt", "wide-1.txt")] == [expected] * 2
    run(capsys, str(folder / "tall.png"), "--upscaler", "None", "--caption", "deepbooru",
        "--deepdanbooru-models-path", str(deepbooru_folder), "-o", str(out / "tall.png"))
    assert (out / "tall.txt").read_text(encoding="utf8") == "1girl, long hair, solo"


@pytest.mark.parametrize("flags, message", [
    (["--caption", "deepbooru"], "--caption deepbooru needs the DeepDanbooru tagger: add --deepdanbooru-models-path"),
    (["--caption", "deepbooru", "--deepdanbooru-models-path", "no-such-folder"],
     "The DeepDanbooru folder 'no-such-folder' does not exist"),
    (["--caption", "blip", "--deepdanbooru-models-path", "x"], "only matters with --caption deepbooru"),
    (["--split-oversized"], "--split-oversized needs a target size"),
    (["--focal-crop", "64x64", "--scale", "2"], "--focal-crop WxH sets the target size"),
    (["--focal-crop", "64x64", "--scale-to", "32x32"], "name two target sizes"),
    (["--focal-crop", "64x64", "--focal-edges-weight", "2"], "--focal-edges-weight must be in [0, 1]"),
    (["--split-oversized", "--scale-to", "64x64", "--overlap-ratio", "1"], "--overlap-ratio must be a number in"),
    (["--focal-debug"], "--focal-debug goes with --focal-crop"),
])
def test_bad_training_flags_are_refused_before_anything_is_written(folder, tmp_path, capsys, flags, message):
    assert main(["extras", str(folder), "-o", str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "out").exists()


def test_a_suffixed_name_that_would_overwrite_another_source_is_refused(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.new("RGB", (8, 8)).save(folder / "cat.png")
    Image.new("RGB", (8, 8)).save(folder / "cat-1.png")
    assert main(["extras", str(folder), "--upscaler", "None", "--flip", "both", "-o", str(tmp_path / "out")]) == 2
    assert "would both be written as" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_tiny_blip_captions_end_to_end(tmp_path, capsys):
    """The shipped mixkit-tiny-blip2 (Interrogate CLIP's default caption model) writes a non-empty caption."""
    image = tmp_path / "star.png"
    _square_on_black(image, (64, 64), (16, 16), 16)
    run(capsys, str(image), "--upscaler", "None", "--caption", "blip", "-o", str(tmp_path / "out" / "star.png"))
    caption = (tmp_path / "out" / "star.txt").read_text(encoding="utf8")
    assert caption and caption == caption.strip() and "\n" not in caption


def test_a_caption_model_that_cannot_load_leaves_nothing_behind(folder, tmp_path, capsys):
    model = tmp_path / "no-such-model"
    assert main(["extras", str(folder), "--upscaler", "None", "--caption", "blip", "--caption-model", str(model),
                 "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"mixkit: error: --caption-model {str(model)!r} cannot be loaded, so no image was "
                              "processed: "), err
    assert not (tmp_path / "out").exists()


def test_a_tagger_file_that_cannot_load_is_one_error_before_the_first_picture(folder, tmp_path, capsys, monkeypatch):
    """The tagger loads after the checks and before any picture is processed, not at the first caption."""
    import pipelines.extras_training as training

    monkeypatch.setattr(training, "run_training_steps", lambda *a, **k: pytest.fail("a picture was processed"))
    tagger = tmp_path / "torch_deepdanbooru"
    tagger.mkdir()
    file = tagger / "model-resnet_custom_v3.pt"
    file.write_bytes(b"<html>404</html>")  # a failed download: found by name, loads nothing
    assert main(["extras", str(folder), "--upscaler", "None", "--caption", "deepbooru", "--deepdanbooru-models-path",
                 str(tagger), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"mixkit: error: --deepdanbooru-models-path {str(file)!r} cannot be loaded, so no image "
                              f"was processed: {str(file)!r} is not a recognised checkpoint"), err
    assert not (tmp_path / "out").exists()


def test_the_tagger_is_loaded_before_the_output_folder_is_made(folder, deepbooru_folder, tmp_path, capsys,
                                                              monkeypatch):
    from mixkit.interrogate.deepbooru import DeepbooruModel

    out = tmp_path / "out"
    seen, real = [], DeepbooruModel.load
    monkeypatch.setattr(DeepbooruModel, "load", lambda self: seen.append(out.exists()) or real(self))
    run(capsys, str(folder / "wide.png"), "--upscaler", "None", "--caption", "deepbooru",
        "--deepdanbooru-models-path", str(deepbooru_folder), "-o", str(out))
    assert seen == [False]  # loaded once, before anything was written
    assert (out / "00000.txt").read_text(encoding="utf8") == "1girl, long hair, solo"


@pytest.mark.parametrize("flags", [["--focal-crop", "512x512"], ["--scale-to", "512x512", "--split-oversized"]])
def test_a_strip_that_would_be_resized_beyond_the_pixel_budget_is_refused_before_anything_is_written(tmp_path, capsys,
                                                                                                     flags):
    Image.new("RGB", (1, 70), "white").save(tmp_path / "strip.png")
    assert main(["extras", str(tmp_path / "strip.png"), "--upscaler", "None", "-o", str(tmp_path / "out"),
                 *flags]) == 2
    assert "would be resized to 512" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
