"""The `t25` command line: argument parsing and error reporting.

Only argparse (and `core.config.held_secrets`, os and sys only) is imported at start so
`t25 --help` stays fast; each command imports what it needs. Before anything else, T25's
secrets are taken out of the process's environment (`held_secrets.hold`). A deliberate T25 error prints as one line with a hint and exits 1;
anything unexpected does the same unless `--debug` asks for the traceback.

The global options (`--config`, `--actor`, `--debug`) are accepted before the command
and after it (`t25 approve T-3 --actor alice`); given in both places, the later wins.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from t25_tui.cli.parser import build_parser

# A reader that goes away (`t25 task list | head -1`) ends T25 the way it ends `cat`: no
# traceback, and exit status 141 (128 + SIGPIPE), which is what a shell reports for a tool
# the signal killed. T25 exits by itself rather than dying of the signal, so `t25 run`
# first stops its agents and hands their runs back.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    from core.config import held_secrets  # os and sys only: --help stays fast

    if argv is None:  # the real command line, not a call from a test or a script
        held_secrets.hold()  # may execute T25 again, its secrets out of the environment
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "runs_agents", False):
            from adapters.prompt_files import sweep_prompt_files
            from core.worker.child_watch import watch_children_by_pidfd

            held_secrets.undumpable()  # no agent may read or ptrace the process that runs it
            watch_children_by_pidfd()  # git, agents and checks reaped without a thread each
            sweep_prompt_files()
        code: int = args.handler(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
        return code
    except KeyboardInterrupt:
        print("t25: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # a socket or a child's pipe, not the terminal's reader: a real error
        # Python flushes stdout once more on the way out; /dev/null in its place lets that
        # flush succeed (the recipe of the `signal` module's documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except Exception as exc:
        if args.debug:
            raise
        from core.domain.text import printable
        from core.errors import T25Error

        if isinstance(exc, T25Error):
            print(f"t25: error: {printable(exc.message)}", file=sys.stderr)
            if exc.hint:
                print(f"  hint: {printable(exc.hint)}", file=sys.stderr)
            return 1
        print(
            f"t25: unexpected error: {type(exc).__name__}: {printable(str(exc))}", file=sys.stderr
        )
        print("  hint: run again with --debug for the traceback", file=sys.stderr)
        return 1


def _stdout_reader_gone() -> bool:
    """stdout is a pipe whose reading end is closed (poll reports an error on it)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
