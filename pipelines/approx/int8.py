"""int8 UNet on the OpenVINO backend: calibrate on real denoising inputs, quantize once, cache.

Post-training quantization needs the activation ranges the UNet really sees, which depend on the
prompts, the size, the sampler's noise levels and CFG. So calibration runs this pipeline itself
(the bf16 graph) on a few prompts at the size and settings the user generates with, records every
UNet call, and hands them to NNCF (`mixkit.runtime.openvino_int8`). The int8 graph is cached next
to the float one, keyed by those settings, so later processes skip both calibration and NNCF.
Which prompts: the model's own (`calibration_prompts` in its `mixkit_generation.json`, e.g.
mixkit-tiny-sd's shapes-world captions), else a generic set like the captions users write.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params

DEFAULT_CALIBRATION_PROMPTS = (
    "a photograph of an astronaut riding a horse on the moon",
    "portrait of a young woman with red hair, soft light, detailed face",
    "a cozy living room with a fireplace and wooden furniture, interior design",
    "a mountain lake at sunrise, landscape photography, mist",
    "a red sports car on a city street at night, neon lights",
    "a bowl of fresh fruit on a kitchen table, still life painting",
    "a cute corgi puppy sitting in the grass, sharp focus",
    "an ancient castle on a cliff above the sea, fantasy art, dramatic clouds",
)


@dataclass(frozen=True)
class Int8Calibration:
    """How to calibrate; None fields come from the model (recommended settings, native size),
    then from A1111's defaults. Calibrate at the size you generate at: ranges shift with size."""

    prompts: tuple[str, ...] | None = None
    negative_prompt: str = ""
    width: int | None = None
    height: int | None = None
    steps: int | None = None
    cfg_scale: float | None = None
    sampler: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.prompts is not None:
            if isinstance(self.prompts, str) or not all(isinstance(p, str) and p.strip() for p in self.prompts):
                raise ValueError(f"int8 calibration prompts must be a list of non-empty strings, got {self.prompts!r}")
            if not self.prompts:
                raise ValueError("int8 calibration needs at least one prompt (or None for the model's own)")
            object.__setattr__(self, "prompts", tuple(self.prompts))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"int8 calibration seed must be an integer >= 0, got {self.seed!r}")


def calibration_params(model, calibration: Int8Calibration, limits: GenerationLimits | None = None) -> list[Txt2ImgParams]:
    """The generations calibration runs, one per prompt, each checked like a user's request."""
    recommended = model.recommended
    prompts = calibration.prompts or recommended.calibration_prompts or DEFAULT_CALIBRATION_PROMPTS
    defaults = Txt2ImgParams()
    native = model.native_size
    base = Txt2ImgParams(
        negative_prompt=calibration.negative_prompt,
        width=calibration.width or native, height=calibration.height or native,
        steps=_first(calibration.steps, recommended.steps, defaults.steps),
        cfg_scale=_first(calibration.cfg_scale, recommended.cfg_scale, defaults.cfg_scale),
        sampler=_first(calibration.sampler, recommended.sampler, defaults.sampler))
    params = [replace(base, prompt=prompt, seed=calibration.seed + i) for i, prompt in enumerate(prompts)]
    for item in params:
        try:
            check_txt2img_params(item, limits or GenerationLimits())
        except ValueError as error:
            raise ValueError(f"int8 calibration: {error}") from None
    return params


def check_int8_target(model) -> None:
    """int8 needs the OpenVINO UNet graph and NNCF; say so before anything changes."""
    from mixkit.runtime.openvino_unet import OpenVinoUNet

    if not isinstance(model.unet, OpenVinoUNet):
        raise ValueError(f"int8 quantizes the OpenVINO UNet graph; this model's UNet is {type(model.unet).__name__}. "
                         "Run optimize(pipe, 'fast', backend='openvino') first (CLI: --preset fast --backend openvino)")
    from mixkit.runtime.openvino_int8 import require_nncf

    require_nncf()


def install_int8_unet(pipe, calibration: Int8Calibration) -> str:
    """Calibrate (on a cache miss), quantize and install the int8 UNet graph; returns the report line.

    On any failure the UNet keeps the graph it had (float, or an earlier int8 one).
    """
    from mixkit.runtime.openvino_int8 import load_or_quantize
    from pipelines.txt2img import TextToImage

    model = pipe.model
    params = calibration_params(model, calibration, getattr(pipe, "limits", None))
    unet = model.unet
    settings = {"prompts": [p.prompt for p in params], "negative_prompt": params[0].negative_prompt,
                "width": params[0].width, "height": params[0].height, "steps": params[0].steps,
                "cfg_scale": params[0].cfg_scale, "sampler": params[0].sampler, "seed": calibration.seed}
    previous = (unet.graph, unet.int8_path)

    def calibrate():
        runner = TextToImage.from_pipeline(pipe)
        with unet.recording() as calls:
            for item in params:
                runner(item)
        return calls

    try:
        unet.use_float_graph()  # calibrate on the float graph's activations, never on an earlier int8 one
        graph, path, cached = load_or_quantize(unet, settings, calibrate)
    except BaseException:
        unet.use_graph(previous[0], int8_path=previous[1])
        raise
    unet.use_graph(graph, int8_path=path)
    origin = "cached" if cached else f"calibrated on {len(params)} prompt(s) x {params[0].steps} steps"
    return (f"int8 UNet (OpenVINO, NNCF post-training quantization; {origin} at {params[0].width}x{params[0].height}, "
            f"{params[0].sampler}, CFG {params[0].cfg_scale:g}; graph {path.name})")


def remove_int8_unet(model) -> None:
    from mixkit.runtime.openvino_unet import OpenVinoUNet

    if isinstance(model.unet, OpenVinoUNet):
        model.unet.use_float_graph()


def _first(*values):
    return next(v for v in values if v is not None)
