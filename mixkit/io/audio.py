"""Write a waveform as a 16-bit PCM .wav file (the stdlib `wave` module), and read one back.

PaddleMIX's music app hands back a float waveform and leaves the file to `scipy.io.wavfile.write`, which writes a
float array as a 32-bit float WAV (players differ on those) and straight to the target. Here the waveform and path
are checked before anything is written, samples are clipped to [-1, 1] and stored as 16-bit PCM (what every player
reads), and the file appears complete or not at all (`atomic_output_path`). The stdlib writer is enough for PCM, so
no audio library is needed.
"""

from __future__ import annotations

import numbers
import os
import wave
from pathlib import Path
from typing import Any

MAX_SAMPLE_RATE = 768_000  # the highest rate common audio interfaces offer
MAX_CHANNELS = 16


def check_sample_rate(rate: Any) -> int:
    """`rate` as an int if it is a whole number of samples per second in [1, MAX_SAMPLE_RATE]; else ValueError."""
    if isinstance(rate, bool) or not isinstance(rate, numbers.Integral) or not 1 <= rate <= MAX_SAMPLE_RATE:
        raise ValueError(f"rate must be an integer number of samples per second in [1, {MAX_SAMPLE_RATE}], got "
                         f"{rate!r} (AudioLDM's is 16000).")
    return int(rate)


def check_waveform(waveform: Any):
    """The waveform as a numpy array, float32 (or int16 PCM as given), (samples,) mono or (samples, channels) as
    scipy's wavfile takes it; TypeError/ValueError saying what was wrong. Torch tensors are taken too (moved to the
    CPU)."""
    import numpy as np

    if type(waveform).__module__.startswith("torch"):
        waveform = waveform.detach().cpu().float().numpy()
    if not isinstance(waveform, np.ndarray):
        raise TypeError(f"waveform must be a numpy array (or torch tensor) of samples, got {type(waveform).__name__}.")
    if waveform.dtype.kind not in "fiu":
        raise TypeError(f"waveform must hold numbers (float in [-1, 1], or int16), got dtype {waveform.dtype}.")
    if waveform.ndim not in (1, 2) or waveform.shape[0] == 0 or \
            (waveform.ndim == 2 and not 1 <= waveform.shape[1] <= MAX_CHANNELS):
        raise ValueError(f"waveform must be (samples,) or (samples, channels) with 1 to {MAX_CHANNELS} channels and "
                         f"at least one sample, got shape {tuple(waveform.shape)}.")
    if waveform.dtype.kind in "iu":
        if waveform.dtype != np.int16:
            raise TypeError(f"an integer waveform must be int16 PCM, got {waveform.dtype}; pass floats in [-1, 1].")
        return waveform
    samples = waveform.astype(np.float32)
    if not np.isfinite(samples).all():
        raise ValueError("waveform holds NaN or infinite samples; nothing was written (a diverged model: load it in "
                         "float32).")
    return samples


def check_wav_path(path: Any) -> Path:
    """The output path as a Path, refused for another extension or a folder that is missing: before writing."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
        raise TypeError(f"path must be a file path (str or Path), got {path!r}.")
    target = Path(path).expanduser()
    if target.suffix.lower() != ".wav":
        raise ValueError(f"Cannot write audio {str(target)!r}: the extension must be .wav (16-bit PCM), got "
                         f"{target.suffix or '(none)'!r}.")
    folder = target.absolute().parent
    if not folder.is_dir():
        raise FileNotFoundError(f"Cannot write audio {str(target)!r}: the folder {str(folder)!r} does not exist; "
                                "create it or choose another path.")
    if target.is_dir():
        raise IsADirectoryError(f"Cannot write audio {str(target)!r}: it is a folder; give a file name.")
    return target


def pcm16(waveform: Any):
    """Float samples in [-1, 1] as int16 PCM: clipped (a vocoder overshoots a little), scaled by 32767, rounded;
    int16 samples are kept as they are."""
    import numpy as np

    samples = check_waveform(waveform)
    if samples.dtype == np.int16:
        return samples.astype("<i2")
    return np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")


def wav_bytes(waveform: Any, rate: int = 16000) -> bytes:
    """The 16-bit PCM .wav file of `waveform` at `rate`, as bytes (what `write_wav` writes; HTTP answers send it)."""
    import io

    rate = check_sample_rate(rate)
    samples = pcm16(waveform)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as file:
        file.setnchannels(1 if samples.ndim == 1 else samples.shape[1])
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(samples.tobytes())  # (samples, channels) row-major: interleaved, as WAV stores them
    return buffer.getvalue()


def write_wav(waveform: Any, path: str | os.PathLike, rate: int = 16000) -> Path:
    """Write `waveform` ((samples,) or (samples, channels), floats in [-1, 1]) to `path` as a 16-bit PCM .wav at
    `rate` samples per second; returns the path. Checked first; complete or not written at all."""
    from mixkit.io.atomic import atomic_output_path

    target = check_wav_path(path)
    data = wav_bytes(waveform, rate)
    with atomic_output_path(target) as temp:
        temp.write_bytes(data)
    return target


def read_wav(path: str | os.PathLike) -> tuple[Any, int]:
    """A 16-bit PCM .wav as (float32 samples in [-1, 1): (samples,) mono or (samples, channels), rate)."""
    import numpy as np

    try:
        with wave.open(os.fspath(path), "rb") as file:
            width, channels, rate = file.getsampwidth(), file.getnchannels(), file.getframerate()
            data = file.readframes(file.getnframes())
    except (wave.Error, EOFError) as error:
        raise ValueError(f"{os.fspath(path)!r} is not a readable PCM .wav file ({error}).") from None
    if width != 2:
        raise ValueError(f"{os.fspath(path)!r} holds {8 * width}-bit samples; only 16-bit PCM is read here.")
    samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    return (samples if channels == 1 else samples.reshape(-1, channels)), rate
