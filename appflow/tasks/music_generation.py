"""Text to music (PaddleMIX's `music_generation`): AudioLDM, cvssp/audioldm by default as PaddleMIX's app.

The model is diffusers' `AudioLDMPipeline` (CLAP text encoder, UNet, mel VAE, HiFi-GAN vocoder), run by
`pipelines.text_to_audio.TextToAudio` with the SD apps' seed, progress and Interrupt conventions. Image to music
captions the picture first and turns the caption into a music prompt: PaddleMIX asks an LLM (ChatGLM) to write it,
as `music_prompt_writing` does (any causal LM, or a `reply(prompt) -> str` function); `music_prompt` fills a template
instead (`music_template=`), which needs no third model and runs offline.
"""

from __future__ import annotations

from typing import Any

from appflow.audio import Audio
from appflow.model_kinds import ModelKind, register_model_kind
from appflow.option_specs import OptionSpec
from appflow.progress import pipeline_hooks
from appflow.task import Port, Task, register_task
from appflow.tasks.diffusion import GENERATION_ALIASES, one_call_at_a_time

DEFAULT_TEXT_TO_AUDIO = "cvssp/audioldm"  # PaddleMIX's (applications/MusicGeneration); cvssp/audioldm-s-full-v2 fits
# What PaddleMIX asks ChatGLM for ("create a musical style sentence that fits the scene"), as a template
DEFAULT_MUSIC_TEMPLATE = "{caption}, as a piece of music: a fitting melody and atmosphere, high quality"
CAPTION_FIELD = "{caption}"


def _load_text_to_audio(source: str, device: str, dtype: Any):
    from pipelines.text_to_audio import TextToAudio

    return TextToAudio.from_pretrained(source, dtype=dtype, device=device)


def _is_text_to_audio(obj: Any) -> bool:
    """A loaded `TextToAudio`, or diffusers' `AudioLDMPipeline` (wrapped when the task runs)."""
    from diffusers import AudioLDMPipeline

    from pipelines.text_to_audio import TextToAudio

    return isinstance(obj, (TextToAudio, AudioLDMPipeline))


register_model_kind(ModelKind(
    "text-to-audio", "a text-to-audio model (diffusers AudioLDMPipeline: folder, hub id or loaded pipeline)",
    ("AudioLDMPipeline",), _load_text_to_audio, _is_text_to_audio))


def audio_option_specs() -> dict[str, OptionSpec]:
    """The bounds `check_audio_settings` holds these to: its module's constants."""
    from pipelines.params import SEED_MAX
    from pipelines.text_to_audio import MAX_AUDIO_SECONDS, MAX_CFG, MAX_STEPS

    return {
        "negative_prompt": OptionSpec("text", label="Negative prompt"),
        "audio_length_in_s": OptionSpec("float", 0, MAX_AUDIO_SECONDS, 0.04, auto=True, low_open=True,
                                        label="Length in seconds (empty: the model's, 5.12 s for AudioLDM)"),
        "steps": OptionSpec("int", 1, MAX_STEPS, 1, label="Sampling steps"),
        "cfg_scale": OptionSpec("float", 0, MAX_CFG, 0.5, label="CFG Scale"),
        "seed": OptionSpec("seed", -1, SEED_MAX, 1, label="Seed"),
    }


@register_task
class TextToAudioTask(Task):
    """A clip from a prompt. `waveform` (also PaddleMIX's `result`) is the float32 samples at 16000 per second,
    `audio` the same samples with their rate for saving (`result["audio"].save("clip.wav")`), `seed` the seed used
    (the one drawn for seed -1; -1 when your own `generator=` drew the noise)."""

    name = "text_to_audio"
    description = "Text to audio / music (AudioLDM: CLAP + UNet + mel VAE + HiFi-GAN)"
    inputs = {"prompt": Port("text")}
    outputs = {"waveform": "waveform", "audio": "audio", "seed": "int"}
    main_output = "waveform"
    # its own role name, so a chain that also has an SD step (role "generator") needs both models
    models = {"audio_generator": "text-to-audio"}
    default_models = {"audio_generator": DEFAULT_TEXT_TO_AUDIO}
    # audio_length_in_s None: the model's native length (5.12 s for AudioLDM); steps and guidance: diffusers' defaults
    options = {"negative_prompt": "", "audio_length_in_s": None, "steps": 10, "cfg_scale": 2.5, "seed": -1,
               "generator": None}
    option_specs = audio_option_specs()
    option_aliases = GENERATION_ALIASES  # diffusers' / PaddleMIX's num_inference_steps, guidance_scale

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        from pipelines.text_to_audio import check_audio_settings

        check_audio_settings(**options)

    def run(self, models, options, *, prompt: str) -> dict[str, Any]:
        from pipelines.text_to_audio import TextToAudio

        model = models.get("audio_generator")
        if not isinstance(model, TextToAudio):  # a diffusers pipeline passed in models=
            model = TextToAudio(model)
        with one_call_at_a_time(model.pipeline):
            result = model(prompt, **options, **pipeline_hooks())
        return {"waveform": result.waveform, "audio": Audio(result.waveform, result.sample_rate),
                "seed": result.seed}


def check_music_template(template: Any) -> str:
    """A template holding `{caption}` (where the image's caption goes); ValueError/TypeError otherwise."""
    if not isinstance(template, str):
        raise TypeError(f"music_template must be a string holding {CAPTION_FIELD}, got {type(template).__name__}.")
    if CAPTION_FIELD not in template:
        raise ValueError(f"music_template must hold {CAPTION_FIELD} (where the image's caption goes), got "
                         f"{template!r}; e.g. {DEFAULT_MUSIC_TEMPLATE!r}.")
    return template


@register_task
class MusicPromptTask(Task):
    """A music prompt from an image caption: `music_template` with `{caption}` replaced by the caption (any other
    braces are kept as they are). PaddleMIX has ChatGLM write this sentence; a template needs no LLM."""

    name = "music_prompt"
    description = "Caption -> music prompt (a template; PaddleMIX uses an LLM)"
    inputs = {"caption": Port("text")}
    outputs = {"prompt": "text"}
    main_output = "prompt"
    options = {"music_template": DEFAULT_MUSIC_TEMPLATE}
    option_specs = {"music_template": OptionSpec("text", label="Music prompt template (holds {caption})")}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_music_template(options["music_template"])

    def run(self, models, options, *, caption: str) -> dict[str, Any]:
        caption = caption.strip().rstrip(".")
        return {"prompt": options["music_template"].replace(CAPTION_FIELD, caption)}


# PaddleMIX's instruction to ChatGLM (applications/MusicGeneration/README.md), with the caption in place of its
# `.format(result)`
LLM_MUSIC_INSTRUCTION = ("Given the scene description in the following paragraph, please create a musical style "
                         "sentence that fits the scene. Reply with that one sentence only. Description: {caption}.")


def music_prompt_from_reply(reply: Any) -> str:
    """The music prompt in an LLM's reply: its first non-empty line, without quotes around it; ValueError when the
    reply holds none (the audio step would otherwise make music for an empty prompt)."""
    if not isinstance(reply, str):
        raise ValueError(f"The LLM reply must be a string, got {type(reply).__name__}.")
    for line in reply.splitlines():
        line = line.strip().strip('"\'“”').strip()
        if line:
            return line
    raise ValueError(f"The LLM wrote no music prompt (its reply was {reply[:200]!r}); no audio was made. Try again "
                     "with a larger max_new_tokens or a stronger instruction-following model.")


@register_task
class MusicPromptWritingTask(Task):
    """A music prompt written by an LLM from an image caption, as PaddleMIX's music app has ChatGLM write it:
    `llm_instruction` with `{caption}` replaced is the LLM's prompt, the first line of its reply the music prompt."""

    name = "music_prompt_writing"
    description = "LLM: caption -> music prompt (PaddleMIX's ChatGLM step)"
    inputs = {"caption": Port("text")}
    outputs = {"prompt": "text", "reply": "text"}
    main_output = "prompt"
    models = {"llm": "causal-lm"}
    default_models = {"llm": "Qwen/Qwen2.5-0.5B-Instruct"}  # the dialog app's; PaddleMIX's THUDM/chatglm-6b
    options = {"llm_instruction": LLM_MUSIC_INSTRUCTION, "max_new_tokens": 64}
    option_specs = {"llm_instruction": OptionSpec("text", label="LLM instruction (holds {caption})"),
                    "max_new_tokens": OptionSpec("int", 1, 1024, 1, label="LLM reply length (tokens)")}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        from appflow.task import check_int_option

        instruction = options["llm_instruction"]
        if not isinstance(instruction, str) or CAPTION_FIELD not in instruction:
            raise ValueError(f"llm_instruction must be a string holding {CAPTION_FIELD} (where the image's caption "
                             f"goes), got {instruction!r}.")
        tokens = cls.option_specs["max_new_tokens"]
        check_int_option("max_new_tokens", options["max_new_tokens"], tokens.low, tokens.high)

    def run(self, models, options, *, caption: str) -> dict[str, Any]:
        from appflow.tasks.dialog import generate_reply

        instruction = options["llm_instruction"].replace(CAPTION_FIELD, caption.strip().rstrip("."))
        reply = generate_reply(models.get("llm"), instruction, options["max_new_tokens"])
        return {"prompt": music_prompt_from_reply(reply), "reply": reply}
