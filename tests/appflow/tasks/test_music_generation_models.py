"""AppFlow's `music_generation` with MusicLDM and AudioLDM 2 folders (tiny, diffusers' test sizes) loaded through
`models=` as a user passes a downloaded model: the pipeline class chosen by model_index.json, batches of clips, and
AudioLDM 2's text-to-speech `transcription`. The waveforms are `TextToAudio`'s, which tests/pipelines/
test_audio_models.py holds equal to diffusers' own pipelines."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from appflow import Appflow, ModelCache
from appflow.audio import Audio
from pipelines.text_to_audio import TextToAudio

APP = "music_generation"
SMALL = {"audio_length_in_s": 0.02, "steps": 2}


@pytest.fixture(scope="module", params=["musicldm", "audioldm2"])
def model_dir(request):
    return request.getfixturevalue(f"tiny_{request.param}_dir")


@pytest.fixture(scope="module")
def direct(model_dir):
    return TextToAudio.from_pretrained(str(model_dir))


def test_a_folder_runs_as_its_model_index_class_and_makes_the_models_clip(model_dir, direct):
    flow = Appflow(app=APP, models=[str(model_dir)], cache=ModelCache())
    result = flow(prompt="a techno beat", negative_prompt="noise", seed=11, **SMALL)
    expected = direct("a techno beat", negative_prompt="noise", seed=11, **SMALL)
    assert np.array_equal(result["waveform"], expected.waveform) and result["waveform"].shape == (320,)
    assert result["result"] is result["waveform"] and result["seed"] == 11 and result["seeds"] == [11]
    assert isinstance(result["audio"], Audio) and result["audios"] == [result["audio"]]


def test_a_batch_carries_every_clip_with_its_seed(model_dir, direct):
    flow = Appflow(app=APP, models=[str(model_dir)], cache=ModelCache())
    result = flow(prompt="rain", seed=20, num_waveforms_per_prompt=3, **SMALL)  # diffusers' spelling of batch_size
    expected = direct("rain", seed=20, batch_size=3, **SMALL)
    assert result["seeds"] == [20, 21, 22] and len(result["audios"]) == 3
    assert all(isinstance(clip, Audio) and clip.sample_rate == 16000 for clip in result["audios"])
    for clip, waveform in zip(result["audios"], expected.waveforms):
        assert np.array_equal(clip.waveform, waveform)
    assert result["audio"] is result["audios"][0] and result["waveform"] is result["audios"][0].waveform
    assert result["seed"] == 20


def test_loaded_diffusers_pipelines_are_taken_as_models(model_dir, direct):
    bare = type(direct.pipeline).from_pretrained(str(model_dir))
    for model in (direct, bare):
        clip = Appflow(app=APP, models={"audio_generator": model}, cache=ModelCache())(prompt="a bell", seed=6,
                                                                                      **SMALL)
        assert np.array_equal(clip["waveform"], direct("a bell", seed=6, **SMALL).waveform)


def test_a_callers_generator_draws_every_clip(tiny_audioldm2_dir):
    flow = Appflow(app=APP, models=[str(tiny_audioldm2_dir)], cache=ModelCache())
    result = flow(prompt="rain", batch_size=2, generator=torch.Generator().manual_seed(3), **SMALL)
    again = flow(prompt="rain", batch_size=2, generator=torch.Generator().manual_seed(3), **SMALL)
    assert result["seeds"] == [-1, -1] and result["seed"] == -1
    assert all(np.array_equal(a.waveform, b.waveform) for a, b in zip(result["audios"], again["audios"]))
    assert not np.array_equal(result["audios"][0].waveform, result["audios"][1].waveform)


def test_a_cached_hub_id_loads_as_its_model_index_class(model_dir, direct, tmp_path, monkeypatch):
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-audio"
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from_hub = Appflow(app=APP, models=["someone/tiny-audio"], cache=ModelCache())(prompt="a bell", seed=3, **SMALL)
    assert np.array_equal(from_hub["waveform"], direct("a bell", seed=3, **SMALL).waveform)


def test_a_text_to_speech_audioldm2_speaks_the_transcription(tiny_audioldm2_tts_dir):
    flow = Appflow(app=APP, models=[str(tiny_audioldm2_tts_dir)], cache=ModelCache())
    spoken = flow(prompt="a calm voice", transcription="hello there", seed=4, **SMALL)
    expected = TextToAudio.from_pretrained(str(tiny_audioldm2_tts_dir))("a calm voice", transcription="hello there",
                                                                       seed=4, **SMALL)
    assert np.array_equal(spoken["waveform"], expected.waveform)
    with pytest.raises(ValueError, match="This AudioLDM 2 checkpoint is text-to-speech: pass transcription="):
        flow(prompt="a calm voice", seed=4, **SMALL)


@pytest.mark.parametrize("folder, label", [("tiny_audioldm_dir", "AudioLDM"), ("tiny_musicldm_dir", "MusicLDM"),
                                           ("tiny_audioldm2_dir", "AudioLDM 2")])
def test_a_transcription_is_refused_for_a_model_that_reads_none(folder, label, request):
    flow = Appflow(app=APP, models=[str(request.getfixturevalue(folder))], cache=ModelCache())
    with pytest.raises(ValueError, match=f"transcription is read only by AudioLDM 2 text-to-speech checkpoints .*"
                                         f"this {label} model"):
        flow(prompt="rain", transcription="hello", **SMALL)


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 0}, r"batch_size must be an integer in \[1, 16\], got 0"),
    ({"num_waveforms_per_prompt": 17}, r"batch_size must be an integer in \[1, 16\], got 17"),
    ({"transcription": 5}, "transcription must be a string"),
    ({"steps": 1001}, r"steps must be an integer in \[1, 1000\]"),
])
def test_bad_batch_and_transcription_options_are_refused_before_the_model_loads(tiny_audioldm2_dir, options,
                                                                                  message):
    cache = ModelCache()
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow(app=APP, models=[str(tiny_audioldm2_dir)], cache=cache, **options)
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow(app=APP, models=[str(tiny_audioldm2_dir)], cache=cache)(prompt="rain", **options)
    assert cache.loads == 0


def test_a_folder_of_another_class_is_refused_naming_the_accepted_classes(tiny_sd1_dir):
    with pytest.raises(ValueError, match="'StableDiffusionPipeline' model .*accepted: AudioLDM2Pipeline, "
                                         "AudioLDMPipeline, MusicLDMPipeline"):
        Appflow(app=APP, models=[str(tiny_sd1_dir)], cache=ModelCache())


def _cache_as_hub_id(folder, tmp_path, monkeypatch) -> str:
    """`folder` as the offline hub cache's only snapshot of someone/tiny-audio; that hub id."""
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-audio"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return "someone/tiny-audio"


@pytest.mark.parametrize("folder, label", [("tiny_audioldm_dir", "AudioLDM"), ("tiny_musicldm_dir", "MusicLDM"),
                                           ("tiny_audioldm2_dir", "AudioLDM 2")])
@pytest.mark.parametrize("as_hub_id", [False, True])
def test_a_transcription_the_model_cannot_read_is_refused_before_it_loads(folder, label, as_hub_id, request,
                                                                          tmp_path, monkeypatch):
    source = str(request.getfixturevalue(folder))
    if as_hub_id:
        source = _cache_as_hub_id(source, tmp_path, monkeypatch)
    refused = (f"App 'music_generation', step '.*': transcription is read only by AudioLDM 2 text-to-speech "
               f"checkpoints .*this {label} model")
    cache = ModelCache()
    with pytest.raises(ValueError, match=refused):  # when the flow is built
        Appflow(app=APP, models=[source], cache=cache, transcription="hello")
    flow = Appflow(app=APP, models=[source], cache=cache)
    with pytest.raises(ValueError, match=refused):  # a per-call option, before the first step
        flow(prompt="rain", transcription="hello", **SMALL)
    assert cache.loads == 0


@pytest.mark.parametrize("as_hub_id", [False, True])
def test_a_text_to_speech_checkpoint_without_a_transcription_is_refused_before_it_loads(
        tiny_audioldm2_tts_dir, as_hub_id, tmp_path, monkeypatch):
    source = str(tiny_audioldm2_tts_dir)
    if as_hub_id:
        source = _cache_as_hub_id(source, tmp_path, monkeypatch)
    refused = "This AudioLDM 2 checkpoint is text-to-speech: pass transcription="
    cache = ModelCache()
    flow = Appflow(app=APP, models=[source], cache=cache)  # built without it: the web UI passes it per call
    with pytest.raises(ValueError, match=refused):
        flow(prompt="a calm voice", **SMALL)
    with pytest.raises(ValueError, match=refused):  # a per-call empty one overrides the flow's
        Appflow(app=APP, models=[source], cache=cache, transcription="hello there")(prompt="a calm voice",
                                                                                    transcription="", **SMALL)
    assert cache.loads == 0


def test_a_loaded_pipeline_is_told_from_its_components_before_the_step_runs(tiny_audioldm2_dir,
                                                                             tiny_audioldm2_tts_dir, monkeypatch):
    from diffusers import AudioLDM2Pipeline

    from appflow.tasks.music_generation import TextToAudioTask

    def never_run(*args, **kwargs):
        raise AssertionError("the step ran before the transcription was checked")

    monkeypatch.setattr(TextToAudioTask, "run", never_run)
    for model in (AudioLDM2Pipeline.from_pretrained(str(tiny_audioldm2_dir)),
                  TextToAudio.from_pretrained(str(tiny_audioldm2_dir))):
        with pytest.raises(ValueError, match="transcription is read only by .*this AudioLDM 2 model"):
            Appflow(app=APP, models={"audio_generator": model}, cache=ModelCache(), transcription="hello")
    speech = TextToAudio.from_pretrained(str(tiny_audioldm2_tts_dir))
    for model in (speech, speech.pipeline):
        flow = Appflow(app=APP, models={"audio_generator": model}, cache=ModelCache())
        with pytest.raises(ValueError, match="This AudioLDM 2 checkpoint is text-to-speech"):
            flow(prompt="a calm voice", **SMALL)
