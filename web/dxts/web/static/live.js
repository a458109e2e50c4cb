// Keeps a page current without reloading it: every element with data-live="URL" is replaced
// by a fresh copy of its fragment every few seconds (the interval is the page's data-every,
// set by the server), while the tab is visible. A session that has ended reloads the page,
// which then asks to sign in again.
//
// The page says how fresh it is: "updated N s ago" (#freshness) counts up from the last
// fragment that arrived, and when a refresh fails (the server stopped, an error, no answer
// within the timeout) the #stale banner says since when the page has not been updated, until
// a refresh succeeds again. Nothing is swallowed: a page that is not live says so.
(function () {
  "use strict";
  var every = 2000;
  var lastOk = Date.now();
  var failure = "";

  function seconds(ms) { return Math.max(0, Math.round(ms / 1000)); }

  function show() {
    var freshness = document.getElementById("freshness");
    var stale = document.getElementById("stale");
    var ago = seconds(Date.now() - lastOk);
    if (freshness) { freshness.textContent = "updated " + ago + " s ago"; }
    if (!stale) { return; }
    if (failure) {
      stale.hidden = false;
      stale.textContent = "Not updating: " + failure + ". What you see is " + ago +
        " s old (last updated " + new Date(lastOk).toLocaleTimeString() + "); retrying.";
      document.body.dataset.stale = "true";
    } else {
      stale.hidden = true;
      document.body.dataset.stale = "false";
    }
  }

  function follow(element) {
    function tick() {
      if (document.hidden) { setTimeout(tick, every); return; }
      var controller = new AbortController();
      var timer = setTimeout(function () { controller.abort(); }, Math.max(4000, 2 * every));
      fetch(element.dataset.live, {
        credentials: "same-origin", headers: { "X-Fragment": "1" }, signal: controller.signal
      })
        .then(function (response) {
          if (response.status === 401) { window.location.reload(); return null; }
          if (!response.ok) { throw new Error("the server answered " + response.status); }
          return response.text();
        })
        .then(function (html) {
          if (html !== null) {
            element.innerHTML = html;
            element.dataset.refreshed = String(Date.now());
            lastOk = Date.now();
            failure = "";
          }
        })
        .catch(function (error) {
          failure = error && error.name === "AbortError" ? "the server did not answer"
            : (error && error.message && error.message.indexOf("answered") >= 0 ? error.message
              : "the server cannot be reached");
        })
        .finally(function () { clearTimeout(timer); show(); setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    every = parseInt(document.body.dataset.every || "2000", 10);
    var live = document.querySelectorAll("[data-live]");
    if (!live.length) { return; }
    live.forEach(follow);
    var freshness = document.getElementById("freshness");
    if (freshness) { freshness.hidden = false; }
    show();
    setInterval(show, 1000);
  });
})();
