// The adjudication workspace's keys (templates/annotation/adjudication_item.html): the answer
// options' own keys (data-key: 1-9, 0, a-j, a scale's digits, y/n) pick or toggle an answer,
// Shift with a digit picks a reason (data-reason-key; by the key's code, so on any layout),
// "/" goes to the note, Enter decides (Ctrl+Enter from the note), "x" sends the item back,
// "]" and "[" open the next and previous item of the queue. Keys typed into the note stay text.
(function () {
  "use strict";
  const form = document.getElementById("decision-form");
  if (!form) {
    return;
  }
  const answers = Array.from(form.querySelectorAll("input[data-key]")).filter((input) => input.dataset.key);
  const reasons = Array.from(form.querySelectorAll("input[data-reason-key]")).filter((input) => input.dataset.reasonKey);
  const note = document.getElementById("id_note");
  const decide = document.getElementById("decide");
  const sendBack = document.getElementById("send-back");

  function typing(element) {
    return element && (element.tagName === "TEXTAREA" || (element.tagName === "INPUT" && element.type === "text"));
  }

  function follow(id) {
    const link = document.getElementById(id);
    if (link) {
      window.location.assign(link.href);
    }
  }

  function submitWith(button) {
    if (button && !button.disabled) {
      form.requestSubmit(button);
    }
  }

  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      submitWith(decide);
      return;
    }
    if (typing(event.target)) {
      if (event.key === "Escape") {
        event.target.blur();
      }
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    if (event.shiftKey && /^Digit[1-9]$/.test(event.code)) {
      const reason = reasons.find((input) => input.dataset.reasonKey === event.code.slice(5));
      if (reason) {
        event.preventDefault();
        reason.checked = true;
        reason.focus();
      }
      return;
    }
    if (event.key === "Enter") {
      const target = event.target;
      if (target && (target.tagName === "BUTTON" || target.tagName === "A")) {
        return; // the focused control's own action
      }
      event.preventDefault();
      submitWith(decide);
      return;
    }
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    const answer = event.shiftKey ? null : answers.find((input) => input.dataset.key === key);
    if (answer) {
      event.preventDefault();
      answer.checked = answer.type === "checkbox" ? !answer.checked : true;
      answer.focus();
      return;
    }
    if (key === "/") {
      event.preventDefault();
      note.focus();
    } else if (key === "x") {
      event.preventDefault();
      submitWith(sendBack);
    } else if (key === "]") {
      follow("next-item");
    } else if (key === "[") {
      follow("previous-item");
    }
  });
})();
