// Live jobs on any page. An element with data-job="ID" and data-finished="0" polls
// /api/jobs/ID/ once a second and shows what it finds in its descendants: .job-status,
// .progress (the bar), .job-percent, .job-message (the error's first line once failed), and one
// row per shard [data-shard="ID"] with the same classes. When the job ends, the elements whose
// ids its data-refresh lists are replaced by their versions in a fresh copy of this page (the
// run it finished, the judge's results, the buttons), or the page reloads for data-refresh="page".
(function () {
  if (window.MarginaliaJobs) return;
  const INTERVAL = 1000;

  function text(job) {
    return job.error ? job.error.split("\n")[0] : job.message;
  }

  // The descendants that show this job (or shard), not a shard row's or another job's inside it.
  function own(element, selector) {
    return Array.from(element.querySelectorAll(selector)).filter(function (found) {
      return found.closest("[data-job], [data-shard]") === element;
    });
  }

  function show(element, job) {
    const percent = Math.round(job.progress * 100);
    own(element, ".progress").forEach(function (bar) {
      bar.setAttribute("aria-valuenow", percent);
      bar.firstElementChild.style.width = percent + "%";
    });
    own(element, ".job-status").forEach(function (node) { node.textContent = job.status; });
    own(element, ".job-percent").forEach(function (node) { node.textContent = percent + " %"; });
    own(element, ".job-message").forEach(function (node) { node.textContent = text(job); });
    (job.shards || []).forEach(function (shard) {
      const row = element.querySelector('[data-shard="' + shard.id + '"]');
      if (row) show(row, shard);
    });
  }

  function refresh(element) {
    const targets = (element.dataset.refresh || "").split(/\s+/).filter(Boolean);
    if (!targets.length) return;
    if (targets.indexOf("page") !== -1) { window.location.reload(); return; }
    fetch(window.location.href, {credentials: "same-origin", headers: {Accept: "text/html"}})
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (!html) return;
        const fresh = new DOMParser().parseFromString(html, "text/html");
        targets.forEach(function (id) {
          const current = document.getElementById(id), replacement = fresh.getElementById(id);
          if (current && replacement) {
            const adopted = document.importNode(replacement, true);
            current.replaceWith(adopted);
            watch(adopted);
          }
        });
      });
  }

  function poll(element) {
    if (element.dataset.finished === "1" || !document.contains(element)) return;
    fetch("/api/jobs/" + element.dataset.job + "/", {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (job) {
        if (!job || !document.contains(element)) return;
        show(element, job);
        if (job.is_finished) {
          element.dataset.finished = "1";
          refresh(element);
        }
      })
      .finally(function () { setTimeout(function () { poll(element); }, INTERVAL); });
  }

  function watch(root) {
    const found = Array.from(root.querySelectorAll("[data-job]"));
    if (root.matches && root.matches("[data-job]")) found.push(root);
    found.filter(function (element) { return element.dataset.finished === "0"; }).forEach(poll);
  }

  window.MarginaliaJobs = {watch: watch};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { watch(document); });
  else watch(document);
})();
