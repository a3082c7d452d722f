"""txt2img's side of the optimum-intel row: a long-lived `optimum_intel_row.py --serve` in its own venv.

optimum-intel needs an older transformers than mixkit, so its row runs in another interpreter.
One process exports the model once (not timed) and then generates on request, so its timed
images alternate with the other rows' round by round (A B C A B C ...) like any in-process row.
The protocol is in `optimum_intel_row.py`'s docstring.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import deque
from pathlib import Path

import numpy as np

ROW_SCRIPT = Path(__file__).with_name("optimum_intel_row.py")
SKIP_REASON = ("optimum-intel: skipped, no --optimum-venv PATH (or MIXKIT_OPTIMUM_VENV); "
               "benchmarks/optimum_intel_row.py says how to make that virtualenv")


def venv_python(venv: str) -> Path:
    """The interpreter of the optimum-intel virtualenv `venv`; ValueError if it has none."""
    from benchmarks.optimum_intel_row import venv_python_path  # stdlib-only module, safe to import here

    python = venv_python_path(venv)
    if not python.is_file():
        raise ValueError(f"optimum-intel virtualenv {venv!r} has no bin/python; "
                         f"benchmarks/optimum_intel_row.py says how to make one")
    return python


class OptimumIntelServer:
    """Starts the row's process, waits for its export, then asks it for measured images."""

    def __init__(self, python: Path, folder: Path, work: Path, *, size: int, steps: int, prompt: str,
                 negative_prompt: str, threads: int | None = None) -> None:
        self.work = work
        self.log_path = work / "optimum-intel.log"
        command = [str(python), str(ROW_SCRIPT), "--serve", "--model", str(folder), "--size", str(size),
                   "--steps", str(steps), "--prompt", prompt, "--negative-prompt", negative_prompt,
                   "--cache", str(work / "optimum-intel")]
        if threads:
            command += ["--threads", str(threads)]
        # Its own environment: mixkit's PYTHONPATH would put this repository on that interpreter's path.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MIXKIT_OPTIMUM_VENV")}
        with open(self.log_path, "w") as log:  # export warnings and progress bars: read it when something fails
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            text=True, bufsize=1, env=env, cwd=work)
        self.info = self._answer("ready")
        self.last: dict = {}

    def generate(self, seed: int) -> tuple[np.ndarray, dict]:
        """The image for `seed` (HxWx3 uint8) and its cost as measured in that process."""
        out = self.work / "optimum-intel-image.npy"
        self.process.stdin.write(f"generate {seed} {out}\n")
        self.process.stdin.flush()
        self.last = self._answer("done")
        return np.load(out), self.last

    def describe(self) -> str:
        """One line for under the table: what ran, how it was prepared, the process's own peak RSS."""
        info, versions = self.info, self.info["versions"]
        peak = self.last.get("process_peak_rss")
        return (f"optimum-intel: own process ({', '.join(f'{k} {v}' for k, v in versions.items())}); "
                f"{info['how']} in {info['prepare_seconds']:.0f} s, not timed; static shape, UNet weights stored as "
                f"{'/'.join(info['unet_weights'])}, OpenVINO inference precision {info['precision']}, "
                f"{info['threads']} threads; its ΔRSS is that process's, whose "
                f"whole peak (export included) was {peak / 2**20 if peak else float('nan'):.0f} MB; "
                f"PSNR vs diffusers fp32 (same latents and scheduler)")

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def _answer(self, expected: str) -> dict:
        line = self.process.stdout.readline()
        word, _, payload = line.partition(" ")
        if word != expected:
            self.close()
            with open(self.log_path, errors="replace") as log:
                tail = "".join(deque(log, maxlen=25))
            raise RuntimeError(f"optimum-intel process: expected {expected!r}, got {line.strip()!r} "
                               f"(exit code {self.process.poll()}); last lines of {self.log_path}:\n{tail}")
        return json.loads(payload)
