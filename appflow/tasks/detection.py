"""Open-vocabulary detection (Grounding DINO) and box-prompted segmentation (SAM), as in Grounded-SAM.

Outputs follow one convention: `boxes` is float32 (N, 4) in x0, y0, x1, y1 pixels of the input
image, `scores` float32 (N,), `labels` N phrases, `seg_masks` bool (N, H, W) at the image's size.
Nothing found is not an error: N = 0, with the same dtypes and H, W.
"""

from __future__ import annotations

from typing import Any

from appflow.option_specs import OptionSpec
from appflow.task import Port, Task, check_number_option, register_task

EMPTY_PROMPT_POLICIES = ("error", "no_detections")


def grounding_prompt(prompt: str) -> str:
    """Grounding DINO expects lower-case phrases separated and terminated by '.' ("a dog. a cat.")."""
    text = prompt.strip().lower()
    return text if text.endswith(".") else text + "."


THRESHOLD = OptionSpec("float", 0, 1, 0.01)  # Grounding DINO's box and text scores are probabilities


def check_threshold(name: str, value: Any) -> float:
    return check_number_option(name, value, THRESHOLD.low, THRESHOLD.high)


def empty_detections() -> dict[str, Any]:
    import torch

    return {"labels": [], "boxes": torch.zeros(0, 4), "scores": torch.zeros(0)}


@register_task
class OpenVocabularyDetectionTask(Task):
    """Boxes of everything the text prompt names ("dog", "a red car. a tree")."""

    name = "open_vocabulary_detection"
    description = "Grounding DINO text-prompted detection"
    inputs = {"image": Port("image"), "prompt": Port("text")}
    outputs = {"labels": "texts", "boxes": "boxes", "scores": "scores"}
    main_output = "boxes"
    models = {"detector": "grounding-dino"}
    default_models = {"detector": "IDEA-Research/grounding-dino-tiny"}
    # Thresholds from Grounded-SAM's demos; `empty_prompt` lets chains whose prompt comes from a
    # caption treat an empty caption as "nothing to detect" instead of an error.
    options = {"box_threshold": 0.35, "text_threshold": 0.25, "empty_prompt": "error"}
    option_specs = {"box_threshold": THRESHOLD, "text_threshold": THRESHOLD,
                    "empty_prompt": OptionSpec("choice", choices=EMPTY_PROMPT_POLICIES, label="An empty prompt")}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_threshold("box_threshold", options["box_threshold"])
        check_threshold("text_threshold", options["text_threshold"])
        if options["empty_prompt"] not in EMPTY_PROMPT_POLICIES:
            raise ValueError(f"empty_prompt must be one of {EMPTY_PROMPT_POLICIES}, got {options['empty_prompt']!r}.")

    def run(self, models, options, *, image, prompt: str) -> dict[str, Any]:
        import torch

        box_threshold = float(options["box_threshold"])
        text_threshold = float(options["text_threshold"])
        if not prompt.strip(" .\n\t"):
            if options["empty_prompt"] == "no_detections":
                return empty_detections()
            raise ValueError(f"Task 'open_vocabulary_detection': prompt {prompt!r} is empty; say what to detect, "
                             "e.g. prompt='dog' or 'a dog. a cat'.")
        detector = models.get("detector")
        image = image.convert("RGB")
        inputs = detector.processor(images=image, text=grounding_prompt(prompt), return_tensors="pt")
        model_dtype = next(detector.model.parameters()).dtype
        inputs = {k: (v.to(detector.model.device, model_dtype) if v.is_floating_point() else v.to(detector.model.device))
                  for k, v in inputs.items()}
        with torch.no_grad():
            outputs = detector.model(**inputs)
        found = detector.processor.post_process_grounded_object_detection(
            outputs, inputs["input_ids"], threshold=box_threshold, text_threshold=text_threshold,
            target_sizes=[(image.height, image.width)])[0]
        boxes = found["boxes"].float().cpu()
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, image.width)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, image.height)
        labels = found["text_labels"] if "text_labels" in found else found["labels"]  # "labels" warns in 4.51+
        # With no box above the threshold transformers still returns one empty label: keep one per box.
        labels = [str(label) for label in labels][:len(boxes)]
        return {"labels": labels, "boxes": boxes, "scores": found["scores"].float().cpu()}


@register_task
class BoxSegmentationTask(Task):
    """One SAM mask per box (single-mask output, as Grounded-SAM uses for box prompts)."""

    name = "box_segmentation"
    description = "SAM masks from box prompts"
    inputs = {"image": Port("image"), "boxes": Port("boxes")}
    outputs = {"seg_masks": "masks"}
    main_output = "seg_masks"
    models = {"segmenter": "sam"}
    default_models = {"segmenter": "facebook/sam-vit-base"}
    # transformers' `post_process_masks` threshold on SAM's mask logits (0 = probability 0.5), so any finite value
    options = {"mask_threshold": 0.0}
    option_specs = {"mask_threshold": OptionSpec("float", step=0.1, label="Mask logit threshold")}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_number_option("mask_threshold", options["mask_threshold"])

    def run(self, models, options, *, image, boxes) -> dict[str, Any]:
        import torch

        if len(boxes) == 0:  # nothing detected: an empty result without loading SAM
            return {"seg_masks": torch.zeros(0, image.height, image.width, dtype=torch.bool)}
        sam = models.get("segmenter")
        image = image.convert("RGB")
        inputs = sam.processor(images=image, input_boxes=[boxes.tolist()], return_tensors="pt")
        model_dtype = next(sam.model.parameters()).dtype
        device = sam.model.device
        with torch.no_grad():
            outputs = sam.model(pixel_values=inputs["pixel_values"].to(device, model_dtype),
                                input_boxes=inputs["input_boxes"].to(device, model_dtype), multimask_output=False)
        masks = sam.processor.post_process_masks(outputs.pred_masks.float().cpu(), inputs["original_sizes"],
                                                 inputs["reshaped_input_sizes"],
                                                 mask_threshold=float(options["mask_threshold"]))[0]
        return {"seg_masks": masks[:, 0].bool()}
