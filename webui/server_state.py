"""Everything one running server shares between the HTTP API and the UI.

Both front ends call the same methods here, so the UI cannot do anything the API does not
validate, and both use the single generation worker (one job at a time per device).
"""

from __future__ import annotations

import logging
from pathlib import Path

from webui.checkpoints import TRAILING_CHECKSUM, CheckpointCatalog, CheckpointEntry
from webui.config import ServerConfig
from webui.generation_jobs import generation_job, outpaint_job
from webui.model_switch import ModelHolder
from webui.options import MODEL_KEY, PRESET_KEY, ServerOptions
from webui.worker import ANY_OWNER, GenerationWorker, Job

logger = logging.getLogger(__name__)


def check_tag_syntax(field: str, prompt: str) -> None:
    """Refuse a malformed extra-network tag (`<lora:style:abc>`) now, with the pipeline's own parser and message,
    rather than as a job that fails in the queue after the wait."""
    from mixkit.prompts import extract_extra_networks

    try:
        extract_extra_networks(prompt)
    except ValueError as error:
        raise ValueError(f"{field}: {error}; write weights as numbers, e.g. <lora:name:0.8>.") from None


class ServerState:
    def __init__(self, config: ServerConfig, *, holder: ModelHolder | None = None) -> None:
        self.config = config
        self.limits = config.limits
        self.output_dir = Path(config.output_dir).expanduser().resolve()
        self.catalog = CheckpointCatalog(config.models, config.models_dir)
        self._embedding_library = None
        self.refresh_embeddings()  # before any thread starts: a missing folder fails here, naming it
        from webui.vae_catalog import VaeCatalog

        self.vaes = VaeCatalog(config.vae_dir, checkpoints_dir=config.models_dir)  # A1111 lists *.vae.* there too
        # Read before the model loads: the saved preset decides how it is loaded; a broken file fails here.
        self.options = ServerOptions(str(self.output_dir), config.preview_every, limits=config.limits,
                                     settings_file=config.settings_file)
        self.holder = holder or ModelHolder(self.catalog, device=config.device, pipeline_kwargs={
            "lora_dir": config.lora_dir, "embeddings_dir": config.embeddings_dir, "limits": config.limits},
            preset=self.options.get(PRESET_KEY))
        self.worker = GenerationWorker(config.queue_size, preview_every=config.preview_every)
        from webui.ui_tasks import UiTasks

        self.tasks = UiTasks(self.worker)  # UI generations by task id, for a reloaded page (`webui.ui_tasks`)
        self.controlnets = None
        if config.controlnet_dir:
            from webui.controlnet_models import ControlNetModels

            self.controlnets = ControlNetModels(config.controlnet_dir)
        self._flows: dict[str, object] = {}
        self._lora_library = None
        if config.lora_dir:
            from mixkit.lora import LoraLibrary

            self._lora_library = LoraLibrary(config.lora_dir)

    # -- models ------------------------------------------------------------------------------
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
        if self.holder.loaded:
            names.add(self.holder.txt2img().model.model_hash)
        return frozenset(name for name in names if name)

    def running_labels(self):
        """The loaded model's `OptimizationLabels` (its approximations, which a pasted infotext must match); None
        with no model loaded."""
        if not self.holder.loaded:
            return None
        from pipelines.approx.labels import model_labels

        return model_labels(self.holder.txt2img().model)

    def vae_names(self) -> frozenset[str]:
        """The names a request may give the VAE that runs now (`sd_vae`, or an infotext's `VAE`): the setting's
        value ("Automatic", "None", a listed name) and the loaded file's name with and without its extension."""
        names = {self.holder.vae_name}
        if self.holder.loaded:
            loaded = self.holder.txt2img().model.extras.get("vae_name")
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
        `sd_model_checkpoint` as it is.
        """
        entry = self.holder.switch(title, preset)
        self._after_load(title, remember=remember)
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

    def _after_load(self, title: str, *, remember: bool) -> None:
        """What every load of a checkpoint is followed by: the size defaults the user has not chosen follow its
        native size, the chosen `sd_vae` is put on it (A1111 keeps it across switches), and with `remember` its
        title is saved for the next start."""
        self.options.adopt_native_size(self.holder.txt2img().model.native_size)
        if remember:
            self._remember_checkpoint(self.holder.entry.title)
        wanted = self.options.get("sd_vae")
        if wanted != self.holder.vae_name:
            try:
                self.holder.set_vae(wanted, self.vaes.find(wanted))
            except Exception as error:  # the checkpoint is loaded; only the VAE choice falls back
                logger.warning("VAE %r does not fit %s (%s); using the checkpoint's own VAE.", wanted, title, error)
                self.options.apply({"sd_vae": self.holder.vae_name})

    def submit_unload(self) -> Job:
        """Queue A1111's unload-checkpoint: the model's memory is released once running jobs finish; the checkpoint
        stays chosen (`sd_model_checkpoint` keeps naming it) and the next generation or `submit_reload` loads it."""
        return self.worker.submit(lambda control, on_step: self.holder.unload(), "unload checkpoint")

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
        """Queue a VAE swap (`sd_vae`); the name is checked now, the file is loaded in the queue."""
        path = self.vaes.find(name)  # unknown name: fail now, listing the valid ones

        def run(control, on_step):
            self.holder.set_vae(name, path)
            self.options.apply({"sd_vae": name})
            return name

        return self.worker.submit(run, f"load VAE {name}")

    # -- LoRA --------------------------------------------------------------------------------
    @property
    def lora_library(self):
        return self._lora_library

    def lora_names(self, prompts: tuple[str, ...] = ()) -> set[str] | None:
        """Every name a prompt tag may use (relative names, stems, aliases), or None without a folder.

        When a tag in `prompts` names none of them, the folder is scanned again first, as A1111 rescans
        before refusing: a LoRA copied in while the server runs works without a refresh call."""
        if self._lora_library is None:
            return None
        names = self._scanned_lora_names()
        from webui.prompt_guard import extra_network_names

        wanted = {name for prompt in prompts for kind, name in extra_network_names(prompt) if kind != "hypernet"}
        if wanted - names:
            self._lora_library.refresh()
            names = self._scanned_lora_names()
        return names

    def _scanned_lora_names(self) -> set[str]:
        names: set[str] = set()
        for entry in self._lora_library.entries():
            names.update(n for n in (entry.relative_name, entry.name, entry.alias) if n)
        return names

    # -- textual inversion -------------------------------------------------------------------
    @property
    def embedding_library(self):
        """The `--embeddings-dir` files as an `EmbeddingLibrary` (browser and API), or None without a folder."""
        return self._embedding_library

    def refresh_embeddings(self) -> None:
        """Re-scan `--embeddings-dir` (new or removed files); a missing folder raises ModelNotFoundError naming it."""
        if self.config.embeddings_dir:
            from mixkit.prompts import EmbeddingLibrary

            current = self._embedding_library
            self._embedding_library = (current.refreshed() if current is not None
                                       else EmbeddingLibrary(self.config.embeddings_dir))

    # -- prompt styles -----------------------------------------------------------------------
    def styles(self):
        """`--styles-file` read now (A1111 rereads it on refresh; a read is one small CSV), or None without one."""
        if not self.config.styles_file:
            return None
        from mixkit.prompts.styles import StyleLibrary

        return StyleLibrary(self.config.styles_file)

    # -- generation --------------------------------------------------------------------------
    def check_params(self, kind: str, params) -> None:
        """The checks the API applies, for params built elsewhere (the UI): limits, sampler, LoRA tags."""
        from pipelines.params import check_txt2img_params
        from pipelines.samplers import resolve_sampler
        from webui.prompt_guard import check_prompt_networks

        if kind == "img2img":
            from pipelines.img2img import check_img2img_params

            check_img2img_params(params, self.limits, 8)
        else:
            check_txt2img_params(params, self.limits)
        resolve_sampler(params.sampler, params.schedule_type)
        if self.holder.loaded:  # the UI slider goes to 12; a 3-layer text encoder must refuse 4 here, not in the queue
            from mixkit.prompts.encoder import text_encoder_layers

            layers = text_encoder_layers(self.holder.txt2img().model.text_encoders)
            if params.clip_skip > layers:
                raise ValueError(f"clip_skip {params.clip_skip} is more than the loaded model's text encoder has "
                                 f"layers ({layers}); use 1..{layers}")
        # Only the prompt's tags are extra networks: A1111 1.10 parses them out of the prompts alone, so a tag in the
        # negative prompt is text there (the pipeline warns that it is not applied), malformed or not.
        names = self.lora_names((params.prompt,))
        prompts = params.prompt
        for text in [prompts] if isinstance(prompts, str) else prompts:
            check_prompt_networks("prompt", text, names)
            check_tag_syntax("prompt", text)

    def cancel_session(self, session: str) -> int:
        """A UI session ended (its tab closed or reloaded): drop its queued jobs and interrupt its running one,
        except txt2img/img2img generations, which the reloaded page reattaches to by task id (`webui.ui_tasks`)."""
        return self.worker.end_session(session)

    def interrupt_session(self, session: str | None) -> int:
        """The UI's Interrupt: the caller's own jobs only (queued ones are dropped, a running one returns what it
        has); another session's job is never touched. Returns how many jobs were hit."""
        return self.worker.cancel_session(session)

    def skip_session(self, session: str | None) -> bool:
        """The UI's Skip: end the current batch of the caller's running job; False when it has none running.

        A queued job is left alone: A1111 clears the skip flag when a job starts, so a Skip pressed before that
        has no effect there either."""
        return self.worker.skip_session(session)

    def submit_generation(self, kind: str, params, *, save: bool, session: str | None = None,
                          owner: str | None = None, checkpoint: str | None = None,
                          restore_checkpoint: bool = True, keep_on_disconnect: bool = False) -> Job:
        """Queue a txt2img/img2img call with already validated params; raises QueueFullError.

        `checkpoint` (A1111's override_settings.sd_model_checkpoint, any title it accepts) runs the job on that
        checkpoint, and the server's is put back afterwards unless `restore_checkpoint` is false
        (`webui.request_checkpoint`); an unknown title raises ValueError listing the checkpoints.
        `keep_on_disconnect`: the session ending does not cancel it (a UI task a reloaded page reattaches to).
        """
        if kind not in ("txt2img", "img2img"):
            raise ValueError(f"kind must be 'txt2img' or 'img2img', got {kind!r}.")
        entry = self.requested_checkpoint(checkpoint)
        job = generation_job(self, kind, params, save=save, checkpoint=entry, restore_checkpoint=restore_checkpoint)
        return self.worker.submit(job, kind if entry is None else f"{kind} on {entry.title}", session=session,
                                  owner=owner, keep_on_disconnect=keep_on_disconnect)

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

    def submit_outpaint(self, params, sides: dict[str, int], *, save: bool, session: str | None = None,
                        keep_on_disconnect: bool = False) -> Job:
        """Queue an outpaint of `params.init_images[0]` by `sides` (left/right/top/bottom pixels).

        Checked now: the extension, and the img2img limits at the extended size.
        """
        from dataclasses import replace

        from pipelines.outpaint import check_outpaint_inputs

        image = params.init_images[0]
        width, height = check_outpaint_inputs(image, sides["left"], sides["right"], sides["top"], sides["bottom"], 8,
                                              params.mask_blur)
        self.check_params("img2img", replace(params, width=width, height=height))
        return self.worker.submit(outpaint_job(self, params, sides, save=save), "outpaint", session=session,
                                  keep_on_disconnect=keep_on_disconnect)

    # -- AppFlow ------------------------------------------------------------------------------
    def describe_app(self, name: str) -> dict:
        """An app's declared inputs/outputs, with the models this server runs it with."""
        from appflow import describe_app

        description = describe_app(name)  # unknown name -> UnknownNameError listing the apps
        configured = self.config.appflow_models.get(name, {})
        for role, model in description["models"].items():
            model["source"] = configured.get(role, model["default"])
        return description

    def submit_app(self, name: str, inputs: dict, options: dict | None = None, *, session: str | None = None,
                   owner: str | None = None) -> Job:
        """Queue one run of app `name` with decoded inputs; the flow (and its models) is built once per app."""
        description = self.describe_app(name)

        def run(control, on_step):
            from appflow import Appflow

            if name not in self._flows:
                models = {role: model["source"] for role, model in description["models"].items()}
                self._flows[name] = Appflow(app=name, models=models, device=self.config.device or "cpu",
                                            lora_dir=self.config.lora_dir, embeddings_dir=self.config.embeddings_dir)
            return self._flows[name](**inputs, **(options or {}))

        return self.worker.submit(run, f"appflow {name}", session=session, owner=owner)

    def submit_upscale(self, image, scale: float, upscaler: str, *, session: str | None = None) -> Job:
        """Queue an Extras upscale (validated now: upscaler name, scale and output size)."""
        from pipelines.upscale import UPSCALERS, UpscaleLimits, check_upscale, upscale_image

        UPSCALERS.get(upscaler)  # unknown name -> error listing the valid ones
        check_upscale(image.width, image.height, scale, UpscaleLimits())
        return self.worker.submit(lambda control, on_step: upscale_image(image, scale, upscaler=upscaler), "extras",
                                  session=session)

    def current_preview(self, owner=ANY_OWNER):
        """A cheap RGB preview of the running job's latest latents (of `owner`'s job only, when given), or None."""
        latents = self.worker.progress(owner).preview_latents
        if latents is None or latents.shape[1] != 4:  # the cheap preview factors are for 4-channel latents
            return None
        from pipelines.preview import latent_preview

        try:
            sdxl = self.holder.txt2img().model.family.uses_pooled_text
        except RuntimeError:
            return None
        return latent_preview(latents[:1], sdxl=sdxl)[0]

    def options_snapshot(self) -> dict:
        from webui.checkpoints import known_sha256

        values = self.options.snapshot(self.model_title)
        values[PRESET_KEY] = self.holder.preset  # what is applied, not only what was asked for
        # A1111 fills this once the loaded checkpoint's sha256 is known; never hashed here (that is the loader's work).
        values["sd_checkpoint_hash"] = known_sha256(self.holder.entry.source) if self.holder.entry else None
        return values

    def generation_defaults(self):
        """Settings' sampler/scheduler/steps/CFG/size defaults (`webui.generation_defaults.GenerationDefaults`)."""
        return self.options.generation_defaults()

    def close(self) -> None:
        self.worker.close()

