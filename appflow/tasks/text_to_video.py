"""Text to video (PaddleMIX's `text_to_video_generation`): ModelScope's damo-vilab/text-to-video-ms-1.7b by default.

The model is diffusers' `TextToVideoSDPipeline` (UNet3D + SD VAE + CLIP text encoder), run by
`pipelines.text_to_video.TextToVideo` with the SD apps' seed, sampler, progress and Interrupt conventions.
"""

from __future__ import annotations

from typing import Any

from appflow.model_kinds import ModelKind, register_model_kind
from appflow.option_specs import OptionSpec, sampler_choices, schedule_choices
from appflow.progress import pipeline_hooks
from appflow.task import Port, Task, register_task
from appflow.tasks.diffusion import GENERATION_ALIASES, one_call_at_a_time
from appflow.video import Video

DEFAULT_TEXT_TO_VIDEO = "damo-vilab/text-to-video-ms-1.7b"  # PaddleMIX's default (applications/text2video)


def _load_text_to_video(source: str, device: str, dtype: Any):
    from pipelines.text_to_video import TextToVideo

    return TextToVideo.from_pretrained(source, dtype=dtype, device=device)


def _is_text_to_video(obj: Any) -> bool:
    """A loaded `TextToVideo`, or diffusers' `TextToVideoSDPipeline` (wrapped when the task runs)."""
    from diffusers import TextToVideoSDPipeline

    from pipelines.text_to_video import TextToVideo

    return isinstance(obj, (TextToVideo, TextToVideoSDPipeline))


register_model_kind(ModelKind(
    "text-to-video", "a text-to-video model (diffusers TextToVideoSDPipeline: folder, hub id or loaded pipeline)",
    ("TextToVideoSDPipeline",), _load_text_to_video, _is_text_to_video))


def video_option_specs() -> dict[str, OptionSpec]:
    """The bounds `check_video_settings` and `check_fps` hold these to: their modules' constants. `generator` (a
    torch.Generator) has none: the Python API's alone."""
    from mixkit.io.video import MAX_FPS
    from pipelines.params import SEED_MAX
    from pipelines.text_to_video import MAX_CFG, MAX_FRAMES, MAX_SIDE, MAX_STEPS

    return {
        "negative_prompt": OptionSpec("text", label="Negative prompt"),
        "num_frames": OptionSpec("int", 1, MAX_FRAMES, 1, label="Frames"),
        "steps": OptionSpec("int", 1, MAX_STEPS, 1, label="Sampling steps"),
        "cfg_scale": OptionSpec("float", 0, MAX_CFG, 0.5, label="CFG Scale"),
        "width": OptionSpec("int", 8, MAX_SIDE, 8, auto=True, label="Width"),
        "height": OptionSpec("int", 8, MAX_SIDE, 8, auto=True, label="Height"),
        "seed": OptionSpec("seed", -1, SEED_MAX, 1, label="Seed"),
        "sampler": OptionSpec("choice", choices=sampler_choices, auto=True, label="Sampling method"),
        "schedule_type": OptionSpec("choice", choices=schedule_choices, label="Schedule type"),
        "fps": OptionSpec("float", 0, MAX_FPS, 1, low_open=True, label="Frames per second"),
    }


@register_task
class TextToVideoTask(Task):
    """Frames of a short video from a prompt. `frames` (also PaddleMIX's `result`) are PIL images, `video` the same
    frames with `fps` for saving (`result["video"].save("clip.mp4")`), `seed` the seed used (the one drawn for
    seed -1; -1 when your own `generator=` drew the noise)."""

    name = "text_to_video"
    description = "Text to video (ModelScope text-to-video: UNet3D + SD VAE + CLIP)"
    inputs = {"prompt": Port("text")}
    outputs = {"frames": "images", "video": "video", "seed": "int"}
    main_output = "frames"
    # its own role name: a chain that also has an SD step (role "generator") needs both models
    models = {"video_generator": "text-to-video"}
    default_models = {"video_generator": DEFAULT_TEXT_TO_VIDEO}
    # None: the model's native size (256 for ModelScope's) and diffusers' DPM-Solver++ multistep (PaddleMIX's choice)
    options = {"negative_prompt": "", "num_frames": 16, "steps": 25, "cfg_scale": 9.0, "width": None, "height": None,
               "seed": -1, "sampler": None, "schedule_type": "Automatic", "generator": None, "fps": 8}
    option_specs = video_option_specs()
    option_aliases = GENERATION_ALIASES  # diffusers' / PaddleMIX's num_inference_steps, guidance_scale

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        from mixkit.io.video import check_fps
        from pipelines.text_to_video import check_video_settings

        check_video_settings(**{key: options[key] for key in options if key != "fps"})
        check_fps(options["fps"])

    def run(self, models, options, *, prompt: str) -> dict[str, Any]:
        from pipelines.text_to_video import TextToVideo

        model = models.get("video_generator")
        if not isinstance(model, TextToVideo):  # a diffusers pipeline passed in models=
            model = TextToVideo(model)
        settings = {key: value for key, value in options.items() if key != "fps"}
        with one_call_at_a_time(model.pipeline):
            result = model(prompt, **settings, **pipeline_hooks())
        return {"frames": result.frames, "video": Video(tuple(result.frames), float(options["fps"])),
                "seed": result.seed}
