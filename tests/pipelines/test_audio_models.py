"""`pipelines.audio_models` through `TextToAudio`: tiny MusicLDM and AudioLDM 2 folders (diffusers' test sizes), with
diffusers' own pipelines as the oracle (the same generator gives the same waveforms)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.control import GenerationControl
from pipelines.text_to_audio import TextToAudio

SMALL = {"audio_length_in_s": 0.02, "steps": 2}


@pytest.fixture(scope="module")
def audioldm2(tiny_audioldm2_dir):
    return TextToAudio.from_pretrained(str(tiny_audioldm2_dir))


@pytest.fixture(scope="module")
def musicldm(tiny_musicldm_dir):
    return TextToAudio.from_pretrained(str(tiny_musicldm_dir))


@pytest.fixture
def diffusers_keeps_batch_order(monkeypatch):
    """diffusers re-orders a batch by CLAP score when librosa is installed; the oracle keeps the drawn order."""
    import diffusers.pipelines.audioldm2.pipeline_audioldm2 as audioldm2_module

    monkeypatch.setattr(audioldm2_module, "is_librosa_available", lambda: False)


def assert_same_waveforms(actual, expected):
    """Equal up to float32 noise relative to the clips' scale: the tiny vocoders' samples are ~1e-6, so an absolute
    tolerance like 1e-7 would let clips a tenth apart pass."""
    expected = np.asarray(expected)
    scale = float(np.abs(expected).max())
    assert scale > 0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-4 * scale)


def _diffusers(folder, class_name):
    import diffusers

    pipe = getattr(diffusers, class_name).from_pretrained(str(folder))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_the_class_comes_from_model_index_json(audioldm2, musicldm):
    from diffusers import AudioLDM2Pipeline, MusicLDMPipeline

    assert isinstance(audioldm2.pipeline, AudioLDM2Pipeline) and audioldm2.family.label == "AudioLDM 2"
    assert isinstance(musicldm.pipeline, MusicLDMPipeline) and musicldm.family.label == "MusicLDM"
    assert not audioldm2.reads_transcription and not musicldm.reads_transcription


def test_audioldm2_equals_diffusers_for_the_same_seed(audioldm2, tiny_audioldm2_dir):
    pipe = _diffusers(tiny_audioldm2_dir, "AudioLDM2Pipeline")
    expected = pipe("a hammer on wood", negative_prompt="noise", audio_length_in_s=0.02, num_inference_steps=3,
                    guidance_scale=3.5, generator=torch.Generator().manual_seed(7)).audios[0]
    result = audioldm2("a hammer on wood", negative_prompt="noise", audio_length_in_s=0.02, steps=3, cfg_scale=3.5,
                       seed=7)
    assert result.seeds == [7] and result.sample_rate == 16000 and result.waveform.shape == expected.shape == (320,)
    assert_same_waveforms(result.waveform, expected)


def test_audioldm2_batch_equals_diffusers_num_waveforms_per_prompt(audioldm2, tiny_audioldm2_dir,
                                                                   diffusers_keeps_batch_order):
    pipe = _diffusers(tiny_audioldm2_dir, "AudioLDM2Pipeline")
    expected = pipe("a hammer on wood", audio_length_in_s=0.02, num_inference_steps=2, num_waveforms_per_prompt=3,
                    generator=torch.Generator().manual_seed(5)).audios
    result = audioldm2("a hammer on wood", batch_size=3, generator=torch.Generator().manual_seed(5), **SMALL)
    assert result.seeds == [-1, -1, -1] and len(result.waveforms) == 3
    assert_same_waveforms(np.stack(result.waveforms), expected)


def test_musicldm_equals_diffusers_given_clap_embeddings(musicldm, tiny_musicldm_dir):
    """diffusers' MusicLDM reads CLAP's `get_text_features` as a tensor, which transformers 5 wraps in an output: its
    own prompt encoding fails, so the oracle is diffusers' loop fed the CLAP embeddings."""
    pipe = _diffusers(tiny_musicldm_dir, "MusicLDMPipeline")

    def clap(text):
        tokens = pipe.tokenizer([text], padding="max_length", max_length=pipe.tokenizer.model_max_length,
                                truncation=True, return_tensors="pt")
        return pipe.text_encoder.get_text_features(tokens.input_ids, attention_mask=tokens.attention_mask).pooler_output

    with torch.no_grad():
        embeds, negative = clap("a techno beat"), clap("noise")
    expected = pipe(prompt_embeds=embeds, negative_prompt_embeds=negative, audio_length_in_s=0.02,
                    num_inference_steps=3, guidance_scale=2.0, num_waveforms_per_prompt=2,
                    generator=torch.Generator().manual_seed(3)).audios
    result = musicldm("a techno beat", negative_prompt="noise", audio_length_in_s=0.02, steps=3, cfg_scale=2.0,
                      batch_size=2, generator=torch.Generator().manual_seed(3))
    assert_same_waveforms(np.stack(result.waveforms), expected)


@pytest.mark.parametrize("model_name", ["audioldm2", "musicldm"])
def test_clip_k_of_a_batch_is_the_clip_of_seed_plus_k(model_name, request):
    model = request.getfixturevalue(model_name)
    batch = model("rain", batch_size=3, seed=40, **SMALL)
    assert batch.seeds == [40, 41, 42] and batch.seed == 40
    for clip, seed in zip(batch.waveforms, batch.seeds):
        assert_same_waveforms(clip, model("rain", seed=seed, **SMALL).waveform)
    assert np.abs(batch.waveforms[0] - batch.waveforms[1]).max() > 0.01 * np.abs(batch.waveforms[1]).max()


@pytest.mark.parametrize("model_name, steps, cfg_scale", [("audioldm2", 200, 3.5), ("musicldm", 200, 2.0)])
def test_steps_and_guidance_default_to_the_families_diffusers_defaults(model_name, steps, cfg_scale, request,
                                                                        monkeypatch):
    import pipelines.text_to_audio as text_to_audio

    model = request.getfixturevalue(model_name)
    assert (model.family.default_steps, model.family.default_cfg) == (steps, cfg_scale)
    used = []
    real = text_to_audio.guided_prediction
    monkeypatch.setattr(text_to_audio, "guided_prediction",
                        lambda noise, cfg, guided, step, made: used.append(cfg) or real(noise, cfg, guided, step, made))
    control, seen = GenerationControl(), []
    control.interrupt()  # stop after the first step: only the totals are wanted
    result = model("rain", audio_length_in_s=0.02, seed=1, control=control,
                   callback=lambda progress: seen.append((progress.step, progress.total_steps)))
    assert result.interrupted and seen == [(1, steps)] and used == [cfg_scale]


def test_the_native_length_is_the_unets_sample_size(audioldm2):
    # sample size 8 rows x VAE factor 2 x 4 samples per mel frame (the real models: 10.24 s)
    assert audioldm2.native_length == 8 * 2 * 4 / 16000
    assert audioldm2("rain", steps=1, seed=0).waveform.shape == (64,)


def test_a_text_to_speech_checkpoint_speaks_the_transcription_as_diffusers(tiny_audioldm2_tts_dir):
    model = TextToAudio.from_pretrained(str(tiny_audioldm2_tts_dir))
    assert model.reads_transcription
    pipe = _diffusers(tiny_audioldm2_tts_dir, "AudioLDM2Pipeline")
    expected = pipe("a calm male voice", transcription="hello there", audio_length_in_s=0.02, num_inference_steps=2,
                    generator=torch.Generator().manual_seed(4)).audios[0]
    result = model("a calm male voice", transcription="hello there", seed=4, **SMALL)
    assert_same_waveforms(result.waveform, expected)
    other = model("a calm male voice", transcription="goodbye", seed=4, **SMALL)
    assert np.abs(other.waveform - result.waveform).max() > 0.01 * np.abs(result.waveform).max()
    with pytest.raises(ValueError, match=r"This AudioLDM 2 checkpoint is text-to-speech: pass transcription="):
        model("a calm male voice", seed=4, **SMALL)


@pytest.mark.parametrize("model_name, label", [("audioldm2", "AudioLDM 2"), ("musicldm", "MusicLDM")])
def test_a_transcription_for_a_model_that_reads_none_is_refused_before_any_work(model_name, label, request,
                                                                                 monkeypatch):
    import pipelines.text_to_audio as text_to_audio

    model = request.getfixturevalue(model_name)
    monkeypatch.setattr(text_to_audio, "seeded_generator", None)  # the first step after the checks: never reached
    with pytest.raises(ValueError, match=f"transcription is read only by AudioLDM 2 text-to-speech checkpoints .*this "
                                         f"{label} model makes sound from the prompt alone"):
        model("rain", transcription="hello", **SMALL)


def test_a_folder_of_another_pipeline_class_is_refused_naming_the_accepted_ones(tiny_sd1_dir):
    with pytest.raises(ValueError, match="is a 'StableDiffusionPipeline' pipeline, not a text-to-audio model; "
                                         "accepted pipeline classes: AudioLDMPipeline, MusicLDMPipeline, "
                                         "AudioLDM2Pipeline"):
        TextToAudio.from_pretrained(str(tiny_sd1_dir))
    with pytest.raises(ValueError, match="'int' pipeline, not a text-to-audio model"):
        TextToAudio(3)
