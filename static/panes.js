/* The page's panes: the separators that resize them (mouse, touch or keyboard: a WAI-ARIA
   window splitter), and up to three stages side by side ("open beside" keeps a stage in the next
   free pane; "×" closes a kept one). Sizes are set through the CSSOM (element.style), which the
   page's Content-Security-Policy allows; no style attribute is written. */
(function () {
  "use strict";
  var SIDES = ["pane2", "pane3"];
  var STEP = 24, BIG_STEP = 120, MIN = 120;  // pixels

  // --- resizing -----------------------------------------------------------------------------------
  function sized(splitter) {
    // the element a separator resizes: the one before it (the editor, or the pane on its left)
    return splitter.previousElementSibling;
  }
  function room(splitter) {
    return splitter.parentElement.getBoundingClientRect().width;
  }
  function setWidth(splitter, px) {
    var el = sized(splitter), total = room(splitter);
    var width = Math.max(MIN, Math.min(total - MIN - splitter.offsetWidth, px));
    el.style.flex = "0 0 " + Math.round(width) + "px";
    splitter.setAttribute("aria-valuenow", String(Math.round(100 * width / total)));
  }
  document.addEventListener("pointerdown", function (e) {
    var splitter = e.target.closest && e.target.closest(".splitter");
    if (!splitter || e.button !== 0) { return; }
    e.preventDefault();
    splitter.setPointerCapture(e.pointerId);
    splitter.classList.add("dragging");
    var start = e.clientX, width = sized(splitter).getBoundingClientRect().width;
    function move(ev) { setWidth(splitter, width + ev.clientX - start); }
    function up() {
      splitter.classList.remove("dragging");
      splitter.removeEventListener("pointermove", move);
      splitter.removeEventListener("pointerup", up);
      splitter.removeEventListener("pointercancel", up);
    }
    splitter.addEventListener("pointermove", move);
    splitter.addEventListener("pointerup", up);
    splitter.addEventListener("pointercancel", up);
  });
  document.addEventListener("keydown", function (e) {
    var splitter = e.target.closest && e.target.closest(".splitter");
    if (!splitter) { return; }
    var width = sized(splitter).getBoundingClientRect().width, step = e.shiftKey ? BIG_STEP : STEP;
    var to = {ArrowLeft: width - step, ArrowRight: width + step, Home: 0, End: Infinity}[e.key];
    if (to === undefined) { return; }
    e.preventDefault();
    setWidth(splitter, to);
  });

  // --- stages kept beside the open one --------------------------------------------------------------
  function sidePane(id) { return document.getElementById(id); }
  function isEmpty(pane) { return !pane.querySelector(".artifact"); }
  function labelSide(pane) {
    var art = pane.querySelector(".artifact");
    pane.setAttribute("aria-label", art ? "kept beside: " + (art.dataset.title || art.dataset.key) : "empty pane");
  }
  function openBeside(url) {
    // the first free pane beside the open stage; when both are taken, the last one is replaced
    var target = SIDES.map(sidePane).filter(function (p) { return p && isEmpty(p); })[0] || sidePane("pane3");
    if (!target) { return; }
    htmx.ajax("GET", url, {target: target, swap: "innerHTML"});
  }
  function close(pane) {
    pane.replaceChildren();
    var second = sidePane("pane2"), third = sidePane("pane3");
    if (pane === second && third && !isEmpty(third)) {
      // keep the kept stages packed to the left: the third moves into the second's place
      while (third.firstChild) { second.appendChild(third.firstChild); }
    }
    SIDES.map(sidePane).forEach(function (p) { if (p) { labelSide(p); p.style.flex = ""; } });
    var main = document.getElementById("pane");
    if (main) { main.style.flex = ""; main.focus(); }
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest(".artifact .to-side");
    if (link) {
      e.preventDefault();
      openBeside(link.dataset.url);
      return;
    }
    var button = e.target.closest && e.target.closest(".pane.side .close-pane");
    if (button) { close(button.closest(".pane")); }
  });
  document.body.addEventListener("htmx:afterSettle", function (e) {
    var target = e.detail.target;
    if (target && target.classList && target.classList.contains("side")) { labelSide(target); }
  });
})();
