"use strict";
// The kiosk: one big "Take a ticket" button (POST /v1/queues/{name}/take) that shows the
// ticket, and how many wait before it. A full queue says so; nothing is taken then.

(() => {
  const name = Dispenser.queueName();
  const button = document.getElementById("take");
  const result = document.getElementById("result");
  let clearTimer = null;
  Dispenser.text("queue-name", name);
  document.title = "Take a ticket — " + name;

  function show(ticket) {
    Dispenser.text("ticket", String(ticket.ticket));
    const ahead = ticket.waiting - 1;
    Dispenser.text(
      "ahead",
      ahead === 0 ? "You are next." : ahead === 1 ? "1 person before you." : ahead + " people before you."
    );
    Dispenser.text("message", "");
    result.hidden = false;
    result.classList.remove("fresh");
    void result.offsetWidth; // restart the animation
    result.classList.add("fresh");
    clearTimeout(clearTimer);
    // The next person should not see this ticket for long.
    clearTimer = setTimeout(() => {
      result.hidden = true;
    }, 20000);
  }

  async function take() {
    button.disabled = true;
    try {
      show(await Dispenser.api("POST", Dispenser.queuePath(name, "/take")));
    } catch (e) {
      result.hidden = true;
      if (e.status === 401) {
        Dispenser.signIn("That token was not accepted.");
      } else if (e.kind === "queue_full") {
        Dispenser.text("message", "The queue is full right now. Please wait a moment and try again.");
      } else if (e.kind === "no_such_queue") {
        Dispenser.text("message", "There is no queue " + JSON.stringify(name) + ".");
      } else {
        Dispenser.text("message", "No ticket: " + e.message);
      }
    } finally {
      button.disabled = false;
    }
  }

  button.addEventListener("click", take);
  Dispenser.init(() => {
    document.getElementById("content").hidden = false;
    button.focus();
  });
})();
