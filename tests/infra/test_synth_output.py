"""`make synth` as a person runs it (issue 53, point 6): its output is sentences, not the
framed Node end-of-life banner jsii prints on a release it does not support, which Python
relayed line by line as byte strings (b'!!  ...  !!\\n')."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_synth_prints_no_byte_string_banner() -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "synth"],  # noqa: S607 - the Makefile's own target
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "b'" not in output, output[-3000:]
    assert "!!!!" not in output, output[-3000:]
    assert "Grandbo-dev.template.json" in output
