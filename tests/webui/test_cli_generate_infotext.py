"""`mixkit generate --infotext`: an image made by `mixkit generate` is made again bit for bit from its own PNG;
flags win over the infotext; what the command cannot honour is refused or named in a warning."""

import pytest
from PIL import Image

from webui.cli import main

SIZE = ["--width", "64", "--height", "64", "--steps", "3"]


def _generate(capsys, *args) -> str:
    assert main(["generate", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out.split()[0], captured.err


@pytest.mark.parametrize("flags", [
    ["--sampler", "DDIM", "--eta", "0.5"],
    ["--sampler", "Euler a", "--eta", "0.6", "--ensd", "31337"],
    ["--sampler", "DPM++ 2M Karras", "--clip-skip", "2", "--cfg", "4.5", "--negative", "blurry"],
    ["--sampler", "Euler", "--refiner-switch-by-sample-steps"],  # written (A1111: with or without a refiner), read back
    # A1111's Extra seed options: Variation seed / strength and Seed resize from, written and read back
    ["--sampler", "Euler a", "--subseed", "5", "--subseed-strength", "0.35", "--seed-resize-from", "48x80"],
])
def test_an_image_is_reproduced_bit_for_bit_from_its_own_png(tiny_sd1_dir, tmp_path, capsys, flags):
    original, _ = _generate(capsys, "a red circle", "--model", str(tiny_sd1_dir), "--seed", "77",
                            "-o", str(tmp_path / "a"), *SIZE, *flags)
    again, err = _generate(capsys, "--infotext", original, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b"))
    assert "warning" not in err
    first, second = Image.open(original), Image.open(again)
    assert first.text["parameters"] == second.text["parameters"]
    assert first.tobytes() == second.tobytes()
    by_steps = "Refiner switch by sampling steps: True" in first.text["parameters"]
    assert by_steps == ("--refiner-switch-by-sample-steps" in flags)
    variation = "Variation seed: 5, Variation seed strength: 0.35, Seed resize from: 48x80," in first.text["parameters"]
    assert variation == ("--subseed" in flags)


@pytest.mark.parametrize("flags, fragment", [
    (["--subseed-strength", "1.5"], "must be a number in [0, 1]"),
    (["--seed-resize-from", "50x64"], "'Resize seed from' 50x64"),
])
def test_bad_extra_seed_flags_are_refused_before_the_load(tmp_path, capsys, monkeypatch, flags, fragment):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    assert main(["generate", "x", *SIZE, *flags, "-o", str(tmp_path / "o")]) == 2
    assert fragment in capsys.readouterr().err


def test_a_seed_resize_that_is_not_a_size_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "x", "--seed-resize-from", "48"])
    assert "is not WIDTHxHEIGHT, e.g. 512x768" in capsys.readouterr().err


def test_flags_win_over_the_infotext(tiny_sd1_dir, tmp_path, capsys):
    text = ("a blue square\nNegative prompt: dark\nSteps: 2, Sampler: Euler a, Schedule type: Automatic, "
            "CFG scale: 6, Seed: 3, Size: 64x64, Clip skip: 2, Eta: 0.5, ENSD: 31337, RNG: CPU")
    path, _ = _generate(capsys, "--infotext", text, "--model", str(tiny_sd1_dir), "--seed", "4", "--steps", "3",
                        "--sampler", "Euler", "-o", str(tmp_path / "o"))
    written = Image.open(path).text["parameters"]
    assert written.startswith("a blue square\nNegative prompt: dark\nSteps: 3, Sampler: Euler,")
    assert "Seed: 4," in written and "CFG scale: 6," in written and "Clip skip: 2" in written


def test_keys_it_cannot_honour_are_named_on_stderr(tiny_sd1_dir, tmp_path, capsys):
    # (Face restoration is honoured now: tests/webui/test_cli_face_restoration.py)
    text = "x\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, Model hash: 0123456789"
    _, err = _generate(capsys, "--infotext", text, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"))
    assert "RNG: GPU" in err  # A1111's default noise source, which mixkit does not draw
    assert "Model hash 0123456789" in err and "--model" in err


@pytest.mark.parametrize("extra, fragment", [
    ("Denoising strength: 0.5, Hires upscale: 2, Hires CFG Scale: 5", "hires-fix settings"),  # no flag for it
    ("Hires upscale: 2, Hires upscaler: Latent", "hires keys without the Denoising strength"),
    ("ControlNet 0: \"Module: canny, Model: tiny_canny\"", "--infotext's ControlNet 0: ControlNet model 'tiny_canny' is no file"),
    ("Denoising strength: 0.6", "img2img"),
])
def test_what_would_change_the_image_is_refused_before_the_load(tmp_path, capsys, monkeypatch, extra, fragment):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    text = f"x\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, {extra}"
    assert main(["generate", "--infotext", text, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mixkit: error: --infotext") and fragment in err[-1]
    assert not (tmp_path / "o").exists()


def test_no_prompt_and_no_infotext_is_a_usage_error(capsys):
    assert main(["generate"]) == 2
    assert "needs a prompt" in capsys.readouterr().err


def test_a_legacy_eight_digit_model_hash_names_the_same_single_file(tmp_path):
    # Pre-2023 A1111 infotexts carry the legacy hash (sha256 of 64 KiB at 1 MiB); A1111 still matches it.
    from types import SimpleNamespace

    from mixkit.io.hashing import legacy_a1111_hash
    from webui.cli.generate_infotext import _same_checkpoint

    path = tmp_path / "model.safetensors"
    path.write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    model = SimpleNamespace(model_hash="0123456789", source=str(path))
    assert _same_checkpoint("0123456789", model) and _same_checkpoint(legacy_a1111_hash(path), model)
    assert not _same_checkpoint("deadbeef", model) and not _same_checkpoint("9876543210", model)
    assert not _same_checkpoint("deadbeef", SimpleNamespace(model_hash="0123456789", source="org/hub-id"))


def test_an_infotext_saved_as_a_text_file_is_read(tiny_sd1_dir, tmp_path, capsys):
    # A1111's "save_txt" writes each image's infotext next to it as NAME.txt.
    text_file = tmp_path / "00001-77.txt"
    text_file.write_text("a blue square\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 77, Size: 64x64, RNG: CPU\n")
    path, _ = _generate(capsys, "--infotext", str(text_file), "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"))
    written = Image.open(path).text["parameters"]
    assert written.startswith("a blue square\nSteps: 2, Sampler: Euler,") and "Seed: 77" in written
    (tmp_path / "empty.txt").write_text("  \n")
    assert main(["generate", "--infotext", str(tmp_path / "empty.txt")]) == 2
    assert "text file is empty" in capsys.readouterr().err


def test_a_vae_named_without_hash_that_is_not_loaded_is_named_in_a_warning(tiny_sd1_dir, tmp_path, capsys):
    # A folder VAE has a name but no "VAE hash" in the infotext; the names are compared then.
    text = "x\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, VAE: other-vae, RNG: CPU"
    _, err = _generate(capsys, "--infotext", text, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"))
    assert "its VAE 'other-vae' is not the loaded one" in err and "--vae" in err


@pytest.mark.parametrize("name", ["missing_params.txt", "outputs/00000-42.pn", "~/nowhere/shot.png", "shot.png",
                                  "{tmp}/typo.pgn"])
def test_a_value_that_names_a_missing_file_is_refused_not_taken_as_the_prompt(tmp_path, capsys, monkeypatch, name):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    monkeypatch.chdir(tmp_path)
    value = name.format(tmp=tmp_path)
    assert main(["generate", "--infotext", value, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mixkit: error: --infotext {value}: no such file; pass an existing image or .txt file, or the "
                   "infotext text itself (with its 'Steps: ...' line)"]
    assert not (tmp_path / "o").exists()


def test_a_folder_is_refused_by_name(tmp_path, capsys):
    assert main(["generate", "--infotext", str(tmp_path), "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (f"mixkit: error: --infotext {tmp_path}: is a folder; pass one image "
                                               "in it (or its .txt file), or the infotext text")


@pytest.mark.parametrize("text, prompt", [
    # one line with A1111's parameters line: a path separator or a suffix-like ending inside it does not matter
    ("Steps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, Model: sd/v1-5.ckpt", ""),
    ("Steps: 2, Sampler: Euler, CFG scale: 5, Lora hashes: \"" + ", ".join(f"style{i}: 0123456789ab" for i in range(30))
     + "\", Seed: 1, Size: 64x64", ""),  # longer than a file name may be
    ("a cat on a mat.png\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64", "a cat on a mat.png"),
    ("black/white cat\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64", "black/white cat"),
    # prompt-only infotexts (A1111 reads a text without parameters line as the prompt): no path-like look
    ("a red circle, (blue:1.2), v1.5", "a red circle, (blue:1.2), v1.5"),
    ("a \\(cat\\) on a mat, 4k.", "a \\(cat\\) on a mat, 4k."),
])
def test_infotext_text_is_still_read_as_text(text, prompt):
    from pipelines.infotext import parse_infotext
    from webui.cli.generate_infotext import read_infotext_argument

    assert read_infotext_argument(text) == text
    assert parse_infotext(read_infotext_argument(text))["Prompt"] == prompt


def test_an_existing_file_with_a_path_like_name_is_read(tmp_path, monkeypatch):
    from webui.cli.generate_infotext import read_infotext_argument

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "00001-7.txt").write_text("x\nSteps: 2, Sampler: Euler, CFG scale: 5\n")
    monkeypatch.chdir(tmp_path)
    assert read_infotext_argument("sub/00001-7.txt").startswith("x\nSteps: 2,")


def test_an_nv_image_is_reproduced_from_its_png_and_the_flag_wins_over_its_rng(tiny_sd1_dir, tmp_path, capsys):
    original, _ = _generate(capsys, "a red circle", "--model", str(tiny_sd1_dir), "--seed", "77", "--sampler",
                            "Euler a", "--rng-source", "NV", "-o", str(tmp_path / "a"), *SIZE)
    assert "RNG: NV" in Image.open(original).text["parameters"]
    again, err = _generate(capsys, "--infotext", original, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b"))
    assert "warning" not in err
    assert Image.open(again).tobytes() == Image.open(original).tobytes()
    cpu, _ = _generate(capsys, "--infotext", original, "--rng-source", "CPU", "--model", str(tiny_sd1_dir),
                       "-o", str(tmp_path / "c"))
    assert "RNG: CPU" in Image.open(cpu).text["parameters"]
    assert Image.open(cpu).tobytes() != Image.open(original).tobytes()


def test_an_infotext_rng_that_is_no_source_is_refused_naming_the_flag(tiny_sd1_dir, tmp_path, capsys):
    text = "x\nSteps: 2, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 64x64, RNG: XPU"
    assert main(["generate", "--infotext", text, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o")]) != 0
    assert "--rng-source must be one of 'GPU', 'CPU', 'NV'" in capsys.readouterr().err
