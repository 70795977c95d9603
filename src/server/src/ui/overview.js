"use strict";
// The operators' page, from GET /v1/overview every few seconds (one page of sequences:
// `limit`, `after`, `next`): for each queue its desks and what each serves, how many wait,
// cancelled, today's taken and served, the average and p90 wait, buttons to call next,
// recall and cancel from a desk (a token with `call`), and a chart of waiting per hour; every
// sequence (share used, left, rate, forecast, numbers held by the service's block clients)
// with a chart of the numbers issued per hour for one of them (GET
// /v1/sequences/{name}/hourly, asked only for the sequence shown); the gap-free sequences
// with their voids. What the service does not answer (an older one) is left out.

(() => {
  const REFRESH_MS = 3000;
  /** Sequences on one page. */
  const PAGE = 50;
  /** The sequence chart is read again every this many refreshes. */
  const CHART_EVERY = 5;
  const { el } = Dispenser;
  let timer = null;
  /** The `after` of each page before the one shown (for "Previous"), and the shown one's. */
  const pages = [];
  let after = null;
  let refreshes = 0;
  /** Whether the service answers GET /v1/sequences/{name}/hourly (false after a 404 route). */
  let hourlyServed = true;
  let chartShown = null;

  function fmtNumber(n) {
    if (n === null || n === undefined) return "–";
    // Integers past 2^53 arrive as strings of their exact digits (Dispenser.parseJson).
    if (typeof n === "string" && /^-?[0-9]+$/.test(n)) return BigInt(n).toLocaleString("en-US");
    return Number(n).toLocaleString("en-US");
  }

  /** `text` on one line, cut with an ellipsis when long (a 200-character label), whole in its title. */
  function clipped(text) {
    const span = el("span", "clip", text);
    span.title = text;
    return span;
  }

  function fmtShare(f) {
    return (100 * f).toFixed(f < 0.1 ? 2 : 1) + " %";
  }

  function fmtRate(perSec) {
    if (perSec === null || perSec === undefined) return "–";
    if (perSec >= 1) return perSec.toFixed(1) + " /s";
    const perDay = perSec * 86400;
    return perDay >= 1 ? perDay.toFixed(0) + " /day" : perDay.toFixed(2) + " /day";
  }

  function fmtDuration(secs) {
    if (secs >= 1000 * 365 * 86400) return "over 1000 y";
    const units = [
      ["y", 365 * 86400],
      ["d", 86400],
      ["h", 3600],
      ["min", 60],
    ];
    for (const [unit, size] of units) {
      if (secs >= size) return Math.floor(secs / size) + " " + unit;
    }
    return "under a minute";
  }

  function forecast(s) {
    const u = s.usage;
    if (s.cycle) {
      return u.wraps_per_day === null ? "cyclic" : "wraps " + u.wraps_per_day.toFixed(2) + "×/day";
    }
    if (s.next === null) return "exhausted";
    return u.exhausted_in_secs === null ? "–" : "runs out in " + fmtDuration(u.exhausted_in_secs);
  }

  /** A row that says an entry cannot be read, in its place. */
  function unreadable(entry, columns) {
    const cell = el("td", "error", entry.error.code + ": " + entry.error.message);
    cell.colSpan = columns - 1;
    return el("tr", "", el("td", "name", entry.name), cell);
  }

  function fill(id, rows, columns, empty) {
    const body = document.querySelector("#" + id + " tbody");
    if (rows.length === 0) {
      const cell = el("td", "muted", empty);
      cell.colSpan = columns;
      rows = [el("tr", "", cell)];
    }
    body.replaceChildren(...rows);
  }

  function sequenceRow(s) {
    if (s.error) return unreadable(s, 7);
    const used = s.usage.fraction_used;
    const bar = el("span", "bar", el("span", "fill"));
    bar.firstChild.style.width = Math.min(100, 100 * used).toFixed(1) + "%";
    if (used >= 0.95) bar.classList.add("critical");
    else if (used >= 0.8) bar.classList.add("warning");
    return el(
      "tr",
      "",
      el("td", "name", s.name),
      el("td", "num", fmtNumber(s.next)),
      el("td", "num", bar, " " + fmtShare(used)),
      el("td", "num", fmtNumber(s.usage.remaining)),
      el("td", "num", fmtRate(s.usage.rate_per_sec)),
      el("td", "", forecast(s)),
      el("td", "num", fmtNumber(s.held))
    );
  }

  function gaplessRow(g) {
    if (g.error) return unreadable(g, 5);
    const lease = g.lease
      ? g.lease.number + (g.lease_expired ? " (lease ran out)" : " held until " + g.lease.expires)
      : "–";
    const voided = g.voided.length
      ? el("ul", "voids", ...g.voided.map((v) => el("li", "", v.number + ": " + v.reason)))
      : "none";
    return el(
      "tr",
      "",
      el("td", "name", g.name),
      el("td", "", g.collection + "." + g.field),
      el("td", "num", fmtNumber(g.next)),
      el("td", "", lease),
      el("td", "", voided)
    );
  }

  /** The queues' cards by name: built once, updated in place (inputs keep their text). */
  const cards = new Map();

  function button(label, className, onClick) {
    const b = el("button", className, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function storedDesk(name) {
    try {
      return localStorage.getItem("dispenser.desk." + name) || "1";
    } catch (_) {
      return "1";
    }
  }

  function storeDesk(name, desk) {
    try {
      localStorage.setItem("dispenser.desk." + name, desk);
    } catch (_) {
      // Storage refused: the field keeps it for this page.
    }
  }

  /** What went wrong with `op` ("call", "recall", "cancel"), in plain words. */
  function actionError(op, e, card) {
    switch (e.code) {
      case "nobody_waiting":
        return "Nobody is waiting.";
      case "no_ticket_shown":
        return "That desk shows no ticket to recall.";
      case "ticket_not_waiting":
        return op === "recall"
          ? "That desk shows another ticket now; look again."
          : "That ticket is not waiting (called or cancelled already).";
      case "not_found":
        return "This service cannot " + op + " yet (it is older than this page).";
      default:
        if (e.status === 403) return "This token may not " + op + " on " + card.name + ": " + e.message;
        return e.message;
    }
  }

  /** Posts `op` with `body` (an object, or a JSON text as it is sent). */
  async function act(card, op, body, done) {
    card.result.classList.remove("error");
    card.result.textContent = "…";
    try {
      const payload = typeof body === "string" ? { json: body } : { body };
      const answer = await Dispenser.api("POST", Dispenser.queuePath(card.name, "/" + op), payload);
      card.result.textContent = done(answer);
    } catch (e) {
      if (e.status === 401) {
        Dispenser.signIn("That token was not accepted.");
        return;
      }
      card.result.classList.add("error");
      card.result.textContent = actionError(op, e, card);
    }
    refresh();
  }

  /** Calls the next ticket at `desk` ("": the desk without a name). */
  function callFrom(card, desk) {
    const body = desk ? { desk } : {};
    act(card, "call", body, (a) => {
      const t = Dispenser.ticketText(a);
      return a.desk ? "Called " + t + " to desk " + a.desk + "." : "Called " + t + ".";
    });
  }

  /**
   * A ticket's identity as a JSON text: its serial (exact digits, never a rounded JS Number)
   * and the queue's incarnation this page read it from, which the service checks in the same
   * write — so an act meant for the ticket this page showed never lands on another one that
   * took its number or the desk's place since.
   */
  function identity(card, serial) {
    const incarnation = card.status && card.status.incarnation;
    return '"serial":' + String(serial) + (incarnation ? ',"incarnation":' + JSON.stringify(incarnation) : "");
  }

  /** Recalls at `desk` ("": the desk without a name): the ticket this page shows there. */
  function recallFrom(card, desk) {
    const desks = (card.status && card.status.desks) || [];
    const shown = desks.find((d) => (d.desk || "") === desk);
    const fields = [];
    if (desk) fields.push('"desk":' + JSON.stringify(desk));
    if (shown) fields.push(identity(card, shown.serial));
    act(card, "recall", "{" + fields.join(",") + "}", (a) =>
      desk ? "Recalled " + Dispenser.ticketText(a) + " to desk " + desk + "." : "Recalled " + Dispenser.ticketText(a) + "."
    );
  }

  function cancelTicket(card) {
    const given = card.ticketInput.value.trim();
    // The ticket's digits, never a JS Number: a ticket past 2^53 would be rounded.
    const number = /^-?[0-9]+$/.test(given) ? given : null;
    const listed = (card.status && card.status.waiting_list) || [];
    // A ticket this page lists is named by its identity (its serial); a number it does not
    // list is looked up by the service, once.
    const found = listed.find((w) => w.label === given || (number !== null && String(w.ticket) === number));
    let body = null;
    if (found) body = "{" + identity(card, found.serial) + "}";
    else if (number !== null) body = '{"ticket":' + number + "}";
    if (body === null) {
      card.result.classList.add("error");
      card.result.textContent = "Give the number (or label) of a waiting ticket to cancel.";
      return;
    }
    act(card, "cancel", body, (a) => {
      card.ticketInput.value = "";
      return "Cancelled " + Dispenser.ticketText(a) + ".";
    });
  }

  function queueCard(name) {
    const card = { name, figures: {}, desksKey: null, chartKey: null, status: null };
    const base = Dispenser.base + "/ui/queues/" + encodeURIComponent(name);
    const dl = el("dl", "figures");
    for (const [key, label] of [
      ["serving", "now serving"],
      ["waiting", "waiting"],
      ["cancelled", "cancelled"],
      ["taken_today", "taken today"],
      ["served_today", "served today"],
      ["average", "average wait"],
      ["p90", "p90 wait"],
    ]) {
      const value = el("dd", "", "–");
      card.figures[key] = value;
      dl.append(el("div", "figure " + key, el("dt", "", label), value));
    }
    card.desks = el("tbody");
    const desks = el(
      "table",
      "desks",
      el("thead", "", el("tr", "", el("th", "", "desk"), el("th", "", "serving"), el("th", "", "since"), el("th", "", ""))),
      card.desks
    );
    const deskInput = el("input", "desk-input");
    deskInput.maxLength = 16;
    deskInput.size = 6;
    deskInput.value = storedDesk(name);
    deskInput.addEventListener("change", () => storeDesk(name, deskInput.value.trim()));
    card.deskInput = deskInput;
    const ticketInput = el("input", "ticket-input");
    ticketInput.size = 7;
    ticketInput.placeholder = "ticket";
    card.ticketInput = ticketInput;
    const desk = () => deskInput.value.trim();
    const controls = el(
      "div",
      "controls",
      el("label", "", "Desk ", deskInput),
      button("Call next", "call", () => callFrom(card, desk())),
      button("Recall", "recall", () => recallFrom(card, desk())),
      el("span", "sep", ""),
      el("label", "", "Ticket ", ticketInput),
      button("Cancel ticket", "cancel", () => cancelTicket(card))
    );
    card.result = el("p", "action-result", "");
    card.result.setAttribute("role", "status");
    card.next = el("p", "next-up muted", "");
    card.chart = el("div", "chart-svg");
    card.chartBox = el("figure", "chart", el("figcaption", "", "Waiting per hour (last 24 h)"), card.chart);
    card.chartBox.hidden = true;
    card.error = el("p", "error", "");
    const kiosk = el("a", "", "kiosk");
    kiosk.href = base + "/kiosk";
    const board = el("a", "", "board");
    board.href = base + "/board";
    card.root = el(
      "article",
      "queue-card",
      el("header", "", el("h3", "name", name), el("span", "links", kiosk, " · ", board)),
      card.error,
      dl,
      desks,
      card.next,
      controls,
      card.result,
      card.chartBox
    );
    card.root.dataset.queue = name;
    return card;
  }

  /** A wait, short: "< 1 min", "4 min", "1 h 5 min"; "–" when unknown. */
  function fmtWait(seconds) {
    if (typeof seconds !== "number" || !isFinite(seconds) || seconds < 0) return "–";
    if (seconds < 60) return "< 1 min";
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return minutes + " min";
    return Math.floor(minutes / 60) + " h" + (minutes % 60 ? " " + (minutes % 60) + " min" : "");
  }

  function fmtTime(at) {
    const t = Date.parse(at);
    return isNaN(t) ? "" : new Date(t).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  }

  /** A desk's name ("" for the desk without one). */
  function deskOf(d) {
    return d.desk === null || d.desk === undefined ? "" : String(d.desk);
  }

  function updateCard(card, q) {
    card.status = q;
    if (q.error) {
      card.error.textContent = q.error.code + ": " + q.error.message;
      return;
    }
    card.error.textContent = "";
    const f = card.figures;
    f.serving.textContent = q.now_serving === null ? "–" : Dispenser.ticketText(q, "now_serving_label", "now_serving");
    f.waiting.textContent = fmtNumber(q.waiting) + " of " + fmtNumber(q.capacity) + (q.full ? " (full)" : "");
    f.cancelled.textContent = fmtNumber(q.cancelled);
    f.taken_today.textContent = fmtNumber(q.taken_today);
    f.served_today.textContent = fmtNumber(q.served_today);
    f.average.textContent = fmtWait(q.average_wait_seconds);
    f.p90.textContent = fmtWait(q.p90_wait_seconds);

    const desksKey = JSON.stringify(q.desks === undefined ? null : q.desks);
    if (desksKey !== card.desksKey) {
      card.desksKey = desksKey;
      let rows;
      if (!Array.isArray(q.desks) || q.desks.length === 0) {
        const cell = el("td", "muted", Array.isArray(q.desks) ? "no desk has called yet" : "this service does not report desks");
        cell.colSpan = 4;
        rows = [el("tr", "", cell)];
      } else {
        rows = q.desks.map((d) =>
          el(
            "tr",
            "",
            el("td", "name", deskOf(d) || "(no name)"),
            el("td", "num", clipped(d.ticket === null || d.ticket === undefined ? "–" : Dispenser.ticketText(d))),
            el("td", "num", fmtTime(d.at)),
            el(
              "td",
              "actions",
              el(
                "span",
                "row-actions",
                button("Call next", "call", () => callFrom(card, deskOf(d))),
                button("Recall", "recall", () => recallFrom(card, deskOf(d)))
              )
            )
          )
        );
      }
      card.desks.replaceChildren(...rows);
    }
    const waitingList = Array.isArray(q.waiting_list) ? q.waiting_list : null;
    card.next.textContent =
      waitingList && waitingList.length
        ? "Next up: " +
          waitingList
            .slice(0, 10)
            .map((w) => Dispenser.ticketText(w))
            .join(", ") +
          (q.waiting > 10 ? ", …" : "")
        : "";

    const hourly = Array.isArray(q.hourly) ? q.hourly : null;
    card.chartBox.hidden = hourly === null;
    if (hourly) {
      const key = JSON.stringify(hourly) + new Date().getHours();
      if (key !== card.chartKey) {
        card.chartKey = key;
        const points = Chart.lastDay(hourly, (e) => e.waiting, true);
        card.chart.replaceChildren(Chart.bars(points, "waiting", false));
      }
    }
  }

  function showQueues(list, truncated) {
    const names = list.map((q) => q.name);
    for (const name of [...cards.keys()]) {
      if (!names.includes(name)) {
        cards.get(name).root.remove();
        cards.delete(name);
      }
    }
    for (const q of list) {
      if (!cards.has(q.name)) cards.set(q.name, queueCard(q.name));
      updateCard(cards.get(q.name), q);
    }
    const box = document.getElementById("queue-cards");
    const shown = [...box.children].map((c) => c.dataset.queue);
    if (shown.join("\n") !== names.join("\n")) {
      box.replaceChildren(...names.map((n) => cards.get(n).root));
    }
    if (names.length === 0) box.replaceChildren(el("p", "muted", "no queues"));
    // One board for the queues shown (the board follows at most 8).
    const all = document.getElementById("all-boards");
    all.hidden = names.length < 2;
    const query = new URLSearchParams();
    names.slice(0, 8).forEach((n) => query.append("queue", n));
    all.href = Dispenser.base + "/ui/board?" + query.toString();
    document.getElementById("queues-more").hidden = !truncated;
  }

  /** The sequence chart: the sequences of the page to choose from, the chosen one's hours. */
  async function showSequenceChart(sequences, reload) {
    const box = document.getElementById("sequence-chart");
    if (!hourlyServed) return;
    const names = sequences.filter((s) => !s.error).map((s) => s.name);
    const select = document.getElementById("chart-sequence");
    if ([...select.options].map((o) => o.value).join("\n") !== names.join("\n")) {
      select.replaceChildren(
        ...names.map((n) => {
          const o = el("option", "", n);
          o.value = n;
          return o;
        })
      );
    }
    if (names.length === 0) {
      box.hidden = true;
      return;
    }
    if (!names.includes(chartShown)) {
      chartShown = names[0];
      reload = true;
    }
    select.value = chartShown;
    if (!reload) return;
    try {
      const h = await Dispenser.api("GET", "/v1/sequences/" + encodeURIComponent(chartShown) + "/hourly");
      const points = Chart.lastDay(h.hours, (e) => e.issued, false);
      document.getElementById("sequence-chart-svg").replaceChildren(Chart.bars(points, "issued", true));
      box.hidden = false;
    } catch (e) {
      if (e.status === 404 && e.code !== "no_such_sequence") hourlyServed = false; // an older service
      box.hidden = true;
    }
  }

  function showPager(o) {
    const pager = document.getElementById("pager");
    const paged = "next" in o;
    pager.hidden = !paged || (o.next === null && pages.length === 0);
    document.getElementById("prev-page").disabled = pages.length === 0;
    document.getElementById("next-page").disabled = !o.next;
    document.getElementById("next-page").dataset.after = o.next || "";
    Dispenser.text("page-label", "page " + (pages.length + 1));
  }

  let inFlight = false;
  let again = false;

  async function refresh() {
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    clearTimeout(timer);
    try {
      let path = "/v1/overview?limit=" + PAGE;
      if (after !== null) path += "&after=" + encodeURIComponent(after);
      const o = await Dispenser.api("GET", path);
      fill("sequences", o.sequences.map(sequenceRow), 7, "no sequences");
      showPager(o);
      const gapless = o.gapless.map(gaplessRow);
      if (o.gapless_truncated) {
        const cell = el("td", "muted", "… more gap-free sequences than shown");
        cell.colSpan = 5;
        gapless.push(el("tr", "", cell));
      }
      fill("gapless", gapless, 5, "no gap-free sequences");
      showQueues(o.queues, o.queues_truncated);
      Dispenser.text("message", "");
      Dispenser.text("updated", "updated " + new Date().toLocaleTimeString());
      document.getElementById("content").hidden = false;
      showSequenceChart(o.sequences, refreshes % CHART_EVERY === 0);
      refreshes++;
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        inFlight = false;
        Dispenser.signIn(e.status === 401 ? "That token was not accepted." : e.message);
        return;
      }
      Dispenser.text("message", e.message + " (retrying)");
    }
    inFlight = false;
    if (again) {
      again = false;
      refresh();
      return;
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }

  document.getElementById("next-page").addEventListener("click", (event) => {
    const next = event.currentTarget.dataset.after;
    if (!next) return;
    pages.push(after);
    after = next;
    refreshes = 0;
    refresh();
  });
  document.getElementById("prev-page").addEventListener("click", () => {
    if (pages.length === 0) return;
    after = pages.pop();
    refreshes = 0;
    refresh();
  });
  document.getElementById("chart-sequence").addEventListener("change", (event) => {
    chartShown = event.currentTarget.value;
    refreshes = 0;
    refresh();
  });
  document.getElementById("signout").addEventListener("click", () => {
    clearTimeout(timer);
    Dispenser.signIn("");
  });
  Dispenser.init(refresh);
})();
