"""int8 UNet (OpenVINO graph, or torch + inductor) and, on OpenVINO, int8 VAE decoder: calibrate on
real denoising inputs, quantize.

Post-training quantization needs the activation ranges the UNet really sees, which depend on the
prompts, the size, the sampler's noise levels and CFG. So calibration runs this pipeline itself
(the float UNet) on a few prompts at the size and settings the user generates with, records every
UNet call (and, on OpenVINO, the final latents each image decodes), and hands them to NNCF
(`mixkit.runtime.openvino_int8`; the int8 graphs are cached next to the float ones, keyed by those
settings, so later processes skip calibration and NNCF) or to torchao's PT2E quantizer
(`mixkit.runtime.torch_int8`; UNet only, in-process only).
Which prompts: the model's own (`calibration_prompts` in its `mixkit_generation.json`, e.g.
mixkit-tiny-sd's shapes-world captions), else a generic set like the captions users write.
"""

from __future__ import annotations

from contextlib import nullcontext
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
    then from A1111's defaults. Calibrate at the size you generate at: ranges shift with size.

    `vae_decoder`: also quantize the VAE decoder (OpenVINO backend only). None: wherever the backend
    can (OpenVINO yes, torch no); True on the torch backend is refused; False keeps it in float."""

    prompts: tuple[str, ...] | None = None
    negative_prompt: str = ""
    width: int | None = None
    height: int | None = None
    steps: int | None = None
    cfg_scale: float | None = None
    sampler: str | None = None
    seed: int = 0
    vae_decoder: bool | None = None

    def __post_init__(self) -> None:
        if self.prompts is not None:
            if isinstance(self.prompts, str) or not all(isinstance(p, str) and p.strip() for p in self.prompts):
                raise ValueError(f"int8 calibration prompts must be a list of non-empty strings, got {self.prompts!r}")
            if not self.prompts:
                raise ValueError("int8 calibration needs at least one prompt (or None for the model's own)")
            object.__setattr__(self, "prompts", tuple(self.prompts))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"int8 calibration seed must be an integer >= 0, got {self.seed!r}")
        if self.vae_decoder not in (None, True, False):
            raise ValueError(f"int8 calibration vae_decoder must be None, True or False, got {self.vae_decoder!r}")


@dataclass(frozen=True)
class Int8Installed:
    """What `install_int8` put in place: the report line, and whether the VAE decoder is int8 too."""

    line: str
    vae_decoder: bool


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


def check_int8_target(model, calibration: Int8Calibration | None = None) -> None:
    """int8 needs the OpenVINO UNet graph and NNCF, or an eager torch UNet on the CPU and torchao;
    say so before anything changes."""
    from mixkit.runtime.openvino_unet import OpenVinoUNet
    from mixkit.runtime.torch_int8 import TorchInt8UNet

    unet = model.unet
    if isinstance(unet, OpenVinoUNet):
        from mixkit.runtime.openvino_int8 import require_nncf

        require_nncf()
        if calibration is not None and calibration.vae_decoder and not _openvino_vae(model):
            raise ValueError(f"int8 vae_decoder=True needs the OpenVINO VAE; this model's VAE is "
                             f"{type(model.vae).__name__} (e.g. TAESD or a VAE swapped in after optimize)")
        return
    if calibration is not None and calibration.vae_decoder:
        raise ValueError("int8 vae_decoder=True runs on the openvino backend only (the torch backend quantizes the "
                         "UNet); use backend 'openvino', or leave vae_decoder unset")
    from diffusers import UNet2DConditionModel

    if isinstance(unet, TorchInt8UNet):
        unet = unet.float_unet
    if not isinstance(unet, UNet2DConditionModel):
        raise ValueError(f"int8 quantizes the OpenVINO UNet graph or a diffusers UNet on the torch backend; this "
                         f"model's UNet is {type(unet).__name__}")
    if unet.device.type != "cpu":
        raise ValueError(f"int8 runs on the CPU (oneDNN int8 kernels); the UNet is on {unet.device}. "
                         "On GPUs use the fast preset's fp16/bf16")
    if "_mixkit_eager_forward" in unet.__dict__:  # mixkit.runtime.compile's marker
        raise ValueError("int8 compiles its own graph; drop compile=True from optimize() to use it")
    from mixkit.runtime.torch_int8 import require_torchao

    require_torchao()


def install_int8(pipe, calibration: Int8Calibration) -> Int8Installed:
    """Calibrate (OpenVINO: on a cache miss), quantize and install the int8 UNet (and VAE decoder).

    On any failure the model keeps the UNet and VAE it had (float, or earlier int8 ones).
    """
    from mixkit.runtime.openvino_unet import OpenVinoUNet

    params = calibration_params(pipe.model, calibration, getattr(pipe, "limits", None))
    if isinstance(pipe.model.unet, OpenVinoUNet):
        with_decoder = calibration.vae_decoder is not False and _openvino_vae(pipe.model)
        engine, origin, detail = _install_openvino_int8(pipe, params, calibration.seed, with_decoder)
    else:
        with_decoder = False
        engine, origin, detail = _install_torch_int8(pipe, params)
    first = params[0]
    parts = "UNet and VAE decoder" if with_decoder else "UNet"
    return Int8Installed(f"int8 {parts} ({engine}; {origin} at {first.width}x{first.height}, {first.sampler}, "
                         f"CFG {first.cfg_scale:g}; {detail})", with_decoder)


def _openvino_vae(model) -> bool:
    from mixkit.runtime.openvino_vae import OpenVinoVae

    return isinstance(model.vae, OpenVinoVae)


def _run_calibration(pipe, params) -> None:
    from pipelines.txt2img import TextToImage

    runner = TextToImage.from_pipeline(pipe)
    for item in params:
        runner(item)


def _install_openvino_int8(pipe, params, seed: int, with_decoder: bool) -> tuple[str, str, str]:
    from mixkit.runtime.openvino_int8 import load_or_quantize, load_or_quantize_decoder

    unet, vae = pipe.model.unet, pipe.model.vae
    first = params[0]
    settings = {"prompts": [p.prompt for p in params], "negative_prompt": first.negative_prompt, "width": first.width,
                "height": first.height, "steps": first.steps, "cfg_scale": first.cfg_scale, "sampler": first.sampler,
                "seed": seed}
    previous_unet = (unet.graph, unet.int8_path)
    previous_decoder = (vae.int8_decoder_graph, vae.int8_decoder_path) if _openvino_vae(pipe.model) else None
    recorded: dict[str, list] = {}

    def calibrate(part: str) -> list:
        """One calibration run records what both graphs need, whichever cache misses first."""
        if not recorded:
            with unet.recording() as calls, (vae.recording() if with_decoder else nullcontext([])) as latents:
                _run_calibration(pipe, params)
            recorded.update(unet=calls, decoder=latents)
        return recorded[part]

    try:  # calibrate on the float graphs' activations, never on earlier int8 ones
        unet.use_float_graph()
        if previous_decoder is not None:
            vae.use_float_decoder()
        graph, path, _ = load_or_quantize(unet, settings, lambda: calibrate("unet"))
        decoder = load_or_quantize_decoder(vae, settings, lambda: calibrate("decoder")) if with_decoder else None
    except BaseException:
        unet.use_graph(previous_unet[0], int8_path=previous_unet[1])
        if previous_decoder is not None and previous_decoder[0] is not None:
            vae.use_int8_decoder(*previous_decoder)
        raise
    unet.use_graph(graph, int8_path=path)
    detail = f"graph {path.name}"
    if decoder is not None:
        vae.use_int8_decoder(decoder[0], decoder[1])
        detail += f", decoder {decoder[1].name}"
    origin = "cached" if not recorded else f"calibrated on {len(params)} prompt(s) x {first.steps} steps"
    return "OpenVINO, NNCF post-training quantization", origin, detail


def _install_torch_int8(pipe, params) -> tuple[str, str, str]:
    from mixkit.runtime.capability import choose_fast_precision
    from mixkit.runtime.torch_int8 import TorchInt8UNet, quantize_unet
    from mixkit.runtime.unet_graph import flat_unet_inputs, is_sdxl

    model = pipe.model
    previous = model.unet
    float_unet = previous.float_unet if isinstance(previous, TorchInt8UNet) else previous
    calls = []

    def record(module, args, kwargs):
        timestep = args[1] if len(args) > 1 else kwargs["timestep"]
        inputs = flat_unet_inputs(args[0], timestep, kwargs["encoder_hidden_states"], kwargs.get("added_cond_kwargs"),
                                  is_sdxl(module.config))
        calls.append([x.detach().clone() for x in inputs])

    hook = float_unet.register_forward_pre_hook(record, with_kwargs=True)
    try:
        model.unet = float_unet  # calibrate on the float UNet's activations, never on an earlier int8 one
        _run_calibration(pipe, params)
        hook.remove()
        # Recorded under inference_mode: cloned again here, outside it, so export can trace through them.
        graph = quantize_unet(float_unet, [[x.clone() for x in call] for call in calls])
        bf16 = not choose_fast_precision("cpu").is_fallback
        model.unet = TorchInt8UNet(float_unet, graph, [x.shape for x in calls[0]], autocast_bf16=bf16)
    except BaseException:
        hook.remove()
        model.unet = previous
        raise
    return (f"torch: PT2E X86InductorQuantizer, inductor-compiled{', bf16 elsewhere' if bf16 else ''}",
            f"calibrated on {len(params)} prompt(s) x {params[0].steps} steps", "in this process, not cached")


def remove_int8(model) -> None:
    from mixkit.runtime.openvino_unet import OpenVinoUNet
    from mixkit.runtime.torch_int8 import TorchInt8UNet

    if _openvino_vae(model):
        model.vae.use_float_decoder()
    if isinstance(model.unet, OpenVinoUNet):
        model.unet.use_float_graph()
    elif isinstance(model.unet, TorchInt8UNet):
        model.unet = model.unet.float_unet


def _first(*values):
    return next(v for v in values if v is not None)
