import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ppgbench_pl.report import build_report
from tests.report.fabricate import write_showcase_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Refs(HTMLParser):
    """Collects image sources, link targets, table count and tags that would load something external."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tags: list[str] = []
        self.tables = 0
        self.strong = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.images.append(attrs["src"])
        elif tag == "a":
            self.links.append(attrs["href"])
        elif tag == "table":
            self.tables += 1
        elif tag == "strong":
            self.strong += 1


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    write_showcase_run(root / "run")
    return build_report([root / "run"], root / "report")


def _valid_image(path: Path) -> bool:
    if path.suffix == ".png":
        data = path.read_bytes()
        return data.startswith(PNG_MAGIC) and data[12:16] == b"IHDR" and len(data) > 1000
    if path.suffix == ".svg":
        return ET.parse(path).getroot().tag.endswith("svg")
    return False


def test_every_image_and_link_exists_and_is_valid(report):
    parser = _Refs()
    parser.feed(report.read_text(encoding="utf-8"))
    root = report.parent
    assert parser.images == ["figures/regime_comparison.png", "figures/cd_linear.png", "figures/cd_mlp.png"]
    for src in parser.images:
        assert _valid_image(root / src), src
    svgs = {h for h in parser.links if h.endswith(".svg")}  # linked from each figure and from the file list
    assert len(svgs) == 3 and all(_valid_image(root / h) for h in svgs)
    for href in parser.links:
        assert (root / href).is_file(), href
    assert parser.tables == 14  # findings 2 + 2 paired + 1 overlap + 1 trust, main 2, paired 2, effects 1, Tables 3, 4, 6
    assert parser.strong > 0


def test_page_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    parser = _Refs()
    parser.feed(text)
    assert not {"script", "link", "iframe", "object"} & set(parser.tags)
    assert not re.search(r"(https?:)?//[a-z]", re.sub(r'xmlns="[^"]+"', "", text), re.IGNORECASE)
    assert "@import" not in text and "url(" not in text
    for heading in ("Headline findings", "Main tables", "Regime comparison (Figure 1)", "Paired comparisons",
                    "(Table 3)", "(Table 4)", "(Table 6)", "(Table 7)"):
        assert heading in text
    assert "2 of 8 task x regime cells are near chance" in text


CHECKER = """<script>
for (const a of document.querySelectorAll('a[href$=".svg"]')) {
  const img = document.createElement('img'); img.src = a.getAttribute('href'); img.className = 'svgcheck';
  document.body.appendChild(img);
}
window.addEventListener('load', () => {
  const imgs = [...document.images];
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-broken',
    imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')).join('|'));
});
</script></body>"""


def _chromium(args, tmp_path):
    cmd = ["/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium"),
           "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_opens_in_headless_chromium_with_no_missing_images(report, tmp_path):
    # a copy next to index.html (same relative paths) with a probe that records which images failed to load
    probe = report.with_name("probe.html")
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", CHECKER), encoding="utf-8")
    try:
        dom = _chromium(["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], tmp_path).stdout
    finally:
        probe.unlink()
    parser = _Refs()
    parser.feed(report.read_text(encoding="utf-8"))
    probed = len(parser.images) + sum(h.endswith(".svg") for h in parser.links)
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert f'data-images="{probed}"' in body and probed == 9  # 3 PNGs shown + 6 SVG links probed
    assert 'data-broken=""' in body
    assert dom.count("<table") == parser.tables == 14 and "Main tables" in dom and "synthetic-stiffness †" in dom
    shot = tmp_path / "page.png"
    _chromium(["--window-size=1280,2400", f"--screenshot={shot}", report.as_uri()], tmp_path)
    assert shot.read_bytes().startswith(PNG_MAGIC)
