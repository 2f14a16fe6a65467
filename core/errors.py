"""The errors T25 raises on purpose, and what a caller can do about each.

    T25Error                      anything T25 refuses or cannot do; `hint` says what to do next
    ├── ConfigError               t25.yaml is missing, malformed, or holds a credential
    │   └── PromptTemplateError   a prompt template with an unknown placeholder, or unreadable
    ├── InvalidInput              text that T25 refuses at the door: too long, control characters
    ├── NotFound                  an unknown task, run, project or artifact id
    ├── IllegalTransition         the state machine forbids the change that was asked for
    ├── StaleState                compare-and-set lost: the task moved since it was read
    ├── LeaseLost                 a lease expired or its fencing token is stale
    ├── ArtifactCorrupted         stored content no longer matches its SHA-256
    ├── StoreError                the store cannot be opened or is not a T25 database
    │   └── StoreUnavailable      the store did not answer now (a restart, a lock); try again
    ├── AuditError                the audit log cannot be written
    ├── DiskFull                  a file T25 writes found no space left on its disk
    ├── PolicyRefused             an operator action that policy does not allow now
    │   └── MergeRefused          the merge cannot happen safely now; nothing was changed
    ├── MergeUnrecorded           git has a merge the store could not record in its patience
    ├── ControlPlaneUnreachable   a remote `t25 serve` did not answer (or not usefully)
    ├── CredentialRefused         a remote `t25 serve` refused this worker's credential (401, 403)
    ├── ProtocolMismatch          a remote `t25 serve` and this worker speak different protocols
    ├── NoAdapter                 no adapter in a role's chain can run now
    ├── GitError                  a git command failed; its complaint is in the message
    ├── WorktreeRefused           T25 will not create, adopt or touch this worktree
    │   └── BranchMoved           the task branch no longer holds T25's last commit on it
    ├── WorktreeBusy              another T25 process is driving this task's worktree
    ├── PublishFailed             the branch could not be pushed or its pull request opened
    ├── ForgeError                the forge (GitHub) refused a request; its words are in the message
    │   └── ForgeUnavailable      the forge did not answer usefully now (5xx, timeout, rate limit)
    └── AnswerInvalid             an agent's final message is no valid artifact of its stage

Every message is one line meant for a person at a terminal; the command line prints
it (and the hint) without a traceback unless asked for one.
"""

from __future__ import annotations

import errno
import os


class T25Error(Exception):
    """Base of every deliberate T25 error. `hint` is the next step, when there is one."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(T25Error):
    """The configuration file is missing, malformed, or holds something it must not."""


class InvalidInput(T25Error):
    """Text refused where it enters T25: over its bound, or holding characters a terminal,
    a prompt or the audit log could mistake for structure."""


class NotFound(T25Error):
    """An id that names nothing in the store."""


class IllegalTransition(T25Error):
    """A state change the transition table does not allow."""


class StaleState(T25Error):
    """Compare-and-set failed: the task is no longer in the state the decision was made from."""


class LeaseLost(T25Error):
    """A lease that expired, was reclaimed, or is held under a newer fencing token."""


class ArtifactCorrupted(T25Error):
    """Stored artifact content whose SHA-256 no longer matches its address."""


class StoreError(T25Error):
    """The store cannot be opened, is not a T25 database, or is from a newer T25."""


class StoreUnavailable(StoreError):
    """The store could not be reached or was busy for now; the same call may succeed later."""


class AuditError(T25Error):
    """The audit log could not be durably written."""


class DiskFull(T25Error):
    """A file T25 writes (a run's log) found its disk full: the run it was for fails, with
    where to free space (`disk_full`); the process goes on with its other runs."""


def disk_full(what: str, path: os.PathLike[str] | str) -> str:
    """The one line that says `what` could not be written to `path` for want of space."""
    return f"disk full: {what} (free space on {mount_point(path)})"


def out_of_space(exc: BaseException) -> bool:
    """Whether `exc` is the operating system's "no space left on device" (or over quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def mount_point(path: os.PathLike[str] | str) -> str:
    """The mount point of the file system holding `path` (its nearest existing folder's)."""
    at = os.path.abspath(path)
    while not os.path.exists(at):
        at = os.path.dirname(at)
    while not os.path.ismount(at):
        at = os.path.dirname(at)
    return at


class PolicyRefused(T25Error):
    """An operator action that policy does not allow in the task's current situation."""


class ControlPlaneUnreachable(T25Error):
    """A remote control plane did not answer, or answered something its client cannot use."""


class CredentialRefused(T25Error):
    """A remote control plane refused the worker credential: trying again will not help."""


class ProtocolMismatch(T25Error):
    """A worker and its `t25 serve` speak different versions of the worker protocol (426):
    nothing either sends can be trusted to be read; one of them must be upgraded."""


class NoAdapter(T25Error):
    """No adapter in a role's chain can run now; the message says why for each."""


class GitError(T25Error):
    """A git command that failed; the message carries its stderr."""


class WorktreeRefused(T25Error):
    """T25 will not create, adopt or touch this worktree; the message says why."""


class WorktreeBusy(T25Error):
    """Another T25 process (named by pid) is driving this task's worktree."""


class MergeRefused(PolicyRefused):
    """The merge into the default branch cannot happen safely now; nothing was changed."""


class PublishFailed(T25Error):
    """The branch could not be pushed or its pull request opened."""


class ForgeError(T25Error):
    """The forge refused a request (no such repository, no permission, a field it rejects)."""


class ForgeUnavailable(ForgeError):
    """The forge did not answer usefully in time (5xx, a timeout, its rate limit): try again."""


class PromptTemplateError(ConfigError):
    """A prompt template that cannot be used: unknown placeholder, unreadable, misplaced."""


class AnswerInvalid(T25Error):
    """An agent's final message that is not a valid artifact of its stage."""


class MergeUnrecorded(T25Error):
    """git has the merge; the store could not record it within its patience
    (core.control.merge_record): `t25 merge` records it once the store answers."""


class BranchMoved(WorktreeRefused):
    """The task branch no longer holds the commit T25's last run left it at
    (core.workspace.branch_guard)."""
