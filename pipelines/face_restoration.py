"""A1111's "Restore faces": detect faces, restore each aligned face with GFPGAN or CodeFormer, paste them back.

`restore_faces(image, model="CodeFormer", codeformer_weight=0.5)` is the one entry point; generation (the
`restore_faces` flag), Extras (`gfpgan_visibility` / `codeformer_visibility`) and the HTTP API go through it. Restorers
are registered by A1111's names from their model folders (`register_face_restorers`); the networks and the RetinaFace
detector are loaded on first use and kept (one restorer at a time uses the GPU, so calls are serialised).

The steps are facexlib's `FaceRestoreHelper` as A1111 drives it: RetinaFace on the picture with its short side scaled
up to 640, each face (eyes ≥ 5 px apart) warped onto the FFHQ 512 template, restored in [-1, 1], and pasted back in
detection order through the inverse warp. The paste mask is A1111's (`use_parse=True`): facexlib's ParseNet labels the
restored face and only its face classes are blended in, when `parsing_parsenet.pth` is next to the detector (the
restorer's folder first, as A1111 downloads it there); without it the soft square mask of `use_parse=False` is used
and the log says so once. A picture with no face comes back unchanged. As in A1111, the restored face is pasted as
8-bit (truncated), and a face the network fails on is logged ("Failed face-restoration inference") and pasted back
as it was while the other faces are restored.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable

from mixkit.registry import Registry
from pipelines.face_restorer_files import (PARSER_FILE, PARSER_URL, RELEASES, detector_file, parser_file,
                                           restorer_weights_file)

logger = logging.getLogger(__name__)

FACE_RESTORER_NAMES = ("CodeFormer", "GFPGAN")  # A1111's order in Settings and /sdapi/v1/face-restorers
DEFAULT_CODEFORMER_WEIGHT = 0.5  # A1111's `code_former_weight`
FACE_SIZE = 512


def _default_loader(path, device=None, dtype=None):
    from mixkit.models.face_restorers import load_face_restorer  # the networks live in their own package

    return load_face_restorer(path, device=device, dtype=dtype)


def _default_detector_loader(path, device=None):
    from mixkit.models.face import load_retinaface

    return load_retinaface(path, device=device or "cpu")


def _default_parser_loader(path, device=None):
    from mixkit.models.face.parsenet import load_parsenet

    return load_parsenet(path, device=device or "cpu")


class FaceRestorer:
    """One A1111 face restorer ("GFPGAN" / "CodeFormer") backed by a model folder.

    `loader(path, device=, dtype=) -> (architecture, module)` reads the restorer weights, `detector_loader(path,
    device=)` the RetinaFace file and `parser_loader(path, device=)` the optional ParseNet; all are seams for tests and
    other networks. Files are looked up at first use, so a folder filled after start-up works without a restart.
    """

    def __init__(self, name: str, folder: str | os.PathLike, *, detector_folders: tuple = (), device: Any = None,
                 loader: Callable | None = None, detector_loader: Callable | None = None,
                 parser_loader: Callable | None = None) -> None:
        if name not in RELEASES:
            raise ValueError(f"Face restorer name {name!r} is not one of {', '.join(FACE_RESTORER_NAMES)}.")
        self.name, self.folder = name, os.fspath(folder)
        self.detector_folders = [self.folder, *[os.fspath(f) for f in detector_folders if os.fspath(f) != self.folder]]
        self.device = device
        self.loader, self.detector_loader = loader or _default_loader, detector_loader or _default_detector_loader
        self.parser_loader = parser_loader or _default_parser_loader
        self.lock = threading.RLock()
        self.network = self.detector = self.parser = None
        self.told_no_parser = False
        self.loaded_from: tuple | None = None
        self.offloaded = False

    def __repr__(self) -> str:
        return f"FaceRestorer({self.name!r}, {self.folder!r})"

    def files(self):
        """(restorer weights, detector weights), raising FileNotFoundError naming what is missing and its URL."""
        return restorer_weights_file(self.name, self.folder), detector_file(self.detector_folders)

    def load(self):
        """(network, detector, parser or None), loaded now unless the same files already are."""
        import torch

        weights, detector = self.files()
        parser = parser_file(self.detector_folders)
        key = (str(weights), weights.stat().st_mtime_ns, str(detector), str(self.device), str(parser),
               parser.stat().st_mtime_ns if parser else None)
        device = torch.device(self.device or "cpu")
        with self.lock:
            if self.loaded_from == key and self.offloaded:
                for module in self._modules():
                    module.to(device)
                self.offloaded = False
            if self.loaded_from != key:
                self.network = self.detector = self.parser = self.loaded_from = None
                architecture, network = self.loader(weights, device=device, dtype=torch.float32)
                if architecture != self.name:
                    flag = RELEASES[architecture].flag if architecture in RELEASES else "its own folder"
                    raise ValueError(f"{str(weights)!r} holds a {architecture} network, not {self.name}; move it to "
                                     f"the {architecture} folder ({flag}).")
                detector_module = self.detector_loader(detector, device=device)
                parser_module = self._load_parser(parser, device)
                self.network, self.detector, self.parser = network, detector_module, parser_module
                self.loaded_from, self.offloaded = key, False
            return self.network, self.detector, self.parser

    def _load_parser(self, path, device):
        """The ParseNet at `path` checked for facexlib's 19 classes, or None (logged once per restorer) without one."""
        from mixkit.models.face.parse_mask import FACE_CLASS_VALUES

        if path is None:
            if not self.told_no_parser:
                logger.info("%s: no %s in %s; faces are pasted under the soft square mask (facexlib's use_parse=False)"
                            " instead of A1111's face-parsing mask. Download %s into %r to match A1111.", self.name,
                            PARSER_FILE, ", ".join(repr(folder) for folder in self.detector_folders), PARSER_URL,
                            self.folder)
                self.told_no_parser = True
            return None
        from mixkit.errors import CheckpointFormatError

        try:
            parser = self.parser_loader(path, device=device)
        except CheckpointFormatError as error:
            raise CheckpointFormatError(f"{error} Replace it with facexlib's ({PARSER_URL}), or remove it to paste "
                                        "faces under the square mask.") from error
        classes = getattr(getattr(parser, "config", None), "parsing_channels", len(FACE_CLASS_VALUES))
        if classes != len(FACE_CLASS_VALUES):
            raise ValueError(f"{str(path)!r} is a face parser with {classes} classes; A1111's paste mask needs "
                             f"facexlib's 19-class ParseNet ({PARSER_URL}). Replace the file or remove it.")
        return parser

    def _modules(self):
        return [module for module in (self.network, self.detector, self.parser) if module is not None]

    def offload(self) -> None:
        """Move the networks to the CPU (A1111's `face_restoration_unload`: free VRAM after each use)."""
        with self.lock:
            if self.loaded_from is not None:
                for module in self._modules():
                    module.to("cpu")
                self.offloaded = True

    def unload(self) -> None:
        with self.lock:
            self.network = self.detector = self.parser = self.loaded_from = None

    def _restore_one(self, network, batch, weight: float, number: int, count: int):
        """The network's output for one aligned face, or the face itself when the network fails on it: A1111's
        `restore_with_face_helper` reports "Failed face-restoration inference" and pastes the crop back, so one bad
        face (an odd crop, a NaN) costs that face its restoration, not the picture or the job."""
        try:
            return network(batch, weight=weight)
        except Exception:
            logger.exception("Failed face-restoration inference (%s, face %d of %d); that face is kept as it was.",
                             self.name, number, count)
            return batch

    def restore(self, image, *, weight: float):
        """`image` (PIL) with every detected face restored; the network runs at CodeFormer fidelity `weight`."""
        import numpy as np
        import torch
        from PIL import Image

        from mixkit.models.face import align_face, detect_faces, paste_face
        from mixkit.models.face.parse_mask import face_classes, parse_mask, paste_face_parsed

        with self.lock, torch.inference_mode():
            network, detector, parser = self.load()
            device = next(detector.parameters()).device
            rgb = image.convert("RGB")
            pixels = torch.from_numpy(np.asarray(rgb, dtype=np.float32).copy()).permute(2, 0, 1).to(device)
            faces = detect_faces(detector, pixels)
            if not faces:
                return rgb.copy()
            aligned = [align_face(pixels, torch.tensor(face.landmarks, dtype=torch.float64), size=FACE_SIZE)
                       for face in faces]
            result = pixels
            for number, (face, matrix) in enumerate(aligned, 1):
                # facexlib warps the 8-bit picture, so the network sees an 8-bit crop
                batch = (face.round().clamp(0, 255) / 127.5 - 1.0)[None]
                restored = self._restore_one(network, batch, weight, number, len(aligned))
                if tuple(restored.shape) != (1, 3, FACE_SIZE, FACE_SIZE):
                    raise ValueError(f"Face restorer {self.name} returned shape {tuple(restored.shape)} for a "
                                     f"[1, 3, {FACE_SIZE}, {FACE_SIZE}] face; its network does not fit this pipeline.")
                face_pixels = eight_bit_face(restored[0])
                if parser is None:
                    result = paste_face(result, face_pixels.to(device), matrix)
                else:
                    mask = parse_mask(face_classes(parser, face_pixels))
                    if tuple(mask.shape) != (FACE_SIZE, FACE_SIZE):
                        raise ValueError(f"The face parser returned a {tuple(mask.shape)} map for a {FACE_SIZE}² face;"
                                         " it does not fit this pipeline (facexlib's ParseNet keeps the size).")
                    result = paste_face_parsed(result, face_pixels.to(device), matrix, mask.to(device))
            array = result.round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).cpu().numpy()
            return Image.fromarray(array)


def eight_bit_face(restored):
    """A network's face [3, S, S] in [-1, 1] as the 0..255 integers A1111 pastes (float tensor of whole numbers).

    A1111's `restore_with_face_helper` maps the output to [0, 1], multiplies by 255 and casts to uint8 (truncating,
    not rounding) before facexlib warps it back, so a restorer's 127.5 lands in the picture as 127; the same order of
    float32 operations is kept here so the truncation falls the same way."""
    return ((restored.float().clamp(-1, 1) + 1.0) / 2.0 * 255.0).floor()


# Face restorers by A1111's names; `register_face_restorers` fills it from the model folders.
FACE_RESTORERS: Registry[FaceRestorer] = Registry("face restorer")


def register_face_restorers(*, gfpgan_folder: str | os.PathLike | None = None,
                            codeformer_folder: str | os.PathLike | None = None, device: Any = None,
                            loader: Callable | None = None, detector_loader: Callable | None = None,
                            parser_loader: Callable | None = None, registry: Registry = FACE_RESTORERS) -> list[str]:
    """Register "CodeFormer" / "GFPGAN" for the folders given (A1111's `--codeformer-models-path`,
    `--gfpgan-models-path`), replacing earlier entries; the names registered, in A1111's order.

    A folder that does not exist is refused now; missing weight files are reported when a restore needs them, with
    the file to download and where to put it."""
    folders = {"CodeFormer": codeformer_folder, "GFPGAN": gfpgan_folder}
    for name, folder in folders.items():
        if folder is not None and not os.path.isdir(os.path.expanduser(os.fspath(folder))):
            raise ValueError(f"{RELEASES[name].flag} {os.fspath(folder)!r} is not a folder; create it or fix the path.")
    given = [os.path.expanduser(os.fspath(folder)) for folder in folders.values() if folder is not None]
    names = []
    for name, folder in folders.items():
        if folder is None:
            continue
        registry.register(name, FaceRestorer(name, os.path.expanduser(os.fspath(folder)), detector_folders=tuple(given),
                                             device=device, loader=loader, detector_loader=detector_loader,
                                             parser_loader=parser_loader),
                          replace=True)
        names.append(name)
    return names


def check_face_restoration_weight(value: Any, name: str = "codeformer_weight") -> float:
    """CodeFormer's fidelity w as a float in [0, 1] (also a visibility's check); ValueError naming `name` otherwise."""
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] (for CodeFormer's weight: 0 = strongest restoration, "
                         f"1 = closest to the input), got {value!r}.")
    return float(value)


def check_face_restoration(model: Any, codeformer_weight: Any = DEFAULT_CODEFORMER_WEIGHT, *,
                           registry: Registry = FACE_RESTORERS) -> FaceRestorer:
    """The restorer `model` names, after checking `codeformer_weight` and that its weight and detector files are in
    place; raises ValueError saying what to change (the file to download and the folder to put it in)."""
    check_face_restoration_weight(codeformer_weight)
    if not isinstance(model, str) or model not in registry and model.casefold() not in (
            name.casefold() for name in registry):
        available = ", ".join(repr(name) for name in registry) or "none"
        hint = f"; start with {RELEASES[model].flag} FOLDER to enable {model}" if isinstance(model, str) \
            and model in RELEASES else ""
        raise ValueError(f"Face restoration model {model!r} is not available (available: {available}){hint}. "
                         f"Known restorers: {', '.join(FACE_RESTORER_NAMES)}.")
    restorer = registry.get(model)
    try:
        restorer.files()  # a missing file is named (with its URL) now, before any sampling
    except FileNotFoundError as error:
        raise ValueError(str(error)) from None
    return restorer


def restore_faces(image, model: str = "CodeFormer", codeformer_weight: float = DEFAULT_CODEFORMER_WEIGHT, *,
                  unload: bool = False, registry: Registry = FACE_RESTORERS):
    """`image` (PIL) with its faces restored by `model` ("CodeFormer" / "GFPGAN"), as A1111's Restore faces.

    `codeformer_weight` is CodeFormer's fidelity w in [0, 1] (GFPGAN ignores it); `unload` moves the networks to the
    CPU afterwards (A1111's `face_restoration_unload`). Missing weights raise ValueError naming the file, folder and
    download URL, before anything loads; the image is never half-changed.
    """
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"restore_faces takes a PIL image, got {type(image).__name__}.")
    restorer = check_face_restoration(model, codeformer_weight, registry=registry)
    try:
        return restorer.restore(image, weight=float(codeformer_weight))
    finally:
        if unload:
            restorer.offload()


def face_restorer_listing(registry: Registry = FACE_RESTORERS) -> list[dict]:
    """A1111's `/sdapi/v1/face-restorers`: each restorer's name and folder (`cmd_dir`)."""
    return [{"name": name, "cmd_dir": entry.folder} for name, entry in registry.items()]
