"""`mixkit generate --style NAME --styles-file styles.csv`: A1111's prompt styles merged before generating; the
infotext holds the merged prompts, as A1111's does."""

import pytest
from PIL import Image

from webui.cli import main


def test_styles_are_merged_into_the_prompts(tiny_sd1_dir, tmp_path, capsys):
    styles = tmp_path / "styles.csv"
    styles.write_text('name,prompt,negative_prompt\nPhoto,"photo of {prompt}",blurry\nSharp,8k,\n', encoding="utf-8")
    assert main(["generate", "a cat", "--negative", "ugly", "--style", "Photo", "--style", "Sharp",
                 "--styles-file", str(styles), "--model", str(tiny_sd1_dir), "--width", "64", "--height", "64",
                 "--steps", "1", "-o", str(tmp_path / "o")]) == 0
    path = capsys.readouterr().out.split()[0]
    assert Image.open(path).text["parameters"].startswith("photo of a cat, 8k\nNegative prompt: ugly, blurry\n")


@pytest.mark.parametrize("flags, message", [
    (["--style", "Photo"], "needs --styles-file"),
    (["--style", "Foto", "--styles-file", "{styles}"], "unknown style(s) ['Foto']"),
])
def test_bad_styles_are_refused_before_the_load(tmp_path, capsys, monkeypatch, flags, message):
    from pipelines.txt2img import TextToImage

    styles = tmp_path / "styles.csv"
    styles.write_text("name,prompt\nPhoto,photo\n", encoding="utf-8")
    monkeypatch.setattr(TextToImage, "from_pretrained", lambda *a, **k: pytest.fail("loaded the model"))
    flags = [flag.format(styles=styles) for flag in flags]
    assert main(["generate", "a", "-o", str(tmp_path / "o"), *flags]) == 2
    assert message in capsys.readouterr().err
