"""AppFlow apps as a running server offers them: their description with the models configured for this server,
and queued runs that build each app's flow (and load its models) once.

A mixin of `ServerState` (which sets the attributes declared below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webui.config import ServerConfig
    from webui.worker import GenerationWorker, Job


class ServerApps:
    config: ServerConfig
    worker: GenerationWorker
    _flows: dict[str, object]

    def describe_app(self, name: str) -> dict:
        """An app's declared inputs/outputs, with the models this server runs it with."""
        from appflow import describe_app

        description = describe_app(name)  # unknown name -> UnknownNameError listing the apps
        configured = self.config.appflow_models.get(name, {})
        for role, model in description["models"].items():
            model["source"] = configured.get(role, model["default"])
        return description

    def release_app(self, name: str) -> int:
        """Drop app `name`'s models from AppFlow's process-wide cache (its flow stays; its next run loads them again,
        as does any other flow that shared them); returns how many were dropped, 0 when the app never ran."""
        flow = self._flows.get(name)
        return 0 if flow is None else flow.release()

    def submit_app(self, name: str, inputs: dict, options: dict | None = None, *, session: str | None = None,
                   owner: str | None = None, keep_on_disconnect: bool = False) -> Job:
        """Queue one run of app `name` with decoded inputs; the flow (and its models) is built once per app.
        `keep_on_disconnect`: the AppFlow tab's run goes on when its page goes away, for a reloaded page to follow.
        The job's result is the app's `AppResult`; an interrupted run's (`interrupted` set) holds what its finished
        steps made, as A1111's Interrupt leaves the finished images of a batch, rather than failing the job."""
        self.describe_app(name)  # an unknown app fails here, not in the queue

        def run(control, on_step):
            # the worker's step callback and Interrupt reach the app's SD steps: /sdapi/v1/progress and the AppFlow
            # tab show their steps and ETA, and Interrupt stops one at its next step
            from appflow import AppInterrupted

            try:
                return self.run_app(name, inputs, options, callback=on_step, control=control)
            except AppInterrupted as interrupted:  # not a failure: what the finished steps made, marked interrupted
                return interrupted.partial

        return self.worker.submit(run, f"appflow {name}", session=session, owner=owner,
                                  keep_on_disconnect=keep_on_disconnect)

    def run_app(self, name: str, inputs: dict, options: dict | None = None, callback=None, control=None) -> dict:
        """Run app `name` now, in the calling (worker) thread; the flow (and its models) is built once per app.
        `callback` / `control`: the worker's step callback and Interrupt, handed to the app's SD steps."""
        from appflow import Appflow

        if name not in self._flows:
            models = {role: model["source"] for role, model in self.describe_app(name)["models"].items()}
            self._flows[name] = Appflow(app=name, models=models, device=self.config.device or "cpu",
                                        lora_dir=self.config.lora_dir, embeddings_dir=self.config.embeddings_dir,
                                        hypernetwork_dir=self.config.hypernetwork_dir)
        return self._flows[name](**inputs, **(options or {}), callback=callback, control=control)
