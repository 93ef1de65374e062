from urllib.parse import quote
import pytest
from playwright.sync_api import expect
from .browsing import PHONE
from .page_checks import graph_ready
pytestmark = pytest.mark.browser

@pytest.mark.parametrize("size", ["desk", "phone"])
def test_shot(watched, size):
    changes = '[{"node":"h.0.attn","action":"zero"}]'
    page = watched(f"/models/gpt?whatif={quote(changes)}", *( [PHONE] if size == "phone" else []))
    graph_ready(page)
    expect(page.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    page.locator("#whatif-results figure.whatif-maps").first.scroll_into_view_if_needed()
    page.locator("#whatif-results").screenshot(path=f"/tmp/m/maps-{size}.png")
