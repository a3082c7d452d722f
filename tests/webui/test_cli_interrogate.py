"""`mixkit interrogate`: A1111's Interrogate CLIP / DeepBooru on image files and folders, as lines, JSON or kohya
caption files, with Settings > Interrogate's options as flags.

Oracles: for CLIP, the caption app and `ClipInterrogator` called in Python on the same image (what the server's
`/sdapi/v1/interrogate` runs); for DeepBooru, a crafted tagger whose score for each tag is exactly sigmoid(its logit)
on every image, so the answer is known to the character (`tests.webui.crafted_deepbooru`, the webui conftest's
`deepbooru_folder`: the same tagger and answers as the API's tests)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from webui.cli import main

A1111_DEFAULT_TAGS = "1girl, long hair, smile, solo"


@pytest.fixture
def images(tmp_path):
    """A folder of two images (b.png, a.jpg: taken in name order) and a text file that is not one."""
    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (48, 32), (10, 200, 30)).save(folder / "b.png")
    Image.new("RGB", (40, 40), (200, 10, 30)).save(folder / "a.jpg")
    (folder / "notes.md").write_text("not an image", encoding="utf-8")
    return folder


@pytest.fixture
def no_model_load(monkeypatch):
    """Fails the test if an interrogator is set up (the step that loads models)."""
    import webui.cli.interrogate_settings as settings

    def refuse(*args, **kwargs):
        raise AssertionError("an interrogator was set up before the check")

    monkeypatch.setattr(settings, "interrogator_of", refuse)


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(["interrogate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and "Traceback" not in err
    return lines[-1]


def deepbooru(folder, *flags):
    return ["--model", "deepbooru", "--deepdanbooru-models-path", str(folder), *flags]


# -- DeepBooru: exact answers ---------------------------------------------------------------------------------------

def test_deepbooru_prints_a1111s_tag_text_per_file_in_order(images, deepbooru_folder, capsys):
    code, out, _ = run(capsys, str(images / "b.png"), str(images), *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [f"{images / 'b.png'}\t{A1111_DEFAULT_TAGS}", f"{images / 'a.jpg'}\t{A1111_DEFAULT_TAGS}"]


def test_an_image_given_twice_is_answered_once_at_its_first_place(images, deepbooru_folder, capsys, monkeypatch):
    """The folder and one of its files, the same file by another spelling: each image once, where it came first."""
    monkeypatch.chdir(images.parent)
    again = f"{images.name}/../{images.name}/a.jpg"
    code, out, err = run(capsys, str(images), str(images / "b.png"), again, *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [f"{images / 'a.jpg'}\t{A1111_DEFAULT_TAGS}", f"{images / 'b.png'}\t{A1111_DEFAULT_TAGS}"]
    assert "interrogated 2 image(s)" in err
    code, out, _ = run(capsys, "set/b.png", str(images), "--json", *deepbooru(deepbooru_folder))
    assert code == 0
    assert json.loads(out) == [{"file": "set/b.png", "caption": A1111_DEFAULT_TAGS},
                               {"file": str(images / "a.jpg"), "caption": A1111_DEFAULT_TAGS}]


def test_a_link_to_an_image_is_its_own_entry(images, deepbooru_folder, capsys):
    """`c.png -> a.jpg` is another name in the dataset (its caption file is c.txt): kept, not taken for a repeat."""
    (images / "c.png").symlink_to(images / "a.jpg")
    code, out, _ = run(capsys, str(images), "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(images / "a.txt"), str(images / "b.txt"), str(images / "c.txt")]


def test_the_deepbooru_flags_are_a1111s_options(images, deepbooru_folder, capsys):
    flags = ["--no-deepbooru-sort-alpha", "--no-deepbooru-use-spaces", "--return-ranks",
             "--deepbooru-score-threshold", "0.25", "--deepbooru-filter-tags", "smile, long hair"]
    code, out, _ = run(capsys, str(images / "a.jpg"), *deepbooru(deepbooru_folder, *flags))
    assert code == 0
    assert out == f"{images / 'a.jpg'}\t(1girl:0.953), (solo:0.881), (hat_\\(object\\):0.269)\n"
    code, out, _ = run(capsys, str(images / "a.jpg"),
                       *deepbooru(deepbooru_folder, "--no-deepbooru-escape", "--deepbooru-score-threshold", "0"))
    assert code == 0 and out == f"{images / 'a.jpg'}\t1girl, hat (object), long hair, smile, solo\n"


def test_json_lists_each_file_with_the_apis_caption_key(images, deepbooru_folder, capsys):
    code, out, _ = run(capsys, str(images), "--json", "--model", "deepdanbooru",
                       "--deepdanbooru-models-path", str(deepbooru_folder))
    assert code == 0
    assert json.loads(out) == [{"file": str(images / "a.jpg"), "caption": A1111_DEFAULT_TAGS},
                               {"file": str(images / "b.png"), "caption": A1111_DEFAULT_TAGS}]


# -- caption files ------------------------------------------------------------------------------------------------

def test_write_captions_puts_name_txt_beside_each_image(images, deepbooru_folder, capsys):
    code, out, _ = run(capsys, str(images), "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(images / "a.txt"), str(images / "b.txt")]
    assert (images / "a.txt").read_bytes() == A1111_DEFAULT_TAGS.encode("utf-8")  # no newline, as A1111 writes
    assert (images / "b.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS
    assert sorted(path.name for path in images.iterdir()) == ["a.jpg", "a.txt", "b.png", "b.txt", "notes.md"]


def test_existing_captions_are_refused_before_any_model_loads_unless_overwrite(images, deepbooru_folder, capsys,
                                                                               monkeypatch):
    (images / "b.txt").write_text("hand-written caption", encoding="utf-8")
    with monkeypatch.context() as patched:
        import webui.cli.interrogate_settings as settings

        patched.setattr(settings, "interrogator_of", lambda *a: pytest.fail("a model was set up"))
        code, out, err = run(capsys, str(images), "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 2 and out == ""
    assert error_line(err) == (f"mixkit: error: 1 caption file(s) already exist: {images / 'b.txt'}; add --existing "
                               "skip to leave them (and their images) alone, --existing append to add the new tags to "
                               "them, --existing overwrite (--overwrite) to replace them, or move them away")
    assert (images / "b.txt").read_text(encoding="utf-8") == "hand-written caption"
    assert not (images / "a.txt").exists()  # nothing written when one is refused
    code, _, _ = run(capsys, str(images), "--write-captions", "--overwrite", *deepbooru(deepbooru_folder))
    assert code == 0 and (images / "b.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS


def test_the_same_image_twice_writes_its_caption_file_once(images, deepbooru_folder, capsys, monkeypatch):
    """`set/ set/a.jpg`, and overlapping folders with --recursive (a folder and its subfolder), are no two images
    sharing a caption file: each image is captioned once (this used to be refused as "two images would write ...")."""
    sub = images / "sub"
    sub.mkdir()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(sub / "c.png")
    code, out, err = run(capsys, str(images), str(images / "a.jpg"), "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 0, err
    assert out.splitlines() == [str(images / "a.txt"), str(images / "b.txt")]
    code, out, err = run(capsys, str(sub), str(images), "--recursive", "--write-captions", "--overwrite",
                         *deepbooru(deepbooru_folder))
    assert code == 0, err
    assert out.splitlines() == [str(sub / "c.txt"), str(images / "a.txt"), str(images / "b.txt")]
    assert "interrogated 3 image(s)" in err
    assert (sub / "c.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS


def test_two_images_sharing_a_caption_file_are_refused(images, capsys, no_model_load, deepbooru_folder):
    Image.new("RGB", (8, 8)).save(images / "a.png")
    code, _, err = run(capsys, str(images), "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 2
    assert error_line(err) == (f"mixkit: error: two images would write the same caption file: {images / 'a.jpg'} and "
                               f"{images / 'a.png'} -> {images / 'a.txt'}; give only one of each, or rename one")


def test_an_empty_answer_writes_no_caption_file(images, deepbooru_folder, capsys):
    code, out, err = run(capsys, str(images / "a.jpg"), "--write-captions",
                         *deepbooru(deepbooru_folder, "--deepbooru-score-threshold", "1"))
    assert code == 0 and out == ""
    assert f"{images / 'a.jpg'}: no tags, so no a.txt was written" in err
    assert not (images / "a.txt").exists()


def test_a_caption_file_that_appears_meanwhile_is_kept(tmp_path):
    from webui.cli.caption_files import write_caption_file

    target = tmp_path / "cat.txt"
    target.write_text("theirs", encoding="utf-8")
    with pytest.raises(FileExistsError, match="cat.txt was created by another program while this one ran"):
        write_caption_file(target, "ours", overwrite=False)
    assert target.read_text(encoding="utf-8") == "theirs"
    assert [path.name for path in tmp_path.iterdir()] == ["cat.txt"]  # no temporary file left
    write_caption_file(target, "ours", overwrite=True)
    assert target.read_text(encoding="utf-8") == "ours" and len(list(tmp_path.iterdir())) == 1


# -- refusals before any model loads ----------------------------------------------------------------------------

def test_unreadable_images_are_named_before_any_model_loads(images, capsys, no_model_load, deepbooru_folder):
    (images / "c.png").write_bytes(b"not a png")
    (images / "d.webp").write_bytes(b"")
    code, out, err = run(capsys, str(images), *deepbooru(deepbooru_folder))
    assert code == 2 and out == ""
    line = error_line(err)
    assert line.startswith("mixkit: error: 2 of 4 image(s) cannot be read, so nothing was interrogated: ")
    assert str(images / "c.png") in line and str(images / "d.webp") in line and line.endswith("Fix or remove them.")


@pytest.mark.parametrize("args, message", [
    (["--model", "blip"], "--model 'blip' is not an interrogator; use clip (A1111's Interrogate CLIP) or deepbooru"),
    (["--deepbooru-score-threshold", "0.3"], "--deepbooru-score-threshold only matters with --model deepbooru; "
                                             "leave it out or add --model deepbooru"),
    (["--no-deepbooru-escape", "--deepdanbooru-models-path", "x"],
     "--deepbooru-escape, --deepdanbooru-models-path only matter with --model deepbooru"),
    (["--model", "deepbooru", "--clip-num-beams", "2", "--caption-model", "m"],
     "--clip-num-beams, --caption-model only matter with --model clip"),
    (["--model", "deepbooru"], "--model deepbooru needs the DeepDanbooru tagger: add --deepdanbooru-models-path "
                               "FOLDER, the folder holding model-resnet_custom_v3.pt"),
    (["--overwrite"], "--overwrite only matters for caption files; add --write-captions or leave it out"),
    (["--existing", "skip", "--caption-extension", ".caption"],
     "--existing, --caption-extension only matter for caption files; add --write-captions or leave them out"),
    (["--write-captions", "--overwrite", "--existing", "append"],
     "--overwrite means --existing overwrite, which contradicts --existing append; give one of them"),
    (["--write-captions", "--caption-extension", "txt"],
     "--caption-extension 'txt' must be a dot and a name, e.g. .txt"),
    (["--write-captions", "--caption-extension", "."], "--caption-extension '.' must be a dot and a name"),
    (["--write-captions", "--caption-extension", ".PNG"], "--caption-extension '.PNG' is an image extension: its "
                                                          "caption files would replace images"),
    (["--write-captions", "--caption-extension", "./x.txt"], "--caption-extension './x.txt' must be a file extension "
                                                             "such as .txt, without a folder"),
    (["--clip-num-beams", "0"], "--clip-num-beams must be a whole number in [1, 16], got 0."),
    (["--clip-min-length", "40", "--clip-max-length", "30"],
     "--clip-min-length (40) must not exceed --clip-max-length (30)."),
    (["--clip-dict-limit", "-1"], "--clip-dict-limit must be a whole number >= 0 (0 = no limit), got -1."),
    (["--clip-skip-categories", "sizes, moods"], "--clip-skip-categories names ['moods']"),
    (["--caption-model", " "], "--caption-model must name a captioner"),
    (["--caption-model", "mixkit-tiny-clip"], "--caption-model 'mixkit-tiny-clip': App 'image2text_generation', model "
                                              "role 'captioner' needs a captioning/VQA vision-language model"),
    (["--caption-model", "./no-such-captioner"], "--caption-model './no-such-captioner': Model path "
                                                 "'./no-such-captioner' does not exist"),
    (["--device", "nonsense"], "--device 'nonsense' is not a device name"),
])
def test_bad_flags_are_refused_naming_them(images, capsys, args, message):
    code, out, err = run(capsys, str(images / "a.jpg"), *args)
    assert code == 2 and out == ""
    assert message in error_line(err)


def test_a_bad_deepbooru_threshold_names_its_flag(images, deepbooru_folder, capsys, no_model_load):
    code, _, err = run(capsys, str(images), *deepbooru(deepbooru_folder, "--deepbooru-score-threshold", "1.5"))
    assert code == 2
    assert error_line(err) == ("mixkit: error: --deepbooru-score-threshold must be a number in [0, 1] (A1111's "
                               "slider), got 1.5.")


def test_a_missing_tagger_file_is_named_with_a1111s_download(images, tmp_path, capsys):
    code, _, err = run(capsys, str(images), *deepbooru(tmp_path / "empty"))
    assert code == 2
    assert f"The DeepDanbooru folder {str(tmp_path / 'empty')!r} does not exist" in error_line(err)


def test_missing_inputs_and_empty_folders_are_named(tmp_path, capsys, no_model_load):
    code, _, err = run(capsys, str(tmp_path / "nope.png"))
    assert code == 2
    assert error_line(err) == (f"mixkit: error: {str(tmp_path / 'nope.png')!r} does not exist; give an image file or a "
                               "folder of images")
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and f"{str(tmp_path)!r} is a folder with no images" in error_line(err)


def test_a_missing_categories_folder_names_its_flag(images, tmp_path, capsys):
    code, _, err = run(capsys, str(images / "a.jpg"), "--interrogate-categories-dir", str(tmp_path / "lists"))
    assert code == 2
    assert error_line(err).startswith("mixkit: error: --interrogate-categories-dir: The interrogate categories "
                                      f"folder {str(tmp_path / 'lists')!r} does not exist")


# -- CLIP: the server's answer --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def circle(tmp_path_factory):
    from mixkit.data.shapes_render import render_scene
    from mixkit.data.shapes_vocab import Scene, ShapeSpec

    path = tmp_path_factory.mktemp("shapes") / "circle.png"
    render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), 64).save(path)
    return path


def expected_clip_answer(image_path, **settings) -> str:
    """What `webui.interrogation.interrogate_now` answers under these Settings > Interrogate values."""
    from appflow import Appflow
    from mixkit.interrogate import ClipInterrogator, InterrogateSettings, join_terms
    from mixkit.io.images import load_image

    image = load_image(image_path)
    values = InterrogateSettings(**settings)
    caption = Appflow("image2text_generation")(image=image, **values.caption_options())["text"]
    return join_terms(caption, ClipInterrogator().terms(image, values), values.return_ranks)


def test_clip_answers_as_the_server_does(circle, capsys):
    code, out, _ = run(capsys, str(circle))
    assert code == 0
    expected = expected_clip_answer(circle)
    assert out == f"{circle}\t{expected}\n"
    assert ", circle, red, " in expected  # the render's own shape and colour ranked first in their lists


def test_the_clip_flags_are_a1111s_options(circle, capsys):
    code, out, _ = run(capsys, str(circle), "--json", "--return-ranks", "--clip-skip-categories", "sizes",
                       "--clip-max-length", "6", "--clip-dict-limit", "2")
    assert code == 0
    expected = expected_clip_answer(circle, return_ranks=True, clip_skip_categories=("sizes",), clip_max_length=6,
                                    clip_dict_limit=2)
    assert json.loads(out) == [{"file": str(circle), "caption": expected}]
    assert "(circle:" in expected and "large" not in expected.split(", ", 1)[1]


def test_a_line_answer_stays_on_its_line():
    from webui.cli.interrogate import one_line

    assert one_line("a cat,\non a mat\tand\r\na dog") == "a cat, on a mat and a dog"
    assert one_line("a  cat") == "a  cat"  # left as it is when it fits one line
