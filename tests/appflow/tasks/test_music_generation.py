"""AppFlow's `music_generation` (PaddleMIX's music app) and `image2music_generation` on a tiny AudioLDM saved to a
folder and loaded through `models=`, as a user passes a downloaded model."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from appflow import Appflow, ChainError, ModelCache, describe_app
from appflow.audio import Audio
from appflow.chain import Chain, Step, validate_chain
from mixkit.errors import ModelNotFoundError
from mixkit.io.audio import pcm16, read_wav

APP = "music_generation"
IMAGE_APP = "image2music_generation"
SMALL = {"audio_length_in_s": 0.02, "steps": 2}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def flow(tiny_audioldm_dir, shared_cache):
    return Appflow(app=APP, models=[str(tiny_audioldm_dir)], cache=shared_cache)


def test_the_app_declares_paddlemix_inputs_outputs_and_default_model():
    info = describe_app(APP)
    assert info["inputs"] == {"prompt": "text"}
    assert info["outputs"] == ["waveform", "audio", "seed", "audios", "seeds", "result"]
    assert info["models"] == {"audio_generator": {"kind": "text-to-audio", "default": "cvssp/audioldm"}}
    # None: the loaded model's own (its native length; diffusers' steps and guidance for its pipeline class)
    assert {key: info["options"][key] for key in ("audio_length_in_s", "steps", "cfg_scale", "negative_prompt",
                                                  "batch_size", "transcription")} == {
        "audio_length_in_s": None, "steps": None, "cfg_scale": None, "negative_prompt": "", "batch_size": 1,
        "transcription": ""}
    assert info["option_aliases"] == {"guidance_scale": "cfg_scale", "num_inference_steps": "steps",
                                      "num_waveforms_per_prompt": "batch_size"}


def test_the_result_is_a_16_khz_float32_waveform_of_the_asked_length(flow):
    result = flow(prompt="smooth jazz piano", negative_prompt="low quality", seed=4, **SMALL)
    waveform = result["waveform"]
    assert isinstance(waveform, np.ndarray) and waveform.dtype == np.float32 and waveform.shape == (320,)
    assert result["result"] is waveform  # PaddleMIX's `result`: the samples, for scipy.io.wavfile.write(rate=16000)
    assert result["seed"] == 4
    audio = result["audio"]
    assert isinstance(audio, Audio) and audio.waveform is waveform and audio.sample_rate == 16000
    assert len(audio) == 320 and audio.duration == 0.02


def test_a_seed_makes_the_same_clip_and_paddlemix_spellings_are_taken(flow):
    first = flow(prompt="a cello", seed=9, **SMALL)["waveform"]
    spelled = flow(prompt="a cello", seed=9, num_inference_steps=2, guidance_scale=2.5, audio_length_in_s=0.02)
    assert np.array_equal(first, spelled["waveform"])
    assert not np.array_equal(first, flow(prompt="a cello", seed=10, **SMALL)["waveform"])
    drawn = flow(prompt="a cello", **SMALL)
    assert np.array_equal(drawn["waveform"], flow(prompt="a cello", seed=drawn["seed"], **SMALL)["waveform"])


def test_a_paddlemix_style_generator_draws_the_noise(flow):
    import torch

    mine = flow(prompt="a cello", generator=torch.Generator().manual_seed(9), **SMALL)
    assert mine["seed"] == -1 and np.array_equal(mine["waveform"], flow(prompt="a cello", seed=9, **SMALL)["waveform"])


def test_the_audio_output_saves_a_wav_that_reads_back(flow, tmp_path):
    audio = flow(prompt="a bell", seed=1, **SMALL)["audio"]
    samples, rate = read_wav(audio.save(tmp_path / "clip.wav"))
    assert rate == 16000 and samples.shape == (320,)
    assert np.array_equal(samples, pcm16(audio.waveform).astype(np.float32) / 32768.0)
    with pytest.raises(ValueError, match="the extension must be .wav"):
        audio.save(tmp_path / "clip.mp3")


def test_loaded_models_are_taken_as_models(tiny_audioldm_dir, flow):
    from diffusers import AudioLDMPipeline

    from pipelines.text_to_audio import TextToAudio

    expected = flow(prompt="a bell", seed=6, **SMALL)["waveform"]
    wrapped = TextToAudio.from_pretrained(str(tiny_audioldm_dir))
    bare = AudioLDMPipeline.from_pretrained(str(tiny_audioldm_dir))
    for model in (wrapped, bare):
        clip = Appflow(app=APP, models={"audio_generator": model}, cache=ModelCache())(prompt="a bell", seed=6, **SMALL)
        assert np.array_equal(clip["waveform"], expected)


@pytest.mark.parametrize("options, message", [
    ({"audio_length_in_s": 0}, r"step 'generate': audio_length_in_s must be a number of seconds in \(0, 120\]"),
    ({"audio_length_in_s": 600}, r"audio_length_in_s must be a number of seconds in \(0, 120\]"),
    ({"steps": 0}, r"steps must be an integer in \[1, 1000\]"),
    ({"guidance_scale": float("nan")}, r"cfg_scale must be a number in \[0, 100\]"),
    ({"negative_prompt": 3}, "negative_prompt must be a string"),
    ({"generator": "seed"}, "generator must be a torch.Generator"),
])
def test_bad_options_are_refused_at_build_and_per_call_before_the_model_loads(tiny_audioldm_dir, options, message):
    cache = ModelCache()
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow(app=APP, models=[str(tiny_audioldm_dir)], cache=cache, **options)
    flow = Appflow(app=APP, models=[str(tiny_audioldm_dir)], cache=cache)
    with pytest.raises((ValueError, TypeError), match=message):
        flow(prompt="a bell", **options)
    assert cache.loads == 0


def test_a_missing_prompt_is_refused_before_the_model_loads(tiny_audioldm_dir):
    cache = ModelCache()
    with pytest.raises(ValueError, match="input 'prompt' .* is required"):
        Appflow(app=APP, models=[str(tiny_audioldm_dir)], cache=cache)(**SMALL)
    assert cache.loads == 0


def test_a_stable_diffusion_folder_is_refused_as_the_audio_model(tiny_sd1_dir):
    with pytest.raises(ValueError, match="needs a text-to-audio model.*'StableDiffusionPipeline' model.*AudioLDM"):
        Appflow(app=APP, models=[str(tiny_sd1_dir)], cache=ModelCache())


def test_offline_a_hub_id_missing_from_the_cache_fails_at_once_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = ModelCache()
    with pytest.raises(ModelNotFoundError, match="cvssp/audioldm"):
        Appflow(app=APP, cache=cache)(prompt="a bell", **SMALL)  # the default model, PaddleMIX's
    assert cache.loads == 0


def test_offline_a_cached_hub_id_loads_from_the_cache(tiny_audioldm_dir, tmp_path, monkeypatch, flow):
    repo = tmp_path / "hub" / "models--cvssp--audioldm"
    shutil.copytree(tiny_audioldm_dir, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from_hub = Appflow(app=APP, cache=ModelCache())(prompt="a bell", seed=3, **SMALL)
    assert np.array_equal(from_hub["waveform"], flow(prompt="a bell", seed=3, **SMALL)["waveform"])


def test_progress_reaches_the_callback_and_interrupt_stops_with_a_clip(flow):
    from pipelines.control import GenerationControl

    seen = []
    flow(prompt="a bell", seed=1, callback=lambda progress: seen.append(progress.step), **SMALL)
    assert seen == [1, 2]
    control, steps = GenerationControl(), []
    control.interrupt()
    stopped = flow(prompt="a bell", seed=1, control=control, callback=lambda progress: steps.append(progress.step),
                   audio_length_in_s=0.02, steps=4)
    full = flow(prompt="a bell", seed=1, audio_length_in_s=0.02, steps=4)
    assert steps == [1] and stopped["waveform"].shape == (320,)
    assert not np.array_equal(stopped["waveform"], full["waveform"])


@pytest.fixture(scope="module")
def image_flow(tiny_blip2_dir, tiny_audioldm_dir, shared_cache):
    return Appflow(app=IMAGE_APP, models=[str(tiny_blip2_dir), str(tiny_audioldm_dir)], cache=shared_cache,
                   max_new_tokens=4)


def test_image_to_music_captions_the_image_and_plays_the_templated_caption(image_flow, flow, captioner, photo):
    info = describe_app(IMAGE_APP)
    assert info["inputs"] == {"image": "image"}
    assert info["steps"] == ["caption:image_caption", "describe:music_prompt", "generate:text_to_audio"]
    assert list(info["models"]) == ["captioner", "audio_generator"]
    result = image_flow(image=photo, seed=5, **SMALL)
    caption = captioner(image=photo, max_new_tokens=4)["text"]
    assert result["caption"] == caption
    expected_prompt = (f"{caption.strip().rstrip('.')}, as a piece of music: a fitting melody and atmosphere, "
                       "high quality")
    assert result["music_prompt"] == expected_prompt
    # the chain's clip is the text app's clip for that prompt and seed
    assert np.array_equal(result["result"], flow(prompt=expected_prompt, seed=5, **SMALL)["waveform"])


def test_the_music_template_is_an_option_and_must_hold_the_caption(image_flow, captioner, photo, tiny_blip2_dir,
                                                                   tiny_audioldm_dir):
    result = image_flow(image=photo, seed=5, music_template="lofi beat for: {caption} {not a field}", **SMALL)
    caption = captioner(image=photo, max_new_tokens=4)["text"].strip().rstrip(".")
    assert result["music_prompt"] == f"lofi beat for: {caption} {{not a field}}"
    cache = ModelCache()
    with pytest.raises(ValueError, match=r"music_template must hold \{caption\}"):
        Appflow(app=IMAGE_APP, models=[str(tiny_blip2_dir), str(tiny_audioldm_dir)], cache=cache,
                music_template="calm piano")
    with pytest.raises(ValueError, match=r"music_template must hold \{caption\}"):
        image_flow(image=photo, music_template="calm piano")
    assert cache.loads == 0


def test_chains_refuse_the_audio_where_text_is_expected():
    chain = Chain("music-caption", [Step("text_to_audio", id="music"),
                                    Step("music_prompt", id="describe", inputs={"caption": "music.audio"})],
                  inputs=["prompt"])
    with pytest.raises(ChainError, match="expects 'text' but music.audio is 'audio'"):
        validate_chain(chain)


def test_image_to_music_with_an_llm_writes_the_prompt_as_paddlemix_asks_chatglm(flow, captioner, photo,
                                                                               tiny_blip2_dir, tiny_audioldm_dir,
                                                                               shared_cache):
    asked = []

    def reply(prompt: str) -> str:  # a scripted LLM (the llm role takes any reply(prompt) -> str)
        asked.append(prompt)
        return '\n "Soft lounge jazz with a warm piano."\nSecond line.'

    info = describe_app("image2music_llm_generation")
    assert list(info["models"]) == ["captioner", "llm", "audio_generator"]
    assert info["models"]["llm"]["kind"] == "causal-lm"
    llm_flow = Appflow("image2music_llm_generation", models=[str(tiny_blip2_dir), reply, str(tiny_audioldm_dir)],
                       cache=shared_cache, max_new_tokens=4)
    result = llm_flow(image=photo, seed=2, **SMALL)
    caption = captioner(image=photo, max_new_tokens=4)["text"].strip().rstrip(".")
    assert asked == [f"Given the scene description in the following paragraph, please create a musical style sentence "
                     f"that fits the scene. Reply with that one sentence only. Description: {caption}."]
    assert result["music_prompt"] == "Soft lounge jazz with a warm piano."
    assert np.array_equal(result["waveform"], flow(prompt="Soft lounge jazz with a warm piano.", seed=2,
                                                   **SMALL)["waveform"])


def test_an_llm_reply_without_a_prompt_stops_before_the_audio_step(tiny_blip2_dir, tiny_audioldm_dir, photo):
    cache = ModelCache()
    llm_flow = Appflow("image2music_llm_generation", models=[str(tiny_blip2_dir), lambda prompt: "  \n ''\n",
                                                              str(tiny_audioldm_dir)], cache=cache, max_new_tokens=4)
    with pytest.raises(ValueError, match="The LLM wrote no music prompt"):
        llm_flow(image=photo, **SMALL)
    assert cache.loads == 1  # the captioner only: the audio model never loaded
    with pytest.raises(ValueError, match=r"llm_instruction must be a string holding \{caption\}"):
        llm_flow(image=photo, llm_instruction="write music")
