"""Browser helpers: the app in a subprocess, headless Debian Chromium, asking on the page, screenshots.

Importing this module skips the importing test module, with the reason shown, where Chromium or Playwright is
missing. Screenshots go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.knowledge import ROOT, TINY, config_dict, write_knowledge
from tests.support.ports import free_port

CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "test-artifacts" / "screenshots"

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"browser tests need Debian chromium at {CHROMIUM} (apt-get install chromium fonts-wqy-microhei; "
        "`make test` does this as root)",
        allow_module_level=True,
    )
playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra)")


class App:
    """`python app.py` on a free loopback port with its own config; stop() kills it."""

    def __init__(self, config: Path, env: dict[str, str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(config.parent / f"app-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "app.py", "--config", str(config), "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited: {(config.parent / f'app-{self.port}.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url, timeout=1)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("app did not start within 90 s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()
        # pytest shows a test's captured output only when it fails: there, the app's own last words
        print(f"--- the app's log ({self.log.name}), last lines ---\n{Path(self.log.name).read_text()[-3000:]}")


def write_app_config(tmp_path: Path) -> Path:
    """A config file for the tiny knowledge base in ``tmp_path`` (the sparse mode; dense/hybrid tested elsewhere)."""
    write_knowledge(tmp_path / "knowledge", TINY)
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.5)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@contextlib.contextmanager
def chromium():
    """Headless Debian Chromium, closed on exit."""
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


def llm_app(app_config: Path, llm_base_url: str, timeout: float = 5, admin: bool = False) -> App:
    """The app of ``app_config`` answering through the local LLM server at ``llm_base_url`` (key from the env),
    with an admin login when ``admin``."""
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    raw["llm"].update(base_url=llm_base_url, model="local-test", timeout=timeout, max_retries=0)
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return App(app_config, dict(offline_env(), OPENAI_API_KEY="sk-test", **(ADMIN_ENV if admin else {})))


def offline_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}


def open_page(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, locale="zh-CN")
    page.goto(url, wait_until="domcontentloaded")
    page.locator("#kb-input textarea").wait_for(timeout=30000)
    return page


PRESSES = 4  # Enter presses of one question at most, 15 s apart, while the page leaves the text in the box


# The sources panel of the answer to question q is rendered: the turn is finished.
LANDED = """([q]) => [...document.querySelectorAll('#kb-sources .kb-sources')].some(d => d.dataset.q === q)"""


def ask(page, text: str) -> None:
    """Type a question, press Enter, and wait until its answer is finished (its sources panel rendered)."""
    box = page.locator("#kb-input textarea")
    # A turn has started once the chat shows one more question. A press the page dropped (still hydrating, or a
    # turn before still finishing) starts none: only then is the question typed and sent again, so a turn that
    # started is never asked twice (a press while one runs is dropped by the page).
    started = f"""([q, n]) => document.querySelectorAll('#kb-chat .user').length > n || ({LANDED})([q])"""
    before = page.locator("#kb-chat .user").count()
    for _ in range(PRESSES):
        if box.input_value() != text:
            box.fill(text)
        box.press("Enter")
        try:
            page.wait_for_function(started, arg=[text, before], timeout=15000)
            break
        except playwright_api.TimeoutError:
            continue
    wait_answered(page, text)


def wait_answered(page, text: str) -> None:
    """Wait until the answer to the question ``text`` is finished (its sources panel rendered)."""
    try:
        page.wait_for_function(
            LANDED,
            arg=[text],
            timeout=60000,  # two test files run at once (make test): a turn may wait behind the other's CPU
        )
    except playwright_api.TimeoutError:
        raise AssertionError(f"no answer to {text!r} within 60 s; the page: {page_state(page)}") from None


def page_state(page) -> dict[str, object]:
    """What the chat page shows now (the input, the last messages, the sources' questions), for a failure message."""
    return page.evaluate(
        """() => ({
            input: document.querySelector('#kb-input textarea')?.value,
            users: [...document.querySelectorAll('#kb-chat .user')].slice(-3).map(e => e.innerText.slice(0, 80)),
            bot: [...document.querySelectorAll('#kb-chat .bot')].slice(-2).map(e => e.innerText.slice(0, 120)),
            sources: [...document.querySelectorAll('#kb-sources .kb-sources')].map(d => d.dataset.q),
            pending: document.querySelectorAll('.pending, .progress-text, .eta-bar').length,
            errors: [...document.querySelectorAll('.toast-body, .error')].map(e => e.innerText.slice(0, 200)),
        })"""
    )


def page_boxes(page, *selectors: str) -> dict[str, list[dict]]:
    """The boxes of every element matching each selector, read at once in page coordinates (the page scrolls to an
    answer's start after it lands: boxes read one by one may straddle that scroll)."""
    return page.evaluate(
        """(selectors) => Object.fromEntries(selectors.map(s => [s, [...document.querySelectorAll(s)].map(e => {
            const b = e.getBoundingClientRect();
            return {x: b.x, y: b.y + window.scrollY, width: b.width, height: b.height};
        })]))""",
        list(selectors),
    )


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


ADMIN_ENV = {"KBBOT_ADMIN_USER": "admin", "KBBOT_ADMIN_PASSWORD": "test-admin-password"}


def open_as_admin(page, app):
    """Log ``page`` in as admin (when the app has an admin login), then open the chat page."""
    login = page.goto(app.url + "admin/login", wait_until="domcontentloaded")
    if login is not None and login.ok and page.locator("#kb-admin-user").count():
        page.locator("#kb-admin-user").fill(ADMIN_ENV["KBBOT_ADMIN_USER"])
        page.locator("#kb-admin-password").fill(ADMIN_ENV["KBBOT_ADMIN_PASSWORD"])
        page.locator("#kb-admin-submit").click()
        page.wait_for_load_state("domcontentloaded")
    page.goto(app.url, wait_until="domcontentloaded")
    page.locator("#kb-input textarea").wait_for(timeout=30000)
    return page


# Gradio moves the tabs that do not fit the bar into a "⋯" menu, as plain buttons (no tab role), and measures the
# bar again whenever it resizes: which tabs fit depends on the window and on when the page measured it.
MENU = ".overflow-menu"
MENU_ITEMS = ".overflow-dropdown button"


def tab_names(page) -> list[str]:
    """The labels of the page's visible tabs, in the bar or in its overflow menu."""
    return page.evaluate(
        """([items]) => [...document.querySelectorAll('[role=tab]')].filter(e => e.offsetParent !== null)
            .concat([...document.querySelectorAll(items)]).map(e => e.innerText.trim()).filter(Boolean)""",
        [MENU_ITEMS],
    )


def open_tab(page, name: str, timeout: float = 30) -> None:
    """Open the tab labelled ``name``: in the bar, or from the overflow menu when the bar has no room for it."""
    tab = page.get_by_role("tab", name=name)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if tab.is_visible():
                tab.click(timeout=5000)
                return
            menu = page.locator(MENU).filter(has=page.locator(MENU_ITEMS, has_text=name))
            if menu.count():
                item = menu.first.locator(MENU_ITEMS, has_text=name).first
                if not item.is_visible():
                    menu.first.locator("button").first.click(timeout=5000)  # the "⋯" toggle
                item.click(timeout=5000)
                return
        except playwright_api.TimeoutError:  # the bar was measured again between the look and the click
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no tab {name!r} on the page; its tabs: {tab_names(page)}")
        page.wait_for_timeout(250)


def open_knowledge_tab(browser, app):
    """A page with the knowledge tab open, logged in as admin first when the app has an admin login."""
    page = open_as_admin(browser.new_page(viewport={"width": 1400, "height": 1000}, locale="zh-CN"), app)
    open_tab(page, "知识管理 / Knowledge")
    return page
