"""A GitHub of the project's own, on loopback: the REST endpoints `adapters.github_forge` uses,
answering as GitHub does — pages along a `Link` header, the rate limit's headers, a 5xx or a
stall when a test asks for one — over the state a test sets up (issues, pull requests, check
runs and their logs, reviews, comments).

A repository may be backed by a real bare git repository (`FakeRepo.git`, the remote T25
pushes to): its pull requests' heads then follow the branches pushed there, and a merge
merges in it, as GitHub's do. `ci` plays the repository's CI: asked for a commit's checks the
first time, it says what they are.

Served by a real uvicorn on 127.0.0.1, as the fake model is: the adapter under test speaks
real HTTP to it. `faults` is a queue of what the next requests meet ("5xx", "stall",
"rate_limit", "rate_limit_long", "secondary_limit"); `requests` lists every request seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

TOKEN = "ghp_fake_login_of_the_operator_0001"
STALL_S = 120.0  # a stalled answer comes this late, or when the fake stops: past any timeout


@dataclass
class FakeRepo:
    """One repository's issues and pull requests (one numbering, as on GitHub)."""

    name: str  # owner/name
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by commit
    job_logs: dict[int, str] = field(default_factory=dict)  # by check run (job) id
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pull
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by pull
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by number
    required_checks: set[str] = field(default_factory=set)
    branches: dict[str, str] = field(default_factory=dict)  # each branch's head commit
    git: Path | None = None  # a bare repository its branches are read from
    next_number: int = 1
    next_id: int = 1000

    def head(self, branch: str) -> str:
        """Where `branch` is: in the bare repository, or as a test pushed it."""
        if self.git is not None:
            found = subprocess.run(
                ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                cwd=self.git,
                capture_output=True,
                text=True,
            )
            if found.returncode == 0:
                return found.stdout.strip()
        return self.branches.get(branch, "0" * 40)

    def follow(self) -> None:
        """Each open pull request's head where its branch now is, as GitHub keeps it."""
        for pull in self.pulls.values():
            if pull["state"] == "open":
                pull["head"]["sha"] = self.head(pull["head"]["ref"])

    def number(self) -> int:
        self.next_number += 1
        return self.next_number - 1

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


class FakeGitHub:
    """The fake forge's state, and the app that serves it."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.repos: dict[str, FakeRepo] = {}
        self.faults: list[str] = []
        self.requests: list[tuple[str, str]] = []
        # What a merge does beyond the record (the e2e test lands it in a real remote).
        self.on_merge: Callable[[FakeRepo, dict[str, Any]], str] | None = None
        self.closing = asyncio.Event()  # set as the server stops: a stalled answer ends then
        # The CI of a repository: for a commit asked about the first time, its checks (name,
        # conclusion, log), added as completed check runs.
        self.ci: Callable[[str, str], list[tuple[str, str, str]]] | None = None
        # The repository's reviewers: called with a pull request as its reviews are read.
        self.reviewer: Callable[[str, dict[str, Any]], None] | None = None

    def repo(self, name: str) -> FakeRepo:
        return self.repos.setdefault(name, FakeRepo(name))

    # -- what a test sets up --------------------------------------------------------------

    def file_issue(
        self, repo: str, title: str, body: str = "", labels: tuple[str, ...] = (), user: str = "ana"
    ) -> dict[str, Any]:
        r = self.repo(repo)
        number = r.number()
        issue = {
            "id": r.new_id(),
            "number": number,
            "title": title,
            "body": body,
            "labels": [{"name": label} for label in labels],
            "state": "open",
            "html_url": f"https://github.example/{repo}/issues/{number}",
            "user": {"login": user},
        }
        r.issues[number] = issue
        return issue

    def push(self, repo: str, branch: str, sha: str) -> None:
        """`branch` now at `sha`: an open pull request of it follows, as on GitHub."""
        r = self.repo(repo)
        r.branches[branch] = sha
        for pull in r.pulls.values():
            if pull["head"]["ref"] == branch and pull["state"] == "open":
                pull["head"]["sha"] = sha

    def add_check(
        self, repo: str, sha: str, name: str, conclusion: str | None, log: str = ""
    ) -> dict[str, Any]:
        r = self.repo(repo)
        run = {
            "id": r.new_id(),
            "name": name,
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "html_url": f"https://github.example/{repo}/runs/{r.next_id}",
            "output": {"summary": f"{name}: {conclusion or 'running'}", "text": None},
        }
        r.check_runs.setdefault(sha, []).append(run)
        if log:
            r.job_logs[run["id"]] = log
        return run

    def review(
        self,
        repo: str,
        number: int,
        state: str,
        body: str = "",
        comments: tuple[tuple[str, int, str], ...] = (),
        user: str = "bo",
        association: str = "MEMBER",
    ) -> dict[str, Any]:
        r = self.repo(repo)
        r.follow()
        review = {
            "id": r.new_id(),
            "user": {"login": user},
            "state": state,
            "body": body,
            "commit_id": r.pulls[number]["head"]["sha"],
            "author_association": association,
        }
        r.reviews.setdefault(number, []).append(review)
        for path, line, text in comments:
            r.review_comments.setdefault(number, []).append(
                {
                    "id": r.new_id(),
                    "user": {"login": user},
                    "body": text,
                    "path": path,
                    "line": line,
                    "pull_request_review_id": review["id"],
                }
            )
        return review

    def say(
        self, repo: str, number: int, body: str, user: str = "cy", association: str = "MEMBER"
    ) -> dict[str, Any]:
        r = self.repo(repo)
        comment = {
            "id": r.new_id(),
            "user": {"login": user},
            "body": body,
            "author_association": association,
        }
        r.comments.setdefault(number, []).append(comment)
        return comment

    def _run_ci(self, repo: str, sha: str) -> None:
        """The checks of `sha`, by `ci`, the first time anything asks about them."""
        if self.ci is not None and sha not in self.repo(repo).check_runs:
            for check, conclusion, log in self.ci(repo, sha):
                self.add_check(repo, sha, check, conclusion, log)

    # -- the app --------------------------------------------------------------------------------

    def app(self) -> FastAPI:
        api = FastAPI()

        @api.middleware("http")
        async def gate(request: Request, call_next: Any) -> Response:
            self.requests.append((request.method, request.url.path))
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"message": "Bad credentials"}, status_code=401)
            if self.faults:
                fault = self.faults.pop(0)
                if fault == "5xx":
                    return JSONResponse({"message": "Server Error"}, status_code=502)
                if fault == "stall":  # a forge that stalls: answers only once it stops
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.closing.wait(), STALL_S)
                    return JSONResponse({"message": "too late"}, status_code=504)
                if fault in ("rate_limit", "rate_limit_long"):
                    reset = int(time.time()) + (1 if fault == "rate_limit" else 3600)
                    return JSONResponse(
                        {"message": "API rate limit exceeded"},
                        status_code=403,
                        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
                    )
                if fault == "secondary_limit":
                    return JSONResponse(
                        {"message": "You have exceeded a secondary rate limit"},
                        status_code=429,
                        headers={"retry-after": "1"},
                    )
            response: Response = await call_next(request)
            response.headers["x-ratelimit-remaining"] = "4999"
            return response

        self._pull_routes(api)
        self._issue_routes(api)
        return api

    def _pull_routes(self, api: FastAPI) -> None:
        @api.post("/repos/{owner}/{name}/pulls")
        async def open_pull(owner: str, name: str, request: Request) -> Response:
            r, asked = self.repo(f"{owner}/{name}"), await request.json()
            if any(
                p["head"]["ref"] == asked["head"] and p["state"] == "open" for p in r.pulls.values()
            ):
                message = f"A pull request already exists for {owner}:{asked['head']}."
                return JSONResponse(
                    {"message": "Validation Failed", "errors": [{"message": message}]},
                    status_code=422,
                )
            number = r.number()
            pull = {
                "number": number,
                "html_url": f"https://github.example/{r.name}/pull/{number}",
                "title": asked["title"],
                "body": asked.get("body") or "",
                "head": {"ref": asked["head"], "sha": r.head(asked["head"])},
                "base": {"ref": asked["base"]},
                "state": "open",
                "merged": False,
            }
            r.pulls[number] = pull
            return JSONResponse(pull, status_code=201)

        @api.get("/repos/{owner}/{name}/pulls")
        async def list_pulls(owner: str, name: str, request: Request) -> Response:
            r, q = self.repo(f"{owner}/{name}"), request.query_params
            r.follow()
            head = q.get("head", "").split(":", 1)[-1]
            found = [
                p
                for p in r.pulls.values()
                if (not head or p["head"]["ref"] == head)
                and (q.get("state", "open") == "all" or p["state"] == q.get("state", "open"))
            ]
            return _page(request, found)

        @api.get("/repos/{owner}/{name}/pulls/{number}")
        async def one_pull(owner: str, name: str, number: int) -> Response:
            self.repo(f"{owner}/{name}").follow()
            pull = self.repo(f"{owner}/{name}").pulls.get(number)
            return JSONResponse(pull) if pull else _not_found()

        @api.patch("/repos/{owner}/{name}/pulls/{number}")
        async def edit_pull(owner: str, name: str, number: int, request: Request) -> Response:
            pull = self.repo(f"{owner}/{name}").pulls.get(number)
            if pull is None:
                return _not_found()
            pull.update({k: v for k, v in (await request.json()).items() if k in ("body", "title")})
            return JSONResponse(pull)

        @api.put("/repos/{owner}/{name}/pulls/{number}/merge")
        async def merge(owner: str, name: str, number: int, request: Request) -> Response:
            r, asked = self.repo(f"{owner}/{name}"), await request.json()
            r.follow()
            pull = r.pulls.get(number)
            if pull is None:
                return _not_found()
            if asked.get("sha") and asked["sha"] != pull["head"]["sha"]:
                return JSONResponse(
                    {"message": "Head branch was modified. Review and try the merge again."},
                    status_code=409,
                )
            self._run_ci(r.name, pull["head"]["sha"])
            checks = {c["name"]: c for c in r.check_runs.get(pull["head"]["sha"], [])}
            for needed in sorted(r.required_checks):
                if checks.get(needed, {}).get("conclusion") != "success":
                    return JSONResponse(
                        {"message": f'Required status check "{needed}" is expected.'},
                        status_code=405,
                    )
            sha = self.on_merge(r, pull) if self.on_merge else "m" * 40
            pull.update({"state": "closed", "merged": True, "merge_commit_sha": sha})
            return JSONResponse({"sha": sha, "merged": True, "message": "Pull Request merged"})

        @api.get("/repos/{owner}/{name}/commits/{sha}/check-runs")
        async def check_runs(owner: str, name: str, sha: str, request: Request) -> Response:
            repo = f"{owner}/{name}"
            self._run_ci(repo, sha)
            runs = self.repo(repo).check_runs.get(sha, [])
            return _page(request, runs, key="check_runs")

        @api.get("/repos/{owner}/{name}/actions/jobs/{job}/logs")
        async def job_log(owner: str, name: str, job: int) -> Response:
            log = self.repo(f"{owner}/{name}").job_logs.get(job)
            if log is None:
                return _not_found()
            return Response(status_code=302, headers={"location": f"/_logs/{owner}/{name}/{job}"})

        @api.get("/_logs/{owner}/{name}/{job}")
        async def log_download(owner: str, name: str, job: int) -> Response:
            return PlainTextResponse(self.repo(f"{owner}/{name}").job_logs.get(job, ""))

        @api.get("/repos/{owner}/{name}/pulls/{number}/reviews")
        async def reviews(owner: str, name: str, number: int, request: Request) -> Response:
            r = self.repo(f"{owner}/{name}")
            r.follow()
            if self.reviewer is not None and number in r.pulls:
                self.reviewer(r.name, r.pulls[number])
            return _page(request, r.reviews.get(number, []))

        @api.get("/repos/{owner}/{name}/pulls/{number}/comments")
        async def review_comments(owner: str, name: str, number: int, request: Request) -> Response:
            return _page(request, self.repo(f"{owner}/{name}").review_comments.get(number, []))

    def _issue_routes(self, api: FastAPI) -> None:
        @api.get("/repos/{owner}/{name}/issues")
        async def list_issues(owner: str, name: str, request: Request) -> Response:
            r, q = self.repo(f"{owner}/{name}"), request.query_params
            wanted = {label for label in q.get("labels", "").split(",") if label}
            state = q.get("state", "open")
            found = [
                i
                for i in sorted(r.issues.values(), key=lambda i: i["number"])
                if (state == "all" or i["state"] == state)
                and wanted <= {label["name"] for label in i["labels"]}
            ]
            pulls_as_issues = [  # GitHub lists pull requests among issues; a reader skips them
                {
                    **p,
                    "labels": [],
                    "user": {"login": "t25"},
                    "pull_request": {"url": p["html_url"]},
                }
                for p in r.pulls.values()
                if p["state"] == state and not wanted
            ]
            return _page(request, found + pulls_as_issues)

        @api.get("/repos/{owner}/{name}/issues/{number}")
        async def one_issue(owner: str, name: str, number: int) -> Response:
            issue = self.repo(f"{owner}/{name}").issues.get(number)
            return JSONResponse(issue) if issue else _not_found()

        @api.get("/repos/{owner}/{name}/issues/{number}/comments")
        async def comments(owner: str, name: str, number: int, request: Request) -> Response:
            return _page(request, self.repo(f"{owner}/{name}").comments.get(number, []))

        @api.post("/repos/{owner}/{name}/issues/{number}/comments")
        async def comment(owner: str, name: str, number: int, request: Request) -> Response:
            body = (await request.json())["body"]
            said = self.say(f"{owner}/{name}", number, body, "t25-operator", "OWNER")
            return JSONResponse(said, status_code=201)

        @api.post("/repos/{owner}/{name}/issues/{number}/labels")
        async def add_labels(owner: str, name: str, number: int, request: Request) -> Response:
            issue = self.repo(f"{owner}/{name}").issues.get(number)
            if issue is None:
                return _not_found()
            have = {label["name"] for label in issue["labels"]}
            for label in (await request.json())["labels"]:
                if label not in have:
                    issue["labels"].append({"name": label})
            return JSONResponse(issue["labels"])

        @api.get("/search/issues")
        async def search(request: Request) -> Response:
            words = request.query_params.get("q", "").split()
            repo = next((w.split(":", 1)[1] for w in words if w.startswith("repo:")), "")
            terms = [w for w in words if ":" not in w]
            found = [
                i
                for i in sorted(self.repo(repo).issues.values(), key=lambda i: i["number"])
                if i["state"] == "open" and all(t.lower() in i["title"].lower() for t in terms)
            ]
            return _page(request, found, key="items")


def _page(request: Request, items: list[Any], key: str | None = None) -> Response:
    """One page of `items`, with GitHub's `Link` header to the next."""
    per_page = min(int(request.query_params.get("per_page", 30)), 100)
    page = int(request.query_params.get("page", 1))
    chunk = items[(page - 1) * per_page : page * per_page]
    body: Any = {"total_count": len(items), key: chunk} if key else chunk
    headers = {}
    if page * per_page < len(items):
        following = request.url.include_query_params(page=page + 1, per_page=per_page)
        headers["link"] = f'<{following}>; rel="next"'
    return JSONResponse(body, headers=headers)


def _not_found() -> Response:
    return JSONResponse({"message": "Not Found"}, status_code=404)


def bare_origin(repo: Path, where: Path) -> Path:
    """A bare repository at `where/origin.git`, made `repo`'s `origin`, its trunk pushed there:
    the remote T25 pushes task branches to, and the fake forge reads them from."""
    bare = where / "origin.git"
    for argv, cwd in (
        (["init", "--bare", "--quiet", str(bare)], where),
        (["remote", "add", "origin", str(bare)], repo),
        (["push", "-q", "origin", "trunk"], repo),
    ):
        subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True)
    return bare


def merge_in(bare: Path, pull: dict[str, Any]) -> str:
    """GitHub's merge of `pull`, made in the bare repository: a merge commit of its head into
    its base (FakeGitHub.on_merge)."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=bare, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    base, head = f"refs/heads/{pull['base']['ref']}", pull["head"]["sha"]
    tree = git("merge-tree", "--write-tree", base, head).split()[0]
    who = ("-c", "user.name=forge", "-c", "user.email=forge@example.com")
    message = f"Merge pull request #{pull['number']}"
    commit = git(*who, "commit-tree", tree, "-p", base, "-p", head, "-m", message)
    git("update-ref", base, commit)
    return commit


@asynccontextmanager
async def fake_github(forge: FakeGitHub | None = None) -> AsyncIterator[tuple[FakeGitHub, str]]:
    """The fake forge served on loopback: it, and its API's base URL."""
    import uvicorn

    forge = forge or FakeGitHub()
    config = uvicorn.Config(forge.app(), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(2000):  # bounded: uvicorn sets a flag, not an event
        if server.started:
            break
        await asyncio.sleep(0.005)  # not a wait on a result: uvicorn's start flag
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield forge, f"http://127.0.0.1:{port}"
    finally:
        forge.closing.set()
        server.should_exit = True
        await task
