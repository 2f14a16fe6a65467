"""GitHub (and GitHub Enterprise) as T25's forge (core.ports.forge), over its REST API.

Authenticated with the operator's own login, never a credential of T25's: `GH_TOKEN` or
`GITHUB_TOKEN` (for an Enterprise host `GH_ENTERPRISE_TOKEN` or `GITHUB_ENTERPRISE_TOKEN`)
when set, else what `gh auth token` prints for the host. The token stays in the process that
talks to the forge (a worker, serve); no agent's environment holds it, and the network wall
lets no agent reach the forge.

Faults are GitHub's everyday: a 5xx, a timeout, the rate limit (a 403 or 429 with
`x-ratelimit-remaining: 0`, waited out until `x-ratelimit-reset`, or a secondary limit's
`retry-after`) are tried again with backoff up to a bound, then ForgeUnavailable. Lists are
read page by page along the `Link` header, up to MAX_PAGES. A failed check's log is read as a
stream and only its last lines kept, however long it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.domain.backoff import Backoff
from core.domain.forge import Check, Comment, ForgeIssue, PullRequest, Review, ReviewComment
from core.errors import ForgeError, ForgeUnavailable, MergeRefused

GITHUB_API = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100
MAX_PAGES = 50  # 5,000 items a list: more than any pull request's reviews or a label's issues
ATTEMPTS = 5  # tries of a request through 5xx, timeouts and the rate limit
BACKOFF = Backoff(0.5, 8.0, jitter=0.2)
LONGEST_WAIT_S = 60.0  # a rate limit that resets later than this is ForgeUnavailable now
TIMEOUT_S = 30.0
LOG_BYTES = 8 * 2**20  # a check's log is read at most this far (its tail is what is kept)


def api_url(host: str | None) -> str:
    """The REST API of `host`: github.com's, or an Enterprise server's (`/api/v3`)."""
    if not host or host in ("github.com", "api.github.com"):
        return GITHUB_API
    return host.rstrip("/") if "://" in host else f"https://{host}/api/v3"


def login_token(api: str, *, env: dict[str, str] | None = None) -> str:
    """The operator's own GitHub token for the forge at `api` (see the module's docstring);
    ForgeError, saying how to log in, when there is none."""
    env = dict(os.environ) if env is None else env
    host = urlsplit(api).hostname or "github.com"
    host = "github.com" if host == "api.github.com" else host
    enterprise = host != "github.com"
    names = ("GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN") if enterprise else ()
    for name in (*names, "GH_TOKEN", "GITHUB_TOKEN"):
        if env.get(name, "").strip():
            return env[name].strip()
    gh = shutil.which("gh", path=env.get("PATH"))
    if gh is not None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            asked = subprocess.run(
                [gh, "auth", "token", "--hostname", host],
                capture_output=True,
                text=True,
                timeout=10,
                env=env,
            )
            if asked.returncode == 0 and asked.stdout.strip():
                return asked.stdout.strip()
    raise ForgeError(
        f"no GitHub login for {host}",
        hint="`gh auth login`, or set GH_TOKEN to a token that may read and write the repository",
    )


class GitHubForge:
    """The forge at `api` (GitHub's REST API, or an Enterprise server's), as `token`."""

    def __init__(
        self,
        token: str,
        *,
        api: str = GITHUB_API,
        backoff: Backoff = BACKOFF,
        attempts: int = ATTEMPTS,
        longest_wait_s: float = LONGEST_WAIT_S,
        timeout_s: float = TIMEOUT_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=api.rstrip("/"),
            timeout=timeout_s,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {token}",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "t25",
            },
        )
        self.backoff, self.attempts = backoff, attempts
        self.longest_wait_s, self._sleep = longest_wait_s, sleep

    async def close(self) -> None:
        await self.http.aclose()

    # -- pull requests ---------------------------------------------------------------------

    async def open_pull_request(
        self, repo: str, *, head: str, base: str, title: str, body: str
    ) -> PullRequest:
        new = {"title": title, "head": head, "base": base, "body": body}
        made = await self._json("POST", f"/repos/{repo}/pulls", json=new, refused=(422,))
        if made is not None:
            return _pull(made)
        owner = repo.split("/", 1)[0]  # one open already: this branch's, into `base`
        params = {"head": f"{owner}:{head}", "base": base, "state": "open"}
        for found in await self._pages(f"/repos/{repo}/pulls", params):
            edited = await self._json(
                "PATCH", f"/repos/{repo}/pulls/{found['number']}", json={"body": body}
            )
            return _pull(edited or found)
        raise ForgeError(f"GitHub would not open a pull request of {head} into {base} in {repo}")

    async def pull_request(self, repo: str, number: int) -> PullRequest:
        return _pull(await self._json("GET", f"/repos/{repo}/pulls/{number}"))

    async def checks(self, repo: str, sha: str) -> list[Check]:
        found = await self._pages(f"/repos/{repo}/commits/{sha}/check-runs", {}, "check_runs")
        return [_check(c) for c in found]

    async def check_log(self, repo: str, check: Check, *, lines: int = 40) -> str:
        """An Actions job's log (a check run's id is its job's), else the check's summary."""
        kept: deque[str] = deque(maxlen=lines)
        path = f"/repos/{repo}/actions/jobs/{check.id}/logs"
        try:
            async with self.http.stream("GET", path, follow_redirects=True) as response:
                if response.status_code != 200:
                    return _tail(check.summary, lines)
                read, rest = 0, ""
                async for text in response.aiter_text():
                    read += len(text)
                    *whole, rest = (rest + text).split("\n")
                    kept.extend(whole)
                    if read > LOG_BYTES:
                        break
                if rest:
                    kept.append(rest)
        except httpx.HTTPError:
            return _tail(check.summary, lines)
        return "\n".join(kept)

    async def reviews(self, repo: str, number: int) -> list[Review]:
        found = await self._pages(f"/repos/{repo}/pulls/{number}/reviews", {})
        on_lines = await self._pages(f"/repos/{repo}/pulls/{number}/comments", {})
        comments = [_review_comment(c) for c in on_lines]
        return [
            Review(
                id=r["id"],
                author=_login(r),
                state=r.get("state") or "COMMENTED",
                body=r.get("body") or "",
                commit=r.get("commit_id") or "",
                comments=tuple(c for c in comments if c.review_id == r["id"]),
                standing=r.get("author_association") or "",
            )
            for r in found
        ]

    async def comments(self, repo: str, number: int, *, after: int = 0) -> list[Comment]:
        found = await self._pages(f"/repos/{repo}/issues/{number}/comments", {})
        said = [_comment(c) for c in found]
        return [c for c in said if c.id > after]

    async def comment(self, repo: str, number: int, body: str) -> Comment:
        made = await self._json(
            "POST", f"/repos/{repo}/issues/{number}/comments", json={"body": body}
        )
        return _comment(made)

    async def merge(self, repo: str, number: int, *, head: str, title: str, message: str) -> str:
        asked = {
            "sha": head,
            "merge_method": "merge",
            "commit_title": title,
            "commit_message": message,
        }
        response = await self._send("PUT", f"/repos/{repo}/pulls/{number}/merge", json=asked)
        if response.status_code in (405, 409, 422):  # not mergeable, head moved, refused
            raise MergeRefused(
                f"GitHub refused to merge {repo}#{number}: {_message(response)}",
                hint="`t25 task show` says what the pull request still needs; nothing merged",
            )
        _raise_for(response, "PUT", f"/repos/{repo}/pulls/{number}/merge")
        return str(response.json().get("sha") or "")

    # -- issues -------------------------------------------------------------------------------

    async def issues(
        self, repo: str, *, labels: Sequence[str] = (), query: str | None = None
    ) -> list[ForgeIssue]:
        if query is not None:
            q = f"repo:{repo} is:issue is:open {query}"
            found = await self._pages(
                "/search/issues", {"q": q, "sort": "created", "order": "asc"}, "items"
            )
        else:
            params = {"state": "open", "sort": "created", "direction": "asc"}
            if labels:
                params["labels"] = ",".join(labels)
            found = await self._pages(f"/repos/{repo}/issues", params)
        return [_issue(i) for i in found if "pull_request" not in i]

    async def issue(self, repo: str, number: int) -> ForgeIssue:
        return _issue(await self._json("GET", f"/repos/{repo}/issues/{number}"))

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> None:
        await self._json(
            "POST", f"/repos/{repo}/issues/{number}/labels", json={"labels": list(labels)}
        )

    # -- requests -----------------------------------------------------------------------------

    async def _pages(self, path: str, params: dict[str, Any], key: str | None = None) -> list[Any]:
        """Every item of a list, page by page along `Link: <…>; rel="next"`."""
        items: list[Any] = []
        url: str | None = path
        query: dict[str, Any] | None = {**params, "per_page": PER_PAGE}
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = await self._send("GET", url, params=query)
            _raise_for(response, "GET", path)
            body = response.json()
            items.extend(body[key] if key else body)
            url, query = response.links.get("next", {}).get("url"), None  # the link has it all
        return items

    async def _json(
        self, method: str, path: str, *, json: Any = None, refused: tuple[int, ...] = ()
    ) -> Any:
        """The answer's JSON; None when the forge answered one of the `refused` statuses."""
        response = await self._send(method, path, json=json)
        if response.status_code in refused:
            return None
        _raise_for(response, method, path)
        return response.json()

    async def _send(
        self, method: str, url: str, *, params: Any = None, json: Any = None
    ) -> httpx.Response:
        """One request, tried again through GitHub's faults (see the module's docstring)."""
        pauses = self.backoff.pauses(self.attempts - 1)
        while True:
            why: str
            wait: float | None = None
            try:
                response = await self.http.request(method, url, params=params, json=json)
            except httpx.TimeoutException:
                why = "did not answer in time"
            except httpx.TransportError as exc:
                why = f"could not be reached ({type(exc).__name__})"
            else:
                wait = _rate_limited(response)
                if wait is None and response.status_code < 500:
                    return response
                why = (
                    f"answered {response.status_code}"
                    if wait is None
                    else f"is rate-limiting this login for {wait:.0f} s more"
                )
            pause = next(pauses, None)
            if pause is None or (wait is not None and wait > self.longest_wait_s):
                raise ForgeUnavailable(
                    f"GitHub {why}: {method} {urlsplit(str(url)).path}",
                    hint="T25 tries again on its next sweep; `gh api rate_limit` shows the limit",
                )
            await self._sleep(max(pause, wait or 0.0))


def _rate_limited(response: httpx.Response) -> float | None:
    """Seconds to wait when the answer is GitHub's rate limit; None when it is not."""
    if response.status_code not in (403, 429):
        return None
    if (after := response.headers.get("retry-after")) is not None:
        with contextlib.suppress(ValueError):
            return max(float(after), 0.0)
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset", "")
        return max(float(reset) - time.time(), 0.0) if reset.isdigit() else 60.0
    return None


def _raise_for(response: httpx.Response, method: str, path: str) -> None:
    if response.status_code >= 400:
        raise ForgeError(
            f"GitHub refused {method} {path}: {response.status_code} {_message(response)}",
            hint="check the repository's name in t25.yaml and that your login may do this",
        )


def _message(response: httpx.Response) -> str:
    with contextlib.suppress(ValueError):
        body = response.json()
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])[:300]
    return response.reason_phrase


def _login(item: dict[str, Any]) -> str:
    return str((item.get("user") or {}).get("login") or "")


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _pull(p: dict[str, Any]) -> PullRequest:
    return PullRequest(
        number=p["number"],
        url=p.get("html_url") or "",
        head_ref=p["head"]["ref"],
        head_sha=p["head"]["sha"],
        base_ref=p["base"]["ref"],
        state="closed" if p.get("state") == "closed" else "open",
        merged=bool(p.get("merged") or p.get("merged_at")),
    )


def _check(c: dict[str, Any]) -> Check:
    output = c.get("output") or {}
    summary = "\n".join(s for s in (output.get("summary"), output.get("text")) if s)
    return Check(
        id=c["id"],
        name=c.get("name") or "",
        status=c.get("status") or "queued",
        conclusion=c.get("conclusion"),
        url=c.get("html_url") or c.get("details_url") or "",
        summary=summary,
    )


def _comment(c: dict[str, Any]) -> Comment:
    body = c.get("body") or ""
    return Comment(c["id"], _login(c), body, standing=c.get("author_association") or "")


def _review_comment(c: dict[str, Any]) -> ReviewComment:
    return ReviewComment(
        id=c["id"],
        author=_login(c),
        body=c.get("body") or "",
        path=c.get("path") or "",
        line=c.get("line"),
        review_id=c.get("pull_request_review_id"),
    )


def _issue(i: dict[str, Any]) -> ForgeIssue:
    return ForgeIssue(
        number=i["number"],
        title=i.get("title") or "",
        body=i.get("body") or "",
        labels=tuple(str(label.get("name", "")) for label in i.get("labels") or ()),
        state="closed" if i.get("state") == "closed" else "open",
        url=i.get("html_url") or "",
        author=_login(i),
    )


async def open_forge(host: str | None) -> GitHubForge:
    """The forge at `host` (github.com when None), as the operator's own login."""
    api = api_url(host)
    return GitHubForge(await asyncio.to_thread(login_token, api), api=api)
