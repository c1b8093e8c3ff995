/* The IDE's behaviour: the editor, compile on Ctrl+Enter, the stage tab bar (a WAI-ARIA tablist),
   live updates of a running job, source-line linking, the open stage and line in the address
   (#stage=<key>&line=<n>), share. No inline script anywhere: the page's data comes from the JSON
   block #irscope-data, so it runs under a strict Content-Security-Policy. Resizable panes and the
   stages kept beside the open one are static/panes.js. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("irscope-data").textContent);
  var form = document.getElementById("compile-form");
  var textarea = document.getElementById("source");
  var languageSelect = document.getElementById("language");
  // Tab indents inside the editor, so the keyboard needs a way out (WCAG 2.1.2, no keyboard trap):
  // Esc, then Tab or Shift+Tab, moves the focus on as anywhere else; or "Tab moves focus" (the
  // toggle under the editor, remembered by this browser) makes Tab always move it, as in Compiler
  // Explorer's editor.
  var TAB_SETTING = "irscope.tabMovesFocus";
  var tabToggle = document.getElementById("tab-moves-focus");
  var tabMoves = false;
  try { tabMoves = localStorage.getItem(TAB_SETTING) === "1"; } catch (e) { /* storage off: not remembered */ }
  var escaped = false;       // Esc was the last key in the editor: the next Tab leaves it
  // Tab and Shift+Tab are the editor's own keys below; CodeMirror's basic keymap must not take a
  // Tab they pass on (it would insert a tab character instead of letting the browser move on).
  delete CodeMirror.keyMap.basic.Tab;
  delete CodeMirror.keyMap.basic["Shift-Tab"];
  function tabLeaves() { return tabMoves || escaped; }
  var editor = CodeMirror.fromTextArea(textarea, {
    lineNumbers: true, mode: textarea.dataset.mode || "python", indentUnit: 4,
    readOnly: data.embed ? true : false,  // ?embed=1 (slides): shown, not edited
    gutters: ["CodeMirror-linenumbers", "error-gutter", "break-gutter"],
    extraKeys: {
      "Ctrl-Enter": compile, "Cmd-Enter": compile,
      Tab: function (cm) { if (tabLeaves()) { return CodeMirror.Pass; } cm.replaceSelection("    "); },
      "Shift-Tab": function (cm) { if (tabLeaves()) { return CodeMirror.Pass; } cm.execCommand("indentLess"); },
      Esc: function () { escaped = true; editorPane.classList.add("escaped"); }
    }
  });
  var editorPane = document.getElementById("editor-pane");
  function unescape() { escaped = false; editorPane.classList.remove("escaped"); }
  editor.on("keydown", function (cm, e) {
    if (e.key !== "Escape" && e.key !== "Tab" && e.key !== "Shift") { unescape(); }
  });
  editor.on("blur", unescape);
  if (tabToggle) {
    tabToggle.checked = tabMoves;
    tabToggle.addEventListener("change", function () {
      tabMoves = tabToggle.checked;
      try { localStorage.setItem(TAB_SETTING, tabMoves ? "1" : "0"); } catch (e) { /* not remembered */ }
    });
  }
  var activeKey = null;      // the stage open in #pane
  var opened = false;        // a stage was opened (by the user or by autoOpen) for the job shown
  var markedLines = [], errorLine = null, hotLines = [], breakLines = [], breakHandles = [];
  // The source the results were compiled from: an edit since then makes them stale, and their line
  // links are switched off (a colour must never land on a line that moved) until the next compile.
  var compiledSource = document.getElementById("job-bar") ? editor.getValue() : null;
  var stale = false;
  var staleNote = document.getElementById("stale-note");
  function setStale(on, redraw) {
    if (on === stale) { return; }
    stale = on;
    document.getElementById("results").classList.toggle("stale", on);
    if (staleNote) { staleNote.hidden = !on; staleNote.parentElement.classList.toggle("stale-shown", on); }
    if (on) {
      clearHot(); clearEditorMarks(); markBreaks([]);
      editor.clearGutter("error-gutter");
    } else if (redraw) {  // the edit was undone: the results fit the source again
      errorLine = -1;
      refresh(true);
    }
  }
  if (staleNote && window.ResizeObserver) {
    // the sticky stage bar goes just under the note, however many lines the note wraps to
    new ResizeObserver(function () {
      staleNote.parentElement.style.setProperty("--stale-h", staleNote.offsetHeight + "px");
    }).observe(staleNote);
  }
  editor.on("change", function () {
    if (compiledSource !== null) { setStale(editor.getValue() !== compiledSource, true); }
  });

  function compile() { if (!data.embed) { htmx.trigger(form, "submit"); } }
  document.addEventListener("keydown", function (e) {
    // inside the editor CodeMirror's own Ctrl-Enter binding has compiled already
    if (e.defaultPrevented || editor.hasFocus()) { return; }
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); compile(); }
  });
  form.addEventListener("htmx:configRequest", function (e) {
    if (e.detail.elt === form) { e.detail.parameters.source = editor.getValue(); }
  });

  languageSelect.addEventListener("change", function () {
    var option = languageSelect.options[languageSelect.selectedIndex];
    var examples = data.examples;
    var current = editor.getValue().trim();
    var isExample = !current || Object.keys(examples).some(function (k) { return examples[k].trim() === current; });
    editor.setOption("mode", option.dataset.mode || "python");
    if (isExample) { editor.setValue(examples[languageSelect.value] || ""); }
  });

  // --- source-line colours and linking -------------------------------------------------------
  function colourOf(line) { return "c" + (line % 10); }
  function clearEditorMarks() {
    markedLines.forEach(function (m) { editor.removeLineClass(m[0], "background", m[1]); });
    markedLines = [];
  }
  function mark(line, cls) {
    // by the line's handle, so the mark is taken off the line it was put on even after an edit
    if (line < 1 || line > editor.lineCount()) { return; }
    markedLines.push([editor.addLineClass(line - 1, "background", cls), cls]);
  }
  // lines with a source line, and lines of IR stages with a compiler location (static/ir-links.js)
  var LINKED_LINE = "#results .pane pre.code .ln[data-src], #results .pane pre.code .ln[data-locs]";
  function artifactLines() { return document.querySelectorAll(LINKED_LINE); }
  function paintPane() {
    clearEditorMarks();
    if (stale) { return; }
    var seen = {};
    artifactLines().forEach(function (el) {
      if (!el.dataset.src) { return; }
      var src = parseInt(el.dataset.src, 10);
      el.classList.add(colourOf(src));
      (el.dataset.srcs || "").split(" ").forEach(function (s) {
        var n = parseInt(s, 10);
        if (n && !seen[n]) { seen[n] = true; mark(n, colourOf(n)); }
      });
    });
    if (errorLine) { mark(errorLine, "error-line"); }
  }
  function clearHot() {
    hotLines.forEach(function (el) { el.classList.remove("hot"); });
    hotLines = [];
    editor.getAllMarks().forEach(function (m) { if (m.className === "hot-line") { m.clear(); } });
  }
  function lightSource(line, scroll) {
    lightLines(function (el) { return (" " + (el.dataset.srcs || "") + " ").indexOf(" " + line + " ") >= 0; },
               line, scroll);
  }
  function lightLines(isPartner, line, scroll) {
    // the artifact lines `isPartner` accepts, in every open pane, and the editor's `line`
    clearHot();
    if (stale) { return; }
    var first = null;
    artifactLines().forEach(function (el) {
      if (isPartner(el)) { el.classList.add("hot"); hotLines.push(el); first = first || el; }
    });
    if (line >= 1 && line <= editor.lineCount()) {
      editor.markText({line: line - 1, ch: 0}, {line: line - 1, ch: editor.getLine(line - 1).length}, {className: "hot-line"});
    }
    if (scroll && first) { first.scrollIntoView({block: "center"}); }
  }
  document.addEventListener("mouseover", function (e) {
    var el = e.target.closest && e.target.closest(LINKED_LINE);
    if (!el) { return; }
    var line = el.dataset.src ? parseInt(el.dataset.src, 10) : 0;
    // a line of an IR stage lights the lines it became in the other IR stages (ir-links.js)
    if (el.dataset.locs && window.irscopeIrLinks) { lightLines(window.irscopeIrLinks.partnerTest(el), line, false); }
    else { lightSource(line, false); }
  });
  document.addEventListener("click", function (e) {
    var el = e.target.closest && e.target.closest("#results .pane pre.code .ln[data-src]");
    if (el && !stale && !e.target.closest(".ln > .no")) {
      var line = parseInt(el.dataset.src, 10);
      editor.scrollIntoView({line: line - 1, ch: 0}, 80);
      editor.setCursor({line: line - 1, ch: 0});
    }
    var go = e.target.closest && e.target.closest(".goto-line");
    if (go) { e.preventDefault(); var n = parseInt(go.dataset.line, 10); editor.setCursor({line: n - 1, ch: 0}); editor.focus(); }
    var tab = e.target.closest && e.target.closest(".stage-tabs [role=tab]");
    if (tab) {
      activeKey = tab.dataset.key; opened = true; markActive();
      document.getElementById("pane").setAttribute("aria-label", tab.textContent.trim());
      setAddress(activeKey, null);
    }
  });
  editor.getWrapperElement().addEventListener("mousemove", function (e) {
    var pos = editor.coordsChar({left: e.clientX, top: e.clientY}, "window");
    lightSource(pos.line + 1, false);
  });
  editor.on("cursorActivity", function () { lightSource(editor.getCursor().line + 1, true); });

  // a lesson's explanation in a narrow window: its first sentence, the rest one click away
  if (window.matchMedia("(max-width: 900px)").matches) {
    document.querySelectorAll(".lesson-note details.lesson-explain[open]").forEach(function (d) { d.open = false; });
  }

  // --- the tab bar: one tablist; tabs and stage lists are one roving-focus row -----------------
  function tabBar() { return document.querySelector("#results .stage-tabs"); }
  function barItems() {
    // the row's members: tabs (those of a kernel picker's other kernels are hidden), lists, pickers
    var bar = tabBar();
    return bar ? Array.prototype.slice.call(bar.querySelectorAll("[role=tab], .stage-select, .kernel-select"))
      .filter(function (item) { return !item.hidden; }) : [];
  }
  // --- kernel pickers: a group of several GPU kernels shows one kernel's tabs at a time -----------
  function showKernel(select) {
    select.closest(".group").querySelectorAll("[role=tab][data-kernel]").forEach(function (tab) {
      tab.hidden = tab.dataset.kernel !== select.value;
    });
    select.title = select.value + "\n" + select.dataset.about;  // the picked kernel's whole name on hover
  }
  function showKernelOf(key) {
    // the picker follows the open stage (a link, the address or the kernels table can open any)
    document.querySelectorAll("#results .stage-tabs .kernel-select").forEach(function (select) {
      var tab = key ? Array.prototype.filter.call(select.closest(".group").querySelectorAll("[role=tab][data-kernel]"),
        function (t) { return t.dataset.key === key; })[0] : null;
      if (tab) { select.value = tab.dataset.kernel; }
      showKernel(select);
    });
  }
  function pickKernel(select) {
    // the same kind of stage of the picked kernel (its PTX after another's PTX), else its first
    showKernel(select);
    var tabs = Array.prototype.slice.call(select.closest(".group").querySelectorAll("[role=tab]:not([hidden])"));
    var kind = activeKey ? activeKey.split(":")[0] : "";
    var pick = tabs.filter(function (t) { return t.dataset.kernel && t.dataset.key.split(":")[0] === kind; })[0] ||
      tabs.filter(function (t) { return t.dataset.kernel; })[0];
    if (pick) { openStage(pick); }
  }
  function hasKey(select, key) {
    return Array.prototype.some.call(select.options, function (o) { return o.value === key; });
  }
  function markActive() {
    showKernelOf(activeKey);
    var items = barItems(), stop = null;
    items.forEach(function (item) {
      if (item.matches(".kernel-select")) { return; }
      var isActive = item.matches(".stage-select") ? hasKey(item, activeKey) : item.dataset.key === activeKey;
      if (item.matches(".stage-select")) {
        if (!isActive || item.value !== activeKey) { item.value = isActive ? activeKey : ""; }
        // the list says on hover what the stage it shows is (a compile id's frame, compile, attempt)
        var shown = item.options[item.selectedIndex];
        item.title = shown && shown.value ? (shown.title || shown.textContent) : item.getAttribute("aria-label");
      } else {
        item.setAttribute("aria-selected", isActive ? "true" : "false");
      }
      item.classList.toggle("active", isActive);
      if (isActive && !stop) { stop = item; }
    });
    // exactly one member of the row is reachable with Tab: the open stage's, else the first
    stop = stop || items[0];
    items.forEach(function (item) { item.tabIndex = item === stop ? 0 : -1; });
  }
  function activate(item) {
    if (item.matches("[role=tab]")) { htmx.trigger(item, "click"); return; }
    if (item.matches(".kernel-select")) { return; }  // arrows move past it; a pick is a change
    if (item.value) { openFromList(item); }
  }
  function openFromList(select) {
    activeKey = select.value; opened = true;
    var pane = document.getElementById("pane");
    // the list's hx-sync queues this behind a stage still loading, like a tab's click
    htmx.ajax("GET", select.options[select.selectedIndex].dataset.url, {source: select, target: pane, swap: "innerHTML"});
    pane.setAttribute("aria-label", select.options[select.selectedIndex].textContent);
    markActive();
    setAddress(activeKey, null);
  }
  document.addEventListener("keydown", function (e) {
    var bar = tabBar();
    if (!bar || !bar.contains(e.target)) { return; }
    var items = barItems(), at = items.indexOf(e.target.closest("[role=tab], .stage-select, .kernel-select"));
    if (at < 0) { return; }
    var to = {ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: items.length - 1}[e.key];
    if (to === undefined) { return; }
    e.preventDefault();
    var next = items[(to + items.length) % items.length];
    items.forEach(function (item) { item.tabIndex = item === next ? 0 : -1; });
    next.focus();
    activate(next);  // automatic activation: the pane follows the focus
  });
  document.addEventListener("change", function (e) {
    var select = e.target.closest && e.target.closest(".stage-select");
    if (select && select.value) { openFromList(select); }
    var picker = e.target.closest && e.target.closest(".kernel-select");
    if (picker) { pickKernel(picker); }
  });

  // --- a job's results: first useful stage, error line, share ------------------------------------
  function jobStatus() {
    var state = document.querySelector("#results .status .state");
    return state ? state.dataset.status : null;
  }
  function offeredStages() {
    // every stage on offer: tabs, and entries of the lists that large groups become
    return Array.prototype.slice.call(document.querySelectorAll(
      "#results .stage-tabs [role=tab], #results .stage-tabs .stage-select option[value]:not([value=''])"));
  }
  function keyOf(el) { return el.dataset.key || el.value; }
  function findStage(offered, key) {
    // a key, or a key without its :qualifier (the first stage of that kind), as the store reads it
    return offered.filter(function (el) { return keyOf(el) === key; })[0] ||
      (key.indexOf(":") < 0 ? offered.filter(function (el) { return keyOf(el).indexOf(key + ":") === 0; })[0] : null);
  }
  function openStage(pick) {
    opened = true;
    activeKey = keyOf(pick);
    if (pick.tagName === "OPTION") {
      var select = pick.closest("select");
      select.value = activeKey;
      openFromList(select);
    } else {
      htmx.trigger(pick, "click");
    }
    markActive();
  }
  function autoOpen() {
    // Opens one stage by itself, once per job shown; never replaces a pane already chosen. The
    // stage the address names comes first (once the job has it; a running job may not yet). Else
    // the job's own choice, made once it has ended by one rule on the server (the status line's
    // data-open-stage, app/ide.py: stage_to_open): a run watched live and its repeat answered from
    // the store open the same stage, whatever order the stages arrived in.
    var pane = document.getElementById("pane");
    if (opened || !pane || pane.querySelector(".artifact")) { return; }
    var offered = offeredStages();
    var pick = null;
    var status = jobStatus();
    var ended = status === "done" || status === "failed";
    if (wanted && wanted.stage) {
      pick = findStage(offered, wanted.stage);
      if (!pick && !ended) { return; }
      if (!pick) { wanted = null; }
    }
    if (!pick && !ended) { return; }
    if (!pick) {
      var state = document.querySelector("#results .status .state[data-open-stage]");
      var chosen = state ? state.dataset.openStage : "";
      if (!chosen && status === "failed") {
        // nothing helps beside the error (never the source echoed): the error box is the point,
        // the pane says so in one line instead of waiting for a stage
        var hint = pane.querySelector(".hint");
        if (hint && !hint.classList.contains("after-error")) {
          hint.classList.add("after-error");
          hint.textContent = "The job failed: the error above says why, and nothing opens beside it" +
            (offered.length ? "; pick a stage above to read it." : ".");
        }
        return;
      }
      pick = (chosen && findStage(offered, chosen)) || offered[0];
    }
    if (!pick) { return; }
    openStage(pick);
  }
  function showErrorLine() {
    // true when the error line changed (the editor's marks then need painting again)
    var err = document.querySelector("#results .error-box[data-error-line]");
    var line = err ? parseInt(err.dataset.errorLine, 10) : NaN;
    var was = errorLine;
    errorLine = isNaN(line) ? null : line;
    if (was === errorLine) { return false; }
    editor.clearGutter("error-gutter");
    if (errorLine) {
      var marker = document.createElement("span");
      marker.className = "CodeMirror-gutter-elt error-marker"; marker.textContent = "●";
      marker.title = "the job failed here";
      editor.setGutterMarker(errorLine - 1, "error-gutter", marker);
      showEditorLine(errorLine);
    }
    return true;
  }
  function markBreaks(lines) {
    // the graph breaks the job's summary names (.glance), marked in the editor as the job ends
    breakHandles.forEach(function (h) { editor.removeLineClass(h, "background", "break-line"); });
    editor.clearGutter("break-gutter");
    breakLines = lines.filter(function (n) { return n >= 1 && n <= editor.lineCount(); });
    breakHandles = breakLines.map(function (n) {
      return editor.addLineClass(n - 1, "background", "break-line");
    });
    breakLines.forEach(function (n) {
      var marker = document.createElement("span");
      marker.className = "CodeMirror-gutter-elt break-marker"; marker.textContent = "\u21af";  // ↯
      marker.title = "graph break: Dynamo split the graph at this line";
      editor.setGutterMarker(n - 1, "break-gutter", marker);
    });
  }
  function showBreaks() {
    var glance = document.querySelector("#results .glance[data-break-lines]");
    var lines = glance ? glance.dataset.breakLines.split(" ").map(Number).filter(Boolean) : [];
    if (lines.join(" ") !== breakLines.join(" ")) {
      markBreaks(lines);
      if (breakLines.length) { showEditorLine(breakLines[0]); }
    }
  }
  function showEditorLine(line) {
    // a marked line out of the editor's sight is scrolled into it; the cursor and the focus stay
    editor.scrollIntoView({line: line - 1, ch: 0}, 24);
  }
  function refresh(paneChanged) {
    // After every swap; the editor's line colours are painted again only when a pane or the
    // error line changed, not on each poll of a running job. Stale results mark nothing.
    if (!stale) {
      showBreaks();
      if (showErrorLine() || paneChanged) { paintPane(); }
    }
    markActive();
    var bar = document.getElementById("job-bar");
    var share = document.getElementById("share");
    if (bar) {
      share.disabled = false; share.dataset.job = bar.dataset.job;
      var compareLink = document.getElementById("compare-link");
      compareLink.href = "/compare?job=" + encodeURIComponent(bar.dataset.job);
      compareLink.removeAttribute("aria-disabled");
    }
    autoOpen();
    showWantedLine();
  }

  // --- live updates -------------------------------------------------------------------------------
  var focusedKey = null;  // the stage whose tab had the focus before an update redrew its group
  document.body.addEventListener("htmx:beforeSwap", function (e) {
    var elt = e.detail.elt;
    if (elt && elt.classList && elt.classList.contains("job-poll")) {
      // an answer for a job no longer shown (a new compile replaced it) changes nothing
      if (!document.body.contains(elt)) { e.detail.shouldSwap = false; return; }
      var focused = document.activeElement;
      var bar = tabBar();
      focusedKey = bar && bar.contains(focused) ? (focused.dataset.key || focused.value || null) : null;
    }
  });
  function revealStageTop(pane) {
    // A stage opened while the window was scrolled down (a row far down the kernels table): its
    // first line goes just under the sticky stage bar, never left above the window.
    var bar = tabBar();
    var gap = pane.getBoundingClientRect().top - (bar ? Math.max(0, bar.getBoundingClientRect().bottom) : 0);
    if (gap >= 0) { return; }
    for (var el = pane.parentElement; el && el !== document.body; el = el.parentElement) {
      var overflow = getComputedStyle(el).overflowY;
      if (el.scrollHeight > el.clientHeight && (overflow === "auto" || overflow === "scroll")) {
        el.scrollTop += gap;
        return;
      }
    }
    window.scrollBy(0, gap);
  }
  document.body.addEventListener("htmx:afterSettle", function (e) {
    var target = e.detail.target;
    var results = target && target.id === "results";
    if (results) { opened = false; activeKey = null; errorLine = -1; wanted = null; }
    if (target && target.id === "pane") { revealStageTop(target); }
    refresh(results || !!(target && target.closest && target.closest(".pane")));
    if (focusedKey && (document.activeElement === document.body || !document.activeElement)) {
      // a group that became a list took the focused tab with it: give the focus to the list
      var item = barItems().filter(function (i) {
        return i.dataset.key === focusedKey || (i.matches(".stage-select") && hasKey(i, focusedKey));
      })[0];
      if (item) { item.focus(); }
    }
    focusedKey = null;
  });
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt === form) {
      compiledSource = editor.getValue();
      setStale(false, false);  // the new job's results draw their own marks
      closeOptions(false);
      document.getElementById("share-url").value = "";
      document.querySelectorAll(".job-poll").forEach(function (p) { htmx.trigger(p, "htmx:abort"); });
    }
  });

  document.getElementById("share").addEventListener("click", function () {
    var job = this.dataset.job;
    if (!job) { return; }
    fetch("/api/shortlinks", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({job: job})})
      .then(function (r) { return r.json(); })
      .then(function (body) {
        var url = location.origin + body.url + location.hash;  // the open stage and line go along
        var out = document.getElementById("share-url");
        out.value = url; out.select();
        if (navigator.clipboard) { navigator.clipboard.writeText(url).catch(function () {}); }
      });
  });
  // --- the address: the open stage and the picked line in the URL --------------------------------
  // /z/<id>#stage=<key>&line=<n> opens that stage and scrolls to and marks that line; opening a
  // stage or clicking a line number writes the address (replaceState: no history entry, no load).
  function readAddress() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    var line = parseInt(params.get("line") || "", 10);
    return params.get("stage") ? {stage: params.get("stage"), line: isNaN(line) ? null : line} : null;
  }
  var wanted = readAddress();  // what the address asks for, until it is shown
  function setAddress(key, line) {
    var hash = "#stage=" + encodeURIComponent(key) + (line ? "&line=" + line : "");
    if (location.hash !== hash) { history.replaceState(history.state, "", location.pathname + location.search + hash); }
  }
  function pickLine(pane, line, scroll) {
    pane.querySelectorAll("pre.code .ln.picked").forEach(function (el) {
      el.classList.remove("picked"); el.removeAttribute("aria-current");
    });
    var el = pane.querySelector('pre.code .ln[data-line="' + line + '"]');
    if (!el) { return null; }
    el.classList.add("picked");
    el.setAttribute("aria-current", "location");
    if (scroll) { el.scrollIntoView({block: "center"}); }
    return el;
  }
  function showWantedLine() {
    if (!wanted) { return; }
    var art = document.querySelector("#pane .artifact");
    if (!art) { return; }
    var key = art.dataset.key;
    if (key !== wanted.stage && key.indexOf(wanted.stage + ":") !== 0) { return; }
    if (wanted.line) { pickLine(document.getElementById("pane"), wanted.line, true); }
    setAddress(key, wanted.line);  // the address names the stage by its whole key from now on
    wanted = null;
  }
  document.addEventListener("click", function (e) {
    var no = e.target.closest && e.target.closest("#results .pane pre.code .ln > .no");
    if (!no) { return; }
    var pane = no.closest(".pane"), ln = no.closest(".ln"), art = no.closest(".artifact");
    var line = parseInt(ln.dataset.line, 10);
    pickLine(pane, line, false);
    if (art && pane.id === "pane") { setAddress(art.dataset.key, line); }
  });
  window.addEventListener("hashchange", function () {
    // a link to #stage=... on this page (the lesson note): open that stage, then its line
    wanted = readAddress();
    if (!wanted) { return; }
    var pick = findStage(offeredStages(), wanted.stage);
    var art = document.querySelector("#pane .artifact");
    if (art && (art.dataset.key === wanted.stage || art.dataset.key.indexOf(wanted.stage + ":") === 0)) {
      showWantedLine();
    } else if (pick) {
      openStage(pick);
    }
  });

  // --- the lessons menu: a lesson opens at its permalink -----------------------------------------
  var lessonMenu = document.getElementById("lesson-menu");
  if (lessonMenu) {
    lessonMenu.addEventListener("change", function () {
      if (lessonMenu.value) { location.assign(lessonMenu.value); }
    });
  }

  // --- the options menu: closes on Escape, on a click outside it and on Compile (above); the options that
  // differ from their defaults show as chips beside the language ---------------------------------
  var optionsMenu = document.querySelector(".options-menu");
  var chips = document.getElementById("option-chips");
  function closeOptions(focusSummary) {
    if (!optionsMenu || !optionsMenu.open) { return; }
    optionsMenu.open = false;
    if (focusSummary) { optionsMenu.querySelector("summary").focus(); }
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && optionsMenu && optionsMenu.open) { closeOptions(optionsMenu.contains(e.target)); }
  });
  document.addEventListener("click", function (e) {
    if (optionsMenu && optionsMenu.open && !optionsMenu.contains(e.target)) { closeOptions(false); }
  });
  function optionValue(el) { return el.type === "checkbox" ? (el.checked ? "true" : "false") : el.value; }
  function drawChips() {
    if (!chips) { return; }
    chips.textContent = "";
    document.querySelectorAll("#options [name^='opt.'][data-default]").forEach(function (el) {
      var value = optionValue(el);
      if (value === el.dataset.default || (el.type !== "checkbox" && value === "")) { return; }
      var chip = document.createElement("button");
      chip.type = "button"; chip.className = "chip"; chip.dataset.field = el.id;
      chip.textContent = el.name.slice(4) + (el.type === "checkbox" ? (el.checked ? "" : " off") : " = " + value);
      chip.title = chip.textContent + "\nchanged from its default (" + (el.dataset.default || "none") +
        "); click to change it";
      chips.appendChild(chip);
    });
    foldChips();
  }
  function foldChips() {
    // The chips go beside the options where the bar keeps the rows it has without them (one at
    // 1500 px, two at 800 px); else they take one row of their own under the bar's (ide.css
    // .own-row), and the chips that do not fit there are folded, from the last, into one
    // "+N changed" chip that opens the menu too.
    var bar = chips.closest(".topbar"), all = Array.prototype.slice.call(chips.querySelectorAll(".chip[data-field]"));
    var more = chips.querySelector(".chip.more");
    if (more) { more.remove(); }
    all.forEach(function (c) { c.hidden = false; });
    if (!all.length || !bar || bar.hidden) { return; }
    chips.classList.remove("own-row");
    chips.hidden = true;
    var room = bar.getBoundingClientRect().height;
    chips.hidden = false;
    if (bar.getBoundingClientRect().height <= room + 1) { return; }
    chips.classList.add("own-row");
    room += all[0].getBoundingClientRect().height + (parseFloat(getComputedStyle(bar).rowGap) || 0);
    if (bar.getBoundingClientRect().height <= room + 1) { return; }
    more = document.createElement("button");
    more.type = "button"; more.className = "chip more";
    chips.appendChild(more);
    for (var shown = all.length - 1; shown >= 0; shown--) {
      all[shown].hidden = true;
      var folded = all.slice(shown);
      more.textContent = "+" + folded.length + " changed";
      more.title = folded.map(function (c) { return c.textContent; }).join("\n") + "\nclick to see every option";
      if (bar.getBoundingClientRect().height <= room + 1) { return; }
    }
  }
  if (chips) {
    chips.addEventListener("click", function (e) {
      var chip = e.target.closest(".chip");
      if (!chip) { return; }
      e.stopPropagation();
      optionsMenu.open = true;
      var field = document.getElementById(chip.dataset.field);
      if (field) { field.focus(); }
    });
  }
  document.addEventListener("change", function (e) { if (e.target.closest && e.target.closest("#options")) { drawChips(); } });
  document.addEventListener("input", function (e) { if (e.target.closest && e.target.closest("#options")) { drawChips(); } });
  document.body.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail.target && e.detail.target.id === "options") { drawChips(); }
  });
  drawChips();
  window.addEventListener("resize", function () { if (chips) { foldChips(); } });

  // --- "wrap lines" (beside each open stage): long lines wrap inside their pane instead of scrolling
  // sideways, each line's number and source line kept in their column; one setting for every pane,
  // remembered by this browser as "Tab moves focus" is
  var WRAP_SETTING = "irscope.wrapLines";
  var wrapLines = false;
  try { wrapLines = localStorage.getItem(WRAP_SETTING) === "1"; } catch (e) { /* storage off: not remembered */ }
  function showWrap() {
    document.body.classList.toggle("wrap-lines", wrapLines);
    document.querySelectorAll(".wrap-lines-toggle").forEach(function (box) { box.checked = wrapLines; });
  }
  document.addEventListener("change", function (e) {
    if (!e.target.matches || !e.target.matches(".wrap-lines-toggle")) { return; }
    wrapLines = e.target.checked;
    try { localStorage.setItem(WRAP_SETTING, wrapLines ? "1" : "0"); } catch (err) { /* not remembered */ }
    showWrap();
  });
  document.body.addEventListener("htmx:afterSettle", showWrap);  // a stage drawn since shows the setting
  showWrap();

  // --- sortable tables (the kernel resources): a header's button sorts by its column, again reverses
  function cellValue(row, n) {
    var cell = row.cells[n];
    // data-sort: a cell that shows two figures (spill stores / loads) sorts by the sum it carries
    var text = cell ? (cell.dataset.sort || cell.dataset.percent || cell.textContent).trim() : "";
    var num = parseFloat(text.replace(/,/g, ""));
    if (!isNaN(num) && /KiB/.test(text)) { num *= 1024; }
    return isNaN(num) ? text.toLowerCase() : num;
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("table.sortable th button.sort");
    if (!button) { return; }
    var th = button.closest("th"), table = th.closest("table"), n = th.cellIndex;
    var up = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, n), y = cellValue(b, n);
      var order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
      return up ? order : -order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });

  // A control that takes the focus under the sticky stage bar (or the stale note above it) is
  // scrolled clear of them, so the focus is never hidden (WCAG 2.4.11): the results pane scrolls
  // under its sticky bars, and a focused control there was drawn behind them.
  document.addEventListener("focusin", function (e) {
    var pane = e.target.closest && e.target.closest(".results-pane");
    if (!pane) { return; }
    var covers = pane.querySelectorAll(".stage-tabs, .stale-note");
    var bottom = pane.getBoundingClientRect().top;
    for (var i = 0; i < covers.length; i++) {
      if (covers[i].contains(e.target)) { return; }
      if (covers[i].offsetParent !== null) { bottom = Math.max(bottom, covers[i].getBoundingClientRect().bottom); }
    }
    // a stage's pane taller than the window is scrolled to its top (its focus ring's top edge) only
    // when the keyboard focused it, not when a click in its text did
    var box = e.target.getBoundingClientRect();
    var tall = box.height >= pane.clientHeight / 2;
    if (box.top < bottom + 2 && (!tall || e.target.matches(":focus-visible"))) { pane.scrollTop -= bottom - box.top + 6; }
  });

  // htmx wires the page's elements on DOMContentLoaded (its listener was added first, in <head>);
  // the first refresh may click a tab, so it waits for that.
  document.addEventListener("DOMContentLoaded", function () { refresh(true); });
})();
