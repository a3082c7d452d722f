"""Recipe for mixkit-tiny-blip2: a BLIP-2-style captioner and VQA model of the shapes world.

The parts are mixkit's modular BLIP-2: mixkit-tiny-clip's vision tower (frozen), a small Q-Former
bridge, and a small GPT-2 language model that speaks the world's word-level vocabulary. It is
trained by mixkit's own trainers, the way a real BLIP-2 is: `blip2-stage1` (ITC/ITM/ITG on the
Q-Former) and then `blip2-stage2` (bridge into the LM, on captions and VQA pairs). Unlike the real
one the tiny LM has no pre-training to keep, so stage 2 trains it too (`train_language_model`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.io.atomic import atomic_output_folder
from mixkit.tiny.recipe_common import (
    base_world,
    resolve_tiny_clip,
    start_recipe,
    write_record,
)
from mixkit.tiny.recipe_state import check_resume_settings, state_folder
from mixkit.tiny.world_tokenizer import build_world_tokenizer
from mixkit.tiny.world_vqa import question_kind, scene_questions
from mixkit.training.config_json import JsonConfig
from mixkit.training.lr_schedules import LR_SCHEDULES

logger = logging.getLogger(__name__)
VQA_TEMPLATE = "question: {} answer:"


@dataclass
class TinyBlip2Recipe(JsonConfig):
    output: str = "mixkit-tiny-blip2"
    clip: str = "mixkit-tiny-clip"
    work_dir: str | None = None  # dataset and stage-1 output; default: <output>.work (removed at the end)
    train_images: int = 4000
    image_size: int = 64
    qformer_hidden: int = 96
    qformer_layers: int = 2
    query_tokens: int = 8
    # A learned position per vision token, added before the Q-Former's cross-attention: the
    # tiny-clip tower's last layer says what is in the image but barely where (its zero-shot
    # position is 13% among 9), so without it every caption says "at the top left".
    image_positions: bool = True
    # Each "where is the …?" pair is written this many times into the stage-2 mix: learning where things
    # are has a long plateau, which position questions alone get past in ~600 steps and a mix where they
    # are one line in seven did not in 3000.
    position_question_repeats: int = 4
    # The same lever for "what size is the …?": size is the attribute the captioner reads worst.
    size_question_repeats: int = 1
    # Measured (README): the tower trained too at 3e-5 over the 5000 stage-2 steps read size 93% against 89%
    # frozen on the recipe's renders (86% against 87% on `mixkit eval tiny`'s) and position 99% against 95%;
    # at 1e-4 over 1200 steps position was lost, at 1e-3 the tower collapsed.
    train_vision: bool = True
    vision_learning_rate: float = 3e-5
    # Share of training images passed through a VAE (encode, then decode) before training: a text-to-image
    # model's pictures come out of its VAE decoder, softer than renders (small shapes round off), and the
    # captioner reads them in `mixkit eval tiny`'s round trip. Labels stay exact: they are the renders' scenes.
    # Measured (README): 0.5 took the round trip from 88.5% to 91.5% on 200 prompts of another seed and
    # 89.5% to 90.5% on `mixkit eval tiny`'s, captions of clean renders unchanged within noise.
    decoded_fraction: float = 0.5
    decoder_vae: str = "mixkit-tiny-sd"  # a diffusers SD folder or shipped name (its vae/), or a VAE folder
    # Before the BLIP-2 stages the tower learns to read every attribute from its CLS token (`tower_warmup`),
    # since tiny-clip's contrastive training never asked it for size, while a loss of weight
    # `tower_warmup_feature_weight` keeps its last-layer tokens near their values before the warm-up. Measured
    # (README): without that loss the captioner named sizes at 93.5-96% but never learnt colour (5-13%); with it
    # (weight 1) size 95.5% on `mixkit eval tiny`'s renders against 86.4% without a warm-up, colour 99.5%.
    tower_warmup_steps: int = 2400
    tower_warmup_images: int = 16000
    tower_warmup_learning_rate: float = 1e-3
    tower_warmup_feature_weight: float = 1.0
    lm_hidden: int = 128
    lm_layers: int = 2
    stage1_steps: int = 200
    # Measured with one thread (README): at 3000 constant-rate steps the default recipe learnt position in one
    # run (90%) and not in its rerun (34%): where-questions leave their plateau near that step. 5000 steps
    # got past it in both schedules tried, and the cosine decay also read size better (89% against 82%).
    stage2_steps: int = 5000
    lr_schedule: str = "cosine"  # stage 2, after its 50 warm-up steps: "constant" or "cosine"
    batch_size: int = 32
    learning_rate: float = 1e-3
    seed: int = 0
    threads: int = 0
    eval_images: int = 200  # unseen renders the finished captioner is scored on (recipe_record.json's metrics)
    # Resume states of stage 2 (`recipe_blip2_resume`) in <output>-state every this many stage-2 steps (0: only at
    # --stop-at-step, which counts stage-2 steps too)
    checkpoint_every: int = 0
    resume_from: str = ""  # a <output>-state folder (or step-*.pt in it): continue that run bit for bit

    def check(self) -> None:
        check_resume_settings(self)
        for name in ("train_images", "image_size", "qformer_hidden", "qformer_layers", "query_tokens", "lm_hidden",
                     "lm_layers", "stage2_steps", "batch_size", "position_question_repeats",
                     "size_question_repeats", "tower_warmup_images", "eval_images"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.decoded_fraction, bool) or not isinstance(self.decoded_fraction, (int, float)) \
                or not 0 <= self.decoded_fraction <= 1:
            raise ValueError(f"decoded_fraction must be a number in [0, 1], got {self.decoded_fraction!r}")
        for name in ("stage1_steps", "tower_warmup_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0 (0 skips that stage), got {value!r}")
        if isinstance(self.tower_warmup_learning_rate, bool) or not isinstance(self.tower_warmup_learning_rate, (int, float)) \
                or not self.tower_warmup_learning_rate > 0:
            raise ValueError(f"tower_warmup_learning_rate must be a number > 0, got {self.tower_warmup_learning_rate!r}")
        weight = self.tower_warmup_feature_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise ValueError(f"tower_warmup_feature_weight must be a number >= 0 (0: off), got {weight!r}")
        LR_SCHEDULES.get(self.lr_schedule)
        self.clip = resolve_tiny_clip(self.clip)


def write_world_dataset(folder: Path, count: int, seed: int, size: int,
                        question_repeats: dict[str, int] | None = None, decoded_fraction: float = 0.0,
                        decoder_vae: str | None = None) -> tuple[Path, Path]:
    """Images plus two manifests: captions (stage 1) and captions mixed with VQA pairs (stage 2).

    `question_repeats` maps a kind of question (`world_vqa.QUESTION_KINDS`) to how many times each such
    pair is written into the stage-2 mix; kinds it does not name are written once. `decoded_fraction` of
    the images (a seeded choice) are replaced by their round trip through the VAE `decoder_vae`.
    """
    from mixkit.data.shapes import generate_samples

    world = dataclasses.replace(base_world(), caption_mode="rich")
    images = folder / "images"
    images.mkdir(parents=True, exist_ok=True)
    samples = list(generate_samples(count, seed, world))
    rendered = _with_vae_share([sample.render(size, world) for sample in samples], decoded_fraction, decoder_vae,
                               seed + 1)
    captions, mixed = [], []
    for sample, image in zip(samples, rendered):
        name = f"images/{sample.index:06d}.png"
        image.save(folder / name)
        captions.append(json.dumps({"image": name, "text": sample.caption}))
        mixed.append(json.dumps({"image": name, "text": sample.caption}))
        for question, answer in scene_questions(sample.scene):
            repeats = (question_repeats or {}).get(question_kind(question), 1)
            mixed += [json.dumps({"image": name, "question": question, "answer": answer})] * repeats
    caption_manifest, mixed_manifest = folder / "captions.jsonl", folder / "captions_and_vqa.jsonl"
    caption_manifest.write_text("\n".join(captions) + "\n", encoding="utf-8")
    mixed_manifest.write_text("\n".join(mixed) + "\n", encoding="utf-8")
    return caption_manifest, mixed_manifest


def vae_round_trip(images: list, source: str, batch_size: int = 64) -> list:
    """Each PIL image encoded by the VAE of `source` (its posterior's mean) and decoded again."""
    import numpy as np
    from diffusers import AutoencoderKL
    from PIL import Image

    from mixkit.io.sources import resolve_model_source

    folder = Path(resolve_model_source(source))
    vae = AutoencoderKL.from_pretrained(folder / "vae" if (folder / "vae").is_dir() else folder,
                                        torch_dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            batch = torch.from_numpy(np.stack([np.asarray(im.convert("RGB")) for im in images[start:start + batch_size]]))
            pixels = batch.permute(0, 3, 1, 2).float().div(127.5).sub(1.0)
            decoded = vae.decode(vae.encode(pixels).latent_dist.mean).sample
            arrays = decoded.clamp(-1, 1).add(1).mul(127.5).round().byte().permute(0, 2, 3, 1).numpy()
            out += [Image.fromarray(a) for a in arrays]
    return out


def tiny_clip_vision_tower(clip_folder: str):
    """tiny-clip's vision tower as a CLIPVisionModel (fp32)."""
    from transformers import CLIPModel, CLIPVisionModel

    clip = CLIPModel.from_pretrained(clip_folder, torch_dtype=torch.float32)
    vision = CLIPVisionModel(clip.config.vision_config)
    source = clip.state_dict()
    vision.load_state_dict({key: source[key if key in source else f"vision_model.{key}"] for key in vision.state_dict()})
    return vision


def warm_up_vision(recipe: TinyBlip2Recipe, vision) -> list[dict]:
    """Train the tower on every attribute of fresh renders (`tower_warmup`), with the recipe's VAE share."""
    import numpy as np
    from transformers import CLIPImageProcessor

    from mixkit.data.shapes import generate_samples
    from mixkit.tiny.tower_warmup import attribute_targets, warm_up_tower

    world = base_world()
    samples = list(generate_samples(recipe.tower_warmup_images, recipe.seed + 101, world))
    rendered = _with_vae_share([s.render(recipe.image_size, world) for s in samples], recipe.decoded_fraction,
                               recipe.decoder_vae, recipe.seed + 102)
    images = torch.from_numpy(np.stack([np.asarray(image.convert("RGB")) for image in rendered])).permute(0, 3, 1, 2)
    processor = CLIPImageProcessor.from_pretrained(recipe.clip)
    return warm_up_tower(vision, images.contiguous(), attribute_targets([s.scene for s in samples]),
                         steps=recipe.tower_warmup_steps, learning_rate=recipe.tower_warmup_learning_rate,
                         batch_size=recipe.batch_size, image_mean=processor.image_mean,
                         image_std=processor.image_std, seed=recipe.seed,
                         feature_weight=recipe.tower_warmup_feature_weight)


def _with_vae_share(images: list, fraction: float, decoder_vae: str | None, seed: int) -> list:
    """`images` with a seeded `fraction` of them replaced by their round trip through `decoder_vae`."""
    if fraction <= 0:
        return images
    chosen = torch.rand(len(images), generator=torch.Generator().manual_seed(seed)) < fraction
    picked = [i for i in range(len(images)) if chosen[i]]
    images = list(images)
    for i, image in zip(picked, vae_round_trip([images[i] for i in picked], decoder_vae or "mixkit-tiny-sd")):
        images[i] = image
    return images


def build_initial_model(recipe: TinyBlip2Recipe, folder: Path, tokenizer, image_positions: int = 0,
                        vision=None) -> Path:
    """The untrained modular BLIP-2 (vision tower: `vision`, else tiny-clip's), saved for the trainers."""
    from transformers import CLIPConfig, GPT2Config, GPT2LMHeadModel

    from mixkit.models.vlm.modular import (
        QFormerBridge,
        VisionLanguageModel,
        save_modular_vlm,
    )
    from mixkit.models.vlm.modular.bridges import QFormerBridgeConfig
    from mixkit.models.vlm.modular.qformer import QFormerConfig

    vision = vision if vision is not None else tiny_clip_vision_tower(recipe.clip)
    clip = CLIPConfig.from_pretrained(recipe.clip)
    torch.manual_seed(recipe.seed)
    qformer = QFormerConfig(hidden_size=recipe.qformer_hidden, num_hidden_layers=recipe.qformer_layers,
                            num_attention_heads=4, intermediate_size=4 * recipe.qformer_hidden,
                            encoder_hidden_size=clip.vision_config.hidden_size, cross_attention_frequency=1,
                            num_query_tokens=recipe.query_tokens, max_position_embeddings=64,
                            image_positions=image_positions)
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=qformer, output_size=recipe.lm_hidden))
    lm = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=recipe.lm_hidden,
                                    n_layer=recipe.lm_layers, n_head=4, bos_token_id=tokenizer.bos_token_id,
                                    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    model = VisionLanguageModel(vision, bridge, lm)
    return save_modular_vlm(model, folder, tokenizer=tokenizer, image_size=recipe.image_size,
                            caption_prompt="", vqa_template=VQA_TEMPLATE, overwrite=True)


def _image_tokens(recipe: TinyBlip2Recipe, vision_config) -> int:
    """How many tokens the vision tower gives the Q-Former (patches + CLS), or 0 without positions."""
    if not recipe.image_positions:
        return 0
    return (recipe.image_size // vision_config.patch_size) ** 2 + 1


def train_tiny_blip2(recipe: TinyBlip2Recipe, stop_at_step: int | None = None):
    """`mixkit train recipe tiny-blip2`: data, tower warm-up, stage 1, stage 2, evaluation, the fp16 folder.

    `stop_at_step` (a stage-2 step) ends stage 2 there with a resume state in <output>-state (as `checkpoint_every`
    writes them) and writes what it has; `resume_from` rebuilds the stages before stage 2 (seeded, so the same) and
    continues stage 2 from its state, ending with the weights of a run that never stopped."""
    from transformers import CLIPConfig

    from mixkit.tiny.recipe_blip2_resume import (check_stage2_start, read_blip2_resume, stage2_start_digest,
                                                 write_run_file)
    from mixkit.training.blip2_stage1_config import Blip2Stage1Config
    from mixkit.training.blip2_stage1_trainer import run_blip2_stage1
    from mixkit.training.blip2_stage2_config import Blip2Stage2Config
    from mixkit.training.blip2_stage2_trainer import train_blip2_stage2
    from mixkit.training.training_result import TrainingResult

    clock, curve = start_recipe(recipe), []
    if stop_at_step is not None and not 0 < stop_at_step <= recipe.stage2_steps:
        raise ValueError(f"--stop-at-step counts stage-2 steps: it must be in 1..stage2_steps={recipe.stage2_steps}, "
                         f"got {stop_at_step}")
    resumed = read_blip2_resume(recipe.resume_from, recipe) if recipe.resume_from else None
    if resumed is not None and stop_at_step is not None and stop_at_step <= resumed.step:
        raise ValueError(f"--stop-at-step {stop_at_step} is not after stage-2 step {resumed.step}, where "
                         f"{resumed.path} resumes; stop at a later step")
    # Every stage draws from its own seed; the global RNG is seeded too, so nothing depends on what ran before in
    # this process (the tower warm-up's heads once did: two runs in one process gave two captioners).
    torch.manual_seed(recipe.seed)
    output = Path(recipe.output)
    work = Path(recipe.work_dir) if recipe.work_dir else output.with_name(output.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tokenizer = build_world_tokenizer()
    tokenizer.save_pretrained(work / "tokenizer")
    captions, mixed = write_world_dataset(work / "data", recipe.train_images, recipe.seed, recipe.image_size,
                                           {"position": recipe.position_question_repeats,
                                            "size": recipe.size_question_repeats},
                                           recipe.decoded_fraction, recipe.decoder_vae)
    image_positions = _image_tokens(recipe, CLIPConfig.from_pretrained(recipe.clip).vision_config)
    curve.append({"stage": "data", "wall_seconds": clock.wall()})
    vision = tiny_clip_vision_tower(recipe.clip)
    if recipe.tower_warmup_steps:
        warmup = warm_up_vision(recipe, vision)
        curve.append({"stage": "tower_warmup", "steps": recipe.tower_warmup_steps, "curve": warmup,
                      "wall_seconds": clock.wall()})
    initial = build_initial_model(recipe, work / "initial", tokenizer, image_positions, vision)
    qformer_from = None
    if recipe.stage1_steps:
        stage1 = Blip2Stage1Config(
            dataset=str(captions), output=str(work / "stage1"), vision_model=str(initial), tokenizer=str(work / "tokenizer"),
            qformer={"hidden_size": recipe.qformer_hidden, "num_hidden_layers": recipe.qformer_layers,
                     "num_attention_heads": 4, "intermediate_size": 4 * recipe.qformer_hidden,
                     "cross_attention_frequency": 1, "num_query_tokens": recipe.query_tokens,
                     "max_position_embeddings": 64, "image_positions": image_positions},
            embed_dim=64, batch_size=recipe.batch_size, max_steps=recipe.stage1_steps,
            learning_rate=recipe.learning_rate, seed=recipe.seed)
        result = run_blip2_stage1(stage1)
        curve.append({"stage": "stage1", "steps": result.steps, "final_loss": _last(result.losses),
                      "wall_seconds": clock.wall()})
        qformer_from = str(work / "stage1")
    states = state_folder(recipe.output)
    keeps_states = bool(recipe.checkpoint_every or stop_at_step or resumed)
    if keeps_states:
        start = stage2_start_digest([initial, *([work / "stage1"] if qformer_from else [])])
        if resumed is not None:
            check_stage2_start(resumed, start)
        write_run_file(states, recipe, start)
    # A stop step ends stage 2 there, on the schedule of the whole run (so a resumed run is the unbroken one), with a
    # resume state and the model as it is, which the recipe scores and writes.
    stage2 = Blip2Stage2Config(
        model=str(initial), dataset=str(mixed), output=str(work / "stage2"), qformer_from=qformer_from,
        prompt=VQA_TEMPLATE, caption_prompt="", train_language_model=True, train_vision_encoder=recipe.train_vision,
        vision_learning_rate=recipe.vision_learning_rate, batch_size=recipe.batch_size,
        max_steps=recipe.stage2_steps, learning_rate=recipe.learning_rate, warmup_steps=50,
        lr_schedule=recipe.lr_schedule, seed=recipe.seed, checkpoint_every=recipe.checkpoint_every,
        checkpoint_dir=str(states) if keeps_states else None,
        resume_from=str(resumed.path) if resumed is not None else None)
    result = train_blip2_stage2(stage2, stop_at_step=stop_at_step, write_at_stop=True)
    curve.append({"stage": "stage2", "steps": result.steps, "final_loss": _last(result.losses),
                  "wall_seconds": clock.wall(), **({"resumed_at": resumed.step} if resumed is not None else {})})
    metrics = evaluate_captioner(work / "stage2", recipe.seed + 7, recipe.eval_images)
    finished = _save_half(work / "stage2", output)
    write_record(finished, "tiny-blip2", recipe, metrics, curve, clock)
    shutil.rmtree(work, ignore_errors=True)
    return TrainingResult(steps=result.steps, seconds=clock.wall(), output=finished, first_step=result.first_step,
                          last_checkpoint=result.last_checkpoint)


def _last(losses) -> float | None:
    return round(float(losses[-1]), 4) if losses else None


def evaluate_captioner(folder: Path, seed: int, count: int = 200) -> dict[str, float]:
    """Caption and VQA accuracy on unseen renders (held-out combinations included)."""
    from mixkit.data.shapes import generate_samples
    from mixkit.evaluation import score_captions
    from mixkit.models.vlm import load_vlm

    world = dataclasses.replace(base_world(), held_out=())
    samples = generate_samples(count, seed, world)
    images = [s.render(64, world) for s in samples]
    vlm = load_vlm(str(folder))
    captions = [c for start in range(0, count, 50) for c in vlm.caption(images[start:start + 50])]
    scores = {f"caption/{k}": round(v, 4) for k, v in score_captions(captions, [s.scene for s in samples]).items()}
    questions = [(i, q, a) for i, s in enumerate(samples) for q, a in scene_questions(s.scene)]
    answers = []
    for start in range(0, len(questions), 50):
        chunk = questions[start:start + 50]
        answers += vlm.answer([images[i] for i, _, _ in chunk], [q for _, q, _ in chunk])
    right = [a.strip() == truth for a, (_, _, truth) in zip(answers, questions)]
    scores["vqa/accuracy"] = round(sum(right) / len(right), 4)
    return scores


def _save_half(source: Path, output: Path) -> Path:
    """Copy the trained folder to `output` with fp16 weights (the shipped form)."""
    from safetensors.torch import load_file, save_file

    with atomic_output_folder(output, replace=True) as staged:
        shutil.copytree(source, staged, dirs_exist_ok=True)
        for path in staged.glob("*.safetensors"):
            tensors = {k: (v.half() if v.is_floating_point() else v) for k, v in load_file(path).items()}
            save_file(tensors, path, metadata={"format": "pt"})
    return output
