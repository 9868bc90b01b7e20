"""The web chat page in headless Chromium (Debian's chromium + chromedriver); served
without tokens, another page in the same browser cannot post to the API."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import model_args
from fake_model import FakeModel
from servekit import TOKEN, Served, child_env

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not shutil.which(CHROMIUM) or not shutil.which(DRIVER):
        pytest.skip(
            "needs Debian's chromium and chromium-driver (.ci/run installs them)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
    ):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=DRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _open(browser: Any, served: Served) -> WebDriverWait[Any]:
    browser.get(served.url + "/")
    token = browser.find_element(By.ID, "token")
    token.clear()
    token.send_keys(TOKEN)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", token)
    browser.find_element(By.ID, "new").click()
    return WebDriverWait(browser, 15)


def _send(browser: Any, text: str) -> None:
    prompt = browser.find_element(By.ID, "prompt")
    prompt.send_keys(text)
    browser.find_element(By.ID, "go").click()


def test_a_turn_streams_into_the_page_with_its_tool_call(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    _send(browser, "please use tool")
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    log = browser.find_element(By.ID, "log").text
    assert "please use tool" in log
    assert "→ list_dir done" in log
    assert 'tool said: ["notes.txt"]' in log
    # the session shows in the list, named by its prompt
    wait.until(ec.text_to_be_present_in_element((By.ID, "sessions"), "please use tool"))


def test_the_answer_grows_live_and_cancel_stops_it(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    _send(browser, "slow")
    answer = '//div[@class="assistant"][last()]'
    wait.until(lambda b: b.find_element(By.XPATH, answer).text.count("tick") >= 2)
    first = browser.find_element(By.XPATH, answer).text.count("tick")
    time.sleep(0.3)
    assert browser.find_element(By.XPATH, answer).text.count("tick") > first  # live
    cancel = browser.find_element(By.ID, "cancel")
    assert cancel.is_enabled()
    cancel.click()
    wait.until(
        ec.text_to_be_present_in_element((By.ID, "status"), "stopped: cancelled")
    )
    assert browser.find_element(By.XPATH, answer).text.count("tick") < 100
    assert browser.find_element(By.ID, "go").is_enabled()


@pytest.fixture(scope="module")
def open_served(fake_model: FakeModel, served_dir: Path) -> Iterator[Served]:
    """The same model served without tokens."""
    args = [*model_args(fake_model, served_dir), "--db", str(served_dir / "o.db")]
    env = child_env()
    env.pop("NAVI_SERVE_TOKENS")
    with Served.start(served_dir, [*args, "--no-auth"], env) as s:
        yield s


def _sessions(served: Served) -> int:
    return len(httpx.get(served.url + "/v1/sessions?limit=256").json()["sessions"])


def test_without_tokens_the_page_works_and_another_page_cannot_post_to_it(
    browser: Any, served: Served, open_served: Served
) -> None:
    wait = _open(browser, open_served)  # its own page: same origin
    _send(browser, "hello there")
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    assert "echo: hello there" in browser.find_element(By.ID, "log").text
    before = _sessions(open_served)
    browser.get(
        served.url + "/"
    )  # another origin (another port) posts, as any page can
    sent = browser.execute_async_script(
        """
        const [url, done] = [arguments[0], arguments[arguments.length - 1]];
        const post = (type, body) => fetch(url + "/v1/sessions", {
          method: "POST", mode: "no-cors", headers: { "Content-Type": type }, body,
        });
        Promise.allSettled([
          post("text/plain", '{"system": "from another page"}'),
          post("application/x-www-form-urlencoded", "system=x"),
        ]).then((r) => done(r.map((x) => x.status)));
        """,
        open_served.url,
    )
    assert sent == ["fulfilled", "fulfilled"]  # the requests went out
    assert _sessions(open_served) == before  # and made nothing


# -- what the log shows: following, one block per response, markdown, no markup ----

_GAP = (
    "const l = document.getElementById('log');"
    " return l.scrollHeight - l.scrollTop - l.clientHeight;"
)


def _gap(browser: Any) -> float:
    """Pixels between the bottom of the log's view and the end of its content."""
    return float(browser.execute_script(_GAP))


def _log_entries(browser: Any) -> list[list[str]]:
    return list(
        browser.execute_script(
            "return Array.from(document.getElementById('log').children)"
            ".map((c) => [c.className, c.textContent]);"
        )
    )


def test_the_log_follows_a_long_stream_until_the_reader_scrolls_up(
    browser: Any, served: Served
) -> None:
    browser.set_window_size(900, 500)
    wait = _open(browser, served)
    _send(browser, "lines 200")  # 200 lines, 20 ms apart: about 4 s
    wait.until(
        lambda b: b.execute_script(
            "const l = document.getElementById('log');"
            " return l.scrollHeight > 2 * l.clientHeight;"
        )
    )
    for _ in range(5):  # while it streams, the end stays in view
        assert _gap(browser) < 30
        time.sleep(0.1)
    browser.execute_script("document.getElementById('log').scrollTop = 40;")
    time.sleep(0.6)  # more lines arrive; the reader's place does not move
    assert (
        browser.execute_script("return document.getElementById('log').scrollTop;") == 40
    )
    assert _gap(browser) > 100
    assert browser.find_element(By.ID, "status").text == "running"
    browser.execute_script(
        "const l = document.getElementById('log'); l.scrollTop = l.scrollHeight;"
    )
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    assert "line 199" in browser.find_element(By.ID, "log").text
    assert _gap(browser) < 30  # back at the bottom, it followed again to the end


def test_each_response_has_its_block_and_tool_lines_stay_in_order(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    _send(browser, "please narrate tool")
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    entries = _log_entries(browser)
    assert [cls for cls, _ in entries] == ["user", "assistant", "tool", "assistant"]
    assert entries[1][1] == "Looking first."
    assert entries[2][1].startswith("→ list_dir done")
    assert entries[3][1] == 'tool said: ["notes.txt"]'
    # read back from the store, the session shows in the same order
    browser.find_element(By.CSS_SELECTOR, "#sessions li.current").click()
    wait.until(lambda b: len(_log_entries(b)) == 4)
    assert [cls for cls, _ in _log_entries(browser)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_markdown_from_the_model_is_rendered_as_elements(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    _send(
        browser,
        "**bold** *soft* `x < y` [site](https://example.com/a) "
        "[trap](javascript:alert(1))",
    )
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    answer = browser.find_element(By.CSS_SELECTOR, "#log .assistant:last-child")
    assert answer.find_element(By.TAG_NAME, "strong").text == "bold"
    assert answer.find_element(By.TAG_NAME, "em").text == "soft"
    assert answer.find_element(By.TAG_NAME, "code").text == "x < y"
    (link,) = answer.find_elements(By.TAG_NAME, "a")
    assert link.get_attribute("href") == "https://example.com/a"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert "(https://example.com/a)" in answer.text  # the target is shown
    assert "[trap](javascript:alert(1))" in answer.text  # not a link: plain text


def test_the_renderer_builds_blocks_from_markdown(browser: Any, served: Served) -> None:
    _open(browser, served)
    source = (
        "# Title\n\nfirst line\nsecond line\n\n- one\n- **two**\n\n"
        "3. three\n4. four\n\n```\n<b>not bold</b>\n```\n"
    )
    html = browser.execute_script(
        "const d = document.createElement('div'); markdown(d, arguments[0]);"
        " return d.innerHTML;",
        source,
    )
    assert html == (
        "<h1>Title</h1><p>first line\nsecond line</p>"
        "<ul><li>one</li><li><strong>two</strong></li></ul>"
        '<ol start="3"><li>three</li><li>four</li></ol>'
        "<pre><code>&lt;b&gt;not bold&lt;/b&gt;</code></pre>"
    )


def test_markup_and_script_from_the_model_stay_text(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    browser.execute_script("delete window.__pwned;")
    hostile = (
        "<script>window.__pwned = 1</script>"
        '<img src="x" onerror="window.__pwned = 2">'
        '[<img src="y" onerror="window.__pwned = 3">](https://example.com)'
    )
    _send(browser, hostile)
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "stopped: end_turn"))
    time.sleep(0.3)  # an injected image would have failed to load by now
    log = browser.find_element(By.ID, "log")
    assert "<script>window.__pwned = 1</script>" in log.text
    assert log.find_elements(By.TAG_NAME, "script") == []
    assert log.find_elements(By.TAG_NAME, "img") == []
    # and read back from the store
    browser.find_element(By.CSS_SELECTOR, "#sessions li.current").click()
    wait.until(lambda b: "window.__pwned = 1" in b.find_element(By.ID, "log").text)
    time.sleep(0.3)
    assert log.find_elements(By.TAG_NAME, "img") == []
    assert browser.execute_script("return window.__pwned === undefined;")


def test_a_new_session_is_listed_as_soon_as_its_turn_starts(
    browser: Any, served: Served
) -> None:
    wait = _open(browser, served)
    _send(browser, "slow 60")  # 3 s
    wait.until(ec.text_to_be_present_in_element((By.ID, "sessions"), "slow 60"))
    assert browser.find_element(By.ID, "status").text == "running"
    browser.find_element(By.ID, "cancel").click()
    wait.until(
        ec.text_to_be_present_in_element((By.ID, "status"), "stopped: cancelled")
    )
