// The data manager's tables: a "select every row on this page" box (shown only with JavaScript;
// without it each row's own box still works) and the count of rows chosen beside the actions.
(function () {
  const table = document.querySelector("table.data-table");
  const all = document.getElementById("select-page");
  if (!table || !all) return;
  const boxes = Array.from(table.querySelectorAll("input[name=items]"));
  const counter = document.getElementById("selected-count");
  function refresh() {
    const chosen = boxes.filter((box) => box.checked).length;
    boxes.forEach((box) => box.closest("tr").classList.toggle("selected", box.checked));
    all.checked = chosen > 0 && chosen === boxes.length;
    all.indeterminate = chosen > 0 && chosen < boxes.length;
    if (counter) counter.textContent = chosen + " chosen on this page";
  }
  all.hidden = false;
  all.closest("th").querySelector(".select-hint").hidden = true;
  all.addEventListener("change", () => {
    boxes.forEach((box) => { box.checked = all.checked; });
    refresh();
  });
  boxes.forEach((box) => box.addEventListener("change", refresh));
  refresh();
})();
