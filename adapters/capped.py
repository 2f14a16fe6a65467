"""The launcher that puts a run under its caps, then becomes the run's command.

Started by T25 (an isolated interpreter, the standard library only) in front of the run's
command - the sandbox, or the reaper when there is none:

    capped.py [--join CGROUP_PROCS]... [--limit NAME=SOFT[:HARD]]... -- COMMAND ...

It writes its own pid into each run cgroup's `cgroup.procs` (so the command and all it forks
are counted there), sets each RLIMIT_NAME (soft and hard: the run cannot raise it again),
then execs the command, which keeps the launcher's pid. Anything it cannot do is said on
stderr and the run does not start (exit 125): a run is never started without its caps.
"""

from __future__ import annotations

import os
import resource
import sys


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(
            "usage: capped.py [--join PATH]... [--limit NAME=VALUE]... -- COMMAND", file=sys.stderr
        )
        return 2
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    if not command or len(options) % 2:
        print("capped.py: a command, and a value for each option", file=sys.stderr)
        return 2
    try:
        for option, value in zip(options[::2], options[1::2], strict=True):
            if option == "--join":
                with open(value, "w") as procs:
                    procs.write(str(os.getpid()))
            elif option == "--limit":
                name, _, numbers = value.partition("=")
                soft, _, hard = numbers.partition(":")
                which = getattr(resource, f"RLIMIT_{name}")
                have = resource.getrlimit(which)[1]  # never above what this process may have
                wanted = [int(soft), int(hard or soft)]
                if have != resource.RLIM_INFINITY:
                    wanted = [min(n, have) for n in wanted]
                resource.setrlimit(which, (wanted[0], wanted[1]))
            else:
                print(f"capped.py: unknown option {option}", file=sys.stderr)
                return 2
    except (OSError, ValueError, AttributeError) as exc:
        print(f"t25: the run's resource caps could not be set: {exc}", file=sys.stderr)
        return 125
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"t25: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
