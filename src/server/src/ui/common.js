"use strict";
// Shared by the pages of `dispenser serve`: the token, calls to the API, small DOM helpers.
//
// The token is asked for once (or read from the address's fragment, `#token=…`, which the
// browser never sends to a server), kept in this tab's sessionStorage, removed from the
// address bar, and sent only as `Authorization: Bearer` — never in a URL, never printed.
// A link whose token differs from the one the tab holds does not replace it silently (a
// crafted link could plant someone else's token): the page asks first, in the page.
// Everything shown comes from the API and goes into the page as text (textContent).

const Dispenser = (() => {
  const KEY = "dispenser.token";
  /**
   * The prefix the service is mounted under (`/numbers`; empty at the root), which the
   * service writes into the page's `dispenser-base` meta tag: every path the pages call or
   * link to starts with it.
   */
  const BASE =
    (typeof document !== "undefined" &&
      (document.querySelector('meta[name="dispenser-base"]') || {}).content) ||
    "";

  /** The token in the address's fragment, if any, taken out of the address (and history). */
  function takeFragmentToken() {
    const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!match) return null;
    history.replaceState(null, "", location.pathname + location.search);
    try {
      return decodeURIComponent(match[1]).trim() || null;
    } catch (_) {
      return null; // not a token
    }
  }

  function token() {
    return sessionStorage.getItem(KEY);
  }

  function store(value) {
    try {
      sessionStorage.setItem(KEY, value);
    } catch (_) {
      // Storage refused (private mode): the sign-in form asks.
    }
  }

  /** The open question "replace the token?": the token offered last, and what to do after. */
  let question = null;

  /**
   * Asks, in the page, whether the token a link carried (`offered`) should replace the one
   * this tab holds; then calls `then` with the token to use instead, or null to keep the
   * current one. Neither token is shown. A link followed while the question is open only
   * changes the token offered.
   */
  function askToReplace(offered, then) {
    if (question) {
      question.offered = offered;
      return;
    }
    question = { offered, then };
    const keep = el("button", "keep", "Keep the current token");
    const replace = el("button", "use", "Use the link's token");
    keep.type = "button";
    replace.type = "button";
    keep.id = "keep-token";
    replace.id = "replace-token";
    const box = el(
      "section",
      "replace",
      el("p", "title", "This link carries a different token."),
      el(
        "p",
        null,
        "This tab already has a token. Use the one from the link instead? Only if you trust " +
          "whoever gave you the link: the page would then show what that token may see, and " +
          "act with its rights."
      ),
      el("p", "actions", keep, replace)
    );
    box.id = "replace";
    box.setAttribute("role", "alertdialog");
    box.setAttribute("aria-labelledby", "replace-title");
    box.firstChild.id = "replace-title";
    const decide = (use) => {
      const q = question;
      question = null;
      box.remove();
      q.then(use ? q.offered : null);
    };
    keep.addEventListener("click", () => decide(false));
    replace.addEventListener("click", () => decide(true));
    document.body.prepend(box);
    keep.focus();
  }

  function forget() {
    sessionStorage.removeItem(KEY);
  }

  /**
   * Starts the page: `start()` runs once a token is known, after the form (#signin) asked
   * for it if needed. `start` may call `signIn(reason)` again when the token is refused.
   */
  function init(start) {
    const offered = takeFragmentToken();
    const form = document.getElementById("signin");
    const input = document.getElementById("token");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY, value);
      input.value = "";
      form.hidden = true;
      start();
    });
    const begin = () => (token() ? start() : signIn(""));
    const held = token();
    if (offered && held && offered !== held) {
      askToReplace(offered, (use) => {
        if (use) store(use);
        begin();
      });
    } else {
      if (offered) store(offered);
      begin();
    }
    // A link to this same page with another token only changes the fragment (no reload).
    window.addEventListener("hashchange", () => {
      const next = takeFragmentToken();
      if (!next || next === token()) return;
      const restart = (use) => {
        if (!use) return;
        store(use);
        location.reload();
      };
      if (token()) askToReplace(next, restart);
      else restart(next);
    });
  }

  /** Forgets the token and shows the form, with `reason` (why the last one failed). */
  function signIn(reason) {
    forget();
    const content = document.getElementById("content");
    if (content) content.hidden = true;
    document.getElementById("signin-error").textContent = reason;
    document.getElementById("signin").hidden = false;
    document.getElementById("token").focus();
  }

  /** An error of the API with its status, stable code (`queue_full`, …) and message. */
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /**
   * JSON.parse, except that an integer beyond ±(2^53 − 1) — a ticket of a wide range, a
   * sequence near the end of 64 bits — arrives as a string of its exact digits: a JS Number
   * would round it (9007199254740993 would read as …992). The scanner copies the text and
   * quotes such integers, outside strings only.
   */
  function parseJson(text) {
    let out = "";
    let last = 0;
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i++;
        while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
        i++;
      } else if (c === "-" || (c >= "0" && c <= "9")) {
        let j = i + 1;
        while (j < text.length && "0123456789.eE+-".includes(text[j])) j++;
        const token = text.slice(i, j);
        if (/^-?[0-9]+$/.test(token) && !Number.isSafeInteger(Number(token))) {
          out += text.slice(last, i) + '"' + token + '"';
          last = j;
        }
        i = j;
      } else {
        i++;
      }
    }
    return JSON.parse(out + text.slice(last));
  }

  /**
   * Calls the API with the token; the JSON answer (read with `parseJson`), or an ApiError
   * (status 0: no answer). `options.body` (an object) is sent as JSON, or `options.json` (a
   * string) as it is — the way to send an integer too wide for a JS Number exactly;
   * `options.headers` are added; `options.token` is sent instead of the tab's token (the
   * ticket page's own).
   */
  async function api(method, path, options) {
    const opts = options || {};
    const headers = Object.assign(
      { Authorization: "Bearer " + (opts.token || token()), Accept: "application/json" },
      opts.headers || {}
    );
    const init = { method, headers, cache: "no-store" };
    if (opts.json !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = opts.json;
    } else if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    let resp;
    try {
      resp = await fetch(BASE + path, init);
    } catch (e) {
      throw new ApiError(0, "network", "the service does not answer");
    }
    let body = null;
    try {
      body = parseJson(await resp.text());
    } catch (_) {
      // Not JSON: reported below.
    }
    if (!resp.ok) {
      const error = (body && body.error) || {};
      throw new ApiError(resp.status, error.code || "error", error.message || resp.statusText);
    }
    return body;
  }

  /**
   * Reads the server-sent events of `path` to their end, with the token as a header
   * (`EventSource` cannot send one; `tokenValue` instead of the tab's token when given),
   * calling `onData` with each event's data (read with `parseJson`); stops early once
   * `stillWanted()` is false. A refused stream throws an ApiError with its status.
   */
  async function readEvents(path, onData, stillWanted, tokenValue) {
    const resp = await fetch(BASE + path, {
      headers: { Authorization: "Bearer " + (tokenValue || token()), Accept: "text/event-stream" },
      cache: "no-store",
    });
    if (!resp.ok) {
      let message = resp.statusText;
      let code = "error";
      try {
        const error = (await resp.json()).error;
        message = error.message;
        code = error.code;
      } catch (_) {
        // Keep the status text.
      }
      throw new ApiError(resp.status, code, message);
    }
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done || !stillWanted()) {
        reader.cancel().catch(() => {});
        return;
      }
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) onData(parseJson(data));
      }
    }
  }

  /** The page's path under the prefix (`/ui/queues/{name}/board`). */
  function pagePath() {
    const path = location.pathname;
    return path.startsWith(BASE) ? path.slice(BASE.length) : path;
  }

  /** The queue name of a `/ui/queues/{name}/…` page. */
  function queueName() {
    const parts = pagePath().split("/");
    return decodeURIComponent(parts[3] || "");
  }

  /** `/v1/queues/{name}…` for `name`. */
  function queuePath(name, rest) {
    return "/v1/queues/" + encodeURIComponent(name) + (rest || "");
  }

  /** A new element with text (children: strings or elements). */
  function el(tag, className, ...children) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** Sets an element's text. */
  function text(id, value) {
    document.getElementById(id).textContent = value;
  }

  /** A ticket as people read it: its label ("A-042") when the queue has a format, else the number. */
  function ticketText(entry, labelKey, numberKey) {
    const label = entry[labelKey || "label"];
    if (typeof label === "string" && label !== "") return label;
    const n = entry[numberKey || "ticket"];
    return n === null || n === undefined ? "–" : String(n);
  }

  /**
   * Shows the queue's ticket link as a QR code in `box` (its <img> gets the SVG the service
   * draws, as a data: address), when the service has a ticket link for the queue and the
   * token may see it; `box` stays hidden otherwise. The link carries the link's token, which
   * is meant to be public (it may only take and follow tickets of this queue).
   */
  async function showTicketLink(name, box) {
    let link;
    try {
      link = await api("GET", queuePath(name, "/ticket-link"));
    } catch (_) {
      link = null; // not for this token (403), or an older service (404)
    }
    if (!link || typeof link.qr_svg !== "string") {
      box.hidden = true; // no ticket link for this queue
      return;
    }
    const img = box.querySelector("img");
    img.src = "data:image/svg+xml," + encodeURIComponent(link.qr_svg);
    img.alt = "QR code of " + link.url.split("#")[0];
    box.dataset.url = link.url;
    box.hidden = false;
  }

  /** A wait in plain words ("about 4 min"), or null when unknown. */
  function waitText(seconds) {
    if (typeof seconds !== "number" || !isFinite(seconds) || seconds < 0) return null;
    if (seconds < 60) return "under a minute";
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return "about " + minutes + " min";
    const h = Math.floor(minutes / 60);
    const m = minutes % 60;
    return "about " + h + " h" + (m ? " " + m + " min" : "");
  }

  return {
    base: BASE,
    pagePath,
    init,
    takeFragmentToken,
    showTicketLink,
    signIn,
    token,
    forget,
    api,
    readEvents,
    parseJson,
    ApiError,
    queueName,
    queuePath,
    el,
    text,
    ticketText,
    waitText,
  };
})();
