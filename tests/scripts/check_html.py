"""Check the DOM of a `tpuport check` HTML report (tests/integration/check.rs): a well-formed page
(every element closed in order), its verdict, the seven sections, the loss table, and the inline
SVG charts that draw something: loss, HBM, and compiles unless the port compiled nothing (then a
"no compiles" line in its place). Prints what is wrong and exits 1."""
import sys
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "hr", "input", "link"}


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.ids, self.counts = [], [], {}, {}
        self.path = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if "id" in a:
            self.ids[a["id"]] = {"tag": tag, "inside": list(self.stack)}
        if tag not in VOID:
            self.stack.append((tag, a.get("id")))

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1] if self.stack else "nothing"))
            return
        self.stack.pop()


def main(path):
    text = open(path, encoding="utf-8").read()
    dom = Dom()
    dom.feed(text)
    dom.close()
    problems = list(dom.errors)
    if dom.stack:
        problems.append("unclosed: %s" % dom.stack)
    if not text.startswith("<!DOCTYPE html>"):
        problems.append("no doctype")
    for want in ("verdict", "sections", "losses", "chart-loss", "chart-hbm", "chart-compiles"):
        if want not in dom.ids:
            problems.append("no element #%s" % want)
    rows = text.split('<table id="sections">', 1)[-1].split("</table>", 1)[0].count("<tr>") - 1
    if rows != 7:
        problems.append("the sections table has %d rows, not 7" % rows)
    compiles = dom.ids.get("chart-compiles", {}).get("tag")
    if compiles == "p" and "no compiles" not in text:
        problems.append("#chart-compiles is no chart and does not say 'no compiles'")
    charts = 3 if compiles == "figure" else 2
    if dom.counts.get("svg", 0) < charts:
        problems.append("%d inline SVG charts, not %d" % (dom.counts.get("svg", 0), charts))
    if dom.counts.get("path", 0) + dom.counts.get("polyline", 0) + dom.counts.get("rect", 0) < 10:
        problems.append("the charts draw almost nothing")
    for p in problems:
        print(p)
    print("ok" if not problems else "%d problems" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
