"""Tiny vision-language checkpoints (CLIP, SigLIP, BLIP-2 with OPT or T5) built offline from configs.

Hub weights cannot be downloaded in CI, so tests save these folders with `save_pretrained` and
load them back through `mixkit.models.vlm.load_vlm`, the loader users call on real checkpoints.
Tokenizers are trained on a handful of sentences with the `tokenizers` library, so every piece
(config, weights, processor, tokenizer) exists on disk just like a downloaded model. Sizes follow
transformers' own unit tests for these models.
"""

from __future__ import annotations

from pathlib import Path

from mixkit.testing.tiny_models import tiny_clip_tokenizer

TINY_IMAGE_SIZE = 30
TINY_NUM_QUERY_TOKENS = 4
IMAGE_TOKEN = "<image>"

_SENTENCES = [
    "a photo of a cat sitting on a red sofa",
    "a dog running in the park with a ball",
    "Question: what color is the car? Short answer: blue",
    "two people riding bikes down the street at night",
    "a bowl of fruit on a wooden table next to a window",
    "what is in the picture? describe the image in detail",
]


def tiny_byte_bpe_tokenizer(vocab_size: int = 320):
    """OPT-style byte-level BPE: ids 0-3 are <s>, <pad>, </s>, <unk> as in OPT; plus <image>."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_SENTENCES, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", IMAGE_TOKEN], show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="</s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


def tiny_word_level_t5_tokenizer():
    """T5-style word-level tokenizer: <pad>=0, </s>=1, <unk>=2 as in T5, appending </s> to every text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = sorted({word for sentence in _SENTENCES for word in sentence.replace("?", " ?").split()})
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, IMAGE_TOKEN: 3}
    vocab.update({word: i + 4 for i, word in enumerate(words)})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def _tiny_vision_kwargs() -> dict:
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                image_size=TINY_IMAGE_SIZE, patch_size=6, layer_norm_eps=1e-5)


def _image_processor_kwargs(mean, std) -> dict:
    return dict(size={"height": TINY_IMAGE_SIZE, "width": TINY_IMAGE_SIZE}, image_mean=mean, image_std=std,
                do_convert_rgb=True)


def build_tiny_clip(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `CLIPModel` with its processor (byte-level CLIP tokenizer, 30 px images)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    folder = Path(folder)
    tokenizer = tiny_clip_tokenizer()
    vocab_size = len(tokenizer)
    config = CLIPConfig(
        text_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                         vocab_size=vocab_size, max_position_embeddings=77,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id),
        vision_config=_tiny_vision_kwargs(), projection_dim=16,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    model.save_pretrained(folder)
    processor = CLIPProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": TINY_IMAGE_SIZE}, crop_size={"height": TINY_IMAGE_SIZE, "width": TINY_IMAGE_SIZE}
        ),
        tokenizer=tokenizer,
    )
    processor.save_pretrained(folder)
    return folder


def tiny_blip2_config(language_model: str = "opt", vocab_size: int = 320, image_token_index: int = 4):
    """A `Blip2Config` with a 2-layer Q-Former (cross-attention every layer) and a 2-layer OPT or T5."""
    from transformers import Blip2Config

    if language_model == "opt":
        text = dict(model_type="opt", vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2,
                    num_attention_heads=4, ffn_dim=32, max_position_embeddings=64, word_embed_proj_dim=16,
                    bos_token_id=2, eos_token_id=2, pad_token_id=1)
    elif language_model == "t5":
        text = dict(model_type="t5", vocab_size=vocab_size, d_model=16, d_kv=4, d_ff=32, num_layers=2,
                    num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                    pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    else:
        raise ValueError(f"tiny BLIP-2 language_model must be 'opt' or 't5', got {language_model!r}")
    return Blip2Config(
        vision_config=_tiny_vision_kwargs(),
        qformer_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                            cross_attention_frequency=1, vocab_size=99, max_position_embeddings=32),
        text_config=text, num_query_tokens=TINY_NUM_QUERY_TOKENS, image_token_index=image_token_index,
    )


def build_tiny_blip2(folder: str | Path, seed: int = 0, language_model: str = "opt") -> Path:
    """Save a tiny `Blip2ForConditionalGeneration` (OPT or Flan-T5 style) with a `Blip2Processor`."""
    import torch
    from transformers import Blip2ForConditionalGeneration, Blip2Processor, BlipImageProcessor

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer() if language_model == "opt" else tiny_word_level_t5_tokenizer()
    tokenizer.padding_side = "left" if language_model == "opt" else "right"
    image_token_index = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    config = tiny_blip2_config(language_model, vocab_size=len(tokenizer), image_token_index=image_token_index)
    torch.manual_seed(seed)
    model = Blip2ForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    image_processor = BlipImageProcessor(**_image_processor_kwargs([0.48145466, 0.4578275, 0.40821073],
                                                                   [0.26862954, 0.26130258, 0.27577711]))
    Blip2Processor(image_processor=image_processor, tokenizer=tokenizer,
                   num_query_tokens=TINY_NUM_QUERY_TOKENS).save_pretrained(folder)
    return folder


def build_tiny_siglip(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `SiglipModel` with a word-level tokenizer (texts padded to 64 as SigLIP expects)."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    folder = Path(folder)
    tokenizer = tiny_word_level_t5_tokenizer()
    config = SiglipConfig(
        text_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                         vocab_size=len(tokenizer), max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                         eos_token_id=1),
        vision_config=_tiny_vision_kwargs(),
    )
    torch.manual_seed(seed)
    SiglipModel(config).eval().save_pretrained(folder)
    image_processor = SiglipImageProcessor(**_image_processor_kwargs([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]))
    SiglipProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def build_tiny_instructblip(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `InstructBlipForConditionalGeneration` (OPT LM; the instruction also enters the Q-Former)."""
    import torch
    from transformers import (
        BlipImageProcessor,
        InstructBlipConfig,
        InstructBlipForConditionalGeneration,
        InstructBlipProcessor,
    )

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer()
    qformer_tokenizer = tiny_word_level_t5_tokenizer()
    blip2 = tiny_blip2_config("opt", vocab_size=len(tokenizer),
                              image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))
    qformer = blip2.qformer_config.to_dict()
    qformer.update(vocab_size=len(qformer_tokenizer), pad_token_id=0)
    config = InstructBlipConfig(vision_config=blip2.vision_config.to_dict(), qformer_config=qformer,
                                text_config=blip2.text_config.to_dict(), num_query_tokens=TINY_NUM_QUERY_TOKENS,
                                image_token_index=blip2.image_token_index)
    torch.manual_seed(seed)
    InstructBlipForConditionalGeneration(config).eval().save_pretrained(folder)
    image_processor = BlipImageProcessor(**_image_processor_kwargs([0.48145466, 0.4578275, 0.40821073],
                                                                   [0.26862954, 0.26130258, 0.27577711]))
    InstructBlipProcessor(image_processor=image_processor, tokenizer=tokenizer, qformer_tokenizer=qformer_tokenizer,
                          num_query_tokens=TINY_NUM_QUERY_TOKENS).save_pretrained(folder)
    return folder


def build_tiny_llava(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `LlavaForConditionalGeneration`: CLIP tower (25 patches), MLP projector, Llama LM."""
    import torch
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer()
    image_token_index = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    text = dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                bos_token_id=2, eos_token_id=2, pad_token_id=1)
    vision = dict(_tiny_vision_kwargs(), model_type="clip_vision_model")
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_index,
                         vision_feature_layer=-2, vision_feature_select_strategy="default",
                         projector_hidden_act="gelu")
    torch.manual_seed(seed)
    LlavaForConditionalGeneration(config).eval().save_pretrained(folder)
    image_processor = CLIPImageProcessor(size={"shortest_edge": TINY_IMAGE_SIZE},
                                         crop_size={"height": TINY_IMAGE_SIZE, "width": TINY_IMAGE_SIZE})
    LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=6,
                   vision_feature_select_strategy="default", num_additional_image_tokens=1,
                   image_token=IMAGE_TOKEN).save_pretrained(folder)
    return folder
