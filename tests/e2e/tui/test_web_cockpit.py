"""`t25 tui --web`: the cockpit in a real headless Chromium, driven over the DevTools protocol.

An operator signs in with a named token, sees the board, approves a high-risk plan with the
cockpit's own keys, and the audit names them; a request without the credential is refused.
The page's terminal draws on a canvas, so what it shows is read from the bytes its websocket
delivers to it (tapped in the page before its script runs).

`T25_SCREENSHOT_DIR=screenshots` writes the browser's screenshot (web.png) there.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from tests.support.pipeline import PIPELINE_CONFIG
from tests.support.waiting import free_port, until, wait_until

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("T25_REQUIRE_PG") != "1",
    reason="Debian's chromium is not installed (apt-get install chromium)",
)

TOKEN = "ada-browser-token-5"
ANSI = re.compile(
    r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>])"
)

# Before the page's script: every byte its websocket hands the terminal, decoded as it comes.
TAP = """
window.__t25 = [];
const decoder = new TextDecoder();
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (e) => {
      if (typeof e.data !== "string") window.__t25.push(decoder.decode(e.data, {stream: true}));
    });
  }
};
"""


class DevTools:
    """One page of a Chromium, over the DevTools protocol: commands and their answers."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket, self.ids = socket, itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        await self.socket.send_json({"id": number, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.socket.receive_json(), 30)
            if message.get("id") == number:
                assert "error" not in message, message
                return dict(message.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        found = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return found["result"].get("value")

    async def screen(self) -> str:
        """What the page's terminal was sent so far, without its escape sequences."""
        return ANSI.sub("", await self.evaluate("(window.__t25 || []).join('')") or "")

    async def press(self, key: str) -> None:
        code = {"Enter": 13}.get(key, ord(key.upper()))
        text = "\r" if key == "Enter" else key
        for kind in ("keyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                text=text if kind == "keyDown" else "",
                windowsVirtualKeyCode=code,
            )


def _tokens_file(where: Path) -> Path:
    path = where / "operators"
    path.write_text(f"ada approver sha256:{hashlib.sha256(TOKEN.encode()).hexdigest()}\n")
    return path


def _audit_approvals(repo: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "t25_tui", "audit"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return [line for line in done.stdout.splitlines() if " approve " in f" {line} "]


@pytest.fixture
def web(t25, repo, tmp_path):
    """`t25 tui --web` on a free loopback port, with T-1's high-risk plan awaiting approval."""
    assert t25("init").code == 0
    (repo / "t25.yaml").write_text(PIPELINE_CONFIG)
    assert t25("task", "new", "Risky", "--description", "scripted: risk=high").code == 0
    assert "needs approval" in t25("run").out
    port = free_port()
    env = {**os.environ, "T25_OPERATOR_TOKENS": str(_tokens_file(tmp_path))}
    log = (tmp_path / "web.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "t25_tui", "tui", "--web", f"127.0.0.1:{port}"],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError((tmp_path / "web.log").read_text())
        try:
            return httpx.get(url, timeout=2).status_code == 401
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 60, lambda: f"the web cockpit: {(tmp_path / 'web.log').read_text()}")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def test_a_request_without_the_credential_is_refused(web):
    page = httpx.get(f"{web}/")
    assert page.status_code == 401 and "Operator token" in page.text
    assert "textual.js" not in page.text  # the sign-in, not the cockpit
    for path in ("/ws", "/static/js/textual.js", "/download/x"):
        assert httpx.get(f"{web}{path}").status_code == 401, path
    wrong = httpx.post(f"{web}/login", data={"token": "guess"})
    assert wrong.status_code == 401 and "not accepted" in wrong.text
    signed = httpx.post(f"{web}/login", data={"token": TOKEN})
    assert signed.status_code == 303
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    with httpx.Client(cookies=signed.cookies) as client:
        assert "textual.js" in client.get(f"{web}/").text
        other_origin = client.get(
            f"{web}/ws", headers={"Origin": "http://evil.example", "Upgrade": "websocket"}
        )
        assert other_origin.status_code == 403


async def test_an_operator_approves_a_plan_in_a_browser_and_the_audit_names_them(
    web, repo, tmp_path
):
    assert CHROMIUM is not None
    profile = tmp_path / "chromium"
    browser = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1500,900",
         "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        active = profile / "DevToolsActivePort"
        await until(lambda: active.is_file() and active.read_text().strip(), 30, "chromium")
        cdp = f"http://127.0.0.1:{active.read_text().split()[0]}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{cdp}/json") as answer:
                targets = json.loads(await answer.text())
            target = next(t for t in targets if t["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                await _approve_in_the_page(DevTools(ws), web, repo)
    finally:
        browser.terminate()
        try:
            browser.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.wait(10)


async def _approve_in_the_page(page: DevTools, web: str, repo: Path) -> None:
    await page.send("Page.enable")
    await page.send("Page.addScriptToEvaluateOnNewDocument", source=TAP)
    await page.send("Page.navigate", url=f"{web}/")
    await until(lambda: page.evaluate("!!document.getElementById('token')"), 30, "the sign-in form")
    await page.evaluate(
        f"document.getElementById('token').value = {json.dumps(TOKEN)};document.forms[0].submit();"
    )

    async def shows(*texts: str) -> bool:
        screen = await page.screen()
        return all(text in screen for text in texts)

    await until(lambda: shows("Risky", "T-1"), 60, "the board in the page")
    await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
    await page.press("a")  # the approval dialog, as in the terminal
    await until(lambda: shows("HIGH"), 30, "the approval dialog in the page")
    # not a wait: the screenshot is for people to look at (T25_SCREENSHOT_DIR); what the test
    # checks was waited for above, so a frame painted late costs only the picture.
    await asyncio.sleep(0.5)
    shot = await page.send("Page.captureScreenshot", format="png")
    if where := os.environ.get("T25_SCREENSHOT_DIR"):
        import base64

        Path(where, "web.png").write_bytes(base64.b64decode(shot["data"]))
    await page.press("a")  # approve
    await until(lambda: asyncio.to_thread(_audit_approvals, repo), 60, "the approval's audit")
    (approval,) = _audit_approvals(repo)
    assert "T-1" in approval and " ada " in f" {approval} "
    assert "claimed" not in approval  # the browser's operator is the token's, not a claim
