"""Write a list of frames as a video file: .mp4 through OpenCV's MPEG-4 encoder, .gif through Pillow.

diffusers' `export_to_video` writes .mp4 with OpenCV too, but straight to the target (an interrupted write leaves a
broken file) and whatever the extension says. Here the path and frames are checked before anything is encoded, and
the file appears complete or not at all (`atomic_output_path`: a temporary file beside it, then a rename).
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any, Sequence

VIDEO_FORMATS = {".mp4": "MPEG-4 Part 2 in an MP4 container (OpenCV's 'mp4v' encoder)",
                 ".gif": "animated GIF (Pillow), 256 colours per frame, loops forever"}
MAX_FPS = 240
# GIF stores each frame's delay as a 16-bit count of 1/100 s: at most 655.35 s a frame (Pillow raises struct.error past
# it), and at least 2/100 s, as browsers play a delay of 0 or 1 (what Pillow writes above 50 fps) at 1/10 s
GIF_MAX_FPS = 50
GIF_MAX_DELAY_CS = 0xFFFF


def mp4_available() -> bool:
    """Whether .mp4 can be written here: OpenCV is installed and its VideoWriter has an MPEG-4 encoder."""
    try:
        import cv2

        return bool(cv2.videoio_registry.hasBackend(cv2.CAP_FFMPEG))
    except (ImportError, AttributeError):  # no OpenCV, or a build without the video I/O registry
        return False


def check_video_path(path: Any) -> Path:
    """The output path as a Path, refused (ValueError) for an extension no writer here produces, or (OSError) for a
    folder that is missing or not writable: checked before encoding, so a long run does not fail at its last step."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise TypeError(f"path must be a file path (str or Path), got {path!r}.")
    target = Path(path).expanduser()
    suffix = target.suffix.lower()
    if suffix not in VIDEO_FORMATS:
        raise ValueError(f"Cannot write video {str(target)!r}: unknown extension {suffix or '(none)'!r}; use one of "
                         f"{', '.join(VIDEO_FORMATS)} ({'; '.join(f'{k}: {v}' for k, v in VIDEO_FORMATS.items())}).")
    if suffix == ".mp4" and not mp4_available():
        raise ValueError(f"Cannot write {str(target)!r}: .mp4 needs OpenCV with FFmpeg (`pip install "
                         "opencv-python-headless`); or save as .gif, which Pillow always writes.")
    folder = target.absolute().parent
    if not folder.is_dir():
        raise FileNotFoundError(f"Cannot write video {str(target)!r}: the folder {str(folder)!r} does not exist; "
                                "create it or choose another path.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"Cannot write video {str(target)!r}: the folder {str(folder)!r} is not writable; "
                              "choose another path.")
    if target.is_dir():
        raise IsADirectoryError(f"Cannot write video {str(target)!r}: it is a folder; give a file name.")
    return target


def check_frames(frames: Any) -> list:
    """The frames as a list of PIL images of one size; TypeError/ValueError saying what was wrong."""
    from PIL import Image

    if isinstance(frames, (str, bytes)) or not isinstance(frames, Sequence):
        raise TypeError(f"frames must be a list of PIL images, got {type(frames).__name__}.")
    if not frames:
        raise ValueError("frames is empty; a video needs at least one frame.")
    for index, frame in enumerate(frames):
        if not isinstance(frame, Image.Image):
            raise TypeError(f"frames[{index}] is a {type(frame).__name__}, not a PIL image.")
    sizes = {frame.size for frame in frames}
    if len(sizes) > 1:
        raise ValueError(f"frames have different sizes {sorted(sizes)}; every frame of a video must have one size.")
    if 0 in frames[0].size:
        raise ValueError(f"frames are {frames[0].width}x{frames[0].height}; a video frame needs at least 1x1 pixels.")
    return list(frames)


def check_fps(fps: Any) -> float:
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(fps, bool) or not isinstance(fps, numbers.Real) or not 0 < fps <= MAX_FPS:
        raise ValueError(f"fps must be a number in (0, {MAX_FPS}], got {fps!r}.")
    return float(fps)


def export_video(frames: Sequence[Any], path: str | os.PathLike, fps: float = 8.0) -> Path:
    """Write `frames` (PIL images of one size) to `path` (.mp4 or .gif, by its extension) at `fps`; returns the path.

    Everything is checked before encoding (extension, encoder, folder, frames, fps); the file is written beside the
    target under a temporary name and renamed when complete, so an error leaves the previous file, if any, as it was.
    MPEG-4 needs even sides (the encoder's 4:2:0 chroma would crop an odd row or column): odd frames are refused for
    .mp4, saying to use .gif or resize.
    """
    from mixkit.io.atomic import atomic_output_path

    target = check_video_path(path)
    frames = check_frames(frames)
    fps = check_fps(fps)
    width, height = frames[0].size
    suffix = target.suffix.lower()
    if suffix == ".mp4" and (width % 2 or height % 2):
        raise ValueError(f"Cannot write {str(target)!r}: frames are {width}x{height} and MPEG-4 needs even sides; "
                         "resize or crop them to even sizes, or save as .gif.")
    if suffix == ".gif":
        _check_gif_timing(frames, fps, target)
    with atomic_output_path(target) as temp:
        if suffix == ".gif":
            _write_gif(frames, temp, fps)
        else:
            _write_mp4(frames, temp, fps)
    return target


def _check_gif_timing(frames: list, fps: float, target: Path) -> None:
    """Refuse (ValueError) a frame rate a GIF cannot play: above GIF_MAX_FPS, or a frame shown longer than 655.35 s,
    counting a run of identical frames as one (Pillow merges them and adds their delays)."""
    if fps > GIF_MAX_FPS:
        raise ValueError(f"Cannot write {str(target)!r} at {fps:g} fps: a GIF plays at most {GIF_MAX_FPS} fps (its "
                         "delays are 1/100 s; browsers slow shorter ones to 10 fps); save as .mp4 or lower fps.")
    longest = run = 1
    previous = frames[0].convert("RGB").tobytes()
    for frame in frames[1:]:
        current = frame.convert("RGB").tobytes()
        run = run + 1 if current == previous else 1
        longest, previous = max(longest, run), current
    if longest * round(1000 / fps) // 10 > GIF_MAX_DELAY_CS:
        raise ValueError(f"Cannot write {str(target)!r} at {fps:g} fps: "
                         + (f"{longest} identical frames in a row are one GIF frame, " if longest > 1 else "a frame ")
                         + f"shown longer than the {GIF_MAX_DELAY_CS / 100:g} s a GIF can hold; raise fps or save as "
                         ".mp4.")


def _write_gif(frames: list, temp: Path, fps: float) -> None:
    # GIF stores delays in hundredths of a second: 8 fps is 12.5 -> 120 ms (Pillow rounds to 10 ms units when saving).
    duration = round(1000 / fps)
    first, *rest = [frame.convert("RGB") for frame in frames]
    first.save(temp, format="GIF", save_all=True, append_images=rest, duration=duration, loop=0, disposal=1)


def _write_mp4(frames: list, temp: Path, fps: float) -> None:
    import cv2
    import numpy as np

    # OpenCV picks the container from the file name's extension, and the atomic temporary name ends in ".tmp":
    # encode to a sibling that ends in ".mp4", then move it onto the temporary file.
    encoding = temp.with_name(temp.name + ".mp4")
    width, height = frames[0].size
    writer = cv2.VideoWriter(str(encoding), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    try:
        if not writer.isOpened():
            raise OSError(f"OpenCV could not open an MPEG-4 writer for {width}x{height} at {fps} fps; "
                          "save as .gif instead.")
        for frame in frames:
            writer.write(cv2.cvtColor(np.asarray(frame.convert("RGB")), cv2.COLOR_RGB2BGR))
    except BaseException:
        writer.release()
        encoding.unlink(missing_ok=True)
        raise
    writer.release()
    os.replace(encoding, temp)
