"""`t25 completion bash|zsh|fish`: a shell completion script, generated from the parser.

`grammar` walks the argparse parser once into a `Command` per command path (`""`, `task`,
`task list`, …): its subcommands, its options (which take a value, which choices, which a
file) and whether it takes a task id. Each shell's script is that table written in the
shell's own terms, so a new command or option completes without anyone touching this file.
Task ids come from `t25 __complete-ids` as the user types: the open tasks' ids, one a line,
and nothing at all (exit 0) when there is no t25.yaml or no store to read.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

SHELLS = ("bash", "zsh", "fish")
_ID_DESTS = ("id", "ref", "task")  # what names a task (`ref` also takes a run id)
_FILE_METAVARS = ("PATH",)  # options whose value is a path: the shell completes files


@dataclass(frozen=True)
class Option:
    """One option of a command: all its spellings, and what its value is."""

    flags: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    is_file: bool
    is_id: bool  # its value is a task id (`audit --task`)


@dataclass(frozen=True)
class Command:
    """A command path (`("task", "list")`; `()` is `t25` itself) and what follows it."""

    path: tuple[str, ...]
    subcommands: tuple[tuple[str, str], ...]  # (name, help)
    options: tuple[Option, ...]
    takes_id: bool
    values: tuple[str, ...]  # a positional's choices (`completion bash|zsh|fish`)

    @property
    def key(self) -> str:
        return " ".join(self.path)

    def words(self) -> list[str]:
        """What may be typed next that is not an option: a value, a subcommand."""
        return [*self.values, *(name for name, _ in self.subcommands)]

    def flags(self) -> list[str]:
        """Its options, offered once a word starts with `-`."""
        return [flag for option in self.options for flag in option.flags]


def grammar(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command path of `parser`, depth first; hidden commands (`__…`) left out."""
    subcommands: list[tuple[str, str]] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    options: list[Option] = []
    takes_id = False
    values: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                if not name.startswith("__"):
                    subcommands.append((name, helps.get(name, "")))
                    children.append((name, child))
        elif action.option_strings:
            options.append(
                Option(
                    flags=tuple(action.option_strings),
                    takes_value=action.nargs != 0,
                    choices=tuple(str(c) for c in action.choices or ()),
                    is_file=action.metavar in _FILE_METAVARS,
                    is_id=action.dest in _ID_DESTS,
                )
            )
        elif action.dest in _ID_DESTS:
            takes_id = True
        elif action.choices:
            values += [str(c) for c in action.choices]
    yield Command(path, tuple(subcommands), tuple(options), takes_id, tuple(values))
    for name, child in children:
        yield from grammar(child, (*path, name))


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    commands = list(grammar(parser))
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](commands)


def completion(args: argparse.Namespace) -> int:
    from t25_tui.cli.parser import build_parser

    print(script(args.shell, build_parser()), end="")
    return 0


def ids(args: argparse.Namespace) -> int:
    """`t25 __complete-ids`: open tasks' ids for the shell; silent whatever goes wrong.
    With the default store (SQLite under .factory/) the ids are read with the standard
    library alone (`quick_ids`); anything else goes through the control plane."""
    try:
        from store.quick import open_task_ids
        from t25_tui.cli.quick import default_sqlite

        db = default_sqlite(args)
        quick = None if db is None else open_task_ids(db)
        if quick is not None:
            print("\n".join(quick))
            return 0
        from core.ports import Operations
        from t25_tui.cli.context import run

        async def body(control: Operations) -> list[str]:
            return [task.id for task in await control.tasks()]

        print("\n".join(run(args, body)))
    except Exception:  # noqa: BLE001 - a completion must never print an error into a prompt
        pass
    return 0


# -- the shells -------------------------------------------------------------------------------


def _q(word: str) -> str:
    return shlex.quote(word)


def _words(words: list[str]) -> str:
    return " ".join(words)


def _path_cases(commands: list[Command], indent: str, sep: str) -> str:
    """The `case` patterns that extend the command path by one word: `"task|list"`."""
    pairs = [f'"{c.key}|{name}"' for c in commands for name, _ in c.subcommands]
    return indent + sep.join(pairs)


def _value_cases(
    commands: list[Command],
) -> tuple[list[str], list[tuple[str, list[str]]], list[str], list[str]]:
    """`"path|--option"` patterns of options whose value is a file, that have choices, that
    take a task id, and that take any other value (nothing to complete)."""
    files: list[str] = []
    choices: list[tuple[str, list[str]]] = []
    ids: list[str] = []
    other: list[str] = []
    for c in commands:
        for option in (o for o in c.options if o.takes_value):
            patterns = [f'"{c.key}|{flag}"' for flag in option.flags]
            if option.is_file:
                files += patterns
            elif option.choices:
                choices.append(("|".join(patterns), list(option.choices)))
            elif option.is_id:
                ids += patterns
            else:
                other += patterns
    return files, choices, ids, other


_BASH = """\
# t25 completion for bash. Load it with: source <(t25 completion bash)
# or save it as ~/.local/share/bash-completion/completions/t25
_t25() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local at="" word i words="" flags="" ids=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        case "$at|$word" in
{path}) at="${{at:+$at }}$word" ;;
        esac
    done
    case "$at|$prev" in
{files}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
{choices}
{ids}) words=""; ids=1 ;;
{other}) COMPREPLY=(); return ;;
    *)
        case "$at" in
{commands}
        esac ;;
    esac
    if [[ $cur == -* ]]; then
        words=$flags
    elif [[ $ids == 1 ]]; then
        words="$words $("${{COMP_WORDS[0]}}" __complete-ids 2>/dev/null)"
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _t25 t25
"""


def _bash(commands: list[Command]) -> str:
    files, choices, ids, other = _value_cases(commands)
    return _BASH.format(
        path=_path_cases(commands, " " * 12, "|"),
        files=" " * 8 + "|".join(files),
        choices="\n".join(
            f'        {p}) COMPREPLY=($(compgen -W "{_words(c)}" -- "$cur")); return ;;'
            for p, c in choices
        ),
        ids=" " * 8 + "|".join(ids),
        other=" " * 8 + "|".join(other),
        commands="\n".join(
            f'            "{c.key}") words="{_words(c.words())}"; flags="{_words(c.flags())}"; '
            f"ids={int(c.takes_id)} ;;"
            for c in commands
        ),
    )


_ZSH = """\
#compdef t25
# t25 completion for zsh. Load it with: source <(t25 completion zsh)   (after compinit)
_t25() {{
    local cur=${{words[CURRENT]}} prev=${{words[CURRENT-1]}} at="" word i ids=0
    local -a next flags
    for ((i = 2; i < CURRENT; i++)); do
        word=${{words[i]}}
        case "$at|$word" in
{path}) at="${{at:+$at }}$word" ;;
        esac
    done
    case "$at|$prev" in
{files}) _files; return ;;
{choices}
{ids}) ids=1 ;;
{other}) return ;;
    (*)
        case "$at" in
{commands}
        esac ;;
    esac
    if [[ $cur == -* ]]; then
        next=($flags)
    elif [[ $ids == 1 ]]; then
        next+=(${{(f)"$(${{words[1]}} __complete-ids 2>/dev/null)"}})
    fi
    compadd -- $next
}}
compdef _t25 t25
"""


def _zsh(commands: list[Command]) -> str:
    files, choices, ids, other = _value_cases(commands)
    return _ZSH.format(
        path=" " * 12 + "(" + _path_cases(commands, "", "|"),
        files=" " * 8 + "(" + "|".join(files),
        choices="\n".join(f"        ({p}) compadd -- {_words(c)}; return ;;" for p, c in choices),
        ids=" " * 8 + "(" + "|".join(ids),
        other=" " * 8 + "(" + "|".join(other),
        commands="\n".join(
            f'            ("{c.key}") next=({_words(c.words())}); flags=({_words(c.flags())}); '
            f"ids={int(c.takes_id)} ;;"
            for c in commands
        ),
    )


_FISH = """\
# t25 completion for fish. Load it with: t25 completion fish | source
# or save it as ~/.config/fish/completions/t25.fish
function __t25_at --description 'the t25 command path typed so far is $argv'
    set -l at ''
    for word in (commandline -opc)[2..-1]
        switch "$at|$word"
            case {path}
                set at (string trim -- "$at $word")
        end
    end
    test "$at" = "$argv"
end
complete -c t25 -f
{lines}
"""


def _fish(commands: list[Command]) -> str:
    lines = []
    for c in commands:
        when = f"-n '__t25_at {c.key}'" if c.key else "-n '__t25_at'"
        for name, help in c.subcommands:
            lines.append(f"complete -c t25 {when} -a {_q(name)} -d {_q(help)}")
        for option in c.options:
            flags = " ".join(
                f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in option.flags
            )
            if option.is_file:
                flags += " -r -F"
            elif option.choices:
                flags += f" -x -a {_q(_words(list(option.choices)))}"
            elif option.is_id:
                flags += " -x -a '(t25 __complete-ids 2>/dev/null)'"
            elif option.takes_value:
                flags += " -x"
            lines.append(f"complete -c t25 {when} {flags}")
        if c.values:
            lines.append(f"complete -c t25 {when} -a {_q(_words(list(c.values)))}")
        if c.takes_id:
            lines.append(f"complete -c t25 {when} -a '(t25 __complete-ids 2>/dev/null)'")
    path = " ".join(_q(f"{c.key}|{name}") for c in commands for name, _ in c.subcommands)
    return _FISH.format(path=path, lines="\n".join(lines))
