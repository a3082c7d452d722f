"""Creating and training textual-inversion embeddings on the server's loaded model, for the API and the Train tab.

Training runs as a job of the one generation worker, so it never overlaps a generation, a model switch or another
training on that model, and `/sdapi/v1/progress` and Interrupt treat it as they treat a generation. The trainer runs
on the loaded model itself (it comes back unchanged: the vectors are hooked in, never written into the model), and
writes its files into the run's log folder; the finished embedding is then copied over the embeddings-folder file in
one atomic rename, so a prompt never reads half a file and an interrupted run leaves the last complete one.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from pipelines.control import StepProgress
from webui.model_switch import EXACT_PRESET
from webui.request_checkpoint import checkpoint_for_job
from webui.worker import Job

logger = logging.getLogger(__name__)


@dataclass
class TrainedFile:
    """What a training job (embedding or hypernetwork) returns: the file in the server's folder, the step it holds,
    and the trainer's result (losses, intermediate files, whether it was interrupted; `output` None: interrupted
    before its first step, the file is as it was)."""

    filename: Path
    step: int
    result: object

    @property
    def written(self) -> bool:
        return self.result.output is not None


def trainable_model(state):
    """The loaded model, if training may use it: a performance preset other than "exact" changes the model
    (fused, cast, compiled or int8 modules) in ways the trainer's gradients cannot go through."""
    if state.holder.unloaded:
        raise ValueError(f"checkpoint {state.model_title!r} is unloaded; load it again (POST "
                         "/sdapi/v1/reload-checkpoint, or generate once), then train")
    if not state.holder.loaded:
        raise ValueError("no model is loaded; load a checkpoint (sd_model_checkpoint) first")
    if state.holder.preset != EXACT_PRESET:
        raise ValueError(f"the loaded model runs with performance preset {state.holder.preset!r}, which training "
                         f"cannot use; switch to {EXACT_PRESET!r} (Settings, or the performance_preset option), then "
                         "train")
    return state.holder.txt2img().model


def _embeddings_folder(state) -> Path:
    if not state.config.embeddings_dir:
        raise ValueError("this server has no embeddings folder; start it with --embeddings-dir FOLDER to create and "
                         "train embeddings")
    return Path(state.config.embeddings_dir)


def create_embedding(state, name: str, *, num_vectors_per_token: int = 1, init_text: str = "*",
                     overwrite_old: bool = False) -> Path:
    """A1111's Create embedding: write `<embeddings dir>/<name>.pt` from the loaded model's vectors of `init_text`.
    Runs at once, not queued: it only reads the model's token table, which nothing on the worker changes."""
    from mixkit.training.ti_create import create_embedding as create

    from mixkit.training.ti_create import embedding_files
    from webui.training_targets import training_targets

    folder = _embeddings_folder(state)
    model = trainable_model(state)
    # a training job of the file would replace what this writes when it ends (`webui.training_targets`)
    replaced = embedding_files(folder, name) if isinstance(name, str) and name and Path(name).name == name else []
    with training_targets(state).writing([*replaced, folder / f"{name}.pt"], f"cannot create embedding {name!r}"):
        path = create(model, folder, name, num_vectors_per_token=num_vectors_per_token, init_text=init_text,
                      overwrite_old=overwrite_old, checkpoint_name=state.holder.entry.model_name)
    state.refresh_embeddings()
    return path


def copy_into_place(source: Path, target: Path) -> None:
    """`target` replaced by a copy of `source` in one rename: readers see the old file or the new one."""
    from mixkit.io.atomic import atomic_output_path

    with atomic_output_path(target) as temp:
        shutil.copyfile(source, temp)


def submit_embedding_training(state, fields: dict, *, session: str | None = None, owner: str | None = None,
                              keep_on_disconnect: bool = False) -> Job:
    """Check A1111's train_embedding fields completely (ValueError/TypeError naming the field), then queue the run
    (`keep_on_disconnect`: the Train tab's run goes on when its page goes away, for a reloaded page to follow)."""
    from mixkit.prompts.embeddings import fit_problem
    from mixkit.training.dataset_scan import scan_dataset
    from mixkit.training.ti_export import check_embedding_output
    from mixkit.training.ti_trainer import train_textual_inversion
    from webui.embedding_list import encoder_widths
    from webui.embedding_training import (check_train_fields, check_training_limits, resolve_dataset, run_folder,
                                          training_config)

    # 1. Fields, folders and the embedding, before anything is queued.
    checked = check_train_fields(fields)
    check_training_limits(checked, state.limits)
    folder = _embeddings_folder(state)
    model = trainable_model(state)
    state.refresh_embeddings()
    library = state.embedding_library
    name = checked["embedding_name"]
    if name not in library.file_names():
        raise ValueError(f"unknown embedding {name!r}; create it first (POST /sdapi/v1/create/embedding) or choose "
                         f"one of: {', '.join(library.names()) or '(none)'}")
    embedding = library.get(name)
    problem = fit_problem(embedding, encoder_widths(model))
    if problem is not None:
        raise ValueError(f"embedding {name!r} cannot be trained on the loaded model: {problem}")
    target = Path(embedding.path)
    if folder.resolve() not in target.resolve().parents:
        raise ValueError(f"embedding {name!r} is not a file of the embeddings folder; it cannot be trained here")
    dataset = resolve_dataset(checked["data_root"], state.config.training_data_dir)
    start_step = int(embedding.step or 0)
    output = run_folder(state.output_dir, name) / target.name
    config = training_config(checked, model=state.holder.entry.source, dataset=dataset, output=output,
                             num_vectors=embedding.num_vectors, weights=str(target), start_step=start_step)
    config.check()
    check_embedding_output(config.output)
    scan_dataset(config)  # an empty or unreadable dataset fails now, naming it, not in the queue

    # 2. The run, on the worker.
    def run(control, on_step) -> TrainedFile:
        report = step_reporter(control, on_step)
        check_model_unchanged(state, config.model, name)
        state.refresh_embeddings()
        now = state.embedding_library.get(name) if name in state.embedding_library.file_names() else None
        if now is None or int(now.step or 0) != start_step:
            # another run (or a Create with overwrite) changed the file since this one was checked: continuing it
            # would count this run's steps from the step it was checked at
            raise ValueError(f"embedding {name!r} was {'removed' if now is None else f'trained to step {now.step}'} "
                             "while this run waited in the queue; send the request again to continue it from there")
        # an unload queued after this request was checked: the model comes back, as for a generation
        with checkpoint_for_job(state, None):
            return train(control, report)

    def train(control, report) -> TrainedFile:
        result = train_textual_inversion(config, model=state.holder.txt2img().model,
                                         should_stop=lambda: control.interrupted, on_step=report,
                                         step_offset=start_step)
        if result.output is None:
            return TrainedFile(target, start_step, result)
        copy_into_place(Path(result.output), target)
        state.refresh_embeddings()
        logger.info("Trained embedding %r to step %d%s: %s", name, start_step + result.steps,
                    " (interrupted)" if result.interrupted else "", target)
        return TrainedFile(target, start_step + result.steps, result)

    from webui.training_targets import training_targets

    with training_targets(state).reserving(target, f"cannot train embedding {name!r}") as reservation:
        reservation.job = state.worker.submit(run, f"train embedding {name}", session=session, owner=owner,
                                              keep_on_disconnect=keep_on_disconnect)
    return reservation.job


def step_reporter(control, on_step):
    """A trainer's `on_step(step, max_steps, loss)` as the worker's progress (one batch a step, no preview latents)."""
    def report(step: int, max_steps: int, loss: float) -> None:
        on_step(StepProgress(step=step, total_steps=max_steps, batch_index=0, batch_count=1, latents=None,
                             control=control))

    return report


def check_model_unchanged(state, model_source, name: str) -> None:
    """A queued training runs on the model it was checked against: refused if another was loaded (or the preset
    changed) while it waited."""
    if state.holder.entry is None or state.holder.entry.source != model_source or state.holder.preset != EXACT_PRESET:
        raise ValueError(f"the loaded model changed while the training of {name!r} waited in the queue; send the "
                         "request again for the model now loaded")
