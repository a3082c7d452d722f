"""A request's `styles` merged from the server's --styles-file (A1111's `apply_styles_to_prompt` before generating),
and /sdapi/v1/prompt-styles listing them in A1111's shape (name, prompt, negative_prompt)."""

import pytest

from mixkit.prompts.styles import StyleLibrary
from pipelines.params import GenerationLimits
from webui.api_convert import to_txt2img_params
from webui.api_requests import Txt2ImgRequest


@pytest.fixture
def styles(tmp_path):
    path = tmp_path / "styles.csv"
    path.write_text('name,prompt,negative_prompt\nPhoto,"photo of {prompt}",blurry\n', encoding="utf-8")
    return StyleLibrary(path)


def params(library, **fields):
    return to_txt2img_params(Txt2ImgRequest(**fields), limits=GenerationLimits(), lora_names=None, styles=library)


def test_styles_are_merged(styles):
    chosen = params(styles, prompt="a cat", negative_prompt="ugly", styles=["Photo"])
    assert (chosen.prompt, chosen.negative_prompt) == ("photo of a cat", "ugly, blurry")


def test_without_a_styles_file_or_with_an_unknown_name_the_request_is_refused(styles):
    with pytest.raises(ValueError, match="no styles file; start it with --styles-file"):
        params(None, prompt="a", styles=["Photo"])
    with pytest.raises(ValueError, match=r"unknown style\(s\) \['Foto'\]"):
        params(styles, prompt="a", styles=["Foto"])
    assert params(None, prompt="a").prompt == "a"


def test_hires_prompts_are_taken_and_styled(styles):
    chosen = params(styles, prompt="a cat", enable_hr=True, hr_scale=2, hr_prompt="a dog", hr_negative_prompt="",
                    styles=["Photo"], width=64, height=64)
    assert (chosen.prompt, chosen.hr_prompt, chosen.hr_negative_prompt) == ("photo of a cat", "photo of a dog", "blurry")
    plain = params(None, prompt="a cat", enable_hr=True, hr_scale=2, hr_prompt="a dog", width=64, height=64)
    assert (plain.hr_prompt, plain.hr_negative_prompt) == ("a dog", "")


def test_the_info_json_lists_the_styles_used_as_a1111s_processed_does():
    from webui.api_response import generation_info

    class Result:
        images, seeds, infotexts, interrupted = [object()], [1], ["a cat, red"], False

    request_params = params(None, prompt="a cat")
    info = generation_info(request_params, Result(), model_name="m", model_hash="h", job_timestamp="t",
                           styles=["red"])
    assert info["styles"] == ["red"]
