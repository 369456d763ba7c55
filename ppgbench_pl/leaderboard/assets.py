"""The leaderboard's inline style and script (sort by a column, filter by regime, tier and dataset): no network."""

from __future__ import annotations

from ppgbench_pl.report.folder import CSS as REPORT_CSS

CSS = REPORT_CSS + """
body { max-width: 96rem; }
#filters { display: flex; flex-wrap: wrap; gap: 0.4rem 1.4rem; align-items: center; margin: 1rem 0;
           padding: 0.6rem 0.8rem; background: #f7f7f7; border: 1px solid #e3e3e3; }
#filters label { font-size: 0.9rem; } #filters select { margin-left: 0.3rem; }
#shown { color: #555; font-size: 0.88rem; }
table.board thead th { cursor: pointer; user-select: none; vertical-align: bottom; }
table.board thead th:hover { background: #e9eef5; }
table.board thead th .metric { display: block; font-weight: normal; color: #555; font-size: 0.8rem; }
table.board thead th[aria-sort="ascending"]::after { content: " \\25B2"; color: #245; }
table.board thead th[aria-sort="descending"]::after { content: " \\25BC"; color: #245; }
table.board th.near_chance { color: #a33; }
table.board tbody th { text-align: left; font-weight: normal; background: none; }
tr.control th, tr.control td { color: #444; background: #fbfbf6; }
tr.baseline th, tr.baseline td { color: #666; background: #f6f6f6; font-style: italic; }
td.direct, td.source { background: #fff3e0; }
span.role { color: #777; font-size: 0.78rem; margin-left: 0.3rem; }
section.card { border: 1px solid #e3e3e3; padding: 0.3rem 1rem 0.6rem; margin: 0.8rem 0; }
section.card dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.15rem 1rem; margin: 0.4rem 0;
                  font-size: 0.88rem; }
section.card dt { color: #555; } section.card dd { margin: 0; }
pre { font-size: 0.8rem; background: #f7f7f7; padding: 0.5rem; overflow-x: auto; }
"""

SCRIPT = """
(function () {
  "use strict";
  var sections = Array.prototype.slice.call(document.querySelectorAll("section.regime"));

  function value(cell) {
    var text = cell.getAttribute("data-value");
    return text === null || text === "" ? NaN : parseFloat(text);
  }

  function sortBy(table, th) {
    var heads = Array.prototype.slice.call(th.parentNode.cells);
    var index = heads.indexOf(th);
    var byName = th.getAttribute("data-key") === "model";
    var best = byName || th.getAttribute("data-higher") !== "1" ? "ascending" : "descending";
    var now = th.getAttribute("aria-sort");
    var order = now === "ascending" || now === "descending" ? (now === "ascending" ? "descending" : "ascending")
                                                            : best;
    var sign = order === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      if (byName) {
        return sign * a.getAttribute("data-model").localeCompare(b.getAttribute("data-model"));
      }
      var x = value(a.cells[index]), y = value(b.cells[index]);
      if (isNaN(x) || isNaN(y)) { return isNaN(x) === isNaN(y) ? 0 : (isNaN(x) ? 1 : -1); }
      return sign * (x - y);
    });
    rows.forEach(function (row) { body.appendChild(row); });
    heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", order);
  }

  function chosen(id) {
    var element = document.getElementById(id);
    return element ? element.value : "";
  }

  function filterTable(section, tier, dataset) {
    var table = section.querySelector("table.board");
    var heads = table.tHead.rows[0].cells;
    var keep = [true], columns = 0, rows = 0;
    for (var i = 1; i < heads.length; i++) {
      var h = heads[i];
      keep[i] = (tier === "" || h.getAttribute("data-tier") === tier) &&
                (dataset === "" || h.getAttribute("data-dataset") === dataset);
      h.hidden = !keep[i];
      columns += keep[i] ? 1 : 0;
    }
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var scored = false;
      for (var j = 1; j < row.cells.length; j++) {
        row.cells[j].hidden = !keep[j];
        scored = scored || (keep[j] && row.cells[j].getAttribute("data-value") !== "");
      }
      row.hidden = !scored;
      rows += scored ? 1 : 0;
    });
    return columns > 0 ? rows : -1;
  }

  function applyFilters() {
    var regime = chosen("f-regime"), tier = chosen("f-tier"), dataset = chosen("f-dataset");
    var shown = 0, tablesShown = 0;
    sections.forEach(function (section) {
      var rows = filterTable(section, tier, dataset);
      var visible = (regime === "" || section.getAttribute("data-regime") === regime) && rows >= 0;
      section.hidden = !visible;
      if (visible) { shown += rows; tablesShown += 1; }
    });
    var line = document.getElementById("shown");
    if (line) {
      line.textContent = tablesShown === 0 ? "nothing matches these filters"
        : shown + " rows in " + tablesShown + " table" + (tablesShown === 1 ? "" : "s");
    }
  }

  sections.forEach(function (section) {
    var table = section.querySelector("table.board");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () { sortBy(table, th); });
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortBy(table, th); }
      });
    });
  });
  ["f-regime", "f-tier", "f-dataset"].forEach(function (id) {
    var element = document.getElementById(id);
    if (element) { element.addEventListener("change", applyFilters); }
  });
  applyFilters();
}());
"""
