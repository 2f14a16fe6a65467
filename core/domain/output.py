"""How much of an agent's output T25 keeps, and the line that says where it stopped keeping it.

An agent may print without end. Its output is streamed as `RunOutput` events up to
`limits.max_output_event_bytes` per run, and kept byte-exact in the run's log artifact up to
`limits.max_log_bytes`; past either, one marker line says so. The marker has the same wording
wherever it appears (the event stream, `t25 logs`, the cockpit, the log artifact), so a
reader finds it by searching for `[t25: output truncated`.
"""

from __future__ import annotations

MARKER_PREFIX = "[t25: output truncated after "


def truncation_marker(after: int, kept: int) -> str:
    """The line put where output stops being kept: after `after` bytes of this record; the
    log artifact keeps the first `kept`. On a line of its own, whatever came before it."""
    return f"\n{MARKER_PREFIX}{after} bytes; the log artifact keeps the first {kept} bytes]\n"
