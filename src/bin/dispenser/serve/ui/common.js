"use strict";
// Shared by the pages of `dispenser serve`: the token, calls to the API, small DOM helpers.
//
// The token is asked for once (or read from the address's fragment, `#token=…`, which the
// browser never sends to a server), kept in this tab's sessionStorage, removed from the
// address bar, and sent only as `Authorization: Bearer` — never in a URL, never printed.
// Everything shown comes from the API and goes into the page as text (textContent).

const Dispenser = (() => {
  const KEY = "dispenser.token";

  /** A token in the fragment is kept and removed from the address (and history). */
  function adoptFragmentToken() {
    const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!match) return;
    try {
      sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    } catch (_) {
      // Storage refused (private mode): the sign-in form asks.
    }
    history.replaceState(null, "", location.pathname + location.search);
  }

  function token() {
    return sessionStorage.getItem(KEY);
  }

  function forget() {
    sessionStorage.removeItem(KEY);
  }

  /**
   * Starts the page: `start()` runs once a token is known, after the form (#signin) asked
   * for it if needed. `start` may call `signIn(reason)` again when the token is refused.
   */
  function init(start) {
    adoptFragmentToken();
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
    if (token()) {
      start();
    } else {
      signIn("");
    }
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

  /** An error of the API with its status, kind and message. */
  class ApiError extends Error {
    constructor(status, kind, message) {
      super(message);
      this.status = status;
      this.kind = kind;
    }
  }

  /** Calls the API with the token; the JSON answer, or an ApiError. */
  async function api(method, path) {
    const headers = { Authorization: "Bearer " + token(), Accept: "application/json" };
    let resp;
    try {
      resp = await fetch(path, { method, headers, cache: "no-store" });
    } catch (e) {
      throw new ApiError(0, "network", "the service does not answer");
    }
    let body = null;
    try {
      body = await resp.json();
    } catch (_) {
      // Not JSON: reported below.
    }
    if (!resp.ok) {
      const error = (body && body.error) || {};
      throw new ApiError(resp.status, error.kind || "error", error.message || resp.statusText);
    }
    return body;
  }

  /** The queue name of a `/ui/queues/{name}/…` page. */
  function queueName() {
    const parts = location.pathname.split("/");
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

  return { init, signIn, token, forget, api, ApiError, queueName, queuePath, el, text };
})();
