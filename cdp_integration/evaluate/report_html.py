"""``report.html``: a run's report as one self-contained HTML file that opens offline in any browser.

Charts are inline SVG drawn here; the per-episode table is JSON in a ``<script type="application/json">``
rendered, sorted and filtered by a short inline script, so 2,400 rows open at once. A
Content-Security-Policy that allows no network at all keeps the page from fetching anything, whatever
an instance id or an answer holds. ``compare.py`` builds its page from the same pieces.
"""

from __future__ import annotations

import html
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from cdp_integration.evaluate.report import CONFIDENCE, Report, describe_trials, plural
from cdp_integration.evaluate.runs import Group, Run, TaskResult, group_by, trial_summary
from cdp_integration.session.untrusted import open_output

__all__ = [
    "REPORT_HTML",
    "VIEWERS_DIR",
    "bar_chart",
    "page",
    "render_run_html",
    "viewer_links",
    "viewer_relpath",
    "write_run_html",
]

REPORT_HTML = "report.html"
VIEWERS_DIR = "viewers"
_SESSION_SUFFIX = ".session.jsonl.gz"
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 48px;color:#1f2328}
h1{font-size:22px;margin:20px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.headline{display:flex;gap:32px;flex-wrap:wrap;margin:12px 0}.big{font-size:34px;font-weight:600}
.muted{color:#59636e}.note{background:#fff8c5;padding:6px 10px;border-radius:6px;display:inline-block}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
td,th{padding:3px 8px;border-bottom:1px solid #eaeef2;text-align:left}
td.long{min-width:12em;overflow-wrap:anywhere}
td.lines{min-width:12em;white-space:pre-line;font-size:12px;overflow-wrap:anywhere}
th{background:#f6f8fa;position:sticky;top:0;cursor:pointer;user-select:none}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1a7f37}.fail{color:#cf222e}.error{color:#9a6700}tr.flip td{background:#fff1e5}
.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin:8px 0}
.filters label{font-size:12px;color:#59636e}.filters select,.filters input{font:inherit;padding:2px 4px}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}
"""

_TABLE_JS = """
(function(){
const data=JSON.parse(document.getElementById('rows').textContent);
const cols=data.columns, rows=data.rows, body=document.getElementById('tbody');
const head=document.getElementById('thead'), count=document.getElementById('count');
const filters={}; let sortKey=data.sort||null, sortDir=1, text='', shown=[], drawn=0;
const PAGE=200, LONG=140, pager=document.getElementById('pager');
pager.querySelector('.more').addEventListener('click',()=>more(PAGE));
pager.querySelector('.all').addEventListener('click',()=>more(shown.length));
function esc(v){return String(v).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));}
function cell(c,r){const v=r[c.key];
 if(c.type==='link'){const h=r[c.key+'_href'];return h?'<a href="'+esc(h)+'">'+esc(v)+'</a>':esc(v==null?'':v);}
 if(v==null)return '<td class="n muted">-</td>';
 if(c.type==='num')return '<td class="n">'+(typeof v==='number'?v.toFixed(3):esc(v))+'</td>';
 if(c.type==='outcome')return '<td class="'+esc(v)+'">'+esc(v)+'</td>';
 if(c.type==='long'){const t=String(v);return '<td class="long" title="'+esc(t)+'">'+esc(t.length>LONG?t.slice(0,LONG-1)+'\u2026':t)+'</td>';}
 if(c.type==='lines')return '<td class="lines">'+esc(v)+'</td>';
 return '<td>'+esc(v).replace(/([_+\\/])/g,'$1<wbr>')+'</td>';}
function render(){
 const keep=rows.filter(r=>cols.every(c=>!filters[c.key]||String(r[c.key])===filters[c.key])
   &&(!text||JSON.stringify(r).toLowerCase().includes(text)));
 if(sortKey){keep.sort((a,b)=>{const x=a[sortKey],y=b[sortKey];
   if(x===y)return 0;if(x==null)return 1;if(y==null)return -1;
   return (typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y),undefined,{numeric:true}))*sortDir;});}
 shown=keep;drawn=0;body.textContent='';more(PAGE);}
function more(n){const out=[];const end=Math.min(shown.length,drawn+n);
 for(let i=drawn;i<end;i++){const r=shown[i];out.push('<tr'+(r.flip?' class="flip"':'')+'>');
   for(const c of cols){out.push(c.type==='link'?'<td>'+cell(c,r)+'</td>':cell(c,r));}out.push('</tr>');}
 body.insertAdjacentHTML('beforeend',out.join(''));drawn=end;
 count.textContent=shown.length+' of '+rows.length+' rows'+(drawn<shown.length?' ('+drawn+' shown)':'');
 pager.hidden=drawn>=shown.length;}
head.innerHTML='<tr>'+cols.map(c=>'<th data-key="'+esc(c.key)+'"'+(c.type==='num'?' class="n"':'')+'>'+esc(c.label)+'</th>').join('')+'</tr>';
head.addEventListener('click',e=>{const k=e.target.closest('th');if(!k)return;const key=k.dataset.key;
 sortDir=sortKey===key?-sortDir:1;sortKey=key;render();});
const bar=document.getElementById('filters');
for(const c of cols){if(!c.filter)continue;
 const values=[...new Set(rows.map(r=>String(r[c.key])))].sort((a,b)=>a.localeCompare(b,undefined,{numeric:true}));
 const label=document.createElement('label');label.textContent=c.label+' ';
 const sel=document.createElement('select');sel.dataset.key=c.key;
 sel.innerHTML='<option value="">all</option>'+values.map(v=>'<option>'+esc(v)+'</option>').join('');
 sel.addEventListener('change',()=>{filters[c.key]=sel.value;render();});label.appendChild(sel);bar.appendChild(label);}
const search=document.createElement('input');search.type='search';search.placeholder='search';search.id='search';
search.addEventListener('input',()=>{text=search.value.toLowerCase();render();});bar.appendChild(search);
render();document.body.dataset.ready='1';
})();
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def bar_chart(
    rows: Sequence[tuple[str, float | None, float | None, float | None, str]], *, title: str
) -> str:
    """A horizontal bar chart on a 0..1 axis as inline SVG: one bar per ``(label, mean, low, high,
    note)``, the interval drawn as a whisker."""
    label_w, plot_w, note_w, row_h = 220, 420, 150, 22
    height = 24 + row_h * len(rows)
    out = [
        f'<svg role="img" aria-label="{_e(title)}" width="{label_w + plot_w + note_w}" height="{height}" '
        f'viewBox="0 0 {label_w + plot_w + note_w} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_w + tick * plot_w
        out.append(f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 16}" stroke="#eaeef2"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 2}" text-anchor="middle">{tick:g}</text>')
    for i, (label, mean, low, high, note) in enumerate(rows):
        y = 6 + i * row_h
        short = label if len(label) <= 32 else label[:31] + "…"
        out.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end"><title>{_e(label)}</title>{_e(short)}</text>'
        )
        if mean is not None:
            out.append(
                f'<rect x="{label_w}" y="{y + 2}" width="{mean * plot_w:.1f}" height="{row_h - 8}" fill="#54aeff">'
                f"<title>{_e(label)}: {mean:.3f} {_interval(low, high)}</title></rect>"
            )
        if low is not None and high is not None:
            x1, x2, mid = label_w + low * plot_w, label_w + high * plot_w, y + row_h / 2 - 2
            out.append(
                f'<line x1="{x1:.1f}" y1="{mid}" x2="{x2:.1f}" y2="{mid}" stroke="#0a3069" stroke-width="1.5"/>'
            )
            for x in (x1, x2):
                out.append(
                    f'<line x1="{x:.1f}" y1="{mid - 4}" x2="{x:.1f}" y2="{mid + 4}" stroke="#0a3069"/>'
                )
        out.append(f'<text x="{label_w + plot_w + 8}" y="{y + 13}">{_e(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def group_section(title: str, column: str, groups: Sequence[Group], *, chart: bool = True) -> str:
    """A chart (when there are few groups) and a table of groups with their intervals."""
    confidence = f"{CONFIDENCE:.0%} CI"
    parts = [f"<h2>{_e(title)}</h2>"]
    if chart and groups and len(groups) <= 40:
        parts.append(
            bar_chart(
                [
                    (g.key, g.mean, g.ci_low, g.ci_high, f"{_num(g.mean)} · {plural(g.tasks, 'task')}")
                    for g in groups
                ],
                title=title,
            )
        )
    rows = "".join(
        f'<tr><td>{_e(g.key)}</td><td class="n">{g.tasks}</td><td class="n">{g.sessions}</td>'
        f'<td class="n">{g.passed}</td><td class="n">{_num(g.mean)}</td><td class="n">{_interval(g.ci_low, g.ci_high)}</td></tr>'
        for g in groups
    )
    table = (
        f'<table><thead><tr><th>{_e(column)}</th><th class="n">tasks</th><th class="n">sessions</th>'
        f'<th class="n">sessions passed</th><th class="n">mean</th><th class="n">{confidence}</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
    if len(groups) > 40:
        table = f"<details><summary>{plural(len(groups), 'group')}</summary>{table}</details>"
    parts.append(table)
    return "".join(parts)


def table_section(
    title: str,
    columns: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    *,
    sort: str | None = None,
) -> str:
    """The sortable, filterable table (one per page): its columns, rows and the script that draws it."""
    data = {"columns": list(columns), "rows": list(rows), "sort": sort}
    return (
        f'<h2>{_e(title)}</h2><div class="filters" id="filters"></div><div class="muted" id="count"></div>'
        '<table id="table"><thead id="thead"></thead><tbody id="tbody"></tbody></table>'
        '<p id="pager" hidden><button class="more">show 200 more</button> <button class="all">show all</button></p>'
        f'<script type="application/json" id="rows">{_json_for_script(data)}</script>'
        f"<script>{_TABLE_JS}</script>"
    )


def _json_for_script(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element early, whatever the strings hold."""
    return orjson.dumps(data).decode().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(title: str, body: str) -> str:
    """The HTML document around ``body``: inline style, and a policy that allows no request at all."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>{body}</body></html>"
    )


def viewer_relpath(session_path: str) -> str:
    """Where ``eval --viewers`` writes a session's viewer, relative to the output directory."""
    name = session_path.removesuffix(_SESSION_SUFFIX)
    return f"{VIEWERS_DIR}/{name}.html"


def viewer_links(run: Run, *, relative_to: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Session path -> href of its viewer, for the viewers that exist inside the run's ``viewers``
    directory; hrefs are relative to ``relative_to`` (default: the run's output directory)."""
    base = Path(relative_to) if relative_to is not None else run.output_dir
    viewers = (run.output_dir / VIEWERS_DIR).resolve()
    if not viewers.is_dir():
        return {}
    links = {}
    for episode in run.episodes:
        if episode.session_path is None:
            continue
        target = (run.output_dir / viewer_relpath(episode.session_path)).resolve()
        if not target.is_relative_to(viewers) or not target.is_file():
            continue
        href = Path(os.path.relpath(target, base.resolve())).as_posix()
        links[episode.session_path] = quote(href)
    return links


def _episode_rows(tasks: Iterable[TaskResult], links: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for task in tasks:
        for number, episode in enumerate(task.episodes, 1):
            rows.append(
                {
                    "task": task.task,
                    "episode": episode.instance_id,
                    "episode_href": links.get(episode.session_path or ""),
                    "trial": f"{number}/{task.trials}",
                    "site": episode.site,
                    "template": episode.template,
                    "eval_type": episode.eval_type,
                    "score": episode.score,
                    "outcome": episode.outcome,
                    "class": episode.failure_class or "",
                    "provenance": episode.provenance,
                    "why": episode.attribution_reason or episode.error or "",
                    "timeline": episode.check_timeline or "",
                }
            )
    return rows


EPISODE_COLUMNS: tuple[dict[str, Any], ...] = (
    {"key": "task", "label": "task"},
    {"key": "episode", "label": "episode (viewer)", "type": "link"},
    {"key": "trial", "label": "trial"},
    {"key": "site", "label": "site", "filter": True},
    {"key": "template", "label": "template"},
    {"key": "eval_type", "label": "eval type", "filter": True},
    {"key": "score", "label": "score", "type": "num"},
    {"key": "outcome", "label": "outcome", "type": "outcome", "filter": True},
    {"key": "class", "label": "class", "filter": True},
    {"key": "provenance", "label": "provenance", "filter": True},
    {"key": "why", "label": "why", "type": "long"},
    {"key": "timeline", "label": "failed checks over the steps", "type": "lines"},
)


def render_run_html(run: Run, report: Report, *, links: Mapping[str, str] | None = None) -> str:
    """The report page of ``run``; ``report`` (from ``report.py``) supplies the headline figures, so
    ``report.html`` says what ``report.md`` says."""
    tasks = run.tasks()
    trials = trial_summary(tasks.values())
    score, max_score = report.score, report.max_score
    confidence = f"{CONFIDENCE:.0%} CI"
    unscored = sum(not e.scored for e in run.episodes)
    body = [
        f"<h1>Offline evaluation: {_e(run.name)}</h1>",
        f'<p class="muted">{_e(describe_trials(report.trials))}. A task\'s score is the mean over its trials; '
        "every mean averages tasks.</p>",
    ]
    if trials.mixed:
        body.append('<p class="note" id="mixed-trials">Tasks were run a different number of times.</p>')
    body.append(
        '<div class="headline">'
        f'<div><div class="muted">score, template macro</div><div class="big" id="headline">{_num(score.macro.mean)}</div>'
        f'<div>{confidence} <span id="headline-ci">{_interval(score.macro.ci_low, score.macro.ci_high)}</span> over '
        f"{plural(score.macro.templates, 'template')}</div></div>"
        f'<div><div class="muted">max_score (max over steps), macro</div><div class="big">{_num(max_score.macro.mean)}</div>'
        f"<div>{confidence} {_interval(max_score.macro.ci_low, max_score.macro.ci_high)}</div></div>"
        f'<div><div class="muted">sessions passed</div><div class="big">{sum(e.passed for e in run.episodes)}'
        f"/{len(run.episodes)}</div><div>mean over tasks {_num(score.mean)}</div></div>"
        f'<div><div class="muted">could not be scored</div><div class="big" id="unscored">{unscored}</div>'
        f"<div>of {plural(len(run.episodes), 'session')}</div></div></div>"
    )
    if trials.tasks_with_trials:
        body.append(
            '<h2>Trials</h2><table id="trials"><tbody>'
            f'<tr><td>tasks with several trials</td><td class="n">{trials.tasks_with_trials}</td></tr>'
            f'<tr><td>pass@1 (mean over their trials)</td><td class="n">{_num(trials.pass1)}</td></tr>'
            f'<tr><td>pass@{trials.k} (any of {trials.k} trials passes)</td><td class="n">{_num(trials.pass_k)}</td></tr>'
            f'<tr><td>pass^{trials.k} (all {trials.k} trials pass)</td><td class="n">{_num(trials.pass_all_k)}</td></tr>'
            f'<tr><td>mean spread (max - min score between trials)</td><td class="n">{_num(trials.mean_spread)}</td></tr>'
            f'<tr><td>tasks whose trials disagree</td><td class="n">{trials.inconsistent}</td></tr>'
            "</tbody></table>"
        )
    body.append(group_section("Per site", "site", group_by(tasks.values(), lambda t: t.first.site)))
    body.append(
        group_section("Per eval type", "eval type", group_by(tasks.values(), lambda t: t.first.eval_type))
    )
    body.append(
        group_section(
            "Per template", "template", group_by(tasks.values(), lambda t: t.first.template), chart=False
        )
    )
    body.append(_provenance_section(run))
    body.append(_failure_section(run))
    if not links:
        body.append(
            '<p class="muted" id="no-viewers">No viewer links: run the same <code>cdp-session eval</code> again '
            "with <code>--viewers</code> (scored sessions are not scored again) to link every episode to its "
            "step-by-step viewer, or write one with <code>cdp-session view SESSION</code>.</p>"
        )
    body.append(
        table_section("Episodes", EPISODE_COLUMNS, _episode_rows(tasks.values(), links or {}), sort="task")
    )
    return page(f"Offline evaluation: {run.name}", "".join(body))


def _counts_table(title: str, counts: Counter[str], element_id: str) -> str:
    total = sum(counts.values()) or 1
    rows = "".join(
        f'<tr><td>{_e(key)}</td><td class="n">{count}</td><td class="n">{count / total:.0%}</td></tr>'
        for key, count in counts.most_common()
    )
    return f'<table id="{element_id}"><thead><tr><th>{_e(title)}</th><th class="n">sessions</th><th class="n">share</th></tr></thead><tbody>{rows}</tbody></table>'


def _provenance_section(run: Run) -> str:
    counts = Counter(e.provenance for e in run.episodes)
    return (
        '<h2>Provenance</h2><p class="muted">Where the answers scored came from: <b>recorded</b> live, '
        "<b>reconstructed</b> from captured pages, or <b>imported</b> from another tool's recording.</p>"
        + _counts_table("provenance", counts, "provenance")
    )


def _failure_section(run: Run) -> str:
    failing = [e for e in run.episodes if not e.passed]
    counts = Counter(e.failure_class or "" for e in failing)
    attributed = sum(e.attribution_class is not None and e.scored for e in failing)
    unscored = sum(e.attribution_class is not None and not e.scored for e in failing)
    if attributed or unscored:
        how = (
            f"{plural(attributed, 'session')} attributed by the scorer's checks (each asked again at every step)"
            + (
                f", {plural(unscored, 'session')} that could not be scored by the scoring error"
                if unscored
                else ""
            )
            + "; the others by error or eval type."
        )
    else:
        how = "No attribution in this output: failures are grouped by error type or by the eval types of the task."
    return f'<h2>Failure attribution</h2><p class="muted">{_e(how)}</p>' + (
        _counts_table("class", counts, "attribution") if failing else "<p>No failure.</p>"
    )


def write_run_html(
    output_dir: str | os.PathLike[str], run: Run, report: Report, *, links: Mapping[str, str] | None = None
) -> Path:
    """Write ``report.html`` into ``output_dir``."""
    path = Path(output_dir) / REPORT_HTML
    with open_output(path) as output:  # never through a symlink planted where the report goes
        output.write(render_run_html(run, report, links=links).encode())
    return path
