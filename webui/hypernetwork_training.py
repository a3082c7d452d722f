"""A1111's hypernetwork routes' fields (`create_hypernetwork`'s and `train_hypernetwork`'s arguments, the
`/sdapi/v1/create/hypernetwork` and `/sdapi/v1/train/hypernetwork` bodies) as mixkit's hypernetwork configs.

Translation only, as `webui.embedding_training` is for embeddings (whose field checks, dataset folder rule, limits,
previews and refusals this reuses: the two routes share most of A1111's fields). The configs
(`mixkit.training.hn_config`) check the values. What differs from embeddings: A1111's stepped learning rates
("5e-5:100, 5e-6:1500") are honoured (the hypernetwork trainer counts them in the file's own steps, as A1111 does),
and the copies saved on the way are `<name>-<step>.pt` in the run folder.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.training.hn_config import HypernetworkCreateConfig, SDHypernetworkConfig
from webui.embedding_training import (A1111_TRAIN_DEFAULTS, FIELD_TYPES, REFUSED_FIELDS, A1111TrainFields,
                                      check_a1111_fields, learning_rate, preview_prompts,
                                      shared_run_settings, training_resolution)

# A1111's train_hypernetwork arguments: train_embedding's, with the hypernetwork's name and save interval in place
# of the embedding's, no save_image_with_stored_embedding, and A1111's hypernetwork learning rate.
_NOT_HYPERNETWORK = ("embedding_name", "save_embedding_every", "save_image_with_stored_embedding")
A1111_HN_TRAIN_DEFAULTS: dict[str, object] = {
    **{key: value for key, value in A1111_TRAIN_DEFAULTS.items() if key not in _NOT_HYPERNETWORK},
    "learn_rate": "0.00001", "save_hypernetwork_every": 0,
}
HN_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **{key: kinds for key, kinds in FIELD_TYPES.items() if key not in _NOT_HYPERNETWORK},
    "hypernetwork_name": (str,), "save_hypernetwork_every": (int,),
    # mixkit's: A1111 reads its save_optimizer_state setting only; left out, the server's option of that name decides
    "save_optimizer_state": (bool,),
}
HN_REQUIRED_FIELDS = ("hypernetwork_name", "data_root", "steps")


def check_hn_train_fields(fields: object) -> A1111TrainFields:
    """The train_hypernetwork fields with A1111's defaults filled in; ValueError/TypeError naming an unknown,
    missing or mistyped one."""
    return check_a1111_fields(fields, route="train_hypernetwork", defaults=A1111_HN_TRAIN_DEFAULTS,
                              types=HN_FIELD_TYPES, required=HN_REQUIRED_FIELDS, refused=REFUSED_FIELDS,
                              missing_hint="name the hypernetwork to train, the dataset folder (below the server's "
                                           "training data folder) and the step to train to")


def create_config(folder: Path, name: object, *, enable_sizes, overwrite_old: bool = False, layer_structure=None,
                  activation_func=None, weight_init=None, add_layer_norm: bool = False, use_dropout: bool = False,
                  dropout_structure=None) -> HypernetworkCreateConfig:
    """A1111's create_hypernetwork arguments as the create config of `<folder>/<name>.pt`, checked. A1111's None
    means its default (layer structure "1, 2, 1", no activation, Normal initialisation); a name A1111 would clean
    of characters is refused instead, so the file is the name the client sent."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must name the new hypernetwork (its file stem, as <hypernet:NAME:1> uses it), got "
                         f"{name!r}")
    if Path(name).name != name:
        raise ValueError(f"name {name!r} must be a file stem without folders, like 'my_style'")
    shape = {"layer_structure": layer_structure, "activation_func": activation_func, "weight_init": weight_init}
    config = HypernetworkCreateConfig(
        output=str(folder / f"{name}.pt"), overwrite=overwrite_old, enable_sizes=enable_sizes,
        add_layer_norm=add_layer_norm, use_dropout=use_dropout, dropout_structure=dropout_structure,
        **{key: value for key, value in shape.items() if value is not None})
    config.check()
    return config


def training_config(fields: A1111TrainFields, *, model: str, dataset: Path, output: Path, hypernetwork: str,
                    start_step: int, save_optimizer_state: bool = False) -> SDHypernetworkConfig:
    """The trainer's settings for A1111's fields: continue the hypernetwork file `hypernetwork` (already trained
    `start_step` steps) up to step `steps`, writing `output` (a file of the run folder, named as the hypernetwork),
    with its `.pt.optim` beside every file written when `save_optimizer_state`."""
    name = fields["hypernetwork_name"]
    steps = fields["steps"]
    if steps <= start_step:
        raise ValueError(f"hypernetwork {name!r} is already trained to step {start_step}; set steps above "
                         f"{start_step} to train it further (A1111 counts a hypernetwork's steps across runs)")
    max_grad_norm = shared_run_settings(fields)
    rate = fields["learn_rate"]
    stepped = isinstance(rate, str) and (":" in rate or "," in rate)
    if stepped:
        _check_stepped_rate(rate, start_step)
    template = _template(fields["template_filename"])
    return SDHypernetworkConfig(
        model=model, dataset=str(dataset), output=str(output), hypernetwork=hypernetwork,
        template_name=fields["template_filename"], resolution=training_resolution(fields),
        batch_size=fields["batch_size"], gradient_accumulation_steps=fields["gradient_step"],
        max_steps=steps - start_step, learning_rate_schedule=rate if stepped else None,
        **({} if stepped else {"learning_rate": learning_rate(rate)}), max_grad_norm=max_grad_norm,
        shuffle_caption=fields["shuffle_tags"], caption_tag_dropout_rate=float(fields["tag_drop_out"]),
        cache_latents=True,  # exact: the cache keeps each image's distribution and the step still samples from it
        save_every_n_steps=fields["save_hypernetwork_every"], validation_every=fields["create_image_every"],
        validation_prompts=preview_prompts(fields, name, template), missing_captions="file_name",
        save_optimizer_state=save_optimizer_state)


def _check_stepped_rate(rate: str, start_step: int) -> None:
    """A1111's stepped learn rate must parse and reach past the file's step (else the run would train nothing)."""
    from mixkit.training.a1111_learn_rate import parse_learn_rate, schedule_end

    try:
        end = schedule_end(parse_learn_rate(rate))
    except ValueError as error:  # the parser names the trainer's setting; the client sent A1111's field
        raise ValueError(str(error).replace("learning_rate_schedule", "learn_rate", 1)) from None
    if end is not None and end <= start_step:
        raise ValueError(f"learn_rate {rate!r} ends at step {end}, and the hypernetwork is already at step "
                         f"{start_step}; extend the schedule (or end it with a rate without a step) to train further")


def _template(template_filename: str) -> tuple[str, ...]:
    from mixkit.training.ti_templates import NAMED_TEMPLATES

    return NAMED_TEMPLATES.get(template_filename)  # an unknown file lists the valid names


def fresh_run_output(run_folder: Path, name: str) -> Path:
    """Where a run writes its final file: `<run folder>/<name>.pt`, or, when an earlier run of the day left one
    there, `<run folder>/run-2/<name>.pt` and so on (the file stem must stay the hypernetwork's name, and the
    trainer starts a new file only where none is)."""
    output = run_folder / f"{name}.pt"
    number = 2
    while output.exists():
        output = run_folder / f"run-{number}" / f"{name}.pt"
        number += 1
    return output
