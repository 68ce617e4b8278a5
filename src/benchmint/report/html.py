"""One self-contained page: every figure inlined as a data URI, every table written out, nothing fetched.

The page's Content-Security-Policy allows no source but inline data, so a browser opening it offline makes no
request; each figure carries the command that made it and the files it read.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from benchmint.report.style import DPI, Output, is_number

#: The papers in a fixed order on the page, then what none of them draws.
SECTIONS = ("SPM-Bench", "CrystalXRD-Bench", "SeePhys", "CSMBench", "MatVQA", "Paired comparisons")
#: Pixels per inch of a figure on the page: its 8-point text shows at about 14 px.
PAGE_PPI = 130
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-top:.6em}
figure{margin:1em 0;padding:.5em;border:1px solid #eee}figure img{max-width:100%;height:auto}
figcaption{font-size:.9em}code,pre{font-size:.8em;background:#f6f6f6}pre{padding:.5em;overflow-x:auto}
.t{overflow-x:auto}table{border-collapse:collapse;font-size:.8em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:2px 6px;white-space:nowrap}
th{background:#f0f0f0}td.n{text-align:right}details{margin:.3em 0}.problem{color:#a00}
"""


def _cell(v) -> str:
    if is_number(v) and isinstance(v, float):
        return f'<td class="n">{v:.4f}</td>'
    if is_number(v):
        return f'<td class="n">{v}</td>'
    return f"<td>{html.escape('' if v is None else str(v))}</td>"


def _table(rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(_cell(v) for v in r) + "</tr>" for r in rows[1:])
    return f'<div class="t"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _made_by(o: Output, command: str) -> str:
    sources = "".join(f"<li><code>{html.escape(s)}</code></li>" for s in o.sources)
    files = ", ".join(f'<code>{html.escape(f)}</code>' for f in o.files.values())
    return (f"<details><summary>made by</summary><pre>{html.escape(command)}</pre>"
            f"<p>from</p><ul>{sources or '<li>the metric definitions alone</li>'}</ul><p>files: {files}</p>"
            "</details>")


def write(out: Path, outputs: list[Output], command: str, runs: list[dict], problems: list[str],
          notes: list[str]) -> Path:
    parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
             f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
             f"<title>benchmint report</title><style>{STYLE}</style></head><body>",
             "<h1>benchmint report</h1>", f"<p>Made by <code>{html.escape(command)}</code></p>"]
    sections = sorted({o.section for o in outputs}, key=lambda x: (SECTIONS.index(x) if x in SECTIONS else 99, x))
    parts.append("<nav><ul>" + "".join(f'<li><a href="#s{i}">{html.escape(s)}</a></li>'
                                       for i, s in enumerate(sections)) + "</ul></nav>")
    for i, section in enumerate(sections):
        parts.append(f'<h2 id="s{i}">{html.escape(section)}</h2>')
        for o in outputs:
            if o.section != section:
                continue
            if "png" in o.files:
                raw = (out / o.files["png"]).read_bytes()
                data = base64.b64encode(raw).decode("ascii")
                width = round(int.from_bytes(raw[16:20], "big") / DPI * PAGE_PPI)  # the PNG header's width
                parts.append(f'<figure id="fig-{html.escape(o.name)}"><img alt="{html.escape(o.title)}" '
                             f'width="{width}" src="data:image/png;base64,{data}"><figcaption><b>{html.escape(o.title)}.</b> '
                             f"{html.escape(o.caption)}{_made_by(o, command)}</figcaption></figure>")
            elif o.rows is not None:
                parts.append(f'<section id="tab-{html.escape(o.name)}"><h3>{html.escape(o.title)}</h3>'
                             f"<p>{html.escape(o.caption)}</p>{_table(o.rows)}{_made_by(o, command)}</section>")
    parts.append("<h2>Runs read</h2>")
    for r in runs:
        parts.append(f"<details><summary>{html.escape(r['kind'])}: <code>{html.escape(r['path'])}</code></summary>"
                     f"<pre>{html.escape(json.dumps(r['settings'], indent=1, sort_keys=True, default=str))}</pre>"
                     "</details>")
    if problems or notes:
        parts.append("<h2>Not drawn</h2><ul>" + "".join(f'<li class="problem">{html.escape(p)}</li>'
                                                        for p in problems)
                     + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>\n")
    page = out / "index.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
