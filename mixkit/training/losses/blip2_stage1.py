"""BLIP-2 stage-1 objectives for the Q-Former (Li et al. 2023, section 3.2).

ITC: each image has several query outputs; its similarity to a text is the best (max) of its
queries' similarities, divided by a learned temperature, with label smoothing 0.1 as in the
reference training code. ITM: a binary matched/unmatched head trained on every positive pair and
on hard negatives drawn from the ITC similarity softmax. ITG: the text is decoded causally from
the queries while the queries cannot see the text, so everything the text needs about the image
must pass through the queries.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ITC_LABEL_SMOOTHING = 0.1
ITG_LABEL_SMOOTHING = 0.1


def blip2_query_text_similarity(query_features: torch.Tensor, text_features: torch.Tensor) -> torch.Tensor:
    """(images, texts) cosine similarities: max over each image's query outputs.

    `query_features` is (batch, num_queries, dim), `text_features` (batch, dim); both are
    L2-normalised here.
    """
    if query_features.ndim != 3 or text_features.ndim != 2 or query_features.shape[-1] != text_features.shape[-1]:
        raise ValueError(
            "ITC expects query features (batch, queries, dim) and text features (batch, dim) with the same dim, "
            f"got {tuple(query_features.shape)} and {tuple(text_features.shape)}"
        )
    query_features = F.normalize(query_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    per_query = torch.einsum("iqd,td->itq", query_features, text_features)
    return per_query.max(dim=-1).values


def blip2_itc_loss(
    query_features: torch.Tensor,
    text_features: torch.Tensor,
    temperature: torch.Tensor | float,
    *,
    label_smoothing: float = ITC_LABEL_SMOOTHING,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Image-text contrastive loss; returns (loss, image->text similarity logits).

    The logits are returned because ITM samples its hard negatives from them.
    """
    temperature = torch.as_tensor(temperature, dtype=query_features.dtype, device=query_features.device)
    if (temperature <= 0).any():
        raise ValueError(f"ITC temperature must be > 0, got {temperature.item()}")
    if query_features.shape[0] != text_features.shape[0]:
        raise ValueError(
            f"ITC needs one text per image, got {query_features.shape[0]} images and {text_features.shape[0]} texts"
        )
    sim_i2t = blip2_query_text_similarity(query_features, text_features) / temperature
    targets = torch.arange(sim_i2t.shape[0], device=sim_i2t.device)
    loss = (
        F.cross_entropy(sim_i2t, targets, label_smoothing=label_smoothing)
        + F.cross_entropy(sim_i2t.T, targets, label_smoothing=label_smoothing)
    ) / 2
    return loss, sim_i2t


def sample_itm_hard_negatives(
    sim_i2t: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each image a negative text index, and for each text a negative image index.

    Negatives are drawn with probability softmax(similarity) over the *other* items, so texts the
    model currently confuses with the image are drawn most often (a positive is never drawn).
    """
    if sim_i2t.ndim != 2 or sim_i2t.shape[0] != sim_i2t.shape[1] or sim_i2t.shape[0] < 2:
        raise ValueError(f"hard negatives need a square similarity matrix of size >= 2, got {tuple(sim_i2t.shape)}")
    with torch.no_grad():
        eye = torch.eye(sim_i2t.shape[0], dtype=torch.bool, device=sim_i2t.device)
        weights_i2t = F.softmax(sim_i2t.float(), dim=1).masked_fill(eye, 0.0)
        weights_t2i = F.softmax(sim_i2t.T.float(), dim=1).masked_fill(eye, 0.0)
        # A row whose softmax underflowed to zero off the diagonal still needs a valid draw.
        weights_i2t = weights_i2t + (~eye) * 1e-12
        weights_t2i = weights_t2i + (~eye) * 1e-12
        negative_text_for_image = torch.multinomial(weights_i2t, 1, generator=generator).squeeze(1)
        negative_image_for_text = torch.multinomial(weights_t2i, 1, generator=generator).squeeze(1)
    return negative_text_for_image, negative_image_for_text


def blip2_itm_loss(itm_logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the 2-way match head over [B positives, B (image, neg text), B (neg image, text)].

    The row layout is that of `sample_itm_hard_negatives`: the first third are matched pairs
    (label 1), the rest unmatched (label 0).
    """
    if itm_logits.ndim != 2 or itm_logits.shape[1] != 2 or itm_logits.shape[0] % 3 != 0:
        raise ValueError(f"ITM logits must be (3 * batch, 2), got {tuple(itm_logits.shape)}")
    batch = itm_logits.shape[0] // 3
    labels = torch.cat([
        torch.ones(batch, dtype=torch.long, device=itm_logits.device),
        torch.zeros(2 * batch, dtype=torch.long, device=itm_logits.device),
    ])
    return F.cross_entropy(itm_logits, labels)


def multimodal_causal_mask(num_queries: int, text_attention_mask: torch.Tensor) -> torch.Tensor:
    """Boolean (batch, Q+T, Q+T) mask, True where a row position may attend to a column position.

    Queries see all queries and no text; text token t sees all queries and text tokens <= t
    (padding columns are hidden from everyone).
    """
    if num_queries < 1 or text_attention_mask.ndim != 2:
        raise ValueError(
            f"need num_queries >= 1 and a (batch, text_len) mask, got {num_queries} and {tuple(text_attention_mask.shape)}"
        )
    batch, text_len = text_attention_mask.shape
    total = num_queries + text_len
    device = text_attention_mask.device
    mask = torch.zeros(total, total, dtype=torch.bool, device=device)
    mask[:, :num_queries] = True
    mask[num_queries:, num_queries:] = torch.ones(text_len, text_len, dtype=torch.bool, device=device).tril()
    mask = mask.unsqueeze(0).repeat(batch, 1, 1)
    mask[:, :, num_queries:] &= text_attention_mask.bool().unsqueeze(1)
    return mask


def blip2_itg_loss(
    text_logits: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    label_smoothing: float = ITG_LABEL_SMOOTHING,
) -> torch.Tensor:
    """Next-token loss over the text part of the Q-Former's output (token t predicts t+1).

    `text_logits` is (batch, T, vocab) for the text positions only; padded targets are ignored.
    """
    if text_logits.shape[:2] != input_ids.shape or input_ids.shape != attention_mask.shape:
        raise ValueError(
            f"ITG logits {tuple(text_logits.shape)} must match input_ids {tuple(input_ids.shape)} "
            f"and attention_mask {tuple(attention_mask.shape)} in (batch, length)"
        )
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    logits = text_logits[:, :-1]
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, label_smoothing=label_smoothing
    )
