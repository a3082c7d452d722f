"""`mixkit img2img --input-dir DIR`: A1111's img2img Batch tab. One output per input, named after it as A1111 names
it, each the image a single `mixkit img2img` run makes; masks matched by stem; --png-info; every input checked first."""

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from webui.cli import main

from .cli_inputs import write_box_mask

RUN = ["--steps", "2", "--seed", "7", "--sampler", "Euler", "--cfg", "5"]


@pytest.fixture()
def folders(tmp_path):
    """Two inputs (a PNG and a 72x64 JPEG) and a mask for each, by stem."""
    inputs, masks = tmp_path / "in", tmp_path / "masks"
    inputs.mkdir()
    masks.mkdir()
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(inputs / "a.png")
    Image.fromarray(rng.integers(0, 256, (64, 72, 3), dtype=np.uint8)).save(inputs / "b.jpg")
    for name, size, box in (("a.png", (64, 64), (8, 8, 40, 40)), ("b.webp", (72, 64), (30, 10, 60, 50))):
        write_box_mask(masks / name, size, box)
    return tmp_path


def _batch(capsys, *argv) -> list[str]:
    return _batch_and_err(capsys, *argv)[0]


def _batch_and_err(capsys, *argv) -> tuple[list[str], str]:
    code = main(["img2img", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split(), captured.err


def test_each_input_gives_the_image_of_a_single_run_named_after_it(tiny_sd1_dir, folders, capsys):
    written = _batch(capsys, "--input-dir", str(folders / "in"), "a cat", "--model", str(tiny_sd1_dir), *RUN,
                     "--mask-dir", str(folders / "masks"), "--output-dir", str(folders / "out"))
    assert written == [str(folders / "out" / "a.png"), str(folders / "out" / "b.png")]
    for stem, source in (("a", "a.png"), ("b", "b.jpg")):
        single = _batch(capsys, str(folders / "in" / source), "a cat", "--model", str(tiny_sd1_dir), *RUN,
                        "--mask", str(folders / "masks" / ("a.png" if stem == "a" else "b.webp")),
                        "-o", str(folders / f"single-{stem}.png"))
        batch, alone = Image.open(folders / "out" / f"{stem}.png"), Image.open(single[0])
        assert batch.size == alone.size == ((64, 64) if stem == "a" else (72, 64))  # each input's own size
        assert batch.tobytes() == alone.tobytes()
        assert batch.text["parameters"] == alone.text["parameters"]
        assert "Mask blur: 4" in batch.text["parameters"]


def test_several_images_per_input_and_taken_names_get_numbers(tiny_sd1_dir, folders, capsys):
    out = folders / "out"
    out.mkdir()
    (out / "a-1.png").write_bytes(b"kept")
    written = _batch(capsys, "--input-dir", str(folders / "in"), "--model", str(tiny_sd1_dir), *RUN,
                     "--batch-count", "2", "-o", str(out))
    names = [path.rsplit("/", 1)[1] for path in written]
    assert names == ["a-1-1.png", "a-2.png", "b-1.png", "b-2.png"]  # A1111: stem-[generation_number], then -n
    assert (out / "a-1.png").read_bytes() == b"kept"
    seeds = [Image.open(out / name).text["parameters"].split("Seed: ")[1].split(",")[0] for name in names]
    assert seeds == ["7", "8", "7", "8"]


def test_png_info_takes_each_inputs_own_prompt_and_seed(tiny_sd1_dir, folders, capsys):
    made = folders / "made"
    _batch(capsys, str(folders / "in" / "a.png"), "red", "--model", str(tiny_sd1_dir), *RUN, "--seed", "11",
           "-o", str(made / "a.png"))
    Image.open(folders / "in" / "b.jpg").save(made / "b.png")  # no infotext: the flags alone
    written, err = _batch_and_err(capsys, "--input-dir", str(made), "photo of", "--model", str(tiny_sd1_dir), *RUN,
                                  "--png-info", "Prompt, Seed", "--output-dir", str(folders / "out"))
    first = Image.open(written[0]).text["parameters"]
    assert first.startswith("photo of red\n") and "Seed: 11," in first
    second = Image.open(written[1]).text["parameters"]
    assert second.startswith("photo of\n") and "Seed: 7," in second
    assert "b.png has no infotext; --png-info takes nothing for b.png" in err


def test_styles_wrap_each_inputs_own_prompt(tiny_sd1_dir, folders, capsys):
    made = folders / "made"
    _batch(capsys, str(folders / "in" / "a.png"), "red", "--model", str(tiny_sd1_dir), *RUN, "--negative", "dull",
           "-o", str(made / "a.png"))
    styles = folders / "styles.csv"
    styles.write_text('name,prompt,negative_prompt\nPhoto,"photo of {prompt}",blurry\n', encoding="utf-8")
    [path] = _batch(capsys, "--input-dir", str(made), "big", "--model", str(tiny_sd1_dir), *RUN, "--png-info",
                    "--style", "Photo", "--styles-file", str(styles), "-o", str(folders / "o"))
    assert Image.open(path).text["parameters"].startswith("photo of big red\nNegative prompt: dull, blurry\n")


def test_one_mask_in_the_mask_folder_serves_every_input(tiny_sd1_dir, folders, capsys):
    (folders / "masks" / "b.webp").unlink()
    Image.open(folders / "in" / "b.jpg").resize((64, 64)).save(folders / "in" / "b.jpg")
    written = _batch(capsys, "--input-dir", str(folders / "in"), "--model", str(tiny_sd1_dir), *RUN,
                     "--width", "64", "--height", "64", "--mask-dir", str(folders / "masks"), "-o", str(folders / "o"))
    assert len(written) == 2
    assert all("Mask blur: 4" in Image.open(path).text["parameters"] for path in written)


@pytest.mark.parametrize("prepare, argv, fragment", [
    (lambda f: (f / "masks" / "b.webp").rename(f / "masks" / "c.webp"), ["--mask-dir", "MASKS"],
     "--mask-dir MASKS has no mask for b.jpg; add a mask of the same name"),
    (lambda f: (f / "masks" / "b.png").write_bytes((f / "masks" / "a.png").read_bytes()), ["--mask-dir", "MASKS"],
     "has 2 masks for b.jpg (b.png, b.webp); keep one"),
    (lambda f: (f / "in" / "c.png").write_bytes(b"not a png"), [], "c.png"),
    (lambda f: (f / "masks" / "a.png").unlink(), ["--mask-dir", "MASKS"],  # b.webp, 72x64, for the 64x64 a.png too
     "--mask-dir b.webp for a.png: The mask is 72x64 but the image is 64x64: their aspect ratios differ"),
    (lambda f: None, ["--denoising-strength", "3"], "--input-dir a.png: --denoising-strength must be a number in [0, 1]"),
    (lambda f: None, ["--png-info", "Model hash"], "--png-info Model hash: a batch runs on the one --model"),
    (lambda f: None, ["--png-info", "Clip skip"], "--png-info 'Clip skip' is not one of Prompt, Negative prompt"),
    (lambda f: None, ["--mask", "MASKS/a.png"], "with --input-dir use --mask-dir DIR"),
    (lambda f: None, ["-o", "x.png"], "a batch writes one file per input, named after it; give a folder"),
    (lambda f: None, ["--mask-blur", "2"], "--mask-blur: inpaint flag without --mask"),
])
def test_a_bad_input_stops_the_batch_before_any_work(folders, capsys, monkeypatch, prepare, argv, fragment):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    prepare(folders)
    argv = [value.replace("MASKS", str(folders / "masks")) for value in argv]
    assert main(["img2img", "--input-dir", str(folders / "in"), *RUN, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mixkit: error:") and fragment.replace("MASKS", str(folders / "masks")) in err[-1], err
    assert not (folders / "outputs").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--mask-dir", "."], "--mask-dir work on a folder of inputs; add --input-dir DIR"),
    ([], "needs an init image: IMAGE, or --input-dir DIR"),
    (["--input-dir", ".", "IMAGE", "prompt"], "--input-dir takes the place of IMAGE; give only the prompt"),
])
def test_batch_flags_that_do_not_fit_together_are_refused(capsys, argv, fragment):
    assert main(["img2img", *argv]) == 2
    assert fragment in capsys.readouterr().err


def test_a_controlnet_unit_without_a_picture_follows_each_input(tiny_sd1_dir, folders, capsys):
    """As in A1111's batch with sd-webui-controlnet: the unit's picture is the input being redrawn."""
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    model = build_tiny_controlnet(folders / "tiny_canny", seed=1)
    written = _batch(capsys, "--input-dir", str(folders / "in"), "--model", str(tiny_sd1_dir), *RUN,
                     "--controlnet", str(model), "--cn-module", "invert", "-o", str(folders / "o"))
    for path, source in zip(written, ("a.png", "b.jpg")):
        single = _batch(capsys, str(folders / "in" / source), "--model", str(tiny_sd1_dir), *RUN,
                        "--controlnet", str(model), "--cn-module", "invert", "-o", str(folders / f"one-{source}.png"))
        assert Image.open(path).tobytes() == Image.open(single[0]).tobytes()
        assert 'ControlNet 0: "Module: invert, Model: tiny_canny' in Image.open(path).text["parameters"]


def test_a_random_seed_is_drawn_once_for_the_whole_batch(tiny_sd1_dir, folders, capsys):
    """A1111's process_batch fixes the seed (and variation seed) once before the loop: every input of a batch run with
    seed -1 shares one seed, so the batch can be redone with the seed its infotexts show."""
    written = _batch(capsys, "--input-dir", str(folders / "in"), "--model", str(tiny_sd1_dir), *RUN, "--seed", "-1",
                     "--subseed", "-1", "--subseed-strength", "0.5", "-o", str(folders / "o"))
    texts = [Image.open(path).text["parameters"] for path in written]
    seeds = {text.split("Seed: ")[1].split(",")[0] for text in texts}
    subseeds = {text.split("Variation seed: ")[1].split(",")[0] for text in texts}
    assert len(written) == 2 and len(seeds) == 1 and len(subseeds) == 1, texts


def test_scale_by_sizes_each_input_from_its_own_size(tiny_sd1_dir, folders, capsys):
    """A1111's batch with Resize by: each input's sides times the scale (64x64 and 72x64 x 1.5: 96x96 and 104x96)."""
    written = _batch(capsys, "--input-dir", str(folders / "in"), "--model", str(tiny_sd1_dir), *RUN, "--scale-by", "1.5",
                     "-o", str(folders / "o"))
    assert [Image.open(path).size for path in written] == [(96, 96), (104, 96)]


def test_before_color_correction_copies_are_named_after_each_output_and_never_replace_one(tiny_sd1_dir, tmp_path,
                                                                                           capsys):
    """The copy of `a.png`'s result is `a-before-color-correction.png`; an input already named so (it sorts first,
    and its result takes that name) pushes the copy on to `-1`, as a taken result name is."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    rng = np.random.default_rng(2)
    for name in ("a-before-color-correction.png", "a.png"):
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(inputs / name)
    written = _batch(capsys, "--input-dir", str(inputs), "a cat", "--model", str(tiny_sd1_dir), *RUN,
                     "--denoising-strength", "0.7", "--color-correction", "--save-before-color-correction",
                     "--output-dir", str(out))
    assert written == [str(out / "a-before-color-correction.png"), str(out / "a.png")]
    assert sorted(p.name for p in out.iterdir()) == [
        "a-before-color-correction-1.png", "a-before-color-correction-before-color-correction.png",
        "a-before-color-correction.png", "a.png"]
    pipe = ImageToImage.from_pretrained(tiny_sd1_dir)
    common = dict(prompt="a cat", steps=2, seed=7, sampler="Euler", cfg_scale=5, denoising_strength=0.7)
    for source, result, copy in (("a-before-color-correction.png", "a-before-color-correction.png",
                                  "a-before-color-correction-before-color-correction.png"),
                                 ("a.png", "a.png", "a-before-color-correction-1.png")):
        init = Image.open(inputs / source)
        corrected = pipe(init_images=[init], color_correction=True, **common)
        plain = pipe(init_images=[init], **common)
        assert Image.open(out / result).convert("RGB").tobytes() == corrected.images[0].tobytes()
        assert Image.open(out / copy).convert("RGB").tobytes() == plain.images[0].tobytes()
