/* The annotation page's enhancements: keyboard answers, span marking (mouse or keys), the list
 * of shortcuts, a visible timer that pauses while the tab is hidden, and submitting without a
 * full page load. Without JavaScript the page is a plain form that posts and redirects to the
 * next item (spans need the script).
 *
 * Keys. Every option shows its key; the keys of the item actions come from the study
 * (annotation/presentation.py, the JSON in #annotate-keys). A key press goes, in order, to
 *   1. the list of shortcuts while it is open (Tab stays inside it, Esc or ? closes it and the
 *      focus goes back where it was);
 *   2. text boxes: typing is typing; Ctrl+Enter sends the box's form; Esc leaves the box;
 *   3. the marked text of a span study when it has the focus (see "Spans");
 *   4. ? opens the list; the item actions (skip, flag, unsure, undo);
 *   5. the handler of the page's kind (data-kind on #annotate-root; KINDS below): a new kind of
 *      item plugs in with MarginaliaAnnotate.registerKind(kind, {onKey: function (event, page)
 *      {... return true when handled}}); kinds without their own use the key groups.
 * Tab and Shift+Tab are the browser's own: they reach every field, button and link of the page
 * (the answer's fields, Submit, Unsure, Skip, Flag, the guidelines, the site navigation) and
 * never trap the focus (WCAG 2.1.2).
 *
 * Key groups (<fieldset class="key-group">): the proxy candidates, a label scale, rubric fields,
 * the paragraphs of a multi-select item. An option key picks the option of the active group
 * (the one holding the focus, else the last one used) that has that key, else of the first
 * group that has it, toggling it in a multi-select group; arrow keys move within the active
 * group; Enter submits. With auto-advance (data-auto-advance), picking the last answer an item
 * needs by its key or a click submits it (arrows only move).
 *
 * Preference items (KINDS.preference) use the key groups too: a pair is one group (1, 2, t for
 * a tie, b for both bad); a list gives each passage a group of place keys 1..n (1 is the best), and a place picked
 * by its key moves on to the next passage (data-advance). A group with data-unless="ID" is not
 * required once the box ID ("none is good") is ticked; a form with data-strict-places refuses
 * two passages in one place.
 *
 * Spans. With the mouse: select text in a marked text (data-span-target), then press the mark
 * key (m) or the "Mark selected text" button. With keys: Tab to the text, ← → move a word at a
 * time, Shift+← → extend the selection, Home/End jump, the mark key marks, Delete or Backspace
 * removes the span under the cursor, Esc goes back to the answer; a status line (read out by
 * screen readers) says what is selected and what was marked. Spans are character offsets into
 * that element's text, which is the stored text itself: highlights only wrap parts of it.
 *
 * The time on an item survives a reload (localStorage, per item). "More context" buttons fetch
 * the sentences around a candidate from /api/annotate/STUDY/context/.
 */
(function () {
  "use strict";

  var TICK_MS = 1000;
  var HELP_KEY = "?";
  var state = {
    timer: null, submitting: false, active: 0, spanTexts: [], undoTicker: null, returnFocus: null,
  };
  var KINDS = {};

  function root() { return document.getElementById("annotate-root"); }
  function form() { return document.getElementById("judgment-form"); }
  function all(scope, selector) { return scope ? Array.prototype.slice.call(scope.querySelectorAll(selector)) : []; }
  function groups() { return all(form(), ".key-group"); }
  function inputsOf(group) { return all(group, "input[data-key]"); }
  /* The form's free-text box (a rationale, a reviewer's comment), if it has one. */
  function rationale() { var f = form(); return f ? f.querySelector("textarea") : null; }
  function shortcutsDialog() { return document.getElementById("shortcuts"); }

  /* The study's keys for the item actions ({skip, flag, unsure, undo, mark}; "" = none). */
  function keys() {
    var data = document.getElementById("annotate-keys");
    try { return (data && JSON.parse(data.textContent)) || {}; } catch (e) { return {}; }
  }
  function markKey() { return keys().mark || ""; }

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

  /* Where the focus goes back to in the answer: the active group's chosen option, or its first. */
  function focusAnswer() {
    var inputs = inputsOf(activeGroup());
    var target = inputs.find(function (input) { return input.checked; }) || inputs[0];
    if (target) target.focus({ preventScroll: true });
    else if (form()) form().querySelector("button[type=submit]").focus({ preventScroll: true });
  }

  function pick(input, advance) {
    var group = input.closest(".key-group");
    activate(groups().indexOf(group));
    input.checked = input.type === "checkbox" ? !input.checked : true;
    clearProblem();
    input.focus({ preventScroll: true });
    (input.closest("li, label") || input).scrollIntoView({ block: "nearest" });
    if (advance) advanceIfComplete(input);
  }

  /* Auto-advance: a radio picked (by its key or a click) that completes the answer submits it. */
  function advanceIfComplete(input) {
    var page = root();
    var f = form();
    if (!page || page.dataset.autoAdvance !== "true" || !f || input.type !== "radio") return;
    if (missingPart(f) === null) f.requestSubmit();
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
    pick(inputs[next], false);
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

  /* Where Enter submits and arrows choose: the form, the texts spans are marked in, or nowhere. */
  function inAnswerArea(target) {
    return !target || target === document.body || target.tagName === "MAIN" || Boolean(spanTextOf(target)) ||
      Boolean(form() && form().contains(target));
  }

  function activatesOnEnter(target) {
    // Links, buttons and disclosure toggles keep their own Enter.
    var tag = target && target.tagName;
    return tag === "A" || tag === "BUTTON" || tag === "SUMMARY";
  }

  /* The key groups' keys: the handler of every kind without one of its own. */
  var keyGroups = {
    onKey: function (event) {
      var f = form();
      if (!f) return false;
      var answering = inAnswerArea(event.target);
      if (answering && (event.key === "ArrowDown" || event.key === "ArrowRight")) { moveSelection(1); return true; }
      if (answering && (event.key === "ArrowUp" || event.key === "ArrowLeft")) { moveSelection(-1); return true; }
      if (event.key === "Enter") {
        if (activatesOnEnter(event.target) || !answering) return false;
        f.requestSubmit();
        return true;
      }
      if (event.key.length !== 1) return false;
      if (markKey() && event.key.toLowerCase() === markKey() && state.spanTexts.length) { markSelection(); return true; }
      var option = optionForKey(event.key);
      if (!option) return false;
      pick(option, true);
      return true;
    },
  };

  function registerKind(kind, handler) { KINDS[kind] = handler; }

  function kindHandler() {
    var page = root();
    return (page && KINDS[page.dataset.kind]) || keyGroups;
  }

  /* After a place picked by its key, the next passage of the list becomes the active group. */
  function advanceFrom(group) {
    var list = groups();
    var next = list[list.indexOf(group) + 1];
    if (!group || group.dataset.advance !== "true" || !next || next.dataset.advance !== "true") return;
    activate(list.indexOf(next));
    var focusable = inputsOf(next).find(function (input) { return input.checked; }) || inputsOf(next)[0];
    if (focusable) focusable.focus({ preventScroll: true });
    next.scrollIntoView({ block: "nearest" });
  }

  registerKind("preference", {
    onKey: function (event) {
      var picked = event.key.length === 1 && optionForKey(event.key);
      if (!keyGroups.onKey(event)) return false;
      if (picked) advanceFrom(picked.closest(".key-group"));
      return true;
    },
  });

  /* ---- spans ------------------------------------------------------------------------------------ */

  function SpanText(element) {
    this.element = element;
    this.target = element.dataset.spanTarget;
    this.noun = element.dataset.spanNoun || this.target;
    this.text = element.textContent;
    this.spans = [];
    this.words = [];
    var pattern = /\S+/g;
    var match;
    while ((match = pattern.exec(this.text)) !== null) this.words.push({ start: match.index, end: match.index + match[0].length });
    this.caret = -1;
    this.anchor = -1;
  }

  /* The character offset of a DOM boundary point within this text: the length of the text
   * between the element's start and that point (text nodes only, so highlights do not count). */
  SpanText.prototype.offsetOf = function (node, offset) {
    var range = document.createRange();
    range.setStart(this.element, 0);
    range.setEnd(node, offset);
    return range.toString().length;
  };

  /* The DOM boundary point at a character offset: the inverse of offsetOf. */
  SpanText.prototype.pointAt = function (offset) {
    var walker = document.createTreeWalker(this.element, NodeFilter.SHOW_TEXT);
    var seen = 0;
    var node;
    while ((node = walker.nextNode())) {
      if (offset <= seen + node.length) return { node: node, offset: offset - seen };
      seen += node.length;
    }
    return { node: this.element, offset: this.element.childNodes.length };
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
    return merged;
  };

  SpanText.prototype.remove = function (index) { return this.spans.splice(index, 1)[0]; };

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

  /* Keyboard selection: the words from the anchor to the caret, shown as the page's selection
   * (so the mark key and the button mark it as they mark a mouse selection). */
  SpanText.prototype.selectedWords = function () {
    var first = Math.min(this.anchor, this.caret);
    var last = Math.max(this.anchor, this.caret);
    return { first: first, last: last, start: this.words[first].start, end: this.words[last].end };
  };

  /* Select the words from the anchor to the caret and say so (`quiet`: only select, leaving
   * the status line to what just happened). */
  SpanText.prototype.showSelection = function (quiet) {
    if (this.caret < 0 || !this.words.length) return;
    var chosen = this.selectedWords();
    var from = this.pointAt(chosen.start);
    var to = this.pointAt(chosen.end);
    var range = document.createRange();
    range.setStart(from.node, from.offset);
    range.setEnd(to.node, to.offset);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (quiet) return;
    var count = chosen.last - chosen.first + 1;
    announce("Selected “" + this.text.slice(chosen.start, chosen.end) + "”: word" + (count > 1 ? "s " + (chosen.first + 1) + "–" + (chosen.last + 1) : " " + (chosen.first + 1)) +
      " of " + this.words.length + (this.spanAt(this.caret) >= 0 ? ", inside a marked span" : "") + ".");
  };

  /* The caret's word after a mouse selection (or the first word): where keys continue from. */
  SpanText.prototype.ensureCaret = function () {
    if (this.caret >= 0) return;
    var selected = this.rangeOf(window.getSelection());
    var index = selected ? this.words.findIndex(function (word) { return word.end > selected.start; }) : 0;
    this.caret = this.anchor = Math.max(0, index);
  };

  SpanText.prototype.move = function (to, extend) {
    this.ensureCaret();
    this.caret = Math.max(0, Math.min(this.words.length - 1, to));
    if (!extend) this.anchor = this.caret;
    this.showSelection();
  };

  SpanText.prototype.spanAt = function (wordIndex) {
    var word = this.words[wordIndex];
    if (!word) return -1;
    return this.spans.findIndex(function (span) { return span.start < word.end && word.start < span.end; });
  };

  /* What a key does while the marked text has the focus; true when it did something. */
  SpanText.prototype.onKey = function (event) {
    if (!this.words.length) return false;
    var extend = event.shiftKey;
    switch (event.key) {
      case "ArrowRight": case "ArrowDown": this.ensureCaret(); this.move(this.caret + 1, extend); return true;
      case "ArrowLeft": case "ArrowUp": this.ensureCaret(); this.move(this.caret - 1, extend); return true;
      case "Home": this.move(0, extend); return true;
      case "End": this.move(this.words.length - 1, extend); return true;
      case "Delete": case "Backspace":
        this.ensureCaret();
        var index = this.spanAt(this.caret);
        if (index < 0) { announce("No marked span here."); return true; }
        removeSpan(state.spanTexts.indexOf(this), index);
        this.showSelection(true);
        return true;
      default:
        return false;
    }
  };

  function spanTextOf(target) {
    return state.spanTexts.find(function (spanText) { return spanText.element === target; }) || null;
  }

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
        remove.setAttribute("aria-label", "Remove this span: “" + quote.textContent + "”");
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

  function spanCount() { return state.spanTexts.reduce(function (sum, spanText) { return sum + spanText.spans.length; }, 0); }
  function spansWord(count) { return count + " span" + (count === 1 ? "" : "s") + " marked."; }

  function markSelection() {
    var selection = window.getSelection();
    for (var index = 0; index < state.spanTexts.length; index++) {
      var spanText = state.spanTexts[index];
      var span = spanText.rangeOf(selection);
      if (span) {
        var merged = spanText.add(span);
        selection.removeAllRanges();
        renderSpans();
        clearProblem();
        announce("Marked “" + spanText.text.slice(merged.start, merged.end) + "”. " + spansWord(spanCount()));
        return;
      }
    }
    var noun = state.spanTexts[0] ? state.spanTexts[0].noun : "text";
    showProblem("Select some words of the " + noun + " first (with the mouse, or Tab to the text and use Shift+arrows), then press " + markKey() + ".");
  }

  function removeSpan(textIndex, index) {
    var spanText = state.spanTexts[textIndex];
    if (!spanText) return;
    var removed = spanText.remove(index);
    renderSpans();
    if (removed) announce("Removed “" + spanText.text.slice(removed.start, removed.end) + "”. " + spansWord(spanCount()));
  }

  /* Says what happened with spans, in the span tools' status line (a polite live region). */
  function announce(message) {
    var status = document.querySelector(".span-status");
    if (status) status.textContent = message;
  }

  /* The marked texts become keyboard-reachable text boxes (read-only: arrows select words). */
  function wireSpanTexts(page) {
    state.spanTexts = all(page, "[data-span-target]").map(function (element) { return new SpanText(element); });
    state.spanTexts.forEach(function (spanText) {
      var element = spanText.element;
      element.tabIndex = 0;
      element.setAttribute("role", "textbox");
      element.setAttribute("aria-readonly", "true");
      element.setAttribute("aria-multiline", "true");
      element.setAttribute("aria-label", "The " + spanText.noun + " to mark spans in");
      element.setAttribute("aria-describedby", "span-help");
      element.addEventListener("focus", function () {
        // From the keyboard, start on a word; a click keeps the mouse's own selection.
        if (element.matches(":focus-visible")) spanText.move(spanText.caret < 0 ? 0 : spanText.caret, false);
      });
    });
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
    if (target.closest(".shortcuts-open")) { openShortcuts(); return; }
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

  /* ---- the list of shortcuts (a modal dialog) ---------------------------------------------------- */

  function openShortcuts() {
    var dialog = shortcutsDialog();
    if (!dialog || dialog.open) return false;
    state.returnFocus = document.activeElement;
    dialog.showModal();
    dialog.querySelector(".shortcuts-close").focus();
    return true;
  }

  function closeShortcuts() {
    var dialog = shortcutsDialog();
    if (dialog && dialog.open) dialog.close();
    returnFocus();
  }

  /* The focus goes back where it was before the list opened, at once (the dialog's "close"
   * event comes a task later, after keys pressed meanwhile), and only once. */
  function returnFocus() {
    var back = state.returnFocus;
    state.returnFocus = null;
    if (back && document.contains(back) && typeof back.focus === "function") back.focus({ preventScroll: true });
  }

  /* Keys while the list is open: Tab and Shift+Tab cycle inside it, Esc and ? close it. */
  function onShortcutsKey(event, dialog) {
    if (event.key === "Escape" || event.key === HELP_KEY) { event.preventDefault(); closeShortcuts(); return; }
    if (event.key !== "Tab") return;
    var stops = all(dialog, "button, a[href], [tabindex]:not([tabindex='-1'])");
    if (!stops.length) { event.preventDefault(); return; }
    var first = stops[0];
    var last = stops[stops.length - 1];
    var leaving = event.shiftKey ? document.activeElement === first || !dialog.contains(document.activeElement)
      : document.activeElement === last || !dialog.contains(document.activeElement);
    if (leaving) {
      event.preventDefault();
      (event.shiftKey ? last : first).focus();
    }
  }

  function wireShortcuts() {
    var dialog = shortcutsDialog();
    all(document, ".shortcuts-open").forEach(function (button) { button.hidden = false; });
    if (!dialog) return;
    dialog.addEventListener("close", returnFocus);  // closed by its Close button
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
    skip: function () { return submitIfShown("skip-form"); },
    flag: openFlagBox,
    unsure: toggleUnsure,
    undo: function () { return submitIfShown("undo-form"); },
  };

  function actionForKey(key) {
    var lowered = key.toLowerCase();
    var map = keys();
    var name = Object.keys(ACTIONS).find(function (action) { return map[action] && map[action] === lowered; });
    return name ? ACTIONS[name] : null;
  }

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
    if (!box.hidden) { box.hidden = true; button.textContent = "More context"; button.setAttribute("aria-expanded", "false"); return; }
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
      .then(function () { box.hidden = false; button.textContent = "Less context"; button.setAttribute("aria-expanded", "true"); });
  }

  /* ---- keyboard ---------------------------------------------------------------------------------- */

  function isTyping(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" ||
      (tag === "INPUT" && target.type !== "radio" && target.type !== "checkbox") ||
      Boolean(target && target.isContentEditable);
  }

  /* Esc from a text box: the flag box closes (focus on its toggle); any other box gives the
   * focus back to the answer. */
  function leaveBox(box) {
    var flagBox = box.closest("#flag-box");
    if (flagBox) {
      flagBox.open = false;
      flagBox.querySelector("summary").focus();
      return;
    }
    box.blur();
    focusAnswer();
  }

  function onTextBoxKey(event) {
    var box = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && box.form) {
      event.preventDefault();
      box.form.requestSubmit();
      return;
    }
    if (event.key === "Escape") { event.preventDefault(); leaveBox(box); }
  }

  function onKeyDown(event) {
    if (event.defaultPrevented) return;
    var dialog = shortcutsDialog();
    if (dialog && dialog.open) { onShortcutsKey(event, dialog); return; }
    if (isTyping(event.target)) { onTextBoxKey(event); return; }
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var spanText = spanTextOf(event.target);
    if (spanText) {
      if (event.key === "Escape") { event.preventDefault(); window.getSelection().removeAllRanges(); focusAnswer(); return; }
      if (spanText.onKey(event)) { event.preventDefault(); return; }
    }
    if (event.key === "Escape") {
      var openBox = event.target instanceof Element && event.target.closest("details[open]");
      if (openBox && openBox.id === "flag-box") { event.preventDefault(); openBox.open = false; openBox.querySelector("summary").focus(); }
      return;
    }
    if (event.key === HELP_KEY) { if (openShortcuts()) event.preventDefault(); return; }
    if (event.key.length === 1 && !event.shiftKey) {
      var action = actionForKey(event.key);
      if (action && action()) { event.preventDefault(); return; }
    }
    if (event.key === "Tab") return; // the browser's own order: every control, no trap
    if (kindHandler().onKey(event, api)) event.preventDefault();
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
      var excused = group.dataset.unless && document.getElementById(group.dataset.unless);
      if (excused && excused.checked) return false;
      return group.dataset.required === "true" && !inputsOf(group).some(function (input) { return input.checked; });
    });
    if (unanswered) return unanswered.dataset.missing;
    if (f.dataset.strictPlaces === "true" && !(document.getElementById("preference-none-good") || {}).checked) {
      var places = all(f, ".place-field input:checked").map(function (input) { return input.value; });
      if (new Set(places).size !== places.length) return "Each passage needs a place of its own: this study allows no ties.";
    }
    var box = rationale();
    if (box && box.required && !box.value.trim()) return "Write a short rationale first.";
    if (f.elements.spans && f.dataset.spansRequired === "true" && JSON.parse(f.elements.spans.value || "[]").length === 0) {
      return "Mark at least one span first: select the words, then press " + markKey() + ".";
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
   * of a qualification attempt (which has no form; start() then has nothing to wire). The
   * focus goes to the new content, and a live region says what came. */
  function swapPage(next) {
    var freshMain = next.querySelector("main");
    if (!freshMain) { window.location.reload(); return; }
    document.querySelector("main").replaceWith(freshMain);
    var oldMessages = document.querySelector(".messages-box");
    var newMessages = next.querySelector(".messages-box");
    if (oldMessages) oldMessages.remove();
    if (newMessages) freshMain.before(newMessages);
    document.title = next.title;
    start();
    freshMain.focus({ preventScroll: true });
    var progress = document.getElementById("progress-text");
    var said = newMessages ? newMessages.textContent.trim() + " " : "";
    pageAnnouncer().textContent = said + (progress ? "Next item; " + progress.textContent + " done." : document.title);
  }

  function pageAnnouncer() {
    var region = document.getElementById("page-announcer");
    if (!region) {
      region = document.createElement("p");
      region.id = "page-announcer";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.appendChild(region);
    }
    return region;
  }

  /* ---- wiring -------------------------------------------------------------------------------- */

  var api = {
    form: form, groups: groups, activate: activate, pick: pick, focusAnswer: focusAnswer,
    missingPart: missingPart, showProblem: showProblem, keys: keys,
  };

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
    wireSpanTexts(page);
    all(page, ".span-tools").forEach(function (tools) { tools.hidden = false; });
    all(page, ".more-context-toggle").forEach(function (button) { button.hidden = false; button.setAttribute("aria-expanded", "false"); });
    wireShortcuts();
    startUndoCountdown();
    if (f) {
      // The script explains what is missing itself (missingPart), in the page's words.
      f.noValidate = true;
      f.classList.toggle("several-groups", groups().length > 1);
      f.addEventListener("submit", onSubmit);
      f.addEventListener("change", function (event) {
        // A click (or Space) on an option: with auto-advance, a complete answer goes.
        if (event.target instanceof HTMLInputElement && event.target.closest(".key-group")) {
          activate(groups().indexOf(event.target.closest(".key-group")));
          clearProblem();
          advanceIfComplete(event.target);
        }
      });
      activate(0);
      renderSpans();
    }
  }

  window.MarginaliaAnnotate = { registerKind: registerKind };

  document.addEventListener("keydown", onKeyDown);
  document.addEventListener("click", onClick);
  // The group holding the focus is the active one (Tab moves it, so option keys follow).
  document.addEventListener("focusin", function (event) {
    var group = event.target instanceof Element && event.target.closest(".key-group");
    if (group) activate(groups().indexOf(group));
  });
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
