"""The checkpoint, performance preset and VAE a running server has loaded, and the queued jobs that change them.

A mixin of `ServerState` (which sets the attributes declared below), kept apart so the server's
model life cycle (A1111's load, switch, unload and reload of a checkpoint) reads in one place.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from webui.checkpoints import TRAILING_CHECKSUM, CheckpointEntry
from webui.options import MODEL_KEY, PRESET_KEY
from webui.worker import Job

if TYPE_CHECKING:
    from webui.checkpoints import CheckpointCatalog
    from webui.controlnet_models import ControlNetModels
    from webui.model_switch import ModelHolder
    from webui.options import ServerOptions
    from webui.vae_catalog import VaeCatalog
    from webui.worker import GenerationWorker

logger = logging.getLogger(__name__)


class ServerModels:
    catalog: CheckpointCatalog
    controlnets: ControlNetModels | None
    holder: ModelHolder
    options: ServerOptions
    vaes: VaeCatalog
    worker: GenerationWorker

    def load_initial_model(self) -> None:
        """The checkpoint (and VAE) the settings file remembers, else the first of the catalog."""
        titles = self.catalog.titles()
        if not titles or self.holder.loaded:
            return
        title = titles[0]
        remembered = self.options.remembered(MODEL_KEY)
        if remembered:
            try:
                title = self.catalog.find(remembered).title
            except ValueError:
                logger.warning("The remembered checkpoint %r is not in the models folder; starting with %r.",
                               remembered, title)
        self.holder.switch(title)
        self._after_load(title, remember=False)

    def model_aliases(self) -> frozenset[str]:
        """The names a request may give the loaded checkpoint (A1111's ids, and its model hash, which the infotext's
        `Model hash` carries for a folder or the built-in model too)."""
        if self.holder.entry is None:
            return frozenset()
        names = set(self.holder.entry.aliases())
        model = self.holder.loaded_model()
        if model is not None:
            names.add(model.model_hash)
        return frozenset(name for name in names if name)

    def running_labels(self):
        """The loaded model's `OptimizationLabels` (its approximations, which a pasted infotext must match); None
        with no model loaded."""
        model = self.holder.loaded_model()
        if model is None:
            return None
        from pipelines.approx.labels import model_labels

        return model_labels(model)

    def vae_names(self) -> frozenset[str]:
        """The names a request may give the VAE that runs now (`sd_vae`, or an infotext's `VAE`): the setting's
        value ("Automatic", "None", a listed name) and the loaded file's name with and without its extension."""
        names = {self.holder.vae_name}
        model = self.holder.loaded_model()
        if model is not None:
            loaded = model.extras.get("vae_name")
            if loaded:
                names |= {loaded, loaded.rsplit(".", 1)[0]}
        return frozenset(name for name in names if name)

    @property
    def model_title(self) -> str | None:
        return self.holder.entry.title if self.holder.entry else None

    @property
    def preset(self) -> str:
        """The performance preset of the loaded model (or of the next load when none is loaded)."""
        return self.holder.preset

    def submit_model_switch(self, title: str, preset: str | None = None) -> Job:
        """Queue a model switch (and/or a preset change) behind running generations; the job returns the new entry.

        The chosen `sd_vae` is put on the new checkpoint too (A1111 keeps it across switches); if it
        does not fit the new model, the model's own VAE is used and `sd_vae` says "Automatic".
        A preset change is saved as the `performance_preset` option only once the reload worked.
        """
        from webui.model_switch import check_preset_name

        self.catalog.find(title)  # unknown title: fail now, not in the queue
        if preset is not None:
            check_preset_name(preset)  # unknown preset: fail now, listing the presets

        def run(control, on_step):
            return self.switch_checkpoint(title, preset)

        return self.worker.submit(run, f"load model {title}" + (f" ({preset})" if preset else ""))

    def switch_checkpoint(self, title: str, preset: str | None = None, *, remember: bool = True) -> CheckpointEntry:
        """Load checkpoint `title` (with `preset`; None: the current one) now; call only from the generation worker.

        `remember=False` (a request's own checkpoint, put back after its job) keeps the settings file's
        `sd_model_checkpoint` as it is, and its `sd_vae` too when that VAE does not fit the request's checkpoint.
        """
        entry = self.holder.switch(title, preset)
        self._after_load(title, remember=remember, keep_vae_choice=not remember)
        if preset is not None and self.options.get(PRESET_KEY) != self.holder.preset:
            try:
                self.options.apply({PRESET_KEY: self.holder.preset})
            except OSError as error:  # the reload worked; only remembering it for the next start failed
                logger.warning("Preset %r is active but could not be saved to %s: %s", self.holder.preset,
                               self.options.settings_file, error)
        return entry

    def reload_checkpoint(self) -> CheckpointEntry:
        """Load the unloaded checkpoint again (A1111's reload-checkpoint) with its preset and the chosen VAE; call
        only from the generation worker. Nothing happens when it is loaded."""
        if self.holder.loaded:
            return self.holder.entry
        entry = self.holder.reload()
        self._after_load(entry.title, remember=False)
        return entry

    def _after_load(self, title: str, *, remember: bool, keep_vae_choice: bool = False) -> None:
        """What every load of a checkpoint is followed by: the size defaults the user has not chosen follow its
        native size, the ControlNets and IP-Adapters kept from earlier jobs stay only if made for its family (an SD
        1.5 ControlNet cannot run with an SDXL checkpoint; one of the same family is not read again), the chosen
        `sd_vae` is put on it (A1111 keeps it across switches), and with `remember` its title is saved for the next
        start.

        A chosen VAE that does not fit leaves the checkpoint its own VAE, and `sd_vae` then says "Automatic",
        unless `keep_vae_choice`: a request's own checkpoint is loaded for one job, and the server's checkpoint,
        put back after it, must get the user's VAE back."""
        model = self.holder.txt2img().model
        self.options.adopt_native_size(model.native_size)
        if self.controlnets is not None:  # unit models survive a switch when they can run with the new checkpoint
            self.controlnets.keep_for_checkpoint(model.unet.config)
        if remember:
            self._remember_checkpoint(self.holder.entry.title)
        wanted = self.options.get("sd_vae")
        if wanted != self.holder.vae_name:
            try:
                self.holder.set_vae(wanted, self.vaes.find(wanted))
            except Exception as error:  # the checkpoint is loaded; only the VAE choice falls back
                logger.warning("VAE %r does not fit %s (%s); using the checkpoint's own VAE.", wanted, title, error)
                if not keep_vae_choice:
                    self.options.apply({"sd_vae": self.holder.vae_name})

    def submit_unload(self) -> Job:
        """Queue A1111's unload-checkpoint: the model's memory is released once running jobs finish, and so are the
        ControlNets and IP-Adapters (with their image encoders) that units loaded from `--controlnet-dir`; the
        checkpoint stays chosen (`sd_model_checkpoint` keeps naming it) and the next generation or `submit_reload` loads it."""

        def run(control, on_step):
            if self.controlnets is not None:  # before the checkpoint's release: its memory sweep frees theirs too
                self.controlnets.release()
            self.holder.unload()

        return self.worker.submit(run, "unload checkpoint")

    def submit_reload(self) -> Job:
        """Queue A1111's reload-checkpoint: the unloaded checkpoint loads again (nothing happens when it is loaded);
        with none chosen yet, the one the server starts with."""
        if self.holder.entry is None and not self.catalog.titles():
            raise ValueError("There is no checkpoint to load: the models folder is empty; add one and call "
                             "/sdapi/v1/refresh-checkpoints.")

        def run(control, on_step):
            if self.holder.entry is None:
                self.load_initial_model()
                return self.holder.entry
            return self.reload_checkpoint()

        return self.worker.submit(run, "reload checkpoint")

    def _remember_checkpoint(self, title: str) -> None:
        try:
            self.options.apply({MODEL_KEY: title})
        except OSError as error:  # the switch worked; only remembering it for the next start failed
            logger.warning("Checkpoint %r is loaded but could not be saved to %s: %s", title,
                           self.options.settings_file, error)

    def submit_preset_switch(self, preset: str) -> Job | None:
        """Apply another performance preset: reload the current model with it (queued), or, with no model
        loaded, just remember it for the next load (returns None then)."""
        from webui.model_switch import check_preset_name

        check_preset_name(preset)
        if self.model_title is None:
            self.holder.preset = preset
            self.options.apply({PRESET_KEY: preset})
            return None
        return self.submit_model_switch(self.model_title, preset)

    def submit_vae_switch(self, name: str) -> Job:
        """Queue a VAE swap (`sd_vae`); the name is checked now, the file is loaded in the queue. On an unloaded
        checkpoint the choice is only kept: its reload puts it on (`_after_load`)."""
        path = self.vaes.find(name)  # unknown name: fail now, listing the valid ones

        def run(control, on_step):
            if not self.holder.unloaded:
                self.holder.set_vae(name, path)
            self.options.apply({"sd_vae": name})
            return name

        return self.worker.submit(run, f"load VAE {name}")

    def requested_checkpoint(self, title: str | None) -> CheckpointEntry | None:
        """The checkpoint a request's `sd_model_checkpoint` names; None (the server's) for None or "".

        Found as `/sdapi/v1/options` finds it (any of A1111's ids), and the server's checkpoint also by its model
        hash, which an infotext's `Model hash` carries for a diffusers folder too.
        """
        if title is None or title == "":
            return None
        aliases = self.model_aliases()
        if isinstance(title, str) and (title in aliases or TRAILING_CHECKSUM.sub("", title) in aliases):
            return self.holder.entry
        try:
            return self.catalog.find(title)
        except (ValueError, TypeError) as error:
            raise type(error)(f"override_settings.sd_model_checkpoint: {error}") from None
