"use strict";
// The operators' page: every sequence (share used, left, rate, forecast, numbers held by
// the service's block clients), the gap-free sequences with their voids, the queues — from
// GET /v1/overview, every few seconds.

(() => {
  const REFRESH_MS = 3000;
  const { el } = Dispenser;
  let timer = null;

  function fmtNumber(n) {
    if (n === null || n === undefined) return "–";
    // JSON numbers past 2^53 arrive rounded: shown as such, not as exact digits.
    if (Math.abs(n) > Number.MAX_SAFE_INTEGER) return "≈ " + Number(n).toExponential(2);
    return Number(n).toLocaleString("en-US");
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
    const cell = el("td", "error", entry.error.kind + ": " + entry.error.message);
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

  function link(href, label) {
    const a = el("a", "", label);
    a.href = href;
    return a;
  }

  function queueRow(q) {
    if (q.error) return unreadable(q, 6);
    const base = "/ui/queues/" + encodeURIComponent(q.name);
    return el(
      "tr",
      "",
      el("td", "name", q.name),
      el("td", "num", q.now_serving === null ? "–" : String(q.now_serving)),
      el("td", "num", q.waiting + " of " + q.capacity + (q.full ? " (full)" : "")),
      el("td", "num", q.next_ticket === null ? "–" : String(q.next_ticket)),
      el("td", "", q.min + 1 + " … " + q.max + ", " + q.min),
      el("td", "", link(base + "/kiosk", "kiosk"), " · ", link(base + "/board", "board"))
    );
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const o = await Dispenser.api("GET", "/v1/overview");
      fill("sequences", o.sequences.map(sequenceRow), 7, "no sequences");
      const gapless = o.gapless.map(gaplessRow);
      if (o.gapless_truncated) {
        const cell = el("td", "muted", "… more gap-free sequences than shown");
        cell.colSpan = 5;
        gapless.push(el("tr", "", cell));
      }
      fill("gapless", gapless, 5, "no gap-free sequences");
      fill("queues", o.queues.map(queueRow), 6, "no queues");
      Dispenser.text("message", "");
      Dispenser.text("updated", "updated " + new Date().toLocaleTimeString());
      document.getElementById("content").hidden = false;
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        Dispenser.signIn(e.status === 401 ? "That token was not accepted." : e.message);
        return;
      }
      Dispenser.text("message", e.message + " (retrying)");
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }

  document.getElementById("signout").addEventListener("click", () => {
    clearTimeout(timer);
    Dispenser.signIn("");
  });
  Dispenser.init(refresh);
})();
