"""`mixkit generate`: PNGs with infotext, one-line errors with exit code 2, nothing half-written."""

import subprocess
import sys

import pytest
from PIL import Image

from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21"]


def test_generate_writes_pngs_with_infotext_and_prints_their_paths(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "--negative", "blurry",
                 "--batch-size", "2", "-o", str(out), *ARGS])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 2 and all(p.endswith(".png") for p in printed)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.split("/")[-1] for p in printed)
    infotext = Image.open(printed[1]).text["parameters"]
    assert infotext.startswith("a red circle\nNegative prompt: blurry\nSteps: 3, Sampler: DPM++ 2M")
    assert "Seed: 22," in infotext


def test_the_same_command_twice_gives_identical_images(tiny_sd1_dir, tmp_path, capsys):
    for folder in ("a", "b"):
        assert main(["generate", "x", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / folder), *ARGS]) == 0
    a, b = (next((tmp_path / f).iterdir()) for f in ("a", "b"))
    assert Image.open(a).tobytes() == Image.open(b).tobytes()


@pytest.mark.parametrize("extra, message", [
    (["--width", "63"], "multiple of 8"),
    (["--steps", "0"], "--steps must be in"),
    (["--sampler", "Nope"], "Unknown sampler"),
    (["--cfg", "nan"], "--cfg must be a finite number"),
    (["--ngms", "-1"], "--ngms (NGMS) must be a sigma in [0, 15.0]"),
    (["--ngms-all-steps"], "needs --ngms > 0"),
    (["--skip-early-cfg", "2"], "--skip-early-cfg must be a fraction"),
])
def test_user_errors_are_one_line_with_exit_code_2(tiny_sd1_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("mixkit: error:") and message in err[-1]
    assert "Traceback" not in "\n".join(err)
    assert not out.exists() or not any(out.glob("*.png"))


def test_ngms_flags_reach_the_infotext(tiny_sd1_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, "--ngms", "15",
                 "--ngms-all-steps", "--skip-early-cfg", "0.25"]) == 0
    infotext = Image.open(capsys.readouterr().out.split()[0]).text["parameters"]
    assert "Skip Early CFG: 0.25, NGMS: 15, NGMS all steps: True" in infotext


def test_missing_model_path(tmp_path, capsys):
    assert main(["generate", "a", "--model", str(tmp_path / "nope"), "-o", str(tmp_path / "o" / "deeper")]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and ("does not exist" in err or "not found" in err.lower())
    assert not (tmp_path / "o").exists()  # the probed output folders are gone again: nothing is written


def test_output_folder_that_is_a_file_is_refused_before_loading(tiny_sd1_dir, tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(target / "sub"), *ARGS]) == 2
    assert "not writable" in capsys.readouterr().err
    assert target.read_text() == "x"


def test_output_folder_that_cannot_be_written(tiny_sd1_dir, tmp_path, capsys, monkeypatch):
    """Running as root ignores chmod, so make the write probe fail the way a read-only mount would."""
    import tempfile

    def read_only(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    out = tmp_path / "ro"
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS]) == 2
    assert "not writable" in capsys.readouterr().err
    assert not any(out.glob("*"))


def test_cli_process_has_no_traceback_on_user_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "webui.cli", "generate", "a", "--model", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.strip().startswith("mixkit: error:")


def test_importing_mixkit_is_cheap_and_does_not_import_gradio():
    code = "import sys, mixkit, mixkit.registry, mixkit.errors; print(sorted(m for m in ('gradio', 'torch', 'diffusers') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]"


def test_fast_preset_from_the_cli(tiny_sd1_dir, tmp_path, capsys):
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), "--preset", "fast", "-o", str(tmp_path / "o"), *ARGS])
    captured = capsys.readouterr()
    assert code == 0 and captured.out.strip().endswith(".png")
    assert "fast" in captured.err


def test_unknown_preset_is_a_one_line_error(tiny_sd1_dir, tmp_path, capsys):
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "--preset", "turbo", "-o", str(tmp_path / "o"), *ARGS]) == 2
    assert "turbo" in capsys.readouterr().err


def test_a_png_file_name_is_written_as_named(tiny_sd1_dir, tmp_path, capsys):
    # -o cat.png writes cat.png itself (a user naming a file does not want a folder called cat.png); a batch
    # gets cat-1.png, cat-2.png; running again replaces them.
    single = tmp_path / "sub" / "cat.png"
    assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "-o", str(single), *ARGS]) == 0
    assert capsys.readouterr().out.split() == [str(single)]
    assert "Seed: 21," in Image.open(single).text["parameters"]
    for _ in range(2):
        assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b.png"),
                     "--batch-size", "2", *ARGS]) == 0
    assert capsys.readouterr().out.split()[-2:] == [str(tmp_path / "b-1.png"), str(tmp_path / "b-2.png")]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["b-1.png", "b-2.png"]
    (tmp_path / "pics.png").mkdir()  # an existing folder of that name stays a folder
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "pics.png"), *ARGS]) == 0
    assert [p.name for p in (tmp_path / "pics.png").iterdir()] == ["00000-21.png"]


def test_a_non_png_file_name_and_a_misspelt_sampler_fail_before_loading(tmp_path, capsys):
    missing_model = str(tmp_path / "no-model")
    assert main(["generate", "a", "--model", missing_model, "-o", str(tmp_path / "cat.jpg"), *ARGS]) == 2
    assert "must end in .png" in capsys.readouterr().err
    assert main(["generate", "a", "--model", missing_model, "-o", str(tmp_path / "o"), "--sampler", "DPM++ 9M",
                 *ARGS]) == 2
    assert "Unknown sampler 'DPM++ 9M'. Did you mean 'DPM++ 2M'?" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "cat.jpg").exists()


def test_ctrl_c_stops_after_the_step_and_keeps_the_images_made(tiny_sd1_dir, tmp_path, capsys, monkeypatch):
    import signal

    from pipelines.txt2img import TextToImage

    original = TextToImage.__call__

    def interrupted_in_the_second_batch(self, params=None, *, callback=None, **kwargs):
        def on_step(state):
            if state.batch_index == 1 and state.step == 1:
                # What Python runs on a terminal's Ctrl-C: the handler the CLI installed. Called directly: a real
                # SIGINT sent to the whole pytest process crashed one CI run late in the suite (signal delivery
                # among the threads earlier tests left running), which says nothing about the CLI.
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            return callback(state) if callback else None

        return original(self, params, callback=on_step, **kwargs)

    monkeypatch.setattr(TextToImage, "__call__", interrupted_in_the_second_batch)
    before = signal.getsignal(signal.SIGINT)
    out = tmp_path / "out"
    code = main(["generate", "x", "--model", str(tiny_sd1_dir), "--batch-count", "3", "-o", str(out), *ARGS])
    assert code == 130
    assert "interrupted; kept 2 of 3 image(s)" in capsys.readouterr().err
    assert len(list(out.iterdir())) == 2  # batch 0 finished, batch 1 stopped after its step (as A1111 keeps it)
    assert signal.getsignal(signal.SIGINT) is before  # the handler is the caller's again


def test_a_png_name_ending_in_a_slash_is_a_folder(tiny_sd1_dir, tmp_path, capsys):
    assert main(["generate", "x", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "shots.png") + "/", *ARGS]) == 0
    assert (tmp_path / "shots.png").is_dir() and len(list((tmp_path / "shots.png").glob("*.png"))) == 1
