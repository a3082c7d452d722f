"""A1111 prompt styles (`modules/styles.py` v1.10): `merge_prompts` replaces `{prompt}` or appends ", style"
(both stripped, empty parts left out); styles apply in order; `styles.csv` is read with a header, utf-8-sig and
skipinitialspace, the old "name, text" columns included."""

import pytest

from mixkit.prompts.styles import StyleLibrary, apply_style_texts, merge_style, read_styles_csv


@pytest.mark.parametrize("style, prompt, expected", [
    ("masterpiece", "a cat", "a cat, masterpiece"),
    ("  masterpiece ", " a cat  ", "a cat, masterpiece"),  # both stripped before joining
    ("masterpiece", "", "masterpiece"),  # an empty prompt is left out
    ("", "a cat", "a cat"),
    ("photo of {prompt}, 8k", "a cat", "photo of a cat, 8k"),
    ("{prompt} {prompt}", " x ", " x   x "),  # replaced verbatim, every occurrence, no stripping
    ("{prompt}", "", ""),
])
def test_merge_is_a1111s(style, prompt, expected):
    assert merge_style(style, prompt) == expected


def test_styles_apply_in_order():
    assert apply_style_texts("a cat", ["photo of {prompt}", "8k"]) == "photo of a cat, 8k"
    assert apply_style_texts("a cat", ["8k", "photo of {prompt}"]) == "photo of a cat, 8k"
    assert apply_style_texts("a cat", ["8k", "[{prompt}]"]) == "[a cat, 8k]"


def test_styles_csv_formats(tmp_path):
    path = tmp_path / "styles.csv"
    path.write_text('\ufeffname,prompt,negative_prompt\nPhoto, "photo of {prompt}, sharp", "blurry, ugly"\n'
                    'Plain,8k,\n', encoding="utf-8")
    library = StyleLibrary(path)
    assert library.names() == ["Photo", "Plain"]
    assert library.apply("a cat", "lowres", ["Photo", "Plain"]) == ("photo of a cat, sharp, 8k", "lowres, blurry, ugly")
    old = tmp_path / "old.csv"
    old.write_text("name,text\nOld,vintage\n", encoding="utf-8")
    assert read_styles_csv(old)["Old"].prompt == "vintage"


def test_unknown_names_and_bad_files_are_refused(tmp_path):
    path = tmp_path / "styles.csv"
    path.write_text("name,prompt\nPhoto,photo\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"unknown style\(s\) \['Foto'\].*known styles: Photo"):
        StyleLibrary(path).apply("a", "", ["Foto"])
    bad = tmp_path / "bad.csv"
    bad.write_text("title,words\nx,y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="needs a header with 'name'"):
        read_styles_csv(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_styles_csv(tmp_path / "missing.csv")
