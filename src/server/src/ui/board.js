"use strict";
// The board of one queue (/ui/queues/{name}/board) or of several (/ui/board?queues=a,b): the
// current call large ("A-042 → Desk 3"), the last calls below it with their desks, how many
// wait and the estimated wait — live. Each queue's event stream (GET
// /ui/queues/{name}/events, server-sent events, each event the queue's status) is read with
// fetch, which sends the token as a header (EventSource cannot), and read again when it ends.
//
// A call or recall shows as a new first entry of the status's `recent_calls`; each new entry
// is announced once, oldest first (see announce.js). A service whose status has no
// `recent_calls` yet still shows and announces a change of `now_serving` (without a desk).

(() => {
  /** The most queues one board follows (each is one stream, under the token's cap). */
  const MAX_QUEUES = 8;
  /** Entries under the current call. */
  const RECENT_SHOWN = 6;
  /** Calls kept per queue when the status has no `recent_calls`. */
  const LOCAL_KEEP = 10;

  const { el } = Dispenser;
  const names = queueNames();
  const several = names.length > 1;
  const queues = new Map(
    names.map((name) => [
      name,
      { status: null, started: false, seen: new Set(), local: [], lastServing: undefined, live: "connecting…" },
    ])
  );
  /** The call shown large (its queue and key), null before the first. */
  let shownKey = null;
  /** Goes up when the page signs in again: the streams of the last sign-in stop. */
  let generation = 0;

  function queueNames() {
    if (Dispenser.pagePath().replace(/\/+$/, "") === "/ui/board") {
      // `?queues=a,b`, or `?queue=a&queue=b` for names with a comma.
      const params = new URLSearchParams(location.search);
      const given = (params.get("queues") || "").split(",").concat(params.getAll("queue"));
      const unique = [];
      for (const part of given) {
        const name = part.trim();
        if (name && !unique.includes(name)) unique.push(name);
      }
      return unique.slice(0, MAX_QUEUES);
    }
    return [Dispenser.queueName()];
  }

  const title = names.join(" · ");
  Dispenser.text("queue-name", title || "No queue given: add ?queues=a,b to the address");
  document.title = "Now serving — " + title;

  function key(call) {
    return [call.ticket, call.desk, call.at, call.recall].join("|");
  }

  /** How a call reads on the board ("A-042"; on a board of several queues, an unlabelled
   * ticket says its queue: "lobby 42"). */
  function ticketOf(call) {
    const shown = Dispenser.ticketText(call);
    const labelled = typeof call.label === "string" && call.label !== "" && call.label !== String(call.ticket);
    return several && !labelled ? call.queue + " " + shown : shown;
  }

  /** The announcement of a call: "Ticket A 42, desk 3" ("…, again" for a recall). */
  function announcement(call) {
    let text = "Ticket " + Announcer.speakable(ticketOf(call));
    if (call.desk !== null && call.desk !== undefined && call.desk !== "") text += ", desk " + call.desk;
    if (call.recall) text += ", again";
    return text;
  }

  /** The element, with its whole text as its title (a clipped label can still be read). */
  function titled(node) {
    node.title = node.textContent;
    return node;
  }

  function deskText(call) {
    return call.desk === null || call.desk === undefined || call.desk === "" ? "" : "Desk " + call.desk;
  }

  /** The calls of every queue, newest first. */
  function allCalls() {
    const calls = [];
    for (const [name, q] of queues) {
      for (const call of q.calls || []) calls.push(Object.assign({ queue: name }, call));
    }
    const time = (c) => {
      const t = Date.parse(c.at);
      return isNaN(t) ? 0 : t;
    };
    // Stable: calls of one queue keep their order when their times tie.
    return calls.map((c, i) => [c, i]).sort((a, b) => time(b[0]) - time(a[0]) || a[1] - b[1]).map((p) => p[0]);
  }

  function render() {
    const calls = allCalls();
    const current = calls[0];
    const serving = document.getElementById("serving");
    const shown = current ? ticketOf(current) : "–";
    const desk = current ? deskText(current) : "";
    const currentKey = current ? current.queue + "|" + key(current) : "";
    if (currentKey !== shownKey) {
      serving.textContent = shown;
      serving.title = shown;
      Dispenser.text("desk", desk);
      document.getElementById("desk").title = desk;
      if (shownKey !== null && current) {
        const call = serving.parentElement;
        call.classList.remove("fresh");
        void call.offsetWidth; // restart the animation
        call.classList.add("fresh");
      }
      shownKey = currentKey;
    }
    Dispenser.text(
      "current-queue",
      current ? [several ? current.queue : "", current.recall ? "called again" : ""].filter(Boolean).join(" · ") : ""
    );
    const recent = calls.slice(1, 1 + RECENT_SHOWN).map((c) =>
      el(
        "li",
        c.recall ? "recall" : "",
        titled(el("span", "ticket", ticketOf(c))),
        el("span", "desk", deskText(c) + (c.recall ? " (again)" : ""))
      )
    );
    if (recent.length === 0) recent.push(el("li", "none", "–"));
    document.getElementById("recent").replaceChildren(...recent);

    const waits = [];
    for (const [name, q] of queues) {
      const s = q.status;
      if (!s) continue;
      const row = el("p", "wait-row");
      if (several) row.append(el("span", "wait-queue", name));
      row.append(el("span", "wait-count", s.waiting === 1 ? "1 waiting" : s.waiting + " waiting"));
      if ("estimated_wait_seconds" in s) {
        const wait = Dispenser.waitText(s.estimated_wait_seconds);
        row.append(el("span", "wait-time", "estimated wait: " + (wait || "not known yet")));
      }
      if (s.next_ticket === null) row.append(el("span", "wait-full", "the queue is full"));
      waits.push(row);
    }
    document.getElementById("waits").replaceChildren(...waits);

    const states = [...queues.entries()].filter(([, q]) => q.live !== "live");
    Dispenser.text(
      "connection",
      states.length === 0 ? "live" : states.map(([n, q]) => (several ? n + ": " : "") + q.live).join(" · ")
    );
  }

  /** A new status of queue `name`: shown, and its new calls announced (oldest first). */
  function show(name, status) {
    const q = queues.get(name);
    if (status.error) {
      q.live = status.error.message;
      render();
      return;
    }
    const fresh = [];
    if (Array.isArray(status.recent_calls)) {
      const calls = status.recent_calls;
      const keys = calls.map(key);
      if (q.started) {
        for (let i = calls.length - 1; i >= 0; i--) {
          if (!q.seen.has(keys[i])) fresh.push(Object.assign({ queue: name }, calls[i]));
        }
      }
      q.seen = new Set(keys);
      q.calls = calls;
    } else {
      // No recent_calls (an older service): a change of now_serving is a call.
      const now = status.now_serving;
      if (now !== null && now !== undefined && now !== q.lastServing) {
        const call = {
          ticket: now,
          label: status.now_serving_label === undefined ? null : status.now_serving_label,
          desk: null,
          at: q.started ? new Date().toISOString() : status.updated_at,
          recall: false,
        };
        q.local.unshift(call);
        q.local.length = Math.min(q.local.length, LOCAL_KEEP);
        if (q.started) fresh.push(Object.assign({ queue: name }, call));
      }
      q.lastServing = now;
      q.calls = q.local;
    }
    q.started = true;
    q.status = status;
    q.live = "live";
    document.getElementById("content").hidden = false;
    render();
    for (const call of fresh) Announcer.say(announcement(call));
  }

  /** Reads one stream of `name` to its end, calling `show` for every status event. */
  function follow(name, gen) {
    return Dispenser.readEvents(
      "/ui/queues/" + encodeURIComponent(name) + "/events",
      (status) => show(name, status),
      () => gen === generation
    );
  }

  async function run(name, gen) {
    const q = queues.get(name);
    while (gen === generation) {
      // After a stream that ended, read again in a second; when the service has too many
      // streams open (429, 503 too_many_streams), wait longer.
      let wait = 1000;
      try {
        await follow(name, gen);
        q.live = "reconnecting…";
      } catch (e) {
        if (e.status === 401) {
          if (gen === generation) {
            generation++;
            Dispenser.signIn("That token was not accepted.");
          }
          return;
        }
        if (e.status === 429 || e.status === 503) wait = 10000;
        q.live = (e.message || "no connection") + " — retrying…";
      }
      render();
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  const sound = document.getElementById("sound");
  sound.addEventListener("click", () => {
    const on = !Announcer.isOn();
    Announcer.setSound(on);
    sound.setAttribute("aria-pressed", String(on));
    sound.textContent = on ? "Sound on" : "Sound off · tap to turn on";
    sound.classList.toggle("on", on);
  });

  Dispenser.init(() => {
    generation++;
    for (const name of names) run(name, generation);
    // A board of one queue shows its ticket link, when it has one.
    if (!several && names.length === 1) {
      const box = document.getElementById("ticket-link");
      Dispenser.showTicketLink(names[0], box).then(() => {
        document.getElementById("content").classList.toggle("with-link", !box.hidden);
      });
    }
  });
})();
