"use strict";
// The kiosk: one big "Take a ticket" button (POST /v1/queues/{name}/take) that shows the
// ticket (its label, "A-042", when the queue has a format), how many wait before it and the
// estimated wait, with a printable view (window.print(); the print stylesheet shows the
// ticket large, the queue, the date and time).
//
// One tap, one ticket: each tap sends a request id (`Idempotency-Key`, 32 random hex
// digits). The button is disabled while the request runs, and a request whose answer never
// came (no connection, a 5xx, a 429) is sent again with the same id — automatically a few
// times, then on the next tap — so the service answers the ticket it already took instead of
// taking another. Only an answer (a ticket, or a refusal such as "the queue is full") ends
// the id.

(() => {
  const name = Dispenser.queueName();
  const button = document.getElementById("take");
  const result = document.getElementById("result");
  /** Automatic attempts of one request before the kiosk asks for another tap. */
  const ATTEMPTS = 3;
  /** How long the ticket stays on screen (the next person should not see it for long). */
  const SHOWN_MS = 20000;
  let clearTimer = null;
  let busy = false;
  /** The request id of the tap whose answer never came; reused by the next tap. */
  let pendingKey = null;
  Dispenser.text("queue-name", name);
  document.title = "Take a ticket — " + name;

  function newKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  /** Whether the outcome of a failed request is unknown (it may have taken a ticket). */
  function unknownOutcome(e) {
    return e.status === 0 || e.status === 408 || e.status === 429 || e.status >= 500;
  }

  function show(t) {
    Dispenser.text("ticket", Dispenser.ticketText(t));
    Dispenser.text("ticket-queue", name);
    const ahead = typeof t.position === "number" ? t.position : t.waiting - 1;
    Dispenser.text(
      "ahead",
      ahead <= 0 ? "You are next." : ahead === 1 ? "1 person before you." : ahead + " people before you."
    );
    const estimate = document.getElementById("estimate");
    if ("estimated_wait_seconds" in t) {
      const wait = Dispenser.waitText(t.estimated_wait_seconds);
      estimate.textContent = wait ? "Estimated wait: " + wait + "." : "Estimated wait: not known yet.";
      estimate.hidden = false;
    } else {
      estimate.hidden = true;
    }
    const now = new Date();
    Dispenser.text(
      "taken-at",
      now.toLocaleDateString(undefined, { year: "numeric", month: "long", day: "numeric" }) +
        ", " +
        now.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })
    );
    Dispenser.text("message", "");
    result.hidden = false;
    result.classList.remove("fresh");
    void result.offsetWidth; // restart the animation
    result.classList.add("fresh");
    clearTimeout(clearTimer);
    clearTimer = setTimeout(() => {
      result.hidden = true;
    }, SHOWN_MS);
  }

  async function takeOnce(key) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await Dispenser.api("POST", Dispenser.queuePath(name, "/take"), {
          headers: { "Idempotency-Key": key },
        });
      } catch (e) {
        if (attempt >= ATTEMPTS || !unknownOutcome(e) || e.status === 429) throw e;
        await new Promise((resolve) => setTimeout(resolve, 400 * attempt));
      }
    }
  }

  async function take() {
    if (busy) return;
    busy = true;
    button.disabled = true;
    if (!pendingKey) pendingKey = newKey();
    try {
      const ticket = await takeOnce(pendingKey);
      pendingKey = null;
      show(ticket);
    } catch (e) {
      if (!unknownOutcome(e)) pendingKey = null;
      result.hidden = true;
      if (e.status === 401) {
        Dispenser.signIn("That token was not accepted.");
      } else if (e.code === "queue_full") {
        Dispenser.text("message", "The queue is full right now. Please wait a moment and try again.");
      } else if (e.code === "no_such_queue") {
        Dispenser.text("message", "There is no queue " + JSON.stringify(name) + ".");
      } else if (e.status === 0) {
        Dispenser.text(
          "message",
          "The ticket machine cannot reach the service. Tap again to try once more — you will not get two tickets."
        );
      } else if (unknownOutcome(e)) {
        Dispenser.text(
          "message",
          "No ticket yet: the service is busy (" + e.message + "). Tap again — you will not get two tickets."
        );
      } else {
        Dispenser.text("message", "No ticket: " + e.message);
      }
    } finally {
      busy = false;
      button.disabled = false;
    }
  }

  button.addEventListener("click", take);
  document.getElementById("print").addEventListener("click", () => {
    clearTimeout(clearTimer); // not while the print dialog is open
    window.print();
    clearTimer = setTimeout(() => {
      result.hidden = true;
    }, SHOWN_MS);
  });
  Dispenser.init(() => {
    document.getElementById("content").hidden = false;
    button.focus();
    Dispenser.showTicketLink(name, document.getElementById("ticket-link"));
  });
})();
