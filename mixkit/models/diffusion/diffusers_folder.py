"""Load a diffusers-layout Stable Diffusion folder component by component, refusing broken folders clearly.

diffusers and transformers load what they find and explain failures in their own terms: a missing
weights file is "no file named diffusion_pytorch_model.bin", a config that does not fit its weights is
"Cannot load  because ...; pass low_cpu_mem_usage=False", a missing tensor is silently random-initialised,
a tokenizer without its vocabulary becomes a 2-token tokenizer that ignores every prompt. So before and
around each library call, this module checks what the user can fix (files, JSON, tensor shapes, vocab,
pickle globals) and raises mixkit errors naming the file, the key, the value and what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

from mixkit.errors import CheckpointFormatError, MixkitError, ModelNotFoundError
from mixkit.io.json_object import read_json_object
from mixkit.models.diffusion.components import DiffusionModel
from mixkit.models.diffusion.family import ModelFamily, detect_family
from mixkit.models.diffusion.detect_keys import check_unet_in_channels
from mixkit.models.diffusion.recommended import read_recommended

REQUIRED_PARTS = ("unet", "vae", "scheduler")
# SD 1.x/2.x/XL base have text_encoder/; the SDXL refiner (StableDiffusionXLImg2ImgPipeline with text_encoder=None)
# only text_encoder_2/. A folder needs at least one of these pairs.
TEXT_PARTS = (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2"))
DIFFUSERS_WEIGHTS = ("diffusion_pytorch_model",)
TRANSFORMERS_WEIGHTS = ("model", "pytorch_model")
# What mixkit's samplers implement (pipelines/samplers: epsilon and v-prediction, as A1111).
PREDICTION_TYPES = ("epsilon", "v_prediction")
# `name[.variant][-00001-of-00002].safetensors|bin[.index.json]`: diffusers'/transformers' file naming.
_WEIGHT_FILE = re.compile(
    r"^(?P<stem>[A-Za-z_]+)(?:\.(?P<variant>[A-Za-z0-9_]+))?(?:-\d{5}-of-\d{5})?\.(?P<ext>safetensors|bin)"
    r"(?P<index>\.index\.json)?$"
)
# diffusers' refusal of a config that does not fit its weights (it leaves the model name blank).
_DIFFUSERS_SHAPE_ERROR = re.compile(r"because (?P<key>\S+) expected shape (?P<expected>.+?), but got (?P<got>.+?)\.(?:\s|$)")
EXAMPLES = 5


def load_diffusers_folder(folder: Path, source: str, dtype, unet_dtype, variant: str | None = None,
                          use_safetensors: bool | None = None) -> DiffusionModel:
    """UNet, VAE, text encoder(s), tokenizer(s) and scheduler config of a `save_pretrained` folder.

    `variant` and `use_safetensors` choose each component's weight files (`choose_weight_files`)."""
    # 1. The folder's index and configs: present and valid JSON before any weights are read
    index_file = folder / "model_index.json"
    if not index_file.is_file():
        hint = " (it looks like a transformers model, not a diffusion model)" if (folder / "config.json").is_file() else ""
        raise ModelNotFoundError(
            f"{folder} is not a diffusers model folder: model_index.json is missing{hint}. "
            "Pass a Stable Diffusion folder saved with save_pretrained, a single .safetensors checkpoint, or a hub id."
        )
    index = read_json(index_file, "the model index")
    for part in REQUIRED_PARTS:
        if part not in index or not (folder / part).is_dir():
            raise ModelNotFoundError(f"{folder} is missing the '{part}' component of a Stable Diffusion model "
                                     f"({part}/ folder, listed in model_index.json); re-download the model.")
    has_first, has_second = (index.get(part) not in (None, [None, None]) and (folder / part).is_dir()
                             for part, _ in TEXT_PARTS)
    if not has_first and not has_second:
        raise ModelNotFoundError(f"{folder} is missing the 'text_encoder' component of a Stable Diffusion model "
                                 "(text_encoder/ folder, listed in model_index.json; an SDXL refiner has "
                                 "text_encoder_2/ instead); re-download the model.")
    if has_first and not (folder / "tokenizer").is_dir():
        raise ModelNotFoundError(f"{folder} is missing the 'tokenizer' component of a Stable Diffusion model "
                                 "(tokenizer/ folder, listed in model_index.json); re-download the model.")
    if not has_first and not (folder / "tokenizer_2").is_dir():
        raise ModelNotFoundError(f"{folder} is missing the 'tokenizer_2' component of an SDXL refiner (tokenizer_2/ "
                                 "folder, listed in model_index.json); re-download the model.")
    scheduler_config = read_scheduler_config(folder / "scheduler")
    unet_config = read_json(folder / "unet" / "config.json", "the UNet config")
    in_channels = unet_config.get("in_channels", 4)
    check_unet_in_channels(in_channels, str(folder / "unet" / "config.json"), f"in_channels is {in_channels!r}")
    family = detect_family(unet_config, has_first and has_second)
    if family is ModelFamily.SDXL_REFINER and not has_second:
        raise ModelNotFoundError(f"{folder} has an SDXL text-time UNet with only text_encoder/; an SDXL refiner has "
                                 "text_encoder_2/ (OpenCLIP bigG with projection), SDXL base both: re-download the "
                                 "model.")

    # 2. Weights: UNet and VAE (diffusers), text encoders and tokenizers (transformers)
    weight_parts = {"unet": DIFFUSERS_WEIGHTS, "vae": DIFFUSERS_WEIGHTS, "text_encoder": TRANSFORMERS_WEIGHTS}
    if has_second:
        weight_parts["text_encoder_2"] = TRANSFORMERS_WEIGHTS
    check_variant_found(variant, {part: weight_variants(_file_names(folder / part), stems)
                                  for part, stems in weight_parts.items()}, str(folder))
    choice = {"variant": variant, "use_safetensors": use_safetensors}
    unet = _load_diffusers_part("UNet", folder / "unet", unet_dtype, **choice)
    vae = _load_diffusers_part("VAE", folder / "vae", dtype, **choice)
    text_encoders, tokenizers = [], []
    if family is not ModelFamily.SDXL_REFINER:
        text_encoders.append(load_text_encoder(folder / "text_encoder", dtype, **choice))
        tokenizers.append(load_tokenizer(folder / "tokenizer", text_encoders[0]))
    if family.uses_pooled_text:
        text_encoders.append(load_text_encoder(folder / "text_encoder_2", dtype, **choice))
        tokenizer_2 = folder / "tokenizer_2"
        tokenizer_folder = tokenizer_2 if tokenizer_2.is_dir() else folder / "tokenizer"
        tokenizers.append(load_tokenizer(tokenizer_folder, text_encoders[-1]))
    return DiffusionModel(
        unet=unet, vae=vae, text_encoders=text_encoders, tokenizers=tokenizers, scheduler_config=scheduler_config,
        family=family, name=folder.name, source=source,
        model_hash=loaded_weights_hash(component_weights(folder / "unet", DIFFUSERS_WEIGHTS, **choice)[1]),
        recommended=read_recommended(folder),
    )


def read_json(file: Path, what: str) -> dict:
    """A JSON object from `file`; a missing or broken file is an error naming it."""
    if not file.is_file():
        raise ModelNotFoundError(f"{file} ({what}) is missing; re-download the model or copy the file from its source.")
    return read_json_object(file, f"{file} ({what})", "fix it or re-download it.", CheckpointFormatError)


def read_scheduler_config(folder: Path) -> dict:
    """The scheduler config without diffusers' private keys; its prediction type must be one mixkit samples."""
    file = folder / "scheduler_config.json"
    config = {k: v for k, v in read_json(file, "the scheduler config").items() if not k.startswith("_")}
    prediction = config.get("prediction_type", "epsilon")
    if prediction not in PREDICTION_TYPES:
        raise CheckpointFormatError(
            f"{file}: prediction_type {prediction!r} is not one mixkit can sample; use one of {PREDICTION_TYPES} "
            "(SD 1.x/SDXL: 'epsilon'; SD 2.x 768: 'v_prediction')."
        )
    return config


def component_weights(folder: Path, stems: tuple[str, ...], variant: str | None = None,
                      use_safetensors: bool | None = None) -> tuple[str | None, list[Path]]:
    """(variant, weight files) the libraries will load from a component folder (shard indexes left out).

    The rule is `choose_weight_files`'; the hub download (`hub_files`) applies the same rule to a repo's listing,
    so what is downloaded is what loads.
    """
    chosen_variant, chosen = choose_weight_files(_file_names(folder), stems, str(folder), variant, use_safetensors)
    return chosen_variant, [folder / name for name in chosen if not name.endswith(".index.json")]


def _file_names(folder: Path) -> list[str]:
    return [f.name for f in sorted(folder.iterdir()) if f.is_file()] if folder.is_dir() else []


def weight_variants(names: list[str], stems: tuple[str, ...]) -> set[str | None]:
    """The weight variants among a component folder's file `names` (None: the plain weights)."""
    return set(_weight_groups(names, stems))


def check_variant_found(variant: str | None, variants: dict[str, set[str | None]], where: str) -> None:
    """Refuse a `variant` that none of the loaded components has (`variants`: component -> `weight_variants`).

    diffusers' rule (`DiffusionPipeline.from_pretrained` and `download`): components without the variant fall back
    to their plain weights, but when no component has it (a typo, a snapshot without fp16 files) loading is an
    error, not a silent full-precision load whose `Model hash` names another file than the user asked for.
    """
    if variant is None or any(variant in found for found in variants.values()):
        return
    listed = "; ".join(f"{part}: {', '.join(sorted(v or 'plain' for v in found)) or 'no weights'}"
                       for part, found in variants.items())
    others = sorted({v for found in variants.values() for v in found if v is not None})
    hint = f"pass variant={others[0]!r}, or no variant" if others else "drop variant= to load its plain weights"
    raise ValueError(f"variant={variant!r} matches no weight files in {where} ({listed}); {hint}.")


def choose_weight_files(names: list[str], stems: tuple[str, ...], where: str, variant: str | None = None,
                        use_safetensors: bool | None = None) -> tuple[str | None, list[str]]:
    """(variant, file names incl. shard indexes) of one component's weights among the file `names` of its folder.

    Without `variant`, the plain files win; a folder that only holds a variant (`*.fp16.safetensors`, as many hub
    repos ship next to or instead of the full-precision files) is loaded as that variant. With `variant`, its files
    win and a component without them falls back to the plain ones, as diffusers' `DiffusionPipeline.download`
    (`variant_compatible_siblings`); a variant no component has is refused before (`check_variant_found`).
    safetensors win over .bin, as in both libraries; `use_safetensors=True` refuses a component that has only .bin
    files (diffusers' rule). `where` names the folder in errors.
    """
    groups = _weight_groups(names, stems)
    if not groups:
        expected = " or ".join(f"{stem}.safetensors" for stem in stems)
        raise ModelNotFoundError(
            f"{where} holds no weights: expected {expected} (or .bin, sharded, or a variant such as "
            f"{stems[0]}.fp16.safetensors); re-download the {Path(where).name}/ folder."
        )
    chosen = _chosen_variant(groups, variant, where)
    files = groups[chosen]
    safetensors = [name for name in files if _WEIGHT_FILE.match(name)["ext"] == "safetensors"]
    if use_safetensors and not safetensors:
        raise ModelNotFoundError(
            f"{where} has no .safetensors weights{f' for variant {chosen!r}' if chosen else ''} (only {files}) and "
            "use_safetensors=True was asked; drop use_safetensors to load the .bin files (they are loaded with "
            "torch's weights-only loader), or convert them to safetensors."
        )
    return chosen, safetensors or files


def _weight_groups(names: list[str], stems: tuple[str, ...]) -> dict[str | None, list[str]]:
    """A component's weight file names (shards and indexes included) by variant (None: the plain weights)."""
    groups: dict[str | None, list[str]] = {}
    for name in sorted(names):
        match = _WEIGHT_FILE.match(name)
        if match and match["stem"] in stems:
            groups.setdefault(match["variant"], []).append(name)
    return groups


def _chosen_variant(groups: dict, variant: str | None, where: str) -> str | None:
    if variant is not None:
        if variant in groups or None in groups:
            return variant if variant in groups else None
        found = sorted(name for name in groups if name is not None)
        raise ModelNotFoundError(f"{where} has neither variant {variant!r} nor plain weights (it has the variants "
                                 f"{found}); pass variant={found[0]!r}, or no variant to load what it has.")
    return None if None in groups else ("fp16" if "fp16" in groups else sorted(groups)[0])


def check_weight_files(files: list[Path]) -> None:
    """Refuse truncated safetensors and pickles importing code before a library reads them (by content)."""
    from mixkit.io import check_pickle_is_safe, detect_checkpoint_format, read_safetensors_header

    for file in files:
        if detect_checkpoint_format(file) == "safetensors":
            read_safetensors_header(file)  # offsets checked against the file size: names a truncated download
        elif file.name.endswith(".safetensors"):
            raise CheckpointFormatError(
                f"{file} is named .safetensors but holds a {detect_checkpoint_format(file)} checkpoint; "
                "re-download it, or convert the pickle to safetensors in a sandbox you trust."
            )
        else:
            check_pickle_is_safe(file)


def _load_diffusers_part(what: str, folder: Path, dtype, variant: str | None = None, use_safetensors=None):
    from diffusers import AutoencoderKL, UNet2DConditionModel

    cls = UNet2DConditionModel if what == "UNet" else AutoencoderKL
    read_json(folder / "config.json", f"the {what} config")
    variant, files = component_weights(folder, DIFFUSERS_WEIGHTS, variant, use_safetensors)
    check_weight_files(files)
    # low_cpu_mem_usage: modules built on the meta device, then given the file's tensors, instead of a
    # random init plus a copy (2x the weights at peak). It is diffusers' default only when accelerate
    # is installed, so it is asked for explicitly.
    try:
        module, info = cls.from_pretrained(folder.parent, subfolder=folder.name, torch_dtype=dtype, variant=variant,
                                           low_cpu_mem_usage=True, output_loading_info=True)
    except MixkitError:
        raise
    except Exception as error:  # diffusers/safetensors/torch raise many types; the user needs the file named
        raise _library_error(what, folder, files, error) from None
    _check_loading_info(what, folder, files, info)
    return module.eval()


def load_text_encoder(folder: Path, dtype, variant: str | None = None, use_safetensors: bool | None = None):
    """A CLIP text encoder (with projection for SDXL's second one), refusing missing or misshapen tensors."""
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    config = read_json(folder / "config.json", "the text encoder config")
    architectures = config.get("architectures") or ["CLIPTextModel"]
    cls = CLIPTextModelWithProjection if "CLIPTextModelWithProjection" in architectures else CLIPTextModel
    variant, files = component_weights(folder, TRANSFORMERS_WEIGHTS, variant, use_safetensors)
    check_weight_files(files)
    try:
        # ignore_mismatched_sizes only so transformers names the misshapen tensors; they are refused below.
        encoder, info = cls.from_pretrained(folder, torch_dtype=dtype, variant=variant, output_loading_info=True,
                                            ignore_mismatched_sizes=True)
    except MixkitError:
        raise
    except Exception as error:
        raise _library_error("text encoder", folder, files, error) from None
    _check_loading_info("text encoder", folder, files, info)
    return encoder.eval()


def load_tokenizer(folder: Path, text_encoder):
    """The folder's CLIP tokenizer, refused unless its vocabulary is there and fits `text_encoder`.

    Without `tokenizer.json` (or `vocab.json` + `merges.txt`) transformers builds a tokenizer of just its
    special tokens, which maps every word to one id: generation would run and ignore the prompt.
    """
    from transformers import CLIPTokenizer

    has_vocab = (folder / "tokenizer.json").is_file() or all((folder / f).is_file() for f in ("vocab.json", "merges.txt"))
    if not has_vocab:
        present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise ModelNotFoundError(
            f"{folder} has no tokenizer vocabulary (needs tokenizer.json, or vocab.json + merges.txt; found "
            f"{present or 'nothing'}): every prompt would be ignored. Copy the {folder.name}/ folder from the original model."
        )
    try:
        tokenizer = CLIPTokenizer.from_pretrained(folder)
    except Exception as error:  # a corrupt tokenizer.json raises tokenizers' or transformers' own errors
        raise CheckpointFormatError(f"{folder}: the tokenizer could not be read ({_first_line(error)}); "
                                    f"copy the {folder.name}/ folder from the original model.") from None
    check_tokenizer(tokenizer, text_encoder.config.vocab_size, str(folder))
    return tokenizer


def check_tokenizer(tokenizer, encoder_vocab_size: int, where: str) -> None:
    """Refuse a tokenizer whose ids the text encoder cannot embed, or that cannot tell words apart."""
    size = len(tokenizer)
    if size > encoder_vocab_size:
        raise CheckpointFormatError(
            f"{where}: the tokenizer has {size} tokens but its text encoder's vocab_size is {encoder_vocab_size}; "
            "the tokenizer belongs to another model. Use the tokenizer saved with this text encoder."
        )
    probe = tokenizer("a red circle on a blue square", add_special_tokens=False)["input_ids"]
    if len(set(probe)) < 3:  # six different words; a real CLIP vocabulary gives six or more ids
        raise CheckpointFormatError(
            f"{where}: the tokenizer ({size} tokens) maps the words of 'a red circle on a blue square' to {sorted(set(probe))}; "
            "its vocabulary is missing or broken and prompts would be ignored. Use the tokenizer saved with this model."
        )


def _check_loading_info(what: str, folder: Path, files: list[Path], info: dict) -> None:
    """Tensors the config needs but the weights lack (random-initialised by the libraries), or shapes that differ."""
    missing = sorted(k for k in info.get("missing_keys", ()) if not k.endswith("position_ids"))
    mismatched = sorted(_mismatch_text(item) for item in info.get("mismatched_keys", ()))
    problems = []
    if missing:
        problems.append(f"{len(missing)} tensors the config needs are missing (e.g. {missing[:EXAMPLES]})")
    if mismatched:
        problems.append(f"{len(mismatched)} tensors have other shapes than the config says (e.g. {mismatched[:EXAMPLES]})")
    if problems:
        raise CheckpointFormatError(
            f"{_names(files)} does not fit {folder / 'config.json'}: " + "; ".join(problems) + ". The config and the "
            f"weights come from different models, or the weights are incomplete: re-download the {folder.name}/ folder."
        )


def _mismatch_text(item) -> str:
    if isinstance(item, (tuple, list)) and len(item) == 3:
        key, in_file, in_config = item
        return f"{key}: file {list(in_file)} vs config {list(in_config)}"
    return str(item)


def _library_error(what: str, folder: Path, files: list[Path], error: BaseException) -> CheckpointFormatError:
    message = str(error)
    shape = _DIFFUSERS_SHAPE_ERROR.search(re.sub(r"torch\.Size\((\[[^\]]*\])\)", r"\1", message))
    if shape:
        return CheckpointFormatError(
            f"{_names(files)} does not fit {folder / 'config.json'}: tensor {shape['key']} is {shape['got']} in the "
            f"weights but the config needs {shape['expected']}. Fix config.json (e.g. cross_attention_dim, "
            f"block_out_channels) to match the weights, or re-download the {folder.name}/ folder."
        )
    return CheckpointFormatError(
        f"{folder}: the {what} could not be loaded from {_names(files)} ({type(error).__name__}: {_first_line(error)}); "
        f"the files are corrupt or do not belong together. Re-download the {folder.name}/ folder."
    )


def _first_line(error: BaseException) -> str:
    """The informative first line of a library error, without its advice (weights_only=False, ignore sizes)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    keep = [line for line in lines if not re.search(r"weights_only|low_cpu_mem_usage|ignore_mismatched_sizes", line)]
    return (keep or lines or [type(error).__name__])[0][:300]


def _names(files: list[Path]) -> str:
    return ", ".join(str(f) for f in files[:3]) + (f" (+{len(files) - 3} more)" if len(files) > 3 else "")


def loaded_weights_hash(files: list[Path]) -> str | None:
    """A1111's "Model hash" (sha256 of the checkpoint file, first 10 hex digits) of the UNet file that loads.

    A1111 hashes the one file it loaded; in a diffusers folder that is the UNet's chosen weights file (the plain
    one next to an `.fp16` variant, or the variant asked for), not whichever file a glob finds first. A sharded
    UNet has no single file, and no A1111 checkpoint could carry a hash of its parts, so it gets none.
    """
    if len(files) != 1:
        return None
    from mixkit.io.hashing import a1111_model_hash

    return a1111_model_hash(files[0])
