"""`mixkit extras`: the Extras tab's upscale on one image, several or a folder; the API's sizes, crop and
postprocessing text, the source's infotext kept, A1111's file names; every source checked before the first write."""

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from mixkit.io.images import load_image
from pipelines.upscale import upscale_image
from webui.cli import main

INFOTEXT = "a cat\nSteps: 3, Sampler: Euler, Seed: 1, Size: 100x75"


@pytest.fixture()
def sources(tmp_path):
    """A folder with a 100x75 PNG holding an infotext and a 48x40 JPEG without one."""
    folder = tmp_path / "in"
    folder.mkdir()
    info = PngInfo()
    info.add_text("parameters", INFOTEXT)
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (75, 100, 3), dtype=np.uint8)).save(folder / "cat.png",
                                                                                                 pnginfo=info)
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(folder / "dog.jpg")
    return folder


def extras(capsys, *args) -> list[str]:
    code = main(["extras", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()


def test_one_image_is_upscaled_as_the_api_does_and_named_by_the_counter(sources, tmp_path, capsys):
    out = tmp_path / "out"
    assert extras(capsys, str(sources / "cat.png"), "--scale", "2", "-o", str(out)) == [str(out / "00000.png")]
    assert extras(capsys, str(sources / "cat.png"), "--upscaler", "Nearest", "-o", str(out)) == [str(out / "00001.png")]
    saved = Image.open(out / "00000.png")
    expected = upscale_image(load_image(sources / "cat.png"), 2.0, upscaler="Lanczos")
    assert saved.size == (200, 144)  # A1111's sides floored to a multiple of 8
    assert saved.convert("RGB").tobytes() == expected.tobytes()
    assert saved.text == {"parameters": INFOTEXT,
                          "postprocessing": "Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos"}
    assert Image.open(out / "00001.png").text["postprocessing"].endswith("Postprocess upscaler: Nearest")


def test_no_pnginfo_and_save_txt_decide_where_the_texts_go_as_a1111s_extras_save(sources, tmp_path, capsys):
    bare, texts = tmp_path / "bare.png", tmp_path / "texts"
    extras(capsys, str(sources / "cat.png"), "--scale", "2", "--no-pnginfo", "-o", str(bare))
    assert Image.open(bare).text == {} and not bare.with_suffix(".txt").exists()  # no chunk at all, as A1111's
    (written,) = extras(capsys, str(sources / "cat.png"), "--scale", "2", "--save-txt", "-o", str(texts))
    assert Image.open(written).text["parameters"] == INFOTEXT
    assert (texts / "00000.txt").read_text(encoding="utf-8") == (
        "Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos\n")


def test_a_folder_keeps_its_names_and_scale_to_crops_centred(sources, tmp_path, capsys):
    out = tmp_path / "out"
    assert extras(capsys, str(sources), "--scale-to", "128x96", "-o", str(out)) == [str(out / "cat.png"),
                                                                                    str(out / "dog.png")]
    cat, dog = Image.open(out / "cat.png"), Image.open(out / "dog.png")
    assert cat.size == dog.size == (128, 96)
    text = "Postprocess upscale to: 128x96, Postprocess crop to: 128x96, Postprocess upscaler: Lanczos"
    assert cat.text == {"parameters": INFOTEXT, "postprocessing": text} and dog.text == {"postprocessing": text}
    # the dog, 48x40, covers 128x96 at max(128/48, 96/40) = 2.667: 128x104 after A1111's flooring, cut to 96 rows
    covering = upscale_image(load_image(sources / "dog.jpg"), 128 / 48)
    assert covering.size == (128, 104)
    assert dog.convert("RGB").tobytes() == covering.crop((0, 4, 128, 100)).tobytes()


def test_no_crop_keeps_the_covering_size(sources, tmp_path, capsys):
    [path] = extras(capsys, str(sources / "dog.jpg"), "--scale-to", "128x96", "--no-crop", "-o", str(tmp_path / "d.png"))
    assert Image.open(path).size == (128, 104)
    assert Image.open(path).text == {"postprocessing": "Postprocess upscale to: 128x96, Postprocess upscaler: Lanczos"}


def test_the_none_upscaler_copies_the_image_with_its_chunks(sources, tmp_path, capsys):
    [path] = extras(capsys, str(sources / "cat.png"), "--upscaler", "None", "-o", str(tmp_path / "o"))
    copy = Image.open(path)
    assert copy.convert("RGB").tobytes() == Image.open(sources / "cat.png").convert("RGB").tobytes()
    assert copy.text == {"parameters": INFOTEXT, "postprocessing": ""}


@pytest.mark.parametrize("extra, message", [
    (["--scale", "9"], "cat.png: --scale must be a number in (0, 8.0], got 9.0"),
    (["--scale-to", "4000x4000"], "needs an upscale by 53.3, over the limit of 8.0; choose a smaller --scale-to"),
    (["--upscaler", "ESRGAN"], "Unknown upscaler 'ESRGAN'. Valid names: 'Lanczos', 'Nearest', 'Bicubic'"),
    (["--gfpgan-visibility", "0.5"], "--gfpgan-visibility=0.5: Face restoration model 'GFPGAN' is not available "
                                     "(available: none); start with --gfpgan-models-path FOLDER"),
    (["--upscaler-2", "Nearest", "--upscaler-2-visibility", "0.3"], "--upscaler-2-visibility=0.3, --upscaler-2="),
    (["--no-crop"], "--no-crop goes with --scale-to WxH"),
    (["--scale", "3", "--scale-to", "64x64"], "--scale and --scale-to both say how large the result is; give one"),
    (["-o", "OUT/one.png"], "a batch of 2 images needs an output folder"),
    (["BROKEN"], "broken.png"),  # checked before the first image is written
])
def test_bad_input_is_refused_before_anything_is_written(sources, tmp_path, capsys, extra, message):
    (tmp_path / "broken.png").write_text("not an image")
    inputs = [str(tmp_path / "broken.png")] if extra == ["BROKEN"] else []  # a second input, after the folder
    extra = [v.replace("OUT", str(tmp_path / "out")) for v in extra if v != "BROKEN"]
    assert main(["extras", str(sources), *inputs, "-o", str(tmp_path / "out"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mixkit: error:") and message in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_batch_that_would_overwrite_or_collide_is_refused(sources, tmp_path, capsys):
    assert main(["extras", str(sources), "-o", str(sources)]) == 2
    assert "would overwrite its source; choose another output folder" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    Image.new("RGB", (8, 8)).save(other / "cat.webp")
    assert main(["extras", str(sources / "cat.png"), str(other / "cat.webp"), "-o", str(tmp_path / "o")]) == 2
    assert "would both be written as" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert sorted(p.name for p in sources.iterdir()) == ["cat.png", "dog.jpg"]


def test_a_missing_input_or_an_empty_folder_is_named(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["extras", str(tmp_path / "missing.png")]) == 2
    assert "missing.png' does not exist" in capsys.readouterr().err
    assert main(["extras", str(tmp_path / "empty")]) == 2
    assert "is a folder with no images" in capsys.readouterr().err


def test_inputs_named_after_an_option_are_inputs_too(sources, tmp_path, capsys):
    out = tmp_path / "out"
    assert extras(capsys, str(sources / "cat.png"), "-o", str(out), str(sources / "dog.jpg")) == [
        str(out / "cat.png"), str(out / "dog.png")]
    assert main(["extras", str(sources / "cat.png"), "-o", str(out), "--sharpen"]) == 2
    assert "unrecognized arguments: --sharpen" in capsys.readouterr().err


@pytest.fixture()
def registry_restored():
    """The CLI registers model files into the process's registry; put it back as it was after the test."""
    from pipelines.model_upscale import LOADED
    from pipelines.upscale import UPSCALERS

    before = set(UPSCALERS.names())
    yield
    for name in set(UPSCALERS.names()) - before:
        UPSCALERS.unregister(name)
    LOADED.clear()


def test_a_model_file_from_esrgan_models_path_upscales_by_its_name(sources, tmp_path, capsys, registry_restored):
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import ModelUpscaler

    models = tmp_path / "ESRGAN"
    models.mkdir()
    model_file = save_upscaler(tiny_upscaler(TINY_RRDB, seed=4), models / "4x-UltraSharp.pth", "esrgan")
    [path] = extras(capsys, str(sources / "dog.jpg"), "--esrgan-models-path", str(models), "--upscaler",
                    "4x-UltraSharp", "--scale", "2", "--esrgan-tile", "16", "--esrgan-tile-overlap", "4",
                    "-o", str(tmp_path / "o"))
    saved = Image.open(path)
    expected = upscale_image(load_image(sources / "dog.jpg"), 2.0,
                             upscaler=ModelUpscaler(model_file, tile_size=16, tile_overlap=4))
    assert saved.size == (96, 80) and saved.convert("RGB").tobytes() == expected.tobytes()
    assert saved.text["postprocessing"] == "Postprocess upscale by: 2.0, Postprocess upscaler: 4x-UltraSharp"


@pytest.mark.parametrize("flag, file, layout, name", [
    ("--swinir-models-path", "SwinIR_4x.pth", "swinir", "SwinIR 4x"), ("--dat-models-path", "DAT_x2.pth", "dat", "DAT x2"),
    ("--esrgan-models-path", "4xNomos8kHAT-L.pth", "hat", "4xNomos8kHAT-L"),
    ("--scunet-models-path", "scunet_color_real_psnr.pth", "scunet", "ScuNET PSNR")])
def test_a_transformer_file_from_its_models_path_upscales_by_a1111s_name(sources, tmp_path, capsys, registry_restored,
                                                                         flag, file, layout, name):
    from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_HAT, TINY_SCUNET, TINY_SWINIR, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import ModelUpscaler

    models = tmp_path / "models"
    models.mkdir()
    config = {"swinir": TINY_SWINIR, "dat": TINY_DAT, "hat": TINY_HAT, "scunet": TINY_SCUNET}[layout]
    model_file = save_upscaler(tiny_upscaler(config, seed=4), models / file, layout, wrapper="params_ema")
    # each network tiles by its own A1111 option pair (--swin-tile / --dat-tile / --scunet-tile; HAT the ESRGAN pair,
    # as A1111 runs it from its ESRGAN folder), not another network's
    tile_flag = {"swinir": "--swin-tile", "dat": "--dat-tile", "hat": "--esrgan-tile", "scunet": "--scunet-tile"}[layout]
    other_flag = "--dat-tile" if layout == "hat" else "--esrgan-tile"
    [path] = extras(capsys, str(sources / "dog.jpg"), flag, str(models), "--upscaler", name, "--scale", "2",
                    tile_flag, "16", f"{tile_flag}-overlap", "4", other_flag, "0", "-o", str(tmp_path / "o"))
    saved = Image.open(path)
    expected = upscale_image(load_image(sources / "dog.jpg"), 2.0,
                             upscaler=ModelUpscaler(model_file, tile_size=16, tile_overlap=4))
    untiled = upscale_image(load_image(sources / "dog.jpg"), 2.0, upscaler=ModelUpscaler(model_file, tile_size=0))
    assert expected.tobytes() != untiled.tobytes()  # so the comparison below tells the flags apart
    assert saved.size == (96, 80) and saved.convert("RGB").tobytes() == expected.tobytes()
    assert saved.text["postprocessing"] == f"Postprocess upscale by: 2.0, Postprocess upscaler: {name}"


def test_bad_tiling_flags_name_the_flag(sources, tmp_path, capsys):
    assert main(["extras", str(sources), "--esrgan-tile", "16", "--esrgan-tile-overlap", "8", "-o",
                 str(tmp_path / "o")]) == 2
    assert "--esrgan-tile-overlap must be an integer in [0, 7] for --esrgan-tile 16" in capsys.readouterr().err
    assert main(["extras", str(sources), "--swin-tile", "16", "--swin-tile-overlap", "8", "-o",
                 str(tmp_path / "o")]) == 2
    assert "--swin-tile-overlap must be an integer in [0, 7] for --swin-tile 16" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--scale", "--gfpgan-visibility", "--codeformer-visibility",
                                  "--upscaler-2-visibility"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
def test_a_number_flag_that_is_not_finite_is_refused_naming_it(sources, tmp_path, capsys, flag, value):
    """float() reads them; they reached the API's request model, whose refusal was a multi-line pydantic dump."""
    with pytest.raises(SystemExit) as exit_:
        main(["extras", str(sources), "-o", str(tmp_path / "out"), flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}: {value!r} is not a finite number" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_counter_name_taken_meanwhile_by_another_writer_is_not_overwritten(sources, tmp_path, capsys, monkeypatch):
    """Two Extras saves (browser tabs, `mixkit extras` runs) listing the folder at once picked the same 00000.png;
    the second os.replace dropped the first upscale. The web UI's Extras saves through the same function."""
    import pipelines.png

    out = tmp_path / "out"
    out.mkdir()
    answers, real = [out / "00000-0.png"], pipelines.png.next_image_path

    def listing_before_the_other_write(folder, seed):
        if answers:  # the other writer's file lands right after this listing
            (out / "00000.png").write_bytes(b"their upscale")
            return answers.pop()
        return real(folder, seed)

    monkeypatch.setattr(pipelines.png, "next_image_path", listing_before_the_other_write)
    assert extras(capsys, str(sources / "dog.jpg"), "-o", str(out)) == [str(out / "00001.png")]
    assert (out / "00000.png").read_bytes() == b"their upscale"
    assert sorted(p.name for p in out.iterdir()) == ["00000.png", "00001.png"]


def test_help_names_a1111s_upscaler_names_and_refuses_only_the_second_upscaler(capsys):
    with pytest.raises(SystemExit) as leaving:
        main(["extras", "--help"])
    assert leaving.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines where it likes
    assert "A1111's release files also by A1111's names: 'R-ESRGAN 4x+', 'SwinIR 4x', 'DAT x4'" in text
    not_supported = text.split("not supported by mixkit yet:", 1)[1].split(" -o ", 1)[0]
    flags = [word for word in not_supported.split() if word.startswith("--")]
    assert flags == ["--upscaler-2", "--upscaler-2-visibility"]
