"""An audio output of an AppFlow app over HTTP (base64 16-bit PCM .wav) and in the AppFlow tab (a .wav file the
tab's audio player plays).

A music app answers with its clip three times over (`audio`, and the bare samples as `waveform` and PaddleMIX's
`result`); over HTTP each is the same base64 .wav, encoded once, rather than a JSON list of 80,000 floats without
its sample rate. A batch's clips (`audios`) are a list of those, the first being the `audio` output's."""

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


def clip_lists_of_outputs(outputs: dict) -> dict[str, list]:
    """Output name -> its clips, for every output that is a list of clips (a batch's `audios`)."""
    from appflow.audio import Audio

    return {key: list(value) for key, value in outputs.items()
            if isinstance(value, (list, tuple)) and value and all(isinstance(clip, Audio) for clip in value)}


def encode_audio_outputs(outputs: dict) -> dict[str, Any]:
    """The JSON of every audio output (`audio_of_outputs`) and of every list of clips (a list of encodings), one
    encoding per clip: a batch's first clip is also the `audio` output."""
    encoded: dict[int, dict] = {}

    def once(clip) -> dict:
        if id(clip) not in encoded:
            encoded[id(clip)] = encode_audio_output(clip)
        return encoded[id(clip)]

    result: dict[str, Any] = {key: once(clip) for key, clip in audio_of_outputs(outputs).items()}
    result.update({key: [once(clip) for clip in clips] for key, clips in clip_lists_of_outputs(outputs).items()})
    return result


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


def save_clip_list_outputs(outputs: dict, folder: Path, saved: dict[str, str]) -> dict[str, list[str]]:
    """Each list of clips (`clip_lists_of_outputs`) as .wav files in `folder`: output name -> paths, a clip that an
    audio output already wrote (`saved`, from `save_audio_outputs`) pointing at that file instead of a second one."""
    written = {id(outputs[key]): path for key, path in saved.items()}
    lists = clip_lists_of_outputs(outputs)
    if lists:
        folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, list[str]] = {}
    for key, clips in lists.items():
        digits = max(2, len(str(len(clips) - 1)))
        for index, clip in enumerate(clips):
            if id(clip) not in written:
                written[id(clip)] = str(clip.save(folder / f"{key}-{index:0{digits}d}.wav"))
        paths[key] = [written[id(clip)] for clip in clips]
    return paths
