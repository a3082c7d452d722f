"""The word-level CLIP tokenizer of the shapes world."""

from __future__ import annotations

from mixkit.tiny.world_tokenizer import build_world_tokenizer, world_merges, world_words


def test_every_world_word_is_one_token_and_round_trips():
    tokenizer = build_world_tokenizer()
    for word in world_words():
        ids = tokenizer(word, add_special_tokens=False).input_ids
        assert len(ids) == 1, (word, tokenizer.convert_ids_to_tokens(ids))
        assert tokenizer.decode(ids).strip() == word


def test_caption_tokens_and_other_text_still_tokenize():
    tokenizer = build_world_tokenizer()
    ids = tokenizer("A small red circle at the top left, on a blue background").input_ids
    assert len(ids) == 2 + 13  # BOS, 12 words and a comma, EOS
    assert tokenizer.decode(ids, skip_special_tokens=True) == "a small red circle at the top left , on a blue background"
    cat = tokenizer("a cat", add_special_tokens=False).input_ids
    assert len(cat) > 2 and tokenizer.decode(cat).strip() == "a cat"  # unknown word: byte symbols, not an error


def test_merges_are_deterministic_and_later_words_do_not_change_earlier_ones():
    words = world_words()
    assert world_merges(words) == world_merges(words)
    first = build_world_tokenizer(words[:10])
    full = build_world_tokenizer(words)
    for word in words[:10]:
        assert first.tokenize(word) == full.tokenize(word)
