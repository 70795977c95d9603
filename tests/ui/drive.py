"""Drives the pages of `dispenser serve` in headless Chromium (Selenium), for
tests/integration/ui.rs, which prepares the service and checks what this prints.

Environment: BASE (the service's URL), KIOSK_TOKEN, BOARD_TOKEN, ADMIN_TOKEN, QUEUE,
DISPENSER (the binary), MONGODB_URI, DB, COLLECTION (for `dispenser queue call`), SHOTS (a
directory for the screenshots overview.png, kiosk.png, board.png).

Prints one JSON object: what each page showed, how long the board took to show a call made
by the CLI, whether a page asked before replacing the token it held with a link's, and the
browser's console errors (a CSP violation or a script error lands there). Tokens are passed in
the address's fragment (never sent to the server) and never printed.
"""

import json
import os
import subprocess
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE = os.environ["BASE"]
QUEUE = os.environ["QUEUE"]
SHOTS = os.environ["SHOTS"]


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,760", "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


def text(driver, element_id):
    return driver.find_element(By.ID, element_id).text.strip()


def wait(driver, seconds, condition, what):
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception:
        raise SystemExit(f"timed out after {seconds} s waiting for {what}; page: "
                         + driver.find_element(By.TAG_NAME, "body").text[:500])


def console_errors(driver):
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def holds(driver, token_env):
    """Whether the tab holds the token in the environment variable `token_env`."""
    return driver.execute_script(
        "return sessionStorage.getItem('dispenser.token') === arguments[0]",
        os.environ[token_env])


def answer_replace(driver, choice):
    """Waits for the page's "replace the token?" question and answers it: "replace-token" or
    "keep-token". Returns the question's title."""
    box = wait(driver, 10, lambda d: d.find_element(By.ID, "replace").is_displayed()
               and d.find_element(By.ID, "replace"), "the question whether to replace the token")
    title = box.find_element(By.CLASS_NAME, "title").text
    driver.find_element(By.ID, choice).click()
    return title


def queue_page(kind):
    return f"{BASE}/ui/queues/{QUEUE}/{kind}"


def kiosk(driver):
    driver.get(queue_page("kiosk") + "#token=" + os.environ["KIOSK_TOKEN"])
    button = wait(driver, 10, lambda d: d.find_element(By.ID, "take").is_displayed()
                  and d.find_element(By.ID, "take"), "the Take a ticket button")
    out = {
        "button": button.text,
        "token_left_in_address": driver.execute_script("return location.href.includes('token')"),
        "token_kept_in_session_storage":
            driver.execute_script("return sessionStorage.getItem('dispenser.token') !== null"),
        "tickets": [],
        "ahead": [],
    }
    for _ in range(2):
        before = text(driver, "ticket") if driver.find_element(By.ID, "result").is_displayed() else None
        button.click()
        wait(driver, 10, lambda d: d.find_element(By.ID, "result").is_displayed()
             and text(d, "ticket") not in ("", before), "a ticket")
        out["tickets"].append(text(driver, "ticket"))
        out["ahead"].append(text(driver, "ahead"))
    time.sleep(0.7)  # let the ticket's animation finish for the screenshot
    driver.save_screenshot(os.path.join(SHOTS, "kiosk.png"))
    return out


def board(driver):
    # The tab holds the kiosk's token: the board's link must ask before replacing it.
    driver.get(queue_page("board") + "#token=" + os.environ["BOARD_TOKEN"])
    asked = {"token_left_in_address":
             driver.execute_script("return location.href.includes('token')")}
    wait(driver, 10, lambda d: d.find_element(By.ID, "replace").is_displayed(), "the question")
    asked["kept_while_asking"] = holds(driver, "KIOSK_TOKEN")
    asked["waited"] = text(driver, "connection")
    asked["title"] = answer_replace(driver, "replace-token")
    wait(driver, 10, lambda d: text(d, "connection") == "live", "the board's live feed")
    asked["replaced"] = holds(driver, "BOARD_TOKEN")
    before = {"serving": text(driver, "serving"), "waiting": text(driver, "waiting")}
    call = subprocess.run(
        [os.environ["DISPENSER"], "--db", os.environ["DB"], "--collection",
         os.environ["COLLECTION"], "queue", "call", QUEUE],
        capture_output=True, text=True, check=True)
    called = call.stdout.strip()
    after_call = time.monotonic()
    wait(driver, 10, lambda d: text(d, "serving") == called, f"the board to show {called}")
    latency = time.monotonic() - after_call
    out = {
        "before": before,
        "called_by_cli": called,
        "shown_after_ms": round(latency * 1000),
        "serving": text(driver, "serving"),
        "waiting": text(driver, "waiting"),
        "next": text(driver, "next"),
        "asked": asked,
    }
    time.sleep(0.7)  # let the number's animation finish for the screenshot
    driver.save_screenshot(os.path.join(SHOTS, "board.png"))
    return out


def overview(driver):
    driver.get(BASE + "/ui#token=" + os.environ["ADMIN_TOKEN"])
    answer_replace(driver, "replace-token")  # the tab held the board's token
    wait(driver, 10, lambda d: d.find_element(By.ID, "content").is_displayed(), "the overview")

    def rows(table):
        return [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]

    out = {t: rows(t) for t in ("sequences", "gapless", "queues")}
    driver.save_screenshot(os.path.join(SHOTS, "overview.png"))
    return out


def planted(driver):
    """A crafted link (another token, here the kiosk's) to a page of a tab that holds one:
    asked, refused ("Keep"), the page goes on with its own; likewise when only the
    fragment changes (no reload)."""
    driver.get(BASE + "/ui#token=" + os.environ["KIOSK_TOKEN"])
    out = {"title": answer_replace(driver, "keep-token")}
    wait(driver, 10, lambda d: d.find_element(By.ID, "content").is_displayed(), "the overview")
    out["kept"] = holds(driver, "ADMIN_TOKEN")
    out["token_left_in_address"] = driver.execute_script("return location.href.includes('token')")
    driver.execute_script("location.hash = 'token=' + arguments[0]", os.environ["KIOSK_TOKEN"])
    out["fragment_title"] = answer_replace(driver, "keep-token")
    out["fragment_kept"] = holds(driver, "ADMIN_TOKEN")
    out["fragment_left_in_address"] = driver.execute_script(
        "return location.href.includes('token')")
    out["question_gone"] = not driver.find_elements(By.ID, "replace")
    return out


def main():
    driver = browser()
    result = {"console_errors": []}
    try:
        for page in (kiosk, board, overview, planted):
            result[page.__name__] = page(driver)
            result["console_errors"] += console_errors(driver)
    finally:
        driver.quit()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
