"""Everything one running server shares between the HTTP API and the UI.

Both front ends call the same methods here, so the UI cannot do anything the API does not
validate, and both use the single generation worker (one job at a time per device).
"""

from __future__ import annotations

import threading
from pathlib import Path

from webui.checkpoints import CheckpointCatalog
from webui.config import ServerConfig
from webui.model_switch import ModelHolder
from webui.options import PRESET_KEY, ServerOptions
from webui.server_apps import ServerApps
from webui.server_jobs import ServerJobs
from webui.server_models import ServerModels
from webui.server_prompt_libraries import PromptLibraries
from webui.worker import GenerationWorker


class ServerState(ServerModels, PromptLibraries, ServerJobs, ServerApps):
    """One server's models, libraries, options and generation worker; the methods live in the mixins by subject."""

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
        from webui.upscaler_models import register_server_upscalers

        # every file of --esrgan-models-path / --realesrgan-models-path / --swinir-models-path / --dat-models-path /
        # --scunet-models-path becomes an upscaler (refusals are logged)
        self._upscaler_lock = threading.Lock()
        self.upscaler_scan = register_server_upscalers(config, self.options.upscaler_tiling(),
                                                       compile_swinir=self.options.get("SWIN_torch_compile"))
        from webui.face_restorer_models import register_server_face_restorers

        self.face_restorers = register_server_face_restorers(config)  # --gfpgan/--codeformer-models-path
        self.holder = holder or ModelHolder(self.catalog, device=config.device, pipeline_kwargs={
            "lora_dir": config.lora_dir, "embeddings_dir": config.embeddings_dir, "limits": config.limits,
            "hypernetwork_dir": config.hypernetwork_dir},
            preset=self.options.get(PRESET_KEY))
        self.worker = GenerationWorker(config.queue_size, preview_every=config.preview_every)
        from webui.ui_tasks import UiTasks

        self.tasks = UiTasks(self.worker)  # UI generations by task id, for a reloaded page (`webui.ui_tasks`)
        self.controlnets = None
        if config.controlnet_dir:
            from webui.controlnet_models import ControlNetModels

            from pipelines.unit_model_cache import CACHE_SIZE_KEY

            self.controlnets = ControlNetModels(config.controlnet_dir, cache_size=self.options.get(CACHE_SIZE_KEY))
            # a lowered size evicts at once (models the running job uses leave when it ends)
            self.options.watch(CACHE_SIZE_KEY, self.controlnets.cache.resize)
        self._flows: dict[str, object] = {}
        from webui.interrogation_captioner import InterrogationCaptioner

        # Interrogate CLIP's caption app, its models dropped after each caption unless kept in memory
        self.captioner = InterrogationCaptioner(self)
        from mixkit.interrogate import ClipInterrogator

        # Interrogate CLIP's word-list ranker; its CLIP loads on the first interrogation (`webui.api_interrogate`)
        self.interrogator = ClipInterrogator(config.interrogate_clip_model, config.interrogate_categories_dir,
                                             device=config.device or "cpu")
        self.deepbooru = None  # Interrogate DeepBooru's tagger (`--deepdanbooru-models-path`), loaded on first use
        if config.deepdanbooru_models_path:
            from mixkit.interrogate import shared_deepbooru_model

            self.deepbooru = shared_deepbooru_model(config.deepdanbooru_models_path, device=config.device or "cpu")
        self._hypernetwork_library = None
        if config.hypernetwork_dir:
            from mixkit.hypernetworks import HypernetworkLibrary

            self._hypernetwork_library = HypernetworkLibrary(config.hypernetwork_dir)
        self._lora_library = None
        if config.lora_dir:
            from mixkit.lora import LoraLibrary

            self._lora_library = LoraLibrary(config.lora_dir)

    def refresh_upscalers(self):
        """Scan the upscaler folders again (A1111 rescans them when its UI reloads): files added since are registered,
        removed or now unreadable ones dropped (the loaded network freed with its file), unchanged ones not re-read.
        Returns the `UpscalerScan`; a folder that went missing raises and changes nothing."""
        from webui.upscaler_models import register_server_upscalers

        with self._upscaler_lock:  # two refreshes at once would each unregister what the other registered
            self.upscaler_scan = register_server_upscalers(
                self.config, self.options.upscaler_tiling(), compile_swinir=self.options.get("SWIN_torch_compile"),
                previous=self.upscaler_scan)
            return self.upscaler_scan

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
        from webui.upscaler_models import unregister_server_upscalers

        unregister_server_upscalers(self.upscaler_scan)  # the registry is the process's; a next server starts clean
        from webui.face_restorer_models import unregister_server_face_restorers

        unregister_server_face_restorers(self.face_restorers)
