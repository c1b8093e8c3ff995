/* The IDE's behaviour: the editor, compile on Ctrl+Enter, stage tabs, source-line linking, share. */
(function () {
  "use strict";
  var form = document.getElementById("compile-form");
  var textarea = document.getElementById("source");
  var languageSelect = document.getElementById("language");
  var editor = CodeMirror.fromTextArea(textarea, {
    lineNumbers: true, mode: textarea.dataset.mode || "python", indentUnit: 4,
    gutters: ["CodeMirror-linenumbers", "error-gutter"],
    extraKeys: {"Ctrl-Enter": compile, "Cmd-Enter": compile, Tab: function (cm) { cm.replaceSelection("    "); }}
  });
  var activeKey = null, markedLines = [], errorLine = null, hotLines = [];

  function compile() { htmx.trigger(form, "submit"); }
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
    var examples = window.IRSCOPE.examples;
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
    if (line < 1 || line > editor.lineCount()) { return; }
    editor.addLineClass(line - 1, "background", cls);
    markedLines.push([line - 1, cls]);
  }
  function artifactLines() { return document.querySelectorAll("#results .pane pre.code .ln[data-src]"); }
  function paintPane() {
    clearEditorMarks();
    var seen = {};
    artifactLines().forEach(function (el) {
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
    clearHot();
    var first = null;
    artifactLines().forEach(function (el) {
      if ((" " + el.dataset.srcs + " ").indexOf(" " + line + " ") >= 0) {
        el.classList.add("hot"); hotLines.push(el); first = first || el;
      }
    });
    if (line >= 1 && line <= editor.lineCount()) {
      editor.markText({line: line - 1, ch: 0}, {line: line - 1, ch: editor.getLine(line - 1).length}, {className: "hot-line"});
    }
    if (scroll && first) { first.scrollIntoView({block: "center"}); }
  }
  document.addEventListener("mouseover", function (e) {
    var el = e.target.closest && e.target.closest("#results .pane pre.code .ln[data-src]");
    if (el) { lightSource(parseInt(el.dataset.src, 10), false); }
  });
  document.addEventListener("click", function (e) {
    var el = e.target.closest && e.target.closest("#results .pane pre.code .ln[data-src]");
    if (el) {
      var line = parseInt(el.dataset.src, 10);
      editor.scrollIntoView({line: line - 1, ch: 0}, 80);
      editor.setCursor({line: line - 1, ch: 0});
    }
    var go = e.target.closest && e.target.closest(".goto-line");
    if (go) { e.preventDefault(); var n = parseInt(go.dataset.line, 10); editor.setCursor({line: n - 1, ch: 0}); editor.focus(); }
    var tab = e.target.closest && e.target.closest(".stage-tabs .tab");
    if (tab) { e.preventDefault(); activeKey = tab.dataset.key; markActive(); }
  });
  editor.getWrapperElement().addEventListener("mousemove", function (e) {
    var pos = editor.coordsChar({left: e.clientX, top: e.clientY}, "window");
    lightSource(pos.line + 1, false);
  });
  editor.on("cursorActivity", function () { lightSource(editor.getCursor().line + 1, true); });

  // --- tabs, errors, progress ------------------------------------------------------------------
  var preferred = ["inductor.output_code", "triton.ptx", "xla.optimized", "dynamo.fx_graph", "fake.lines"];
  function markActive() {
    document.querySelectorAll(".stage-tabs .tab").forEach(function (t) {
      t.classList.toggle("active", t.dataset.key === activeKey);
    });
    document.querySelectorAll(".stage-tabs .stage-select").forEach(function (s) {
      var has = Array.prototype.some.call(s.options, function (o) { return o.value === activeKey; });
      s.value = has ? activeKey : "";
      s.classList.toggle("active", has);
    });
  }
  function autoOpen() {
    var pane = document.getElementById("pane");
    if (!pane || pane.querySelector(".artifact")) { return; }
    var tabs = Array.prototype.slice.call(document.querySelectorAll(".stage-tabs .tab"));
    if (!tabs.length) { return; }
    var bar = document.getElementById("job-bar");
    var done = bar && (bar.dataset.status === "done" || bar.dataset.status === "failed");
    var pick = null;
    preferred.some(function (p) { pick = tabs.filter(function (t) { return t.dataset.key.indexOf(p) === 0; })[0]; return pick; });
    if (!pick && done) { pick = tabs.filter(function (t) { return t.dataset.key !== "source"; })[0] || tabs[0]; }
    if (pick) {
      activeKey = pick.dataset.key;
      htmx.ajax("GET", pick.getAttribute("hx-get"), {target: "#pane", swap: "innerHTML"});
      markActive();
    }
  }
  function afterResults() {
    var err = document.querySelector("#results .error-box[data-error-line]");
    var line = err ? parseInt(err.dataset.errorLine, 10) : NaN;
    errorLine = isNaN(line) ? null : line;
    editor.clearGutter("error-gutter");
    if (errorLine) {
      var marker = document.createElement("span");
      marker.className = "CodeMirror-gutter-elt error-marker"; marker.textContent = "●";
      editor.setGutterMarker(errorLine - 1, "error-gutter", marker);
      editor.scrollIntoView({line: errorLine - 1, ch: 0}, 80);
    }
    paintPane();
    markActive();
    var bar = document.getElementById("job-bar");
    var share = document.getElementById("share");
    if (bar) { share.disabled = false; share.dataset.job = bar.dataset.job; }
    autoOpen();
  }
  document.addEventListener("change", function (e) {
    var select = e.target.closest && e.target.closest(".stage-select");
    if (!select || !select.value) { return; }
    activeKey = select.value;
    htmx.ajax("GET", select.options[select.selectedIndex].dataset.url, {target: "#pane", swap: "innerHTML"});
    markActive();
  });
  document.body.addEventListener("htmx:afterSettle", afterResults);
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt === form) { activeKey = null; document.getElementById("share-url").value = ""; }
  });

  document.getElementById("share").addEventListener("click", function () {
    var job = this.dataset.job;
    if (!job) { return; }
    fetch("/api/shortlinks", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({job: job})})
      .then(function (r) { return r.json(); })
      .then(function (body) {
        var url = location.origin + body.url;
        var out = document.getElementById("share-url");
        out.value = url; out.select();
        if (navigator.clipboard) { navigator.clipboard.writeText(url).catch(function () {}); }
      });
  });
  document.addEventListener("DOMContentLoaded", afterResults);
})();
