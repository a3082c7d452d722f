"""A video output of an AppFlow app over HTTP (base64 .mp4, or .gif where no MPEG-4 encoder exists) and in the
AppFlow tab (a file the gallery plays next to the frames)."""

from __future__ import annotations

import base64
import tempfile
from pathlib import Path


def video_suffix() -> str:
    """.mp4 when OpenCV can encode it here (smaller, plays everywhere), else .gif, which Pillow always writes."""
    from mixkit.io.video import mp4_available

    return ".mp4" if mp4_available() else ".gif"


def check_server_video_fps(fps) -> None:
    """Refuse (ValueError) before a run a video app's `fps` this server cannot encode its answer at: where it falls
    back to .gif, a GIF's frame rate range (`mixkit.io.video`) rather than a failure after the video is made."""
    from mixkit.io.video import GIF_MAX_DELAY_CS, GIF_MAX_FPS

    if video_suffix() == ".gif" and not 100 / GIF_MAX_DELAY_CS <= fps <= GIF_MAX_FPS:
        raise ValueError(f"option fps must be in [{100 / GIF_MAX_DELAY_CS:.4g}, {GIF_MAX_FPS}] on this server, got "
                         f"{fps!r}: it answers with a GIF (no MPEG-4 encoder here: install opencv-python-headless for "
                         ".mp4), and a GIF's delays are whole 1/100 s from 2/100 to 655.35 s.")


def encode_video_output(video) -> dict:
    """JSON for an `appflow.video.Video`: the encoded file as base64 with what a client needs to use it. The frames
    themselves are the app's `frames` output (base64 PNGs); this is the same frames as one playable file."""
    suffix = video_suffix()
    with tempfile.TemporaryDirectory() as scratch:
        data = video.save(Path(scratch) / f"video{suffix}").read_bytes()
    width, height = video.size
    return {"format": suffix[1:], "mime_type": "video/mp4" if suffix == ".mp4" else "image/gif", "fps": video.fps,
            "frame_count": len(video), "width": width, "height": height,
            "data": base64.b64encode(data).decode("ascii")}


def save_video_outputs(outputs: dict, folder: Path) -> dict[str, str]:
    """Each video among an app's outputs written into `folder` (the run's result folder): output name -> path."""
    from appflow.video import Video

    videos = {key: value for key, value in outputs.items() if isinstance(value, Video)}
    if videos:
        folder.mkdir(parents=True, exist_ok=True)
    suffix = video_suffix()
    return {key: str(value.save(folder / f"{key}{suffix}")) for key, value in videos.items()}
