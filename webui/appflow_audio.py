"""An audio output of an AppFlow app over HTTP (base64 16-bit PCM .wav) and in the AppFlow tab (a .wav file the
tab's audio player plays).

A music app answers with its clip three times over (`audio`, and the bare samples as `waveform` and PaddleMIX's
`result`); over HTTP each is the same base64 .wav, encoded once, rather than a JSON list of 80,000 floats without
its sample rate."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

HTTP_MAX_AUDIO_SECONDS = 30.0  # per request on a server: 3 x AudioLDM's 10 s training clips (the Python API: 120 s)


def encode_audio_output(audio) -> dict:
    """JSON for an `appflow.audio.Audio`: the .wav file as base64 with what a client needs to play or decode it."""
    from mixkit.io.audio import wav_bytes

    return {"format": "wav", "mime_type": "audio/wav", "sample_rate": audio.sample_rate,
            "sample_count": len(audio), "duration": audio.duration, "sample_width_bits": 16,
            "data": base64.b64encode(wav_bytes(audio.waveform, audio.sample_rate)).decode("ascii")}


def audio_of_outputs(outputs: dict) -> dict[str, Any]:
    """Output name -> `Audio` for every audio output, and for every bare waveform that is one's samples (the same
    array: `waveform`, `result`), so those are sent as the clip they are."""
    from appflow.audio import Audio

    clips = [value for value in outputs.values() if isinstance(value, Audio)]
    return {key: next(clip for clip in clips if clip is value or clip.waveform is value)
            for key, value in outputs.items() if any(clip is value or clip.waveform is value for clip in clips)}


def encode_audio_outputs(outputs: dict) -> dict[str, dict]:
    """The JSON of every audio output (`audio_of_outputs`), one encoding per clip."""
    encoded: dict[int, dict] = {}
    return {key: encoded.setdefault(id(clip), encode_audio_output(clip))
            for key, clip in audio_of_outputs(outputs).items()}


def check_audio_length_option(options: dict) -> None:
    """A server holds `audio_length_in_s` to HTTP_MAX_AUDIO_SECONDS (one clip is one UNet pass over its whole mel)."""
    seconds = options.get("audio_length_in_s")
    if seconds is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return  # None is the model's 5.12 s; other types are refused by the app's own check, with its message
    if not 0 < seconds <= HTTP_MAX_AUDIO_SECONDS:
        raise ValueError(f"option audio_length_in_s must be a number of seconds in (0, {HTTP_MAX_AUDIO_SECONDS:g}] "
                         f"on this server, got {seconds!r}.")


def save_audio_outputs(outputs: dict, folder: Path) -> dict[str, str]:
    """Each audio output written into `folder` (the run's result folder) as a .wav: output name -> path (bare
    waveforms that are an audio output's samples are not written again)."""
    from appflow.audio import Audio

    clips = {key: value for key, value in outputs.items() if isinstance(value, Audio)}
    if clips:
        folder.mkdir(parents=True, exist_ok=True)
    return {key: str(value.save(folder / f"{key}.wav")) for key, value in clips.items()}
