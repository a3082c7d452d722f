"""`mixkit eval tiny` runs the pipeline, the judge and the captioner, and writes its scores."""

from __future__ import annotations

import json

from webui.cli import main


def test_eval_tiny_scores_a_model_and_the_shipped_captioner(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "scores.json"
    code = main(["eval", "tiny", "--model", str(tiny_sd1_dir), "--prompts", "2", "--two-shape", "1", "--steps", "1",
                 "--json", str(out)])
    assert code == 0
    scores = json.loads(out.read_text())
    assert scores["single/n"] == 2 and scores["two/n"] == 1
    assert {"single/shape", "caption/colour", "round_trip/all"} <= set(scores)
    assert all(0.0 <= v <= 1.0 for k, v in scores.items() if not k.endswith("/n"))
    assert "single/shape" in capsys.readouterr().out


def test_eval_tiny_rejects_bad_counts_before_loading(capsys):
    assert main(["eval", "tiny", "--prompts", "0"]) == 2
    assert "--prompts must be >= 1" in capsys.readouterr().err


def test_eval_tiny_refuses_a_bad_json_path_and_captioner_before_generating(tmp_path, capsys, monkeypatch):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "__call__", lambda *a, **k: (_ for _ in ()).throw(AssertionError("generated")))
    assert main(["eval", "tiny", "--prompts", "1", "--json", str(tmp_path)]) == 2
    assert "must be a file name in an existing folder" in capsys.readouterr().err
    assert main(["eval", "tiny", "--prompts", "1", "--json", str(tmp_path / "no" / "s.json")]) == 2
    assert main(["eval", "tiny", "--prompts", "1", "--captioner", str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err


def test_eval_tiny_runs_a_model_with_its_recommended_settings_unless_told_otherwise(tiny_sd1_dir, tmp_path, capsys):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_sd1_dir, model)
    (model / "mixkit_generation.json").write_text(json.dumps({"steps": 1, "cfg_scale": 3.0}))
    common = ["eval", "tiny", "--model", str(model), "--captioner", "none", "--prompts", "1", "--two-shape", "0"]
    assert main(common) == 0
    assert "generating with steps=1, cfg_scale=3.0, sampler=DPM++ 2M" in capsys.readouterr().err
    assert main(common + ["--steps", "2", "--sampler", "Euler"]) == 0
    assert "generating with steps=2, cfg_scale=3.0, sampler=Euler" in capsys.readouterr().err
