"""The SD tasks take diffusers' spellings of their options, as they take PaddleMIX's `guidance_scale`.

A diffusers user writes `num_inference_steps=30, num_images_per_prompt=2` (StableDiffusionPipeline.__call__); those
were refused as unknown options. Oracle: the same flow with mixkit's own names."""

from __future__ import annotations

import numpy as np
import pytest

from appflow import Appflow, ModelCache, describe_app


def test_diffusers_spellings_are_the_options_they_name(tiny_sd1_dir, shared_cache):
    common = dict(models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32, seed=7)
    diffusers_style = Appflow("text2image_generation", num_inference_steps=2, num_images_per_prompt=2, **common)
    mixkit_style = Appflow("text2image_generation", steps=2, batch_size=2, **common)
    got, expected = diffusers_style(prompt="a cat")["images"], mixkit_style(prompt="a cat")["images"]
    assert len(got) == 2 and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, expected))
    per_call = mixkit_style(prompt="a cat", num_inference_steps=3)["result"]  # per call too
    assert np.array_equal(np.asarray(per_call), np.asarray(mixkit_style(prompt="a cat", steps=3)["result"]))
    assert describe_app("text2image_generation")["option_aliases"]["num_inference_steps"] == "steps"


def test_one_option_under_both_spellings_is_refused():
    with pytest.raises(TypeError, match="got option 'steps' twice, as 'steps' and as 'num_inference_steps'"):
        Appflow("image2image_text_guided_generation", steps=2, num_inference_steps=2, cache=ModelCache())


def test_a_loras_call_does_not_leak_into_another_threads_call_on_the_same_cached_model(tiny_sd1_dir, tmp_path):
    """A prompt's LoRA is applied to the shared UNet for the call: a second thread generating on the same cached model
    meanwhile used to get it too. Thread A is held while its LoRA is applied; thread B's plain image must be the one B
    gets alone."""
    import contextlib
    import threading

    from mixkit.testing.tiny_lora import write_attention_lora
    from pipelines.txt2img import TextToImage

    (tmp_path / "loras").mkdir()
    write_attention_lora(TextToImage.from_pretrained(tiny_sd1_dir).model.unet, tmp_path / "loras" / "shiny.safetensors",
                         scale=0.5)
    cache = ModelCache()
    common = dict(models=[tiny_sd1_dir], cache=cache, width=32, height=32, steps=2, seed=7)
    with_lora = Appflow("text2image_generation", lora_dir=tmp_path / "loras", **common)
    plain = Appflow("text2image_generation", **common)
    alone = np.asarray(plain(prompt="a cat")["result"])
    with_lora(prompt="a cat <lora:shiny:1>")  # builds the flow's own prompt session on the cached model
    [session] = with_lora._state.values()
    applied, go = threading.Event(), threading.Event()
    prepared = session.prepared

    @contextlib.contextmanager
    def held_while_applied(*args, **kwargs):
        with prepared(*args, **kwargs) as call:
            applied.set()
            go.wait(60)
            yield call

    session.prepared = held_while_applied
    first = threading.Thread(target=with_lora, kwargs={"prompt": "a cat <lora:shiny:1>"})
    first.start()
    assert applied.wait(60)
    got = []
    second = threading.Thread(target=lambda: got.append(np.asarray(plain(prompt="a cat")["result"])))
    second.start()
    second.join(5)  # before: finished here, inside the LoRA's call; now it waits for that call to end
    go.set()
    first.join(60)
    second.join(60)
    assert len(got) == 1 and np.array_equal(got[0], alone)
