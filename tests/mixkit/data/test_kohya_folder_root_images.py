"""Images beside the `<repeats>_<concept>` subfolders are not trained, as in kohya, and the scan names them.

Reference: kohya-ss/sd-scripts `library/config_util.py::generate_dreambooth_subsets_config_by_subdirs` iterates the
train_data_dir and skips every entry that is not a directory, so an image in the root is never read. mixkit trained
such images once with the root's name as concept (and, uncaptioned, as caption): a stray preview became data.
"""

from __future__ import annotations

import logging

from mixkit.data import scan_kohya_folder


def test_root_images_beside_repeat_folders_are_ignored_and_named(tmp_path, image_writer, caplog):
    root = tmp_path / "train"
    image_writer(root / "10_sks dog" / "a.png")
    (root / "10_sks dog" / "a.txt").write_text("sks dog", encoding="utf-8")
    image_writer(root / "preview.png")
    image_writer(root / "reference.jpg")
    image_writer(root / "preview-masklabel.png")  # a loss mask, not an image: not listed
    with caplog.at_level(logging.WARNING):
        report = scan_kohya_folder(root)
    assert [r.path.name for r in report.records] == ["a.png"]
    assert report.dataset_dirs() == {"10_sks dog": {"n_repeats": 10, "img_count": 1}}
    message = (f"2 image(s) directly in {root} are ignored, as kohya ignores them: preview.png, reference.jpg. "
               "Only the '<repeats>_<concept>' subfolders are trained; move the images into one (like '1_concept') "
               "to train them.")
    assert report.warnings == [message] and message in caplog.text
    assert "train" not in report.tag_frequency()  # the root's name no longer appears as a caption or a folder


def test_many_ignored_root_images_are_counted(tmp_path, image_writer):
    image_writer(tmp_path / "1_x" / "a.png")
    for index in range(7):
        image_writer(tmp_path / f"stray{index}.png")
    report = scan_kohya_folder(tmp_path, missing_captions="empty")
    assert "7 image(s) directly in" in report.warnings[0]
    assert "stray0.png, stray1.png, stray2.png, stray3.png, stray4.png and 2 more." in report.warnings[0]


def test_a_folder_without_repeat_folders_is_a_plain_image_folder(tmp_path, image_writer):
    # Not kohya (which finds no subset there); the CLIP and VLM trainers read captioned image folders this way.
    image_writer(tmp_path / "a.png")
    (tmp_path / "a.txt").write_text("a caption", encoding="utf-8")
    image_writer(tmp_path / "notes" / "b.png")  # a subfolder without a repeat count is still ignored, with a warning
    report = scan_kohya_folder(tmp_path)
    assert [(r.path.name, r.caption, r.repeats, r.concept) for r in report.records] == \
        [("a.png", "a caption", 1, tmp_path.name)]
    assert report.warnings == [f"{tmp_path / 'notes'} is not named '<repeats>_<concept>' (like '10_dog'); its images "
                               "are ignored"]
