"""`--infotext-omit` (webui/cli/infotext_flags.py): the CLI's images leave out what the flag names (A1111's Settings >
Infotext switches), in generate and img2img alike; an unknown name is refused listing the known ones."""

import pytest
from PIL import Image

from pipelines.infotext import parse_infotext
from webui.cli import main

SIZE = ["--width", "32", "--height", "32", "--steps", "1", "--seed", "5"]


def _written(capsys, *args) -> dict:
    assert main([*args]) == 0, capsys.readouterr().err
    path = capsys.readouterr().out.split()[0]
    return parse_infotext(Image.open(path).text["parameters"])


def test_generate_and_img2img_leave_out_what_is_named(tiny_sd1_dir, tmp_path, capsys):
    full = _written(capsys, "generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "full.png"), *SIZE)
    assert {"Model", "Model hash", "Version"} <= set(full)
    private = _written(capsys, "generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "private.png"),
                       *SIZE, "--infotext-omit", "model,model-hash", "--infotext-omit", "version")
    assert private == {key: value for key, value in full.items() if key not in ("Model", "Model hash", "Version")}
    redone = _written(capsys, "img2img", str(tmp_path / "full.png"), "a dog", "--model", str(tiny_sd1_dir),
                      "-o", str(tmp_path / "redone.png"), *SIZE, "--infotext-omit", "model-hash")
    assert "Model hash" not in redone and redone["Model"] == full["Model"]


def test_an_unknown_name_is_refused_listing_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", "a cat", "--infotext-omit", "model,seed"])
    assert exit_info.value.code == 2
    assert ("'seed' is not something the infotext can leave out; choose from model, model-hash, vae, vae-hash, version, "
            "lora-hashes, ti-hashes, bundled-ti") in capsys.readouterr().err


def test_a_user_key_is_read_back_silently(tiny_sd1_dir, tmp_path, capsys):
    """An infotext written with add_user_name_to_info on ends with `User: alice`; it says who made the image and
    changes nothing in a remake, so `--infotext` does not list it among the keys it could not honour."""
    text = ("a cat\nSteps: 1, Sampler: Euler, CFG scale: 5, Seed: 5, Size: 32x32, RNG: CPU, Version: mixkit 0.1.0, "
            "User: alice")
    assert main(["generate", "--infotext", text, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o")]) == 0
    assert "not honoured" not in capsys.readouterr().err


def test_no_pnginfo_and_save_txt_decide_where_the_infotext_goes(tiny_sd1_dir, tmp_path, capsys):
    assert main(["generate", "a cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"), *SIZE,
                 "--batch-size", "2", "--no-pnginfo", "--save-txt"]) == 0, capsys.readouterr().err
    paths = capsys.readouterr().out.split()
    assert [path.rsplit("/", 1)[1] for path in paths] == ["00000-5.png", "00001-6.png"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["00000-5.png", "00000-5.txt", "00001-6.png",
                                                                      "00001-6.txt"]
    for path in paths:
        assert "parameters" not in Image.open(path).info
    text = (tmp_path / "out" / "00001-6.txt").read_text(encoding="utf-8")
    assert text.endswith("\n") and parse_infotext(text)["Seed"] == "6"
    # the .txt reads back as --infotext (A1111's save_txt files are infotexts)
    again = _written(capsys, "generate", "--infotext", str(tmp_path / "out" / "00001-6.txt"), "--model",
                     str(tiny_sd1_dir), "-o", str(tmp_path / "again.png"))
    assert again["Seed"] == "6" and (again["Size-1"], again["Size-2"]) == ("32", "32")
    assert not (tmp_path / "again.txt").exists()  # without --save-txt: the PNG chunk only


def test_img2img_takes_no_pnginfo_too(tiny_sd1_dir, tmp_path, capsys):
    Image.new("RGB", (32, 32), (200, 10, 10)).save(tmp_path / "in.png")
    assert main(["img2img", str(tmp_path / "in.png"), "a dog", "--model", str(tiny_sd1_dir), "-o",
                 str(tmp_path / "dog.png"), *SIZE, "--no-pnginfo", "--save-txt"]) == 0, capsys.readouterr().err
    assert "parameters" not in Image.open(tmp_path / "dog.png").info
    assert (tmp_path / "dog.txt").read_text(encoding="utf-8").startswith("a dog\n")
