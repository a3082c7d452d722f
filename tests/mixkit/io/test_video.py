"""`export_video`: .mp4 (OpenCV) and .gif (Pillow) read back frame for frame; bad paths and frames refused before
anything is encoded; a failed write leaves no file and no temporary behind."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from mixkit.io.video import export_video, mp4_available

COLOURS = [(250, 10, 10), (10, 250, 10), (10, 10, 250), (240, 240, 240)]


def frames(count: int = 4, size: tuple[int, int] = (32, 24)) -> list:
    return [Image.new("RGB", size, COLOURS[i % len(COLOURS)]) for i in range(count)]


def test_gif_holds_every_frame_at_the_frame_rate(tmp_path):
    path = export_video(frames(4), tmp_path / "clip.gif", fps=5)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == 4 and gif.size == (32, 24)
        assert gif.info["duration"] == 200 and gif.info["loop"] == 0
        read = []
        for index in range(gif.n_frames):
            gif.seek(index)
            read.append(gif.convert("RGB").getpixel((5, 5)))
    assert read == COLOURS  # flat colours survive the 256-colour palette exactly


def test_mp4_holds_every_frame_at_the_frame_rate(tmp_path):
    import cv2

    assert mp4_available()  # opencv-python-headless ships FFmpeg: this machine writes .mp4
    path = export_video(frames(3), tmp_path / "clip.mp4", fps=12)
    capture = cv2.VideoCapture(str(path))
    read = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        read.append(frame)
    assert capture.get(cv2.CAP_PROP_FPS) == 12
    capture.release()
    assert len(read) == 3 and read[0].shape == (24, 32, 3)
    # lossy, but each frame's colour is where it was (BGR in OpenCV)
    colours = np.array([frame[12, 16][::-1] for frame in read], dtype=int)
    assert np.abs(colours - np.array(COLOURS[:3])).max() <= 12


def test_unknown_extension_is_refused_before_encoding(tmp_path):
    with pytest.raises(ValueError, match=r"unknown extension '\.avi'.*\.mp4, \.gif"):
        export_video(frames(), tmp_path / "clip.avi")
    with pytest.raises(ValueError, match="unknown extension '\\(none\\)'"):
        export_video(frames(), tmp_path / "clip")
    assert os.listdir(tmp_path) == []


def test_a_missing_or_unwritable_folder_is_refused_before_encoding(tmp_path, monkeypatch):
    import mixkit.io.video as video

    with pytest.raises(FileNotFoundError, match="does not exist"):
        export_video(frames(), tmp_path / "nope" / "clip.gif")
    (tmp_path / "dir.gif").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        export_video(frames(), tmp_path / "dir.gif")
    # the tests run as root here, who may write anywhere: the folder's permission answer is stood in for
    monkeypatch.setattr(video.os, "access", lambda path, mode: False)
    with pytest.raises(PermissionError, match="is not writable"):
        export_video(frames(), tmp_path / "clip.gif")
    assert os.listdir(tmp_path) == ["dir.gif"]


@pytest.mark.parametrize("given, error, fragment", [
    ([], ValueError, "at least one frame"),
    ("frames", TypeError, "list of PIL images"),
    ([Image.new("RGB", (8, 8)), np.zeros((8, 8, 3))], TypeError, r"frames\[1\] is a ndarray"),
    ([Image.new("RGB", (8, 8)), Image.new("RGB", (16, 8))], ValueError, "different sizes"),
])
def test_bad_frames_are_refused(tmp_path, given, error, fragment):
    with pytest.raises(error, match=fragment):
        export_video(given, tmp_path / "clip.gif")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fps", [0, -1, float("nan"), float("inf"), 241, True, "8"])
def test_fps_out_of_range_is_refused(tmp_path, fps):
    with pytest.raises(ValueError, match=r"fps must be a number in \(0, 240\]"):
        export_video(frames(), tmp_path / "clip.gif", fps=fps)


def test_odd_sides_are_refused_for_mp4_not_for_gif(tmp_path):
    odd = frames(2, size=(33, 24))
    with pytest.raises(ValueError, match="33x24 and MPEG-4 needs even sides"):
        export_video(odd, tmp_path / "clip.mp4")
    assert os.listdir(tmp_path) == []
    with Image.open(export_video(odd, tmp_path / "clip.gif")) as gif:
        assert gif.size == (33, 24)


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    import mixkit.io.video as video

    target = tmp_path / "clip.gif"
    target.write_bytes(b"previous")

    def broken(frames, temp, fps):
        temp.write_bytes(b"half a gif")
        raise RuntimeError("encoder crashed")

    monkeypatch.setattr(video, "_write_gif", broken)
    with pytest.raises(RuntimeError, match="encoder crashed"):
        export_video(frames(), target)
    assert target.read_bytes() == b"previous" and os.listdir(tmp_path) == ["clip.gif"]


def test_mp4_without_an_encoder_is_refused_pointing_at_gif(tmp_path, monkeypatch):
    import mixkit.io.video as video

    monkeypatch.setattr(video, "mp4_available", lambda: False)
    with pytest.raises(ValueError, match="needs OpenCV with FFmpeg.*or save as .gif"):
        export_video(frames(), tmp_path / "clip.mp4")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fps", [51, 240])
def test_gif_above_50_fps_is_refused_pointing_at_mp4(tmp_path, fps):
    """Pillow would write a 0/100 s delay, which browsers play at 10 fps."""
    with pytest.raises(ValueError, match="a GIF plays at most 50 fps.*save as .mp4"):
        export_video(frames(), tmp_path / "clip.gif", fps=fps)
    assert os.listdir(tmp_path) == []
    with Image.open(export_video(frames(), tmp_path / "clip.gif", fps=50)) as gif:
        assert gif.info["duration"] == 20


def test_gif_delay_past_its_16_bit_limit_is_refused_not_a_struct_error(tmp_path):
    with pytest.raises(ValueError, match="a frame shown longer than the 655.35 s a GIF can hold"):
        export_video(frames(2), tmp_path / "clip.gif", fps=0.001)
    still = [Image.new("RGB", (8, 8), "red")] * 100  # Pillow merges them: one frame of 100 x 10 s
    with pytest.raises(ValueError, match="100 identical frames in a row are one GIF frame"):
        export_video(still, tmp_path / "clip.gif", fps=0.1)
    assert os.listdir(tmp_path) == []
    with Image.open(export_video(frames(2), tmp_path / "clip.gif", fps=1000 / 655350)) as gif:
        assert gif.info["duration"] == 655350


def test_a_huge_integer_fps_is_refused_as_out_of_range(tmp_path):
    with pytest.raises(ValueError, match=r"fps must be a number in \(0, 240\]"):
        export_video(frames(), tmp_path / "clip.gif", fps=10**400)
