// Keeps a page current without reloading it: every element with data-live="URL" is replaced
// by a fresh copy of its fragment every few seconds (the interval is the page's data-every,
// set by the server), while the tab is visible. A session that has ended reloads the page,
// which then asks to sign in again.
(function () {
  "use strict";
  function follow(element) {
    var every = parseInt(document.body.dataset.every || "2000", 10);
    function tick() {
      if (document.hidden) { setTimeout(tick, every); return; }
      fetch(element.dataset.live, { credentials: "same-origin", headers: { "X-Fragment": "1" } })
        .then(function (response) {
          if (response.status === 401) { window.location.reload(); return null; }
          return response.ok ? response.text() : null;
        })
        .then(function (html) {
          if (html !== null) {
            element.innerHTML = html;
            element.dataset.refreshed = String(Date.now());
          }
        })
        .catch(function () { /* the next tick tries again */ })
        .finally(function () { setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(follow);
  });
})();
