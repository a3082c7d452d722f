"""`wrap_vlm`: an already-loaded transformers VLM behind the task API (appflow hunt finding 6).

AppFlow's captioning / zero-shot roles take a mixkit adapter; for a model a user has loaded or
fine-tuned in the process, the error used to advise `ProcessorModel`, which those roles refuse too.
"""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm import load_vlm, wrap_vlm
from mixkit.models.vlm.loading import DTYPES_BY_NAME, pick_dtype


def test_a_wrapped_blip2_captions_as_load_vlm_does(tiny_blip2_opt_dir, blip2_opt, photos):
    from transformers import AutoProcessor, Blip2ForConditionalGeneration

    model = Blip2ForConditionalGeneration.from_pretrained(tiny_blip2_opt_dir)
    wrapped = wrap_vlm(model, AutoProcessor.from_pretrained(tiny_blip2_opt_dir))
    assert wrapped.family == "blip2" and wrapped.dtype == torch.float32 and wrapped.device.type == "cpu"
    assert wrapped.caption(photos[:2], max_new_tokens=4) == blip2_opt.caption(photos[:2], max_new_tokens=4)


def test_a_wrapped_clip_classifies_as_load_vlm_does(tiny_clip_dir, photos):
    from transformers import AutoProcessor, CLIPModel

    wrapped = wrap_vlm(CLIPModel.from_pretrained(tiny_clip_dir), AutoProcessor.from_pretrained(tiny_clip_dir))
    expected = load_vlm(tiny_clip_dir).classify(photos[:1], ["a", "b"])[0]
    assert wrapped.classify(photos[:1], ["a", "b"])[0] == pytest.approx(expected, abs=1e-6)


def test_what_cannot_be_wrapped_is_refused_saying_what_to_pass(tiny_clip_dir):
    from transformers import AutoProcessor, CLIPModel, CLIPVisionModel

    processor = AutoProcessor.from_pretrained(tiny_clip_dir)
    with pytest.raises(TypeError, match="takes a loaded transformers model"):
        wrap_vlm(object(), processor)
    with pytest.raises(TypeError, match="processor must be the model's processor"):
        wrap_vlm(CLIPModel.from_pretrained(tiny_clip_dir), processor.tokenizer)
    with pytest.raises(Exception, match="no vision-language family handles"):
        wrap_vlm(CLIPVisionModel.from_pretrained(tiny_clip_dir), processor)


def test_short_precision_names_are_one_table():
    # Appflow(dtype=...) reads the same table (appflow hunt finding 10)
    assert pick_dtype(torch.device("cpu"), "fp16") is DTYPES_BY_NAME["fp16"] is torch.float16
    assert DTYPES_BY_NAME["bf16"] is torch.bfloat16 and DTYPES_BY_NAME["fp32"] is torch.float32
