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
