"""The model kinds AppFlow's built-in tasks use, each with its public loader.

Detection and segmentation models are transformers' Grounding DINO and SAM loaded with
`from_pretrained` next to their processors; Stable Diffusion comes through mixkit's
`TextToImage.from_pretrained` (one load serves txt2img, img2img and inpainting); vision-language
models through `mixkit.models.vlm.load_vlm`; the dialog LLM is any transformers causal LM.
Hub ids bound for transformers pass through `appflow.hub` first, so one that is not cached fails
at once when the hub is unreachable or HF_HUB_OFFLINE is set, as the SD loader does.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from appflow.hub import hub_load_arguments
from appflow.model_kinds import ModelKind, register_model_kind

SD_PIPELINE_CLASSES = (
    "StableDiffusionPipeline", "StableDiffusionXLPipeline", "StableDiffusionImg2ImgPipeline",
    "StableDiffusionInpaintPipeline", "StableDiffusionXLImg2ImgPipeline", "StableDiffusionXLInpaintPipeline",
)


@dataclass
class ProcessorModel:
    """A transformers model with the processor that prepares its inputs and decodes its outputs."""

    model: Any
    processor: Any
    source: str


def _from_pretrained(model_class: str, source: str, device: str, dtype: Any) -> ProcessorModel:
    # Checked before importing transformers' model classes (seconds on a small CPU), so an id that cannot
    # load fails at once instead of after transformers' minute of hub retries.
    name, options = hub_load_arguments(source)
    import transformers

    with _load_errors_named(source):
        model = getattr(transformers, model_class).from_pretrained(name, dtype=dtype, **options).to(device).eval()
        processor = transformers.AutoProcessor.from_pretrained(name, **options)
    return ProcessorModel(model, processor, source)


@contextmanager
def _load_errors_named(source: str):
    """transformers reports missing files as OSError; re-raise it naming the model and what to do."""
    from mixkit.errors import ModelNotFoundError

    try:
        yield
    except OSError as error:
        reason = str(error).strip().splitlines()[0].rstrip(".") if str(error).strip() else type(error).__name__
        raise ModelNotFoundError(f"Cannot load {source!r}: {reason}. Download it once with network access, "
                                 "or pass a local folder saved with save_pretrained.") from None


def _load_stable_diffusion(source: str, device: str, dtype: Any):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(source, dtype=dtype, device=device)


def _load_grounding_dino(source: str, device: str, dtype: Any) -> ProcessorModel:
    return _from_pretrained("GroundingDinoForObjectDetection", source, device, dtype)


def _load_sam(source: str, device: str, dtype: Any) -> ProcessorModel:
    return _from_pretrained("SamModel", source, device, dtype)


def _load_vlm(source: str, device: str, dtype: Any):
    from mixkit.models.vlm import load_vlm

    return load_vlm(source, device=device, dtype=dtype)


def _load_causal_lm(source: str, device: str, dtype: Any) -> ProcessorModel:
    name, options = hub_load_arguments(source)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _load_errors_named(source):
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, **options).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(name, **options)
    return ProcessorModel(model, tokenizer, source)


def _causal_lm_types() -> tuple[str, ...]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return tuple(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _is_pipeline(obj: Any) -> bool:
    from pipelines.base import DiffusionPipelineBase

    return isinstance(obj, DiffusionPipelineBase)


def model_type_of(obj: Any) -> str | None:
    """The transformers `model_type` of a loaded model (or of a ProcessorModel's model), None if it has none."""
    model = obj.model if isinstance(obj, ProcessorModel) else obj
    return getattr(getattr(model, "config", None), "model_type", None)


def _processor_model_of(model_types, *processor_methods: str):
    """A ProcessorModel whose model is one of `model_types` and whose processor has what the role's task calls.

    Any ProcessorModel used to fit every transformers role, so SAM passed as the detector was accepted and failed
    at the first call inside the detection task."""
    def accepts(obj: Any) -> bool:
        types = model_types() if callable(model_types) else model_types
        return (isinstance(obj, ProcessorModel) and model_type_of(obj) in types
                and all(callable(getattr(obj.processor, name, None)) for name in processor_methods))

    return accepts


def _is_reply_function(obj: Any) -> bool:
    """A plain `reply(prompt) -> str` callable: not a model object (an nn.Module is callable too, but on tensors)."""
    if not callable(obj) or isinstance(obj, (type, ProcessorModel)):
        return False
    try:
        import torch
    except ImportError:  # pragma: no cover - torch ships with mixkit
        return True
    return not isinstance(obj, torch.nn.Module)


def _has_method(name: str):
    return lambda obj: callable(getattr(obj, name, None))


def _can(task: str):
    """An object with a callable `task` method; a mixkit VLM adapter only if its family does that task (every adapter
    has `caption`, but a CLIP adapter's raises)."""
    def accepts(obj: Any) -> bool:
        tasks = getattr(obj, "tasks", None)
        return callable(getattr(obj, task, None)) and (not isinstance(tasks, frozenset) or task in tasks)

    return accepts


PROCESSOR_MODEL_HINT = ("a loaded transformers model needs its processor or tokenizer: pass "
                        "appflow.loaders.ProcessorModel(model, processor, name), or the model's folder or hub id")
VLM_HINT = ("wrap a loaded transformers model with its processor as mixkit.models.vlm.wrap_vlm(model, processor), "
            "or pass the model's folder or hub id")


register_model_kind(ModelKind(
    "stable-diffusion", "a Stable Diffusion 1.x/2.x/SDXL model (diffusers folder, single file or hub id)",
    SD_PIPELINE_CLASSES, _load_stable_diffusion, _is_pipeline))
register_model_kind(ModelKind(
    "grounding-dino", "a Grounding DINO detector (transformers GroundingDinoForObjectDetection)",
    ("grounding-dino",), _load_grounding_dino,
    _processor_model_of(("grounding-dino",), "post_process_grounded_object_detection"), PROCESSOR_MODEL_HINT))
register_model_kind(ModelKind(
    "sam", "a Segment Anything model (transformers SamModel)", ("sam",), _load_sam,
    _processor_model_of(("sam",), "post_process_masks"), PROCESSOR_MODEL_HINT))
register_model_kind(ModelKind(
    "vlm-generative", "a captioning/VQA vision-language model (BLIP-2, InstructBLIP, LLaVA, mixkit modular VLMs)",
    ("blip-2", "instructblip", "llava", "mixkit-vlm"), _load_vlm, _can("caption"), VLM_HINT))
register_model_kind(ModelKind(
    "vlm-contrastive", "a contrastive image-text model (CLIP, SigLIP)", ("clip", "siglip"), _load_vlm,
    _can("classify"), VLM_HINT))
# The dialog LLM slot also takes any callable `reply(prompt) -> str`: tests and users plug in
# scripted replies or a remote chat API there. A loaded model needs its tokenizer: ProcessorModel(model, tokenizer).
register_model_kind(ModelKind(
    "causal-lm", "an instruction-following causal language model (transformers AutoModelForCausalLM)",
    _causal_lm_types, _load_causal_lm,
    lambda obj: _is_reply_function(obj) or _processor_model_of(_causal_lm_types, "decode")(obj), PROCESSOR_MODEL_HINT))


def _load_x4_upscaler(source: str, device: str, dtype: Any):
    from mixkit.io.sources import resolve_model_source
    from pipelines.upscale import SDx4Upscaler

    return SDx4Upscaler.from_pretrained(resolve_model_source(source), dtype=dtype, device=device)


def _load_controlnet(source: str, device: str, dtype: Any):
    from mixkit.io.sources import resolve_model_source
    from pipelines.controlnet import load_controlnet

    return load_controlnet(resolve_model_source(source), dtype=dtype, device=device)


def _is_controlnet(obj: Any) -> bool:
    return hasattr(getattr(obj, "config", None), "conditioning_embedding_out_channels")


register_model_kind(ModelKind(
    "sd-x4-upscaler", "a Stable Diffusion x4 upscaler (diffusers StableDiffusionUpscalePipeline folder)",
    ("StableDiffusionUpscalePipeline",), _load_x4_upscaler, _has_method("upscale")))
register_model_kind(ModelKind(
    "controlnet", "a diffusers ControlNet (folder or single file) for the chain's SD model",
    ("ControlNetModel",), _load_controlnet, _is_controlnet))
