"""A video app over HTTP (`POST /appflow/text_to_video_generation`: frames as base64 PNGs, the video as base64 .mp4)
and in the AppFlow tab (the video file first in the gallery, then its frames)."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from appflow.video import Video

APP = "text_to_video_generation"
OPTIONS = {"num_frames": 3, "steps": 2, "width": 32, "height": 24, "seed": 5, "fps": 6}


def colour_frames(count: int = 3) -> list:
    return [Image.new("RGB", (16, 8), (40 * i, 100, 200)) for i in range(count)]


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tiny_text_to_video_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("appflow-video")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                          appflow_models={APP: {"video_generator": str(tiny_text_to_video_dir)}})
    with serving(config, load_model=False) as running:
        yield running


def test_the_app_returns_its_frames_as_pngs_and_the_video_as_mp4(client, tmp_path):
    import cv2

    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a cat surfing"}, "options": OPTIONS})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    frames = [Image.open(io.BytesIO(base64.b64decode(frame))) for frame in outputs["frames"]]
    assert [(frame.format, frame.size) for frame in frames] == [("PNG", (32, 24))] * 3
    assert outputs["seed"] == 5
    video = outputs["video"]
    assert {key: video[key] for key in ("format", "mime_type", "fps", "frame_count", "width", "height")} == {
        "format": "mp4", "mime_type": "video/mp4", "fps": 6.0, "frame_count": 3, "width": 32, "height": 24}
    path = tmp_path / "clip.mp4"
    path.write_bytes(base64.b64decode(video["data"]))
    capture = cv2.VideoCapture(str(path))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 3 and capture.get(cv2.CAP_PROP_FPS) == 6
    capture.release()


@pytest.mark.parametrize("options, fragment", [
    ({"num_frames": 65}, r"option num_frames must be an integer in \[1, 64\] on this server"),
    ({"num_frames": 0}, r"option num_frames must be an integer in \[1, 64\]"),
    ({"width": 36}, "width must be a multiple of 8"),
    ({"fps": 0}, r"fps must be a number in \(0, 240\]"),
    ({"sampler": "DPM adaptive"}, "not available for video"),
    ({"generator": 3}, "torch.Generator"),
])
def test_bad_options_are_refused_with_422_naming_them(client, options, fragment):
    import re

    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a cat"}, "options": options})
    assert response.status_code == 422 and re.search(fragment, response.json()["detail"]), response.text


def test_a_huge_number_is_refused_with_422_not_a_500(client):
    for options in ({"cfg_scale": 10**400}, {"fps": 10**400}):
        response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a cat"}, "options": options})
        assert response.status_code == 422 and "must be a number in" in response.json()["detail"], response.text


def test_without_an_mp4_encoder_a_frame_rate_no_gif_plays_is_refused_before_the_run(client, monkeypatch):
    import mixkit.io.video

    monkeypatch.setattr(mixkit.io.video, "mp4_available", lambda: False)
    for fps in (60, 0.001):
        response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a cat"},
                                                         "options": {**OPTIONS, "fps": fps}})
        assert response.status_code == 422 and "it answers with a GIF" in response.json()["detail"], response.text
    response = client.post(f"/appflow/{APP}", json={"inputs": {"prompt": "a cat"}, "options": {**OPTIONS, "fps": 50}})
    assert response.status_code == 200 and response.json()["outputs"]["video"]["format"] == "gif", response.text


def test_the_apps_listing_shows_the_configured_video_model(client, server, tiny_text_to_video_dir):
    apps = {app["name"]: app for app in client.get("/appflow").json()}
    assert apps[APP]["models"]["video_generator"]["source"] == str(tiny_text_to_video_dir)
    assert apps[APP]["outputs"] == ["frames", "video", "seed", "result"]


def test_a_video_output_encodes_as_a_gif_where_no_mp4_encoder_exists(monkeypatch):
    import mixkit.io.video
    from webui.appflow_io import encode_app_output

    monkeypatch.setattr(mixkit.io.video, "mp4_available", lambda: False)
    encoded = encode_app_output(Video(tuple(colour_frames()), 4.0))
    assert (encoded["format"], encoded["mime_type"], encoded["frame_count"]) == ("gif", "image/gif", 3)
    with Image.open(io.BytesIO(base64.b64decode(encoded["data"]))) as gif:
        assert gif.n_frames == 3 and gif.info["duration"] == 250


def test_the_appflow_tab_shows_the_video_first_then_its_frames(tmp_path):
    import gradio as gr

    from webui.ui.appflow_task import appflow_finish

    frames = colour_frames()
    outputs = {"frames": frames, "video": Video(tuple(frames), 8.0), "seed": 3, "result": frames}
    result = appflow_finish(APP, tmp_path / "cache")(outputs)
    assert result.video_count == 1 and len(result.paths) == 4 and result.paths[0].endswith("video.mp4")
    assert result.outputs == {"seed": 3, "video": {"file": "video.mp4", "frame_count": 3, "fps": 8.0}}
    with Image.open(result.paths[1]) as first:
        assert first.getpixel((0, 0)) == (0, 100, 200)
    shown = gr.Gallery(format="png").postprocess([(path, None) for path in result.paths])
    assert shown.root[0].video.path == result.paths[0] and shown.root[1].image.path == result.paths[1]


def test_the_appflow_tab_reports_images_and_videos_apart():
    from types import SimpleNamespace

    from webui.ui.appflow_task import AppflowResult, follow_appflow

    done = SimpleNamespace(is_set=lambda: True)
    task = SimpleNamespace(done=done, cancelled=False, failure=None, task_id="task(video)", seconds=1.5,
                           result=AppflowResult(APP, ["v.mp4", "1.png", "2.png"], {}, 1))
    (progress, gallery, audio, clips, outputs, _), = list(follow_appflow(None, task))
    assert f"Done: {APP}, 2 image(s) and 1 video(s) in 1.5s" in progress and len(gallery) == 3 and audio is None
    assert clips["choices"] == [] and clips["visible"] is False
