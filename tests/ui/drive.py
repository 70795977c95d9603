"""Drives the pages of `dispenser serve` in headless Chromium (Selenium), for
tests/integration/ui.rs, which prepares the service and checks what this prints.

Environment: BASE (the service's URL), KIOSK_TOKEN, BOARD_TOKEN, ADMIN_TOKEN, PHONE_TOKEN (the
ticket link of QUEUE: three takes per phone), QUEUE (the queue with desks), QUEUE_B (a second
queue, for the board of several), FULL (a full queue), CROWD (how many phones follow QUEUE
while the board shows a call), DISPENSER (the binary), MONGODB_URI, DB, COLLECTION (for
`dispenser queue call`), SHOTS (a directory for the screenshots: board, kiosk, overview and
ticket, each at 1920×1080 and, as `*-phone.png`, at 390×844).

Prints one JSON object: what each page showed, the requests the kiosk sent (from the
browser's network log), how long the board took to show a call made by the CLI, what it
announced (the aria-live region, and the spoken queue's start and end times), whether a page
asked before replacing the token it held with a link's, the ticket page on a phone (take,
follow, reload, the call, a missed call, give up, the limit), the QR codes of the ticket link
read off the kiosk's and the board's screenshots (zbarimg), a crowd of phones following the
queue while the board shows a call, and the browser's console errors (a CSP violation or a
script error lands there). Tokens are passed in the address's fragment
(never sent to the server) and never printed.
"""

import faulthandler
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE = os.environ["BASE"]
QUEUE = os.environ["QUEUE"]
SHOTS = os.environ["SHOTS"]

WIDE = (1920, 1080)
PHONE = (390, 844)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1920,1080", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    viewport(driver, WIDE)
    return driver


def viewport(driver, size):
    width, height = size
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def shoot(driver, name):
    """Screenshots of the page as it is, at 1920×1080 (`name.png`) and 390×844
    (`name-phone.png`); the page's layout at the phone's size is reported too."""
    time.sleep(0.7)  # let the last animation finish
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))
    viewport(driver, PHONE)
    time.sleep(0.5)
    driver.save_screenshot(os.path.join(SHOTS, name + "-phone.png"))
    # Responsive: nothing wider than the phone's screen.
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    if overflow:
        # What is wider than the screen, to say what to fix.
        overflow = [overflow] + driver.execute_script(
            "return [...document.querySelectorAll('*')]"
            ".filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)"
            ".map(e => e.tagName + '#' + e.id + '.' + e.className + ':' + getComputedStyle(e).display + '/' + getComputedStyle(e).overflowX + ':' + Math.round(e.getBoundingClientRect().right)).slice(0, 8)")
    viewport(driver, WIDE)
    time.sleep(0.3)
    return overflow


def text(driver, element_id):
    return driver.find_element(By.ID, element_id).text.strip()


def wait(driver, seconds, condition, what):
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception:
        raise SystemExit(f"timed out after {seconds} s waiting for {what}; page: "
                         + driver.find_element(By.TAG_NAME, "body").text[:800])


def console_errors(driver, expected=()):
    """The browser's errors, but those that contain one of `expected` (errors the test
    caused on purpose, such as a request sent while the network was cut)."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and not any(x in e["message"] for x in expected)]


def sent(driver, path_end):
    """The requests the page sent since the last call whose URL ends with `path_end`:
    (method, headers) each, from the browser's network log."""
    out = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") != "Network.requestWillBeSent":
            continue
        request = message["params"]["request"]
        if request["url"].endswith(path_end):
            out.append((request["method"], {k.lower(): v for k, v in request["headers"].items()}))
    return out


def api(method, path, token, body=None, headers=None):
    """Calls the service from here (not the page): (status, JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Authorization", "Bearer " + os.environ[token])
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def cli(*args):
    """`dispenser queue ARGS… --json` on the test's collection: the label of the ticket it
    printed (the calls of the phone's tickets name them, out of order)."""
    done = subprocess.run(
        [os.environ["DISPENSER"], "--db", os.environ["DB"], "--collection",
         os.environ["COLLECTION"], "queue", *args, "--json"],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"dispenser queue {' '.join(args)}: {done.stderr}")
    return json.loads(done.stdout)["label"]


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


def queue_page(kind, queue=QUEUE):
    return f"{BASE}/ui/queues/{queue}/{kind}"


def taken():
    return api("GET", f"/v1/queues/{QUEUE}", "ADMIN_TOKEN")[1]["taken"]


def kiosk(driver):
    driver.get(queue_page("kiosk") + "#token=" + os.environ["KIOSK_TOKEN"])
    button = wait(driver, 10, lambda d: d.find_element(By.ID, "take").is_displayed()
                  and d.find_element(By.ID, "take"), "the Take a ticket button")
    out = {
        "button": button.text,
        "token_left_in_address": driver.execute_script("return location.href.includes('token')"),
        "token_kept_in_session_storage":
            driver.execute_script("return sessionStorage.getItem('dispenser.token') !== null"),
    }
    take_path = f"/v1/queues/{QUEUE}/take"
    sent(driver, take_path)  # forget the log so far

    def ticket_shown(before):
        wait(driver, 10, lambda d: d.find_element(By.ID, "result").is_displayed()
             and text(d, "ticket") not in ("", before), "a ticket")
        return {k: text(driver, k) for k in ("ticket", "ahead", "estimate")}

    # A double tap, fast: one request, one ticket.
    taken_before = taken()
    ActionChains(driver).double_click(button).perform()
    out["double_tap"] = ticket_shown(None)
    requests = sent(driver, take_path)
    out["double_tap"]["requests"] = len(requests)
    out["double_tap"]["taken"] = taken() - taken_before
    key = requests[0][1].get("idempotency-key") if requests else None
    out["double_tap"]["key_length"] = len(key or "")
    # The same request id again (a retry whose first answer was lost): the same ticket,
    # nothing more taken.
    status, again = api("POST", take_path, "KIOSK_TOKEN", headers={"Idempotency-Key": key})
    out["same_key_again"] = {"status": status, "label": again.get("label"),
                             "replayed": again.get("replayed"), "taken": taken() - taken_before}

    # A tap while the network is down, then a tap once it is back: the second tap sends the
    # same request id (the first never got an answer), and one ticket is taken.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    first = text(driver, "ticket")
    taken_before = taken()
    button.click()
    wait(driver, 10, lambda d: "cannot reach" in text(d, "message"), "the no-connection message")
    out["offline_message"] = text(driver, "message")
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    button.click()
    out["after_offline"] = ticket_shown(first)
    keys = [h.get("idempotency-key") for m, h in sent(driver, take_path) if m == "POST"]
    out["after_offline"]["requests"] = len(keys)
    out["after_offline"]["one_key"] = len(set(keys)) == 1
    out["after_offline"]["taken"] = taken() - taken_before
    errors = console_errors(driver, ("ERR_INTERNET_DISCONNECTED",))

    # The printed ticket: only the ticket, the queue, the date and time.
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    out["print"] = {
        "button_shown": button.is_displayed(),
        "ticket_shown": driver.find_element(By.ID, "ticket").is_displayed(),
        "queue": text(driver, "ticket-queue"),
        "taken_at": text(driver, "taken-at"),
    }
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    out["phone_overflow"] = shoot(driver, "kiosk")

    # A full queue says so.
    driver.get(queue_page("kiosk", os.environ["FULL"]))
    button = wait(driver, 10, lambda d: d.find_element(By.ID, "take").is_displayed()
                  and d.find_element(By.ID, "take"), "the full queue's kiosk")
    button.click()
    wait(driver, 10, lambda d: text(d, "message") != "", "the full queue's message")
    out["full"] = text(driver, "message")
    out["full_result_hidden"] = not driver.find_element(By.ID, "result").is_displayed()
    # The browser reports the 409 answer itself (not the page).
    out["console_errors"] = errors + console_errors(driver, (
        f"/v1/queues/{os.environ['FULL']}/take - Failed to load resource: "
        "the server responded with a status of 409",))
    return out


def texts(driver, css, cells=None, root=None):
    """The visible text of each element matching `css` (under `root`), or of each of its
    `cells`, read in one script: the pages replace these elements whenever fresh data comes
    (a board's status, the overview's refresh), so elements found by one WebDriver call may
    be gone by the next."""
    return driver.execute_script(
        "const [css, cells, root] = arguments;"
        "const text = (e) => e.innerText.trim();"
        "return [...(root || document).querySelectorAll(css)].map("
        " (e) => cells ? [...e.querySelectorAll(cells)].map(text) : text(e));",
        css, cells, root)


def calls_shown(driver):
    return texts(driver, "#recent li:not(.none)", ".ticket, .desk")


def current(driver):
    return text(driver, "serving") + " " + text(driver, "desk")


def announced(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#announcements p')].map(p => p.textContent)")


def board(driver, out_console):
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
    out = {"asked": asked, "before": {"current": current(driver), "calls": calls_shown(driver),
                                      "announced": announced(driver)}}
    # Sound on (a click: the gesture browsers ask for).
    sound = driver.find_element(By.ID, "sound")
    sound.click()
    out["sound"] = {"pressed": sound.get_attribute("aria-pressed"), "label": sound.text}

    # Two desks call through the CLI, then the first recalls.
    called = [cli("call", QUEUE, "--desk", "2")]
    after_call = time.monotonic()
    wait(driver, 10, lambda d: current(d).startswith(called[0]),
         f"the board to show {called[0]}")
    out["shown_after_ms"] = round((time.monotonic() - after_call) * 1000)
    called.append(cli("call", QUEUE, "--desk", "3"))
    cli("recall", QUEUE, "--desk", "2")
    wait(driver, 10, lambda d: len(announced(d)) >= 3, "three announcements")
    out["called_by_cli"] = called
    out["current"] = current(driver)
    out["calls"] = calls_shown(driver)
    out["announced"] = announced(driver)
    out["waiting"] = texts(driver, "#waits .wait-row")
    # The spoken queue: one after the other, none cut off (headless Chromium has no voice:
    # each ends at once with an error, or at the time limit).
    wait(driver, 30, lambda d: d.execute_script(
        "return Announcer.history.length >= 3 && Announcer.history.every(e => e.ended !== null)"),
        "the announcements to be spoken")
    spoken = driver.execute_script(
        "return Announcer.history.map(e => [e.text, e.started, e.ended, e.outcome])")
    out["spoken"] = [s[0] for s in spoken]
    out["spoken_in_turn"] = all(spoken[i][1] >= spoken[i - 1][2] for i in range(1, len(spoken)))
    out["phone_overflow"] = shoot(driver, "board")
    out_console += console_errors(driver)

    # The board of several queues: a call on the second shows with its desk, above the
    # calls of the first.
    driver.get(f"{BASE}/ui/board?queues={QUEUE},{os.environ['QUEUE_B']}")
    wait(driver, 10, lambda d: text(d, "connection") == "live", "the board of two queues")
    called_b = cli("call", os.environ["QUEUE_B"], "--desk", "4")
    wait(driver, 10, lambda d: current(d).startswith(called_b), f"the board to show {called_b}")
    out["several"] = {"title": text(driver, "queue-name"), "current": current(driver),
                      "calls": calls_shown(driver)[:2], "announced": announced(driver),
                      "waiting": texts(driver, "#waits .wait-row")}
    return out


def overview(driver):
    driver.get(BASE + "/ui#token=" + os.environ["ADMIN_TOKEN"])
    answer_replace(driver, "replace-token")  # the tab held the board's token
    wait(driver, 10, lambda d: d.find_element(By.ID, "content").is_displayed(), "the overview")
    card_css = f"article.queue-card[data-queue='{QUEUE}']"
    card = wait(driver, 10, lambda d: d.find_element(By.CSS_SELECTOR, card_css), "the queue's card")

    def rows(table):
        return texts(driver, f"#{table} tbody tr", "td")

    def desks():
        return [r[:2] for r in texts(driver, "table.desks tbody tr", "td", card)]

    def figures():
        return {dt.lower(): dd for dt, dd in texts(driver, ".figure", "dt, dd", card)}

    out = {t: rows(t) for t in ("sequences", "gapless")}
    out["queues"] = [c.get_attribute("data-queue")
                     for c in driver.find_elements(By.CSS_SELECTOR, "article.queue-card")]
    out["board_of_all"] = driver.find_element(By.ID, "all-boards").get_attribute("href")
    out["desks_before"] = desks()
    # Call next from desk 7, then cancel a waiting ticket by its label.
    desk = card.find_element(By.CSS_SELECTOR, "input.desk-input")
    desk.clear()
    desk.send_keys("7")
    card.find_element(By.CSS_SELECTOR, ".controls button.call").click()
    result = lambda d: card.find_element(By.CSS_SELECTOR, ".action-result").text
    wait(driver, 10, lambda d: result(d).startswith("Called"), "the call's result")
    out["call_result"] = result(driver)
    wait(driver, 10, lambda d: any(r[0] == "7" for r in desks()), "desk 7 in the table")
    out["desks"] = desks()
    waiting = api("GET", f"/v1/queues/{QUEUE}", "ADMIN_TOKEN")[1].get("waiting_list") or []
    victim = waiting[-1]["label"] if waiting else "?"
    ticket = card.find_element(By.CSS_SELECTOR, "input.ticket-input")
    ticket.send_keys(victim)
    card.find_element(By.CSS_SELECTOR, ".controls button.cancel").click()
    wait(driver, 10, lambda d: result(d).startswith("Cancelled"), "the cancel's result")
    out["cancel_result"] = [victim, result(driver)]
    wait(driver, 10, lambda d: figures().get("cancelled") == "1", "cancelled 1")
    out["figures"] = figures()
    # The charts: 24 bars each (the sequence chart only where the service answers GET
    # /v1/sequences/{name}/hourly).
    try:
        WebDriverWait(driver, 10, poll_frequency=0.05).until(
            lambda d: d.find_element(By.ID, "sequence-chart").is_displayed())
        out["sequence_chart"] = {
            "for": driver.find_element(By.ID, "chart-sequence").get_attribute("value"),
            "bars": len(driver.find_elements(By.CSS_SELECTOR, "#sequence-chart-svg rect.column")),
            "label": driver.find_element(By.CSS_SELECTOR, "#sequence-chart-svg svg")
            .get_attribute("aria-label"),
        }
    except Exception:
        out["sequence_chart"] = "not shown"
    out["queue_chart"] = {
        "bars": len(card.find_elements(By.CSS_SELECTOR, "figure.chart rect.column")),
        "label": card.find_element(By.CSS_SELECTOR, "figure.chart svg").get_attribute("aria-label"),
    }
    out["phone_overflow"] = shoot(driver, "overview")
    return out


def edges(driver):
    """Issue 37: a ticket past 2^53 cancelled by its number from /ui (a JS Number would round
    9007199254740993 to …992), and a 190-character label on a board at 1920×1080 (clipped to
    one line, the desk still on the screen). Leaves the tab with the admin's token."""
    out = {}
    wide = os.environ["WIDE"]
    card_css = f"article.queue-card[data-queue='{wide}']"
    card = wait(driver, 10, lambda d: d.find_element(By.CSS_SELECTOR, card_css), "the wide queue's card")
    card.find_element(By.CSS_SELECTOR, "input.ticket-input").send_keys("9007199254740993")
    card.find_element(By.CSS_SELECTOR, ".controls button.cancel").click()
    result = lambda d: card.find_element(By.CSS_SELECTOR, ".action-result").text
    wait(driver, 10, lambda d: result(d).startswith("Cancelled"), "the wide cancel's result")
    out["cancel_result"] = result(driver)
    out["still_waiting"] = [str(w["ticket"]) for w in
                            api("GET", f"/v1/queues/{wide}", "ADMIN_TOKEN")[1]["waiting_list"]]
    long = os.environ["LONG"]
    viewport(driver, (1920, 1080))
    driver.get(queue_page("board", long) + "#token=" + os.environ["BOARD_TOKEN"])
    answer_replace(driver, "replace-token")
    wait(driver, 10, lambda d: text(d, "connection") == "live", "the long label's board")
    wait(driver, 10, lambda d: text(d, "desk") != "", "the long label's call")
    out["board"] = driver.execute_script(
        "const r = (id) => document.getElementById(id).getBoundingClientRect();"
        "const s = r('serving'), k = r('desk');"
        "return {serving_height: s.height, serving_lines: Math.round(s.height /"
        " parseFloat(getComputedStyle(document.getElementById('serving')).lineHeight || s.height)),"
        " desk_right: k.right, desk_bottom: k.bottom, width: innerWidth, height: innerHeight,"
        " title: document.getElementById('serving').title.length,"
        " scroll_width: document.documentElement.scrollWidth,"
        " wider: [...document.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > innerWidth)"
        "   .map(e => e.tagName + '#' + e.id + '.' + e.className)};")
    driver.get(BASE + "/ui#token=" + os.environ["ADMIN_TOKEN"])
    answer_replace(driver, "replace-token")
    wait(driver, 10, lambda d: d.find_element(By.ID, "content").is_displayed(), "the overview")
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


def status(queue=QUEUE):
    return api("GET", f"/v1/queues/{queue}", "ADMIN_TOKEN")[1]


def stored_ticket(driver):
    """What the ticket page keeps for QUEUE in localStorage."""
    return driver.execute_script(
        "return JSON.parse(localStorage.getItem('dispenser.ticket.' + arguments[0]) || '{}')", QUEUE)


def ticket_state(driver):
    return driver.execute_script(
        "const m = document.getElementById('mine'), v = document.getElementById('take-view');"
        "return {mine: !m.hidden, take: !v.hidden,"
        " ticket: document.getElementById('ticket').textContent,"
        " state: document.getElementById('state').textContent,"
        " estimate: document.getElementById('estimate').hidden ? null"
        "   : document.getElementById('estimate').textContent,"
        " serving: document.getElementById('serving').textContent,"
        " message: document.getElementById('message').textContent,"
        " again: !document.getElementById('again').hidden,"
        " give_up: !document.getElementById('give-up').hidden, title: document.title};")


def phone(driver):
    """The ticket page at 390×844, from the link: take, follow, reload, the call (desk, title,
    announcement, vibration), passed, a call missed while the page was closed, give up, and
    the fourth take of the phone refused by the link's limit."""
    out = {}
    take_path = f"/v1/queues/{QUEUE}/take"
    viewport(driver, PHONE)
    # Vibrations are recorded (headless Chromium has no motor).
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source":
        "window.__vibrations = []; navigator.vibrate = (p) => { window.__vibrations.push(p); return true; };"})
    page = queue_page("ticket")
    driver.get(page + "#token=" + os.environ["PHONE_TOKEN"])
    button = wait(driver, 10, lambda d: d.find_element(By.ID, "take").is_displayed()
                  and d.find_element(By.ID, "take"), "the ticket page's Take button")
    out["token_left_in_address"] = driver.execute_script("return location.href.includes('token')")
    out["token_kept"] = stored_ticket(driver).get("token") == os.environ["PHONE_TOKEN"]
    sent(driver, take_path)
    before = status()
    button.click()
    wait(driver, 10, lambda d: ticket_state(d)["mine"] and ticket_state(d)["ticket"] != "",
         "the phone's ticket")
    wait(driver, 10, lambda d: ticket_state(d)["state"] != "", "the phone's place in line")
    taken = ticket_state(driver)
    keys = [h.get("idempotency-key") for m, h in sent(driver, take_path) if m == "POST"]
    taken["requests"] = len(keys)
    taken["key_form"] = bool(keys) and re.fullmatch(r"[0-9a-f]{16}\.[0-9a-f]{16}", keys[0]) is not None
    taken["taken"] = status()["taken"] - before["taken"]
    out["take"] = taken
    label = taken["ticket"]
    number = str(int(label.split("-")[1]))
    # Follow: a call of the oldest waiting ticket moves it up.
    ahead = taken["state"]
    cli("call", QUEUE, "--desk", "1")
    after_call = time.monotonic()
    wait(driver, 10, lambda d: ticket_state(d)["state"] != ahead, "the phone's new place")
    out["follow"] = {"state": ticket_state(driver)["state"],
                     "shown_after_ms": round((time.monotonic() - after_call) * 1000)}
    viewport(driver, WIDE)
    out["phone_overflow"] = shoot(driver, "ticket")
    viewport(driver, PHONE)
    # Reload: the same ticket, followed, and nothing taken.
    sent(driver, take_path)
    before = status()
    driver.refresh()
    wait(driver, 10, lambda d: ticket_state(d)["mine"] and ticket_state(d)["state"] != "",
         "the ticket after a reload")
    reloaded = ticket_state(driver)
    reloaded["take_requests"] = len(sent(driver, take_path))
    reloaded["taken"] = status()["taken"] - before["taken"]
    out["reload"] = reloaded
    # The call, at desk 5: within a second, with the title, the announcement and a vibration.
    cli("call", QUEUE, "--desk", "5", "--ticket", number)
    after_call = time.monotonic()
    wait(driver, 10, lambda d: ticket_state(d)["state"].startswith("It's your turn"), "the call")
    called = ticket_state(driver)
    called["shown_after_ms"] = round((time.monotonic() - after_call) * 1000)
    called["announced"] = announced(driver)
    called["vibrations"] = driver.execute_script("return window.__vibrations.length")
    out["called"] = called
    # Desk 5 calls the next: this ticket was called, and the page says so.
    cli("call", QUEUE, "--desk", "5")
    wait(driver, 10, lambda d: ticket_state(d)["again"], "the passed ticket")
    out["passed"] = ticket_state(driver)
    # A second ticket, called and passed while the page is closed: missed.
    driver.find_element(By.ID, "again").click()
    wait(driver, 10, lambda d: d.find_element(By.ID, "take").is_displayed(), "the Take button again")
    driver.find_element(By.ID, "take").click()
    wait(driver, 10, lambda d: ticket_state(d)["mine"] and ticket_state(d)["state"] != ""
         and ticket_state(d)["ticket"] != label, "the second ticket")
    second = ticket_state(driver)["ticket"]
    driver.get("about:blank")
    cli("call", QUEUE, "--desk", "6", "--ticket", str(int(second.split("-")[1])))
    released = subprocess.run(
        [os.environ["DISPENSER"], "--db", os.environ["DB"], "--collection",
         os.environ["COLLECTION"], "queue", "finish", QUEUE, "--desk", "6"],
        capture_output=True, text=True)
    if released.returncode != 0:
        raise SystemExit(f"dispenser queue finish: {released.stderr}")
    # Closed a while longer: the service's status feed is read every 250 ms, and a page opened
    # at once may be sent the status read between the call and the release (the call shown,
    # then passed: "You were called", not "missed").
    time.sleep(1)
    driver.get(page)
    wait(driver, 10, lambda d: ticket_state(d)["again"], "the missed ticket")
    out["missed"] = ticket_state(driver)
    out["missed"]["label"] = second
    # A third ticket, given up.
    driver.find_element(By.ID, "again").click()
    driver.find_element(By.ID, "take").click()
    wait(driver, 10, lambda d: ticket_state(d)["give_up"] and ticket_state(d)["ticket"] != second,
         "the third ticket")
    third = ticket_state(driver)["ticket"]
    before = status()
    driver.find_element(By.ID, "give-up").click()
    driver.find_element(By.ID, "give-up-yes").click()
    wait(driver, 10, lambda d: ticket_state(d)["again"], "the ticket given up")
    out["gave_up"] = ticket_state(driver)
    out["gave_up"]["label"] = third
    out["gave_up"]["still_waiting"] = any(w["label"] == third for w in status()["waiting_list"])
    out["gave_up"]["cancelled"] = status()["cancelled"] - before["cancelled"]
    # A fourth take from this phone: refused by the link's limit, in plain words.
    before = status()
    driver.find_element(By.ID, "again").click()
    driver.find_element(By.ID, "take").click()
    wait(driver, 10, lambda d: ticket_state(d)["message"] != "", "the limit's message")
    out["limited"] = ticket_state(driver)
    out["limited"]["taken"] = status()["taken"] - before["taken"]
    viewport(driver, WIDE)
    return out


def read_qr(driver, page, token_env):
    """The ticket link's QR code on `page` (kiosk or board of QUEUE), read from a screenshot
    of it by zbarimg, as a phone's camera would read it."""
    driver.get(queue_page(page) + "#token=" + os.environ[token_env])
    if driver.find_elements(By.ID, "replace"):
        answer_replace(driver, "replace-token")
    box = wait(driver, 10, lambda d: d.find_element(By.ID, "ticket-link").is_displayed()
               and d.find_element(By.ID, "ticket-link"), f"the {page}'s QR code")
    time.sleep(0.5)
    shot = os.path.join(SHOTS, f"qr-{page}.png")
    box.find_element(By.TAG_NAME, "img").screenshot(shot)
    read = subprocess.run(["zbarimg", "--quiet", "--raw", shot], capture_output=True, text=True)
    os.remove(shot)
    return read.stdout.strip()


class Follower(threading.Thread):
    """One phone of the crowd, as its page acts: a take through the link with its own phone
    id, then its ticket's stream, read to the end; each event's time and view kept."""

    def __init__(self, i):
        super().__init__(daemon=True)
        self.key = f"{i:016x}.{i:016x}"
        self.events = []
        self.status = None
        self.sock = None
        self.retried = 0

    def run(self):
        # As the page does, a take answered 5xx (200 phones at once lose races on one queue
        # document) is sent again with the same request id, a little later.
        for attempt in range(1, 11):
            code, ticket = api("POST", f"/v1/queues/{QUEUE}/take", "PHONE_TOKEN",
                               headers={"Idempotency-Key": self.key})
            if code < 500:
                break
            self.retried += 1
            time.sleep(0.3 * attempt)
        if code != 200:
            self.status = code
            return
        url = urllib.parse.urlsplit(BASE)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
        try:
            conn.request("GET", f"/ui/queues/{QUEUE}/tickets/{ticket['serial']}/events",
                         headers={"Authorization": "Bearer " + os.environ["PHONE_TOKEN"],
                                  "Accept": "text/event-stream"})
            self.sock = conn.sock
            resp = conn.getresponse()
            self.status = resp.status
            while resp.status == 200:
                line = resp.readline()
                if not line:
                    return
                if line.startswith(b"data:"):
                    self.events.append((time.monotonic(), json.loads(line[5:])))
        except (OSError, http.client.HTTPException):
            return


def crowd(driver):
    """CROWD phones follow QUEUE (each its stream open) while the board in the browser shows a
    call made through the command line: how long the board took, and how many phones were
    told their new place, how soon."""
    n = int(os.environ["CROWD"])
    driver.get(queue_page("board") + "#token=" + os.environ["BOARD_TOKEN"])
    if driver.find_elements(By.ID, "replace"):
        answer_replace(driver, "replace-token")
    wait(driver, 10, lambda d: text(d, "connection") == "live", "the board before the crowd")
    phones = [Follower(i) for i in range(n)]
    for p in phones:
        p.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(p.events or p.status not in (None, 200) for p in phones):
        time.sleep(0.1)
    out = {"following": sum(1 for p in phones if p.events),
           "refused": sorted({p.status for p in phones if p.status != 200}),
           "takes_retried": sum(p.retried for p in phones)}
    seen = [len(p.events) for p in phones]
    called = cli("call", QUEUE, "--desk", "8")
    after_call = time.monotonic()
    wait(driver, 10, lambda d: current(d).startswith(called), f"the board to show {called}")
    out["board_shown_after_ms"] = round((time.monotonic() - after_call) * 1000)
    time.sleep(3)
    told = [p.events[seen[i]][0] - after_call for i, p in enumerate(phones)
            if len(p.events) > seen[i]]
    out["told"] = len(told)
    out["told_within_ms"] = round(max(told) * 1000) if told else None
    def moved_up(p, before):
        was, now = p.events[before - 1][1].get("position"), p.events[-1][1].get("position")
        return isinstance(was, int) and now == was - 1

    out["moved_up"] = sum(1 for i, p in enumerate(phones) if len(p.events) > seen[i]
                          and moved_up(p, seen[i]))
    # The streams are cut under their readers (closing a connection another thread reads
    # would wait for that read's lock), and the readers end.
    for p in phones:
        if p.sock is not None:
            try:
                p.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    for p in phones:
        p.join(10)
    return out


def main():
    # A run stuck anywhere ends with every thread's stack on stderr, not a silent hang.
    faulthandler.dump_traceback_later(900, exit=True)
    driver = browser()
    result = {"console_errors": []}
    try:
        result["kiosk"] = kiosk(driver)
        result["console_errors"] += result["kiosk"].pop("console_errors")
        result["board"] = board(driver, result["console_errors"])
        result["console_errors"] += console_errors(driver)
        for page in (overview, edges, planted):
            result[page.__name__] = page(driver)
            result["console_errors"] += console_errors(driver)
        result["qr"] = {page: read_qr(driver, page, token) for page, token in
                        (("kiosk", "KIOSK_TOKEN"), ("board", "BOARD_TOKEN"))}
        result["phone"] = phone(driver)
        # The 429 of the fourth take, reported by the browser itself.
        result["console_errors"] += console_errors(driver, (
            f"{QUEUE}/take - Failed to load resource: the server responded with a status of 429",))
        result["crowd"] = crowd(driver)
        result["console_errors"] += console_errors(driver)
    finally:
        driver.quit()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
