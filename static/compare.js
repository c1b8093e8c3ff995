/* A comparison's page (/c/<id>): the stage of A and the stage of B it diffs, and how (Diff or
   Side by side: a WAI-ARIA tablist, arrow keys move and activate), kept in the address as
   #a=<key>&b=<key>&view=<diff|side> so a link shows the same pair. No inline script: the page's data
   is the JSON block #compare-data. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("compare-data").textContent);
  var form = document.getElementById("compare-form");
  if (!form || !data.finished) { return; }  // still compiling: the status block polls, then the page reloads
  var selectA = document.getElementById("stage-a"), selectB = document.getElementById("stage-b");
  var view = document.getElementById("compare-view");
  var pane = document.getElementById("compare-pane");
  var tabs = Array.prototype.slice.call(document.querySelectorAll(".view-tabs [role=tab]"));

  function has(select, key) {
    return Array.prototype.some.call(select.options, function (o) { return o.value === key; });
  }
  function setView(name) {
    view.value = name;
    tabs.forEach(function (tab) {
      var on = tab.dataset.view === name;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
      tab.classList.toggle("active", on);
      if (on) { pane.setAttribute("aria-labelledby", tab.id); }
    });
  }
  function load() {
    if (!selectA.value || !selectB.value) { return; }
    htmx.trigger(form, "submit");
  }
  function remember() {
    var hash = "#a=" + encodeURIComponent(selectA.value) + "&b=" + encodeURIComponent(selectB.value) +
      "&view=" + view.value;
    if (location.hash !== hash) { history.replaceState(history.state, "", location.pathname + location.search + hash); }
  }

  tabs.forEach(function (tab) {
    tab.addEventListener("click", function () { setView(tab.dataset.view); load(); });
  });
  document.querySelector(".view-tabs").addEventListener("keydown", function (e) {
    var at = tabs.indexOf(e.target);
    var to = {ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1}[e.key];
    if (at < 0 || to === undefined) { return; }
    e.preventDefault();
    var next = tabs[(to + tabs.length) % tabs.length];
    next.focus();
    setView(next.dataset.view);
    load();
  });
  document.body.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail.target === pane) { remember(); }
  });

  // a row of the stage pairs shows that pair
  var pairs = document.getElementById("stage-pairs");
  if (pairs) {
    pairs.addEventListener("click", function (e) {
      var button = e.target.closest(".show-pair");
      if (!button) { return; }
      var row = button.closest("tr");
      if (!has(selectA, row.dataset.a) || !has(selectB, row.dataset.b)) { return; }
      selectA.value = row.dataset.a; selectB.value = row.dataset.b;
      load();
      pane.scrollIntoView({block: "start"});
    });
  }

  // the address first (a shared link), else the pair the server chose
  var params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (params.get("a") && has(selectA, params.get("a"))) { selectA.value = params.get("a"); }
  if (params.get("b") && has(selectB, params.get("b"))) { selectB.value = params.get("b"); }
  setView(params.get("view") === "side" ? "side" : "diff");
  document.addEventListener("DOMContentLoaded", load);
})();
