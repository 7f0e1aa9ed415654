/* The annotation page's enhancements: keyboard choice, a visible timer that pauses while the tab
 * is hidden, and submitting without a full page load. Without JavaScript the page is a plain
 * form that posts and redirects to the next item; everything here is optional.
 *
 * Keys: each option shows its key (1-9, 0 for the tenth, then a, b, ... for 11-20); arrow keys
 * move the selection; Enter submits. The time on an item survives a reload (localStorage, per
 * item) so leaving and coming back does not restart the clock.
 */
(function () {
  "use strict";

  var TICK_MS = 1000;
  var state = { timer: null, submitting: false };

  function root() { return document.getElementById("annotate-root"); }
  function form() { return document.getElementById("judgment-form"); }
  function options() { var f = form(); return f ? Array.prototype.slice.call(f.querySelectorAll("input[name=choice]")) : []; }

  /* ---- timer ------------------------------------------------------------------------------ */

  function ItemTimer(storageKey, display) {
    this.storageKey = storageKey;
    this.display = display;
    this.elapsed = Number(readStored(storageKey)) || 0;
    this.runningSince = document.hidden ? null : performance.now();
  }
  ItemTimer.prototype.seconds = function () {
    var running = this.runningSince === null ? 0 : (performance.now() - this.runningSince) / 1000;
    return this.elapsed + running;
  };
  ItemTimer.prototype.pause = function () {
    if (this.runningSince === null) return;
    this.elapsed = this.seconds();
    this.runningSince = null;
    this.save();
  };
  ItemTimer.prototype.resume = function () {
    if (this.runningSince === null) this.runningSince = performance.now();
  };
  ItemTimer.prototype.save = function () { writeStored(this.storageKey, this.seconds().toFixed(1)); };
  ItemTimer.prototype.forget = function () { writeStored(this.storageKey, null); };
  ItemTimer.prototype.render = function () {
    var total = Math.floor(this.seconds());
    var minutes = Math.floor(total / 60);
    var seconds = total % 60;
    this.display.textContent = minutes + ":" + (seconds < 10 ? "0" : "") + seconds;
    this.display.parentElement.classList.toggle("paused", this.runningSince === null);
  };

  function readStored(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function writeStored(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(key); else window.localStorage.setItem(key, value);
    } catch (e) { /* private mode or storage full: the timer still works for this page */ }
  }

  /* ---- selection ---------------------------------------------------------------------------- */

  function select(input) {
    input.checked = true;
    input.focus({ preventScroll: true });
    input.closest(".candidate").scrollIntoView({ block: "nearest" });
  }

  function moveSelection(step) {
    var inputs = options();
    if (!inputs.length) return;
    var current = inputs.findIndex(function (input) { return input.checked; });
    var next = current === -1 ? (step > 0 ? 0 : inputs.length - 1) : (current + step + inputs.length) % inputs.length;
    select(inputs[next]);
  }

  function optionForKey(key) {
    var lowered = key.toLowerCase();
    return options().find(function (input) { return input.dataset.key === lowered; }) || null;
  }

  function isTyping(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "radio") ||
      Boolean(target && target.isContentEditable);
  }

  function activatesOnEnter(target) {
    // Links, buttons and the guidelines toggle keep their own Enter.
    var tag = target && target.tagName;
    return tag === "A" || tag === "BUTTON" || tag === "SUMMARY";
  }

  function onKeyDown(event) {
    if (!form() || event.altKey || event.ctrlKey || event.metaKey || isTyping(event.target)) return;
    if (event.key === "ArrowDown" || event.key === "ArrowRight") { event.preventDefault(); moveSelection(1); return; }
    if (event.key === "ArrowUp" || event.key === "ArrowLeft") { event.preventDefault(); moveSelection(-1); return; }
    if (event.key === "Enter") {
      if (activatesOnEnter(event.target)) return;
      event.preventDefault();
      form().requestSubmit();
      return;
    }
    var option = event.key.length === 1 ? optionForKey(event.key) : null;
    if (option) { event.preventDefault(); select(option); }
  }

  /* ---- submitting ---------------------------------------------------------------------------- */

  function showProblem(message) {
    var f = form();
    var box = f.querySelector(".form-problem");
    if (!box) {
      box = document.createElement("p");
      box.className = "form-problem";
      box.setAttribute("role", "alert");
      f.querySelector(".form-foot").prepend(box);
    }
    box.textContent = message;
  }

  function onSubmit(event) {
    var f = event.target;
    event.preventDefault();
    if (state.submitting) return;
    if (!options().some(function (input) { return input.checked; })) {
      showProblem("Choose one of the candidates first (press its key, or click it).");
      return;
    }
    state.submitting = true;
    var timer = state.timer;
    f.elements.seconds.value = timer ? timer.seconds().toFixed(1) : "";
    f.querySelector("button[type=submit]").disabled = true;
    fetch(f.action, { method: "POST", body: new FormData(f), credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("status " + response.status);
        return response.text();
      })
      .then(function (html) {
        if (timer) timer.forget();
        state.timer = null;
        swapPage(new DOMParser().parseFromString(html, "text/html"));
      })
      .catch(function () {
        // The enhanced path failed (network, session): fall back to the plain form post.
        state.submitting = false;
        f.submit();
      });
  }

  function swapPage(next) {
    var freshMain = next.querySelector("main");
    if (!freshMain || !next.getElementById("annotate-root")) { window.location.reload(); return; }
    document.querySelector("main").replaceWith(freshMain);
    var oldMessages = document.querySelector("ul.messages");
    var newMessages = next.querySelector("ul.messages");
    if (oldMessages) oldMessages.remove();
    if (newMessages) freshMain.before(newMessages);
    document.title = next.title;
    start();
  }

  /* ---- wiring -------------------------------------------------------------------------------- */

  function start() {
    state.submitting = false;
    if (state.timer) { state.timer.pause(); state.timer = null; }
    var page = root();
    var display = document.getElementById("timer");
    if (page && display && page.dataset.item) {
      state.timer = new ItemTimer("marginalia-seconds-" + page.dataset.study + "-" + page.dataset.item, display);
      display.parentElement.hidden = false;
      state.timer.render();
    }
    var f = form();
    if (f) f.addEventListener("submit", onSubmit);
  }

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("visibilitychange", function () {
    if (!state.timer) return;
    if (document.hidden) state.timer.pause(); else state.timer.resume();
    state.timer.render();
  });
  window.addEventListener("pagehide", function () { if (state.timer) state.timer.save(); });
  window.setInterval(function () {
    if (!state.timer) return;
    state.timer.render();
    state.timer.save();
  }, TICK_MS);
  start();
})();
