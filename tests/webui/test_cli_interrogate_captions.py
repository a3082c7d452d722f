"""`mixkit interrogate` for training sets, as kohya's and A1111's taggers are used: existing caption files refused,
skipped, appended to or overwritten (`--existing`), `--caption-extension`, `--recursive` folders, progress on stderr
(`--quiet`), and a model that cannot load reported before the first image.

DeepBooru answers come from the crafted tagger of the webui conftest's `deepbooru_folder` (known to the character):
every image gets "1girl, long hair, smile, solo" under A1111's defaults."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.webui.test_cli_interrogate import A1111_DEFAULT_TAGS, deepbooru, error_line, run


@pytest.fixture
def images(tmp_path):
    """A folder of two images, a.jpg and b.png."""
    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (40, 40), (200, 10, 30)).save(folder / "a.jpg")
    Image.new("RGB", (48, 32), (10, 200, 30)).save(folder / "b.png")
    return folder


@pytest.fixture
def no_model_load(monkeypatch):
    """Fails the test if an interrogator is set up (the step that loads models)."""
    import webui.cli.interrogate_settings as settings

    monkeypatch.setattr(settings, "interrogator_of", lambda *a: pytest.fail("an interrogator was set up"))


def progress_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[")]


# -- --existing -----------------------------------------------------------------------------------------------------

def test_skip_leaves_captioned_images_alone_without_reading_them(images, deepbooru_folder, capsys):
    (images / "b.txt").write_text("hand-written caption", encoding="utf-8")
    (images / "c.png").write_bytes(b"not a png")  # unreadable, but captioned: never read
    (images / "c.txt").write_text("c's caption", encoding="utf-8")
    code, out, err = run(capsys, str(images), "--write-captions", "--existing", "skip", *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(images / "a.txt")]
    assert (images / "a.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS
    assert (images / "b.txt").read_text(encoding="utf-8") == "hand-written caption"
    assert (images / "c.txt").read_text(encoding="utf-8") == "c's caption"
    assert progress_lines(err) == [f"[1/1] {images / 'a.jpg'}"]
    assert err.splitlines()[-1] == ("interrogated 1 image(s); caption files: 1 written; 2 image(s) skipped, their "
                                    "caption file existing")


def test_skip_with_every_caption_there_loads_no_model(images, deepbooru_folder, capsys, no_model_load):
    for name in ("a.txt", "b.txt"):
        (images / name).write_text("done", encoding="utf-8")
    code, out, err = run(capsys, str(images), "--write-captions", "--existing", "skip", *deepbooru(deepbooru_folder))
    assert code == 0 and out == ""
    assert err == "all 2 image(s) have a caption file already (--existing skip); nothing to interrogate\n"


def test_append_adds_only_the_tags_not_there_and_keeps_the_files_text(images, deepbooru_folder, capsys):
    (images / "b.txt").write_text("smile, my_character, long_hair\n", encoding="utf-8")
    code, out, err = run(capsys, str(images), "--write-captions", "--existing", "append", *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(images / "a.txt"), str(images / "b.txt")]
    assert (images / "a.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS  # no file yet: the answer
    assert (images / "b.txt").read_bytes() == b"smile, my_character, long_hair, 1girl, solo"
    assert err.splitlines()[-1] == "interrogated 2 image(s); caption files: 1 written, 1 appended to"
    # a second run finds every tag there: nothing is written
    before = {path.name: path.stat().st_mtime_ns for path in images.iterdir()}
    code, out, err = run(capsys, str(images), "--write-captions", "--existing", "append", *deepbooru(deepbooru_folder))
    assert code == 0 and out == ""
    assert f"{images / 'b.txt'}: every tag is there already; left as it was" in err.splitlines()
    assert err.splitlines()[-1] == ("interrogated 2 image(s); caption files: 2 unchanged (every tag there already)")
    assert {path.name: path.stat().st_mtime_ns for path in images.iterdir()} == before
    assert sorted(path.name for path in images.iterdir()) == ["a.jpg", "a.txt", "b.png", "b.txt"]  # no temp file


def test_append_compares_tags_not_their_spelling(images, deepbooru_folder, capsys):
    (images / "a.txt").write_text("1girl, Long_Hair", encoding="utf-8")
    code, _, _ = run(capsys, str(images / "a.jpg"), "--write-captions", "--existing", "append",
                     *deepbooru(deepbooru_folder, "--return-ranks"))
    assert code == 0
    assert (images / "a.txt").read_text(encoding="utf-8") == "1girl, Long_Hair, (smile:0.550), (solo:0.881)"


def test_append_refuses_captions_it_cannot_extend_before_any_model_loads(images, deepbooru_folder, capsys,
                                                                          no_model_load):
    (images / "a.txt").write_text("first caption\nsecond caption\n", encoding="utf-8")
    (images / "b.txt").write_bytes(b"caf\xe9, solo")  # Latin-1
    code, out, err = run(capsys, str(images), "--write-captions", "--existing", "append", *deepbooru(deepbooru_folder))
    assert code == 2 and out == ""
    assert error_line(err) == (
        f"mixkit: error: 2 caption file(s) cannot be appended to, so nothing was written: {images / 'a.txt'} holds 2 "
        "lines and trainers read only the first, so appended tags would be lost; join its lines, or use --existing "
        f"skip or overwrite; caption file {images / 'b.txt'} is not UTF-8 text (byte 3 is b'\\xe9': invalid "
        "continuation byte); captions are read as UTF-8 (UTF-16 with a byte-order mark too). Save it as UTF-8, e.g. "
        "`iconv -f latin1 -t utf-8`, and start the run again.")
    assert (images / "b.txt").read_bytes() == b"caf\xe9, solo"


def test_append_reads_a_utf16_caption_as_the_trainers_do_and_writes_utf8(images, deepbooru_folder, capsys):
    (images / "a.txt").write_bytes("café, solo\r\n".encode("utf-16"))  # Notepad's "Unicode", with its mark
    code, _, _ = run(capsys, str(images / "a.jpg"), "--write-captions", "--existing", "append",
                     *deepbooru(deepbooru_folder))
    assert code == 0
    assert (images / "a.txt").read_bytes() == "café, solo, 1girl, long hair, smile".encode("utf-8")


@pytest.mark.parametrize("flags", [["--overwrite"], ["--existing", "overwrite"], ["--overwrite", "--existing",
                                                                                    "overwrite"]])
def test_overwrite_and_its_alias_replace_existing_captions(images, deepbooru_folder, capsys, flags):
    (images / "b.txt").write_text("old", encoding="utf-8")
    code, out, _ = run(capsys, str(images), "--write-captions", *flags, *deepbooru(deepbooru_folder))
    assert code == 0 and out.splitlines() == [str(images / "a.txt"), str(images / "b.txt")]
    assert (images / "b.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS


def test_a_caption_path_that_is_a_folder_is_refused(images, deepbooru_folder, capsys, no_model_load):
    (images / "b.txt").mkdir()
    code, _, err = run(capsys, str(images), "--write-captions", "--existing", "overwrite", *deepbooru(deepbooru_folder))
    assert code == 2
    assert error_line(err) == (f"mixkit: error: 1 caption path(s) are folders: {images / 'b.txt'}; rename them or "
                               "choose another --caption-extension")


@pytest.mark.parametrize("existing, outcome, text", [
    ("refuse", None, "theirs"), ("skip", "skipped", "theirs"), ("append", "appended", "theirs, 1girl, solo"),
    ("overwrite", "overwritten", "1girl, solo"),
])
def test_a_caption_that_appears_while_the_command_runs_follows_the_existing_choice(tmp_path, existing, outcome,
                                                                                   text):
    from webui.cli.caption_files import CaptionFileExistsError, plan_caption_files, save_caption

    image = tmp_path / "cat.png"
    image.write_bytes(b"")
    [plan] = plan_caption_files([image], existing)
    assert plan.action == "write"
    (tmp_path / "cat.txt").write_text("theirs", encoding="utf-8")  # another program, after the plan
    if outcome is None:
        with pytest.raises(CaptionFileExistsError, match="cat.txt was created by another program while this one ran"):
            save_caption(plan, "1girl, solo", ["1girl", "solo"])
    else:
        assert save_caption(plan, "1girl, solo", ["1girl", "solo"]) == outcome
    assert (tmp_path / "cat.txt").read_text(encoding="utf-8") == text
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cat.png", "cat.txt"]


# -- append while another program edits the caption -----------------------------------------------------------------

@pytest.fixture
def append_plan(tmp_path):
    """An append plan for cat.png, whose cat.txt holds "mine"."""
    from webui.cli.caption_files import plan_caption_files

    image = tmp_path / "cat.png"
    image.write_bytes(b"")
    (tmp_path / "cat.txt").write_text("mine", encoding="utf-8")
    [plan] = plan_caption_files([image], "append")
    assert plan.action == "append"
    return plan


def edits_while_writing(monkeypatch, path, texts):
    """Make another program save each of `texts` to `path` in turn, one each time a merged caption is being written
    to its temporary file (between the read and the rename)."""
    import pipelines.png as png

    written, pending = png.written_temporary_file, list(texts)

    def editing(folder, stem, data):
        if pending:
            path.write_text(pending.pop(0), encoding="utf-8")
        return written(folder, stem, data)

    monkeypatch.setattr(png, "written_temporary_file", editing)


def test_an_edit_saved_while_appending_is_kept_and_the_tags_merged_into_it(append_plan, monkeypatch):
    from webui.cli.caption_files import save_caption

    edits_while_writing(monkeypatch, append_plan.path, ["mine, solo, edited"])
    assert save_caption(append_plan, "1girl, solo", ["1girl", "solo"]) == "appended"
    assert append_plan.path.read_bytes() == b"mine, solo, edited, 1girl"
    assert sorted(path.name for path in append_plan.path.parent.iterdir()) == ["cat.png", "cat.txt"]


def test_a_caption_changed_on_every_try_is_left_as_the_other_program_wrote_it(append_plan, monkeypatch):
    from webui.cli.caption_files import APPEND_TRIES, CaptionChangedError, save_caption

    edits_while_writing(monkeypatch, append_plan.path, [f"edit {n}" for n in range(APPEND_TRIES)])
    with pytest.raises(CaptionChangedError) as raised:
        save_caption(append_plan, "1girl, solo", ["1girl", "solo"])
    assert str(raised.value) == (
        f"{append_plan.path} was changed by another program each of the 3 times new tags were about to be appended, "
        "so it is left as that program wrote it; close it there and run the command again")
    assert append_plan.path.read_text(encoding="utf-8") == f"edit {APPEND_TRIES - 1}"
    assert sorted(path.name for path in append_plan.path.parent.iterdir()) == ["cat.png", "cat.txt"]


def test_an_edit_that_makes_the_caption_unusable_is_refused_and_kept(append_plan, monkeypatch):
    from webui.cli.caption_files import save_caption

    edits_while_writing(monkeypatch, append_plan.path, ["first line\nsecond line"])
    with pytest.raises(ValueError, match="cat.txt holds 2 lines and trainers read only the first"):
        save_caption(append_plan, "1girl, solo", ["1girl", "solo"])
    assert append_plan.path.read_text(encoding="utf-8") == "first line\nsecond line"
    assert sorted(path.name for path in append_plan.path.parent.iterdir()) == ["cat.png", "cat.txt"]


def test_a_caption_removed_while_appending_is_written_whole(append_plan, monkeypatch):
    import pipelines.png as png
    from webui.cli.caption_files import save_caption

    written = png.written_temporary_file

    def removing(folder, stem, data):
        append_plan.path.unlink(missing_ok=True)
        return written(folder, stem, data)

    monkeypatch.setattr(png, "written_temporary_file", removing)
    assert save_caption(append_plan, "1girl, solo", ["1girl", "solo"]) == "written"
    assert append_plan.path.read_bytes() == b"1girl, solo"


def test_an_edit_saved_while_the_model_runs_is_kept_by_the_cli(images, deepbooru_folder, capsys, monkeypatch):
    import webui.cli.interrogate_settings as settings

    (images / "a.txt").write_text("mine", encoding="utf-8")
    load = settings.interrogator_of

    def loading(*args):
        interrogate = load(*args)

        def answering(image):
            (images / "a.txt").write_text("mine, edited", encoding="utf-8")  # saved in an editor meanwhile
            return interrogate(image)
        return answering

    monkeypatch.setattr(settings, "interrogator_of", loading)
    code, _, _ = run(capsys, str(images / "a.jpg"), "--write-captions", "--existing", "append",
                     *deepbooru(deepbooru_folder))
    assert code == 0
    assert (images / "a.txt").read_text(encoding="utf-8") == "mine, edited, " + A1111_DEFAULT_TAGS


# -- --caption-extension --------------------------------------------------------------------------------------------

def test_caption_extension_names_the_files_and_the_ones_checked(images, deepbooru_folder, capsys):
    (images / "b.txt").write_text("a .txt caption is not a .caption one", encoding="utf-8")
    code, out, _ = run(capsys, str(images), "--write-captions", "--caption-extension", ".caption",
                       *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(images / "a.caption"), str(images / "b.caption")]
    assert (images / "b.caption").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS
    assert (images / "b.txt").read_text(encoding="utf-8") == "a .txt caption is not a .caption one"
    code, _, err = run(capsys, str(images), "--write-captions", "--caption-extension", ".caption",
                       *deepbooru(deepbooru_folder))
    assert code == 2 and f"already exist: {images / 'a.caption'}, {images / 'b.caption'}; " in error_line(err)


# -- --recursive ----------------------------------------------------------------------------------------------------

@pytest.fixture
def tree(images):
    """set/a.jpg, set/b.png, set/sub/c.png, set/sub/deeper/d.webp, and set/.hidden/e.png (not to be taken)."""
    for relative, size in (("sub/c.png", 24), ("sub/deeper/d.webp", 16), (".hidden/e.png", 8)):
        path = images / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (size, size), (size, 0, 0)).save(path)
    return images


def test_recursive_takes_subfolders_in_path_order_with_captions_beside_each_image(tree, deepbooru_folder, capsys):
    code, out, err = run(capsys, str(tree), "--recursive", "--write-captions", *deepbooru(deepbooru_folder))
    assert code == 0
    assert out.splitlines() == [str(tree / "a.txt"), str(tree / "b.txt"), str(tree / "sub" / "c.txt"),
                                str(tree / "sub" / "deeper" / "d.txt")]
    assert (tree / "sub" / "deeper" / "d.txt").read_text(encoding="utf-8") == A1111_DEFAULT_TAGS
    assert sorted(path.name for path in (tree / ".hidden").iterdir()) == ["e.png"]
    assert progress_lines(err)[-1] == f"[4/4] {tree / 'sub' / 'deeper' / 'd.webp'}"


def test_without_recursive_subfolders_are_not_entered(tree, deepbooru_folder, capsys):
    code, out, _ = run(capsys, str(tree), *deepbooru(deepbooru_folder))
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == [str(tree / "a.jpg"),
                                                                               str(tree / "b.png")]


def test_a_folder_with_images_only_in_subfolders_says_to_add_recursive(tree, deepbooru_folder, capsys, no_model_load):
    empty = tree / "only-subfolders"
    (empty / "inner").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(empty / "inner" / "x.png")
    code, _, err = run(capsys, str(empty), *deepbooru(deepbooru_folder))
    assert code == 2
    assert error_line(err).endswith("(add --recursive to take its subfolders' images); give another")
    (empty / "inner" / "x.png").rename(tree / ".hidden" / "x.png")
    code, _, err = run(capsys, str(empty), "--recursive", *deepbooru(deepbooru_folder))
    assert code == 2 and f"{str(empty)!r} is a folder with no images, in it or its subfolders," in error_line(err)


# -- progress on stderr ---------------------------------------------------------------------------------------------

def test_json_mode_keeps_stdout_pure_json_and_reports_progress_on_stderr(images, deepbooru_folder, capsys):
    code, out, err = run(capsys, str(images), "--json", *deepbooru(deepbooru_folder))
    assert code == 0
    assert json.loads(out) == [{"file": str(images / "a.jpg"), "caption": A1111_DEFAULT_TAGS},
                               {"file": str(images / "b.png"), "caption": A1111_DEFAULT_TAGS}]
    assert err.splitlines() == ["loading DeepBooru for 2 image(s)", f"[1/2] {images / 'a.jpg'}",
                                f"[2/2] {images / 'b.png'}", "interrogated 2 image(s)"]


@pytest.mark.parametrize("mode", [[], ["--json"], ["--write-captions"]])
def test_quiet_prints_no_progress(images, deepbooru_folder, capsys, mode):
    code, out, err = run(capsys, str(images), "--quiet", *mode, *deepbooru(deepbooru_folder))
    assert code == 0 and out and err == ""


# -- models that cannot load ----------------------------------------------------------------------------------------

def test_a_tagger_file_that_cannot_load_stops_before_the_first_image(images, tmp_path, capsys):
    folder = tmp_path / "torch_deepdanbooru"
    folder.mkdir()
    (folder / "model-resnet_custom_v3.pt").write_bytes(b"<html>404</html>")  # a failed download
    code, out, err = run(capsys, str(images), "--write-captions", *deepbooru(folder))
    assert code == 2 and out == "" and progress_lines(err) == []
    file = folder / "model-resnet_custom_v3.pt"
    assert error_line(err).startswith(f"mixkit: error: --deepdanbooru-models-path {str(file)!r} cannot be loaded, so "
                                      f"no image was interrogated: {str(file)!r} is not a recognised checkpoint")
    assert sorted(path.name for path in images.iterdir()) == ["a.jpg", "b.png"]


def test_a_clip_that_cannot_load_stops_before_the_first_image(images, tmp_path, capsys):
    code, out, err = run(capsys, str(images), "--interrogate-clip-model", str(tmp_path))
    assert code == 2 and out == "" and progress_lines(err) == []
    assert error_line(err) == (f"mixkit: error: --interrogate-clip-model {str(tmp_path)!r} cannot be loaded, so no "
                               f"image was interrogated: {str(tmp_path)!r} has no config.json; pass a folder saved "
                               "with save_pretrained or a hub id")


def test_a_captioner_whose_weights_cannot_load_stops_before_the_first_image(images, tmp_path, capsys):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    folder = build_tiny_blip2(tmp_path / "blip2")
    weights = sorted(folder.glob("*.safetensors"))
    assert weights
    weights[0].write_bytes(weights[0].read_bytes()[:100])  # a truncated download
    code, out, err = run(capsys, str(images), "--write-captions", "--caption-model", str(folder))
    assert code == 2 and out == "" and progress_lines(err) == []
    assert error_line(err).startswith(f"mixkit: error: --caption-model {str(folder)!r} cannot be loaded, so no image "
                                      "was interrogated: ")
    assert sorted(path.name for path in images.iterdir()) == ["a.jpg", "b.png"]


# -- CLIP answers appended -----------------------------------------------------------------------------------------

def test_a_clip_answer_is_appended_as_its_caption_and_the_terms_not_there(capsys, tmp_path):
    from appflow import Appflow
    from mixkit.data.shapes_render import render_scene
    from mixkit.data.shapes_vocab import Scene, ShapeSpec
    from mixkit.interrogate import ClipInterrogator, InterrogateSettings

    image = tmp_path / "circle.png"
    render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), 64).save(image)
    (tmp_path / "circle.txt").write_text("circle, my style", encoding="utf-8")
    code, out, _ = run(capsys, str(image), "--write-captions", "--existing", "append")
    assert code == 0 and out == f"{tmp_path / 'circle.txt'}\n"
    picture, settings = Image.open(image).convert("RGB"), InterrogateSettings()
    caption = Appflow("image2text_generation")(image=picture, **settings.caption_options())["text"]
    terms = [term for term, _ in ClipInterrogator().terms(picture, settings)]
    assert "circle" in terms and "," in caption  # the caption holds a comma, kept whole
    expected = ", ".join(["circle, my style", caption, *(term for term in terms if term != "circle")])
    assert (tmp_path / "circle.txt").read_text(encoding="utf-8") == expected


def test_quiet_silences_transformers_bars_while_clip_loads_and_restores_them(images, capsys, monkeypatch):
    from transformers.utils import logging as transformers_logging

    import webui.cli.interrogate_settings as settings
    from webui.cli.interrogate_settings import Answer

    seen = []

    def fake_interrogator(args, checked):
        seen.append(transformers_logging.is_progress_bar_enabled())
        return lambda image: Answer("a caption", ("a caption",))
    monkeypatch.setattr(settings, "interrogator_of", fake_interrogator)
    assert transformers_logging.is_progress_bar_enabled()
    code, out, err = run(capsys, str(images / "a.jpg"), "-q")
    assert code == 0 and out == f"{images / 'a.jpg'}\ta caption\n" and err == ""
    code, _, err = run(capsys, str(images / "a.jpg"))
    assert seen == [False, True] and transformers_logging.is_progress_bar_enabled()
    assert err.splitlines() == ["loading the captioner and CLIP for 1 image(s)", f"[1/1] {images / 'a.jpg'}",
                                "interrogated 1 image(s)"]
