// The recruiting page says what naming annotators will do before staff save: which of the
// people who have worked on the study would be refused (those granted it keep their access).
(function () {
  "use strict";
  const select = document.getElementById("id_annotators");
  const warning = document.getElementById("narrowing-warning");
  const data = document.getElementById("study-workers");
  if (!select || !warning || !data) return;
  const workers = JSON.parse(data.textContent);

  function update() {
    const chosen = new Set(Array.from(select.selectedOptions, (option) => Number(option.value)));
    if (chosen.size === 0) {
      warning.hidden = true;
      warning.textContent = "";
      return;
    }
    const refused = workers.filter((worker) => !chosen.has(worker.id));
    let text =
      "Saving with this selection closes the study to every annotator not selected; " +
      "the accounts it was granted to (invitations, crowd participants) keep their access.";
    if (refused.length) {
      const names = refused.map((worker) => `${worker.username} (${worker.judged} judged)`);
      const who = refused.length === 1 ? "1 person who has worked on it" : `${refused.length} people who have worked on it`;
      text += ` ${who} would be refused: ${names.join(", ")}.`;
    }
    warning.textContent = text;
    warning.hidden = false;
  }

  select.addEventListener("change", update);
  update();
})();
