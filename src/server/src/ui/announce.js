"use strict";
// The board's call-outs: a short chime (Web Audio) and a spoken announcement (the browser's
// speech synthesis) for each call or recall, one after the other — an announcement never cuts
// another off: they wait in a queue, and the next starts when the last one ended (or after a
// time limit, for browsers whose speech never says it ended). Every announcement is also
// written as text into an aria-live region, at once and in order, sound or not.
//
// Browsers play sound only after a gesture on the page, so sound starts off and a visible
// switch turns it on.

const Announcer = (() => {
  /** Text lines kept in the aria-live region. */
  const MIRROR_KEEP = 20;
  /** What was announced, oldest first (the last 100): text, when queued, started, ended. */
  const history = [];
  const pending = [];
  let running = false;
  let soundOn = false;
  let audio = null;

  function pause(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  /** Two short tones, about 0.7 s; resolves when they are over. */
  function chime() {
    if (!audio) return Promise.resolve();
    const start = audio.currentTime + 0.05;
    [
      [880, 0],
      [660, 0.28],
    ].forEach(([freq, at]) => {
      const osc = audio.createOscillator();
      const gain = audio.createGain();
      osc.type = "sine";
      osc.frequency.value = freq;
      gain.gain.setValueAtTime(0.0001, start + at);
      gain.gain.exponentialRampToValueAtTime(0.4, start + at + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, start + at + 0.4);
      osc.connect(gain).connect(audio.destination);
      osc.start(start + at);
      osc.stop(start + at + 0.45);
    });
    return pause(750);
  }

  /** Speaks `entry.text`; resolves when the speech ended, failed or took too long. */
  function speak(entry) {
    if (!("speechSynthesis" in window) || typeof SpeechSynthesisUtterance !== "function") {
      entry.outcome = "no speech";
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const utterance = new SpeechSynthesisUtterance(entry.text);
      utterance.lang = document.documentElement.lang || "en";
      utterance.rate = 0.9;
      entry.utterance = utterance; // kept: some browsers drop the end event of a collected one
      let timer = null;
      const finish = (outcome) => {
        if (entry.outcome) return;
        entry.outcome = outcome;
        clearTimeout(timer);
        resolve();
      };
      utterance.onend = () => finish("spoken");
      utterance.onerror = (e) => finish("error: " + (e.error || "unknown"));
      // Never longer than this, even when the browser says nothing (headless ones).
      timer = setTimeout(() => finish("timeout"), Math.max(5000, 150 * entry.text.length));
      window.speechSynthesis.speak(utterance);
    });
  }

  async function drain() {
    if (running) return;
    running = true;
    while (pending.length) {
      const entry = pending.shift();
      entry.started = performance.now();
      await chime();
      await speak(entry);
      entry.ended = performance.now();
      delete entry.utterance;
      await pause(300);
    }
    running = false;
  }

  function mirror(text) {
    const region = document.getElementById("announcements");
    if (!region) return;
    const line = document.createElement("p");
    line.textContent = text;
    region.append(line);
    while (region.childElementCount > MIRROR_KEEP) region.firstElementChild.remove();
  }

  /** Announces `text`: written into the aria-live region now, spoken in turn when sound is on. */
  function say(text) {
    mirror(text);
    const entry = { text, queued: performance.now(), started: null, ended: null, outcome: null };
    history.push(entry);
    if (history.length > 100) history.shift();
    if (soundOn) {
      pending.push(entry);
      drain();
    } else {
      entry.outcome = "sound off";
    }
  }

  /** Turns sound on or off; call it from a click (the gesture browsers ask for). */
  function setSound(on) {
    soundOn = on;
    if (on) {
      const Ctx = window.AudioContext || window.webkitAudioContext;
      if (!audio && Ctx) audio = new Ctx();
      if (audio && audio.state === "suspended") audio.resume();
      chime(); // so people hear that sound works
    } else {
      pending.length = 0;
    }
  }

  /** "A-042" as it should be spoken: "A 42" (no dashes, no leading zeros). */
  function speakable(label) {
    return String(label)
      .replace(/[-_./:#]+/g, " ")
      .replace(/(\D)(\d)/g, "$1 $2")
      .replace(/\d+/g, (digits) => digits.replace(/^0+(?=\d)/, ""))
      .replace(/\s+/g, " ")
      .trim();
  }

  return { say, setSound, speakable, history, isOn: () => soundOn };
})();
