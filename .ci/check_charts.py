"""Move every control of every kernel-free chart on the built site, in a real browser, and check what is drawn.

Serves the built site on 127.0.0.1 and opens, with Playwright for Python driving
Debian's Chromium (``/usr/bin/chromium``; no browser is downloaded), every page
that holds a chart of :mod:`mixlib.interactive` (``div.mixbook-vega``). On each page:

* every chart is drawn by the site's own vega (no request leaves 127.0.0.1), with
  no console error, and the page has no dead widget (no
  ``jupyter-widgets-disconnected`` element, no widget view script left unrendered);
* every bound control (dropdown, slider, checkbox) is moved to another value, and
  the chart's parameter follows it;
* no state draws the chart wider than the text column, or cuts off a mark outside its view;
* no state draws visible text smaller than :data:`mixlib.plots.MIN_TEXT_PX` (10 px) as shown on the page,
  the limit the notebooks' matplotlib figures are held to;
* on a token axis (keys "<pos>|<category>|<token>") the tokens stand in sentence order in every state;
* after each move the chart shows the numbers Python computed for that state: the
  expected text is computed here from the specification embedded in the page with
  :func:`mixlib.interactive.mixing_state` / :func:`~mixlib.interactive.context_state`
  (the unit tests check that those equal mixlib's results), and must appear in the
  drawn SVG;
* the size of each chapter page and of the chart data it embeds is printed, and a
  page whose charts embed more than ``--budget-mb`` (2 MB) fails.

A screenshot of each chart (with its controls), after they were moved, goes to ``--screenshots``
(``chart_<page>_<i>.png``).

Usage::

    python .ci/check_charts.py _build/html --screenshots _build/screenshots
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from site_browser import Traffic, chromium, serve

from mixlib import interactive
from mixlib.plots import MIN_TEXT_PX
from mixlib.course import charts as course_charts


def _d3(v: float, digits: int = 3) -> str:
    """d3-format's fixed notation: no sign on a value that rounds to zero, and a minus sign (U+2212), not a hyphen."""
    t = f"{v:.{digits}f}"
    return t.lstrip("-") if float(t) == 0 else t.replace("-", "\u2212")


def _fmt1(x: float) -> str:
    """JavaScript-like format(x, '.1f') for the values checked here (no half-way cases matter at 0.1)."""
    return f"{x:.1f}"


def expected_text(spec: dict, state: dict) -> str | list[str]:
    """The text a chart of the given kind must show in ``state`` (computed from the embedded data): a line, or lines."""
    kind = spec.get("usermeta", {}).get("mixbook", {}).get("kind")
    if kind == "mixing":
        s = interactive.mixing_state(spec, example=int(state["example"]), layer=int(state["layer"]),
                                     masked=bool(state.get("masked", True)))
        vals = [v for v in s["ratio"] if v is not None]
        run = ("（[MASK] あり）" if state["masked"] else "（[MASK] なし）") if "masked" in state else ""
        return f"層 {int(state['layer'])}{run}：{len(vals)} トークンの混ぜる割合の平均 {_fmt1(sum(vals) / len(vals))}%"
    if kind == "context":
        s = interactive.context_state(spec, example=int(state["example"]), layer=int(state["layer"]), token=int(state["token"]))
        return f"層 {int(state['layer'])}：位置 {s['j']} のトークン「{s['token'][s['j']]}」はどこから情報を受け取るか"
    if kind == "position_head":
        s = interactive.position_head_state(spec, layer=int(state["layer"]), head=int(state["head"]), layernorm=bool(state["layernorm"]))
        # the heaviest offset (first in offset order among equal maxima, as the chart's window sorts)
        i = max(range(len(s["profile"])), key=lambda k: (s["profile"][k], -k))
        ln = "（層正規化あり）" if state["layernorm"] else "（層正規化なし）"
        off = f"{s['offsets'][i]:+d}".replace("-", "\u2212")  # d3-format writes a minus sign, not a hyphen
        n = spec["usermeta"]["mixbook"]["n"]
        if s["profile"][i] < interactive.FLAT_PROFILE / n:
            return f"層 {int(state['layer'])}・ヘッド {int(state['head'])}{ln}：どの相対位置の重みもほぼ一様（最大 {s['profile'][i]:.3f}、一様なら {1 / n:.3f}）"
        return (f"層 {int(state['layer'])}・ヘッド {int(state['head'])}{ln}：もっとも重い相対位置 {off}"
                f"（平均の重み {s['profile'][i]:.3f}）")
    if kind == "head":
        s = interactive.head_state(spec, layer=int(state["layer"]), head=int(state["head"]))
        return f"層 {int(state['layer'])}・ヘッド {int(state['head'])}：ψ が最大のクラスタ #{s['c'][0]}（{s['typ'][0]}、{s['psi'][0]:.3f}）"
    if kind == "token":
        s = interactive.token_state(spec, token=state["token"])
        flat = s["psi"].ravel()
        i = int(flat.argmax())  # the first maximum in layer-major order, as the chart's window sorts
        H = s["psi"].shape[1]
        return (f"トークン「{state['token']}」（クラスタ #{s['c']}・{s['typ']}）：ψ が最大のヘッドは 層 {s['layers'][i // H]}・"
                f"ヘッド {i % H}（{flat[i]:.3f}）")
    if kind == "fill_mask":
        model = spec["usermeta"]["mixbook"]["models"][0]
        s = interactive.fill_mask_state(spec, sentence=int(state["sentence"]))[model]
        return f"{model} の 1 位：{s['tok'][0]}（{s['p'][0]:.3f}）"
    if kind == "ranking":
        s = interactive.ranking_state(spec, choice=int(state["choice"]))
        name = next(p for p in spec["params"] if p["name"] == "choice")["bind"]["name"].strip()  # 文 / 単語
        group = [f"{spec['usermeta']['mixbook']['group_name']}：{s['group']}"] if s["group"] else []
        shown = f"（上位 {int(state['k'])} 件）" if "k" in state else ""
        return [f"選んだ{name}：「{s['label']}」{shown}", *group, f"1 位：{s['first']}（{s['values'][0]:.3f}）"]
    if kind == "vector_pair":
        s = interactive.vector_pair_state(**{k: float(state[k]) for k in ("angle_x", "len_x", "angle_y", "len_y")})
        return (f"x·y = {_d3(s['dot'])}　|x||y| = {_d3(s['norms'])}　cos θ = {_d3(s['cos'])}　a = {_d3(s['a'])}"
                f"　平行四辺形 = {_d3(s['area'])}")
    meta = spec.get("usermeta", {}).get("mixbook", {})
    if kind == "softmax_scale":
        s = course_charts.softmax_scale_state(spec, d_k=int(state["dk"]))
        want = [f"dₖ = {int(state['dk'])}：この例の最大の重みは、割らないと {s['max_raw']:.2f}、√dₖ で割ると {s['max_scaled']:.2f}"]
        if s["mean_max"] is not None:
            want.append(f"（{meta['n_mean']} 例の平均では {s['mean_max'][0]:.2f} と {s['mean_max'][1]:.2f}。一つの例は平均からずれる）")
        return want
    if kind == "pe_dot":
        d = int(state["delta"])
        s = course_charts.pe_dot_state(meta["n_positions"], meta["d_model"], delta=d, base=meta["base"])
        if s["n"] == 1:
            return f"δ = {d}：差が δ の組は 1 組だけ：PE[0]·PE[δ] = {_d3(s['lo'])}"
        return f"δ = {d}：差が δ の {s['n']} 組の内積 PE[pos]·PE[pos+δ] は、最小 {_d3(s['lo'])}、最大 {_d3(s['hi'])}"
    if kind == "pe_position":
        pos, dim = int(state["pos"]), int(state["dim"])
        s = course_charts.pe_position_state(meta["n_positions"], meta["d_model"], pos=pos, dim=dim, base=meta["base"])
        return f"位置 {pos}・次元 {dim}（{s['kind']}、波長 {s['wavelength']:.1f}）：値 {_d3(s['value'])}"
    if kind == "bottleneck":
        L = int(state["length"])
        s = course_charts.bottleneck_state(spec, length=L)
        return (f"長さ {L}：完全一致 {s['accuracy']:.2f}、文字ごと {s['char_accuracy']:.2f}（c は長さによらず {meta['hidden']} 次元）。"
                f"この例：{'正解' if s['exact'] else '不正解'}（正しい文字 {s['right']} / {L}）")
    if kind == "alignment":
        L, e = int(state["length"]), int(state["example"])  # the slider counts examples from 1
        s = course_charts.alignment_state(spec, length=L, example=e - 1)
        return f"長さ {L}・例 {e}/{meta['n_examples']}：重みが最大の入力は、{s['steps']} ステップ中 対応する位置に {s['on']}、一つ右に {s['right']}"
    if kind == "errors":
        ep = int(state["epoch"])
        s = course_charts.errors_state(spec, epoch=ep)
        head = f"エポック {ep}：{s['n']} 首中 {s['wrong']} 首で誤り"
        if s["wrong"] == 0:
            return [head + "（すべて完全一致）"]
        head += f"（上から {meta['max_rows']} 首を表示）" if s["wrong"] > meta["max_rows"] else ""
        return [head, f"灰色の行が正解、その下の行が生成。赤（誤り・足りない文字）は {s['red']} 字"]
    if kind == "neighbour":
        win, wt = int(state["win"]), state["weighting"]
        s = course_charts.neighbour_state(spec, word=int(state["word"]), window=win, weighting=wt)
        return [f"「{s['word']}」（{s['word_kind']}）に近い語（窓 {win}、{wt}）：1 位 {s['items'][0]}（{s['values'][0]:.3f}）",
                f"この設定での同じ種類の割合（全内容語の平均）：{s['share']:.3f}"]
    raise ValueError(f"unknown chart kind {kind!r} (usermeta.mixbook.kind)")


def _missing(want: str | list[str], drawn: str) -> str:
    """The expected lines that are not in the drawn text, joined ('' when every one is there)."""
    return " / ".join(w for w in ([want] if isinstance(want, str) else want) if w not in drawn)


def _other_value(control: dict, current):
    """A value of the control different from ``current`` (the last option / the far end / the opposite)."""
    if control["type"] == "checkbox":
        return not current
    if control["type"] == "select":
        options = control["options"]
        return options[-1] if current != options[-1] else options[0]
    if control["type"] == "range":
        lo, hi = control["min"], control["max"]
        return hi if current != hi else lo
    raise ValueError(control)


JS_STATE = """(box) => {
  const v = box.querySelector('.mixbook-vega-view').__vegaView;
  const spec = JSON.parse(box.querySelector('script.mixbook-vega-spec').textContent);
  const out = {};
  for (const p of spec.params || []) if (p.bind) out[p.name] = v.signal(p.name);
  return out;
}"""

JS_WIDTH = "(box) => [box.scrollWidth, box.clientWidth]"

# marks drawn outside the SVG's own area are cut off (the view was not laid out again for the new state)
JS_CLIPPED = """(box) => { const svg = box.querySelector('.mixbook-vega-view svg'); const r = svg.getBoundingClientRect();
  return Array.from(svg.querySelectorAll('text, path')).filter(e => { const b = e.getBoundingClientRect();
    return b.width > 0 && (b.right > r.right + 1 || b.bottom > r.bottom + 1); }).length; }"""

# token axes: every scale whose domain holds token keys ("<pos>|<category>|<token>") lists them in sentence order
JS_ORDER = """(box) => { const v = box.querySelector('.mixbook-vega-view').__vegaView; const bad = [];
  for (const name of Object.keys(v._runtime.scales)) {
    let dom; try { dom = v.scale(name).domain(); } catch (e) { continue; }
    const pos = dom.filter(d => typeof d === 'string' && /^\\d+\\|/.test(d)).map(d => parseInt(d, 10));
    if (pos.some((p, i) => i > 0 && p <= pos[i - 1])) bad.push(name + ': ' + dom.slice(0, 4).join(', '));
  }
  return bad; }"""

# visible text drawn smaller than min_px as shown (font size times the SVG's scale on the page); an empty label,
# a mark faded to opacity 0 or a hidden group does not count
JS_SMALL = """(box, minPx) => { const small = [];
  for (const t of box.querySelectorAll('svg text')) {
    const txt = t.textContent.trim(); if (!txt) continue;
    let e = t, shown = true;
    for (; e && e.tagName.toLowerCase() !== 'svg'; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0 || parseFloat(s.fillOpacity) === 0) shown = false;
    }
    if (!shown) continue;
    const m = t.getScreenCTM(), px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    if (px < minPx - 0.05) small.push(txt.slice(0, 24) + ' (' + px.toFixed(1) + ' px)');
  }
  return small; }"""

JS_TEXT = """(box) => Array.from(box.querySelectorAll('svg text')).map(t => t.textContent).join('\\n')"""


def check_page(page, base: str, url: str, shot: Path | None) -> tuple[list[str], int]:
    problems: list[str] = []
    traffic = Traffic(base).watch(page)
    page.goto(url, wait_until="load")
    boxes = page.locator("div.mixbook-vega")
    n = boxes.count()
    try:
        page.wait_for_function("() => Array.from(document.querySelectorAll('div.mixbook-vega'))"
                               ".every(b => b.dataset.state === 'ready' || b.dataset.state === 'error')", timeout=60_000)
    except Exception as err:  # noqa: BLE001 - report, do not crash
        problems.append(f"charts not drawn within 60 s: {err}")
        return problems, n
    data_bytes = 0
    for i in range(n):
        box = boxes.nth(i)
        if box.get_attribute("data-state") != "ready":
            problems.append(f"chart {i}: {box.inner_text()[:200]}")
            continue
        spec = json.loads(box.locator("script.mixbook-vega-spec").text_content())
        data_bytes += sum(len(json.dumps(d)) for d in interactive._all_data(spec))
        controls = {p["name"]: {"type": p["bind"].get("input"), **p["bind"]} for p in spec.get("params", []) if "bind" in p}
        state = box.evaluate(JS_STATE)
        want = _missing(expected_text(spec, state), box.evaluate(JS_TEXT))
        if want:
            problems.append(f"chart {i}: initial state {state}: '{want}' not drawn")
        widest = box.evaluate(JS_WIDTH)
        small = set(box.evaluate(JS_SMALL, MIN_TEXT_PX))
        for bad in box.evaluate(JS_ORDER):
            problems.append(f"chart {i}: initial state {state}: tokens out of sentence order on {bad}")
        for name, control in controls.items():
            new = _other_value(control, state[name])
            el = box.locator(f".vega-bind-name:text-is('{control.get('name', name)}')").locator("..").locator("input, select").first
            if control["type"] == "checkbox":
                el.click()
            elif control["type"] == "select":
                el.select_option(index=control["options"].index(new))
            else:  # range: set the slider's value and fire what a user's drag fires
                el.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true}));"
                            " e.dispatchEvent(new Event('change', {bubbles: true})); }", str(new))
            page.wait_for_timeout(300)
            state = box.evaluate(JS_STATE)
            if state[name] != new:
                problems.append(f"chart {i}: control {name!r} moved to {new!r} but the chart's parameter is {state[name]!r}")
                continue
            want = _missing(expected_text(spec, state), box.evaluate(JS_TEXT))
            if want:
                problems.append(f"chart {i}: after moving {name!r} to {new!r} (state {state}): '{want}' not drawn")
            widest = max(widest, box.evaluate(JS_WIDTH), key=lambda w: w[0])
            small |= set(box.evaluate(JS_SMALL, MIN_TEXT_PX))
            for bad in box.evaluate(JS_ORDER):
                problems.append(f"chart {i}: after moving {name!r} to {new!r}: tokens out of sentence order on {bad}")
            clipped = box.evaluate(JS_CLIPPED)
            if clipped:
                problems.append(f"chart {i}: after moving {name!r} to {new!r}: {clipped} mark(s) drawn outside the view (cut off)")
        if small:
            problems.append(f"chart {i}: {len(small)} text(s) drawn under {MIN_TEXT_PX} px on the page, e.g. {sorted(small)[:4]}")
        if widest[0] > widest[1]:
            problems.append(f"chart {i}: drawn {widest[0]} px wide in a {widest[1]} px column (it runs out of the text)")
    if page.locator(".jupyter-widgets-disconnected").count():
        problems.append("a dead (disconnected) widget is on the page")
    if page.locator("script[type='application/vnd.jupyter.widget-view+json']").count() and not page.locator(".jupyter-widgets").count():
        problems.append("a saved widget view is on the page but was not rendered")
    problems += traffic.problems()
    if shot is not None:
        for i in range(n):
            boxes.nth(i).screenshot(path=str(shot.with_name(f"{shot.stem}_{i}.png")))
    return problems, data_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("--screenshots", type=Path)
    ap.add_argument("--budget-mb", type=float, default=2.0, help="most chart data one page may embed (MB)")
    args = ap.parse_args(argv)
    pages = sorted(p for p in (args.site / "notebooks").glob("*.html"))
    chart_pages = [p for p in pages if "mixbook-vega" in p.read_text(encoding="utf-8")]
    failed = False
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    print(f"{'page':32} {'page MB':>8} {'chart data MB':>14}  charts")
    with serve(args.site) as base, chromium() as browser:
        for path in pages:
            size = path.stat().st_size / 1e6
            if path not in chart_pages:
                print(f"{path.name:32} {size:8.2f} {'-':>14}  0")
                continue
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            shot = args.screenshots / f"chart_{path.stem}.png" if args.screenshots else None
            problems, data_bytes = check_page(page, base, f"{base}/notebooks/{path.name}", shot)
            n = path.read_text(encoding="utf-8").count('class="mixbook-vega"')
            print(f"{path.name:32} {size:8.2f} {data_bytes / 1e6:14.2f}  {n}")
            if data_bytes / 1e6 > args.budget_mb:
                problems.append(f"its charts embed {data_bytes / 1e6:.2f} MB, over the {args.budget_mb} MB budget")
            for p in problems:
                print(f"  FAIL {path.name}: {p}")
            failed |= bool(problems)
            page.close()
    if not chart_pages:
        print("no page holds a chart (div.mixbook-vega): nothing was checked")
        return 1
    print("charts: " + ("FAILED" if failed else f"every control of every chart moved and showed Python's numbers ({len(chart_pages)} pages)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
