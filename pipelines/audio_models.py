"""The text-to-audio model families `TextToAudio` runs, keyed by their diffusers pipeline class name.

AudioLDM, MusicLDM and AudioLDM 2 share the latent diffusion over a mel spectrogram (UNet, mel VAE, HiFi-GAN
vocoder) and differ in how the prompt conditions the UNet: AudioLDM and MusicLDM feed one CLAP text embedding as the
UNet's class label; AudioLDM 2 projects CLAP and Flan-T5 (or, for text-to-speech checkpoints, a VITS encoder of the
`transcription`) into GPT-2, whose generated states and the T5 states fill the UNet's two cross-attention streams.
A family is its prompt encoding, its defaults (diffusers' `__call__` defaults) and the extra repo folders a hub
download needs; the denoising loop is `TextToAudio`'s, the same for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from mixkit.registry import Registry


@dataclass(frozen=True)
class AudioPrompt:
    """What one call conditions on: `count` clips of `prompt`, guided away from `negative_prompt` when `guided`."""

    prompt: str
    negative_prompt: str
    count: int
    guided: bool
    transcription: str = ""


@dataclass(frozen=True)
class AudioModelFamily:
    """One diffusers text-to-audio pipeline class: how it encodes a prompt and what a call defaults to."""

    class_name: str  # the diffusers pipeline class, as model_index.json's `_class_name` names it
    label: str  # what users call it ("AudioLDM 2")
    default_steps: int  # diffusers' `num_inference_steps` default
    default_cfg: float  # diffusers' `guidance_scale` default
    # (pipeline, AudioPrompt, device) -> the UNet's conditioning keywords, unconditional rows first when guided
    encode: Callable[[Any, AudioPrompt, Any], dict[str, Any]]
    # folders a hub repo holds beyond an SD pipeline's (unet, vae, text_encoder(_2), tokenizer(_2), scheduler) ->
    # their weight-file stems (None: every file of the folder, e.g. a feature extractor's config)
    extra_folders: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    # whether a loaded pipeline is a text-to-speech checkpoint that reads `transcription`
    reads_transcription: Callable[[Any], bool] = lambda pipeline: False
    # the same, told from the model's model_index.json (a dict) before anything loads
    index_reads_transcription: Callable[[dict], bool] = lambda index: False

    def load_class(self):
        """The diffusers pipeline class (imported when a model loads, not when the registry is read)."""
        import diffusers

        return getattr(diffusers, self.class_name)


AUDIO_MODEL_FAMILIES: Registry[AudioModelFamily] = Registry("text-to-audio pipeline class")


def family_named(class_name: Any, where: str) -> AudioModelFamily:
    """The family of a model_index.json `_class_name`; ValueError naming the accepted classes otherwise."""
    if isinstance(class_name, str) and class_name in AUDIO_MODEL_FAMILIES.names():
        return AUDIO_MODEL_FAMILIES.get(class_name)
    raise ValueError(f"{where} is a {class_name!r} pipeline, not a text-to-audio model; accepted pipeline classes: "
                     f"{', '.join(AUDIO_MODEL_FAMILIES.names())}. Pass a folder or hub id of one of those.")


def family_of(pipeline: Any) -> AudioModelFamily:
    """The family of a loaded diffusers pipeline (its class or a subclass of it); ValueError otherwise."""
    for cls in type(pipeline).__mro__:
        if cls.__name__ in AUDIO_MODEL_FAMILIES.names():
            return AUDIO_MODEL_FAMILIES.get(cls.__name__)
    return family_named(type(pipeline).__name__, "The model")


def _repeat_rows(embeddings, count: int):
    """Each row `count` times in a row (prompt k's clips together), as diffusers repeats per waveform."""
    return embeddings.repeat_interleave(count, dim=0)


def _encode_audioldm(pipe, request: AudioPrompt, device) -> dict[str, Any]:
    # diffusers' own CLAP encoding (normalised text embeddings), the UNet's class label
    embeddings = pipe._encode_prompt(request.prompt, device, request.count, request.guided, request.negative_prompt)
    return {"encoder_hidden_states": None, "class_labels": embeddings}


def _clap_text_features(pipe, text: str, device):
    """CLAP's projected text embedding of `text`, as MusicLDM conditions on it (not normalised, unlike AudioLDM's).

    diffusers' MusicLDMPipeline reads `get_text_features` as a tensor; transformers 5 returns an output holding it as
    `pooler_output`, so its own encoding fails there: both forms are taken here."""
    tokens = pipe.tokenizer([text], padding="max_length", max_length=pipe.tokenizer.model_max_length,
                            truncation=True, return_tensors="pt")
    features = pipe.text_encoder.get_text_features(tokens.input_ids.to(device),
                                                   attention_mask=tokens.attention_mask.to(device))
    features = getattr(features, "pooler_output", features)
    return features.to(dtype=pipe.text_encoder.text_model.dtype, device=device)


def _encode_musicldm(pipe, request: AudioPrompt, device) -> dict[str, Any]:
    import torch

    embeddings = _repeat_rows(_clap_text_features(pipe, request.prompt, device), request.count)
    if request.guided:
        negative = _repeat_rows(_clap_text_features(pipe, request.negative_prompt, device), request.count)
        embeddings = torch.cat([negative, embeddings])
    return {"encoder_hidden_states": None, "class_labels": embeddings}


def _is_text_to_speech(pipe) -> bool:
    return getattr(getattr(pipe.text_encoder_2, "config", None), "model_type", None) == "vits"


def _index_names_text_to_speech(index: dict) -> bool:
    """A model_index.json's `text_encoder_2` entry (`["transformers", "VitsModel"]`) names a VITS encoder."""
    entry = index.get("text_encoder_2")
    return isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[1] == "VitsModel"


def check_transcription_fits(transcription: str, reads_transcription: bool, label: str) -> None:
    """Refuse a transcription for a model that reads none (`label` names it, "AudioLDM 2"), and a missing one for a
    text-to-speech checkpoint; the one message both `TextToAudio` and AppFlow's build-time check give."""
    if transcription and not reads_transcription:
        raise ValueError(f"transcription is read only by AudioLDM 2 text-to-speech checkpoints (a VITS "
                         f"text_encoder_2, e.g. anhnct/audioldm2_gigaspeech); this {label} model makes sound from "
                         f"the prompt alone. Leave transcription empty, or load a text-to-speech checkpoint.")
    if reads_transcription and not transcription:
        raise ValueError("This AudioLDM 2 checkpoint is text-to-speech: pass transcription= (the words to speak); "
                         "the prompt describes the voice and the room.")


def _encode_audioldm2(pipe, request: AudioPrompt, device) -> dict[str, Any]:
    # diffusers' own encoding: CLAP + T5 (or VITS over the transcription) -> projection -> GPT-2 generation
    states, mask, generated = pipe.encode_prompt(
        request.prompt, device, request.count, request.guided, transcription=request.transcription or None,
        negative_prompt=request.negative_prompt)
    return {"encoder_hidden_states": generated, "encoder_hidden_states_1": states, "encoder_attention_mask_1": mask}


def register_audio_model_family(family: AudioModelFamily) -> AudioModelFamily:
    return AUDIO_MODEL_FAMILIES.register(family.class_name, family)


_TRANSFORMERS_WEIGHTS = ("model", "pytorch_model")
_DIFFUSERS_WEIGHTS = ("diffusion_pytorch_model",)

register_audio_model_family(AudioModelFamily(
    "AudioLDMPipeline", "AudioLDM", 10, 2.5, _encode_audioldm, {"vocoder": _TRANSFORMERS_WEIGHTS}))
register_audio_model_family(AudioModelFamily(
    "MusicLDMPipeline", "MusicLDM", 200, 2.0, _encode_musicldm,
    {"vocoder": _TRANSFORMERS_WEIGHTS, "feature_extractor": None}))
register_audio_model_family(AudioModelFamily(
    "AudioLDM2Pipeline", "AudioLDM 2", 200, 3.5, _encode_audioldm2,
    {"vocoder": _TRANSFORMERS_WEIGHTS, "feature_extractor": None, "projection_model": _DIFFUSERS_WEIGHTS,
     "language_model": _TRANSFORMERS_WEIGHTS}, _is_text_to_speech, _index_names_text_to_speech))
