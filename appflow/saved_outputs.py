"""An app's outputs written to a folder: images as PNG (with their infotext), masks as PNG, a video as .mp4/.gif, an
audio clip as .wav, and everything else in one `result.json`.

`result.json` is what `POST /appflow/{app}` answers, with each file's name where the HTTP answer holds its base64
(and a video's / clip's format details kept). Every file is written complete under a hidden staging folder first and
only then renamed into place, so an error (or a second Ctrl-C) leaves no half-written file; nothing is replaced
unless the caller allows it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mixkit.errors import MixkitError

RESULT_FILE = "result.json"
VIDEO_FORMATS = ("auto", "mp4", "gif")


class OutputExistsError(MixkitError, FileExistsError):
    """An output file or folder is there already and may not be replaced (no --overwrite); nothing was written."""


def check_output_folder(folder: str | os.PathLike, overwrite: bool) -> Path:
    """`folder` if the outputs can go there: missing or empty (any folder with `overwrite`, whose files of the same
    names are then replaced), and writable (proven by a probe file, removed again with any folder made for it)."""
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"Output folder {str(path)!r} exists and is not a folder; choose another with -o.")
    if path.is_dir() and not overwrite and any(not entry.name.startswith(".") for entry in path.iterdir()):
        raise OutputExistsError(f"Output folder {str(path)!r} already holds files; choose a new or empty folder with -o, "
                              "or pass --overwrite to replace the files of the same names.")
    made = [parent for parent in (path, *path.parents) if not parent.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".mixkit-write-test-"):
            pass
    except OSError as error:
        raise PermissionError(f"Output folder {str(path)!r} is not writable ({error.strerror or error}); choose "
                              "another with -o.") from None
    finally:
        for created in made:  # innermost first: saving makes them again
            with contextlib.suppress(OSError):
                created.rmdir()
    return path


def video_suffix(video_format: str) -> str:
    """.mp4 or .gif; "auto": .mp4 where OpenCV can encode it, else .gif (Pillow always can)."""
    from mixkit.io.video import mp4_available

    if video_format not in VIDEO_FORMATS:
        raise ValueError(f"video format must be one of {', '.join(VIDEO_FORMATS)}, got {video_format!r}.")
    if video_format == "auto":
        return ".mp4" if mp4_available() else ".gif"
    return f".{video_format}"


def infotexts_by_image(outputs: dict, bindings: dict) -> dict[int, str]:
    """id(image) -> its infotext: a step's `image` and `images` outputs take that step's `infotexts`, in order (the
    chain's bindings say which step made which output; a `blend` or a mask gets none)."""
    found: dict[int, str] = {}
    for name, binding in bindings.items():
        texts = next((outputs[other] for other, b in bindings.items()
                      if b.step == binding.step and b.key == "infotexts" and other in outputs), None)
        if not texts or name not in outputs or binding.key not in ("image", "images"):
            continue
        images = outputs[name] if binding.key == "images" else [outputs[name]]
        found.update({id(image): text for image, text in zip(images, texts)})
    return found


class OutputWriter:
    """Turns each output into files in a staging folder and JSON for `result.json` (file names, not base64)."""

    def __init__(self, staging: Path, infotexts: dict[int, str], video_format: str) -> None:
        self.staging, self.infotexts, self.video_format = staging, infotexts, video_format
        self.written: dict[int, Any] = {}  # id(value) -> its JSON, so an output that is another (result) is one file
        self.files: list[str] = []

    def encode(self, name: str, value: Any) -> Any:
        from PIL import Image

        from appflow.audio import Audio
        from appflow.video import Video

        if id(value) in self.written:
            return self.written[id(value)]
        if isinstance(value, Image.Image):
            encoded = self.image(f"{name}.png", value)
        elif isinstance(value, Video):
            encoded = self.video(name, value)
        elif isinstance(value, Audio):
            encoded = self.audio(name, value)
            self.written[id(value.waveform)] = encoded  # `waveform` / `result`: the same samples, the same file
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Image.Image) for v in value):
            digits = max(2, len(str(len(value) - 1)))
            encoded = [self.written.get(id(image)) or self.image(f"{name}-{index:0{digits}d}.png", image)
                       for index, image in enumerate(value)]
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Audio) for v in value):
            digits = max(2, len(str(len(value) - 1)))  # a batch's clips; the first is often `audio` already
            encoded = [self.written.get(id(clip)) or self.audio(f"{name}-{index:0{digits}d}", clip)
                       for index, clip in enumerate(value)]
        elif _is_mask_stack(value):
            digits = max(2, len(str(len(value) - 1)))
            encoded = [self.image(f"{name}-{index:0{digits}d}.png", _mask_image(mask)) for index, mask in
                       enumerate(value)]
        else:
            return _plain_json(value)
        self.written[id(value)] = encoded
        return encoded

    def image(self, file_name: str, image) -> str:
        from pipelines.png import save_png

        save_png(image, self.staging / file_name, self.infotexts.get(id(image)), replace=False)
        self.files.append(file_name)
        self.written[id(image)] = file_name
        return file_name

    def document(self, file_name: str, data: dict) -> None:
        (self.staging / file_name).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        self.files.append(file_name)

    def video(self, name: str, video) -> dict:
        file_name = f"{name}{video_suffix(self.video_format)}"
        video.save(self.staging / file_name)
        self.files.append(file_name)
        width, height = video.size
        return {"file": file_name, "format": file_name.rsplit(".", 1)[1], "fps": video.fps,
                "frame_count": len(video), "width": width, "height": height}

    def audio(self, name: str, audio) -> dict:
        file_name = f"{name}.wav"
        audio.save(self.staging / file_name)
        self.files.append(file_name)
        return {"file": file_name, "format": "wav", "sample_rate": audio.sample_rate, "sample_count": len(audio),
                "duration": audio.duration, "sample_width_bits": 16}


def save_app_outputs(app: str, outputs: dict, bindings: dict, folder: str | os.PathLike, *, interrupted: bool = False,
                     overwrite: bool = False, video_format: str = "auto", documents: tuple[str, ...] = ()) -> list[Path]:
    """Write `outputs` (an app's result) into `folder` and return the files written, `result.json` last.

    `documents`: outputs that are files of their own format (a LabelMe annotation), also written as `<name>.json`.

    All files are made in a hidden staging folder inside `folder`, then renamed into place; an error before that
    leaves nothing behind (no partial file, no folder made for it). Without `overwrite` a name taken meanwhile is an
    error and nothing is moved; a folder of an output's name is an error even with `overwrite`, and nothing is
    moved."""
    video_suffix(video_format)  # a bad format fails before any file is made
    target = Path(folder).expanduser()
    made = [parent for parent in (target, *target.parents) if not parent.exists()]
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".mixkit-appflow-", suffix=".tmp", dir=target))
    try:
        writer = OutputWriter(staging, infotexts_by_image(outputs, bindings), video_format)
        # clips first, so a bare waveform listed before its clip (`waveform`, then `audio`) is known as its samples;
        # then single images, so one that is also in a list keeps its own name (`draft.png`, not `images-00.png`)
        from PIL import Image

        from appflow.audio import Audio

        first = {name: writer.encode(name, value) for kind in (Audio, Image.Image)
                 for name, value in outputs.items() if isinstance(value, kind)}
        encoded = {name: first[name] if name in first else writer.encode(name, value) for name, value in outputs.items()}
        documented: set[int] = set()
        for name in documents:  # "result" would be result.json itself; it is another output under its own name
            if name != "result" and isinstance(outputs.get(name), dict) and id(outputs[name]) not in documented:
                documented.add(id(outputs[name]))
                writer.document(f"{name}.json", encoded[name])
        document = {"app": app, "outputs": encoded, "interrupted": bool(interrupted)}
        (staging / RESULT_FILE).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        names = [*writer.files, RESULT_FILE]
        # lexists: a symlink of that name (even one pointing nowhere) is the user's too, and os.replace would drop it
        taken = sorted(name for name in names if os.path.lexists(target / name))
        if taken and not overwrite:
            raise OutputExistsError(f"Output folder {str(target)!r} already holds {', '.join(taken)}; choose another "
                                  "folder with -o or pass --overwrite.")
        # a folder of an output's name (`image.png/`) cannot be replaced by a file: refused before the first move,
        # so an --overwrite run never leaves a mix of new and old files behind
        folders = sorted(name for name in names if os.path.isdir(target / name) and not os.path.islink(target / name))
        if folders:
            raise OutputExistsError(f"Output folder {str(target)!r} holds a folder named {', '.join(folders)} where "
                                    "that output file goes; move or rename it, or choose another folder with -o.")
        for name in names:
            os.replace(staging / name, target / name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for created in made:
            with contextlib.suppress(OSError):
                created.rmdir()
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return [target / name for name in names]


def _is_mask_stack(value: Any) -> bool:
    """A bool tensor (N, H, W): the masks port, one mask per box."""
    return type(value).__module__.startswith("torch") and getattr(value, "ndim", 0) == 3 \
        and str(getattr(value, "dtype", "")) == "torch.bool"


def _mask_image(mask):
    from PIL import Image

    return Image.fromarray(mask.detach().cpu().numpy().astype("uint8") * 255, mode="L")


def _plain_json(value: Any) -> Any:
    """JSON for a value that is no file: tensors and arrays as lists, dicts and lists item by item."""
    if isinstance(value, dict):
        return {str(key): _plain_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(item) for item in value]
    if type(value).__module__.startswith(("torch", "numpy")) and hasattr(value, "tolist"):
        if hasattr(value, "detach"):
            value = value.detach().cpu()
        return value.tolist()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)
