"""The `video` port: frames with their frame rate, as one value a chain passes on and a caller saves.

A text-to-video app's frames are also its `frames` output (an `images` port, so a step that takes several images can
read them); `video` keeps the frame rate with them. No built-in task takes a `video` input yet, so wiring one into
an image input is refused when the chain is built ("expects 'image' but generate.video is 'video'").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from appflow.ports import register_port_type


@dataclass(frozen=True)
class Video:
    """Frames (PIL images of one size) shown at `fps` frames per second."""

    frames: tuple
    fps: float

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def size(self) -> tuple[int, int]:
        return self.frames[0].size

    @property
    def duration(self) -> float:
        """Seconds the video lasts."""
        return len(self.frames) / self.fps

    def save(self, path: str | os.PathLike) -> Path:
        """Write the video to `path`: .mp4 (OpenCV) or .gif (Pillow), chosen by the extension
        (`mixkit.io.video.export_video`: checked before encoding, complete or not written)."""
        from mixkit.io.video import export_video

        return export_video(list(self.frames), path, self.fps)


register_port_type("video", "frames with a frame rate (appflow.video.Video; .save('clip.mp4' or 'clip.gif'))",
                   lambda value: isinstance(value, Video))
