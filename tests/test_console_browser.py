"""The console in a real browser: Debian's headless Chromium driven by Playwright (the
package's driver; no browser is downloaded: .ci/run installs `chromium` when it is missing).
The page loads, shows a depth change while a producer runs, shows a sweep when a queue
crosses the rule (the sweeper's clock is driven: ManualClock, run_once), browses a message,
and performs an admin action with the admin token while the server refuses it without."""

from __future__ import annotations

import os

import pytest
from console_env import ADMIN, TOKEN, console
from playwright.sync_api import expect, sync_playwright

from sweepq.bench.console import ARGS, CHROMIUM  # the launch the benchmark uses too
from sweepq.engine import OO


@pytest.fixture(scope="module")
def browser():

    assert os.path.exists(CHROMIUM), "Debian's chromium is missing: .ci/run installs it (apt-get install chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"the page's script failed: {errors}"


def cell(page, queue: str, name: str):
    return page.locator(f'#queue-table tr[data-queue="{queue}"] td.{name}')


def open_console(page, server) -> None:
    page.goto(server.console_url + "?token=" + TOKEN)
    page.wait_for_selector("#live.on")
    assert page.url == server.console_url  # the token left the address bar


def put(qm, queue: str, datas: list[bytes]) -> None:
    conn = qm.connect()
    conn.open(queue, OO.OUTPUT).put_many(datas)
    conn.disconnect()


def test_the_login_page_refuses_a_wrong_token_and_opens_with_the_right_one(page):
    with console() as (qm, server):
        page.goto(server.console_url)
        page.fill("#token", "wrong")
        page.click("button[type=submit]")
        assert "not this server's" in page.inner_text("body")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("#live.on")
        assert page.inner_text("#qm-name") == qm.name


def test_the_depth_changes_on_the_page_while_a_producer_runs(page):
    """Each depth a producer reaches is pushed to the open page: the producer waits to see it
    there before it goes on (state, not a pace), and the page never reloads."""
    with console() as (qm, server):
        open_console(page, server)
        assert cell(page, "ORDERS", "depth").inner_text() == "0"
        conn = qm.connect()
        try:
            h = conn.open("ORDERS", OO.OUTPUT)
            for step in range(1, 6):
                for i in range(8):
                    h.put(b"order %d" % (8 * (step - 1) + i))
                expect(cell(page, "ORDERS", "depth")).to_have_text(str(8 * step), timeout=30_000)
        finally:
            conn.disconnect()
        applied = page.evaluate("window.sweepqApplied.length")
        assert applied >= 5  # snapshots pushed, not a page reloaded
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_a_sweep_shows_when_a_queue_crosses_the_rule(page):
    with console(queues=("BIG", "SMALL")) as (qm, server):
        put(qm, "BIG", [b"big %d" % i for i in range(100)])
        put(qm, "SMALL", [b"small %d" % i for i in range(10)])
        conn = qm.connect()
        assert len(conn.open("SMALL", OO.INPUT_AS_Q_DEF).get_many(6)) == 6  # x = 6, y = 4
        conn.disconnect()
        open_console(page, server)
        assert cell(page, "BIG", "decision").inner_text() == "no cycle yet"
        qm.sweeper.run_once()  # the interval's end, driven by the test
        expect(cell(page, "BIG", "decision")).to_have_text("last cycle: swept 95")
        big = {c: cell(page, "BIG", c).inner_text() for c in ("y", "x", "threshold", "buffer", "in-memory", "swept")}
        assert big == {"y": "100", "x": "0 (now 0)", "threshold": "0", "buffer": "5", "in-memory": "5", "swept": "95"}
        assert cell(page, "BIG", "decision").get_attribute("data-outcome") == "swept"
        small = cell(page, "SMALL", "decision").inner_text()
        assert small == "last cycle: not swept (y 4 <= 12)" and cell(page, "SMALL", "threshold").inner_text() == "12"
        assert "blobs" in cell(page, "BIG", "blob-bytes").inner_text()
        expect(page.locator("#cycles")).to_have_text("1")
        assert page.locator("#rule-says").inner_text() == "the rule above, as given"  # "rule seed" explained
        # No client is connected (the test's connection ended): the table says so, not an empty table.
        expect(page.locator("#connection-table tbody")).to_have_text("no client connected")
        assert page.locator("#sweep-chart canvas").count() == 1 and page.locator("#depth-chart canvas").count() == 1


def test_a_message_is_browsed_as_text_and_hex_and_stays_on_the_queue(page):
    with console() as (qm, server):
        put(qm, "ORDERS", [b"first order", b"\x00\xffbinary"])
        open_console(page, server)
        cell(page, "ORDERS", "do").locator("button.browse").click()
        page.wait_for_selector("#message-table tbody tr")
        rows = page.locator("#message-table tbody tr")
        assert rows.count() == 2
        assert rows.nth(0).locator("pre.payload").inner_text() == "first order"
        assert "00FF 6269 6E61 7279" in rows.nth(1).locator("pre.payload").inner_text()  # not UTF-8: shown as hex
        assert "NOT_PERSISTENT" not in rows.nth(0).inner_text() and "no" in rows.nth(0).inner_text()
        page.check("input[name=payload][value=hex]")
        assert rows.nth(0).locator("pre.payload").inner_text().startswith("00000000:  6669 7273 7420 6F72")
        assert "browsing removed none" in page.inner_text("#browse-said")
        assert qm.inquire_queue("ORDERS").current_depth == 2


def test_admin_actions_work_with_the_token_and_are_refused_by_the_server_without(page):
    with console() as (qm, server):
        put(qm, "ORDERS", [b"a", b"b", b"c"])
        open_console(page, server)
        clear = cell(page, "ORDERS", "do").locator("button.clear")
        assert not clear.is_visible() and page.inner_text("#mode") == "read-only"
        assert not page.locator("#define-form").is_visible()
        # The page's controls are hidden; the server is what refuses: the request sent anyway.
        refused = page.evaluate("fetch('/api/queues/ORDERS/clear', {method: 'POST'}).then(r => r.status)")
        assert refused == 403 and qm.inquire_queue("ORDERS").current_depth == 3
        # A wrong admin token changes nothing.
        page.fill("#admin-token", "not it")
        page.click("#unlock")
        page.wait_for_selector("#notice.bad")
        assert page.inner_text("#mode") == "read-only" and not clear.is_visible()
        # The admin token: the controls appear, and the server does what they ask.
        page.fill("#admin-token", ADMIN)
        page.click("#unlock")
        page.wait_for_selector("#mode.admin-mode")
        clear.click()
        page.wait_for_selector("#notice.good")
        assert page.inner_text("#notice") == "cleared 3 message(s) from ORDERS"
        assert qm.inquire_queue("ORDERS").current_depth == 0
        page.fill("#define-name", "NEWQ")
        page.select_option("#define-policy", "BLOCK")
        page.click("#define")
        page.wait_for_selector('#queue-table tr[data-queue="NEWQ"]')
        assert cell(page, "NEWQ", "policy").inner_text() == "BLOCK"
        page.on("dialog", lambda d: d.accept())
        cell(page, "NEWQ", "do").locator("button.delete").click()
        page.wait_for_selector('#queue-table tr[data-queue="NEWQ"]', state="detached")
        assert qm.queue_names() == ["ORDERS"]
        page.click("#lock")
        page.wait_for_selector("#mode.readonly")
        assert not clear.is_visible()
