"""BLIP-2 stage 2 trainer: the LM loss falls, frozen parts stay frozen, resume is exact, the output loads again."""

from __future__ import annotations

import json
import re

import pytest
import torch

from mixkit.models.vlm.modular import VisionLanguageModel
from mixkit.testing.tiny_vlm_training import build_tiny_modular_blip2, write_colour_captions, write_colour_vqa
from mixkit.training.blip2_stage2_config import BLIP2_VQA_PROMPT, Blip2Stage2Config
from mixkit.training.blip2_stage2_trainer import caption_tokenizer, load_stage1_qformer, train_blip2_stage2
from mixkit.training.vlm_lm_training import collate_token_rows, lm_loss
from mixkit.training.vlm_parts import load_tokenizer
from mixkit.training.vlm_samples import image_batch, scan_vlm_samples


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage2-world")
    return {"model": build_tiny_modular_blip2(root / "blip2"), "captions": write_colour_captions(root / "captions"),
            "vqa": write_colour_vqa(root / "vqa")}


def _config(world, tmp_path, **settings):
    values = dict(model=str(world["model"]), dataset=str(world["captions"]), output=str(tmp_path / "out"),
                  batch_size=4, max_steps=2, learning_rate=1e-2)
    values.update(settings)
    return Blip2Stage2Config(**values)


def _eval_loss(model, tokenizer, dataset, prompt=""):
    samples = scan_vlm_samples(dataset).samples
    ids, mask, labels = collate_token_rows([caption_tokenizer(tokenizer, prompt, "test")(s) for s in samples],
                                           tokenizer.pad_token_id, 32)
    with torch.no_grad():
        return lm_loss(model.eval(), image_batch([s.image for s in samples], 30), ids, mask, labels).item()


def test_loss_falls_and_output_captions_through_load_vlm(world, tmp_path):
    from PIL import Image

    from mixkit.models.vlm import load_vlm

    tokenizer = load_tokenizer(world["model"] / "tokenizer")
    base = VisionLanguageModel.from_pretrained(world["model"])
    before = _eval_loss(base, tokenizer, world["captions"])
    config = _config(world, tmp_path, max_steps=30, learning_rate=2e-2, train_language_model=True)
    result = train_blip2_stage2(config)
    trained = VisionLanguageModel.from_pretrained(result.output)
    after = _eval_loss(trained, load_tokenizer(result.output / "tokenizer"), world["captions"])
    assert result.steps == 30 and len(result.losses) == 30
    assert after < 0.2 * before, (before, after)
    vision_before, vision_after = base.vision_encoder.state_dict(), trained.vision_encoder.state_dict()
    assert all(torch.equal(vision_before[k], v) for k, v in vision_after.items())
    saved = json.loads((result.output / "mixkit_training_config.json").read_text())
    assert saved["train_language_model"] is True and saved["max_steps"] == 30
    # The folder is a save_modular_vlm folder: load_vlm captions with the trained LM, in the trained format.
    captions = load_vlm(result.output).caption([Image.new("RGB", (32, 32), (255, 0, 0))], max_new_tokens=12)
    assert re.fullmatch(r"a (red|blue|green|white) square", captions[0]), captions


def test_language_model_frozen_by_default(world, tmp_path):
    base = VisionLanguageModel.from_pretrained(world["model"]).state_dict()
    result = train_blip2_stage2(_config(world, tmp_path))
    trained = VisionLanguageModel.from_pretrained(result.output).state_dict()
    changed = {k.split(".")[0] for k in base if not torch.equal(base[k], trained[k])}
    assert changed == {"bridge"}
    assert not any(torch.equal(base[k], trained[k]) for k in ("bridge.query_tokens", "bridge.projection.weight"))


def test_train_vision_encoder_trains_the_tower_at_its_own_rate(world, tmp_path):
    """LAVIS's `freeze_vit: False`: the tower trains too, at `vision_learning_rate`, and is saved."""
    base = VisionLanguageModel.from_pretrained(world["model"]).state_dict()
    slow = train_blip2_stage2(_config(world, tmp_path / "slow", train_vision_encoder=True, vision_learning_rate=1e-6))
    fast = train_blip2_stage2(_config(world, tmp_path / "fast", train_vision_encoder=True, vision_learning_rate=1e-2))
    slow_state = VisionLanguageModel.from_pretrained(slow.output).state_dict()
    fast_state = VisionLanguageModel.from_pretrained(fast.output).state_dict()
    changed = {k.split(".")[0] for k in base if not torch.equal(base[k], fast_state[k])}
    assert changed == {"bridge", "vision_encoder"}

    def moved(state, key):
        return (state[key].float() - base[key].float()).abs().max().item()

    key = next(k for k in base if k.startswith("vision_encoder.") and k.endswith("fc1.weight"))
    assert moved(fast_state, key) > 1000 * moved(slow_state, key) > 0
    # The bridge's rate is the config's learning_rate in both runs: its first step moves it alike.
    torch.testing.assert_close(slow_state["bridge.projection.bias"], fast_state["bridge.projection.bias"],
                               atol=0.05, rtol=0)
    saved = json.loads((fast.output / "mixkit_training_config.json").read_text())
    assert saved["train_vision_encoder"] is True and saved["vision_learning_rate"] == 1e-2


def test_rate_groups_give_each_part_its_rate_and_decay_weights_only():
    from torch import nn

    from mixkit.training.vlm_lm_training import rate_groups

    model = nn.ModuleDict({"vision_encoder": nn.Linear(2, 2), "bridge": nn.Linear(2, 2)})
    named = dict(model.named_parameters())
    groups = rate_groups(named, 0.05, {"vision_encoder.": 1e-5})
    by_id = {id(p): name for name, p in named.items()}
    summary = [(sorted(by_id[id(p)] for p in g["params"]), g.get("lr"), g["weight_decay"]) for g in groups]
    assert summary == [(["bridge.weight"], None, 0.05), (["bridge.bias"], None, 0.0),
                       (["vision_encoder.weight"], 1e-5, 0.05), (["vision_encoder.bias"], 1e-5, 0.0)]
    assert rate_groups(named, 0.0, {}) == rate_groups(named, 0.0, {"text.": 1.0})  # an unused prefix adds nothing


def test_resume_is_exact(world, tmp_path):
    straight = train_blip2_stage2(_config(world, tmp_path / "a", max_steps=4, train_language_model=True))
    first = train_blip2_stage2(_config(world, tmp_path / "b", max_steps=4, train_language_model=True), stop_at_step=2)
    assert first.output is None and first.last_checkpoint.name == "step-00000002.pt"
    resumed = train_blip2_stage2(_config(world, tmp_path / "b", max_steps=4, train_language_model=True,
                                         resume_from=str(first.last_checkpoint.parent)))
    assert resumed.losses == straight.losses[2:]
    a = VisionLanguageModel.from_pretrained(straight.output).state_dict()
    b = VisionLanguageModel.from_pretrained(resumed.output).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_vqa_prompt_is_not_supervised(world, tmp_path):
    tokenizer = load_tokenizer(world["model"] / "tokenizer")
    sample = scan_vlm_samples(world["vqa"]).samples[0]
    prompt, target = caption_tokenizer(tokenizer, BLIP2_VQA_PROMPT, "test")(sample)
    ids, mask, labels = collate_token_rows([(prompt, target)], tokenizer.pad_token_id, 64)
    supervised = labels[0][labels[0] != -100].tolist()
    assert tokenizer.decode(supervised) == f" {sample.target}</s>"
    assert tokenizer.decode(ids[0, :len(prompt)]) == "Question: what colour is it? Short answer:"
    assert prompt == tokenizer("Question: what colour is it? Short answer:")["input_ids"]  # as load_vlm asks
    result = train_blip2_stage2(_config(world, tmp_path, dataset=str(world["vqa"]), prompt=BLIP2_VQA_PROMPT,
                                        max_steps=1))
    assert result.steps == 1 and result.output.is_dir()


def test_question_without_prompt_slot_fails_before_loading(world, tmp_path):
    with pytest.raises(ValueError, match=r"has a question but prompt '' has no '\{\}'"):
        train_blip2_stage2(_config(world, tmp_path, dataset=str(world["vqa"])))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("settings, message", [
    ({"prompt": "Q: {} A: {}"}, "at most one"),
    ({"max_text_length": 0}, "max_text_length must be a positive"),
    ({"learning_rate": 0}, "learning_rate must be > 0"),
    ({"mixed_precision": "fp8"}, "mixed_precision"),
    ({"train_language_model": "yes"}, "train_language_model"),
    ({"train_vision_encoder": 1}, "train_vision_encoder must be true or false"),
    ({"vision_learning_rate": -1.0}, "vision_learning_rate must be a finite number >= 0"),
])
def test_bad_settings(world, tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        _config(world, tmp_path, **settings).check()


def test_existing_output_and_missing_tokenizer_are_refused(world, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="already exists and is not an empty folder"):
        train_blip2_stage2(_config(world, tmp_path))
    bare = tmp_path / "bare"
    VisionLanguageModel.from_pretrained(world["model"]).save_pretrained(bare)
    with pytest.raises(ValueError, match="has no tokenizer/ subfolder; set tokenizer="):
        train_blip2_stage2(_config(world, tmp_path, model=str(bare), output=str(tmp_path / "o2")))
    assert not (tmp_path / "o2").exists()


def test_qformer_from_stage1_output(world, tmp_path):
    from mixkit.training.blip2_stage1_config import Blip2Stage1Config
    from mixkit.training.blip2_stage1_output import load_blip2_stage1
    from mixkit.training.blip2_stage1_trainer import run_blip2_stage1

    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                 cross_attention_frequency=1, num_query_tokens=4, max_position_embeddings=32, layer_norm_eps=1e-12)
    stage1 = run_blip2_stage1(Blip2Stage1Config(
        dataset=str(world["captions"]), output=str(tmp_path / "stage1"), vision_model=str(world["model"]),
        tokenizer=str(world["model"] / "tokenizer"), qformer=sizes, embed_dim=8, batch_size=4, max_steps=1))
    stage1_bridge, _ = load_blip2_stage1(stage1.output)
    model = VisionLanguageModel.from_pretrained(world["model"])
    projection = model.bridge.projection.weight.clone()
    load_stage1_qformer(model.bridge, str(stage1.output))
    loaded, source = model.bridge.state_dict(), stage1_bridge.state_dict()
    assert all(torch.equal(loaded[k], source[k]) for k in loaded if not k.startswith("projection."))
    assert torch.equal(model.bridge.projection.weight, projection)
    small = run_blip2_stage1(Blip2Stage1Config(
        dataset=str(world["captions"]), output=str(tmp_path / "small"), vision_model=str(world["model"]),
        tokenizer=str(world["model"] / "tokenizer"), qformer={**sizes, "num_query_tokens": 2}, embed_dim=8,
        batch_size=4, max_steps=1))
    with pytest.raises(ValueError, match="does not fit the model's Q-Former"):
        load_stage1_qformer(model.bridge, str(small.output))


def test_mixed_captions_and_questions_use_their_own_prompts(world, tmp_path):
    """With caption_prompt set, one JSONL can mix captions and VQA lines; both prompts are saved for load_vlm."""
    lines = [json.dumps({"image": str(world["captions"] / "red.png"), "caption": "a red square"}),
             json.dumps({"image": str(world["captions"] / "red.png"), "question": "what colour is it?", "answer": "red"})]
    manifest = tmp_path / "mixed.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = load_tokenizer(world["model"] / "tokenizer")
    caption, question = scan_vlm_samples(manifest).samples
    tokenize = caption_tokenizer(tokenizer, BLIP2_VQA_PROMPT, "test", caption_prompt="")
    assert tokenize(caption)[0] == tokenizer("")["input_ids"]
    assert tokenize(question)[0] == tokenizer("Question: what colour is it? Short answer:")["input_ids"]
    result = train_blip2_stage2(_config(world, tmp_path, dataset=str(manifest), prompt=BLIP2_VQA_PROMPT,
                                        caption_prompt="", max_steps=1))
    saved = json.loads((result.output / "config.json").read_text(encoding="utf-8"))
    assert saved["caption_prompt"] == "" and saved["vqa_template"] == BLIP2_VQA_PROMPT
    with pytest.raises(ValueError, match="caption_prompt must not contain"):
        _config(world, tmp_path, caption_prompt="Q: {}").check()


def test_the_shipped_tiny_blip2_trains_by_name(world, tmp_path):
    # The README says the shipped names work wherever a model path does; the trainers read them as folders
    # (tokenizer/ inside) and refused them ("not a saved VisionLanguageModel").
    result = train_blip2_stage2(_config(world, tmp_path, model="mixkit-tiny-blip2", max_steps=1, learning_rate=1e-4))
    assert result.output is not None and (result.output / "tokenizer").is_dir()
