"""Programs that record how the operator's shell or editor was started."""

from __future__ import annotations

from pathlib import Path


def recorder(tmp_path: Path, name: str, status: int = 0) -> tuple[Path, Path]:
    """A program that writes its directory and arguments to a file, and exits `status`."""
    record = tmp_path / f"{name}.record"
    script = tmp_path / name
    script.write_text(f'#!/bin/sh\n{{ pwd; echo "$@"; }} > "{record}"\nexit {status}\n')
    script.chmod(0o755)
    return script, record
