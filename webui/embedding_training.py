"""A1111's Train tab settings (`POST /sdapi/v1/train/embedding`'s fields, `train_embedding`'s arguments) as mixkit's
textual-inversion trainer settings.

Translation only: the trainer (`mixkit.training.ti_trainer`) checks the values. What is decided here is what A1111's
fields mean for it, which fields the server takes at all, and where files may be read and written: a remote client
names a dataset folder *below* the operator's `--training-data-dir`, never a path of its own choosing, and the
run's log folder is always the server's (`<output dir>/textual_inversion/<date>/<name>/`, A1111's layout).

A field A1111 has but this trainer cannot honour is accepted at its "off" value (or where it has no effect, such as
preview settings without previews) and refused otherwise, naming it; an unknown field is refused, naming it.
The field checks and the shared fields' translation serve the hypernetwork routes too (`webui.hypernetwork_training`).
"""

from __future__ import annotations

import datetime
import random
import re
from dataclasses import dataclass
from pathlib import Path

from mixkit.training.ti_config import SDTextualInversionConfig

# A1111's train_embedding arguments and the value each takes when a request leaves it out: A1111's Train tab
# defaults, except the image and embedding saves, off unless asked for (a request is not a UI session), and
# latent_sampling_method, "random" being the one this trainer does.
A1111_TRAIN_DEFAULTS: dict[str, object] = {
    "id_task": "", "learn_rate": "0.005", "batch_size": 1, "gradient_step": 1, "log_directory": "textual_inversion",
    "training_width": 512, "training_height": 512, "varsize": False, "clip_grad_mode": "disabled",
    "clip_grad_value": "0.1", "shuffle_tags": False, "tag_drop_out": 0.0, "latent_sampling_method": "random",
    "use_weight": False, "create_image_every": 0, "save_embedding_every": 0, "template_filename": "style_filewords.txt",
    "save_image_with_stored_embedding": False, "preview_from_txt2img": False, "preview_prompt": "",
    "preview_negative_prompt": "", "preview_steps": 20, "preview_sampler_name": "DDIM",
    "preview_cfg_scale": 7.0, "preview_seed": -1, "preview_width": 512, "preview_height": 512,
}
REQUIRED_FIELDS = ("embedding_name", "data_root", "steps")
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "embedding_name": (str,), "data_root": (str,), "steps": (int,), "id_task": (str,), "learn_rate": (str, int, float),
    "batch_size": (int,), "gradient_step": (int,), "log_directory": (str,), "training_width": (int,),
    "training_height": (int,), "varsize": (bool,), "clip_grad_mode": (str,), "clip_grad_value": (str, int, float),
    "shuffle_tags": (bool,), "tag_drop_out": (int, float), "latent_sampling_method": (str,), "use_weight": (bool,),
    "create_image_every": (int,), "save_embedding_every": (int,), "template_filename": (str,),
    "save_image_with_stored_embedding": (bool,), "preview_from_txt2img": (bool,), "preview_prompt": (str,),
    "preview_negative_prompt": (str,), "preview_steps": (int,), "preview_sampler_name": (str,),
    "preview_cfg_scale": (int, float), "preview_seed": (int,), "preview_width": (int,),
    "preview_height": (int,),
}
# Older A1111 releases name the preview sampler by its index in their sampler list; that list is not this server's.
REFUSED_FIELDS = {"preview_sampler_index": "send preview_sampler_name ('DDIM') instead"}
LOG_DIRECTORY = "textual_inversion"
A_NUMBER = re.compile(r"^\s*[0-9.eE+-]+\s*$")


@dataclass(frozen=True)
class A1111TrainFields:
    """A training request's fields (embedding or hypernetwork): every A1111 field present (defaults filled in),
    types checked."""

    values: dict

    def __getitem__(self, name: str):
        return self.values[name]


def check_train_fields(fields: object) -> A1111TrainFields:
    """The fields with A1111's defaults filled in; ValueError/TypeError naming an unknown, missing or mistyped one."""
    return check_a1111_fields(fields, route="train_embedding", defaults=A1111_TRAIN_DEFAULTS, types=FIELD_TYPES,
                              required=REQUIRED_FIELDS, refused=REFUSED_FIELDS,
                              missing_hint="name the embedding to train, the dataset folder (below the server's "
                                           "training data folder) and the step to train to")


def check_a1111_fields(fields: object, *, route: str, defaults: dict, types: dict, required: tuple[str, ...],
                       refused: dict[str, str], missing_hint: str) -> A1111TrainFields:
    """One A1111 training route's fields (`route`: its function's name) with `defaults` filled in; ValueError or
    TypeError naming an unknown, refused, missing or mistyped field. Shared by the embedding and hypernetwork routes."""
    if not isinstance(fields, dict):
        raise TypeError(f"the request body must be a JSON object of A1111's {route} fields, got "
                        f"{type(fields).__name__}")
    fields = {key: value for key, value in fields.items() if value is not None}  # null: left out, as A1111 reads it
    for key, why in refused.items():
        if key in fields:
            raise ValueError(f"{key} is not supported: {why}")
    unknown = sorted(set(fields) - set(types))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; A1111's {route} takes {', '.join(sorted(types))}")
    missing = [key for key in required if key not in fields]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}: {missing_hint}")
    values = {**defaults, **fields}
    for key, value in values.items():
        kinds = types[key]
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(kind.__name__ for kind in kinds)
            raise TypeError(f"{key} must be {names}, got {value!r}")
    return A1111TrainFields(values)


def learning_rate(value) -> float:
    """A1111's learn_rate: one number (as text or a number). Its stepped schedules ("0.005:100, 1e-3:1000") are
    refused: this trainer's schedules are named ones (`lr_schedule` in `mixkit train ti`)."""
    if isinstance(value, str):
        if ":" in value or "," in value:
            raise ValueError(f"learn_rate {value!r} is not one number; stepped schedules ('rate:step, ...') are not "
                             "supported here, send one rate such as '0.005'")
        number = plain_number(value)
        if number is None:
            raise ValueError(f"learn_rate {value!r} is not a number; send one rate such as '0.005'")
        return number
    return float(value)


def plain_number(text: str) -> float | None:
    """`text` as a float when it is one number in digits (A1111's fields are text boxes), else None."""
    if not A_NUMBER.match(text):
        return None
    try:
        return float(text)
    except ValueError:  # "1.2.3", "--1": the characters of a number, not one
        return None


def resolve_dataset(data_root: str, allowed: str | Path | None) -> Path:
    """The dataset folder `data_root` names below the server's training data folder `allowed` (a relative name, or an
    absolute path inside it); anything that leaves it, symlinks included, is refused, as is a server without one."""
    if allowed is None:
        raise ValueError("this server reads no training data: its operator must start it with --training-data-dir "
                         "FOLDER; data_root then names a folder below that one")
    root = Path(allowed).expanduser().resolve()
    if not data_root.strip():
        raise ValueError(f"data_root is empty; name a folder below the training data folder {str(root)!r}")
    candidate = Path(data_root).expanduser()
    folder = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if folder != root and root not in folder.parents:
        raise ValueError(f"data_root {data_root!r} is outside the server's training data folder; name a folder below "
                         f"{str(root)!r}, e.g. 'my_dataset'")
    if not folder.is_dir():
        raise ValueError(f"data_root {data_root!r} is not a folder below the training data folder {str(root)!r}; "
                         "create it there or check the name")
    return folder


def refuse_unless(condition: bool, field: str, value, why: str) -> None:
    if not condition:
        raise ValueError(f"{field}={value!r} is not supported: {why}")


def preview_prompts(fields: A1111TrainFields, name: str, template: tuple[str, ...]) -> list[str]:
    """The sample-image prompt (kohya's sample-prompt syntax, which `validation_prompts` reads) of a run with
    create_image_every: A1111's txt2img preview settings, or the template's first line with the embedding's name
    (A1111 takes a training caption; this trainer's previews are fixed prompts, so a run's images compare)."""
    if not fields["create_image_every"]:
        return []
    if not fields["preview_from_txt2img"]:
        return [template[0].replace("[name]", name).replace("[filewords]", "").strip(" ,")]
    refuse_unless(fields["preview_sampler_name"].lower() == "ddim", "preview_sampler_name",
                  fields["preview_sampler_name"], "training previews are drawn with DDIM; send 'DDIM'")
    seed = fields["preview_seed"] if fields["preview_seed"] >= 0 else random.randrange(2**32)  # A1111's -1: random
    prompt = fields["preview_prompt"].strip() or name
    options = [f"--w {fields['preview_width']}", f"--h {fields['preview_height']}", f"--s {fields['preview_steps']}",
               f"--l {fields['preview_cfg_scale']}", f"--d {seed}"]
    if fields["preview_negative_prompt"].strip():
        options.insert(0, f"--n {fields['preview_negative_prompt'].strip()}")
    return [" ".join([prompt, *options])]


def training_resolution(fields: A1111TrainFields) -> int | list[int]:
    """The trainer's resolution for A1111's training_width and training_height: one side for a square, else kohya's
    [width, height], each image then trained at that size (the trainer checks both sides, multiples of 8)."""
    width, height = fields["training_width"], fields["training_height"]
    return width if width == height else [width, height]


def shared_run_settings(fields: A1111TrainFields) -> float:
    """The trainer's max_grad_norm (0: off) for the fields the embedding and hypernetwork routes share, refusing
    those of their values this server cannot honour."""
    refuse_unless(not fields["varsize"], "varsize", True,
                  "images are resized to training_width x training_height; send false")
    refuse_unless(not fields["use_weight"], "use_weight", True, "alpha-channel loss weights are not read; send false")
    refuse_unless(fields["latent_sampling_method"] == "random", "latent_sampling_method",
                  fields["latent_sampling_method"], "this trainer draws a new latent from each image's VAE "
                  "distribution at every step, A1111's 'random'; send 'random'")
    refuse_unless(fields["clip_grad_mode"] in ("disabled", "norm"), "clip_grad_mode", fields["clip_grad_mode"],
                  "gradients are clipped by norm only; send 'norm' or 'disabled'")
    refuse_unless(fields["log_directory"] in ("", LOG_DIRECTORY), "log_directory", fields["log_directory"],
                  f"the server writes a run's files to its own output folder; send {LOG_DIRECTORY!r}")
    if fields["clip_grad_mode"] != "norm":
        return 0.0
    value = fields["clip_grad_value"]
    number = plain_number(value) if isinstance(value, str) else float(value)
    refuse_unless(number is not None, "clip_grad_value", value, "send one number (stepped schedules are not "
                  "supported)")
    return number


def training_config(fields: A1111TrainFields, *, model: str, dataset: Path, output: Path, num_vectors: int,
                    weights: str, start_step: int) -> SDTextualInversionConfig:
    """The trainer's settings for A1111's fields: continue the embedding file `weights` (already trained
    `start_step` steps) up to step `steps`, writing `output`."""
    from mixkit.training.ti_templates import NAMED_TEMPLATES

    name = fields["embedding_name"]
    steps = fields["steps"]
    if steps <= start_step:
        raise ValueError(f"embedding {name!r} is already trained to step {start_step}; set steps above {start_step} "
                         "to train it further (A1111 counts an embedding's steps across runs)")
    refuse_unless(not (fields["save_image_with_stored_embedding"] and fields["create_image_every"]),
                  "save_image_with_stored_embedding", True, "previews are not written as embedding PNGs; send false")
    max_grad_norm = shared_run_settings(fields)
    template = NAMED_TEMPLATES.get(fields["template_filename"])  # an unknown file lists the valid names
    return SDTextualInversionConfig(
        model=model, dataset=str(dataset), output=str(output), token_string=name, num_vectors_per_token=num_vectors,
        weights=weights, template_name=fields["template_filename"],
        resolution=training_resolution(fields), batch_size=fields["batch_size"],
        gradient_accumulation_steps=fields["gradient_step"], max_steps=steps - start_step,
        learning_rate=learning_rate(fields["learn_rate"]), max_grad_norm=max_grad_norm,
        shuffle_caption=fields["shuffle_tags"], caption_tag_dropout_rate=float(fields["tag_drop_out"]),
        cache_latents=True,  # exact: the cache keeps each image's distribution and the step still samples from it
        save_every_n_steps=fields["save_embedding_every"], validation_every=fields["create_image_every"],
        validation_prompts=preview_prompts(fields, name, template), missing_captions="file_name")


def check_training_limits(fields: A1111TrainFields, limits) -> None:
    """The server's generation limits (`GenerationLimits`) on what a remote client's run would allocate: the training
    size and batch as an image batch of that size, the preview images as generations. The trainer's own checks
    have no upper bounds, since a local user may train as large as their machine takes."""
    from pipelines.params import SEED_MAX, check_size

    check_size(fields["training_width"], fields["training_height"], 8, limits)
    if not 1 <= fields["batch_size"] <= limits.max_batch_size:
        raise ValueError(f"batch_size must be in [1, {limits.max_batch_size}] on this server, got {fields['batch_size']}")
    if not 1 <= fields["gradient_step"] <= limits.max_batch_count:
        raise ValueError(f"gradient_step must be in [1, {limits.max_batch_count}] on this server, got "
                         f"{fields['gradient_step']}")
    if fields["create_image_every"] and fields["preview_from_txt2img"]:
        check_size(fields["preview_width"], fields["preview_height"], 8, limits)
        if not -1 <= fields["preview_seed"] <= SEED_MAX:  # else the preview fails after the training steps ran
            raise ValueError(f"preview_seed must be -1 (random) or in [0, {SEED_MAX}], got {fields['preview_seed']}")
        if not 1 <= fields["preview_steps"] <= limits.max_steps:
            raise ValueError(f"preview_steps must be in [1, {limits.max_steps}] on this server, got "
                             f"{fields['preview_steps']}")
        if " --" in fields["preview_prompt"] or " --" in fields["preview_negative_prompt"]:
            raise ValueError("preview_prompt and preview_negative_prompt cannot hold ' --' (the sample-prompt "
                             "syntax's option marker); send the size, steps and seed in their own fields")


def run_folder(output_dir: Path, name: str) -> Path:
    """A1111's log folder of a run: `<output dir>/textual_inversion/<YYYY-MM-DD>/<name>/`."""
    if name in (".", ".."):  # a file named "...pt" would name a folder above the run's
        raise ValueError(f"{name!r} cannot name a run folder; rename its file")
    return output_dir / LOG_DIRECTORY / datetime.date.today().isoformat() / name
