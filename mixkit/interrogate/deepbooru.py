"""A1111's DeepBooru tagger file (`model-resnet_custom_v3.pt`) read into `DeepDanbooruNetwork` and its tag list.

A1111 saves the network's state dict with one extra entry, `tags`: the list of 9176 Danbooru tag names in output
order (its `DeepDanbooruModel.load_state_dict` pops it before loading the tensors). The file is a plain pickle of
tensors and strings, so mixkit's weights-only reader takes it; the widths are read from the tensors' shapes, the
network is laid out on the meta device and the file must fill it key for key before any memory is allocated.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError
from mixkit.interrogate.deepbooru_network import (CONV_COUNT, STAGE_REPEATS, DeepDanbooruNetwork, DeepDanbooruSizes,
                                                  widening_block_indices)
from mixkit.interrogate.holding import HeldBetweenUses

A1111_FILE_NAME = "model-resnet_custom_v3.pt"  # the name A1111 downloads into models/torch_deepdanbooru
A1111_URL = "https://github.com/AUTOMATIC1111/TorchDeepDanbooru/releases/download/v1/model-resnet_custom_v3.pt"
A1111_FOLDER = "models/torch_deepdanbooru"
TAGS_KEY = "tags"


def sizes_from_state(file, state: dict[str, torch.Tensor]) -> DeepDanbooruSizes:
    """The widths a DeepDanbooru state dict's shapes give; CheckpointFormatError when a key they are read from is
    missing or is not a convolution weight."""
    def out_channels(index: int) -> int:
        key = f"n_Conv_{index}.weight"
        weight = state.get(key)
        if weight is None or weight.dim() != 4:
            found = "missing" if weight is None else f"of shape {tuple(weight.shape)}"
            raise CheckpointFormatError(
                f"{str(file)!r} is not a DeepDanbooru resnet_custom_v3 file (A1111's {A1111_FILE_NAME}): {key} is "
                f"{found}, expected a convolution weight. Download the file from {A1111_URL}.")
        return int(weight.shape[0])

    stem = out_channels(0)
    widths, inners = [], []
    for stage in range(len(STAGE_REPEATS)):
        reduce_i, _, expand_i, _ = widening_block_indices(stage)
        inners.append(out_channels(reduce_i))
        widths.append(out_channels(expand_i))
    return DeepDanbooruSizes(stem=stem, widths=tuple(widths), inners=tuple(inners),
                             num_tags=out_channels(CONV_COUNT - 1))


def read_deepbooru_tags(file, loaded: dict, num_tags: int) -> list[str]:
    """The file's `tags` list, one name per output; CheckpointFormatError when it is absent or does not match."""
    tags = loaded.get(TAGS_KEY)
    if not isinstance(tags, (list, tuple)) or not all(isinstance(tag, str) for tag in tags):
        raise CheckpointFormatError(
            f"{str(file)!r} holds no DeepDanbooru tag list (A1111's file stores the tag names under {TAGS_KEY!r}); "
            f"without it the scores cannot be named. Download {A1111_FILE_NAME} from {A1111_URL}.")
    if len(tags) != num_tags:
        raise CheckpointFormatError(f"{str(file)!r} names {len(tags)} tags but its last layer scores {num_tags}; "
                                    "the file is damaged or mixes two models. Re-download it.")
    return list(tags)


def load_deepbooru(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                   dtype: torch.dtype = torch.float32) -> tuple[DeepDanbooruNetwork, list[str]]:
    """(network in eval mode on `device` in `dtype`, its tag names) from an A1111 DeepDanbooru .pt file.

    Refused with CheckpointFormatError naming the file: not a dict, no tag list, weights that do not fill the
    network exactly (named), a tensor larger than its storage, NaN or infinite weights."""
    from mixkit.io.loading import read_checkpoint
    from mixkit.io.state_fit import check_state_fits
    from mixkit.io.tensor_checks import refuse_hollow_tensors, refuse_non_finite_tensors

    file = Path(path).expanduser()
    loaded = read_checkpoint(file)
    if not isinstance(loaded, dict):
        raise CheckpointFormatError(f"{str(file)!r} holds a {type(loaded).__name__}, not DeepDanbooru weights "
                                    f"(A1111's {A1111_FILE_NAME}, a dict of tensors and its tag list).")
    state = {key: value for key, value in loaded.items() if isinstance(key, str) and isinstance(value, torch.Tensor)}
    refuse_hollow_tensors(file, state)  # before the shapes size a network: a tiny file must not ask for gigabytes
    sizes = sizes_from_state(file, state)
    tags = read_deepbooru_tags(file, loaded, sizes.num_tags)
    with torch.device("meta"):
        network = DeepDanbooruNetwork(sizes)
    check_state_fits(network.state_dict(), state, file, "a DeepDanbooru resnet_custom_v3 network",
                     hint=f"Expected A1111's {A1111_FILE_NAME} ({A1111_URL}).")
    refuse_non_finite_tensors(file, state, "DeepDanbooru")  # NaN weights would score every tag NaN
    # the file's tensors become the parameters: no random init of 161M weights, no second copy of 644 MB
    network.load_state_dict({key: value.float() for key, value in state.items()}, assign=True)
    return network.to(device=device, dtype=dtype).eval().requires_grad_(False), tags


def find_deepbooru_file(folder: str | os.PathLike) -> Path:
    """The tagger file in an A1111 models/torch_deepdanbooru folder: A1111's download name if present, else the
    first `.pt` by name (A1111 takes the first file it finds); FileNotFoundError saying what to put where."""
    directory = Path(folder).expanduser()
    if not directory.is_dir():
        raise FileNotFoundError(f"The DeepDanbooru folder {str(directory)!r} does not exist; create it and put "
                                f"{A1111_FILE_NAME} ({A1111_URL}) in it.")
    preferred = directory / A1111_FILE_NAME
    if preferred.is_file():
        return preferred
    candidates = sorted(path for path in directory.iterdir() if path.suffix.lower() == ".pt" and path.is_file())
    if not candidates:
        raise FileNotFoundError(f"No DeepDanbooru model in {str(directory)!r}: download {A1111_FILE_NAME} from "
                                f"{A1111_URL} into that folder (A1111's {A1111_FOLDER}).")
    return candidates[0]


class DeepbooruModel(HeldBetweenUses):
    """The tagger of one folder, loaded on first use and dropped after each use unless kept in memory or `held()`
    (a batch tags every picture with one load: `mixkit.interrogate.holding`).

    Thread-safe: the web server's queue and its UI share one instance (`shared_deepbooru_model`). `probabilities`
    takes the 512x512 pixels (`pipelines.deepbooru` prepares them from an image as A1111 does)."""

    def __init__(self, folder: str | os.PathLike, *, device: str | torch.device = "cpu") -> None:
        self.folder = Path(folder).expanduser()
        self.device = torch.device(device)
        self._loaded: tuple[DeepDanbooruNetwork, list[str]] | None = None
        self._init_holds()

    def _drop(self) -> None:
        self._loaded = None

    def unload(self) -> None:
        """Drop the network (A1111 moves it to the CPU; on a CPU server dropping is what frees memory)."""
        with self._lock:
            self._drop()

    def _network(self) -> tuple[DeepDanbooruNetwork, list[str]]:
        """The loaded network and its tags, loading them now if needed (under `_lock`)."""
        if self._loaded is None:
            self._loaded = load_deepbooru(find_deepbooru_file(self.folder), device=self.device)
        return self._loaded

    def load(self) -> None:
        """Load the network now instead of at the first picture, so a command tagging many pictures reports a file
        that is not a tagger before it starts (CheckpointFormatError / FileNotFoundError naming the file). It then
        stays loaded until `unload()` or a use that does not keep it."""
        with self._lock:
            self._network()

    @torch.no_grad()
    def probabilities(self, pixels: torch.Tensor, *, keep_in_memory: bool = False) -> tuple[list[str], list[float]]:
        """(tag names, each one's score) for pixels [1, 3, 512, 512] in [0, 1]."""
        with self._lock:
            try:
                network, tags = self._network()
                scores = network(pixels.to(self.device, torch.float32))[0]
                return tags, scores.cpu().tolist()
            finally:
                self._after_use(keep_in_memory)


_SHARED: dict[tuple[Path, torch.device], DeepbooruModel] = {}
_SHARED_LOCK = threading.Lock()


def shared_deepbooru_model(folder: str | os.PathLike, *, device: str | torch.device = "cpu") -> DeepbooruModel:
    """The process's one `DeepbooruModel` of `folder` on `device`: every caller tagging with the same file (the
    server's API, its tabs, Loopback, the command line) shares one loaded network instead of loading its own copy;
    whether it stays loaded between uses is each use's `keep_in_memory` (A1111's interrogate_keep_models_in_memory).
    The folder is resolved, so two spellings of one folder share too."""
    key = (Path(folder).expanduser().resolve(), torch.device(device))
    with _SHARED_LOCK:
        model = _SHARED.get(key)
        if model is None:
            model = _SHARED[key] = DeepbooruModel(key[0], device=key[1])
        return model
