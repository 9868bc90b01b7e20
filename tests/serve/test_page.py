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
