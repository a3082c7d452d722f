"""AppFlow's `text_to_video_generation` (PaddleMIX's text-to-video app) on a tiny ModelScope-layout model saved to a
folder and loaded through `models=`, as a user passes a downloaded model."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from appflow import Appflow, ChainError, ModelCache, describe_app
from appflow.chain import Chain, Step, validate_chain
from appflow.video import Video
from mixkit.errors import ModelNotFoundError

APP = "text_to_video_generation"
SMALL = {"num_frames": 3, "steps": 2, "width": 32, "height": 40}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def flow(tiny_text_to_video_dir, shared_cache):
    return Appflow(app=APP, models=[str(tiny_text_to_video_dir)], cache=shared_cache)


def arrays(frames) -> np.ndarray:
    return np.stack([np.asarray(frame) for frame in frames])


def test_app_declares_paddlemix_inputs_outputs_and_default_model():
    info = describe_app(APP)
    assert info["inputs"] == {"prompt": "text"}
    assert info["outputs"] == ["frames", "video", "seed", "result"]
    assert info["models"] == {"video_generator": {"kind": "text-to-video", "default": "damo-vilab/text-to-video-ms-1.7b"}}
    assert info["options"]["num_frames"] == 16 and info["options"]["steps"] == 25 and info["options"]["fps"] == 8
    assert info["option_aliases"] == {"guidance_scale": "cfg_scale", "num_inference_steps": "steps"}


def test_frames_come_back_as_pil_images_of_the_asked_size(flow):
    result = flow(prompt="a cat surfing", seed=4, **SMALL)
    assert len(result["frames"]) == 3 and all(isinstance(frame, Image.Image) for frame in result["frames"])
    assert {frame.size for frame in result["frames"]} == {(32, 40)}
    assert result["result"] is result["frames"]  # PaddleMIX's `result` holds the frames
    assert result["seed"] == 4
    video = result["video"]
    assert isinstance(video, Video) and list(video.frames) == result["frames"] and video.fps == 8
    assert video.duration == 3 / 8


def test_a_seed_makes_the_same_frames_and_paddlemix_spellings_are_taken(flow):
    first = flow(prompt="a cat", seed=9, **SMALL)
    spelled = flow(prompt="a cat", seed=9, num_inference_steps=2, guidance_scale=9.0,
                   **{k: v for k, v in SMALL.items() if k != "steps"})
    other = flow(prompt="a cat", seed=10, **SMALL)
    assert np.array_equal(arrays(first["frames"]), arrays(spelled["frames"]))
    assert not np.array_equal(arrays(first["frames"]), arrays(other["frames"]))
    drawn = flow(prompt="a cat", seed=-1, **SMALL)
    assert np.array_equal(arrays(drawn["frames"]), arrays(flow(prompt="a cat", seed=drawn["seed"], **SMALL)["frames"]))


def test_the_video_output_saves_as_mp4_and_gif_that_read_back(flow, tmp_path):
    import cv2

    video = flow(prompt="a cat", seed=1, fps=4, **SMALL)["video"]
    with Image.open(video.save(tmp_path / "clip.gif")) as gif:
        assert gif.n_frames == 3 and gif.size == (32, 40) and gif.info["duration"] == 250
    capture = cv2.VideoCapture(str(video.save(tmp_path / "clip.mp4")))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 3 and capture.get(cv2.CAP_PROP_FPS) == 4
    assert capture.read()[1].shape == (40, 32, 3)
    capture.release()


def test_a_sampler_is_chosen_by_its_webui_name(flow):
    euler = flow(prompt="a cat", seed=2, sampler="Euler a", **SMALL)
    default = flow(prompt="a cat", seed=2, **SMALL)
    assert not np.array_equal(arrays(euler["frames"]), arrays(default["frames"]))
    assert np.array_equal(arrays(euler["frames"]), arrays(flow(prompt="a cat", seed=2, sampler="Euler a",
                                                                **SMALL)["frames"]))


def test_loaded_models_are_taken_as_models(tiny_text_to_video_dir, flow):
    from diffusers import TextToVideoSDPipeline

    from pipelines.text_to_video import TextToVideo

    expected = arrays(flow(prompt="a cat", seed=6, **SMALL)["frames"])
    wrapped = TextToVideo.from_pretrained(str(tiny_text_to_video_dir))
    bare = TextToVideoSDPipeline.from_pretrained(str(tiny_text_to_video_dir))
    for model in (wrapped, bare):
        frames = Appflow(app=APP, models={"video_generator": model}, cache=ModelCache())(prompt="a cat", seed=6, **SMALL)
        assert np.array_equal(arrays(frames["frames"]), expected)


@pytest.mark.parametrize("options, message", [
    ({"num_frames": 0}, r"step 'generate': num_frames must be an integer in \[1, 256\], got 0"),
    ({"width": 30}, "width must be a multiple of 8"),
    ({"steps": 0}, r"steps must be an integer in \[1, 1000\]"),
    ({"fps": 0}, r"fps must be a number in \(0, 240\]"),
    ({"sampler": "Eulr a"}, "Eulr a"),
    ({"guidance_scale": -1}, r"cfg_scale must be a number in \[0, 100\]"),
])
def test_bad_options_are_refused_at_build_and_per_call_before_the_model_loads(tiny_text_to_video_dir, options,
                                                                             message):
    cache = ModelCache()
    with pytest.raises((ValueError, TypeError), match=message):
        Appflow(app=APP, models=[str(tiny_text_to_video_dir)], cache=cache, **options)
    flow = Appflow(app=APP, models=[str(tiny_text_to_video_dir)], cache=cache)
    with pytest.raises((ValueError, TypeError), match=message):
        flow(prompt="a cat", **options)
    assert cache.loads == 0


def test_a_stable_diffusion_folder_is_refused_as_the_video_model(tiny_sd1_dir):
    with pytest.raises(ValueError, match="needs a text-to-video model.*'StableDiffusionPipeline' model"):
        Appflow(app=APP, models=[str(tiny_sd1_dir)], cache=ModelCache())


def test_offline_a_hub_id_missing_from_the_cache_fails_at_once_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = ModelCache()
    flow = Appflow(app=APP, cache=cache)  # the default model, PaddleMIX's
    with pytest.raises(ModelNotFoundError, match="damo-vilab/text-to-video-ms-1.7b"):
        flow(prompt="a cat", **SMALL)
    assert cache.loads == 0


def test_offline_a_cached_hub_id_loads_from_the_cache(tiny_text_to_video_dir, tmp_path, monkeypatch, flow):
    repo = tmp_path / "hub" / "models--damo-vilab--text-to-video-ms-1.7b"
    shutil.copytree(tiny_text_to_video_dir, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from_hub = Appflow(app=APP, cache=ModelCache())(prompt="a cat", seed=3, **SMALL)
    assert np.array_equal(arrays(from_hub["frames"]), arrays(flow(prompt="a cat", seed=3, **SMALL)["frames"]))


def test_progress_reaches_the_callback_and_interrupt_stops_with_frames(flow):
    from pipelines.control import GenerationControl

    seen = []
    flow(prompt="a cat", seed=1, callback=lambda progress: seen.append(progress.step), **SMALL)
    assert seen == [1, 2]
    control = GenerationControl()
    control.interrupt()
    steps = []
    stopped = flow(prompt="a cat", seed=1, control=control, callback=lambda progress: steps.append(progress.step),
                   **{**SMALL, "steps": 4})
    full = flow(prompt="a cat", seed=1, **{**SMALL, "steps": 4})
    # stopped after its first step, with the latest denoised estimate as frames, as A1111 hands back an image
    assert steps == [1] and len(stopped["frames"]) == 3
    assert not np.array_equal(arrays(stopped["frames"]), arrays(full["frames"]))


def test_chains_take_the_frames_as_images_and_refuse_the_video_where_an_image_is_expected():
    blend = Chain("video-blend", [Step("text_to_video", id="video"),
                                  Step("dual_guided_generation", id="blend", inputs={"images": "video.frames"})],
                  inputs=["prompt"])
    assert [step.id for step in validate_chain(blend).order] == ["video", "blend"]
    caption = Chain("video-caption", [Step("text_to_video", id="video"),
                                      Step("image_caption", id="caption", inputs={"image": "video.video"})],
                    inputs=["prompt"])
    with pytest.raises(ChainError, match="expects 'image' but video.video is 'video'"):
        validate_chain(caption)
