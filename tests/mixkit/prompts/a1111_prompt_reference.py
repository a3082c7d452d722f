"""Test oracles restating A1111 v1.10 (reference only, re-expressed; not its code) for the hires schedules and
the batch emphasis of `modules/prompt_parser.py` and `modules/sd_hijack_clip.py` + `modules/sd_emphasis.py`.

Schedules: A1111's `get_learned_conditioning_prompt_schedules(prompts, base_steps, hires_steps=None,
use_old_scheduling=False)` picks (int_offset, flt_offset, steps) = (0, 0, base_steps) without hires steps or with
old scheduling, else (base_steps, 1.0, hires_steps). Each `[..:..:NUMBER]` becomes min(steps, int(v)) where v is
`v*steps if v < 1 else v` (old scheduling), `(v - flt_offset) * steps` when the number as written has a ".", else
`v - int_offset`; a value >= 1 is a switch step. Alternations add every step 1..steps. At step t a scheduled node
shows its first part when t <= its value, an alternation option (t - 1) % n. The tree comes from mixkit's parser,
which the prompt hunt fuzzed against A1111's lark grammar (1,500 prompts, 0 differences).

Emphasis: `forward(texts)` tokenizes every text of the batch, pads shorter ones per chunk index with
`empty_chunk()` (BOS + EOS..., weights 1), and EmphasisOriginal computes for each chunk index
z_w = z * w; z_w * (z.mean() / z_w.mean()) over the whole [B, 77, D] tensor.
"""

from __future__ import annotations

import torch

from mixkit.prompts.scheduling import Alternate, Scheduled, parse_schedule_tree


def a1111_schedules(prompts, base_steps, hires_steps=None, use_old_scheduling=False):
    if hires_steps is None or use_old_scheduling:
        int_offset, flt_offset, steps = 0, 0, base_steps
    else:
        int_offset, flt_offset, steps = base_steps, 1.0, hires_steps

    def switch_step(number: str) -> int:
        v = float(number)
        if use_old_scheduling:
            v = v * steps if v < 1 else v
        elif "." in number:
            v = (v - flt_offset) * steps
        else:
            v = v - int_offset
        return min(steps, int(v))

    def steps_of(nodes, out):
        for node in nodes:
            if isinstance(node, Scheduled):
                value = switch_step(node.when)
                if value >= 1:
                    out.append(value)
                for part in (node.before or (), node.after):
                    steps_of(part, out)
            elif isinstance(node, Alternate):
                out.extend(range(1, steps + 1))
                for option in node.options:
                    steps_of(option, out)
        return out

    def text_at(nodes, t):
        pieces = []
        for node in nodes:
            if isinstance(node, str):
                pieces.append(node)
            elif isinstance(node, Scheduled):
                pieces.append(text_at(node.before or () if t <= switch_step(node.when) else node.after, t))
            else:
                pieces.append(text_at(node.options[(t - 1) % len(node.options)], t))
        return "".join(pieces)

    result = []
    for prompt in prompts:
        tree = parse_schedule_tree(prompt)
        result.append([[t, text_at(tree, t)] for t in sorted(set(steps_of(tree, [steps])))])
    return result


def a1111_original_emphasis_batch(raw_encoder, texts):
    """A1111's conditioning for one schedule batch (SD1): [B, chunks*77, D], from the unweighted encoder outputs.

    `raw_encoder` is a PromptEncoder with emphasis "Ignore" (its hidden states are the raw CLIP outputs, and its
    chunks carry the weights A1111's `tokenize_line` gives).
    """
    raws = [raw_encoder.encode(text).hidden.reshape(-1, 77, raw_encoder.encode("").hidden.shape[-1]) for text in texts]
    weights = []
    for text in texts:
        rows = []
        for chunk in raw_encoder.chunks_for(text):
            rows.append([1.0] + chunk.weights + [1.0] * (76 - len(chunk.weights)))
        weights.append(torch.tensor(rows))
    empty_z = raw_encoder.encode("").hidden.reshape(1, 77, -1)
    chunk_count = max(z.shape[0] for z in raws)
    out = []
    for index in range(chunk_count):
        z = torch.stack([r[index] if index < r.shape[0] else empty_z[0] for r in raws])
        w = torch.stack([m[index] if index < m.shape[0] else torch.ones(77) for m in weights])
        z_w = z * w[..., None]
        out.append(z_w * (z.mean() / z_w.mean()))
    return torch.cat(out, dim=1)
