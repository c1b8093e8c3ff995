/* IR-to-IR links: which lines of the open IR stages came from the same place, by the compiler's own
   locations. Each line of an IR stage carries `data-locs`: its location chains (viewers/code.py from
   the stage's `ir_locations` meta), each "file:line:col<file:line:col..." innermost frame first.
   Two chains are linked when, compared with columns where both have them on every frame (else by
   lines: SASS has no columns), one is the other or begins it (PTX and SASS name only the innermost
   frames of an inlined call). compiler/formats.py `chains_linked` is the same rule.

   ide.js asks `partnerTest(line)` for a predicate over the lines of every open pane and lights the
   lines it accepts, as it does for lines of the same source line: in a pane whose stage has IR
   locations the predicate follows the chains; in any other pane it falls back to the source line. */
(function () {
  "use strict";
  var memo = {};
  function parts(chain) {
    var known = memo[chain];
    if (known) { return known; }
    var frames = chain.split("<");
    known = {
      chain: chain,
      columns: frames.every(function (f) { return f.split(":").length === 3; }),
      coarse: frames.map(function (f) { return f.split(":").slice(0, 2).join(":"); }).join("<")
    };
    memo[chain] = known;
    return known;
  }
  function begins(a, b) { return a === b || a.indexOf(b + "<") === 0 || b.indexOf(a + "<") === 0; }
  function linked(a, b) {
    var pa = parts(a), pb = parts(b);
    return pa.columns && pb.columns ? begins(a, b) : begins(pa.coarse, pb.coarse);
  }
  function chainsOf(el) { return (el.dataset.locs || "").split(" ").filter(Boolean); }
  function hasLocations(el) {
    var pre = el.closest("pre.code");
    return !!(pre && pre.hasAttribute("data-ir-files"));
  }
  function partnerTest(el) {
    var mine = chainsOf(el);
    var src = el.dataset.src;
    var bySource = function (other) {
      return !!src && (" " + (other.dataset.srcs || "") + " ").indexOf(" " + src + " ") >= 0;
    };
    if (!mine.length) { return bySource; }
    return function (other) {
      if (!hasLocations(other)) { return bySource(other); }
      var theirs = chainsOf(other);
      return theirs.some(function (t) { return mine.some(function (m) { return linked(m, t); }); });
    };
  }
  window.irscopeIrLinks = {linked: linked, chainsOf: chainsOf, partnerTest: partnerTest};
})();
