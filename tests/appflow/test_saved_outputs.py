"""An app's outputs written to a folder (`appflow.saved_outputs`): each kind written and read back, result.json,
no overwriting, no half-written files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from appflow.audio import Audio
from appflow.chain import Binding
from appflow.saved_outputs import check_output_folder, infotexts_by_image, save_app_outputs
from appflow.video import Video
from mixkit.io.audio import read_wav, pcm16


def picture(colour) -> Image.Image:
    return Image.new("RGB", (8, 6), colour)


def test_images_get_their_steps_infotexts_and_an_output_that_is_another_is_one_file(tmp_path):
    first, second, blend = picture((255, 0, 0)), picture((0, 255, 0)), picture((0, 0, 255))
    outputs = {"image": first, "images": [first, second], "blend": blend, "infotexts": ["one", "two"],
               "seeds": [5, 6], "result": first}
    bindings = {"image": Binding("generate", "image"), "images": Binding("generate", "images"),
                "blend": Binding("generate", "blend"), "infotexts": Binding("generate", "infotexts"),
                "seeds": Binding("generate", "seeds"), "result": Binding("generate", "image")}
    assert infotexts_by_image(outputs, bindings) == {id(first): "one", id(second): "two"}
    written = save_app_outputs("demo", outputs, bindings, tmp_path / "out")
    assert [path.name for path in written] == ["image.png", "blend.png", "images-01.png", "result.json"]
    with Image.open(tmp_path / "out" / "image.png") as image:
        assert image.info["parameters"] == "one" and image.getpixel((0, 0)) == (255, 0, 0)
    with Image.open(tmp_path / "out" / "images-01.png") as image:
        assert image.info["parameters"] == "two" and image.getpixel((0, 0)) == (0, 255, 0)
    with Image.open(tmp_path / "out" / "blend.png") as image:
        assert "parameters" not in image.info
    document = json.loads((tmp_path / "out" / "result.json").read_text())
    assert document == {"app": "demo", "interrupted": False, "outputs": {
        "image": "image.png", "images": ["image.png", "images-01.png"], "blend": "blend.png",
        "infotexts": ["one", "two"], "seeds": [5, 6], "result": "image.png"}}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["blend.png", "image.png", "images-01.png",
                                                                  "result.json"]  # no staging folder left


def test_masks_boxes_labels_and_scores(tmp_path):
    masks = torch.zeros(2, 4, 5, dtype=torch.bool)
    masks[0, 1, 2] = True
    outputs = {"labels": ["dog", "cat"], "boxes": torch.tensor([[0.0, 1.0, 2.5, 3.0], [1.0, 1.0, 2.0, 2.0]]),
               "scores": torch.tensor([0.5, 0.25]), "seg_masks": masks, "annotation": {"shapes": [1]},
               "result": masks}
    save_app_outputs("detect", outputs, {}, tmp_path, interrupted=True)
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["interrupted"] is True
    assert document["outputs"] == {"labels": ["dog", "cat"], "boxes": [[0.0, 1.0, 2.5, 3.0], [1.0, 1.0, 2.0, 2.0]],
                                   "scores": [0.5, 0.25], "seg_masks": ["seg_masks-00.png", "seg_masks-01.png"],
                                   "annotation": {"shapes": [1]}, "result": ["seg_masks-00.png", "seg_masks-01.png"]}
    with Image.open(tmp_path / "seg_masks-00.png") as mask:
        assert mask.mode == "L" and np.array_equal(np.array(mask), masks[0].numpy().astype(np.uint8) * 255)


def test_an_audio_clip_is_one_wav_and_its_bare_samples_point_at_it(tmp_path):
    waveform = np.array([0.0, 0.5, -0.5, 0.25], dtype=np.float32)
    clip = Audio(waveform, 16000)
    save_app_outputs("music", {"waveform": waveform, "audio": clip, "seed": 3, "result": waveform}, {}, tmp_path)
    samples, rate = read_wav(tmp_path / "audio.wav")
    assert rate == 16000 and np.array_equal(samples, pcm16(waveform).astype(np.float32) / 32768.0)
    outputs = json.loads((tmp_path / "result.json").read_text())["outputs"]
    expected = {"file": "audio.wav", "format": "wav", "sample_rate": 16000, "sample_count": 4, "duration": 0.00025,
                "sample_width_bits": 16}
    # `waveform` comes first (as in the music apps) but is the clip's samples: the same file, not a list of floats
    assert outputs == {"waveform": expected, "audio": expected, "seed": 3, "result": expected}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audio.wav", "result.json"]


def test_a_batch_of_clips_is_one_wav_each_and_the_first_is_the_audio_outputs_file(tmp_path):
    waveforms = [np.full(4, value, dtype=np.float32) for value in (0.0, 0.5, -0.5)]
    clips = [Audio(waveform, 16000) for waveform in waveforms]
    save_app_outputs("music", {"waveform": waveforms[0], "audio": clips[0], "audios": clips, "seeds": [7, 8, 9]}, {},
                     tmp_path)
    outputs = json.loads((tmp_path / "result.json").read_text())["outputs"]
    assert [clip["file"] for clip in outputs["audios"]] == ["audio.wav", "audios-01.wav", "audios-02.wav"]
    assert outputs["waveform"]["file"] == outputs["audio"]["file"] == "audio.wav" and outputs["seeds"] == [7, 8, 9]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audio.wav", "audios-01.wav", "audios-02.wav", "result.json"]
    for name, waveform in (("audios-01.wav", waveforms[1]), ("audios-02.wav", waveforms[2])):
        samples, rate = read_wav(tmp_path / name)
        assert rate == 16000 and np.array_equal(samples, pcm16(waveform).astype(np.float32) / 32768.0)


def test_a_waveform_that_is_no_clips_samples_stays_a_list(tmp_path):
    clip = Audio(np.zeros(4, dtype=np.float32), 8000)
    save_app_outputs("music", {"audio": clip, "waveform": np.ones(2, dtype=np.float32)}, {}, tmp_path)
    outputs = json.loads((tmp_path / "result.json").read_text())["outputs"]
    assert outputs["waveform"] == [1.0, 1.0] and outputs["audio"]["file"] == "audio.wav"


@pytest.mark.parametrize("video_format", ["gif", "mp4"])
def test_a_video_is_written_as_the_format_asked_and_its_frames_as_pngs(tmp_path, video_format):
    from mixkit.io.video import mp4_available

    if video_format == "mp4" and not mp4_available():
        pytest.skip("no MPEG-4 encoder in this OpenCV")  # the gif case still runs
    frames = tuple(picture((40 * i, 0, 0)) for i in range(3))
    video = Video(frames, 4.0)
    save_app_outputs("video", {"frames": list(frames), "video": video, "result": list(frames)}, {}, tmp_path,
                     video_format=video_format)
    outputs = json.loads((tmp_path / "result.json").read_text())["outputs"]
    assert outputs["video"] == {"file": f"video.{video_format}", "format": video_format, "fps": 4.0,
                                "frame_count": 3, "width": 8, "height": 6}
    assert outputs["frames"] == ["frames-00.png", "frames-01.png", "frames-02.png"]
    assert outputs["result"] == outputs["frames"]
    if video_format == "gif":
        with Image.open(tmp_path / "video.gif") as gif:
            assert gif.n_frames == 3 and gif.info["duration"] == 250


def test_nothing_is_overwritten_without_overwrite_and_a_failure_leaves_no_file(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "result.json").write_text("mine")
    with pytest.raises(FileExistsError, match="already holds files; .*--overwrite"):
        check_output_folder(tmp_path / "out", overwrite=False)
    with pytest.raises(FileExistsError, match="already holds result.json"):
        save_app_outputs("demo", {"text": "hi"}, {}, tmp_path / "out")
    assert (tmp_path / "out" / "result.json").read_text() == "mine"
    assert check_output_folder(tmp_path / "out", overwrite=True) == tmp_path / "out"
    save_app_outputs("demo", {"text": "hi"}, {}, tmp_path / "out", overwrite=True)
    assert json.loads((tmp_path / "out" / "result.json").read_text())["outputs"] == {"text": "hi"}
    # frames of two sizes cannot be one video: the error comes after image.png was made, and nothing is left
    broken = Video((picture((0, 0, 0)), Image.new("RGB", (4, 4))), 8.0)
    with pytest.raises(ValueError):
        save_app_outputs("demo", {"image": picture((1, 2, 3)), "video": broken}, {}, tmp_path / "new" / "deeper",
                         video_format="gif")
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json"]


def test_an_output_folder_must_be_a_writable_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="exists and is not a folder"):
        check_output_folder(tmp_path / "file", overwrite=False)
    assert check_output_folder(tmp_path / "a" / "b", overwrite=False) == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # the probe's folders are made again when saving
    with pytest.raises(ValueError, match="video format must be one of auto, mp4, gif"):
        save_app_outputs("demo", {}, {}, tmp_path / "c", video_format="avi")
    assert not (tmp_path / "c").exists()


def test_a_document_output_is_also_its_own_json_file_once(tmp_path):
    labelme = {"version": "5.4.1", "shapes": [], "imagePath": "photo.png"}
    written = save_app_outputs("auto_label", {"annotation": labelme, "result": labelme}, {}, tmp_path,
                               documents=("annotation", "result"))
    assert [path.name for path in written] == ["annotation.json", "result.json"]
    assert json.loads((tmp_path / "annotation.json").read_text()) == labelme
    assert json.loads((tmp_path / "result.json").read_text())["outputs"] == {"annotation": labelme, "result": labelme}


def test_a_symlink_of_an_outputs_name_is_not_replaced_without_overwrite_even_when_it_points_nowhere(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "result.json").symlink_to(tmp_path / "missing.json")
    with pytest.raises(FileExistsError, match="already holds result.json"):
        save_app_outputs("demo", {"text": "hi"}, {}, tmp_path / "out")
    assert (tmp_path / "out" / "result.json").is_symlink()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["result.json"]



def test_a_folder_of_an_outputs_name_is_refused_before_any_file_is_moved_even_with_overwrite(tmp_path):
    (tmp_path / "out" / "image.png").mkdir(parents=True)
    (tmp_path / "out" / "result.json").write_text("mine")
    with pytest.raises(FileExistsError, match="holds a folder named image.png where that output file goes"):
        save_app_outputs("demo", {"draft": picture((1, 2, 3)), "image": picture((4, 5, 6))}, {}, tmp_path / "out",
                         overwrite=True)
    assert (tmp_path / "out" / "result.json").read_text() == "mine"  # nothing moved: no mix of new and old files
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["image.png", "result.json"]
    assert list((tmp_path / "out" / "image.png").iterdir()) == []
