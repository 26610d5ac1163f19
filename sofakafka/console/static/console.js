// Key scan progress: polls the job until it is done, then reloads the page to show the matches.
(function () {
  "use strict";
  var box = document.getElementById("scan");
  if (!box || box.dataset.done === "true") { return; }
  var bar = document.getElementById("scan-progress");
  var scanned = document.getElementById("scan-scanned");
  var matches = document.getElementById("scan-matches");
  function poll() {
    fetch("/api/jobs/" + encodeURIComponent(box.dataset.job), {credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (s) {
        if (s.error) { document.getElementById("scan-outcome").textContent = s.error; return; }
        bar.value = s.percent;
        scanned.textContent = s.scanned.toLocaleString("en-US");
        matches.textContent = s.matches;
        if (s.done) { window.location.reload(); } else { window.setTimeout(poll, 400); }
      })
      .catch(function () { window.setTimeout(poll, 1500); });
  }
  window.setTimeout(poll, 300);
}());
