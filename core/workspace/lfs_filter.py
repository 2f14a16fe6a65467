"""The one filter T25's own git calls let run: Git LFS's, by git-lfs's own binary.

A repository that keeps large files in Git LFS (`.gitattributes`: `filter=lfs`) needs the
filter on both sides of a worktree: checking out turns a pointer into its content (smudge)
and staging turns content back into a pointer (clean). With every filter switched off
(`core.workspace.git`), a worktree held pointer files and a file an agent wrote under an
LFS pattern was committed as a raw blob.

So the `lfs` filter is the exception, on these terms:

* The program is the `git-lfs` found on PATH, named by its absolute path, run as `git-lfs
  filter-process`: whatever the repository's config names for `filter.lfs.*` is replaced.
  Without git-lfs the filter stays off, as every other one is (`lfs_problem` says so).
* No network: `lfs.url` points at a local path that does not exist, so an object missing
  from the local LFS store fails the checkout instead of being fetched; the transfer agent
  is git-lfs's own for such a path.
* An LFS extension (`lfs.extension.<name>.clean/smudge`, a program the config names) is
  replaced by `false`: a file it would touch fails to check out or commit, never runs it.
"""

from __future__ import annotations

import shlex
import shutil

# An LFS URL that reaches nothing: a file URL below /dev/null can never exist.
NO_DOWNLOAD = "file:///dev/null/t25-fetches-no-lfs-object"
INSTALL_HINT = (
    "install git-lfs (apt-get install git-lfs, or https://git-lfs.com) so worktrees hold "
    "the real files and T25 commits files under LFS patterns through LFS"
)


def lfs_program() -> str | None:
    """The absolute path of the `git-lfs` on PATH, or None."""
    return shutil.which("git-lfs")


def lfs_overrides(extensions: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The config that lets exactly git-lfs's own filter run (and `extensions`, the LFS
    extension names configured, run nothing); () without git-lfs on PATH. These go after
    the neutralising overrides, so they win."""
    program = lfs_program()
    if program is None:
        return ()
    quoted = shlex.quote(program)
    out = [
        ("filter.lfs.process", f"{quoted} filter-process"),
        ("filter.lfs.clean", f"{quoted} clean -- %f"),
        ("filter.lfs.smudge", f"{quoted} smudge -- %f"),
        ("filter.lfs.required", "true"),
        ("lfs.url", NO_DOWNLOAD),
        ("lfs.pushurl", NO_DOWNLOAD),
        ("lfs.standalonetransferagent", ""),
    ]
    for name in sorted(set(extensions)):
        out += [(f"lfs.extension.{name}.clean", "false"), (f"lfs.extension.{name}.smudge", "false")]
    return tuple(out)


def extension_names(names: str) -> tuple[str, ...]:
    """The LFS extension names among `names` (NUL-separated config keys)."""
    out = []
    for key in filter(None, names.split("\0")):
        section, _, rest = key.partition(".")
        sub, dot, _var = rest.rpartition(".")
        if section.lower() == "lfs" and dot and sub.lower().startswith("extension."):
            out.append(sub.split(".", 1)[1])
    return tuple(out)
