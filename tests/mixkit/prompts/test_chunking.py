"""Chunk splitting on plain token ids (no tokenizer needed)."""

from mixkit.prompts.chunking import BREAK_RUN, TokenRun, frame_chunk, split_into_chunks

COMMA = 9


def run(tokens, weight=1.0):
    return TokenRun(tuple(tokens), weight)


def lengths(chunks):
    return [len(chunk.tokens) for chunk in chunks]


def test_exact_multiples_and_empty():
    assert lengths(split_into_chunks([run([1] * 300)], comma_token=COMMA)) == [75, 75, 75, 75]
    assert lengths(split_into_chunks([run([1] * 76)], comma_token=COMMA)) == [75, 1]
    assert lengths(split_into_chunks([], comma_token=COMMA)) == [0]


def test_break_closes_chunk_even_when_empty():
    assert lengths(split_into_chunks([run([1] * 3), BREAK_RUN, run([2] * 2)], comma_token=COMMA)) == [3, 2]
    assert lengths(split_into_chunks([BREAK_RUN, run([2])], comma_token=COMMA)) == [0, 1]


def test_comma_backtrack_moves_the_tail_to_the_next_chunk():
    tokens = [1] * 60 + [COMMA] + [2] * 20  # the comma is 15 tokens before the end of the chunk
    chunks = split_into_chunks([run(tokens)], comma_token=COMMA)
    assert lengths(chunks) == [61, 20]
    assert chunks[0].tokens[-1] == COMMA and set(chunks[1].tokens) == {2}


def test_comma_too_far_back_does_not_move():
    tokens = [1] * 50 + [COMMA] + [2] * 30  # 24 tokens after the comma > 20
    assert lengths(split_into_chunks([run(tokens)], comma_token=COMMA)) == [75, 6]
    assert lengths(split_into_chunks([run([1] * 60 + [COMMA] + [2] * 20)], comma_token=COMMA, comma_backtrack=0)) == [75, 6]


def test_weights_follow_tokens():
    chunks = split_into_chunks([run([1, 2], 1.5), run([3], 0.5)], comma_token=COMMA)
    assert chunks[0].weights == [1.5, 1.5, 0.5]
    ids, weights = frame_chunk(chunks[0], bos=100, eos=101, pad=0)
    assert ids == [100, 1, 2, 3, 101] + [0] * 72 and weights == [1.0, 1.5, 1.5, 0.5] + [1.0] * 73


def find_embedding(tokens, position):
    # token 7 followed by 8 is the name of a 4-vector embedding "emb"
    if tokens[position:position + 2] == (7, 8):
        return "emb", 2, 4
    return None


def test_embedding_never_straddles_chunks():
    chunks = split_into_chunks([run([1] * 73 + [7, 8] + [2], 1.2)], comma_token=COMMA, find_embedding=find_embedding)
    assert lengths(chunks) == [73, 5]
    assert chunks[1].fixes == [(0, "emb")] and chunks[1].tokens == [0, 0, 0, 0, 2]
    assert chunks[1].weights == [1.2] * 5


def test_embedding_moved_by_comma_rule_keeps_its_vectors():
    tokens = [1] * 60 + [COMMA] + [7, 8] + [2] * 10 + [3] * 10
    chunks = split_into_chunks([run(tokens)], comma_token=COMMA, find_embedding=find_embedding)
    assert lengths(chunks) == [61, 24]  # 4 vectors + 10 tokens moved, then 10 more
    assert chunks[0].fixes == [] and chunks[1].fixes == [(0, "emb")]
