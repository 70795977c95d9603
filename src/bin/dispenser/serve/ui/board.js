"use strict";
// The board: "Now serving 42" and how many wait, live. It reads the service's event stream
// (GET /ui/queues/{name}/events, server-sent events) with fetch, which sends the token as a
// header (EventSource cannot), and reconnects when the stream ends or fails.

(() => {
  const name = Dispenser.queueName();
  const serving = document.getElementById("serving");
  let shownServing = null;
  Dispenser.text("queue-name", name);
  document.title = "Now serving — " + name;

  function show(status) {
    if (status.error) {
      Dispenser.text("connection", status.error.message);
      return;
    }
    const now = status.now_serving === null ? "–" : String(status.now_serving);
    if (now !== shownServing) {
      serving.textContent = now;
      if (shownServing !== null) {
        serving.classList.remove("fresh");
        void serving.offsetWidth; // restart the animation
        serving.classList.add("fresh");
      }
      shownServing = now;
    }
    Dispenser.text("waiting", status.waiting === 1 ? "1 waiting" : status.waiting + " waiting");
    Dispenser.text(
      "next",
      status.next_ticket === null ? "The queue is full." : "Next ticket: " + status.next_ticket
    );
    Dispenser.text("connection", "live");
    document.getElementById("content").hidden = false;
  }

  /** Reads one stream to its end, calling `show` for every status event. */
  async function follow() {
    const resp = await fetch("/ui/queues/" + encodeURIComponent(name) + "/events", {
      headers: { Authorization: "Bearer " + Dispenser.token(), Accept: "text/event-stream" },
      cache: "no-store",
    });
    if (!resp.ok) {
      let message = resp.statusText;
      try {
        message = (await resp.json()).error.message;
      } catch (_) {
        // Keep the status text.
      }
      throw new Dispenser.ApiError(resp.status, "error", message);
    }
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
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
        if (data) show(JSON.parse(data));
      }
    }
  }

  async function run() {
    for (;;) {
      // After a stream that ended, reconnect at once (in a second); when the service has too
      // many streams open (429, 503 too_many_streams), wait longer.
      let wait = 1000;
      try {
        await follow();
        Dispenser.text("connection", "reconnecting…");
      } catch (e) {
        if (e.status === 401) {
          Dispenser.signIn("That token was not accepted.");
          return;
        }
        if (e.status === 429 || e.status === 503) wait = 10000;
        Dispenser.text("connection", (e.message || "no connection") + " — retrying…");
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  Dispenser.init(run);
})();
