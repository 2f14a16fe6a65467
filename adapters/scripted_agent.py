"""t25-scripted-agent: an executable that behaves like an agent CLI, without a model.

The pipeline tests and `t25 demo` need an agent that is a real child process - one that reads a
prompt, edits files in its working directory, streams JSON events like Claude Code's
stream-json and ends with a result carrying usage - but answers deterministically. It reads
the header lines T25 puts atop every prompt (`T25-STAGE:`, `T25-ROLE:`, `T25-TASK:`,
`T25-ROUND:`) and T25's headings only outside fenced blocks, where T25 quotes everything it
did not write; `scripted: key=value` directives it reads from the task's description (which
is quoted) - `scripted: write=PATH:TEXT` and `scripted: delete=PATH` make the developer's
change a given one, `scripted: run=CMD` runs the project's tests as a developer would, and
`scripted: wait=NAME` holds the implementation until a test says go.
It answers its stage's JSON in a ```json fence. `--misbehave` makes it fail the way real
agents do, so the supervision code is tested against real processes.

Each run is a session with an id, reported in its `init` and `result` events. A task whose
description says `scripted: sessions=keep` has its sessions kept in
`$HOME/.t25-scripted-agent/sessions/`, and `--resume ID` continues one of them (its earlier
prompts are read as part of the conversation); resuming one that was not kept fails as
Claude Code does ("No conversation found with session ID").

    t25-scripted-agent [-p PROMPT | --prompt-file PATH] [--model M] [--resume ID]
                       [--misbehave WHAT]... [--version]

Standard library only, and nothing imported before it is needed: it starts in milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: it starts faster
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

VERSION = "0.1.0"
DEFAULT_MODEL = "scripted-1"
CHANGES_DIR = "changes"  # one file per task, so tasks run in parallel merge cleanly


def changes_file(task: str) -> str:
    return f"{CHANGES_DIR}/{task}.md"


ESCAPE_FILE = "ESCAPED_BY_AGENT.txt"
QUOTA_TEXT = "You've hit your session limit · resets 5am (UTC)"
USAGE = (
    "usage: t25-scripted-agent [-p PROMPT | --prompt-file PATH] [--model M] [--resume ID] "
    "[--misbehave WHAT]... [--version]"
)
SESSIONS_DIR = ".t25-scripted-agent/sessions"  # under $HOME

_HEADER = re.compile(r"T25-(STAGE|ROLE|TASK|ROUND):[ \t]*(\S.*?)[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_DIRECTIVE = re.compile(r"scripted:[ \t]*([\w-]+)=(.*?)[ \t]*(?=\s+scripted:|$)", re.MULTILINE)


class UsageError(SystemExit):
    """A command-line mistake: message on stderr, exit status 2."""

    def __init__(self, message: str) -> None:
        print(f"t25-scripted-agent: {message}\n{USAGE}", file=sys.stderr)
        super().__init__(2)


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def parse_args(argv: list[str]) -> dict[str, Any]:
    """A hand-written parser: a prompt such as `--force` after -p is a value, never an option."""
    args: dict[str, Any] = {
        "prompt": None,
        "prompt_file": None,
        "model": None,
        "resume": None,
        "misbehave": [],
    }
    takes_value = {
        "-p": "prompt",
        "--prompt": "prompt",
        "--prompt-file": "prompt_file",
        "--model": "model",
        "--resume": "resume",
        "--misbehave": "misbehave",
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--version":
            print(f"t25-scripted-agent {VERSION}")
            raise SystemExit(0)
        if arg == "--":
            args["prompt"] = " ".join(argv[i + 1 :])
            break
        name, eq, value = arg.partition("=")
        key = takes_value.get(name if eq else arg)
        if key is None:
            raise UsageError(f"unknown argument {arg!r}")
        if not eq:
            if i + 1 >= len(argv):
                raise UsageError(f"{arg} needs a value")
            i += 1
            value = argv[i]
        if key == "misbehave":
            args[key].append(value)
        else:
            args[key] = value
        i += 1
    if args["prompt"] is None and args["prompt_file"] is None:
        raise UsageError("give the prompt with -p PROMPT or --prompt-file PATH")
    return args


# -- the stage answers ---------------------------------------------------------------------


def answer(stage: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """The stage's JSON answer, shaped like core.domain.answers expects."""
    task, round_ = ctx["task"], ctx["round"]
    changes = changes_file(task)
    if stage == "SPEC":
        return {
            "summary": f"Scripted specification for {task}.",
            "acceptance_criteria": [f"{changes} records the change for {task}"],
            "out_of_scope": ["anything a real model would have to think about"],
        }
    if stage == "PLAN":
        return {
            "steps": [f"append a line for {task} to {changes}"],
            "files": [changes],
            "risk": ctx["directives"].get("risk", "low"),
            "rationale": "The scripted agent always makes the same one-line change.",
        }
    if stage == "IMPLEMENTING":
        if "wait" in ctx["directives"]:
            wait_for_gate(ctx["directives"]["wait"])
        os.makedirs(CHANGES_DIR, exist_ok=True)
        with open(changes, "a", encoding="utf-8") as file:
            file.write(f"- {task} round {round_}: scripted change\n")
        emit(type="tool_use", name="write", path=changes)
        touched = [changes, *also_touch(ctx["directives"], f"# {task} round {round_}")]
        touched += edit(ctx["edits"])
        if "run" in ctx["directives"]:
            touched.append(run_tests(ctx["directives"]["run"]))
        return {
            "summary": f"Appended a line for {task} (round {round_}) to {changes}.",
            "files_changed": touched,
        }
    if stage == "QA":
        return {
            "summary": "The change is one line of text; nothing to worry about.",
            "concerns": [],
        }
    if stage == "REVIEW":
        changes_once = (
            ctx["directives"].get("review") == "changes-once"
            or "review-changes-once" in ctx["misbehave"]
        )
        if changes_once and round_ == "1":
            return {
                "findings": [
                    {
                        "severity": "major",
                        "file": changes_file(ctx["task"]),
                        "line": 1,
                        "message": "The change needs another round.",
                    }
                ],
                "summary": "One major finding.",
                "verdict": "APPROVE",
            }
        return {"findings": [], "summary": "Nothing to change.", "verdict": "APPROVE"}
    if stage == "DOCS":
        path = ctx["directives"].get("docs")  # `scripted: docs=README.md`: document there
        if not path:
            return {"summary": f"No documentation needed for {task}.", "files": []}
        line = f"Documented {task}.\n"
        with open(path, "a+", encoding="utf-8") as file:  # once: a second round adds nothing
            file.seek(0)
            if line not in file.read():
                file.write(line)
        emit(type="tool_use", name="write", path=path)
        return {"summary": f"Documented {task} in {path}.", "files": [path]}
    raise ValueError(f"no answer for stage {stage!r}")


def also_touch(directives: dict[str, str], line: str) -> list[str]:
    """`scripted: touch=a,b/c` appends `line` to each of those files too (made as needed);
    `scripted: dependencies=x,y` adds each as a line of requirements.txt. Paths stay
    inside the working directory."""
    lines: dict[str, list[str]] = {}
    for path in filter(None, directives.get("touch", "").split(",")):
        lines.setdefault(path.strip(), []).append(line)
    for name in filter(None, directives.get("dependencies", "").split(",")):
        lines.setdefault("requirements.txt", []).append(name.strip())
    for path, added in lines.items():
        if os.path.isabs(path) or ".." in path.split("/"):
            raise ValueError(f"scripted: will not write outside the worktree: {path!r}")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8") as file:
            file.write("".join(f"{text}\n" for text in added))
        emit(type="tool_use", name="write", path=path)
    return list(lines)


def edit(edits: list[tuple[str, str]]) -> list[str]:
    """`scripted: write=PATH:TEXT` makes PATH hold TEXT (`\\n` in it a newline), `scripted:
    delete=PATH` removes PATH; in the order the task's description gives them. Paths stay
    inside the working directory."""
    done = []
    for how, value in edits:
        path, _, text = value.partition(":")
        if os.path.isabs(path) or ".." in path.split("/"):
            raise ValueError(f"scripted: will not write outside the worktree: {path!r}")
        if how == "delete":
            if os.path.lexists(path):
                os.remove(path)
        else:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as file:
                file.write(text.replace("\\n", "\n"))
        emit(type="tool_use", name=how, path=path)
        done.append(path)
    return done


def run_tests(command: str) -> str:
    """`scripted: run=CMD`: run CMD (split as a shell would, run without one) where the agent
    works, as a developer runs the project's tests, and keep its output's last line in
    `ran.txt` beside the change."""
    import shlex
    import subprocess

    done = subprocess.run(
        shlex.split(command), capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    lines = (done.stdout + done.stderr).strip().splitlines() or [""]
    with open("ran.txt", "w", encoding="utf-8") as file:
        file.write(f"{os.getcwd()}\n{done.returncode}\n{lines[-1]}\n")
    emit(type="tool_use", name="bash", command=command)
    return "ran.txt"


def top_level(prompt: str) -> list[str]:
    """The prompt's lines outside fenced blocks: only T25 writes those, so only they are
    read as its header lines and headings (what is fenced quotes the task and others)."""
    lines, fence = [], None
    for line in prompt.splitlines():
        found = _FENCE.match(line)
        if fence is None and found:
            fence = found.group(1)
        elif fence is None:
            lines.append(line)
        elif (
            found
            and found.group(1)[0] == fence[0]
            and len(found.group(1)) >= len(fence)
            and not line[found.end() :].strip()
        ):
            fence = None
    return lines


def final_text(stage: str, ctx: dict[str, Any]) -> str:
    question = ctx["directives"].get("question")
    if question and "## Operator answers" not in ctx["structure"]:
        lead, body = "I need an answer before I can go on.", {"question": question}
    else:
        lead, body = f"Done with {stage} for {ctx['task']}.", answer(stage, ctx)
    shown = json.dumps(body, indent=2)
    depth = next((int(float(w[7:])) for w in ctx["misbehave"] if w.startswith("nested:")), 0)
    if depth > 1:  # the same answer, with one more key that nests it `depth` levels deep
        shown = f'{shown[:-2]},\n  "deep": {deep_list(depth - 1)}\n}}'
    return f"{lead}\n\n```json\n{shown}\n```\n"


# -- misbehaviour ----------------------------------------------------------------------------


def deep_list(depth: int) -> str:
    """A JSON array nested `depth` levels deep, written out (json.dumps would recurse)."""
    return "[" * depth + "]" * depth


def nested(depth: int) -> None:
    """An event line whose JSON nests `depth` levels deep (the answer does too: final_text)."""
    line = '{"type": "assistant", "deep": ' + deep_list(max(depth - 1, 0)) + "}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# What an agent may print to take over the terminal of whoever reads its output: a write to
# the clipboard (OSC 52), a window title, a sequence passed through tmux to the terminal
# outside it (DCS), cursor movement and a screen clear (CSI), a bell, and an 8-bit CSI.
TERMINAL_SEQUENCES = (
    "\x1b]52;c;cm0gLXJmIH4K\x07"
    "\x1b]0;pwned\x1b\\"
    "\x1bPtmux;\x1b\x1b]52;c;cm0gLXJmIH4K\x07\x1b\\"
    "\x1b[2J\x1b[H\x07\x9b31m"
)


def terminal() -> None:
    """Print TERMINAL_SEQUENCES raw on stdout and on stderr, outside any JSON event."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        stream.buffer.write(f"terminal: {TERMINAL_SEQUENCES}\n".encode())
        stream.buffer.flush()


def hang() -> None:
    """A child in the same process group that ignores SIGTERM, then sleep forever."""
    import subprocess

    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
    child = subprocess.Popen([sys.executable, "-c", code])
    emit(type="system", subtype="spawned", pid=child.pid)
    while True:
        time.sleep(3600)


def flood(total: int) -> None:
    """`total` bytes on stdout and stderr alternately, one stdout line over 100 KB."""
    line = json.dumps({"type": "assistant", "text": "x" * max(total // 2, 100_001)})
    sys.stdout.write(line + "\n")
    sent = len(line) + 1
    block = "y" * 65_000
    while sent < total:
        sys.stdout.write(json.dumps({"type": "assistant", "text": block}) + "\n")
        sys.stderr.write(block + "\n")
        sent += 2 * (len(block) + 1)
    sys.stdout.flush()
    sys.stderr.flush()


GATE_WAIT_S = 120  # how long `wait:NAME` waits for its gate, at most


def wait_for_gate(name: str) -> None:
    """`scripted: wait=NAME`: say the implementation is under way (`NAME.started` in the working directory), wait
    - at most GATE_WAIT_S - until `NAME` appears there, then remove both: a test acts while
    the run is going on, by its own signal rather than by the clock."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"scripted: wait=NAME needs a plain file name, got {name!r}")
    started = f"{name}.started"
    with open(started, "w", encoding="utf-8") as file:
        file.write("under way\n")
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    for done in (name, started):
        if os.path.lexists(done):
            os.remove(done)


def pace(value: str, seed: str) -> None:
    """`MIN-MAX:KBPS`: take a random MIN to MAX seconds (the same for the same `seed`: the
    task, stage and round), printing assistant events at KBPS kilobytes (1,000 bytes) a
    second of stdout meanwhile, as a model-backed CLI streams its work. The lines add up to
    KBPS x the seconds drawn, however late the machine woke it."""
    import random

    found = re.fullmatch(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)", value)
    if not found or float(found[1]) > float(found[2]):
        raise UsageError(f"--misbehave pace:MIN-MAX:KBPS needs MIN <= MAX, got {value!r}")
    low, high, kbps = (float(n) for n in found.groups())
    seconds = random.Random(seed).uniform(low, high)
    rate = kbps * 1000
    overhead = len(json.dumps({"type": "assistant", "text": ""})) + 1  # its line, but the text
    start = time.monotonic()
    sent = 0

    def catch_up(elapsed: float) -> None:
        nonlocal sent
        owed = int(rate * min(elapsed, seconds)) - sent
        if owed > overhead:
            sys.stdout.write(json.dumps({"type": "assistant", "text": "." * (owed - overhead)}))
            sys.stdout.write("\n")
            sys.stdout.flush()
            sent += owed

    while (elapsed := time.monotonic() - start) < seconds:
        catch_up(elapsed)
        time.sleep(min(0.05, seconds - elapsed))
    catch_up(seconds)


def escape() -> None:
    """Write into the main checkout of the repository whose worktree is the cwd."""
    import subprocess

    found = subprocess.run(
        ["git", "rev-parse", "--git-common-dir"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if found.returncode != 0:
        emit(type="assistant", text="not in a git repository; nothing to escape to")
        return
    main = os.path.dirname(os.path.abspath(found.stdout.strip()))
    target = os.path.join(main, ESCAPE_FILE)
    with open(target, "w", encoding="utf-8") as file:
        file.write("written by t25-scripted-agent outside its working directory\n")
    emit(type="tool_use", name="write", path=target)


# T25's own secrets, which no agent may read (core.config.held_secrets; repeated here because
# the scripted agent imports nothing of T25's).
T25_SECRETS = ("FACTORY_WORKER_CREDENTIAL", "T25_DATABASE_URL", "T25_OPERATOR_TOKEN")


def print_file(path: str) -> None:
    """Print what the file at `path` holds (a secret, say) in an event on stdout, and on stderr in
    two writes a moment apart, so that T25 reads it cut between two chunks."""
    with open(path, encoding="utf-8") as file:
        text = file.read().strip()
    emit(type="assistant", text=f"{path} holds {text}")
    half = len(text) // 2
    for piece in (f"{path}: {text[:half]}", f"{text[half:]}\n"):
        sys.stderr.write(piece)
        sys.stderr.flush()
        time.sleep(0.05)


def read_environ() -> None:
    """Look for T25's secrets in this process's environment and in the `/proc/<pid>/environ` of
    each of its ancestors (T25 among them); say where each was found, with its value."""
    found = [
        f"{name}={os.environ[name]} in my environment" for name in T25_SECRETS if name in os.environ
    ]
    readable, unreadable = [], []
    pid = os.getppid()
    for _ in range(64):  # up the ancestry to init, bounded
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                entries = file.read().split(b"\0")
            readable.append(pid)
        except OSError:
            entries = []
            unreadable.append(pid)
        for entry in entries:
            name, _, value = entry.decode("utf-8", "replace").partition("=")
            if name in T25_SECRETS:
                found.append(f"{name}={value} in /proc/{pid}/environ")
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
                pid = int(file.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
    emit(
        type="assistant",
        text=f"environ: ancestors {readable} readable, {unreadable} unreadable; "
        + (f"found {'; '.join(found)}" if found else "found no T25 secret"),
    )


def reach(target: str) -> None:
    """Try to reach HOST:PORT every way a process in a sandbox could: directly, with a
    CONNECT and with a plain-HTTP request through the proxy its environment names, and with
    SOCKS5 through the same proxy; say what each got (`open`, or why not) in one line."""
    import socket

    host, _, port = target.rpartition(":")
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("ALL_PROXY") or ""
    via = proxy.rpartition(":")[2].strip("/")
    ways = {"direct": (host, int(port), b"")}
    if via.isdigit():
        ask = f"{host}:{port}"
        ways["connect"] = ("127.0.0.1", int(via), f"CONNECT {ask} HTTP/1.1\r\n\r\n".encode())
        ways["http"] = ("127.0.0.1", int(via), f"GET http://{ask}/ HTTP/1.1\r\n\r\n".encode())
        name = host.encode()
        hello = b"\x05\x01\x00\x05\x01\x00\x03" + bytes([len(name)]) + name
        ways["socks"] = ("127.0.0.1", int(via), hello + int(port).to_bytes(2, "big"))
    said = []
    for way, (at, number, ask_bytes) in ways.items():
        try:
            with socket.create_connection((at, number), timeout=5) as sock:
                sock.settimeout(5)
                sock.sendall(ask_bytes or b"GET / HTTP/1.1\r\n\r\n")
                answer = b""
                while len(answer) < 12 and (more := sock.recv(64)):
                    answer += more
            if way == "socks":  # the method choice, then the reply: 05 00 ... is granted
                got = "open" if answer[2:4] == b"\x05\x00" else f"refused-{answer[:4].hex()}"
            elif way in ("connect", "http"):
                status = answer.split(b" ")[1:2]
                got = "open" if status in ([b"200"], [b"404"]) else f"refused-{status}"
            else:
                got = "open"
        except OSError as exc:
            got = f"refused-{type(exc).__name__}"
        said.append(f"{way}={got}")
    emit(type="assistant", text=f"reach {target} " + " ".join(said))


def hog(mib: str) -> None:
    """Take `mib` MiB of memory and touch every page, as a runaway build would."""
    held = bytearray(int(float(mib) * 2**20))
    for at in range(0, len(held), 4096):
        held[at] = 1
    emit(type="assistant", text=f"held {mib} MiB")


def big_file(size: str) -> None:
    """Write a file of `size` bytes into the worktree (a binary counts no lines)."""
    with open("big.bin", "wb") as file:
        file.write(os.urandom(int(float(size))))
    emit(type="tool_use", name="write", path="big.bin")


def write_store() -> None:
    """Append to T25's store and audit log in `.factory/` of the main checkout, as an agent
    that wanted to approve its own plan would."""
    main = os.path.dirname(os.path.dirname(os.path.dirname(os.getcwd())))
    for name in ("t25.db", "audit.jsonl"):
        target = os.path.join(main, ".factory", name)
        with open(target, "ab") as file:
            file.write(b"written by t25-scripted-agent\n")
        emit(type="tool_use", name="write", path=target)


SCRIBBLE_FILE = "scribbled-by-a-lost-attempt.txt"


def scribble() -> None:
    """Leave a change in the worktree at once, as an attempt that then loses its lease
    would; not when T25 already kept one aside (so a later attempt behaves)."""
    import subprocess

    kept = subprocess.run(
        ["git", "for-each-ref", "refs/t25/leftovers"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    if kept.strip():
        return
    with open(SCRIBBLE_FILE, "w", encoding="utf-8") as file:
        file.write("half done\n")
    emit(type="tool_use", name="write", path=SCRIBBLE_FILE)


LEFTOVER_FILE = "LEFT_BEHIND_BY_AGENT.txt"


def leave_behind(scrub: bool) -> None:
    """Start a child in a session of its own (its environment scrubbed when `scrub`) that
    writes LEFTOVER_FILE into the working directory half a second after this agent has
    exited: after its run, unless it dies with the run."""
    import subprocess

    code = (
        "import os, sys, time\n"
        "parent = os.getppid()\n"
        "for _ in range(600):\n"
        "    if os.getppid() != parent:\n"
        "        break\n"
        "    time.sleep(0.05)\n"
        "time.sleep(0.5)\n"
        "open(sys.argv[1], 'w').write('left behind')\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, os.path.abspath(LEFTOVER_FILE)],
        start_new_session=True,
        env={} if scrub else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    emit(type="system", subtype="spawned", pid=child.pid, setsid=True)


# What `--misbehave plant:WHAT` plants, each once per repository (a file beside it says so,
# so that a retried run behaves): what it plants appends WHAT to `planted-ran` beside the
# repository if it ever runs.
PLANTS = ("fsmonitor", "hookspath", "hook", "attributes", "tag", "symlink", "push")


def plant(what: str) -> None:
    """Plant, from the worktree, what would act outside it, as a prompt-injected agent can."""
    import shlex
    import subprocess

    def run_git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, check=True
        )
        return done.stdout.strip()

    common = os.path.abspath(run_git("rev-parse", "--git-common-dir"))
    beside = os.path.dirname(os.path.dirname(common))
    once = os.path.join(beside, f"planted-{what}")
    if os.path.exists(once):
        return
    try:
        open(once, "w").close()
    except OSError:  # sandboxed: nothing beside the repository is writable; plant anyway
        pass
    ran = f"echo {what} >> {shlex.quote(os.path.join(beside, 'planted-ran'))}"

    def program(path: str) -> str:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as file:
            file.write(f"#!/bin/sh\n{ran}\n")
        os.chmod(path, 0o755)
        return path

    if what == "fsmonitor":
        run_git("config", "core.fsmonitor", f"{ran}; exit 1")
    elif what == "hookspath":
        hooks = os.path.join(beside, "planted-hooks")
        for hook in ("pre-commit", "post-commit", "post-checkout"):
            program(os.path.join(hooks, hook))
        run_git("config", "core.hooksPath", hooks)
    elif what == "hook":
        program(os.path.join(common, "hooks", "pre-commit"))
    elif what == "attributes":
        os.makedirs(os.path.join(common, "info"), exist_ok=True)
        with open(os.path.join(common, "info", "attributes"), "a", encoding="utf-8") as file:
            file.write("* filter=planted\n")
    elif what == "tag":
        run_git("tag", "planted-tag", "HEAD")
    elif what == "symlink":
        os.symlink("/etc", "etc-link")
    elif what == "push":
        run_git("config", "remote.origin.pushurl", os.path.join(beside, "decoy.git"))
        run_git("config", "remote.origin.receivepack", f"{ran}; git-receive-pack")
    emit(type="tool_use", name="bash", planted=what)


# -- main --------------------------------------------------------------------------------------


def read_prompt(args: dict[str, Any]) -> tuple[str, dict[str, str]]:
    if args["prompt_file"] is None:
        return args["prompt"], {}
    path = args["prompt_file"]
    with open(path, encoding="utf-8") as file:
        text = file.read()
    return text, {
        "prompt_file": os.path.abspath(path),
        "prompt_file_mode": oct(os.stat(path).st_mode & 0o777),
    }


def session_path(session: str) -> str:
    if not re.fullmatch(r"[\w-]{1,100}", session):
        raise UsageError(f"--resume takes a session id, got {session!r}")
    return os.path.join(os.path.expanduser("~"), SESSIONS_DIR, f"{session}.json")


def earlier_prompts(session: str) -> list[str] | None:
    """The prompts of a kept session, oldest first; None when no such session was kept."""
    try:
        with open(session_path(session), encoding="utf-8") as file:
            return list(json.load(file))
    except FileNotFoundError:
        return None


def keep_session(session: str, prompts: list[str]) -> None:
    path = session_path(session)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(prompts, file)


SESSION = ""  # this run's session id, set by main


def result(text: str, prompt: str, model: str, *, is_error: bool = False) -> None:
    n_in, n_out = len(prompt.encode()) // 4 + 1, len(text.encode()) // 4 + 1
    emit(
        type="result",
        subtype="success",
        is_error=is_error,
        result=text,
        model=model,
        session_id=SESSION,
        usage={
            "input_tokens": n_in,
            "output_tokens": n_out,
            "cache_read_input_tokens": n_in // 2,
            "cache_creation_input_tokens": n_in // 8,
        },
    )


def _plant_checked(value: str) -> None:
    if value not in PLANTS:
        raise UsageError(f"--misbehave plant:WHAT takes one of {', '.join(PLANTS)}")
    plant(value)


# What each `--misbehave KIND[:VALUE]` does before the stage's answer; the run goes on.
MISBEHAVIOURS: dict[str, Callable[[str], object]] = {
    "hang": lambda _: hang(),
    "flood": lambda value: flood(int(float(value))),
    "slow": lambda value: time.sleep(float(value)),
    "escape": lambda _: escape(),
    "scribble": lambda _: scribble(),
    "store": lambda _: write_store(),
    "setsid": lambda value: leave_behind(scrub=value == "scrubbed"),
    "plant": _plant_checked,
    "print-file": print_file,
    "environ": lambda _: read_environ(),
    "reach": reach,
    "hog": hog,
    "bigfile": big_file,
    "review-changes-once": lambda _: None,  # read by the REVIEW answer
    "nested": lambda value: nested(int(float(value))),
    "terminal": lambda _: terminal(),
}


def misbehave_once(what: str, prompt: str, model: str, seed: str = "") -> int | None:
    """Do one misbehaviour; the exit status when it ends the run, else None. `seed` makes
    what is random in one (pace's time) the same for the same task, stage and round."""
    kind, _, value = what.partition(":")
    numeric = ("exit", "flood", "slow", "hog", "bigfile", "nested")
    if kind in numeric and not re.fullmatch(r"\d+(\.\d+)?", value):
        raise UsageError(f"--misbehave {kind}:N needs a number, got {what!r}")
    if kind == "exit":
        print(f"t25-scripted-agent: exiting with status {value} on purpose", file=sys.stderr)
        return int(float(value))
    if kind == "quota":
        emit(type="assistant", text=QUOTA_TEXT, error="rate_limit")
        result(QUOTA_TEXT, prompt, model, is_error=True)
        return 1
    if kind == "garbage":
        result("I changed some things, but I will not say which.", prompt, model)
        return 0
    if kind == "pace":
        pace(value, seed)
        return None
    if kind not in MISBEHAVIOURS:
        raise UsageError(f"unknown misbehaviour {what!r}")
    MISBEHAVIOURS[kind](value)
    return None


def main(argv: list[str] | None = None) -> int:
    global SESSION
    import uuid

    args = parse_args(sys.argv[1:] if argv is None else argv)
    prompt, source = read_prompt(args)
    model = args["model"] or DEFAULT_MODEL
    earlier: list[str] = []
    if args["resume"] is not None:
        found = earlier_prompts(args["resume"])
        if found is None:
            text = f"No conversation found with session ID: {args['resume']}"
            print(text, file=sys.stderr)
            emit(type="result", subtype="error_during_execution", is_error=True, errors=[text])
            return 1
        SESSION, earlier = args["resume"], found
    else:
        SESSION = str(uuid.uuid4())
    misbehave = args["misbehave"]
    structure = top_level(prompt)
    headers: dict[str, str] = {}
    for found_header in filter(None, map(_HEADER.fullmatch, structure)):
        headers.setdefault(found_header[1], found_header[2])  # T25's header comes first
    found_directives = _DIRECTIVE.findall("\n".join([*earlier, prompt]))
    directives = dict(found_directives)
    ctx = {
        "prompt": prompt,
        "structure": structure,
        "misbehave": misbehave,
        "task": headers.get("TASK", "T-?"),
        "round": headers.get("ROUND", "1"),
        "directives": directives,
        "edits": list(dict.fromkeys(d for d in found_directives if d[0] in ("write", "delete"))),
    }
    if directives.get("sessions") == "keep":
        keep_session(SESSION, [*earlier, prompt])
    stage = headers.get("STAGE")
    emit(
        type="system",
        subtype="init",
        model=model,
        cwd=os.getcwd(),
        prompt_bytes=len(prompt.encode()),
        session_id=SESSION,
        **source,
    )
    emit(type="assistant", text=f"Working on {stage} for {ctx['task']} as {headers.get('ROLE')}.")

    seed = f"{ctx['task']}/{stage}/{ctx['round']}"
    for what in misbehave:
        code = misbehave_once(what, prompt, model, seed)
        if code is not None:
            return code

    if stage not in {"SPEC", "PLAN", "IMPLEMENTING", "QA", "REVIEW", "DOCS"}:
        text = f"no T25-STAGE header naming a working stage in the prompt (got {stage!r})"
        print(f"t25-scripted-agent: {text}", file=sys.stderr)
        result(text, prompt, model, is_error=True)
        return 2
    text = final_text(stage, ctx)
    emit(type="assistant", text=text)
    result(text, prompt, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
