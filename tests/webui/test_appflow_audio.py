"""An audio app over HTTP (`POST /appflow/music_generation`: the clip as a base64 16-bit .wav) and in the AppFlow
tab (a .wav the tab's audio player plays)."""

from __future__ import annotations

import base64
import io
import wave

import numpy as np
import pytest

from appflow.audio import Audio
from mixkit.io.audio import pcm16

APP = "music_generation"
IMAGE_APP = "image2music_generation"  # its captioner: the shipped tiny BLIP-2 (the default), offline
OPTIONS = {"audio_length_in_s": 0.02, "steps": 2, "seed": 5}


def clip(samples: int = 160) -> Audio:
    return Audio(np.linspace(-0.5, 0.5, samples, dtype=np.float32), 16000)


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tiny_audioldm_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("appflow-audio")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          appflow_models={APP: {"audio_generator": str(tiny_audioldm_dir)},
                                          IMAGE_APP: {"audio_generator": str(tiny_audioldm_dir)}})
    with serving(config, load_model=False) as running:
        yield running


def test_the_app_returns_its_clip_as_a_base64_wav(client, tiny_audioldm_dir):
    from pipelines.text_to_audio import TextToAudio

    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "smooth jazz"}, "options": OPTIONS})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    audio = outputs["audio"]
    assert {key: audio[key] for key in ("format", "mime_type", "sample_rate", "sample_count", "duration",
                                        "sample_width_bits")} == {
        "format": "wav", "mime_type": "audio/wav", "sample_rate": 16000, "sample_count": 320, "duration": 0.02,
        "sample_width_bits": 16}
    assert outputs["waveform"] == audio and outputs["result"] == audio and outputs["seed"] == 5
    with wave.open(io.BytesIO(base64.b64decode(audio["data"])), "rb") as file:
        assert (file.getnchannels(), file.getsampwidth(), file.getframerate(), file.getnframes()) == (1, 2, 16000, 320)
        samples = np.frombuffer(file.readframes(320), dtype="<i2")
    expected = TextToAudio.from_pretrained(str(tiny_audioldm_dir))("smooth jazz", audio_length_in_s=0.02, steps=2,
                                                                    seed=5).waveform
    assert np.array_equal(samples, pcm16(expected))


def test_image_to_music_takes_a_base64_image_and_answers_with_caption_prompt_and_wav(client):
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 40, 40)).save(buffer, format="PNG")
    response = client.post(f"/appflow/{IMAGE_APP}", json={
        "inputs": {"image": base64.b64encode(buffer.getvalue()).decode("ascii")},
        "options": {**OPTIONS, "max_new_tokens": 3, "music_template": "music for {caption}"}})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert outputs["music_prompt"] == f"music for {outputs['caption'].strip().rstrip('.')}"
    assert outputs["result"]["format"] == "wav" and outputs["result"]["sample_count"] == 320


@pytest.mark.parametrize("options, fragment", [
    ({"audio_length_in_s": 31}, r"option audio_length_in_s must be a number of seconds in \(0, 30\] on this server"),
    ({"audio_length_in_s": -1}, r"audio_length_in_s must be a number of seconds in \(0, 30\]"),
    ({"audio_length_in_s": "long"}, r"audio_length_in_s must be a number of seconds in \(0, 120\]"),
    ({"num_inference_steps": 0}, r"option steps must be an integer in \[1, "),
    ({"guidance_scale": -1}, r"cfg_scale must be a number in \[0, 100\]"),
    ({"generator": 3}, "torch.Generator"),
])
def test_bad_options_are_refused_with_422_naming_them(client, options, fragment):
    import re

    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a bell"}, "options": options})
    assert response.status_code == 422 and re.search(fragment, response.json()["detail"]), response.text


def test_the_apps_listing_shows_the_configured_audio_model(client, server, tiny_audioldm_dir):
    apps = {app["name"]: app for app in client.get("/appflow").json()}
    assert apps[APP]["models"]["audio_generator"]["source"] == str(tiny_audioldm_dir)
    assert apps[APP]["outputs"] == ["waveform", "audio", "seed", "audios", "seeds", "result"]
    assert apps["image2music_generation"]["inputs"] == {"image": "image"}


def test_a_waveform_that_is_no_clips_samples_stays_a_list():
    from webui.appflow_io import encode_app_output, encode_app_outputs

    audio, other = clip(), np.array([0.25, -0.25], dtype=np.float32)
    encoded = encode_app_outputs({"audio": audio, "result": audio.waveform, "other": other, "seed": 1})
    assert encoded["result"] is encoded["audio"] and encoded["audio"]["sample_count"] == 160
    assert encoded["other"] == [0.25, -0.25] and encoded["seed"] == 1
    assert encode_app_output(audio) == encoded["audio"]  # one clip on its own encodes the same way


def test_a_batch_of_clips_is_a_list_of_base64_wavs_each_clip_encoded_once(client, tiny_audioldm_dir):
    from pipelines.text_to_audio import TextToAudio

    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "smooth jazz"},
                                                    "options": {**OPTIONS, "num_waveforms_per_prompt": 2}})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert outputs["seeds"] == [5, 6] and len(outputs["audios"]) == 2 and outputs["audios"][0] == outputs["audio"]
    expected = TextToAudio.from_pretrained(str(tiny_audioldm_dir))("smooth jazz", audio_length_in_s=0.02, steps=2,
                                                                    seed=5, batch_size=2).waveforms
    for encoded, waveform in zip(outputs["audios"], expected):
        with wave.open(io.BytesIO(base64.b64decode(encoded["data"])), "rb") as file:
            assert np.array_equal(np.frombuffer(file.readframes(320), dtype="<i2"), pcm16(waveform))


def test_a_batch_over_the_servers_batch_size_is_refused_in_diffusers_spelling_too(client, server):
    limit = server.state.limits.max_batch_size
    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a bell"},
                                                    "options": {"num_waveforms_per_prompt": limit + 1}})
    assert response.status_code == 422
    assert f"option batch_size must be an integer in [1, {limit}], got {limit + 1}" in response.json()["detail"]


def test_the_appflow_tab_writes_each_clip_of_a_batch_once(tmp_path):
    from mixkit.io.audio import read_wav
    from webui.ui.appflow_task import appflow_finish

    clips = [clip(), Audio(np.full(80, 0.25, dtype=np.float32), 16000)]
    outputs = {"waveform": clips[0].waveform, "audio": clips[0], "seed": 3, "audios": clips, "seeds": [3, 4],
               "result": clips[0].waveform}
    result = appflow_finish(APP, tmp_path / "cache")(outputs)
    assert [path.rsplit("/", 1)[1] for path in result.audio_paths] == ["audio.wav", "audios-01.wav"]
    assert result.outputs == {"seed": 3, "seeds": [3, 4],
                              "audio": {"file": "audio.wav", "sample_rate": 16000, "duration": 0.01},
                              "audios": [{"file": "audio.wav", "sample_rate": 16000, "duration": 0.01},
                                         {"file": "audios-01.wav", "sample_rate": 16000, "duration": 0.005}]}
    samples, rate = read_wav(result.audio_paths[1])
    assert rate == 16000 and np.array_equal(samples, pcm16(clips[1].waveform).astype(np.float32) / 32768.0)


def test_the_appflow_tab_writes_the_clip_as_a_wav_for_its_player(tmp_path):
    import gradio as gr

    from mixkit.io.audio import read_wav
    from webui.ui.appflow_task import appflow_finish

    audio = clip()
    outputs = {"waveform": audio.waveform, "audio": audio, "seed": 3, "result": audio.waveform}
    result = appflow_finish(APP, tmp_path / "cache")(outputs)
    assert result.paths == [] and len(result.audio_paths) == 1 and result.audio_paths[0].endswith("audio.wav")
    assert result.outputs == {"seed": 3, "audio": {"file": "audio.wav", "sample_rate": 16000, "duration": 0.01}}
    samples, rate = read_wav(result.audio_paths[0])
    assert rate == 16000 and np.array_equal(samples, pcm16(audio.waveform).astype(np.float32) / 32768.0)
    player = gr.Audio(type="filepath", interactive=False).postprocess(result.audio_paths[0])
    assert player.path == result.audio_paths[0]


def test_the_appflow_tab_plays_the_clip_and_reports_it():
    from types import SimpleNamespace

    from webui.ui.appflow_task import AppflowResult, follow_appflow

    done = SimpleNamespace(is_set=lambda: True)
    task = SimpleNamespace(done=done, cancelled=False, failure=None, task_id="task(music)", seconds=2.0,
                           result=AppflowResult(APP, [], {"seed": 3}, 0, ("/tmp/x/audio.wav",)))
    (progress, gallery, audio, clips, outputs, _), = list(follow_appflow(None, task))
    assert f"Done: {APP}, 0 image(s) and 1 audio clip(s) in 2.0s" in progress
    assert gallery == [] and audio == "/tmp/x/audio.wav" and outputs == {"seed": 3}
    # one clip: nothing to pick from, the picker stays hidden
    assert clips["choices"] == [("Clip 1: audio.wav", "/tmp/x/audio.wav")] and clips["visible"] is False


def test_the_appflow_tab_lists_every_clip_of_a_batch_to_play():
    from types import SimpleNamespace

    from webui.ui.appflow_task import AppflowResult, follow_appflow

    paths = ("/tmp/x/audio.wav", "/tmp/x/audios-01.wav", "/tmp/x/audios-02.wav")
    done = SimpleNamespace(is_set=lambda: True)
    task = SimpleNamespace(done=done, cancelled=False, failure=None, task_id="task(music)", seconds=2.0,
                           result=AppflowResult(APP, [], {"seeds": [3, 4, 5]}, 0, paths))
    (progress, _, audio, clips, _, _), = list(follow_appflow(None, task))
    assert f"Done: {APP}, 0 image(s) and 3 audio clip(s) in 2.0s" in progress and audio == paths[0]
    assert clips["choices"] == [("Clip 1: audio.wav", paths[0]), ("Clip 2: audios-01.wav", paths[1]),
                                ("Clip 3: audios-02.wav", paths[2])]
    assert clips["value"] == paths[0] and clips["visible"] is True


def test_the_clip_picker_plays_only_a_wav_a_run_wrote_under_the_tabs_cache(tmp_path):
    import gradio as gr

    from webui.ui.appflow_task import appflow_finish, clip_player

    clips = [clip(), clip(80)]
    outputs = {"audio": clips[0], "audios": clips, "seeds": [3, 4]}
    result = appflow_finish(APP, tmp_path / "cache")(outputs)
    play = clip_player(tmp_path / "cache")
    assert play(result.audio_paths[1]) == result.audio_paths[1]
    outside = tmp_path / "elsewhere.wav"
    outside.write_bytes(open(result.audio_paths[1], "rb").read())
    not_a_clip = tmp_path / "cache" / "notes.txt"
    not_a_clip.write_text("secret")
    sneaky = str(tmp_path / "cache" / ".." / "elsewhere.wav")
    for path in (str(outside), str(not_a_clip), sneaky, str(tmp_path / "cache" / "missing.wav")):
        with pytest.raises(gr.Error, match="is not a clip of an AppFlow run"):
            play(path)


def test_the_appflow_tab_has_an_audio_player_among_its_outputs():
    import gradio as gr

    from webui.ui.appflow_tab import build_appflow_tab

    with gr.Blocks():
        tab = build_appflow_tab(SimpleState())
    assert [getattr(component, "elem_id", None) for component in tab.outputs] == [
        "appflow_progress", "appflow_images", "appflow_audio", "appflow_audio_clips", "appflow_outputs",
        "appflow_task_id"]
    assert isinstance(tab.outputs[2], gr.Audio) and isinstance(tab.outputs[3], gr.Radio)


class SimpleState:
    """What building the tab reads of the server state (nothing until an app's form renders)."""


def test_the_appflow_tabs_run_button_plays_the_music_apps_clip(server, tmp_path):
    from types import SimpleNamespace

    from mixkit.io.audio import read_wav
    from webui.ui.appflow_tab import run_app
    from webui.ui.reattach import ENDED

    state = server.state
    ports = state.describe_app(APP)["inputs"]
    request = SimpleNamespace(session_hash="tab", request=SimpleNamespace(scope={}))
    run = run_app(state, APP, ports, ["prompt"], ["a cello"], "task(music-run-0001)", request, tmp_path / "cache")
    *_, (progress, gallery, audio, clips, outputs, task_box) = run
    assert f"Done: {APP}, 0 image(s) and 1 audio clip(s) in" in progress and task_box == ENDED + "task(music-run-0001)"
    assert gallery == [] and audio.endswith("audio.wav") and set(outputs) == {"audio", "seed", "audios", "seeds"}
    assert outputs["audios"] == [outputs["audio"]] and outputs["seeds"] == [outputs["seed"]]  # a batch of one
    samples, rate = read_wav(audio)  # the app's defaults: the tiny model's native length (64 samples), 10 steps
    assert rate == 16000 and samples.shape == (64,) and outputs["audio"]["duration"] == 64 / 16000
    assert clips["choices"] == [("Clip 1: audio.wav", audio)] and clips["visible"] is False


def test_the_appflow_tabs_run_button_lists_every_clip_of_a_batch(server, tmp_path):
    from types import SimpleNamespace

    from mixkit.io.audio import read_wav
    from webui.ui.appflow_tab import run_app
    from webui.ui.appflow_task import clip_player

    state = server.state
    ports = state.describe_app(APP)["inputs"]
    request = SimpleNamespace(session_hash="tab", request=SimpleNamespace(scope={}))
    run = run_app(state, APP, ports, ["prompt"], ["a cello"], "task(music-run-0002)", request, tmp_path / "cache",
                  ["seed", "batch_size"], [7, 3])
    *_, (progress, _, audio, clips, outputs, _) = run
    assert f"Done: {APP}, 0 image(s) and 3 audio clip(s) in" in progress and outputs["seeds"] == [7, 8, 9]
    paths = [path for _, path in clips["choices"]]
    assert [label for label, _ in clips["choices"]] == ["Clip 1: audio.wav", "Clip 2: audios-01.wav",
                                                        "Clip 3: audios-02.wav"]
    assert clips["visible"] is True and clips["value"] == audio == paths[0]
    # each its own .wav the picker plays (the samples each file holds: test_the_appflow_tab_writes_each_clip_...)
    assert len(set(paths)) == 3
    for path in paths:
        samples, rate = read_wav(clip_player(tmp_path / "cache")(path))
        assert rate == 16000 and samples.shape == (64,)


def test_a_transcription_the_servers_model_cannot_read_is_a_422_before_anything_is_queued(client, server,
                                                                                         monkeypatch):
    def never_queued(*args, **kwargs):
        raise AssertionError("queued before the transcription was checked against the model")

    monkeypatch.setattr(server.state, "submit_app", never_queued)
    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a bell"},
                                                    "options": {**OPTIONS, "transcription": "hello"}})
    assert response.status_code == 422, response.text
    assert ("step 'generate': transcription is read only by AudioLDM 2 text-to-speech checkpoints"
            in response.json()["detail"]) and "this AudioLDM model" in response.json()["detail"]


def test_the_appflow_tab_refuses_a_transcription_the_model_cannot_read_before_queueing(server, tmp_path,
                                                                                     monkeypatch):
    from types import SimpleNamespace

    import gradio as gr

    from webui.ui.appflow_tab import run_app

    state = server.state
    monkeypatch.setattr(state, "submit_app", lambda *args, **kwargs: pytest.fail("queued"))
    request = SimpleNamespace(session_hash="tab", request=SimpleNamespace(scope={}))
    run = run_app(state, APP, state.describe_app(APP)["inputs"], ["prompt"], ["a cello"], "task(music-run-0003)",
                  request, tmp_path / "cache", ["transcription"], ["hello"])
    with pytest.raises(gr.Error, match=f"{APP} failed: .*transcription is read only by .*this AudioLDM model"):
        next(run)
