"""The operator's verbs, each declared once.

A row says what a verb is called, what it takes (each input's option on the command line, its
field in the REST body, the decision's field it fills), how each face describes it, where
`t25 --help` lists it with its example, and how the cockpit asks for it (its key and dialog).
Built from this table: the command line's subcommands (t25_tui.cli.parser_verbs), the REST
routes and their bodies (t25_tui.api.routes.decisions), the remote cockpit's requests
(t25_tui.api.cockpit_client), the cockpit's commands (t25_tui.tui.commands) and its dialogs
(t25_tui.tui.decision_flows); the control plane's door (core.control.decision_door) checks a
decision against its row. What a verb then does to its task is its rule
(core.control.verb_rules.RULES).

A new verb is a `Verb` member, its row here, its rule, and its tests.

The standard library only: `t25 --help` builds its parser from this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verb(StrEnum):
    """What an operator can decide about a task."""

    APPROVE = "approve"
    REJECT = "reject"
    ANSWER = "answer"
    MERGE = "merge"
    CANCEL = "cancel"
    RETRY = "retry"
    ARCHIVE = "archive"
    ACKNOWLEDGE = "acknowledge"  # a run's violation was seen: retry and merge may go on
    RECHECK = "recheck"  # a DONE, unmerged task goes through QA and REVIEW again
    RESET = "reset"  # back to a stage the task passed, its branch to where that stage began
    EDIT = "edit"  # title, description, type or priority, before the task is implemented
    NOTE = "note"  # a word for the task's next agent runs; the task goes on as it was


class Kind(StrEnum):
    """What an input is: which says how each face reads it, and which field of the
    `Decision` (core.domain.decisions) it fills."""

    WORDS = "words"  # the decision's words: a reason, a comment, an answer (`text`)
    PLAN = "plan"  # the SHA-256 of the plan the operator read (`bound_to`)
    PATHS = "paths"  # protected paths, named one by one (`allow_paths`)
    STAGE = "stage"  # a working stage to go back to (`stage`)
    TITLE = "title"  # an edit's fields (`changes`) ...
    DESCRIPTION = "description"
    TYPE = "type"
    PRIORITY = "priority"


# The Decision field each kind of input fills.
FILLS = {
    Kind.WORDS: "text",
    Kind.PLAN: "bound_to",
    Kind.PATHS: "allow_paths",
    Kind.STAGE: "stage",
    Kind.TITLE: "changes",
    Kind.DESCRIPTION: "changes",
    Kind.TYPE: "changes",
    Kind.PRIORITY: "changes",
}


@dataclass(frozen=True)
class Input:
    """One thing a verb takes."""

    name: str  # its field in the REST body; on the command line, `--name` unless `option` says
    kind: Kind
    help: str  # the command line's help for it
    option: str | None = None  # the command line's option; "" for a positional argument
    required: bool = False
    metavar: str | None = None
    # For words that are required: the refusal when they are missing (PolicyRefused, with the
    # verb's example as the hint); without it, an empty value is invalid input.
    refusal: str = ""
    said_as: str = "reason"  # what the words are called in an error: reason, comment, answer

    @property
    def fills(self) -> str:
        return FILLS[self.kind]

    @property
    def flag(self) -> str:
        """How the command line names it: `--reason`, or `text` for a positional one."""
        if self.option == "":
            return self.name
        return self.option or f"--{self.name.replace('_', '-')}"


class Dialog(StrEnum):
    """How the cockpit asks for a verb."""

    CONFIRM = "confirm"  # the `question`, with a reason to give; yes decides
    DECIDE = "decide"  # inside the decide dialog (`a`): the approval, the answer, no key of its own
    MERGE = "merge"  # what the merge would take, then the protected paths named
    RESET = "reset"  # the stage to go back to, and why
    EDIT = "edit"  # the task's fields in the new task dialog


@dataclass(frozen=True)
class VerbSpec:
    """One operator verb, as every face offers it."""

    verb: Verb
    help: str  # the command line's one line (and its --help's description)
    line: str  # the cockpit's: the footer's tooltip, the help screen's line, the palette's help
    takes: tuple[Input, ...]
    group: str  # where `t25 --help` lists it ("": under another command, as `task edit`)
    example: str  # under its --help, and the hint of a refusal for missing words
    dialog: Dialog
    keys: tuple[str, ...] = ()  # the cockpit's default keys (`keys:` in t25.yaml moves them)
    title: str | None = None  # the cockpit's palette lists it as "T25: <title>"
    question: str = ""  # a CONFIRM dialog's question: {tid} is the task
    shows_failure: bool = False  # a CONFIRM dialog shows why the task failed, under the question
    summary: str = ""  # the REST route's summary; default: "<Verb> a task"
    command: tuple[str, ...] = ()  # the command line's words; default: the verb's name
    command_id: str = ""  # the cockpit command's id (what `keys:` calls it); default: the verb
    description: str = ""  # its --help's description, when more than `help`

    @property
    def words(self) -> tuple[str, ...]:
        return self.command or (self.verb.value,)

    @property
    def id(self) -> str:
        return self.command_id or self.verb.value

    @property
    def rest_summary(self) -> str:
        said = " ".join(self.words)
        first = self.summary or f"{self.verb.value.capitalize()} a task"
        return f"{first} (the same decision as `t25 {said}`)"

    def takes_kind(self, kind: Kind) -> Input | None:
        return next((i for i in self.takes if i.kind is kind), None)


def _reason(
    help: str = "why (kept in the audit log)",
    *,
    option: str | None = None,
    required: bool = False,
    refusal: str = "",
    said_as: str = "reason",
) -> Input:
    return Input(
        "reason",
        Kind.WORDS,
        help,
        option=option,
        required=required,
        refusal=refusal,
        said_as=said_as,
    )


RECOVERY = "when a task goes wrong"

VERBS: dict[Verb, VerbSpec] = {
    spec.verb: spec
    for spec in (
        VerbSpec(
            Verb.APPROVE,
            help="approve the plan a task is waiting on",
            line="approve its plan (in the decide dialog)",
            takes=(
                _reason("a note kept in the audit log", option="--comment", said_as="comment"),
                Input(
                    "bound_to",
                    Kind.PLAN,
                    "the SHA-256 of the plan you read (t25 task show); refused if the plan has "
                    "changed since. Default: the current plan, printed",
                    option="--plan",
                    metavar="SHA",
                ),
            ),
            group="decisions",
            example='t25 approve T-7 --comment "checked with the payments team"',
            dialog=Dialog.DECIDE,
            summary="Approve a task's plan",
        ),
        VerbSpec(
            Verb.REJECT,
            help="send a plan back to PLAN with the reason",
            line="send its plan back to PLAN with the reason (in the decide dialog)",
            takes=(
                _reason(
                    "what is wrong; the planner reads it",
                    required=True,
                    refusal="a rejection needs a reason; the planner reads it",
                ),
            ),
            group="decisions",
            example='t25 reject T-7 --reason "keep the old endpoint"',
            dialog=Dialog.DECIDE,
            summary="Reject a task's plan",
        ),
        VerbSpec(
            Verb.ANSWER,
            help="answer the question of a NEEDS_INPUT task",
            line="answer its question (in the decide dialog)",
            takes=(
                Input(
                    "text",
                    Kind.WORDS,
                    "the answer; the agent reads it",
                    option="",
                    required=True,
                    said_as="answer",
                ),
            ),
            group="decisions",
            example='t25 answer T-7 "use the v2 client"',
            dialog=Dialog.DECIDE,
            summary="Answer a task's question",
        ),
        VerbSpec(
            Verb.NOTE,
            help="leave a word for a task's next agent runs, without stopping it",
            line="leave a word for its next agent runs; it goes on as it was",
            takes=(
                Input(
                    "text",
                    Kind.WORDS,
                    "what its agents should know; each later run reads it",
                    option="",
                    required=True,
                    said_as="note",
                ),
            ),
            group="decisions",
            example='t25 note T-7 "the v2 client is on main now"',
            dialog=Dialog.CONFIRM,
            keys=("g",),
            title="Leave a note for the agents",
            question="A note for {tid}'s next agent runs (they read it; the task goes on):",
            summary="Leave a note for a task's agents",
        ),
        VerbSpec(
            Verb.EDIT,
            help="change a task's title, description, type or priority",
            line="edit its title, type, description or priority (as t25 task edit)",
            takes=(
                Input("title", Kind.TITLE, "the new title"),
                Input("description", Kind.DESCRIPTION, "the new description"),
                Input("type", Kind.TYPE, "the new type (names the branch)"),
                Input("priority", Kind.PRIORITY, "the new priority, -100 to 100", metavar="N"),
                _reason(),
            ),
            group="",
            example='t25 task edit T-7 --priority 10 --reason "the release needs it"',
            dialog=Dialog.EDIT,
            keys=("t",),
            title="Edit task",
            summary="Edit a task's title, description, type or priority",
            command=("task", "edit"),
            command_id="edit_task",
            description="Change a task's title or description (until it implements), its "
            "type (before its first run) or its priority (until it is finished). Audited.",
        ),
        VerbSpec(
            Verb.MERGE,
            help="merge a DONE task's branch into the default branch (after checks and review)",
            line="merge it (refused, with the reason, until its checks pass and review approves)",
            takes=(
                _reason("a note kept in the audit log"),
                Input(
                    "allow_paths",
                    Kind.PATHS,
                    "a protected path the change touches (policies.protected_paths), named to "
                    "merge it anyway; repeat for each (t25 task show lists them)",
                    option="--allow-path",
                    metavar="PATH",
                ),
            ),
            group="decisions",
            example="t25 merge T-7 --dry-run",
            dialog=Dialog.MERGE,
            keys=("m",),
            title="Merge",
            summary="Merge a task",
        ),
        VerbSpec(
            Verb.ACKNOWLEDGE,
            help="acknowledge what a run changed outside its worktree (retry and merge wait "
            "for it)",
            line="acknowledge what a run changed outside its worktree (in the decide dialog)",
            takes=(
                _reason(
                    "what you checked (kept in the audit log)",
                    required=True,
                    refusal="an acknowledgement needs a reason: what was found and done about it",
                ),
            ),
            group="decisions",
            example='t25 acknowledge T-7 --reason "the edit to README.md was mine"',
            dialog=Dialog.DECIDE,
        ),
        VerbSpec(
            Verb.CANCEL,
            help="stop a task and its runs",
            line="cancel it: its running agent stops",
            takes=(_reason(),),
            group=RECOVERY,
            example='t25 cancel T-7 --reason "not needed any more"',
            dialog=Dialog.CONFIRM,
            keys=("x",),
            title="Cancel task",
            question="Cancel {tid}? Its running agent stops now.",
        ),
        VerbSpec(
            Verb.RETRY,
            help="send a FAILED task back to the stage that failed; --reason goes to the agent",
            line="send a FAILED task back to the stage that failed",
            takes=(_reason(),),
            group=RECOVERY,
            example='t25 retry T-7 --reason "the flaky test is fixed on main"',
            dialog=Dialog.CONFIRM,
            keys=("r",),
            title="Retry task",
            question="Retry {tid} from the stage that failed?",
            shows_failure=True,
        ),
        VerbSpec(
            Verb.RESET,
            help="send a task back to a stage it passed, its branch to where that stage began",
            line="send it back to a stage it passed, its branch to where that stage began",
            takes=(
                Input(
                    "to",
                    Kind.STAGE,
                    "the stage to go back to",
                    required=True,
                    metavar="STAGE",
                ),
                _reason("why (kept in the audit log; the agent reads it)"),
            ),
            group=RECOVERY,
            example='t25 reset T-7 --to PLAN --reason "split the migration out"',
            dialog=Dialog.RESET,
            keys=("o",),
            title="Reset task to a stage",
            summary="Send a task back to a stage it passed",
        ),
        VerbSpec(
            Verb.RECHECK,
            help="send a DONE task that is not merged through QA and review again",
            line="send a DONE task that is not merged through QA and review again (a branch "
            "that moved since review)",
            takes=(_reason(),),
            group=RECOVERY,
            example="t25 recheck T-7",
            dialog=Dialog.CONFIRM,
            keys=("k",),
            title="Recheck task",
            question="Send {tid} through QA and review again, on its branch as it is now?",
        ),
        VerbSpec(
            Verb.ARCHIVE,
            help="hide a finished, failed or cancelled task from the board",
            line="archive a finished task: it leaves the board",
            takes=(_reason(),),
            group=RECOVERY,
            example="t25 archive T-7",
            dialog=Dialog.CONFIRM,
            keys=("z",),
            title="Archive task",
            question="Archive {tid}? It leaves the board.",
        ),
    )
}
