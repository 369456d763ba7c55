"""The leaderboard in headless Chromium: it loads without a console error, a click on a header sorts the
rows, the filters hide rows and tables, and the overlap marks are rendered on the expected cells.

A copy of the page gets two probes: one in ``<head>`` that records every error and ``console.error``
(installed before the page's own script runs), one after the page's script that clicks and filters through
the DOM and writes what it saw into a ``<pre>`` that ``--dump-dom`` returns. Chromium's own log of console
messages (``--enable-logging=stderr``) must hold none from the page either.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ppgbench_pl.leaderboard import build_leaderboard
from tests.leaderboard.submissions import make_submissions

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")

ERRORS = """<script>
window.probeErrors = [];
window.addEventListener("error", function (e) { window.probeErrors.push(String(e.message)); });
var probeConsoleError = console.error;
console.error = function () {
  window.probeErrors.push(Array.prototype.join.call(arguments, " "));
  probeConsoleError.apply(console, arguments);
};
</script></head>"""

PROBE = """<script>
(function () {
  function rows(regime, visibleOnly) {
    var all = document.querySelectorAll('section[data-regime="' + regime + '"] tbody tr');
    return Array.prototype.filter.call(all, function (r) { return !visibleOnly || r.offsetParent !== null; })
      .map(function (r) { return r.getAttribute("data-model"); });
  }
  function choose(id, value) {
    var select = document.getElementById(id);
    select.value = value;
    select.dispatchEvent(new Event("change"));
  }
  function cell(model, task) {
    return document.querySelector('section[data-regime="linear"] td[data-model="' + model + '"][data-task="' +
                                  task + '"]').innerText;
  }
  var out = {before: rows("linear", true)};
  var hr = document.querySelector('section[data-regime="linear"] th[data-task="synthetic-hr"]');
  hr.click();
  out.first = rows("linear", false);
  out.firstSort = hr.getAttribute("aria-sort");
  hr.click();
  out.second = rows("linear", false);
  var stiffness = document.querySelector('section[data-regime="linear"] th[data-task="synthetic-stiffness"]');
  stiffness.click();
  out.stiffness = rows("linear", false);
  choose("f-tier", "secondary");
  out.secondary = rows("linear", true);
  out.hiddenHeader = hr.offsetParent === null;
  out.shownLine = document.getElementById("shown").textContent;
  choose("f-tier", "");
  choose("f-dataset", "bidmc");
  out.bidmcMlpShown = document.getElementById("regime-mlp").offsetParent !== null;
  choose("f-dataset", "");
  choose("f-regime", "mlp");
  out.mlpOnly = [rows("linear", true), rows("mlp", true)];
  choose("f-regime", "");
  out.after = rows("linear", true);
  out.direct = cell("mynet", "bidmc-resp");
  out.source = cell("papagei_s", "bidmc-resp");
  out.plain = cell("mynet", "synthetic-hr");
  out.errors = window.probeErrors;
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}());
</script></body>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaderboard_browser")
    _, files = make_submissions(root)
    return build_leaderboard(files, root / "site")


def _chromium(url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    cmd = [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True)


def test_the_page_sorts_filters_and_marks_in_chromium(page, tmp_path):
    probe = page.with_name("probe.html")
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</head>", ERRORS, 1).replace("</body>", PROBE), encoding="utf-8")
    try:
        done = _chromium(probe.as_uri(), tmp_path)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-2000:] + done.stderr[-2000:]
    seen = json.loads(html.unescape(found.group(1)))
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert seen["errors"] == [] and console == []
    assert seen["before"] == ["mynet", "papagei_s", "constant"]
    assert seen["first"] == ["papagei_s", "mynet", "constant"] and seen["firstSort"] == "ascending"  # MAE: lowest first
    assert seen["second"] == ["constant", "mynet", "papagei_s"]
    assert seen["stiffness"] == ["papagei_s", "constant", "mynet"]  # BA: highest first, not run last
    assert seen["secondary"] == ["constant", "mynet"] and seen["hiddenHeader"]  # papagei_s: no secondary task
    assert seen["shownLine"] == "2 rows in 1 table"  # the mlp table has no secondary task: hidden
    assert seen["bidmcMlpShown"] is False  # the mlp table has no bidmc task
    assert seen["mlpOnly"] == [[], ["mynet", "constant"]]
    assert sorted(seen["after"]) == ["constant", "mynet", "papagei_s"]
    assert seen["direct"].endswith("‡") and seen["source"].endswith("§") and not re.search("[‡§]", seen["plain"])


def test_the_unmodified_page_logs_nothing(page, tmp_path):
    done = _chromium(page.as_uri(), tmp_path)
    assert [line for line in done.stderr.splitlines() if "CONSOLE" in line] == []
    assert "<table" in done.stdout and 'id="shown" aria-live="polite">5 rows in 2 tables<' in done.stdout
