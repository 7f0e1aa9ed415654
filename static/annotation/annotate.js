/* The annotation page's enhancements: keyboard answers, span marking, a visible timer that
 * pauses while the tab is hidden, and submitting without a full page load. Without JavaScript
 * the page is a plain form that posts and redirects to the next item (spans need the script).
 *
 * The form holds one or more key groups (<fieldset class="key-group">): the proxy candidates,
 * a label scale, rubric fields, the paragraphs of a multi-select item. Every option shows its
 * key; a key press picks the option of the active group that has that key (else of the first
 * group that has it), toggling it in a multi-select group. Tab and Shift+Tab move between the
 * groups and the rationale box; arrow keys move within the active group; Enter submits, and
 * Ctrl+Enter does so from inside the rationale box (Escape leaves it).
 *
 * Spans: select text in a marked text (data-span-target) with the mouse, then press m (or the
 * "Mark selection" button). Spans are character offsets into that element's text, which is the
 * stored text itself: highlights only wrap parts of it, they never change it.
 *
 * The time on an item survives a reload (localStorage, per item), so leaving and coming back
 * does not restart the clock.
 *
 * Item actions (plain forms that work without the script; the keys are shortcuts): s skips the
 * item, r opens the flag box (Ctrl+Enter sends it), u toggles the "unsure" mark, z takes the
 * last answer back while the undo bar counts down its grace period (the server decides). "More
 * context" buttons fetch the sentences around a candidate from /api/annotate/STUDY/context/.
 */
(function () {
  "use strict";

  var TICK_MS = 1000;
  var MARK_KEY = "m";
  var state = { timer: null, submitting: false, active: 0, spanTexts: [], undoTicker: null };

  function root() { return document.getElementById("annotate-root"); }
  function form() { return document.getElementById("judgment-form"); }
  function all(scope, selector) { return scope ? Array.prototype.slice.call(scope.querySelectorAll(selector)) : []; }
  function groups() { return all(form(), ".key-group"); }
  function inputsOf(group) { return all(group, "input[data-key]"); }
  /* The form's free-text box (a rationale, a reviewer's comment), if it has one. */
  function rationale() { var f = form(); return f ? f.querySelector("textarea") : null; }

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

  /* ---- key groups ----------------------------------------------------------------------------- */

  function activate(index) {
    var list = groups();
    if (!list.length) return;
    state.active = (index + list.length) % list.length;
    list.forEach(function (group, position) { group.classList.toggle("active", position === state.active); });
  }

  function activeGroup() { return groups()[state.active] || null; }

  function pick(input) {
    var group = input.closest(".key-group");
    activate(groups().indexOf(group));
    input.checked = input.type === "checkbox" ? !input.checked : true;
    clearProblem();
    input.focus({ preventScroll: true });
    (input.closest("li, label") || input).scrollIntoView({ block: "nearest" });
  }

  function moveSelection(step) {
    var inputs = inputsOf(activeGroup());
    if (!inputs.length) return;
    if (inputs[0].type === "checkbox") {
      // In a multi-select group the arrows move the focus; space toggles the focused box.
      var focused = inputs.indexOf(document.activeElement);
      var target = focused === -1 ? (step > 0 ? 0 : inputs.length - 1) : (focused + step + inputs.length) % inputs.length;
      inputs[target].focus({ preventScroll: true });
      (inputs[target].closest("li, label") || inputs[target]).scrollIntoView({ block: "nearest" });
      return;
    }
    var current = inputs.findIndex(function (input) { return input.checked; });
    var next = current === -1 ? (step > 0 ? 0 : inputs.length - 1) : (current + step + inputs.length) % inputs.length;
    pick(inputs[next]);
  }

  function optionForKey(key) {
    var lowered = key.toLowerCase();
    var matches = function (input) { return input.dataset.key === lowered; };
    var own = inputsOf(activeGroup()).find(matches);
    if (own) return own;
    for (var list = groups(), index = 0; index < list.length; index++) {
      var found = inputsOf(list[index]).find(matches);
      if (found) return found;
    }
    return null;
  }

  /* Tab stops: every key group, then the rationale box. */
  function tabStops() {
    var stops = groups();
    var box = rationale();
    return box ? stops.concat([box]) : stops;
  }

  function moveTab(step) {
    var stops = tabStops();
    if (stops.length < 2) return false;
    var box = rationale();
    var current = document.activeElement === box ? stops.length - 1 : state.active;
    var next = (current + step + stops.length) % stops.length;
    if (stops[next] === box) {
      box.focus();
      return true;
    }
    activate(next);
    var group = activeGroup();
    var focusable = inputsOf(group).find(function (input) { return input.checked; }) || inputsOf(group)[0];
    if (focusable) focusable.focus({ preventScroll: true });
    group.scrollIntoView({ block: "nearest" });
    return true;
  }

  /* ---- spans ------------------------------------------------------------------------------------ */

  function SpanText(element) {
    this.element = element;
    this.target = element.dataset.spanTarget;
    this.text = element.textContent;
    this.spans = [];
  }

  /* The character offset of a DOM boundary point within this text: the length of the text
   * between the element's start and that point (text nodes only, so highlights do not count). */
  SpanText.prototype.offsetOf = function (node, offset) {
    var range = document.createRange();
    range.setStart(this.element, 0);
    range.setEnd(node, offset);
    return range.toString().length;
  };

  SpanText.prototype.rangeOf = function (selection) {
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) return null;
    var range = selection.getRangeAt(0);
    if (!range.intersectsNode(this.element)) return null;
    var start = this.element.contains(range.startContainer) ? this.offsetOf(range.startContainer, range.startOffset) : 0;
    var end = this.element.contains(range.endContainer) ? this.offsetOf(range.endContainer, range.endOffset) : this.text.length;
    // A double-click or a sloppy drag takes surrounding spaces along: they are not part of the span.
    while (start < end && /\s/.test(this.text[start])) start++;
    while (end > start && /\s/.test(this.text[end - 1])) end--;
    return start < end ? { start: start, end: end } : null;
  };

  /* Add a span, merging it with the spans it overlaps or touches. */
  SpanText.prototype.add = function (span) {
    var merged = { start: span.start, end: span.end };
    this.spans = this.spans.filter(function (other) {
      if (other.end < merged.start || other.start > merged.end) return true;
      merged.start = Math.min(merged.start, other.start);
      merged.end = Math.max(merged.end, other.end);
      return false;
    });
    this.spans.push(merged);
    this.spans.sort(function (a, b) { return a.start - b.start; });
  };

  SpanText.prototype.remove = function (index) { this.spans.splice(index, 1); };

  SpanText.prototype.render = function () {
    var element = this.element;
    var text = this.text;
    var cursor = 0;
    element.textContent = "";
    this.spans.forEach(function (span, index) {
      if (span.start > cursor) element.appendChild(document.createTextNode(text.slice(cursor, span.start)));
      var mark = document.createElement("mark");
      mark.className = "span-mark";
      mark.dataset.spanIndex = String(index);
      mark.title = "Marked span (click to remove)";
      mark.textContent = text.slice(span.start, span.end);
      element.appendChild(mark);
      cursor = span.end;
    });
    if (cursor < text.length) element.appendChild(document.createTextNode(text.slice(cursor)));
  };

  function renderSpans() {
    var f = form();
    if (!f || !f.elements.spans) return;
    var chosen = [];
    var list = f.querySelector(".span-list");
    if (list) list.textContent = "";
    state.spanTexts.forEach(function (spanText, textIndex) {
      spanText.render();
      spanText.spans.forEach(function (span, index) {
        chosen.push({ target: spanText.target, start: span.start, end: span.end });
        if (!list) return;
        var entry = document.createElement("li");
        entry.className = "span-chip";
        var quote = document.createElement("q");
        quote.textContent = spanText.text.slice(span.start, span.end);
        var remove = document.createElement("button");
        remove.type = "button";
        remove.className = "span-remove";
        remove.dataset.spanText = String(textIndex);
        remove.dataset.spanIndex = String(index);
        remove.setAttribute("aria-label", "Remove this span");
        remove.textContent = "×";
        entry.appendChild(quote);
        entry.appendChild(remove);
        list.appendChild(entry);
      });
    });
    f.elements.spans.value = JSON.stringify(chosen);
    var empty = f.querySelector(".span-empty");
    if (empty) empty.hidden = chosen.length > 0;
  }

  function markSelection() {
    var selection = window.getSelection();
    for (var index = 0; index < state.spanTexts.length; index++) {
      var spanText = state.spanTexts[index];
      var span = spanText.rangeOf(selection);
      if (span) {
        spanText.add(span);
        selection.removeAllRanges();
        renderSpans();
        clearProblem();
        return;
      }
    }
    var noun = state.spanTexts[0] ? state.spanTexts[0].element.dataset.spanNoun || state.spanTexts[0].target : "text";
    showProblem("Select some text of the " + noun + " with the mouse first, then press " + MARK_KEY + ".");
  }

  function removeSpan(textIndex, index) {
    var spanText = state.spanTexts[textIndex];
    if (!spanText) return;
    spanText.remove(index);
    renderSpans();
  }

  function onClick(event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    if (target.closest(".span-remove")) {
      var button = target.closest(".span-remove");
      removeSpan(Number(button.dataset.spanText), Number(button.dataset.spanIndex));
      return;
    }
    if (target.closest(".mark-span")) { markSelection(); return; }
    if (target.closest(".more-context-toggle")) { toggleMoreContext(target.closest(".more-context-toggle")); return; }
    var mark = target.closest("mark.span-mark");
    if (mark && window.getSelection().isCollapsed) {
      var owner = mark.closest("[data-span-target]");
      var textIndex = state.spanTexts.findIndex(function (spanText) { return spanText.element === owner; });
      removeSpan(textIndex, Number(mark.dataset.spanIndex));
      return;
    }
    var group = target.closest(".key-group");
    if (group) activate(groups().indexOf(group));
  }

  /* ---- item actions: skip, flag, unsure, undo, more context ------------------------------------- */

  function submitIfShown(id) {
    var f = document.getElementById(id);
    if (!f || f.hidden) return false;
    f.requestSubmit();
    return true;
  }

  function openFlagBox() {
    var box = document.getElementById("flag-box");
    if (!box) return false;
    box.open = true;
    box.querySelector("textarea").focus();
    return true;
  }

  function toggleUnsure() {
    var mark = form() && form().querySelector("input[name=unsure]");
    if (!mark) return false;
    mark.checked = !mark.checked;
    return true;
  }

  var ACTIONS = {
    s: function () { return submitIfShown("skip-form"); },
    r: openFlagBox,
    u: toggleUnsure,
    z: function () { return submitIfShown("undo-form"); },
  };

  /* The undo bar disappears when its grace period is over (the server refuses after that too). */
  function startUndoCountdown() {
    if (state.undoTicker) { window.clearInterval(state.undoTicker); state.undoTicker = null; }
    var bar = document.getElementById("undo-form");
    if (!bar) return;
    var deadline = Date.now() + Number(bar.dataset.secondsLeft) * 1000;
    var tick = function () {
      var left = Math.max(0, (deadline - Date.now()) / 1000);
      bar.querySelector(".undo-left").textContent = Math.ceil(left);
      if (left <= 0) {
        bar.hidden = true;
        window.clearInterval(state.undoTicker);
        state.undoTicker = null;
      }
    };
    state.undoTicker = window.setInterval(tick, 200);
    tick();
  }

  function sentencesText(sentences) { return sentences.join(" "); }

  function toggleMoreContext(button) {
    var box = button.parentElement.querySelector(".more-context-text");
    if (!box.hidden) { box.hidden = true; button.textContent = "More context"; return; }
    var url = "/api/annotate/" + root().dataset.study + "/context/?candidate=" + encodeURIComponent(button.value);
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) throw new Error(body.detail || "status " + response.status);
          return body;
        });
      })
      .then(function (body) {
        box.textContent = "";
        [["before", body.before], ["here", body.sentences], ["after", body.after]].forEach(function (part) {
          if (!part[1].length) return;
          var paragraph = document.createElement("p");
          paragraph.className = "context-" + part[0];
          if (part[0] === "here") {
            var mark = document.createElement("mark");
            mark.textContent = sentencesText(part[1]);
            paragraph.appendChild(mark);
          } else {
            paragraph.textContent = sentencesText(part[1]);
          }
          box.appendChild(paragraph);
        });
      })
      .catch(function (error) { box.textContent = "No more context: " + error.message; })
      .then(function () { box.hidden = false; button.textContent = "Less context"; });
  }

  /* ---- keyboard ---------------------------------------------------------------------------------- */

  function isTyping(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" ||
      (tag === "INPUT" && target.type !== "radio" && target.type !== "checkbox") ||
      Boolean(target && target.isContentEditable);
  }

  function activatesOnEnter(target) {
    // Links, buttons and the guidelines toggle keep their own Enter.
    var tag = target && target.tagName;
    return tag === "A" || tag === "BUTTON" || tag === "SUMMARY";
  }

  function inAnswerArea(target) {
    return !target || target === document.body || Boolean(form() && form().contains(target));
  }

  function onKeyDown(event) {
    var flagReason = event.target && event.target.id === "id_flag_reason";
    if (flagReason && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      event.target.form.requestSubmit();
      return;
    }
    if (flagReason && event.key === "Escape") { event.preventDefault(); event.target.blur(); return; }
    var plainKey = !(event.altKey || event.ctrlKey || event.metaKey || isTyping(event.target));
    var action = plainKey && event.target !== rationale() && ACTIONS[event.key.toLowerCase()];
    if (action && action()) { event.preventDefault(); return; }
    var f = form();
    if (!f) return;
    if (event.target === rationale()) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); f.requestSubmit(); }
      else if (event.key === "Escape") { event.preventDefault(); event.target.blur(); }
      else if (event.key === "Tab" && event.shiftKey) { event.preventDefault(); moveTab(-1); }
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey || isTyping(event.target)) return;
    if (event.key === "Tab") {
      if (inAnswerArea(event.target) && moveTab(event.shiftKey ? -1 : 1)) event.preventDefault();
      return;
    }
    if (event.key === "ArrowDown" || event.key === "ArrowRight") { event.preventDefault(); moveSelection(1); return; }
    if (event.key === "ArrowUp" || event.key === "ArrowLeft") { event.preventDefault(); moveSelection(-1); return; }
    if (event.key === "Enter") {
      if (activatesOnEnter(event.target)) return;
      event.preventDefault();
      f.requestSubmit();
      return;
    }
    if (event.key.length !== 1) return;
    if (event.key.toLowerCase() === MARK_KEY && state.spanTexts.length) { event.preventDefault(); markSelection(); return; }
    var option = optionForKey(event.key);
    if (option) { event.preventDefault(); pick(option); }
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

  function clearProblem() {
    var box = form() && form().querySelector(".form-problem");
    if (box) box.remove();
  }

  /* What the answer still lacks, in words, or null: each required group needs a choice, a
   * required rationale some text, required spans at least one span. The server checks again. */
  function missingPart(f) {
    var unanswered = groups().find(function (group) {
      return group.dataset.required === "true" && !inputsOf(group).some(function (input) { return input.checked; });
    });
    if (unanswered) return unanswered.dataset.missing;
    var box = rationale();
    if (box && box.required && !box.value.trim()) return "Write a short rationale first.";
    if (f.elements.spans && f.dataset.spansRequired === "true" && JSON.parse(f.elements.spans.value || "[]").length === 0) {
      return "Mark at least one span first: select the text, then press " + MARK_KEY + ".";
    }
    return null;
  }

  function onSubmit(event) {
    var f = event.target;
    event.preventDefault();
    if (state.submitting) return;
    var missing = missingPart(f);
    if (missing) {
      showProblem(missing);
      var group = groups().find(function (candidate) { return candidate.dataset.missing === missing; });
      if (group) activate(groups().indexOf(group));
      return;
    }
    state.submitting = true;
    var timer = state.timer;
    f.elements.seconds.value = timer ? timer.seconds().toFixed(1) : "";
    f.querySelector("button[type=submit]").disabled = true;
    fetch(f.action, { method: "POST", body: new FormData(f), credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("status " + response.status);
        if (response.redirected && new URL(response.url).pathname !== window.location.pathname) {
          // The submission led off this page (e.g. a crowd participant's completion page): go there.
          if (timer) timer.forget();
          window.location.assign(response.url);
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null) return;
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

  /* Show the page the submission led to: the next item, the end of the study, or the result
   * of a qualification attempt (which has no form; start() then has nothing to wire). */
  function swapPage(next) {
    var freshMain = next.querySelector("main");
    if (!freshMain) { window.location.reload(); return; }
    document.querySelector("main").replaceWith(freshMain);
    var oldMessages = document.querySelector("ul.messages");
    var newMessages = next.querySelector("ul.messages");
    if (oldMessages) oldMessages.remove();
    if (newMessages) freshMain.before(newMessages);
    document.title = next.title;
    start();
  }

  /* Post-editing: the suggested answer (#proposal, its input's name and value) starts selected. */
  function preselectProposal(f) {
    var note = document.getElementById("proposal");
    if (!note) return;
    var input = f.querySelector('input[name="' + note.dataset.name + '"][value="' + note.dataset.value + '"]');
    if (input) input.checked = true;
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
    state.spanTexts = all(page, "[data-span-target]").map(function (element) { return new SpanText(element); });
    all(page, ".span-tools").forEach(function (tools) { tools.hidden = false; });
    all(page, ".more-context-toggle").forEach(function (button) { button.hidden = false; });
    startUndoCountdown();
    if (f) {
      // The script explains what is missing itself (missingPart), in the page's words.
      f.noValidate = true;
      f.classList.toggle("several-groups", groups().length > 1);
      f.addEventListener("submit", onSubmit);
      activate(0);
      preselectProposal(f);
      renderSpans();
    }
  }

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("click", onClick);
  // Keep the text selection when the "Mark selection" button is pressed with the mouse.
  document.addEventListener("mousedown", function (event) {
    if (event.target instanceof Element && event.target.closest(".mark-span")) event.preventDefault();
  });
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
