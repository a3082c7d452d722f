"""`GenerationResult.add_from`: a script's samples keep an image's copies from before face restoration and colour
correction under the image's new position."""

from __future__ import annotations

from PIL import Image

from pipelines.generation import GenerationResult


def _image(value: int):
    return Image.new("RGB", (2, 2), (value, value, value))


def test_add_from_moves_the_before_copies_to_the_images_new_index(tmp_path):
    call = GenerationResult()
    for value in (1, 2):
        call.add(_image(value), 10 + value, f"text {value}")
    call.before_color_correction[1] = _image(20)
    call.before_face_restoration[0] = _image(30)
    samples = GenerationResult()
    samples.add(_image(0), 5, "earlier")
    samples.add_from(call, 1, "renamed")
    samples.add_from(call, 0)
    assert samples.seeds == [5, 12, 11] and samples.infotexts == ["earlier", "renamed", "text 1"]
    assert samples.images[1] is call.images[1] and samples.images[2] is call.images[0]
    assert samples.before_color_correction == {1: call.before_color_correction[1]}
    assert samples.before_face_restoration == {2: call.before_face_restoration[0]}
    paths = samples.save(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [path.name for path in paths] + [f"{paths[1].stem}-before-color-correction.png",
                                         f"{paths[2].stem}-before-face-restoration.png"])
