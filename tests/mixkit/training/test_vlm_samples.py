"""Image-to-text samples: JSONL captions and VQA lines, batch order, prompts, token collation, train modes."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from mixkit.training.vlm_lm_training import collate_token_rows, set_train_modes
from mixkit.training.vlm_samples import VlmSample, batch_for_step, epoch_batches, format_prompt, scan_vlm_samples


def _manifest(tmp_path, lines):
    from PIL import Image

    Image.new("RGB", (8, 8), (255, 0, 0)).save(tmp_path / "red.png")
    manifest = tmp_path / "data.jsonl"
    manifest.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return manifest


def test_jsonl_captions_questions_and_skipped_images(tmp_path):
    manifest = _manifest(tmp_path, [{"image": "red.png", "caption": " a red square "},
                                    {"image": "red.png", "question": "colour?", "answer": "red"},
                                    {"image": "gone.png", "text": "missing"}])
    scan = scan_vlm_samples(manifest)
    assert scan.samples == [VlmSample(tmp_path / "red.png", "a red square"),
                            VlmSample(tmp_path / "red.png", "red", "colour?")]
    assert [p.name for p, _ in scan.skipped] == ["gone.png"] and "line 3" in scan.skipped[0][1]


@pytest.mark.parametrize("line, message", [
    ({"image": "red.png", "question": "colour?"}, r"data.jsonl, line 1: a VQA line needs non-empty 'question' and 'answer'"),
    ({"image": "red.png", "text": " "}, r"line 1 needs a non-empty 'text'"),
    ({"text": "no image"}, r"line 1 needs an 'image' key"),
])
def test_bad_manifest_lines_name_the_line(tmp_path, line, message):
    with pytest.raises(ValueError, match=message):
        scan_vlm_samples(_manifest(tmp_path, [line]))


def test_batch_order_is_a_seeded_permutation_per_epoch():
    epoch0, epoch1 = epoch_batches(10, 4, 0, seed=7), epoch_batches(10, 4, 1, seed=7)
    assert [len(b) for b in epoch0] == [4, 4, 2]
    assert sorted(i for b in epoch0 for i in b) == list(range(10)) and epoch0 != epoch1
    assert epoch0 == epoch_batches(10, 4, 0, seed=7)
    assert batch_for_step(10, 4, 7, 4) == epoch1[1]  # 3 batches per epoch: global batch 4 is epoch 1, batch 1


def test_prompt_slot_must_match_the_sample():
    caption, question = VlmSample(__file__, "red"), VlmSample(__file__, "red", "colour?")
    assert format_prompt("Question: {} Short answer:", question, "d") == "Question: colour? Short answer:"
    assert format_prompt("", caption, "d") == ""
    with pytest.raises(ValueError, match="has no question but prompt"):
        format_prompt("Question: {} Short answer:", caption, "d")


def test_collate_masks_prompt_and_padding_and_cuts_targets():
    ids, mask, labels = collate_token_rows([([5, 6], [7, 8, 9]), ([5], [7])], pad_id=0, max_length=4)
    assert ids.tolist() == [[5, 6, 7, 8], [5, 7, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert labels.tolist() == [[-100, -100, 7, 8], [-100, 7, -100, -100]]
    with pytest.raises(ValueError, match="a prompt is 4 tokens, which leaves no room"):
        collate_token_rows([([1, 2, 3, 4], [5])], pad_id=0, max_length=4)


def test_frozen_parts_stay_in_eval_mode():
    model = nn.ModuleDict({"frozen": nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)),
                           "trained": nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))})
    model["frozen"].requires_grad_(False)
    set_train_modes(model)
    assert not model["frozen"].training and not model["frozen"][1].training
    assert model["trained"].training and model["trained"][1].training
    assert torch.equal(model["frozen"](torch.ones(1, 2)), model["frozen"](torch.ones(1, 2)))
