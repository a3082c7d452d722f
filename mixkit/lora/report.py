"""What a LoRA file is and whether it fits a model, for `mixkit lora inspect` and the UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mixkit.lora.lora_file import load_lora
from mixkit.lora.matching import find_matches, guess_base_model
from mixkit.lora.model_index import ModelIndex
from mixkit.lora.network_options import TrainedNetwork, trained_network


@dataclass
class LoraReport:
    """A summary of one file; `matched`/`problems` are filled only when a model was given."""

    path: Path
    format: str
    families: dict[str, int]
    components: list[str]
    module_count: int
    ranks: list[int]
    alphas: list[float]
    base_model: str | None
    short_hash: str
    top_tags: list[tuple[str, int]]
    metadata_warnings: list[str]
    unclaimed_keys: list[str]
    embeddings: dict[str, str] = field(default_factory=dict)  # bundled trigger words -> "n vectors, dim d"
    network: TrainedNetwork | None = None  # the training network the metadata records (None: none recorded)
    model: str | None = None
    matched: int | None = None
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        rows = [
            f"file:        {self.path}",
            f"format:      {self.format}",
            f"families:    {', '.join(f'{k} x{v}' for k, v in self.families.items())}",
            f"components:  {', '.join(self.components)} ({self.module_count} modules)",
            f"rank:        {_span(self.ranks)}",
            f"alpha:       {_span(self.alphas)}",
            f"trained as:  {self.network.summary() if self.network else 'not recorded in the metadata'}",
            f"base model:  {self.base_model or 'unknown'}",
            f"hash:        {self.short_hash}",
        ]
        if self.top_tags:
            rows.append("tags:        " + ", ".join(f"{t} ({c})" for t, c in self.top_tags))
        if self.embeddings:
            rows.append("embeddings:  " + ", ".join(f"{w} ({d})" for w, d in self.embeddings.items())
                        + " (bundled; the word reads these vectors while the LoRA is applied)")
        rows += [f"warning:     {w}" for w in self.metadata_warnings]
        if self.unclaimed_keys:
            rows.append(f"unreadable:  {len(self.unclaimed_keys)} key(s): {', '.join(self.unclaimed_keys[:8])}")
        if self.model is not None:
            rows.append(f"model:       {self.model}: {self.matched}/{self.module_count} modules matched")
            rows += [f"  problem:   {p}" for p in self.problems[:20]]
            if len(self.problems) > 20:
                rows.append(f"  ... and {len(self.problems) - 20} more")
        return rows


def _span(values: list) -> str:
    if not values:
        return "-"
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:6])}{' ...' if len(shown) > 6 else ''} (per module)"


def inspect_lora(path: str | Path, unet=None, text_encoders=None) -> LoraReport:
    """Describe a LoRA file; with a model, also count matched modules and list every problem."""
    lora = load_lora(path)
    report = LoraReport(
        path=lora.path, format=lora.format.label, families=lora.family_counts(), components=lora.components(),
        module_count=len(lora.modules), ranks=lora.ranks(), alphas=lora.alphas(), base_model=guess_base_model(lora),
        short_hash=lora.short_hash(), top_tags=lora.metadata.top_tags(8), metadata_warnings=lora.metadata.warnings,
        unclaimed_keys=lora.unclaimed_keys,
        embeddings={word: f"{e.num_vectors} vector{'s' if e.num_vectors > 1 else ''}, dim {e.num_dims()}"
                    for word, e in lora.embeddings.items()},
    )
    try:
        report.network = trained_network(lora.metadata.raw)
    except ValueError as error:  # the file still loads: a bad training record only informs the user
        report.metadata_warnings.append(f"{error}; training network not shown")
    if unet is not None:
        index = ModelIndex(unet, list(text_encoders or []))
        report.model = index.family_label()
        result = find_matches(lora, index)
        report.matched = len(result.matched)
        report.problems = result.problems
    return report
