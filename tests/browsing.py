"""What the browser tests share: a live server of the app, Debian's Chromium driven by Playwright, and pages
whose console errors, page errors and failed or off-site requests fail the test that opened them. The fixtures
are registered for every test module by tests/conftest.py."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.services.config import PROJECT_ROOT, TestConfig

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 740}


@contextmanager
def serving(app) -> Iterator[str]:
    """The app served on a loopback port in a thread: its base URL; the server stopped after (its recipe processes
    by the Apps that made it)."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def live_server(module_apps):
    # Every model page starts a live run; tests open pages faster than a cold worker answers them.
    with serving(module_apps(type("Browser", (TestConfig,), {"RECIPE_QUEUE": 32}))) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # here: only the browser tests need it

    assert Path(CHROMIUM).exists(), "Debian's chromium is needed: scripts/install-test-packages"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watched:
    """A page whose console errors, page errors and failed or non-local requests are collected."""

    def __init__(self, browser, base: str, viewport: dict, allow: tuple[int, ...] = (), **context) -> None:
        """`allow`: statuses a test provokes on purpose (an answer it expects to fail)."""
        self.context = browser.new_context(viewport=viewport, accept_downloads=True, **context)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        expected = tuple(f"status of {status}" for status in allow)
        self.page.on("console", lambda m: m.type == "error" and not (expected and any(e in m.text for e in expected))
                     and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        # A request the browser cancels because the page loads another document (a late favicon when the test
        # navigates) is not a failure: each request remembers which document it was issued under and how many
        # documents had committed then (a favicon asked for just after the next navigation started is cancelled
        # when that document commits).
        self.documents = self.commits = 0
        self.issued_under: dict = {}
        self.failed: list = []
        self.page.on("request", self.issued)
        self.page.on("framenavigated", self.committed)
        self.page.on("requestfailed", lambda r: self.failed.append((r, r.failure, self.commits)))
        self.base = base
        self.page.on("response", lambda r: r.status >= 400 and r.status not in allow
                     and self.problems.append(f"{r.status}: {r.url}"))

    def issued(self, request) -> None:
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self.documents += 1
        self.issued_under[request] = (self.documents, self.commits)
        if not request.url.startswith((self.base, "blob:", "data:")):
            self.problems.append(f"left the site: {request.url}")

    def committed(self, frame) -> None:
        if frame == self.page.main_frame:
            self.commits += 1

    def left_behind(self, request, failure: str, commits: int) -> bool:
        """Cancelled because the page went on to another document: one started or committed since it was asked."""
        document, committed = self.issued_under.get(request, (0, 0))
        # The browser's own favicon fetch it may cancel at any time; a favicon not served answers 404, which the
        # response check catches.
        favicon = request.url.endswith("/favicon.svg")
        return failure == "net::ERR_ABORTED" and (document < self.documents or committed < commits or favicon)

    def close(self) -> None:
        # A request still under way when the test ends is aborted by the closing itself: that is no failure.
        settled = len(self.failed)
        self.context.close()
        self.problems += [f"failed: {r.url} {failure}" for k, (r, failure, commits) in enumerate(self.failed)
                          if not self.left_behind(r, failure, commits)
                          and not (k >= settled and failure == "net::ERR_ABORTED")]
        assert self.problems == [], self.problems  # (this module is not rewritten by pytest: the message says what)


@pytest.fixture
def watched(browser, live_server):
    opened: list[Watched] = []

    def open_page(path: str, viewport: dict = DESKTOP, init_script: str | None = None, **context):
        w = Watched(browser, live_server, viewport, **context)
        if init_script:
            w.page.add_init_script(init_script)
        w.page.goto(live_server + path)
        opened.append(w)
        return w.page

    yield open_page
    for w in opened:
        w.close()
