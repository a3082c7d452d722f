"""Accuracy against training minutes of a tiny-sd model, read from its recipe record's chain of runs.

Run from the repository root:  python -m benchmarks.tiny_sd_curve  [--model mixkit-tiny-sd]

Every `mixkit train recipe tiny-sd` run writes `recipe_record.json`; a run continued from another
(`init_from`) keeps that run's record under `curve[...]["earlier"]`, so the shipped model's record holds
its whole history. This prints one row per run, oldest first: its steps, the settings that changed,
its wall minutes and the cumulative minutes, and the judge's single-shape accuracy on the recipe's own
prompts at its end. It is the issue's fallback when one recipe cannot reach the targets in 30 minutes:
the accuracy-versus-minutes curve of the fastest chain found. The autoencoder's minutes are not in the
UNet records; pass `--vae-minutes` (the shipped one: 64, README) to add them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SETTINGS = ("learning_rate", "train_images", "seed", "offset_noise", "train_text_encoder",
            "full_resolution_attention", "full_resolution_transformer_layers", "foreground_weight")


def run_chain(record: dict) -> list[dict]:
    """The runs behind a tiny-sd record, oldest first: each a record with `recipe`, `metrics`, `wall_seconds`."""
    runs = [record]
    while True:
        earlier = next((entry for entry in runs[-1].get("curve") or [] if entry.get("stage") == "init"
                        and entry.get("model") == "tiny-sd"), None)
        if earlier is None:
            return runs[::-1]
        curve = earlier.get("earlier") or []
        runs.append({**earlier, "curve": curve})


def curve_rows(record: dict, vae_minutes: float = 0.0) -> list[dict]:
    rows, total, previous = [], vae_minutes, {}
    for run in run_chain(record):
        recipe, metrics = run.get("recipe") or {}, run.get("metrics") or {}
        minutes = (run.get("wall_seconds") or 0.0) / 60
        total += minutes
        changed = {k: recipe[k] for k in SETTINGS if k in recipe and recipe.get(k) != previous.get(k)}
        previous = recipe
        rows.append({"steps": recipe.get("steps"), "changed": changed, "minutes": minutes, "total": total,
                     **{key: metrics.get(f"single/{key}") for key in ("shape", "colour", "background")}})
    return rows


def main(argv=None) -> None:
    from mixkit.io.sources import resolve_model_source

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mixkit-tiny-sd")
    parser.add_argument("--vae-minutes", type=float, default=0.0)
    args = parser.parse_args(argv)
    record = json.loads((Path(resolve_model_source(args.model)) / "recipe_record.json").read_text(encoding="utf-8"))
    percent = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    print("| steps | minutes | cumulative | shape | colour | background | settings |")
    print("|---|---|---|---|---|---|---|")
    for row in curve_rows(record, args.vae_minutes):
        settings = ", ".join(f"{k}={v}" for k, v in row["changed"].items())
        print(f"| {row['steps']} | {row['minutes']:.0f} | {row['total']:.0f} | {percent(row['shape'])} | "
              f"{percent(row['colour'])} | {percent(row['background'])} | {settings} |")


if __name__ == "__main__":
    main()
