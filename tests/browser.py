"""A real headless Chromium driving a report page: what a researcher sees when they open one.

Debian's ``chromium`` (``apt-get install -y chromium``; CI installs it) driven by Playwright for Python,
never a browser Playwright downloads itself. Without either the tests skip with the reason. Each page is
opened from its file with networking off, so a page that needs anything from elsewhere fails here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip

# Every Bokeh plot of the page (its name, or its type) with the count of painted pixels of its primary
# canvas layer (the overlay layer stays empty until the mouse moves): a plot that failed to render has none.
PAINTED = """() => {
  const out = [];
  const walk = (v) => {
    if (v.canvas_view) {
      const c = v.canvas_view.primary.canvas;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      out.push([v.model.name || v.model.type, n]);
    }
    for (const c of (v.child_views ?? [])) walk(c);
  };
  for (const root of Bokeh.index.roots) walk(root);
  return out;
}"""

# The plot named ``figure`` (its Bokeh view, found from the root views) and the screen position of row
# ``row`` of the glyph renderer named ``glyph``, scrolled into view.
POINT = """([figure, glyph, row]) => {
  const doc = Bokeh.documents.find(d => d.get_model_by_name(figure));
  const fig = doc.get_model_by_name(figure);
  const data = doc.get_model_by_name(glyph).data_source.data;
  const find = (v) => {
    if (v.model === fig) return v;
    for (const c of (v.child_views ?? [])) { const f = find(c); if (f) return f; }
    return null;
  };
  let view = null;
  for (const root of Bokeh.index.roots) view = view || find(root);
  view.el.scrollIntoView({block: 'center'});
  const box = view.el.getBoundingClientRect();
  return {x: box.left + view.frame.x_scale.compute(data.time[row]),
          y: box.top + view.frame.y_scale.compute(data.price[row]), ticket: data.ticket[row]};
}"""

# The text of every tooltip Bokeh shows now.
TOOLTIPS = """() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (String(el.className).includes('bk-Tooltip') && el.shadowRoot) {
        const content = el.shadowRoot.querySelector('.bk-tooltip-content');
        if (content) out.push(content.innerText);
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return out;
}"""


def chromium() -> str:
    """The browser's path, or skip the test saying what is missing."""
    pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed (pip: playwright)"
    )
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium browser: install Debian's chromium (apt-get install -y chromium)")
    return path


class Page:
    """One report opened in the browser, with the console errors it logged."""

    def __init__(self, page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, file: Path) -> None:
        self.page.goto(file.resolve().as_uri())
        self.page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60_000)
        self.page.wait_for_load_state("load")
        self.page.wait_for_timeout(1_000)  # BokehJS draws after the documents are built

    def painted(self) -> list[tuple[str, int]]:
        return [(name, n) for name, n in self.page.evaluate(PAINTED)]

    def hover(self, figure: str, glyph: str, row: int) -> tuple[int, list[str]]:
        """Move the mouse onto row ``row`` of a glyph and return that row's ticket and the tooltips."""
        point = self.page.evaluate(POINT, [figure, glyph, row])
        self.page.mouse.move(point["x"] - 15, point["y"] - 15)
        self.page.mouse.move(point["x"], point["y"], steps=4)
        self.page.wait_for_timeout(400)
        return int(point["ticket"]), self.page.evaluate(TOOLTIPS)


@contextmanager
def browser() -> Iterator[Page]:
    """A fresh headless Chromium (its own profile folder, networking off) and one page in it."""
    from playwright.sync_api import sync_playwright

    path = chromium()
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile,
                executable_path=path,
                headless=True,
                args=ARGS,
                offline=True,
                viewport={"width": 1280, "height": 900},
            )
            try:
                yield Page(ctx.new_page())
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
