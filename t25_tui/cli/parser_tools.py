"""The command line's other commands: init and demo, logs, diff and show, serve and worker,
tui, doctor, completion, cost and audit."""

from __future__ import annotations

import argparse
from typing import Any

from t25_tui.cli.parser_common import (
    AddCommand,
    command,
    json_option,
    since,
)


def setup_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Init and demo: T25 set up in a repository, or a tour."""
    add("init", "setup:init", "create t25.yaml and .factory/ in this git repository")
    demo = add(
        "demo",
        "demo:demo",
        "a guided tour: tasks through the whole pipeline on a sample repository",
    )
    demo.add_argument(
        "--dir",
        metavar="PATH",
        help="create the sample repository here and keep it (default: a throwaway temp directory)",
    )
    demo.add_argument(
        "--tui",
        action="store_true",
        help="open the cockpit on the sample repository with tasks flowing",
    )


def reading_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Logs, diff and show: what the agents did."""
    p = add("logs", "logs:logs", "agent output of a task's runs, or of one run, as readable text")
    p.add_argument("ref", metavar="TASK|RUN", help="a task id (T-7) or a run id (R-12)")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="open at the last few KB of output, then keep printing as it arrives",
    )
    shown_as = p.add_mutually_exclusive_group()
    shown_as.add_argument(
        "--raw",
        action="store_true",
        help="the CLIs' output as they printed it (JSON events): byte-exact when piped; on a "
        "terminal every control character but newline and tab is shown escaped (\\x1b), so "
        "no escape sequence an agent printed (clipboard, title, tmux passthrough) acts on it",
    )
    shown_as.add_argument(
        "--log",
        action="store_true",
        help="a finished run's log artifact instead: byte-exact as stored when piped, "
        "escaped as --raw on a terminal",
    )
    shown_as.add_argument(
        "--json",
        action="store_true",
        help="the readable lines as JSON Lines: run_id, kind, stream, line, at",
    )
    p = add(
        "diff",
        "diff:diff",
        "a task's change against the default branch, or one implementing attempt's",
    )
    p.add_argument("id", help="task id, e.g. T-7 or 7")
    p.add_argument(
        "--attempt",
        type=int,
        metavar="N",
        help="only what implementing attempt N changed (1 the first; t25 task show lists runs)",
    )
    p.add_argument("--stat", action="store_true", help="files and lines changed, not the diff")
    p.add_argument("--json", action="store_true", help="the stat as one JSON object")
    p = add("show", "diff:show", "print an artifact's content, verified against its SHA-256")
    p.add_argument("id", help="artifact id, e.g. A-12 (t25 task show lists them)")


def serving_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Serve and worker: the control plane and its remote workers."""
    p = add(
        "serve",
        "serve:serve",
        "the control plane over REST and SSE, for remote workers",
        runs_agents=True,
    )
    p.add_argument(
        "--bind",
        metavar="HOST:PORT",
        help="address to listen on (default: serve.bind in t25.yaml, loopback)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="also run N workers in this process (default: 0, remote workers only)",
    )
    p.add_argument(
        "--store-patience",
        type=float,
        default=300.0,
        metavar="S",
        help="give up (exit 1) when the store stays unavailable this long (default: 300)",
    )
    p = add(
        "worker",
        "serve:worker",
        "work runs leased from a `t25 serve` control plane, in this host's repositories",
        runs_agents=True,
    )
    p.add_argument(
        "--url",
        action="append",
        required=True,
        metavar="URL",
        help="the control plane, e.g. http://10.0.0.5:8725; repeated, serve replicas on one "
        "Postgres to fail over between, in order (worktrees belong to the first)",
    )
    p.add_argument("--workers", type=int, default=1, metavar="N", help="runs at once (default: 1)")
    p.add_argument(
        "--lease-ttl",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds a claim lasts without a heartbeat (default: 30)",
    )
    p.add_argument(
        "--heartbeat",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between heartbeats (default: 5)",
    )


def cockpit_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Tui: the cockpit."""
    tui = add(
        "tui",
        "tui:tui",
        "the cockpit: a full-screen board, logs, approvals, cost and audit",
        runs_agents=True,
    )
    tui.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="in-process workers (default: limits.workers in t25.yaml)",
    )
    tui.add_argument(
        "--no-workers",
        action="store_true",
        help="only watch and decide; another process works the queue",
    )
    tui.add_argument(
        "--serve",
        nargs="?",
        const="",
        metavar="HOST:PORT",
        help="also serve the REST/SSE control plane, so remote workers can attach "
        "(default address: serve.bind in t25.yaml)",
    )
    tui.add_argument(
        "--web",
        nargs="?",
        const="127.0.0.1:4173",
        metavar="HOST:PORT",
        help="serve the cockpit to browsers instead (default address: 127.0.0.1:4173), "
        "behind the operator's token; loopback unless T25_OPERATOR_TOKEN(S) is set",
    )
    tui.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="attach to the `t25 serve` at URL instead (e.g. http://factory:8725): "
        "no local t25.yaml or store; the token comes from --token-file, "
        "T25_OPERATOR_TOKEN_FILE or T25_OPERATOR_TOKEN, else from the .factory/operator-token "
        "a serve of this checkout made; repeated, serve replicas to fail over between",
    )
    tui.add_argument(
        "--token-file",
        type=str,
        metavar="PATH",
        help="with --url: the file that holds your operator token (nothing typed on a "
        "command line, where a shell's history would keep it)",
    )


def tool_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Doctor, completion and cost."""
    p = add(
        "doctor",
        "doctor:doctor",
        "check every configured agent CLI (found, version, capabilities, login), git, the "
        "sandbox, the store and t25.yaml; exit 1 when T25 could not work as configured",
    )
    json_option(p)
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also the wide tables: every CLI's capabilities and flags, each role's network "
        "reach and tools",
    )
    p = add(
        "completion",
        "completion:completion",
        "print a shell completion script (commands, options, task ids): "
        "source <(t25 completion bash)",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    # Hidden (no help): what the completion scripts run to list task ids.
    sub.add_parser("__complete-ids", add_help=False).set_defaults(handler=command("completion:ids"))
    p = add("cost", "cost:cost", "estimated spend: in total, and by role, adapter, model and task")
    json_option(p)


def audit_commands(sub: argparse._SubParsersAction[Any], add: AddCommand) -> None:
    """Audit: the log of decisions, verified, exported, rotated."""
    audit = add("audit", "audit:show", "the audit log of operator decisions")
    audit.add_argument("--task", help="only this task's decisions")
    json_option(audit)
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="SUBCOMMAND")
    verify = audit_sub.add_parser(
        "verify",
        help="check the log's chain and T25's seals, and each task's row against its history",
        description="Check the audit log's hash chain against the store's anchor and each "
        "line's seal (T25's key), and each task's row against its sealed history; exit 1 and "
        "name the first bad line, or each task whose records T25 did not write.",
    )
    verify.add_argument(
        "--against",
        nargs="+",
        metavar="SEQ:HASH",
        help="also check that line SEQ of the chain still has HASH: a head `t25 audit "
        "checkpoint` printed and you kept outside T25 (catches a rewrite of both the log "
        "and the store)",
    )
    verify.set_defaults(handler=command("audit:verify"))
    export = audit_sub.add_parser(
        "export",
        help="write the audit log to standard output, for an auditor",
        description="Write the audit log to standard output, oldest line first: jsonl "
        "(each line exactly as hashed, so it verifies on its own) or csv.",
    )
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument(
        "--since",
        type=since,
        metavar="TIME|SEQ",
        help="only the lines from this time (ISO 8601, UTC unless it says) or this "
        "sequence number on",
    )
    export.set_defaults(handler=command("audit:export"))
    checkpoint = audit_sub.add_parser(
        "checkpoint",
        help="print the chain's head (SEQ HASH) to keep outside T25",
        description="Verify the chain, then print its head: the last line's sequence "
        "number and hash. Keep it outside T25; `t25 audit verify --against` checks it later.",
    )
    checkpoint.add_argument("--json", action="store_true", help="as a JSON object")
    checkpoint.set_defaults(handler=command("audit:checkpoint"))
    rotate = audit_sub.add_parser(
        "rotate-key",
        help="add a new sealing key; what the old ones sealed still verifies",
        description="Add a new key to T25's keyring (audit.key_file, .factory/audit.key by "
        "default): every line and state change from now on is sealed with it; the old keys "
        "stay, to verify what they sealed. Back the key file up with the store.",
    )
    rotate.set_defaults(handler=command("audit:rotate_key"))
