"""The `audio` and `waveform` ports: a generated clip, as one value a chain passes on and a caller saves.

A music app's `waveform` (also PaddleMIX's `result`) is the bare float32 samples PaddleMIX hands back, for
`scipy.io.wavfile.write(path, rate=16000, data=result["result"])` as its README does; `audio` keeps the sample rate
with them and saves a 16-bit PCM .wav (`result["audio"].save("clip.wav")`). No built-in task takes an audio input
yet, so wiring one into a text or image input is refused when the chain is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appflow.ports import register_port_type


@dataclass(frozen=True, eq=False)
class Audio:
    """A mono float32 waveform (numpy, samples in [-1, 1]) played at `sample_rate` samples per second."""

    waveform: Any
    sample_rate: int

    def __len__(self) -> int:
        return int(self.waveform.shape[0])

    @property
    def duration(self) -> float:
        """Seconds the clip lasts."""
        return len(self) / self.sample_rate

    def save(self, path: str | os.PathLike) -> Path:
        """Write the clip to `path` as a 16-bit PCM .wav (`mixkit.io.audio.write_wav`: checked first, complete or
        not written)."""
        from mixkit.io.audio import write_wav

        return write_wav(self.waveform, path, self.sample_rate)


def _is_waveform(value: Any) -> bool:
    import numpy as np

    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype == np.float32


register_port_type("waveform", "a mono float32 numpy array of samples in [-1, 1] (16000 per second for AudioLDM)",
                   _is_waveform)
register_port_type("audio", "a waveform with its sample rate (appflow.audio.Audio; .save('clip.wav'))",
                   lambda value: isinstance(value, Audio) and _is_waveform(value.waveform))
register_port_type("audios", "a list of clips (appflow.audio.Audio), e.g. every clip of a batch",
                   lambda value: isinstance(value, (list, tuple))
                   and all(isinstance(clip, Audio) and _is_waveform(clip.waveform) for clip in value), min_items=1)
