"""Text to music (PaddleMIX's `music_generation`): AudioLDM, MusicLDM or AudioLDM 2; cvssp/audioldm by default as
PaddleMIX's app.

The model is a diffusers `AudioLDMPipeline`, `MusicLDMPipeline` or `AudioLDM2Pipeline` (PaddleMIX ships AudioLDM 2 in
ppdiffusers too), chosen by the folder's model_index.json and run by `pipelines.text_to_audio.TextToAudio` with the SD
apps' seed, batch, progress and Interrupt conventions. Image to music captions the picture first and turns the
caption into a music prompt: PaddleMIX asks an LLM (ChatGLM) to write it, as `music_prompt_writing` does (any causal
LM, or a `reply(prompt) -> str` function); `music_prompt` fills a template instead (`music_template=`), which needs
no third model and runs offline.
"""

from __future__ import annotations

import os
from typing import Any

from appflow.audio import Audio
from appflow.model_kinds import ModelKind, local_config, register_model_kind
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


def _text_to_audio_classes() -> tuple[str, ...]:
    from pipelines.audio_models import AUDIO_MODEL_FAMILIES

    return tuple(AUDIO_MODEL_FAMILIES.names())


def _is_text_to_audio(obj: Any) -> bool:
    """A loaded `TextToAudio`, or a diffusers pipeline of an accepted class (wrapped when the task runs)."""
    from pipelines.audio_models import family_of
    from pipelines.text_to_audio import TextToAudio

    if isinstance(obj, TextToAudio):
        return True
    try:
        family_of(obj)
    except ValueError:
        return False
    return True


def transcription_reader(model: Any) -> tuple[bool, str] | None:
    """(whether the model reads a transcription, its family's label), without loading it: from a folder's or cached
    hub id's model_index.json (AudioLDM 2 with a VitsModel `text_encoder_2` is text-to-speech), or from a loaded
    pipeline's components; None when that cannot be told yet (a hub id not downloaded: the call tells)."""
    from pipelines.audio_models import family_named, family_of
    from pipelines.text_to_audio import TextToAudio

    if isinstance(model, TextToAudio):
        return model.reads_transcription, model.family.label
    if not isinstance(model, (str, os.PathLike)):  # a diffusers pipeline (`check_fit` accepted its class)
        family = family_of(model)
        return family.reads_transcription(model), family.label
    found = local_config(str(model))
    if found is None or found[0] != "model_index.json":
        return None
    family = family_named(found[1].get("_class_name"), f"The model {str(model)!r}")
    return family.index_reads_transcription(found[1]), family.label


register_model_kind(ModelKind(
    "text-to-audio", "a text-to-audio model (diffusers AudioLDMPipeline, MusicLDMPipeline or AudioLDM2Pipeline: "
    "folder, hub id or loaded pipeline)", _text_to_audio_classes, _load_text_to_audio, _is_text_to_audio))


def audio_option_specs() -> dict[str, OptionSpec]:
    """The bounds `check_audio_settings` holds these to: its module's constants."""
    from pipelines.params import SEED_MAX
    from pipelines.text_to_audio import MAX_AUDIO_SECONDS, MAX_CFG, MAX_STEPS, MAX_WAVEFORMS

    return {
        "negative_prompt": OptionSpec("text", label="Negative prompt"),
        "audio_length_in_s": OptionSpec("float", 0, MAX_AUDIO_SECONDS, 0.04, auto=True, low_open=True,
                                        label="Length in seconds (empty: the model's, 5.12 s AudioLDM, 10.24 s "
                                              "MusicLDM / AudioLDM 2)"),
        "steps": OptionSpec("int", 1, MAX_STEPS, 1, auto=True,
                            label="Sampling steps (empty: the model's, 10 AudioLDM, 200 MusicLDM / AudioLDM 2)"),
        "cfg_scale": OptionSpec("float", 0, MAX_CFG, 0.5, auto=True,
                                label="CFG Scale (empty: the model's, 2.5 AudioLDM, 2 MusicLDM, 3.5 AudioLDM 2)"),
        "seed": OptionSpec("seed", -1, SEED_MAX, 1, label="Seed"),
        "batch_size": OptionSpec("int", 1, MAX_WAVEFORMS, 1, label="Clips per prompt (clip k: seed + k)"),
        "transcription": OptionSpec("text", label="Transcription (AudioLDM 2 text-to-speech models only)"),
    }


@register_task
class TextToAudioTask(Task):
    """Clips from a prompt. `audios` holds every clip of the call (clip k drawn from seed + k, as A1111's batch
    images), `seeds` each clip's seed (-1 each when your own `generator=` drew the noise); `audio` is the first clip
    (samples with their rate: `result["audio"].save("clip.wav")`), `waveform` (also PaddleMIX's `result`) its float32
    samples at 16000 per second, `seed` its seed."""

    name = "text_to_audio"
    description = "Text to audio / music (AudioLDM, MusicLDM, AudioLDM 2: text encoders + UNet + mel VAE + HiFi-GAN)"
    inputs = {"prompt": Port("text")}
    outputs = {"waveform": "waveform", "audio": "audio", "seed": "int", "audios": "audios", "seeds": "ints"}
    main_output = "waveform"
    # its own role name, so a chain that also has an SD step (role "generator") needs both models
    models = {"audio_generator": "text-to-audio"}
    default_models = {"audio_generator": DEFAULT_TEXT_TO_AUDIO}
    # None: the model's own (its native length; diffusers' steps and guidance for its class)
    options = {"negative_prompt": "", "audio_length_in_s": None, "steps": None, "cfg_scale": None, "seed": -1,
               "batch_size": 1, "transcription": "", "generator": None}
    option_specs = audio_option_specs()
    # diffusers' / PaddleMIX's num_inference_steps, guidance_scale, num_waveforms_per_prompt
    option_aliases = {**GENERATION_ALIASES, "num_waveforms_per_prompt": "batch_size"}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        from pipelines.text_to_audio import check_audio_settings

        check_audio_settings(**options)

    @classmethod
    def check_options_for_models(cls, options: dict[str, Any], models: dict[str, Any], *, at_call: bool) -> None:
        from pipelines.audio_models import check_transcription_fits

        told = transcription_reader(models["audio_generator"])
        # a text-to-speech model's flow may be built without its transcription (the web UI passes it per call)
        if told is not None and (at_call or options["transcription"]):
            check_transcription_fits(options["transcription"], *told)

    def run(self, models, options, *, prompt: str) -> dict[str, Any]:
        from pipelines.text_to_audio import TextToAudio

        model = models.get("audio_generator")
        if not isinstance(model, TextToAudio):  # a diffusers pipeline passed in models=
            model = TextToAudio(model)
        with one_call_at_a_time(model.pipeline):
            result = model(prompt, **options, **pipeline_hooks())
        clips = [Audio(waveform, result.sample_rate) for waveform in result.waveforms]
        return {"waveform": result.waveform, "audio": clips[0], "seed": result.seed, "audios": clips,
                "seeds": list(result.seeds)}


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
