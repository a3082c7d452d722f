"""kohya's --dataset_config file (`[general]`, `[[datasets]]`, `[[datasets.subsets]]`) read into typed settings.

kohya's `library/config_util.py` describes a training set as datasets of subsets: each subset is one image
folder with its own repeats and caption settings, each dataset has its own resolution, batch size and buckets,
and all datasets train together as one DatasetGroup. A setting is looked up subset -> dataset -> [general] ->
the run's own setting (kohya's command line / --config_file) -> kohya's default, as kohya's
`BlueprintGenerator.generate_params_by_fallbacks` does. kohya's schema (voluptuous) refuses keys it does not
know, and so does this reader, naming the key and where it is; kohya keys that change training in a way mixkit
does not implement are accepted at their off value only, as the --config_file reader does (`config_file`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from mixkit.data.bucketing import check_bucket_inputs, check_resolution
from mixkit.data.caption_augmentation import CaptionAugmentation
from mixkit.data.image_dataset import BucketSettings
from mixkit.data.kohya_folder import check_caption_extension
from mixkit.io.json_object import parse_json_object

logger = logging.getLogger(__name__)

# kohya's key -> the mixkit run setting it falls back to (kohya's argparse layer); None: kohya's default only.
_CAPTION_KEYS = {"shuffle_caption": "shuffle_caption", "keep_tokens": "keep_tokens",
                 "keep_tokens_separator": "keep_tokens_separator", "caption_prefix": "caption_prefix",
                 "caption_suffix": "caption_suffix", "caption_dropout_rate": "caption_dropout_rate",
                 "caption_tag_dropout_rate": "caption_tag_dropout_rate", "caption_separator": "caption_separator"}
# Keys a subset inherits from its dataset and [general] (kohya's SUBSET/DO/DB_SUBSET_ASCENDABLE_SCHEMA).
SUBSET_SETTINGS = {**_CAPTION_KEYS, "flip_aug": "flip_aug", "num_repeats": None, "caption_extension":
                   "caption_extension", "class_tokens": None}
# Keys of one dataset, which [general] may also give (kohya's DATASET_ASCENDABLE_SCHEMA).
DATASET_SETTINGS = {"resolution": "resolution", "batch_size": "batch_size", "enable_bucket": "bucketing",
                    "bucket_reso_steps": "bucket_step", "min_bucket_reso": "min_bucket_reso",
                    "max_bucket_reso": "max_bucket_reso", "bucket_no_upscale": "bucket_no_upscale"}
# Keys only a subset has (kohya's DB_SUBSET_DISTINCT_SCHEMA).
SUBSET_ONLY = ("image_dir", "is_reg")

# kohya keys mixkit accepts at their off value only: (accepted values, what kohya does that mixkit does not).
NOT_HONOURED = {
    "color_aug": ((False,), "kohya's colour augmentation (random hue shifts) is not implemented"),
    "random_crop": ((False,), "mixkit crops images at the centre, as kohya does without random_crop"),
    "face_crop_aug_range": ((), "kohya's face-centred crop augmentation is not implemented"),
    "secondary_separator": ((), "kohya's secondary_separator (tags joined as one for shuffling) is not implemented"),
    "enable_wildcard": ((False,), "kohya's {a|b} caption wildcards are not implemented"),
    "token_warmup_step": ((0, 0.0), "kohya's token warm-up is not implemented; mixkit trains on whole captions"),
    "caption_dropout_every_n_epochs": ((0,), "mixkit drops captions by caption_dropout_rate only"),
    "custom_attributes": (({},), "kohya's custom_attributes feed its other trainers' features"),
    "resize_interpolation": ((), "mixkit always resizes with Lanczos (where kohya's default is OpenCV's area "
                                 "filter); other filters cannot be chosen"),
    "alpha_mask": ((False,), "per-subset alpha masks are not implemented; set masked_loss: true for the run (it "
                             "reads `-masklabel.png` files, else the alpha channel)"),
    "network_multiplier": ((1.0, 1), "per-dataset network multipliers are not implemented"),
    "validation_split": ((0.0, 0), "per-dataset held-out images are not implemented; set validation_split for the "
                                   "run"),
    "validation_seed": ((), "per-dataset held-out images are not implemented; the run's seed chooses them"),
}
# kohya keys with no effect on what is trained: accepted and logged.
IGNORED = {"cache_info": "image sizes are read once per run", "token_warmup_min": "it acts only with "
           "token_warmup_step"}
# The types kohya's schema asks for (an int is also a number; a bool is no int, unlike in Python).
_TYPES = {**{k: bool for k in ("shuffle_caption", "flip_aug", "enable_bucket", "bucket_no_upscale", "is_reg",
                                "color_aug", "random_crop", "enable_wildcard", "alpha_mask", "cache_info")},
          **{k: int for k in ("keep_tokens", "num_repeats", "batch_size", "bucket_reso_steps", "min_bucket_reso",
                               "max_bucket_reso", "caption_dropout_every_n_epochs", "token_warmup_min",
                               "validation_seed")},
          **{k: float for k in ("caption_dropout_rate", "caption_tag_dropout_rate", "network_multiplier",
                                 "token_warmup_step", "validation_split")},
          **{k: str for k in ("keep_tokens_separator", "caption_prefix", "caption_suffix", "caption_separator",
                               "caption_extension", "class_tokens", "image_dir", "secondary_separator",
                               "resize_interpolation")}}

# Where each key may stand, as in kohya's schema: a subset's keys may also be given for a whole dataset or in
# [general]; a dataset's in [general]; image_dir, is_reg and alpha_mask belong to one subset only.
_DATASET_ONLY = {"network_multiplier", "validation_split", "validation_seed"}
_SUBSET_INHERITED = (set(SUBSET_SETTINGS) | set(NOT_HONOURED) | set(IGNORED)) - _DATASET_ONLY - {"alpha_mask"}
GENERAL_KEYS = frozenset(_SUBSET_INHERITED | set(DATASET_SETTINGS) | _DATASET_ONLY)
DATASET_KEYS = GENERAL_KEYS | {"subsets"}
SUBSET_KEYS = frozenset(_SUBSET_INHERITED | set(SUBSET_ONLY) | {"alpha_mask"})
# Subset kinds of kohya's other trainers, refused by name with what they are.
OTHER_KINDS = {"metadata_file": "a fine-tuning subset (kohya's --in_json captions); mixkit reads captions from "
                                "files beside the images, or a JSONL manifest given as dataset",
               "conditioning_data_dir": "a ControlNet subset, which the LoRA trainer does not train"}


@dataclass(frozen=True)
class SubsetSettings:
    """One image folder of a dataset, with every setting resolved (kohya's DreamBoothSubset)."""

    image_dir: Path
    num_repeats: int
    is_reg: bool
    class_tokens: str | None
    caption_extension: str
    captions: CaptionAugmentation
    flip_aug: bool
    where: str  # "datasets[0].subsets[1]", for messages


@dataclass(frozen=True)
class DatasetSettings:
    """One dataset of the group: its own resolution, batch size and buckets (kohya's DreamBoothDataset)."""

    resolution: tuple[int, int]  # (width, height)
    batch_size: int
    buckets: BucketSettings
    subsets: tuple[SubsetSettings, ...]
    where: str


def is_dataset_config(path) -> bool:
    """Whether a run's `dataset` names a kohya dataset config file (.toml, or .json as kohya's `load_user_config`
    also reads) rather than a folder or a .jsonl manifest."""
    return isinstance(path, (str, Path)) and Path(path).suffix.lower() in (".toml", ".json")


def read_dataset_config(path: str | Path, run) -> list[DatasetSettings]:
    """The datasets of kohya dataset config `path`, each setting resolved subset -> dataset -> [general] -> `run`
    (the run's config, kohya's command-line layer) -> kohya's default; raises ValueError naming the file, the
    place (`[general]`, `datasets[0].subsets[1]`), the key and what to do."""
    import tomllib

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"dataset config {str(path)!r} does not exist; name a kohya dataset config .toml "
                                "([general] / [[datasets]] / [[datasets.subsets]]) or its .json form")
    # utf-8-sig: a byte-order mark (Windows PowerShell 5's `Out-File -Encoding utf8`, older Notepad) is dropped, not
    # reported as TOML's "Invalid statement (at line 1, column 1)"
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        data = parse_json_object(text, str(path), "a kohya dataset config in JSON is an object with \"general\" and "
                                 "\"datasets\", as its TOML form has [general] and [[datasets]]")
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path} is not valid TOML ({error}).") from None
    unknown = sorted(set(data) - {"general", "datasets"})
    if unknown:
        raise ValueError(f"{path}: unknown top-level key {unknown[0]!r}; a kohya dataset config has [general] and "
                         "[[datasets]] only (run settings go in the --config file)")
    general = _table(data.get("general", {}), "[general]", GENERAL_KEYS, path)
    datasets = data.get("datasets", [])
    if not isinstance(datasets, list) or not datasets:
        raise ValueError(f"{path}: no [[datasets]]; add at least one with its [[datasets.subsets]] (image_dir = ...)")
    return [_dataset(raw, f"datasets[{i}]", general, run, path) for i, raw in enumerate(datasets)]


def _table(raw, where: str, allowed: frozenset, path: Path) -> dict:
    """`raw` checked against kohya's schema for `where`: known keys, kohya's types, refused or ignored values."""
    if not isinstance(raw, dict):
        raise ValueError(f"{path} {where}: must be a table of settings, got {raw!r}")
    for key, value in raw.items():
        if key in OTHER_KINDS and "subsets" in where:
            raise ValueError(f"{path} {where}: {key!r} makes it {OTHER_KINDS[key]}; give image_dir (a folder of images "
                             "with caption files) instead")
        if key not in allowed:
            places = [name for name, keys in (("[general]", GENERAL_KEYS), ("[[datasets]]", DATASET_KEYS),
                                              ("[[datasets.subsets]]", SUBSET_KEYS)) if key in keys]
            hint = (f"it belongs in {' or '.join(places)}" if places else
                    "kohya's dataset config does not have it (run settings go in the --config file)")
            raise ValueError(f"{path} {where}: unknown key {key!r}; {hint}")
        if key == "subsets":
            continue
        _check_type(key, value, where, path)
        if key in NOT_HONOURED and value not in NOT_HONOURED[key][0]:
            accepted, why = NOT_HONOURED[key]
            fix = f"set {key} = {_toml(accepted[0])} or remove it" if accepted else f"remove {key}"
            raise ValueError(f"{path} {where}: {key} = {_toml(value)}: {why}; {fix}")
        if key in IGNORED:
            logger.info("%s %s: %s = %r has no effect here: %s", path, where, key, value, IGNORED[key])
    return raw


def _check_type(key: str, value, where: str, path: Path) -> None:
    if key in ("resolution", "face_crop_aug_range"):
        pair = isinstance(value, list) and len(value) == 2
        if key == "resolution" and not (_is(value, int) or pair and all(_is(v, int) for v in value)):
            raise ValueError(f"{path} {where}: resolution must be an integer or [width, height], got {value!r}")
        return
    wanted = _TYPES.get(key)
    if key == "custom_attributes":
        wanted = dict
    if wanted is not None and not _is(value, wanted):
        names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table"}
        raise ValueError(f"{path} {where}: {key} must be {names[wanted]}, got {value!r}")


def _is(value, kind) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def _toml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _lookup(key: str, layers: list[dict], run, run_names: dict, default=None):
    """kohya's `search_value`: the first layer that has `key`, then the run's setting, then kohya's default."""
    for layer in layers:
        if key in layer:
            return layer[key]
    name = run_names.get(key)
    return getattr(run, name) if name is not None else default


def _resolution(resolution, where: str, path: Path) -> tuple[int, int]:
    """(width, height) of a dataset's resolution: kohya's one side or [width, height]."""
    try:
        return check_resolution(resolution)
    except ValueError as error:
        raise ValueError(f"{path} {where}: {error}") from None


def _dataset(raw, where: str, general: dict, run, path: Path) -> DatasetSettings:
    raw = _table(raw, where, DATASET_KEYS, path)
    subsets = raw.get("subsets", [])
    if not isinstance(subsets, list) or not subsets:
        raise ValueError(f"{path} {where}: no [[datasets.subsets]]; add one with image_dir = <folder of images>")
    value = lambda key: _lookup(key, [raw, general], run, DATASET_SETTINGS)  # noqa: E731
    resolution, batch_size = _resolution(value("resolution"), where, path), value("batch_size")
    if batch_size < 1:
        raise ValueError(f"{path} {where}: batch_size = {batch_size!r} must be a positive integer")
    buckets = BucketSettings(value("enable_bucket"), step=value("bucket_reso_steps"),
                             min_side=value("min_bucket_reso"), max_side=value("max_bucket_reso"),
                             no_upscale=value("bucket_no_upscale"))
    if buckets.no_upscale and not buckets.enabled:
        raise ValueError(f"{path} {where}: bucket_no_upscale sizes the buckets; it needs enable_bucket = true")
    if buckets.enabled:
        try:
            check_bucket_inputs(resolution, buckets.step, buckets.min_side, buckets.max_side)
        except ValueError as error:
            raise ValueError(f"{path} {where}: {error}") from None
    resolved = tuple(_subset(sub, f"{where}.subsets[{j}]", [raw, general], run, path)
                     for j, sub in enumerate(subsets))
    return DatasetSettings(resolution, batch_size, buckets, resolved, where)


def _subset(raw, where: str, layers: list[dict], run, path: Path) -> SubsetSettings:
    raw = _table(raw, where, SUBSET_KEYS, path)
    if "image_dir" not in raw:
        raise ValueError(f"{path} {where}: image_dir is required (the folder of this subset's images)")
    value = lambda key: _lookup(key, [raw, *layers], run, SUBSET_SETTINGS)  # noqa: E731
    repeats = _lookup("num_repeats", [raw, *layers], run, {}, 1)
    if repeats < 1:
        raise ValueError(f"{path} {where}: num_repeats = {repeats} must be at least 1")
    captions = CaptionAugmentation(value("shuffle_caption"), value("keep_tokens"), value("caption_tag_dropout_rate"),
                                   value("caption_dropout_rate"), value("caption_separator"),
                                   value("caption_prefix"), value("caption_suffix"), value("keep_tokens_separator"))
    try:
        captions.check()
        check_caption_extension(value("caption_extension"))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} {where}: {error}") from None
    image_dir = Path(raw["image_dir"]).expanduser()
    if not image_dir.is_dir():
        raise ValueError(f"{path} {where}: image_dir {raw['image_dir']!r} is not a folder (a relative path is read "
                         "from the working directory, as kohya reads it); give the folder of this subset's images")
    return SubsetSettings(image_dir, repeats, raw.get("is_reg", False), value("class_tokens"),
                          value("caption_extension"), captions, value("flip_aug"), where)
