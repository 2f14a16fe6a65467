"""`t25 tui --web`: the cockpit in a browser, behind the operator's credential.

The page is textual-serve's: a terminal in the browser whose every session runs the same
cockpit as `t25 tui`, here attached (`t25 tui --url`) to a control plane on loopback that this
process serves beside it. So there is one control plane, one set of workers, and any number of
browser sessions, each deciding with its own operator's token: the audit names who decided,
exactly as it does for a cockpit attached from another host.

The credential is the one `t25 serve` accepts (t25_tui.api.operators): the host's own
`.factory/operator-token`, T25_OPERATOR_TOKEN or a named token of T25_OPERATOR_TOKENS. A browser
asks for it once, on a sign-in form that POSTs it (never in a URL, where logs and history keep
it; a `#token=…` fragment, which no browser sends, fills the form and is wiped at once). The
session is a random id in an HttpOnly, SameSite=Strict cookie; the token itself stays in this
process and reaches the session's cockpit in its environment only. Every other request without
a session is refused with 401, and a websocket from another origin with 403.

As serve, it listens on loopback unless a token for remote operators is configured.
"""

from __future__ import annotations

import asyncio
import html
import secrets
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from core.config import held_secrets
from core.errors import ConfigError
from t25_tui.api.credentials import TOKEN_FILE_ENV, local_operator, local_token
from t25_tui.api.operators import TOKENS_ENV, Operator, Operators

COOKIE = "t25_session"
SESSION_S = 12 * 3600  # a sign-in lasts a working day
DEFAULT_BIND = "127.0.0.1:4173"
# What a session's cockpit must not inherit: the host's secrets, and the ways it would
# otherwise pick a token other than its operator's.
_NOT_INHERITED = (*held_secrets.NAMES, held_secrets.HANDOFF_ENV, TOKEN_FILE_ENV, TOKENS_ENV)


@dataclass(frozen=True)
class SignIn:
    """One browser's session: who signed in, with which token, until when."""

    operator: Operator
    token: str
    until: float


class CockpitSession(AppService):
    """One browser session's cockpit process, given its operator's token and nothing else."""

    def __init__(self, command: str, *, environment: dict[str, str], **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self._given = environment

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        for name in _NOT_INHERITED:
            environment.pop(name, None)
        return {**environment, **self._given}


class WebCockpit(Server):
    """textual-serve's server, with a sign-in in front and a cockpit per operator's session.

    `control_url` is the loopback control plane each session attaches to; `operators` are the
    tokens it accepts (the same as that control plane's)."""

    def __init__(self, host: str, port: int, *, control_url: str, operators: Operators) -> None:
        super().__init__(command="t25 tui", host=host, port=port, title="T25")
        self.control_url = control_url
        self.operators = operators
        self.sessions: dict[str, SignIn] = {}

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._gate)
        app.router.add_post("/login", self.handle_login)
        app.router.add_post("/logout", self.handle_logout)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """textual-serve prints its banner here; T25's command says what it serves itself."""

    # -- the sign-in -----------------------------------------------------------------------------

    def signed_in(self, request: web.Request) -> SignIn | None:
        sid = request.cookies.get(COOKIE, "")
        found = self.sessions.get(sid)
        if found is None or found.until < time.monotonic():
            self.sessions.pop(sid, None)
            return None
        return found

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in ("/login", "/logout"):
            response: web.StreamResponse = await handler(request)
            return response
        session = self.signed_in(request)
        if session is None:
            if request.path == "/" and request.method in ("GET", "HEAD"):
                return _login_page(status=401)
            raise web.HTTPUnauthorized(text="t25: sign in first: open / and give your token\n")
        if request.path == "/ws" and not _same_origin(request):
            raise web.HTTPForbidden(text="t25: the cockpit's websocket opens from its own page\n")
        request["signed_in"] = session
        answer: web.StreamResponse = await handler(request)
        return answer

    async def handle_login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = str(form.get("token", "")).strip()
        operator = self.operators.match(token.encode()) if token else None
        if operator is None:
            await asyncio.sleep(0.5)  # a guess costs time
            return _login_page(status=401, error="that token is not accepted here")
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = SignIn(operator, token, time.monotonic() + SESSION_S)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE,
            sid,
            max_age=SESSION_S,
            httponly=True,
            samesite="Strict",
            secure=request.secure,
            path="/",
        )
        return response

    async def handle_logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.pop(request.cookies.get(COOKIE, ""), None)
        response = web.HTTPSeeOther("/")
        response.del_cookie(COOKIE, path="/")
        return response

    # -- the cockpit -----------------------------------------------------------------------------

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, its addresses taken from the request (the bind may be 0.0.0.0)."""
        origin = f"{request.scheme}://{request.host}"
        websocket = ("wss" if request.scheme == "https" else "ws") + f"://{request.host}/ws"
        context = {
            "font_size": 16,
            "app_websocket_url": websocket,
            "config": {"static": {"url": f"{origin}/static/"}},
            "application": {"name": "T25"},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    def command_for(self, session: SignIn) -> str:
        """The cockpit a session runs: `t25 tui` attached to the loopback control plane."""
        argv = [sys.executable, "-m", "t25_tui", "--actor", session.operator.name]
        return shlex.join([*argv, "tui", "--url", self.control_url])

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        session: SignIn = request["signed_in"]
        websocket = web.WebSocketResponse(heartbeat=15)
        width = _number(request.query.get("width"), 80)
        height = _number(request.query.get("height"), 24)
        await websocket.prepare(request)
        cockpit = CockpitSession(
            self.command_for(session),
            environment={held_secrets.OPERATOR_TOKEN: session.token},
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        try:
            await cockpit.start(width, height)
            await self._process_messages(websocket, cockpit)
        finally:
            await cockpit.stop()
        return websocket

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set."""
        runner = web.AppRunner(await self._make_app(), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
            await stop.wait()
        finally:
            await runner.cleanup()


def accepted_operators(root: Path, configured: Operators | None) -> Operators:
    """The tokens the cockpit accepts: serve's (`configured`) and the host's own."""
    return (configured or Operators({})).adding(local_operator(), local_token(root))


def check_bind(host: str, bind: str, configured: Operators | None) -> None:
    """As serve: beyond loopback only when a token for remote operators is configured."""
    from t25_tui.api.server import is_loopback

    if not is_loopback(host) and configured is None:
        raise ConfigError(
            f"the web cockpit would listen on {host} ({bind}), which is not loopback, "
            "without T25_OPERATOR_TOKEN or T25_OPERATOR_TOKENS",
            hint="set one of them for remote operators, or bind to 127.0.0.1",
        )


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


def _number(value: str | None, default: int) -> int:
    try:
        return max(1, min(int(value or default), 1000))
    except ValueError:
        return default


def _login_page(*, status: int, error: str = "") -> web.Response:
    note = f'<p class="error">{html.escape(error)}</p>' if error else ""
    return web.Response(
        status=status, text=_LOGIN.replace("{note}", note), content_type="text/html"
    )


_LOGIN = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>T25 — sign in</title>
<meta name="referrer" content="no-referrer">
<style>
body { background: #0c181f; color: #e8eef2; font: 16px menlo, monospace; display: flex;
       align-items: center; justify-content: center; height: 100vh; margin: 0; }
form { background: #12232d; padding: 2em 2.5em; width: 32em; }
input[type=password] { width: 100%; padding: .5em; margin: .8em 0; font: inherit; }
button { font: inherit; padding: .4em 1.2em; }
.error { color: #ff7b72; }
small { color: #9fb3c0; }
</style></head>
<body><form method="post" action="/login" autocomplete="off">
<h2>T25 cockpit</h2>{note}
<label for="token">Operator token</label>
<input type="password" id="token" name="token" autofocus required>
<button type="submit">Sign in</button>
<p><small>On this host: the token in .factory/operator-token. Elsewhere: the token an
operator of this factory gave you.</small></p>
</form>
<script>
if (location.hash.startsWith("#token=")) {
  const token = decodeURIComponent(location.hash.slice(7));
  history.replaceState(null, "", location.pathname);
  document.getElementById("token").value = token;
  document.forms[0].submit();
}
</script></body></html>
"""
