"""`wrap_vlm` takes the caller's processor as it is: LLaVA's left padding is for mixkit's own call only."""

from __future__ import annotations

from PIL import Image


def test_llava_caption_leaves_the_callers_padding_side_as_it_was(tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from mixkit.models.vlm import wrap_vlm
    from mixkit.testing.tiny_vlm import build_tiny_llava

    folder = build_tiny_llava(tmp_path / "llava", seed=0)
    processor = AutoProcessor.from_pretrained(folder)
    processor.tokenizer.padding_side = "right"  # what a training collator sets
    model = AutoModelForImageTextToText.from_pretrained(folder).eval()
    adapter = wrap_vlm(model, processor)
    image = Image.new("RGB", (48, 40), (20, 30, 200))
    # Two prompts of different lengths: the batch must still be left padded for generation ...
    inputs = adapter._model_inputs([image, image], [adapter.question_prompt("hi"),
                                                   adapter.question_prompt("what is in the picture today?")])
    assert inputs["attention_mask"][0, 0] == 0 and inputs["attention_mask"][0, -1] == 1
    adapter.caption([image], max_new_tokens=2)
    # ... and the caller's tokenizer keeps its own side (it was left "left" for good before).
    assert processor.tokenizer.padding_side == "right"
