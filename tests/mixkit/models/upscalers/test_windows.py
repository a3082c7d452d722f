"""Window partitioning, relative-position indices, shift masks and chunked window attention."""

import torch

from mixkit.models.upscalers.windows import SHIFT_MASK_VALUE, attend, merge, partition, relative_position_index, shift_mask


def test_partition_orders_windows_and_their_tokens_row_major_and_merge_inverts_it():
    x = torch.arange(4 * 6).float().view(1, 4, 6, 1)
    windows = partition(x, 2, 3)
    assert windows.shape == (1, 4, 6, 1)
    assert windows[0, 1, :, 0].tolist() == [3, 4, 5, 9, 10, 11]  # top-right window
    assert windows[0, 2, :, 0].tolist() == [12, 13, 14, 18, 19, 20]  # bottom-left window
    assert torch.equal(merge(windows, 2, 3, 4, 6), x)


def test_relative_position_index_of_each_token_pair_in_a_rectangular_window():
    wh, ww = 2, 3
    index = relative_position_index(wh, ww)
    for i in range(wh * ww):
        for j in range(wh * ww):
            dy, dx = i // ww - j // ww, i % ww - j % ww
            assert index[i, j] == (dy + wh - 1) * (2 * ww - 1) + dx + ww - 1
    assert index.max() == (2 * wh - 1) * (2 * ww - 1) - 1


def test_the_shift_mask_separates_the_regions_the_roll_wrapped_around():
    mask = shift_mask(8, 8, 4, 4, 2, 2)
    assert mask.shape == (4, 16, 16)
    assert torch.equal(mask[0], torch.zeros(16, 16))  # the top-left window holds one region
    # the last window (bottom right) holds 4 regions of 2x2 tokens; token 0 (row 0, col 0) and token 3 (row 0,
    # col 3) come from different sides of the wrapped seam, tokens 0 and 5 (row 1, col 1) from the same region
    assert mask[3, 0, 3] == SHIFT_MASK_VALUE and mask[3, 0, 5] == 0 and mask[3, 0, 15] == SHIFT_MASK_VALUE
    # the top-right window: two regions split by columns
    assert mask[1, 0, 12] == 0 and mask[1, 0, 2] == SHIFT_MASK_VALUE


def test_a_rectangular_shift_mask_splits_rows_and_columns_by_their_own_shift():
    mask = shift_mask(4, 8, 2, 4, 1, 2)  # windows 2 high, 4 wide; rolled by 1 row and 2 columns
    assert mask.shape == (4, 8, 8)
    last = mask[3]  # bottom-right window: its 2 rows are 2 regions, its 4 columns 2 + 2
    assert last[0, 1] == 0  # same row, columns 0 and 1
    assert last[0, 2] == SHIFT_MASK_VALUE and last[0, 4] == SHIFT_MASK_VALUE and last[0, 5] == SHIFT_MASK_VALUE
    assert last[6, 7] == 0 and last[2, 3] == 0
    top_right = mask[1]  # one row region (the roll only wraps the last row), columns 2 + 2
    assert top_right[0, 1] == 0 and top_right[0, 4] == 0 and top_right[0, 2] == SHIFT_MASK_VALUE
    assert torch.equal(mask[0], torch.zeros(8, 8))


def test_attention_in_chunks_of_windows_equals_all_windows_at_once():
    torch.manual_seed(1)
    q, k, v = torch.randn(3, 2, 9, 2, 16, 4).unbind(0)  # batch 2, 9 windows, 2 heads, 16 tokens
    bias, mask = torch.randn(2, 16, 16), shift_mask(12, 12, 4, 4, 2, 2)
    whole = attend(q, k, v, bias, mask)
    for chunk in (1, 2 * 2 * 16 * 16 * 4, 2 * 2 * 16 * 16 * 9):  # below one window, 4 windows, all 9
        assert torch.allclose(attend(q, k, v, bias, mask, chunk), whole, atol=1e-6)
        assert torch.allclose(attend(q, k, v, bias, None, chunk), attend(q, k, v, bias, None), atol=1e-6)
    assert not torch.allclose(whole, attend(q, k, v, bias, None))
    # window 4 of batch item 1, head 0, by the definition
    scores = q[1, 4, 0] @ k[1, 4, 0].T / 2 + bias[0] + mask[4]
    assert torch.allclose(whole[1, 4, :, :4], scores.softmax(-1) @ v[1, 4, 0], atol=1e-6)


def test_reflect_padding_mirrors_without_repeating_the_edge_and_reflects_again_when_the_pad_is_longer():
    from mixkit.models.upscalers.windows import reflect_pad_to_multiple

    row = torch.tensor([1.0, 2.0, 3.0]).view(1, 1, 1, 3)
    assert reflect_pad_to_multiple(row, 4)[0, 0].tolist() == [[1, 2, 3, 2]] * 4  # one pixel high: repeated
    assert reflect_pad_to_multiple(row, 8)[0, 0, 0].tolist() == [1, 2, 3, 2, 1, 2, 3, 2]  # 5 more from 3 pixels
    assert reflect_pad_to_multiple(row, 3).shape == (1, 1, 3, 3)
    x = torch.arange(12.0).view(1, 1, 3, 4)
    assert torch.equal(reflect_pad_to_multiple(x, 2), torch.nn.functional.pad(x, (0, 0, 0, 1), mode="reflect"))
