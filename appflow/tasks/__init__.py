"""AppFlow's built-in tasks; importing this package registers them in `appflow.task.TASKS`."""

from appflow.tasks import (  # noqa: F401
    detection, dialog, diffusion, dual_guided, interrogation, labelme, masks, music_generation, qrcode, text_to_video,
    upscale, vision_language,
)
