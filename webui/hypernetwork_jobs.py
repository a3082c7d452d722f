"""Creating and training A1111 hypernetworks in the server's `--hypernetwork-dir`, for the API and the Train tab.

As `webui.embedding_jobs` does for embeddings (whose model and file handling this reuses): training is a job of the
one generation worker (progress and Interrupt as for a generation), runs on the loaded model (it comes back
unchanged: the MLPs are hooked onto the attention, never written into it), writes its files into the run's log
folder, and the finished file then replaces the hypernetwork-folder file in one atomic rename (with its `.pt.optim`
when A1111's `save_optimizer_state` is on). The folder is scanned on every listing, so a new or trained file is listed
(and usable in `<hypernet:NAME:1>`) at once. While a training job of a file waits or runs, a Create overwriting it or
a second training of it is refused (`webui.training_targets`): the job's result would replace the one or the other.
"""

from __future__ import annotations

import logging
from pathlib import Path

from webui.embedding_jobs import (TrainedFile, check_model_unchanged, copy_into_place, step_reporter,
                                  trainable_model)
from webui.request_checkpoint import checkpoint_for_job
from webui.training_targets import training_targets
from webui.worker import Job

logger = logging.getLogger(__name__)


def hypernetwork_folder(state) -> Path:
    """The server's `--hypernetwork-dir`, where created and trained files land."""
    if state.hypernetwork_library is None:
        raise ValueError("this server has no hypernetwork folder; start it with --hypernetwork-dir FOLDER to create "
                         "and train hypernetworks")
    return state.hypernetwork_library.folder


def create_hypernetwork(state, name: str, **shape) -> Path:
    """A1111's Create hypernetwork: write `<hypernetwork dir>/<name>.pt`, untrained (step 0), from A1111's
    create_hypernetwork arguments (`shape`: enable_sizes, overwrite_old, layer_structure, ...). Runs at once, not
    queued: it reads no model. A refused argument writes nothing."""
    from mixkit.training.hn_trainer import create_hypernetwork as create
    from webui.hypernetwork_training import create_config

    config = create_config(hypernetwork_folder(state), name, **shape)
    with training_targets(state).writing([Path(config.output)], f"cannot create hypernetwork {name!r}"):
        config.check()  # the file may have appeared since: checked again where no training can start
        return Path(create(config).output)


def submit_hypernetwork_training(state, fields: dict, *, session: str | None = None, owner: str | None = None,
                                 keep_on_disconnect: bool = False) -> Job:
    """Check A1111's train_hypernetwork fields completely (ValueError/TypeError naming the field), then queue the
    run (`keep_on_disconnect`: the Train tab's run goes on when its page goes away)."""
    from mixkit.errors import ModelNotFoundError
    from mixkit.hypernetworks.create import TrainableHypernetwork
    from mixkit.training.dataset_scan import scan_dataset
    from mixkit.training.hn_optimizer_state import optimizer_state_path, read_optimizer_state
    from mixkit.training.hn_trainer import attention_context_widths, optimizer_class, train_hypernetwork
    from webui.embedding_training import check_training_limits, resolve_dataset, run_folder
    from webui.hypernetwork_training import check_hn_train_fields, fresh_run_output, training_config

    # 1. Fields, folders, the hypernetwork and its fit to the loaded model, before anything is queued.
    checked = check_hn_train_fields(fields)
    check_training_limits(checked, state.limits)
    folder = hypernetwork_folder(state)
    model = trainable_model(state)
    name = checked["hypernetwork_name"]
    try:
        target = state.hypernetwork_library.resolve(name)
    except ModelNotFoundError as error:
        raise ValueError(f"unknown hypernetwork {name!r}; create it first (POST /sdapi/v1/create/hypernetwork). "
                         f"{error}") from None
    if folder.resolve() not in target.resolve().parents:
        raise ValueError(f"hypernetwork {name!r} is not a file of the hypernetwork folder; it cannot be trained here")
    start = TrainableHypernetwork.from_file(target)  # a broken file is refused now, naming its problem
    widths = attention_context_widths(model.unet)
    if not set(start.widths) & set(widths):
        raise ValueError(f"hypernetwork {name!r} has MLPs for context widths {start.widths}, none of the loaded "
                         f"model's attention widths {widths}: it would train nothing; create one with enable_sizes "
                         f"among {widths}")
    start_step = start.step
    dataset = resolve_dataset(checked["data_root"], state.config.training_data_dir)
    output = fresh_run_output(run_folder(state.output_dir, name), name)
    config = training_config(checked, model=state.holder.entry.source, dataset=dataset, output=output,
                             hypernetwork=str(target), start_step=start_step,
                             save_optimizer_state=save_optimizer_state(state, checked))
    config.check()
    read_optimizer_state(target, optimizer_class(config))  # a foreign or broken .optim is refused now
    scan_dataset(config)  # an empty or unreadable dataset fails now, naming it, not in the queue

    # 2. The run, on the worker.
    def run(control, on_step) -> TrainedFile:
        report = step_reporter(control, on_step)
        check_model_unchanged(state, config.model, name)
        now = TrainableHypernetwork.from_file(target).step if target.is_file() else None
        if now != start_step:
            # another run (or a Create with overwrite_old) changed the file since this one was checked: continuing it
            # would count this run's steps from the step it was checked at
            raise ValueError(f"hypernetwork {name!r} was {'removed' if now is None else f'trained to step {now}'} "
                             "while this run waited in the queue; send the request again to continue it from there")
        with checkpoint_for_job(state, None):  # an unload queued after the check: the model comes back
            result = train_hypernetwork(config, model=state.holder.txt2img().model,
                                        should_stop=lambda: control.interrupted, on_step=report)
        if result.output is None:
            return TrainedFile(target, start_step, result)
        copy_into_place(Path(result.output), target)
        if config.save_optimizer_state:  # after the .pt: its hash ties the two, a reader of the old pair skips it
            copy_into_place(optimizer_state_path(result.output), optimizer_state_path(target))
        logger.info("Trained hypernetwork %r to step %d%s: %s", name, start_step + result.steps,
                    " (interrupted)" if result.interrupted else "", target)
        return TrainedFile(target, start_step + result.steps, result)

    with training_targets(state).reserving(target, f"cannot train hypernetwork {name!r}") as reservation:
        reservation.job = state.worker.submit(run, f"train hypernetwork {name}", session=session, owner=owner,
                                              keep_on_disconnect=keep_on_disconnect)
    return reservation.job


def save_optimizer_state(state, fields) -> bool:
    """A1111's `save_optimizer_state`: the request's field when it sends one (mixkit's; the Train tab's checkbox),
    else the server's option of that name (A1111's Settings > Training, off by default)."""
    sent = fields.values.get("save_optimizer_state")
    return bool(state.options.get("save_optimizer_state")) if sent is None else sent
