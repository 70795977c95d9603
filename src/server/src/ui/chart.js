"use strict";
// Small bar charts for the operators' page, drawn as plain SVG by the page (no library, no
// other host): one bar per hour of the last 24, the hour under every third bar, the highest
// value at the top, and each bar's value in its tooltip (<title>) and in the chart's label.

const Chart = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 480;
  const H = 120;
  const TOP = 16;
  const BOTTOM = 20;
  const LEFT = 4;

  function node(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    return n;
  }

  /** The start of the hour of `t` (a Date), local time. */
  function hourOf(t) {
    const d = new Date(t);
    d.setMinutes(0, 0, 0);
    return d;
  }

  /**
   * The 24 hours ending with the current one, oldest first, each with the value `valueOf`
   * finds for it in `entries` ({hour: RFC 3339, ...}); `carry` fills an hour without an entry
   * with the last value before it (a level such as "waiting"), else 0 (a count).
   */
  function lastDay(entries, valueOf, carry) {
    const byHour = new Map();
    let before = null;
    const now = hourOf(Date.now());
    const first = now.getTime() - 23 * 3600 * 1000;
    const sorted = (entries || [])
      .map((e) => [Date.parse(e.hour), e])
      .filter(([t]) => !isNaN(t))
      .sort((a, b) => a[0] - b[0]);
    for (const [t, e] of sorted) {
      const h = hourOf(t).getTime();
      if (h < first) before = valueOf(e);
      else byHour.set(h, valueOf(e));
    }
    const points = [];
    let last = before;
    for (let i = 0; i < 24; i++) {
      const h = first + i * 3600 * 1000;
      let v = byHour.get(h);
      if (v === undefined) v = carry ? last : 0;
      if (carry && v !== null && v !== undefined) last = v;
      points.push({ hour: new Date(h), value: typeof v === "number" ? v : 0 });
    }
    return points;
  }

  function hourLabel(d) {
    return String(d.getHours()).padStart(2, "0") + ":00";
  }

  /**
   * An SVG bar chart of `points` ({hour: Date, value}); `unit` names the values; `counts`:
   * the values add up (numbers issued), else they are levels (tickets waiting).
   */
  function bars(points, unit, counts) {
    const max = Math.max(1, ...points.map((p) => p.value));
    const slot = (W - LEFT) / points.length;
    const svg = node("svg", {
      viewBox: "0 0 " + W + " " + H,
      class: "bars",
      role: "img",
    });
    const peak = points.reduce((a, b) => (b.value > a.value ? b : a), points[0]);
    const total = points.reduce((a, p) => a + p.value, 0);
    svg.setAttribute(
      "aria-label",
      peak.value === 0
        ? "nothing in the last 24 hours"
        : "highest " + peak.value + " " + unit + " at " + hourLabel(peak.hour) + (counts ? "; " + total + " in all" : "")
    );
    svg.append(node("line", { x1: LEFT, x2: W, y1: H - BOTTOM, y2: H - BOTTOM, class: "axis" }));
    svg.append(node("text", { x: LEFT, y: 11, class: "max" }, "max " + max + " " + unit));
    points.forEach((p, i) => {
      const h = ((H - TOP - BOTTOM) * p.value) / max;
      const x = LEFT + i * slot + 1;
      const bar = node("rect", {
        x: x.toFixed(1),
        y: (H - BOTTOM - h).toFixed(1),
        width: Math.max(1, slot - 2).toFixed(1),
        height: h.toFixed(1),
        class: "column",
      });
      bar.append(node("title", {}, hourLabel(p.hour) + ": " + p.value + " " + unit));
      svg.append(bar);
      if (i % 3 === 0) {
        const every6 = i % 6 === 0 ? "hour" : "hour minor";
        svg.append(node("text", { x: x.toFixed(1), y: H - 6, class: every6 }, hourLabel(p.hour)));
      }
    });
    return svg;
  }

  return { bars, lastDay };
})();
