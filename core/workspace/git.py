"""T25's own calls to git: always an argv list, never a shell, never a planted program.

A worktree shares `.git/config` and hooks with the main checkout, so an agent in any
worktree could plant an fsmonitor, a hook, a pager, a filter or a merge driver there.
Every git call T25 makes overrides those with harmless values and runs with a minimal,
predictable environment.

Two layers do that:

* `SAFE_CONFIG`: fixed `-c` overrides for every program-running key with a fixed name
  (fsmonitor, hooks, pager, editor, signing, askpass, …). `-c` is read after every config
  file, so it wins over anything a repository declares.
* `driver_overrides`: filters (`filter.<name>.clean/smudge/process`) and merge drivers
  (`merge.<name>.driver`) are keyed by a name the repository chooses, so no fixed list can
  switch them off. Before each async call the names are read with `git config
  --get-regexp` (which runs nothing; kept until a config file changes:
  `core.workspace.driver_names`) and every one is neutralised. The overrides travel in
  `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` rather than `-c`, because a
  driver name may legally contain `=`, which `-c name=value` would split in the wrong
  place. Those variables are inherited by the git processes git itself starts (the
  status `git worktree remove` runs, for instance), so the children are covered too.
* The one exception: Git LFS's filter, run as git-lfs's own binary from PATH and never as
  the repository names it, without network (`core.workspace.lfs_filter`).

What this cannot close: a driver added to `.git/config` in the instant between reading
the names and the call that follows. That window is microseconds, T25 holds the task's
lock while it works, and the fingerprint of the main checkout taken around every agent
run that is not confined (a confined one cannot reach `.git/config`) reports any change to
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import GitError
from core.workspace.driver_names import driver_names, keys_of
from core.workspace.lfs_filter import extension_names, lfs_overrides

# Repository-configured programs T25's own git calls must never run.
SAFE_CONFIG = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",  # no hook of any kind (pre-commit, post-checkout, …)
    "-c",
    "core.pager=cat",
    "-c",
    "core.editor=true",
    "-c",
    "sequence.editor=true",
    "-c",
    "core.askPass=",
    "-c",
    "core.sshCommand=false",
    "-c",
    "credential.helper=",
    # Fails closed: a `git diff` that forgets --no-ext-diff errors instead of running one.
    "-c",
    "diff.external=",
    "-c",
    "protocol.ext.allow=never",
    # Signing and signature checks run gpg.program / gpg.ssh.program, which a repo can set.
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "merge.verifySignatures=false",
    "-c",
    "log.showSignature=false",
    # A submodule has its own config and hooks; T25 never descends into one.
    "-c",
    "submodule.recurse=false",
    # No background gc/maintenance started as a side effect of a commit.
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
)

# The same, as (key, value) pairs for GIT_CONFIG_COUNT: for a program that runs git itself.
SAFE_OVERRIDES: tuple[tuple[str, str], ...] = tuple(
    (key, value) for key, _, value in (pair.partition("=") for pair in SAFE_CONFIG[1::2])
)

GIT_SAID_MAX = 1000  # characters of git's own words kept in an error
# git's words when a lock file (index.lock, HEAD.lock, …) is in the way.
_STALE_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")

# Config sections whose programs are chosen per driver name (see the module docstring).
_DRIVER_SECTIONS = ("filter", "merge")


def git_env(overrides: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """A minimal environment: nothing inherited can point git at another repository
    (GIT_DIR, GIT_INDEX_FILE), another program (GIT_EXTERNAL_DIFF, GIT_ASKPASS) or more
    config (GIT_CONFIG_PARAMETERS). `overrides` become command-line-scope config."""
    keep = (
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_AUTHOR_DATE",  # a pinned date (reproducible commits), never a path or program
        "GIT_COMMITTER_DATE",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        LC_ALL="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",  # a planted refs/replace/ cannot swap what T25 reads
    )
    if overrides:
        env["GIT_CONFIG_COUNT"] = str(len(overrides))
        for i, (key, value) in enumerate(overrides):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _argv(args: tuple[str, ...]) -> list[str]:
    return ["git", *SAFE_CONFIG, *args]


def _fail(args: tuple[str, ...], cwd: Path, code: int, stderr: str) -> GitError:
    detail = git_said(stderr) or f"exit status {code}"
    lock = _STALE_LOCK.search(detail)
    hint = f"if no git process is running there, remove {lock[1]}" if lock else None
    return GitError(f"git {' '.join(args)} failed in {cwd}: {detail}", hint=hint)


def git_said(stderr: str) -> str:
    """What git said on failing, in one line: every `fatal:` and `error:` line (the first
    names what failed, such as the path of a lock left by a git that died; the advice after
    it does not), else its last line; at most GIT_SAID_MAX characters."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = "; ".join(
        [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-1:]
    )
    return said if len(said) <= GIT_SAID_MAX else said[: GIT_SAID_MAX - 1] + "…"


def git_reason(stderr: str) -> str:
    """git's own reason in one line: its first error, with any files it lists after it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    first = next((line for line in lines if line.startswith(("error:", "fatal:"))), lines[-1])
    if first.startswith(("error:", "fatal:")):
        first = first.split(":", 1)[1].strip()
    files = [line.strip() for line in lines if line.startswith("\t")]
    return f"{first.rstrip(':')}: {listed(files)}" if files else first


def git_sync(*args: str, cwd: Path, check: bool = True) -> str:
    """Run git synchronously (command-line start-up, before any event loop matters).

    Filters and merge drivers are not neutralised here (see `run_git`): use it only in a
    repository no agent has touched, or for calls that stage and check out nothing."""
    try:
        done = subprocess.run(
            _argv(args),
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
    except OSError as exc:
        raise _not_started(args, cwd, exc) from None
    if check and done.returncode != 0:
        raise _fail(args, cwd, done.returncode, done.stderr)
    return done.stdout.strip()


def config_entries(body: bytes) -> tuple[str, ...]:
    """The sorted `key=value` lines of a git config file's content. `--file -` reads just
    that content (no includes) and runs nothing; content git cannot parse yields ()."""
    try:
        done = subprocess.run(
            _argv(("config", "--file", "-", "--null", "--list")),
            input=body,
            env=git_env(),
            capture_output=True,
            check=False,
        )
    except OSError:
        return ()
    entries = os.fsdecode(done.stdout).split("\0") if done.returncode == 0 else []
    return tuple(sorted(e.replace("\n", "=", 1) for e in entries if e))


def driver_overrides(names: str) -> tuple[tuple[str, str], ...]:
    """Overrides that switch off every filter and merge driver named in `names`, the
    NUL-separated output of `git config --null --name-only --get-regexp`.

    A filter whose `process` is the empty string is skipped entirely (its clean and smudge
    commands too), and one that is not `required` then passes content through unchanged:
    nothing runs, not even `cat`. Clean and smudge are emptied as well, for a git that
    reads them first. A merge driver cannot be removed, only replaced: `false` makes every
    file that would use it a conflict, so the merge is refused instead of silently taking
    one side.
    """
    found: dict[str, set[str]] = {section: set() for section in _DRIVER_SECTIONS}
    for key in filter(None, names.split("\0")):
        section, _, rest = key.partition(".")
        name, dot, _var = rest.rpartition(".")
        if section.lower() in found and dot:  # two-level keys (merge.ff) name no driver
            found[section.lower()].add(name)
    out: list[tuple[str, str]] = []
    for name in sorted(found["filter"]):
        out += [
            (f"filter.{name}.clean", ""),
            (f"filter.{name}.smudge", ""),
            (f"filter.{name}.process", ""),
            (f"filter.{name}.required", "false"),
        ]
    out += [(f"merge.{name}.driver", "false") for name in sorted(found["merge"])]
    return tuple(out)


@dataclass(frozen=True)
class Completed:
    """A finished git call: exit status, raw stdout, decoded stderr."""

    code: int
    out: bytes
    err: str


# How long a stopped command gets to clean up (git removes its *.lock files on SIGTERM).
TERM_GRACE_S = 5.0


async def _spawn(
    args: tuple[str, ...], cwd: Path, overrides: Sequence[tuple[str, str]]
) -> Completed:
    try:
        return await run_command(_argv(args), cwd=cwd, env=git_env(overrides))
    except OSError as exc:
        raise _not_started(args, cwd, exc) from None


def _not_started(args: tuple[str, ...], cwd: Path, exc: OSError) -> GitError:
    """Why git could not even start, as a GitError: the caller (a run, a decision) then
    fails with the reason instead of an OSError escaping it."""
    if not Path(cwd).is_dir():
        return GitError(f"git cannot run in {cwd}: no such directory")
    if isinstance(exc, FileNotFoundError):
        return GitError("git is not installed or not on PATH")
    if exc.errno == errno.E2BIG:  # Linux caps one argument at 128 KiB, all of them at ~2 MiB
        longest = max(len(os.fsencode(a)) for a in args)
        return GitError(
            f"git cannot be started: one of its arguments is "
            f"{longest:,} bytes, more than the system allows ({exc.strerror})"
        )
    return GitError(f"git cannot be started in {cwd}: {exc.strerror}")


async def run_command(argv: list[str], *, cwd: Path, env: dict[str, str]) -> Completed:
    """Run a short command in a session of its own and collect its output.

    If the caller is cancelled, the command's group is ended (SIGTERM, then SIGKILL if it
    lingers) and the command reaped, its pipes closed, before the cancellation goes on.
    Left to itself, asyncio reaps it later, on a watcher thread that hands the exit status
    to the loop; if the loop has closed by then, the garbage collector finds a "still
    running" child and open pipes in whatever code happens to run next.
    """
    proc = await _start(argv, cwd, env)
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        await _end(proc)
        raise
    return Completed(proc.returncode or 0, out, err.decode(errors="replace"))


async def _start(argv: list[str], cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    """Start `argv`; a cancellation that lands meanwhile lets the start finish and then ends
    the command (asyncio alone kills only the leader, and leaves it unreaped if cancelled
    once more while waiting for it)."""
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        while not starting.done():
            with contextlib.suppress(asyncio.CancelledError):  # raised below all the same
                await asyncio.wait([starting])
        if not starting.cancelled() and starting.exception() is None:
            await _end(starting.result())
        raise


def close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Stop reading a child: output nobody wants, which a lingering descendant could hold open."""
    for fd in (1, 2):
        proc._transport.get_pipe_transport(fd).close()  # type: ignore[attr-defined]


def _gone(proc: asyncio.subprocess.Process) -> bool:
    """Reaped, both pipes closed and so is the transport that held them."""
    transport = proc._transport  # type: ignore[attr-defined]  # no public way to ask
    pipes = (transport.get_pipe_transport(fd) for fd in (1, 2))
    return (
        proc.returncode is not None
        and transport.is_closing()
        and all(pipe.get_extra_info("pipe").closed for pipe in pipes)
    )


async def let_go(proc: asyncio.subprocess.Process) -> None:
    """Close a dead child's pipes and wait until nothing of it is left: reaped, pipes and
    transport closed. Every runner of children (git calls, agents, checks) ends with this."""
    close_pipes(proc)
    while not _gone(proc):  # noqa: ASYNC110 - asyncio signals neither the reaping nor the closing
        await asyncio.sleep(0.002)


async def unstoppable(step: Callable[[], Awaitable[object]]) -> None:
    """Await `step()` to its end even if the task is cancelled meanwhile, then pass the
    cancellation on. For cleanup that must finish: asyncio.run, for one, cancels every task
    once more as it closes the loop. `step` must be bounded and safe to start again."""
    stopped = False
    while True:
        try:
            await step()
            break
        except asyncio.CancelledError:
            stopped = True
    if stopped:
        raise asyncio.CancelledError


async def _end(proc: asyncio.subprocess.Process) -> None:
    """End a command whose caller was cancelled, and wait until nothing of it is left.

    Cancelled again meanwhile (asyncio.run cancels every task once more as it closes the
    loop), it skips what is left of the grace period but still waits; its caller passes
    the cancellation on in any case."""
    sig = signal.SIGTERM
    grace_s: float | None = TERM_GRACE_S
    while proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(_reaped(proc), grace_s)
        sig, grace_s = signal.SIGKILL, None
    await unstoppable(lambda: let_go(proc))


async def _reaped(proc: asyncio.subprocess.Process) -> None:
    # Not proc.wait(): that also waits for the pipes, which nobody reads any more.
    while proc.returncode is None:  # noqa: ASYNC110 - see let_go
        await asyncio.sleep(0.002)


# The config T25 reads before its git calls: the driver, LFS and include keys, and the
# values a commit and a staging need (core.workspace.config_values).
_KEPT_KEYS = (
    r"^(filter|merge|lfs|include|includeif)\.|^user\.(name|email)$"
    r"|^core\.sparsecheckout(cone)?$"
)


async def neutral_drivers(*dirs: Path) -> tuple[tuple[str, str], ...]:
    """The overrides for every filter and merge driver configured as seen from `dirs`
    (a linked worktree may add its own in `config.worktree`), then the one filter let
    through: git-lfs's own (`core.workspace.lfs_filter`). Reading config runs nothing."""
    names = [keys_of(await kept_entries(d)) for d in dirs]
    found = os.fsdecode(b"\0".join(names))
    return driver_overrides(found) + lfs_overrides(extension_names(found))


async def kept_entries(directory: Path) -> bytes:
    """`directory`'s config entries T25 reads (`key` LF `value`, NUL-separated, as git
    prints them): one `git config` process, kept until a config file changes."""
    return await driver_names(directory, _config_entries)


async def _config_entries(directory: Path) -> bytes:
    """The driver, LFS, include, identity and sparse-checkout entries of `directory`'s
    config (includes only to know that they cannot be kept: core.workspace.driver_names)."""
    done = await _spawn(("config", "--null", "--get-regexp", _KEPT_KEYS), directory, ())
    return done.out  # exit 1 just means "none configured"


async def run_git(
    *args: str,
    cwd: Path,
    drivers_from: Iterable[Path] | None = None,
    config: Sequence[tuple[str, str]] = (),
) -> Completed:
    """Run git with every program a repository could plant switched off; never raise on a
    non-zero exit. `drivers_from` are the directories whose filter and merge drivers to
    neutralise (default: `cwd`; pass `()` only for a call that cannot run one). `config`
    is more command-line config for this call alone (after the overrides, so it wins)."""
    dirs = (cwd,) if drivers_from is None else tuple(drivers_from)
    overrides = await neutral_drivers(*dirs) if dirs else ()
    return await _spawn(args, cwd, (*overrides, *config))


async def git_bytes(
    *args: str, cwd: Path, check: bool = True, drivers_from: Iterable[Path] | None = None
) -> bytes:
    """Like `git`, but stdout unstripped and undecoded (for `-z` output and raw paths)."""
    done = await run_git(*args, cwd=cwd, drivers_from=drivers_from)
    if check and done.code != 0:
        raise _fail(args, cwd, done.code, done.err)
    return done.out


async def git(
    *args: str, cwd: Path, check: bool = True, drivers_from: Iterable[Path] | None = None
) -> str:
    """Run git without blocking the event loop; return its stripped stdout."""
    out = await git_bytes(*args, cwd=cwd, check=check, drivers_from=drivers_from)
    return out.decode(errors="replace").strip()


async def one_line_log(repo: Path, since: str, head: str) -> tuple[str, ...]:
    """`abc123 subject` of each commit `head` has beyond `since`, newest first; () when git
    cannot tell (a commit it does not have)."""
    out = await git(
        "log", "--no-decorate", "--format=%h %s", f"{since}..{head}", cwd=repo, check=False
    )
    return tuple(out.splitlines())


def status_entries(raw: bytes) -> list[tuple[str, str]]:
    """(XY, path) pairs from `git status --porcelain=v1 -z`, paths undecoded-safe
    (`os.fsdecode`); a rename's or copy's source path is skipped."""
    fields = os.fsdecode(raw).split("\0")
    out, i = [], 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) > 3:
            out.append((entry[:2], entry[3:]))
            if "R" in entry[:2] or "C" in entry[:2]:
                i += 1  # the next field is the original path
    return out


def repo_root(path: Path) -> Path | None:
    """The top of the main checkout containing `path`, or None outside a repository."""
    out = git_sync("rev-parse", "--show-toplevel", cwd=path, check=False)
    return Path(out) if out else None


def default_branch(repo: Path) -> str:
    """The branch tasks start from: origin's HEAD when there is one, else the checked-out one."""
    remote = git_sync(
        "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD", cwd=repo, check=False
    )
    if remote:
        return remote.split("/", 1)[1]
    branch = git_sync("symbolic-ref", "--quiet", "--short", "HEAD", cwd=repo, check=False)
    if not branch and repo_root(repo) is None:
        raise GitError(
            f"{repo} is not a git repository",
            hint="point `repo:` in t25.yaml at one, or run `git init` there; a serve host "
            "that has no checkout of it (workers on other hosts merge) sets the project's "
            "`default_branch:` instead",
        )
    if not branch:
        raise GitError(
            f"cannot tell the default branch of {repo}: HEAD is detached",
            hint="set default_branch for this project in t25.yaml",
        )
    return branch


def identity(cwd: Path) -> str:
    """Who is acting: the OS user, with the git identity when one is configured."""
    import getpass

    user = getpass.getuser()
    name = git_sync("config", "user.name", cwd=cwd, check=False)
    email = git_sync("config", "user.email", cwd=cwd, check=False)
    who = " ".join(p for p in (name, f"<{email}>" if email else "") if p)
    return f"{user} ({who})" if who else user


async def holds_branch(repo: Path, branch: str) -> bool:
    """Whether `repo` is a git checkout here with the local branch `branch`: where a merge
    of that branch can be made by this process."""
    try:
        done = await run_git(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo, drivers_from=()
        )
    except (OSError, ValueError):  # no such directory: no checkout here
        return False
    return done.code == 0


@dataclass(frozen=True)
class TriedMerge:
    """`git merge-tree --write-tree` of `tip` into `base`, made in the object store alone (no
    checkout, index or ref touched): the tree it made, or the files that conflict, or what git
    said when it could not try (an older git, a missing commit)."""

    tree: str | None  # the merge's tree when it is clean
    conflicts: tuple[str, ...] = ()  # the conflicting files, sorted, when it is not
    err: str = ""  # git's stderr when it could not try at all


async def merge_tree(repo: Path, base: str, tip: str) -> TriedMerge:
    """The merge of `tip` into `base`, tried with nothing touched (git 2.38 or later)."""
    tried = await run_git(
        "merge-tree", "--write-tree", "--name-only", "--no-messages", base, tip, cwd=repo
    )
    lines = os.fsdecode(tried.out).splitlines()
    if tried.code == 0 and lines:
        return TriedMerge(tree=lines[0])
    if tried.code == 1 and lines:  # conflicts: the tree, then the files
        return TriedMerge(tree=None, conflicts=tuple(sorted(set(lines[1:]))))
    return TriedMerge(tree=None, err=tried.err)


def listed(names: Sequence[str], shown: int = 5) -> str:
    """`a.py, b.py … and 3 more`: the first `shown` names, the rest counted."""
    return ", ".join(names[:shown]) + (
        f" … and {len(names) - shown} more" if len(names) > shown else ""
    )
