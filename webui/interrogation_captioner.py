"""`InterrogationCaptioner`: Interrogate CLIP's caption model (the server's `image2text_generation` app), held between
uses as the CLIP and DeepBooru models are (`mixkit.interrogate.holding`).

Why: the app's flow keeps its models in AppFlow's process-wide cache, so with Settings > Interrogate's "keep models in
memory" off (A1111's default, after which A1111 sends BLIP to RAM at the end of each interrogation) the caption model
still stayed loaded for the life of the server. Each caption now ends as the CLIP's use does: its models are dropped
from the cache unless kept, or at the end of a job that holds them (Loopback's loops, the Extras tab's Caption over a
batch), and `release()` drops them when the setting is turned off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mixkit.interrogate.holding import HeldBetweenUses

if TYPE_CHECKING:
    from webui.server_apps import ServerApps

CAPTION_APP = "image2text_generation"


class InterrogationCaptioner(HeldBetweenUses):
    """Captions with app `CAPTION_APP` through the server's `apps.run_app`; `apps.release_app` drops its models
    (`webui.server_apps.ServerApps`, looked up at each call)."""

    def __init__(self, apps: ServerApps) -> None:
        self._apps = apps
        self._init_holds()

    def caption(self, image, options: dict, keep: bool) -> str:
        """The app's caption of one PIL image with the captioning `options`; its models are dropped afterwards unless
        `keep` (Settings > Interrogate's keep-in-memory) or a `held()` block is open."""
        with self._lock:
            try:
                return str(self._apps.run_app(CAPTION_APP, {"image": image}, options)["text"])
            finally:
                self._after_use(keep)

    def _drop(self) -> None:
        self._apps.release_app(CAPTION_APP)
