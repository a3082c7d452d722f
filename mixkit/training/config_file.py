"""Trainer settings from a file (.json or .toml) and kohya's option names, translated to mixkit's.

kohya's users keep their runs in a --config_file TOML whose sections (`[model_arguments]`,
`[training_arguments]`, ...) only group the flat command-line options; kohya flattens them, and so does
this reader. kohya's option names (`network_dim`, `unet_lr`, `train_data_dir` ...) are translated to
mixkit's by `KOHYA_OPTIONS`, one entry per name saying what it becomes, and every translation is logged,
so the config that runs (and `--print-config`) shows mixkit's names. kohya's separate --dataset_config
file (`[general]`, `[[datasets]]`, `[[datasets.subsets]]`) is the run's dataset (`dataset_config` becomes
`dataset`, read by `dataset_config.read_dataset_config`); given as the --config file itself it is refused, saying so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mixkit.io.json_object import parse_json_object
from mixkit.registry import Registry

logger = logging.getLogger(__name__)

DATASET_CONFIG_HELP = (
    "A dataset config is the run's dataset, not its settings: give it as dataset=<file.toml> (or kohya's "
    "dataset_config = \"<file.toml>\" in the --config file), and the run's other settings in the --config file.")


def read_config_file(path: str | Path) -> dict:
    """The settings in a .json or .toml file as one flat dict; TOML tables (kohya's --config_file sections) are
    flattened as kohya's `read_config_from_file` does. A kohya --dataset_config file is refused (it is a dataset)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file {str(path)!r} does not exist.")
    # utf-8-sig: a byte-order mark (Windows PowerShell 5's `Out-File -Encoding utf8`, older Notepad) is dropped, not
    # reported as TOML's "Invalid statement (at line 1, column 1)"
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path} is not valid TOML ({error}).") from None
        return _flatten_sections(data, path)
    return parse_json_object(text, str(path), 'a --config file holds a JSON object of settings, {"setting": value, '
                             "...}, keyed by the trainer's setting names, or is TOML when its name ends in .toml.")


def _flatten_sections(data: dict, path: Path) -> dict:
    if "datasets" in data or "general" in data:
        raise ValueError(f"{path} is a kohya --dataset_config file ([general] / [[datasets]] / [[datasets.subsets]]), "
                         f"not a --config file of run settings. {DATASET_CONFIG_HELP}")
    flat: dict = {}
    for key, value in data.items():
        items = value.items() if isinstance(value, dict) else [(key, value)]
        for name, setting in items:
            if name in flat:
                raise ValueError(f"{path}: setting {name!r} is given twice (in two sections); keep one")
            flat[name] = setting
    return flat


@dataclass(frozen=True)
class KohyaOption:
    """What one kohya option becomes: `translate(value, all settings) -> {mixkit setting: value}`; `replaces` are
    settings of the same file it takes over (kohya's learning_rate under unet_lr)."""

    becomes: str
    translate: Callable[[object, dict], dict]
    replaces: tuple[str, ...] = ()
    # True when it becomes the mixkit setting of the same name (kohya's resolution "512,512" -> resolution 512), so
    # it applies to a trainer that has that setting too; other kohya options never shadow a trainer's own setting.
    keeps_name: bool = False


KOHYA_OPTIONS: Registry[KohyaOption] = Registry("kohya option")


def _rename(kohya: str, mixkit: str) -> None:
    KOHYA_OPTIONS.register(kohya, KohyaOption(mixkit, lambda value, settings: {mixkit: value}))


for _kohya, _mixkit in {
    "pretrained_model_name_or_path": "model", "train_data_dir": "dataset", "reg_data_dir": "class_dataset",
    "network_dim": "rank", "network_alpha": "alpha", "text_encoder_lr": "text_encoder_learning_rate",
    "train_batch_size": "batch_size", "max_train_steps": "max_steps", "lr_scheduler": "lr_schedule",
    "lr_warmup_steps": "warmup_steps", "lr_scheduler_num_cycles": "lr_schedule_num_cycles",
    "lr_scheduler_power": "lr_schedule_power", "enable_bucket": "bucketing", "bucket_reso_steps": "bucket_step",
    "debiased_estimation": "debiased_estimation_loss",
}.items():
    _rename(_kohya, _mixkit)


def _sample_option(kohya: str, mixkit: str, off) -> None:
    """kohya's sample-image switches, whose "off" is None (argparse's default) in configs written from its args."""
    KOHYA_OPTIONS.register(kohya, KohyaOption(mixkit, lambda value, settings: {mixkit: off if value is None else value}))


_sample_option("sample_every_n_steps", "validation_every", 0)
_sample_option("sample_every_n_epochs", "validation_every_epochs", 0)
_sample_option("sample_at_first", "validation_at_start", False)


_rename("unet_lr", "unet_learning_rate")


def _output_dir(value, settings: dict) -> dict:
    # kohya's default output name: "last", or the token string in its textual-inversion trainers
    name = settings.get("output_name") or settings.get("token_string") or "last"
    # kohya's save_model_as picks the suffix; only the textual-inversion trainer takes one other than safetensors
    # (`translate_kohya_options` fills in the trainer's kohya default)
    suffix = str(settings["save_model_as"]).lower()
    return {"output": str(Path(str(value)) / f"{name}.{suffix}")}


KOHYA_OPTIONS.register("output_dir", KohyaOption("output = <output_dir>/<output_name>.safetensors", _output_dir))


def _resolution(value, settings: dict) -> dict:
    """kohya's --resolution "512" or "512,768" (width,height; its prepare_dataset_args splits it so): one side for a
    square, else [width, height]. Other values (numbers, lists) pass as they are, for the config's check."""
    if not isinstance(value, str):
        return {"resolution": value}
    try:
        sides = [int(side) for side in value.split(",")]
    except ValueError:
        sides = []
    if len(sides) not in (1, 2):
        raise ValueError(f"resolution {value!r}: kohya's form is \"<side>\" or \"<width>,<height>\", like \"512\" or "
                         "\"512,768\"")
    return {"resolution": sides[0] if len(set(sides)) == 1 else sides}


KOHYA_OPTIONS.register("resolution", KohyaOption("resolution (\"512,512\" becomes 512, \"512,768\" [512, 768]: width, "
                                                 "height)", _resolution, keeps_name=True))


def _optimizer_type(value, settings: dict) -> dict:
    from mixkit.training.optimizers import OPTIMIZERS

    name = str(value).lower()
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer_type {value!r} has no mixkit equivalent; mixkit's optimizers: "
                         f"{sorted(OPTIMIZERS)}")
    return {"optimizer": name}


KOHYA_OPTIONS.register("optimizer_type", KohyaOption("optimizer (lower case: AdamW8bit -> adamw8bit)", _optimizer_type))


def _network_module(value, settings: dict) -> dict:
    from mixkit.training.lycoris_network_args import LYCORIS_MODULE, lycoris_settings

    if value == LYCORIS_MODULE:
        return lycoris_settings(settings.get("network_args"), settings)
    if value != "networks.lora":
        raise ValueError(f"network_module {value!r}: mixkit trains kohya's networks.lora and LyCORIS's "
                         f"{LYCORIS_MODULE!r} (algo lora / locon); remove network_module or set it to one of them")
    return {}


KOHYA_OPTIONS.register("network_module", KohyaOption(
    "nothing for networks.lora; lycoris.kohya: network (its algo), lycoris_preset, conv_rank / conv_alpha (None: "
    "rank / alpha, LyCORIS's defaults), dora_wd, module_dropout, LoRA+ ratios from network_args", _network_module))

# kohya's --network_args "key=value" entries mixkit knows, and the setting each becomes. kohya's networks/lora.py
# reads LoRA+ from there too (its documented `--network_args "loraplus_lr_ratio=16"`).
NETWORK_ARGS = {"conv_dim": "conv_rank", "conv_alpha": "conv_alpha", "rank_dropout": "rank_dropout",
                "module_dropout": "module_dropout", "loraplus_lr_ratio": "loraplus_lr_ratio",
                "loraplus_unet_lr_ratio": "loraplus_unet_lr_ratio",
                "loraplus_text_encoder_lr_ratio": "loraplus_text_encoder_lr_ratio", "dora_wd": "dora_wd"}
# LyCORIS's switches, written True / False in its documented commands (`--network_args "dora_wd=True"`), which JSON
# does not read; LyCORIS itself takes any text but "false" as true, mixkit refuses what is neither.
BOOLEAN_NETWORK_ARGS = ("dora_wd",)
# kohya's list options (argparse nargs="*"): a command line's list replaces the --config_file's whole list, as
# kohya's read_config_from_file parses the command line over the file's values; entries are never merged.
LIST_OPTIONS = ("network_args", "optimizer_args", "lr_scheduler_args")


def _network_arg_bool(entry, text: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"network_args entry {entry!r}: the value must be True or False")
    return word == "true"


def _network_args(value, settings: dict) -> dict:
    from mixkit.training.lycoris_network_args import LYCORIS_MODULE, lycoris_settings

    if settings.get("network_module") == LYCORIS_MODULE:  # LyCORIS reads its own options from network_args
        return lycoris_settings(value, settings)
    entries = [value] if isinstance(value, str) else list(value)
    out: dict = {}
    for entry in entries:
        key, sep, text = str(entry).partition("=")
        key = key.strip()
        if key in ("algo", "preset"):
            raise ValueError(f"network_args entry {entry!r} is LyCORIS's: set network_module = \"{LYCORIS_MODULE}\" "
                             "to train through its options (kohya's networks.lora has no algo or preset)")
        if not sep or (key not in NETWORK_ARGS and key != "wd_on_output"):
            raise ValueError(f"network_args entry {entry!r}: mixkit knows {sorted(NETWORK_ARGS)} (as key=value); "
                             "remove the others")
        if key == "wd_on_output":
            if _network_arg_bool(entry, text) is not True:
                raise ValueError(f"network_args entry {entry!r}: mixkit's DoRA normalises each output row (LyCORIS's "
                                 "default wd_on_output=True) only; remove the entry")
            continue
        if key in BOOLEAN_NETWORK_ARGS:
            out[NETWORK_ARGS[key]] = _network_arg_bool(entry, text)
            continue
        out[NETWORK_ARGS[key]] = json.loads(text.strip()) if text.strip() else text
    if "conv_rank" in out:
        out["network"] = "locon"  # kohya's conv_dim adds the 3x3 convolutions: mixkit's LoCon
    return out


KOHYA_OPTIONS.register("network_args", KohyaOption("conv_rank / conv_alpha (network='locon'), rank_dropout, "
                                                   "module_dropout, loraplus_lr_ratio, loraplus_unet_lr_ratio, "
                                                   "loraplus_text_encoder_lr_ratio, dora_wd (LyCORIS's DoRA; "
                                                   "wd_on_output=True accepted)", _network_args))
KOHYA_OPTIONS.register("network_train_unet_only", KohyaOption(
    "train_text_encoder = not network_train_unet_only", lambda value, settings: {"train_text_encoder": not value}))
# kohya's train_network.py: train_unet = not network_train_text_encoder_only; the text encoder trains unless
# network_train_unet_only (both true leaves nothing to train, which the config's check refuses).
KOHYA_OPTIONS.register("network_train_text_encoder_only", KohyaOption(
    "train_unet = false and train_text_encoder = true when true (the text encoder's adapters alone)",
    lambda value, settings: {"train_unet": False, "train_text_encoder": True} if value else {}))
KOHYA_OPTIONS.register("v_parameterization", KohyaOption(
    "prediction_type='v_prediction' when true", lambda value, settings: {"prediction_type": "v_prediction"} if value
    else {}))


def _literal_entries(option: str, value, example: str) -> dict:
    """kohya's key=value list options (--optimizer_args ["weight_decay=0.1", "betas=0.9,0.99"], --lr_scheduler_args):
    each value read as kohya's get_optimizer / get_scheduler_fix read it (a Python literal: "0.9,0.99" is a tuple,
    "True" a bool) into a mapping; a mapping (mixkit's own form) passes as it is."""
    import ast

    if isinstance(value, dict):
        return value
    if not isinstance(value, (str, list, tuple)):
        raise ValueError(f"{option} = {value!r}: kohya's form is a list of key=value strings, like [\"{example}\"]")
    out: dict = {}
    # "" is no entries: kohya skips an option of length 0 (kohya_ss GUI configs write lr_scheduler_args = "")
    for entry in ([value] if value.strip() else []) if isinstance(value, str) else list(value or []):
        key, sep, text = str(entry).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} entry {entry!r}: kohya's form is key=value, like {example}")
        try:
            out[key.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
            raise ValueError(f"{option} entry {entry!r}: the value is not a number, True/False or a tuple "
                             "(kohya reads it as a Python literal)") from None
    return out


def _optimizer_args(value, settings: dict) -> dict:
    """kohya's --optimizer_args into mixkit's optimizer_args mapping; an empty list is no setting (trainers without
    the option accept it so)."""
    out = _literal_entries("optimizer_args", value, "weight_decay=0.1")
    return {"optimizer_args": out} if out or isinstance(value, dict) else {}


# keeps_name: mixkit's own setting has kohya's name, and a kohya file's list form must still be translated.
KOHYA_OPTIONS.register("optimizer_args", KohyaOption("optimizer_args (key=value entries become a mapping)",
                                                     _optimizer_args, keeps_name=True))


def _lr_scheduler_args(value, settings: dict) -> dict:
    """kohya's --lr_scheduler_args into lr_schedule_args; an empty list (kohya_ss GUI's "") is no setting."""
    out = _literal_entries("lr_scheduler_args", value, "num_cycles=1")
    return {"lr_schedule_args": out} if out or isinstance(value, dict) else {}


KOHYA_OPTIONS.register("lr_scheduler_args", KohyaOption("lr_schedule_args (key=value entries become a mapping)",
                                                        _lr_scheduler_args))


def _only(option: str, allowed: str, advice: str) -> KohyaOption:
    def translate(value, settings: dict) -> dict:
        if str(value).lower() != allowed:
            raise ValueError(f"{option} {value!r}: {advice}")
        return {}
    return KohyaOption(f"nothing ({allowed} is what mixkit does)", translate)


KOHYA_OPTIONS.register("save_model_as", _only("save_model_as", "safetensors",
                                              "mixkit writes .safetensors only; set save_model_as = 'safetensors'"))
KOHYA_OPTIONS.register("sample_sampler", _only("sample_sampler", "ddim", "sample images are drawn with DDIM only; "
                                               "set sample_sampler = 'ddim' or remove it"))


def _ignored(option: str, why: str) -> KohyaOption:
    """A kohya option that changes how fast or where kohya runs, not what it trains: accepted and logged."""
    def translate(value, settings: dict) -> dict:
        logger.info("kohya option %s=%r has no effect here: %s", option, value, why)
        return {}
    return KohyaOption(f"nothing ({why})", translate)


def _neutral(option: str, neutral: tuple, advice: str) -> KohyaOption:
    """A kohya option accepted at its off value(s), which is what mixkit does; any other value is refused."""
    def translate(value, settings: dict) -> dict:
        if value not in neutral:
            raise ValueError(f"{option}={value!r}: {advice}; set {option} = {neutral[0]!r} or remove it")
        return {}
    return KohyaOption(f"nothing at {neutral[0]!r} (what mixkit does)", translate)


# kohya's speed, memory and logistics switches (train_util.add_training_arguments / add_sd_models_arguments): real
# kohya and kohya_ss GUI configs carry them, and none changes what is trained.
for _option, _why in {
    "v2": "the model family (SD 1.x / 2.x / SDXL) is read from the model itself",
    "xformers": "attention kernels are mixkit's own choice (mixkit.attention)",
    "sdpa": "attention kernels are mixkit's own choice (mixkit.attention)",
    "mem_eff_attn": "attention kernels are mixkit's own choice (mixkit.attention)",
    "max_data_loader_n_workers": "images are read in the training process",
    "persistent_data_loader_workers": "images are read in the training process",
    "lowram": "weights are memory-mapped already", "lowvram": "weights are memory-mapped already",
    "no_half_vae": "the VAE encodes in float32", "log_prefix": "logging names come from the output",
    "save_last_n_epochs": "every epoch file is kept", "save_last_n_steps": "every step file is kept",
    "huggingface_repo_id": "nothing is uploaded", "huggingface_repo_type": "nothing is uploaded",
    "huggingface_path": "nothing is uploaded", "huggingface_token": "nothing is uploaded",
    # sd-lora and ti have their own save_precision (which shadows this); the full fine-tune has none
    "save_precision": "this trainer writes its weights as they trained (save_precision is sd-lora's and ti's)",
    "vae_batch_size": "it only batches kohya's latent caching",
    "log_tracker_name": "logging names come from the output",
    "wandb_run_name": "nothing is logged to Weights & Biases",
}.items():
    KOHYA_OPTIONS.register(_option, _ignored(_option, _why))
for _option, _neutral_values, _advice in (
    ("random_crop", (False,), "mixkit crops images at the centre, as kohya does without random_crop"),
    ("color_aug", (False,), "mixkit has no colour augmentation"),
    ("full_fp16", (False,), "mixkit keeps float32 adapters (mixed_precision sets the compute dtype)"),
    ("full_bf16", (False,), "mixkit keeps float32 adapters (mixed_precision sets the compute dtype)"),
    ("scale_v_pred_loss_like_noise_pred", (False,), "mixkit does not rescale the v-prediction loss"),
    ("save_state", (False,), "mixkit's resumable state is its checkpoint_dir (resume_from)"),
    ("dim_from_weights", (False,), "the rank comes from rank= (network_dim); network_weights must fit it"),
    ("vae", ("", None), "the model's own VAE is used in training"),
    ("output_config", (False,), "kohya then writes its arguments to --config_file and exits without training; "
                                "mixkit's `train --print-config` prints the resolved config"),
    ("save_state_on_train_end", (False,), "mixkit's resumable state is its checkpoint_dir (resume_from)"),
    ("lr_scheduler_type", ("", None), "kohya's lr_scheduler_type names a custom scheduler class; mixkit's schedules "
                                      "are the lr_schedule names"),
    # train_network.py reads it only for --in_json caption datasets; a folder's repeats are in its name.
    ("dataset_repeats", (1,), "kohya repeats only an --in_json metadata dataset that many times (a folder dataset "
                              "ignores it), and mixkit reads repeats from <repeats>_<concept> folder names"),
    ("weighted_captions", (False,), "kohya's weighted_captions reads A1111-style (word:1.2) weights in captions; "
                                    "mixkit encodes captions as plain text"),
    ("caption_dropout_every_n_epochs", (0, None), "kohya's caption_dropout_every_n_epochs empties every caption "
                                                  "in every N-th epoch; mixkit drops captions by caption_dropout_rate "
                                                  "only"),
    ("face_crop_aug_range", ("", None), "kohya's face-centred crop augmentation (face position from the file name) "
                                        "is not implemented; mixkit crops at the centre"),
    ("token_warmup_step", (0, None), "kohya's token warm-up (captions cut to token_warmup_min tags, growing to full "
                                     "length by step N) is not implemented; mixkit trains on whole captions"),
    # kohya's train_db.py option; its LoRA trainer (train_network.py) does not define it, so kohya ignores it there.
    ("stop_text_encoder_training", (0, None), "kohya's train_db.py stops training the text encoder after that many "
                                              "steps (its LoRA trainer, train_network.py, ignores it); mixkit trains "
                                              "the text encoder for the whole run or not at all (train_text_encoder)"),
):
    KOHYA_OPTIONS.register(_option, _neutral(_option, _neutral_values, _advice))


def _token_warmup_min(value, settings: dict) -> dict:
    """kohya's token_warmup_min (default 1) acts only with token_warmup_step > 0, which is refused; its value alone
    changes nothing, and kohya_ss GUI configs carry it."""
    logger.info("kohya option token_warmup_min=%r has no effect here: it acts only with token_warmup_step > 0", value)
    return {}


KOHYA_OPTIONS.register("token_warmup_min", KohyaOption("nothing (acts only with token_warmup_step)", _token_warmup_min))


def _dataset_config(value, settings: dict) -> dict:
    return {"dataset": str(value)}


# train_network.py: with --dataset_config, train_data_dir and reg_data_dir are ignored (with a warning), the
# config's subsets being the dataset; `translate_kohya_options` drops them the same way.
KOHYA_OPTIONS.register("dataset_config", KohyaOption("dataset (the kohya dataset config .toml is the run's dataset; "
                                                     "train_data_dir and reg_data_dir are then ignored, as kohya "
                                                     "ignores them)", _dataset_config))
DATASET_CONFIG_OVERRIDES = ("train_data_dir", "reg_data_dir")


def translate_kohya_options(settings: dict, own_names=frozenset(), context: dict | None = None) -> dict:
    """`settings` with kohya's options (`KOHYA_OPTIONS`) translated to mixkit's settings; other names pass unchanged
    (the caller's unknown-setting error names any it does not know), and so do `own_names`, the trainer's own
    settings (tiny-sd's `vae` is its VAE folder, not kohya's --vae). One setting given two values is refused.
    `context`: the run's other options, from other sources (a --config file's network_module when the command line
    gives network_args), which translations that depend on another option read; `settings` win over it."""
    def is_kohya(key: str) -> bool:
        return key in KOHYA_OPTIONS and (key not in own_names or KOHYA_OPTIONS.get(key).keeps_name)

    if "dataset_config" in settings and is_kohya("dataset_config"):
        ignored = [key for key in DATASET_CONFIG_OVERRIDES if settings.get(key) is not None]
        if ignored:
            logger.warning("kohya option dataset_config is given: %s ignored, as kohya ignores them (the dataset "
                           "config's subsets are the dataset)", ", ".join(ignored))
        settings = {key: value for key, value in settings.items() if key not in DATASET_CONFIG_OVERRIDES}
    translated = {key: value for key, value in settings.items() if not is_kohya(key)}
    replaced = {name for key in settings if is_kohya(key) for name in KOHYA_OPTIONS.get(key).replaces}
    # kohya's --save_model_as default: "pt" in its textual-inversion trainers (train_textual_inversion.py and the
    # SDXL one, the trainers with a token_string), "safetensors" in the others.
    default_format = "pt" if "token_string" in own_names else "safetensors"
    if settings.get("save_model_as") is None and "output_dir" in settings and default_format != "safetensors":
        logger.info("kohya config without save_model_as: %s, the default of kohya's textual-inversion trainers",
                    default_format)
    context = {**(context or {}), **settings, "save_model_as": settings.get("save_model_as") or default_format}
    for key, value in settings.items():
        if not is_kohya(key):
            continue
        option = KOHYA_OPTIONS.get(key)
        for name, new in option.translate(value, context).items():
            given = translated.get(name, settings.get(name, new)) if name not in option.replaces else new
            if name != key and name not in replaced and given != new:
                raise ValueError(f"kohya's {key}={value!r} sets {name}={new!r}, but {name}={given!r} is also "
                                 "given; keep one")
            translated[name] = new
            if (name, new) != (key, value):
                logger.info("kohya option %s=%r -> %s=%r", key, value, name, new)
    return translated


def without_replaced_lists(from_file: dict, from_command_line: dict, own_names=frozenset()) -> dict:
    """The --config file's settings without the kohya list options (`LIST_OPTIONS`) the command line gives again: as
    in kohya, `--network_args "rank_dropout=0.1"` replaces the file's whole network_args list (its conv_dim included),
    it does not add an entry to it. A trainer's own setting of that name is left to the usual override."""
    replaced = [key for key in LIST_OPTIONS if key in from_file and key in from_command_line and key not in own_names]
    for key in replaced:
        logger.info("kohya option %s on the command line replaces the config file's %s=%r (kohya's command line wins "
                    "over its --config_file, list and all)", key, key, from_file[key])
    return {key: value for key, value in from_file.items() if key not in replaced}


KOHYA_DEFAULT_LEARNING_RATE = 2e-6  # train_util.add_optimizer_arguments: --learning_rate default=2.0e-6


def with_kohya_defaults(raw: dict, translated: dict, own_names=frozenset()) -> dict:
    """`translated` plus kohya's defaults where they differ from mixkit's, for a file written for kohya (one that
    uses kohya option names that are not this trainer's own): kohya's LoRA trainer trains the text encoder's
    adapters unless `network_train_unet_only` is set (train_network.py), while mixkit's own default is UNet only, so
    a kohya config without that line would otherwise train a different network than it does under kohya."""
    written_for_kohya = any(key in KOHYA_OPTIONS and key not in own_names for key in raw)
    if written_for_kohya and "train_text_encoder" in own_names and "train_text_encoder" not in translated:
        logger.info("kohya config without network_train_unet_only: train_text_encoder=True (kohya trains the text "
                    "encoder's adapters by default; add network_train_unet_only = true for the UNet only)")
        translated = {**translated, "train_text_encoder": True}
    part_rates = [key for key in ("unet_lr", "text_encoder_lr") if key in raw and key not in own_names]
    if part_rates and "learning_rate" in own_names and "learning_rate" not in translated:
        # learning_rate is then the rate of the part without its own and the file's ss_learning_rate: kohya's default
        # (argparse's 2e-6), not mixkit's 1e-4, or the other part would train 50x faster than under kohya.
        logger.info("kohya config with %s but no learning_rate: learning_rate=%g, kohya's default",
                    " and ".join(part_rates), KOHYA_DEFAULT_LEARNING_RATE)
        translated = {**translated, "learning_rate": KOHYA_DEFAULT_LEARNING_RATE}
    return translated

