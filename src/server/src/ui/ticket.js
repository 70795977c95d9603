"use strict";
// The ticket page (/ui/queues/{name}/ticket#token=…), opened on a person's own phone from
// the queue's link or QR code: take a ticket, then keep the page — it follows the ticket
// (how many are before it, the estimated wait), and calls its holder when a desk calls it
// (the desk large, the page's title, a chime and speech when sound is on, a vibration where
// the browser allows).
//
// The link's token is public (it may only take and follow tickets of this queue), so the page
// keeps it in localStorage beside the ticket, and a link with another token simply replaces
// it. What the page keeps per queue, in localStorage: the token, the phone's id (16 random
// hex digits), the request id of a take whose answer never came, and the ticket (its serial,
// label, request id, the token it was taken with, the queue's incarnation, and whether its
// call was shown). Reloading or reopening the page follows the same ticket; a take whose
// answer never came is sent again with the same request id (`PHONE.TAKE`), so the service
// answers the ticket it took instead of taking another. Giving the ticket up sends that
// request id: only this phone knows it.
//
// The ticket is followed through GET /ui/queues/{name}/tickets/{serial}/events (server-sent
// events read with fetch, which sends the token as a header), read again when it ends; when
// the service has too many streams open, the page looks every few seconds instead.

(() => {
  const name = Dispenser.queueName();
  const STORE = "dispenser.ticket." + name;
  /** A kept ticket older than this is not followed again (request ids last 24 hours). */
  const KEEP_MS = 20 * 3600 * 1000;
  /** Automatic attempts of a take whose answer never came, before the page asks for a tap. */
  const ATTEMPTS = 3;
  /** While streams are refused: how often to look, and for how long before trying again. */
  const LOOK_EVERY_MS = 5000;
  const LOOK_FOR_MS = 30000;

  const $ = (id) => document.getElementById(id);
  const takeButton = $("take");
  const sound = $("sound");
  let memory = {};
  /** Goes up whenever the ticket followed changes: the loops of the last one stop. */
  let generation = 0;
  let busy = false;

  function load() {
    try {
      const text = localStorage.getItem(STORE);
      return text ? JSON.parse(text) : {};
    } catch (_) {
      return memory;
    }
  }

  function save() {
    memory = saved;
    try {
      localStorage.setItem(STORE, JSON.stringify(saved));
    } catch (_) {
      // Storage refused (private mode): kept for this page only.
    }
  }

  function hex(bytes) {
    const b = new Uint8Array(bytes);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  const saved = load();
  const offered = Dispenser.takeFragmentToken();
  if (offered) saved.token = offered;
  if (!saved.phone) saved.phone = hex(8);
  save();

  Dispenser.text("queue-name", name);

  function message(text) {
    Dispenser.text("message", text);
  }

  function connection(text) {
    Dispenser.text("connection", text);
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  function clock(at) {
    const t = new Date(at);
    return isNaN(t) ? "" : t.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }

  function showTake() {
    $("mine").hidden = true;
    $("take-view").hidden = false;
    document.title = "Take a ticket — " + name;
  }

  function showMine() {
    $("take-view").hidden = true;
    $("mine").hidden = false;
    $("ticket").textContent = saved.ticket.label;
    $("give-up").hidden = false;
    $("again").hidden = true;
    $("confirm").hidden = true;
  }

  /** Whether the outcome of a failed take is unknown (it may have taken a ticket). */
  function unknownOutcome(e) {
    return e.status === 0 || e.status === 408 || e.status >= 500;
  }

  async function takeOnce(key) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Dispenser.api("POST", Dispenser.queuePath(name, "/take"), {
          token: saved.token,
          headers: { "Idempotency-Key": key },
        });
      } catch (e) {
        if (attempt >= ATTEMPTS || !unknownOutcome(e)) throw e;
        await sleep(400 * attempt);
      }
    }
  }

  /** Takes a ticket (`tapped`: from a tap, which also lets sound play). */
  async function take(tapped) {
    if (busy) return;
    busy = true;
    takeButton.disabled = true;
    if (tapped) setSound(true);
    if (!saved.pending) {
      saved.pending = saved.phone + "." + hex(8);
      save();
    }
    try {
      const t = await takeOnce(saved.pending);
      saved.ticket = {
        serial: String(t.serial),
        label: Dispenser.ticketText(t),
        key: saved.pending,
        token: saved.token,
        takenAt: Date.now(),
        incarnation: null,
        calledAt: null,
        gaveUp: false,
      };
      saved.pending = null;
      save();
      message("");
      showMine();
      // Shown from the take's answer until the first view comes.
      show({
        state: "waiting",
        position: t.position,
        estimated_wait_seconds: t.estimated_wait_seconds,
        now_serving_label: null,
      });
      follow();
    } catch (e) {
      if (!unknownOutcome(e)) {
        saved.pending = null;
        save();
      }
      if (e.status === 401) {
        message("This link is no longer valid: scan the queue's QR code again.");
      } else if (e.code === "queue_full") {
        message("The queue is full right now. Please try again in a moment.");
      } else if (e.code === "no_such_queue") {
        message("There is no queue " + JSON.stringify(name) + ".");
      } else if (e.status === 0) {
        message("No connection. Tap again once you are online — you will not get two tickets.");
      } else if (unknownOutcome(e)) {
        message("No ticket yet: the service is busy (" + e.message + "). Tap again — you will not get two tickets.");
      } else {
        message("No ticket: " + e.message);
      }
      showTake();
    } finally {
      busy = false;
      takeButton.disabled = false;
    }
  }

  /** The ticket's view came: shown; returns true once nothing more will change. */
  function show(v) {
    const t = saved.ticket;
    if (!t) return true;
    if (v.error) {
      connection(v.error.message);
      return false;
    }
    if (t.incarnation && v.incarnation !== t.incarnation) {
      return over("This queue was started again: your ticket no longer exists.", "Ticket gone");
    }
    if (!t.incarnation && v.incarnation) {
      t.incarnation = v.incarnation;
      save();
    }
    if (v.incarnation) {
      $("serving").textContent = v.now_serving_label
        ? "Now serving " + v.now_serving_label + "."
        : "Nobody has been called yet.";
    }
    const mine = $("mine");
    mine.classList.toggle("called", v.state === "called");
    const estimate = $("estimate");
    estimate.hidden = true;
    const desk = v.desk === null || v.desk === undefined || v.desk === "" ? null : String(v.desk);
    switch (v.state) {
      case "waiting": {
        const ahead = Number(v.position);
        Dispenser.text(
          "state",
          ahead <= 0 ? "You are next." : ahead === 1 ? "1 person before you." : ahead + " people before you."
        );
        const wait = Dispenser.waitText(v.estimated_wait_seconds);
        estimate.textContent = "Estimated wait: " + (wait || "not known yet") + ".";
        estimate.hidden = false;
        document.title = t.label + " · " + (ahead <= 0 ? "you are next" : ahead + " before you");
        return false;
      }
      case "called": {
        Dispenser.text("state", desk ? "It's your turn: desk " + desk : "It's your turn: please go to the desk");
        document.title = "▶ Your turn" + (desk ? ": desk " + desk : "") + " — " + t.label;
        $("give-up").hidden = true;
        $("confirm").hidden = true;
        if (t.calledAt !== v.called_at) {
          t.calledAt = v.called_at;
          save();
          alertCall(t, desk);
        }
        return false;
      }
      case "passed": {
        const where = (desk ? " to desk " + desk : "") + (v.called_at ? " at " + clock(v.called_at) : "");
        if (t.calledAt) {
          return over("You were called" + where + ".", "Called");
        }
        return over(
          "You missed your call: " + t.label + " was called" + where + " while this page was closed. Please ask at the desk.",
          "Missed"
        );
      }
      case "cancelled":
        return over(t.gaveUp ? "You gave up your ticket." : "Your ticket was cancelled.", "Cancelled");
      case "done":
        return over("Your ticket is no longer in the line.", "Done");
      default:
        return over("This queue was started again: your ticket no longer exists.", "Ticket gone");
    }
  }

  /** The ticket is past: says how, and offers a new one. */
  function over(text, title) {
    Dispenser.text("state", text);
    $("estimate").hidden = true;
    $("give-up").hidden = true;
    $("confirm").hidden = true;
    $("again").hidden = false;
    $("mine").classList.remove("called");
    document.title = title + " — " + saved.ticket.label;
    connection("");
    return true;
  }

  /** The call: spoken and chimed when sound is on, written for screen readers, vibrated. */
  function alertCall(t, desk) {
    Announcer.say("Your turn: ticket " + Announcer.speakable(t.label) + (desk ? ", desk " + desk : ""));
    if (typeof navigator.vibrate === "function") {
      try {
        navigator.vibrate([400, 200, 400, 200, 800]);
      } catch (_) {
        // Not allowed here.
      }
    }
    const mine = $("mine");
    mine.classList.remove("fresh");
    void mine.offsetWidth; // restart the animation
    mine.classList.add("fresh");
  }

  /** The ticket's view (or its stream, `events`: told the queue's incarnation once known). */
  function ticketPath(serial, events) {
    if (!events) return Dispenser.queuePath(name, "/tickets/" + serial);
    const known = saved.ticket && saved.ticket.incarnation;
    return (
      "/ui/queues/" + encodeURIComponent(name) + "/tickets/" + serial + "/events" +
      (known ? "?incarnation=" + encodeURIComponent(known) : "")
    );
  }

  /** Looks at the ticket every few seconds for a while; true once it is past. */
  async function look(gen, serial) {
    const until = Date.now() + LOOK_FOR_MS;
    while (gen === generation && Date.now() < until) {
      try {
        const v = await Dispenser.api("GET", ticketPath(serial, false), { token: saved.ticket.token });
        if (show(v)) return true;
      } catch (e) {
        connection(e.message + " — retrying…");
      }
      await sleep(LOOK_EVERY_MS);
    }
    return false;
  }

  /** Follows the kept ticket until it is past, or another one is followed. */
  async function follow() {
    const gen = ++generation;
    const serial = saved.ticket.serial;
    const current = () => gen === generation;
    while (current()) {
      let done = false;
      let wait = 1000;
      try {
        connection("connecting…");
        await Dispenser.readEvents(
          ticketPath(serial, true),
          (v) => {
            connection("live");
            done = show(v) || done;
          },
          current,
          saved.ticket.token
        );
        if (!done) connection("reconnecting…");
      } catch (e) {
        if (e.status === 401) {
          message("This link is no longer valid: scan the queue's QR code again.");
          connection("");
          return;
        }
        if (e.status === 404) {
          over("This queue no longer exists.", "Ticket gone");
          return;
        }
        if (e.status === 429 || e.status === 503) {
          connection("busy — looking every few seconds");
          done = await look(gen, serial);
          wait = 0;
        } else {
          connection((e.message || "no connection") + " — retrying…");
        }
      }
      if (done || !current()) return;
      await sleep(wait);
    }
  }

  function setSound(on) {
    Announcer.setSound(on);
    sound.setAttribute("aria-pressed", String(on));
    sound.textContent = on ? "Sound on" : "Sound off · tap to turn on";
    sound.classList.toggle("on", on);
  }

  async function giveUp() {
    const t = saved.ticket;
    $("confirm").hidden = true;
    try {
      await Dispenser.api("POST", Dispenser.queuePath(name, "/give-up"), {
        token: t.token,
        headers: { "Idempotency-Key": t.key },
      });
      t.gaveUp = true;
      save();
      message("");
      over("You gave up your ticket.", "Cancelled");
      generation++;
    } catch (e) {
      $("give-up").hidden = false;
      message("Not given up: " + e.message);
    }
  }

  takeButton.addEventListener("click", () => take(true));
  sound.addEventListener("click", () => setSound(!Announcer.isOn()));
  $("give-up").addEventListener("click", () => {
    $("give-up").hidden = true;
    $("confirm").hidden = false;
    $("give-up-no").focus();
  });
  $("give-up-no").addEventListener("click", () => {
    $("confirm").hidden = true;
    $("give-up").hidden = false;
  });
  $("give-up-yes").addEventListener("click", giveUp);
  $("again").addEventListener("click", () => {
    generation++;
    saved.ticket = null;
    save();
    message("");
    showTake();
  });

  if (!saved.token) {
    $("no-link").hidden = false;
  } else if (saved.ticket && Date.now() - saved.ticket.takenAt < KEEP_MS) {
    showMine();
    follow();
  } else {
    saved.ticket = null;
    save();
    showTake();
    // A take whose answer never came (the page closed or reloaded meanwhile): asked again
    // with its request id, which answers the ticket it took, if it took one.
    if (saved.pending) take(false);
  }
})();
