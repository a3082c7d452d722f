"""A request's own checkpoint (A1111's `override_settings.sd_model_checkpoint`): loaded for its job, put back after.

The switch, the generation and the restore run inside one job of the generation worker, so no other job runs on
the request's checkpoint or sees a model half-way through a switch, and between jobs `/sdapi/v1/options` names
the model that is loaded. A1111 puts back only the option and reloads the model lazily, at the next job's start;
restoring at once costs a second load per such request, but the next request, the UI and the options never meet
a model other than the one they name. A client that sends the same checkpoint with every request saves both
loads with `override_settings_restore_afterwards: false` (the checkpoint then stays, as in A1111).

The performance preset and the VAE choice are the server's and apply to the request's checkpoint as to any
loaded one. LoRAs do not carry over: each job applies its own prompt's `<lora:...>` tags to the model it runs on,
as A1111 activates networks per job.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from webui.checkpoints import CheckpointEntry

logger = logging.getLogger(__name__)


class CheckpointLoadError(Exception):
    """A job's checkpoint could not be loaded; the server's own checkpoint is unchanged (the message names it)."""


@contextmanager
def checkpoint_for_job(state, entry: CheckpointEntry | None, *, restore: bool = True):
    """Run the body on checkpoint `entry` (None: the server's), then put the server's back when `restore`.

    Call only from the generation worker. An unloaded server checkpoint is loaded again first, as A1111's
    `process_images` does through `reload_model_weights`. A failed load raises CheckpointLoadError before the
    body runs; a failed restore is logged (the images are good) and leaves the request's checkpoint loaded, which
    the options then report.
    """
    holder = state.holder
    if entry is None or entry == holder.entry:
        if holder.unloaded:
            try:
                state.reload_checkpoint()
            except Exception as error:
                raise CheckpointLoadError(f"Could not load the unloaded checkpoint {holder.entry.title!r} again: "
                                          f"{str(error).rstrip('.')}; it stays unloaded.") from error
        yield
        return
    previous, previous_loaded = holder.entry, holder.loaded
    try:
        state.switch_checkpoint(entry.name, remember=not restore)
    except Exception as error:
        unchanged = f"{previous.title!r} is unchanged" if previous else "no checkpoint is loaded"
        raise CheckpointLoadError(f"Could not load checkpoint {entry.title!r} (override_settings."
                                  f"sd_model_checkpoint): {str(error).rstrip('.')}; the server's checkpoint {unchanged}.") from error
    try:
        yield
    finally:
        if restore and previous is not None:
            _put_back(state, previous, previous_loaded)


def _put_back(state, previous: CheckpointEntry, was_loaded: bool) -> None:
    try:
        if was_loaded:
            state.switch_checkpoint(previous.name, remember=False)
        else:
            state.holder.unload(remember=previous)  # it was unloaded: unloaded it stays
    except Exception:
        logger.exception("Could not load checkpoint %r back after a request ran on %r; the latter stays loaded.",
                         previous.title, state.model_title)
