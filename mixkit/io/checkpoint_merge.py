"""A1111's Checkpoint Merger: merge two or three single-file checkpoints into a new one in the models folder.

Same choices as the Checkpoint Merger tab (modules/extras.py `run_modelmerger`): the method ("No interpolation",
"Weighted sum", "Add difference"; the math in `merge_math`), the multiplier M (0..1), "Save as float16", the format
(safetensors or ckpt), a custom name (else A1111's recipe name), "Bake in VAE", "Discard weights with matching name"
(a regular expression searched in each key), "Save metadata" (`merge_metadata`) and "Copy config from". Keys only
in A are kept, keys only in B dropped, as A1111 >= 1.5.

Differences from A1111, each deliberate: every mistake is found before the file is written (A1111 fails half-way
or writes a broken file); the file appears complete or not at all (temporary file + rename; an existing file of the
same name is replaced, as A1111 overwrites it, but never one of the inputs); a result holding NaN/inf is refused;
"Save as float16" converts every float32 tensor (A1111 leaves the unmerged ones, e.g. A-only keys, float32); a
baked VAE must fit (a VAE whose keys match nothing, or whose shapes differ, is refused, not silently skipped).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import MixkitError
from mixkit.io.merge_inputs import CheckpointTensors, MergeSource, as_merge_source, release_freed_memory
from mixkit.io.merge_math import (ADD_DIFFERENCE, MERGE_METHODS, WEIGHTED_SUM, MergeShapeError,
                                  is_merged_key, merge_tensor, to_half)
from mixkit.io.merge_metadata import default_merge_name, merge_metadata
from mixkit.io.merge_output import bake_vae, copy_config, save_merged

CHECKPOINT_FORMATS = ("safetensors", "ckpt")  # A1111's radio; safetensors is its default
CONFIG_SOURCES = ("A, B or C", "B", "C", "Don't")  # A1111's "Copy config from", recorded by index in the recipe

MAX_FILE_NAME_BYTES = 255  # ext4, NTFS, APFS
ProgressCallback = Callable[[int, int, str], None]
TRIM_EVERY_KEYS = 8  # see `release_freed_memory`: bounds the freed-but-resident heap to a few keys' tensors


class MergeInterrupted(MixkitError):
    """The merge was stopped before its file was written; nothing changed on disk."""


@dataclass(frozen=True)
class MergeResult:
    """The written checkpoint, its copied `.yaml` config (if any) and which extra input channels it kept."""

    path: Path
    config_path: Path | None
    is_inpainting: bool
    is_instruct_pix2pix: bool


def merge_checkpoints(primary, secondary=None, tertiary=None, *, progress: ProgressCallback | None = None,
                      should_stop: Callable[[], bool] | None = None, **options) -> MergeResult:
    """Merge checkpoint files A (`primary`), B and C as A1111's Checkpoint Merger and write the result into
    `output_dir`; `options` are `check_merge_request`'s. `progress(done, total, text)` is told of each key;
    `should_stop()` returning True ends the merge (MergeInterrupted) before anything is written.
    """
    plan = check_merge_request(primary, secondary, tertiary, **options)
    method, multiplier, save_as_half = plan.method, plan.multiplier, plan.save_as_half
    checkpoint_format, custom_name, config_source = plan.checkpoint_format, plan.custom_name, plan.config_source
    report = progress or (lambda done, total, text: None)
    stop = should_stop or (lambda: False)
    tensors, kinds = _merged_tensors(plan, report, stop)
    if plan.vae is not None:
        report(0, 1, "Baking in VAE")
        bake_vae(tensors, plan.vae)
    if save_as_half:  # after the bake: the VAE's weights are converted too
        tensors = {key: to_half(value) for key, value in tensors.items()}
    if plan.discard is not None:
        tensors = {key: value for key, value in tensors.items() if not plan.discard.search(key)}
    _refuse_non_finite(tensors)
    if stop():
        raise MergeInterrupted("The merge was interrupted; no file was written.")
    is_inpainting, is_ip2p = "inpainting" in kinds, "instruct-pix2pix" in kinds
    name = custom_name or default_merge_name(method, multiplier, *plan.sources_by_role)
    name += ".inpainting" * is_inpainting + ".instruct-pix2pix" * is_ip2p + "." + checkpoint_format
    target = plan.output_dir / name
    report(1, 1, "Saving")
    file_metadata = None
    if plan.save_metadata and checkpoint_format == "safetensors":  # a .ckpt has nowhere to keep it
        recipe = _recipe(plan, is_inpainting, is_ip2p)
        file_metadata = merge_metadata(recipe, plan.sources, user_metadata=plan.user_metadata,
                                       add_merge_recipe=plan.add_merge_recipe,
                                       copy_metadata_fields=plan.copy_metadata_fields)
    save_merged(tensors, target, checkpoint_format, file_metadata)
    return MergeResult(target, copy_config(target, config_source, plan.sources_by_role), is_inpainting, is_ip2p)


@dataclass(frozen=True)
class MergePlan:
    """A checked merge request: what `merge_checkpoints` will do, every value valid."""

    sources_by_role: tuple  # (A, B or None, C or None) as MergeSources
    output_dir: Path
    method: str
    multiplier: float
    save_as_half: bool
    checkpoint_format: str
    custom_name: str
    vae: Path | None
    discard_weights: str
    discard: re.Pattern | None
    save_metadata: bool
    add_merge_recipe: bool
    copy_metadata_fields: bool
    user_metadata: dict[str, str]
    config_source: str

    @property
    def sources(self) -> list[MergeSource]:
        return [source for source in self.sources_by_role if source is not None]


def check_merge_request(primary, secondary=None, tertiary=None, *, output_dir: str | os.PathLike,
                        method: str = WEIGHTED_SUM, multiplier: float = 0.3, save_as_half: bool = False,
                        checkpoint_format: str = "safetensors", custom_name: str = "",
                        bake_in_vae: str | os.PathLike | None = None, discard_weights: str = "",
                        save_metadata: bool = True, add_merge_recipe: bool = True, copy_metadata_fields: bool = True,
                        metadata: Mapping[str, object] | None = None,
                        config_source: str = CONFIG_SOURCES[0]) -> MergePlan:
    """Every check of a merge request that reads no tensor (ValueError / TypeError naming the value), so a mistake
    costs nothing and writes nothing; a UI calls it before queueing the merge.

    Sources are paths or `MergeSource`s (a path with the name a model list shows, which goes into the default file
    name and the metadata). B is ignored by "No interpolation", C by all but "Add difference", as A1111. `metadata`
    adds entries to the file's metadata (A1111's "Metadata in JSON format"; non-text values are stored as JSON).
    """
    if method not in MERGE_METHODS:
        raise ValueError(f"Unknown merge method {method!r}; use one of: {', '.join(MERGE_METHODS)}.")
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not 0 <= multiplier <= 1:
        raise ValueError(f"multiplier must be a number from 0 to 1 (A1111's slider), got {multiplier!r}.")
    for flag, value in (("save_as_half", save_as_half), ("save_metadata", save_metadata),
                        ("add_merge_recipe", add_merge_recipe), ("copy_metadata_fields", copy_metadata_fields)):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}.")
    if checkpoint_format not in CHECKPOINT_FORMATS:
        raise ValueError(f"Unknown checkpoint format {checkpoint_format!r}; use one of: {', '.join(CHECKPOINT_FORMATS)}.")
    if config_source not in CONFIG_SOURCES:
        raise ValueError(f"Unknown config source {config_source!r}; use one of: {', '.join(CONFIG_SOURCES)}.")
    _check_custom_name(custom_name)
    if primary is None:
        raise ValueError("Merging requires a primary model (A).")
    needs_b = method in (WEIGHTED_SUM, ADD_DIFFERENCE)
    if needs_b and secondary is None:
        raise ValueError(f"{method} requires a secondary model (B).")
    if method == ADD_DIFFERENCE and tertiary is None:
        raise ValueError(f"{method} requires a tertiary model (C): the result is A + (B - C) * M.")
    a = as_merge_source(primary, "primary model (A)")
    b = as_merge_source(secondary, "secondary model (B)") if needs_b else None
    c = as_merge_source(tertiary, "tertiary model (C)") if method == ADD_DIFFERENCE else None
    if method == WEIGHTED_SUM and _same_file(a.path, b.path):
        raise ValueError(f"A and B are the same file ({str(a.path)!r}); a weighted sum of a model with itself is "
                         "that model. Choose another B (or \"No interpolation\" to convert A).")
    if method == ADD_DIFFERENCE and _same_file(b.path, c.path):
        raise ValueError(f"B and C are the same file ({str(b.path)!r}); their difference is zero and the result "
                         "would be A. Choose another C.")
    folder = Path(output_dir)
    if not folder.is_dir():
        raise NotADirectoryError(f"Output folder {str(folder)!r} does not exist; create it or choose the models folder.")
    if not os.access(folder, os.W_OK | os.X_OK):  # a read-only mount or folder: said now, not after the merge
        raise PermissionError(f"Output folder {str(folder)!r} is not writable (read-only file system or permissions); "
                              "choose another folder or fix its permissions.")
    vae = None
    if bake_in_vae is not None:
        vae = Path(bake_in_vae)
        if not vae.is_file():
            raise FileNotFoundError(f"VAE {str(vae)!r} to bake in is not a file (a diffusers VAE folder cannot be "
                                    "baked in; use an LDM-format .safetensors / .ckpt / .pt VAE).")
    discard = _compile_discard(discard_weights)
    user = _user_metadata(metadata)
    for source in (a, b, c):
        if source is not None:
            _check_readable(source.path)
    name = custom_name or default_merge_name(method, multiplier, a, b, c)
    longest = f"{name}.instruct-pix2pix.{checkpoint_format}"
    if len(longest.encode()) > MAX_FILE_NAME_BYTES:
        raise ValueError(f"The merged file's name would be {len(longest.encode())} bytes long, more than a file system "
                         f"allows ({MAX_FILE_NAME_BYTES}); give a shorter custom name.")
    for suffix in ("", ".inpainting", ".instruct-pix2pix"):  # which one is known only once A's shapes are read
        _refuse_input_as_output(folder / f"{name}{suffix}.{checkpoint_format}", [a, b, c])
    return MergePlan((a, b, c), folder, method, float(multiplier), save_as_half, checkpoint_format, custom_name, vae,
                     discard_weights, discard, save_metadata, add_merge_recipe, copy_metadata_fields, user, config_source)


def _check_readable(path: Path) -> None:
    """Refuse an unsafe pickle or a truncated safetensors file before any tensor is read."""
    from mixkit.io.formats import detect_checkpoint_format
    from mixkit.io.loading import check_pickle_is_safe
    from mixkit.io.safetensors_header import read_safetensors_header

    if detect_checkpoint_format(path) == "safetensors":
        read_safetensors_header(path)
    else:
        check_pickle_is_safe(path, a1111_types=True)


def _check_custom_name(custom_name) -> None:
    if not isinstance(custom_name, str):
        raise TypeError(f"custom_name must be a string, got {type(custom_name).__name__}.")
    if custom_name and (custom_name.strip() != custom_name or custom_name.startswith(".") or "/" in custom_name
                        or "\\" in custom_name or "\0" in custom_name):
        raise ValueError(f"custom_name {custom_name!r} must be a plain file name without folders, leading dot or "
                         "surrounding spaces (the extension is added).")


def _compile_discard(discard_weights) -> re.Pattern | None:
    if not isinstance(discard_weights, str):
        raise TypeError(f"discard_weights must be a regular expression string, got {type(discard_weights).__name__}.")
    if not discard_weights:
        return None
    try:
        return re.compile(discard_weights)
    except re.error as error:
        raise ValueError(f"discard_weights {discard_weights!r} is not a valid regular expression ({error}).") from None


def _user_metadata(metadata) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(key, str) for key in metadata):
        raise TypeError(f"metadata must be a mapping with string keys (a JSON object), got {metadata!r:.200}.")
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in metadata.items()}


def _same_file(first: Path, second: Path) -> bool:
    return first.resolve() == second.resolve()


def _merged_tensors(plan: MergePlan, report: ProgressCallback, stop: Callable[[], bool]) -> tuple[dict, set[str]]:
    """The output state dict, key by key in A's order, and the extra-channel kinds kept from A."""
    a, b, c = plan.sources_by_role
    readers = [CheckpointTensors(a.path), CheckpointTensors(b.path) if b else None,
               CheckpointTensors(c.path) if c else None]
    theta_a, theta_b, theta_c = readers
    try:
        merged, kinds = {}, set()
        keys = theta_a.keys()
        _refuse_disjoint(plan, keys, theta_b, theta_c)
        for done, key in enumerate(keys, start=1):
            if stop():
                raise MergeInterrupted("The merge was interrupted; no file was written.")
            tensor = theta_a.get(key)
            if theta_b is not None and is_merged_key(key) and key in theta_b and tensor.is_floating_point():
                other = theta_b.get(key)
                third = theta_c.get(key) if theta_c is not None and key in theta_c else None
                try:
                    tensor, kind = merge_tensor(plan.method, tensor, other, third, plan.multiplier)
                except MergeShapeError as error:
                    raise MergeShapeError(f"Cannot merge key {key!r}: {error}. Nothing was written.") from None
                if kind:
                    kinds.add(kind)
            merged[key] = tensor
            del tensor
            if done % TRIM_EVERY_KEYS == 0:
                release_freed_memory()
            report(done, len(keys), "Merging" if theta_b is not None else "Converting")
        return merged, kinds
    finally:
        for reader in readers:
            if reader is not None:
                reader.close()


def _refuse_disjoint(plan: MergePlan, keys: list[str], theta_b, theta_c) -> None:
    """Refuse a B (or C) that has none of A's merged weights: the result would be A under a merged name. The usual
    cause is a LoRA, a VAE or a diffusers-layout file picked as a model (A1111 writes the copy of A silently)."""
    a, b, c = plan.sources_by_role
    for source, reader in ((b, theta_b), (c, theta_c)):
        if reader is not None and not any(is_merged_key(key) and key in reader for key in keys):
            role = "B" if source is b else "C"
            raise ValueError(f"{role} ({source.name!r}) has none of A's model weights (its keys look like "
                             f"{reader.keys()[:3]!r}, A's like {[key for key in keys if is_merged_key(key)][:3]!r}), "
                             f"so the merge would be a copy of A. Is {role} a LoRA, a VAE or a diffusers-layout file? "
                             "Choose a full single-file checkpoint; nothing was written.")


def _refuse_non_finite(tensors: dict) -> None:
    from mixkit.io.tensor_checks import first_non_finite

    bad = first_non_finite(tensors)
    if bad is not None:
        raise ValueError(f"The merged weight {bad!r} holds NaN or infinite values (an input holds them, or a float16 "
                         "overflow); nothing was written. Check the inputs or save without float16.")


def _refuse_input_as_output(target: Path, sources: list) -> None:
    for source in sources:
        if source is not None and target.exists() and _same_file(target, source.path):
            raise ValueError(f"The merged file would replace its input {str(source.path)!r}; choose another custom "
                             "name.")


def _recipe(plan: MergePlan, is_inpainting: bool, is_ip2p: bool) -> dict:
    """A1111's `sd_merge_recipe`, field for field."""
    from mixkit.io.hashing import sha256_file

    a, b, c = plan.sources_by_role
    return {"type": "webui", "primary_model_hash": sha256_file(a.path),
            "secondary_model_hash": sha256_file(b.path) if b else None,
            "tertiary_model_hash": sha256_file(c.path) if c else None,
            "interp_method": plan.method, "multiplier": plan.multiplier, "save_as_half": plan.save_as_half,
            "custom_name": plan.custom_name, "config_source": CONFIG_SOURCES.index(plan.config_source),
            "bake_in_vae": plan.vae.name if plan.vae is not None else "None", "discard_weights": plan.discard_weights,
            "is_inpainting": is_inpainting, "is_instruct_pix2pix": is_ip2p}


__all__ = ["CHECKPOINT_FORMATS", "CONFIG_SOURCES", "MERGE_METHODS", "MergeInterrupted", "MergePlan",
           "MergeResult", "MergeShapeError", "MergeSource", "check_merge_request", "merge_checkpoints"]
