"""Widgets for Part V: a second way to look at what the chapters' static figures show.

They need a running kernel. The chapters show their kernel-free forms (charts that
move on the static site too) from :mod:`mixlib.interactive`, and keep an explorer
only where the reader types something (in a cell tagged ``needs-kernel``).

Every ``*_explorer`` returns an :class:`Explorer`, an ``ipywidgets.VBox`` with
controls on top and an ``Output`` below that is redrawn whenever a control
changes. The drawing is done by the same functions in :mod:`mixlib.plots` that
draw the chapters' static figures, so the rendered book (which shows the
figure of the default state in a normal cell) loses nothing.

* :func:`mixing_explorer` -- a sentence and a layer -> per token, the norms of
  what attention mixes in, what attention keeps, what the residual keeps, and
  the mixing ratio (chapter 10).
* :func:`head_explorer` -- a layer and a head -> the clusters with the largest
  norm stretch, their tokens and psi (chapter 11).
* :func:`token_explorer` -- a token -> its cluster and its psi in every head
  (chapter 11).
* :func:`fill_mask_explorer` -- a sentence with ``[MASK]`` -> the top-k
  fill-ins of the miniature BERT and of any model with an MLM head (chapter 8).
* :func:`position_head_explorer` -- a layer and a head -> the attention that
  the position embeddings alone produce (chapter 12).

:attr:`Explorer.last` holds what was drawn last (a :class:`View`), so tests
and notebooks can check a widget without a browser. Bad input typed into a
widget (a word that is not in the vocabulary, an empty text) shows a message
under the controls instead of a traceback.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "View",
    "Explorer",
    "load_sentence_pairs",
    "load_sentence_topics",
    "mixing_explorer",
    "head_explorer",
    "token_explorer",
    "position_head_explorer",
    "fill_mask_explorer",
]


@dataclass
class View:
    """What one redraw of an :class:`Explorer` produced.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or None
    table : pandas.DataFrame or None
        Shown under the figure.
    data : dict
        Anything else a test or a notebook may want (the analysis result, indices ...).
    """

    figure: Any = None
    table: Any = None
    data: dict = field(default_factory=dict)


class Explorer:
    """Controls + an output area that is redrawn by ``render(**values)`` on every change.

    Build it with a mapping name -> control (ipywidgets value widgets) and a
    function that takes the controls' values as keyword arguments and returns a
    :class:`View`. ``ValueError``/``KeyError`` raised by ``render`` are shown as
    a message (bad user input); anything else propagates.

    Attributes
    ----------
    widget : ipywidgets.VBox
        What to display (an Explorer displays as this widget in Jupyter).
    controls : dict of str to ipywidgets.Widget
    last : View or None
        The last successful redraw.
    error : str or None
        The message of the last failed redraw (None after a successful one).
    n_renders : int
        Successful redraws so far.
    """

    def __init__(self, controls: Mapping[str, Any], render: Callable[..., View], *, title: str | None = None) -> None:
        import ipywidgets as widgets

        if not controls:
            raise ValueError("an Explorer needs at least one control.")
        self.controls = dict(controls)
        self._render = render
        self.output = widgets.Output()
        self.status = widgets.HTML(value="")
        self.last: View | None = None
        self.error: str | None = None
        self.n_renders = 0
        header = [widgets.HTML(value=f"<b>{html.escape(title)}</b>")] if title else []
        row = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([*header, row, self.status, self.output])
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    # -- behaviour -------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: Any) -> View | None:
        """Set several controls at once and redraw once; returns :attr:`last`."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise ValueError(f"unknown control(s) {unknown}; this explorer has {sorted(self.controls)}.")
        self._hold = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._hold = False
        self.refresh()
        return self.last

    def _on_change(self, change: Any) -> None:
        if not getattr(self, "_hold", False):
            self.refresh()

    def refresh(self) -> None:
        """Redraw from the controls' current values."""
        import matplotlib.pyplot as plt

        with self.output:
            self.output.clear_output(wait=True)
            try:
                view = self._render(**self.values())
            except (ValueError, KeyError) as err:
                msg = err.args[0] if err.args else str(err)
                self.error = str(msg)
                self.status.value = f"<span style='color:#c44e52'>{html.escape(self.error)}</span>"
                return
            self.error = None
            self.status.value = ""
            self.last = view
            self.n_renders += 1
            _display(view)
            if view.figure is not None:
                plt.close(view.figure)

    # -- display in Jupyter ----------------------------------------------
    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _display(view: View) -> None:
    from IPython.display import display

    if view.figure is not None:
        display(view.figure)
    if view.table is not None:
        display(view.table)


def _slider(description: str, value: int, lo: int, hi: int) -> Any:
    import ipywidgets as widgets

    return widgets.IntSlider(value=int(value), min=int(lo), max=int(hi), step=1, description=description,
                             continuous_update=False, style={"description_width": "initial"})


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


#: The book's sentence-pair files, by language (``data/README.md`` describes both).
SENTENCE_PAIRS = {"en": "sentence_pairs.tsv", "ja": "sentence_pairs_ja.tsv"}


def _sentence_rows(n: Any, lang: str) -> list[dict]:
    from .paths import data_path

    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ValueError(f"n={n!r}; give a positive int, or None for all pairs.")
    if lang not in SENTENCE_PAIRS:
        raise ValueError(f"lang={lang!r}; the book's sentence pairs are in {' and '.join(map(repr, SENTENCE_PAIRS))}.")
    path = data_path(SENTENCE_PAIRS[lang])
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows if n is None else rows[: int(n)]


def load_sentence_pairs(n: int | None = None, *, lang: str = "en") -> list[tuple[str, str]]:
    """The book's sentence pairs as ``(a, b)`` tuples: English (``data/sentence_pairs.tsv``, 283 pairs) or,
    with ``lang="ja"``, Japanese (``data/sentence_pairs_ja.tsv``, 300 pairs).

    Parameters
    ----------
    n : int, optional
        Only the first ``n`` pairs (all by default).
    lang : {"en", "ja"}, default "en"

    Returns
    -------
    list of (str, str)
    """
    return [(r["sentence_a"], r["sentence_b"]) for r in _sentence_rows(n, lang)]


def load_sentence_topics(n: int | None = None, *, lang: str = "en") -> list[str]:
    """The topic each of :func:`load_sentence_pairs`'s pairs was written for, in the same order (27 English topics,
    30 Japanese ones of 10 pairs each). Pairs of one topic are alike: give these as ``clusters`` to
    :func:`mixlib.stats.bootstrap_means` so that an interval does not treat them as independent.

    Parameters
    ----------
    n, lang
        As for :func:`load_sentence_pairs`.
    """
    return [r["topic"] for r in _sentence_rows(n, lang)]


def _short(text: Any, width: int = 70) -> str:
    s = " / ".join(text) if isinstance(text, (tuple, list)) else str(text)
    return s if len(s) <= width else s[: width - 1] + "…"


# ---------------------------------------------------------------------------
# chapter 10: mixing
# ---------------------------------------------------------------------------


def mixing_explorer(
    enc: Any,
    texts: Sequence[Any] | None = None,
    *,
    layer: int | None = None,
    example: int = 0,
    mask: bool = True,
    rate: float = 0.12,
    seed: int = 0,
) -> Explorer:
    """Pick (or type) a sentence and a layer; see, per token, what is mixed and what is kept.

    The sentence is decomposed with :func:`mixlib.decompose` (every layer at
    once, cached per sentence, so moving the layer slider is instant) and drawn
    with :func:`mixlib.plots.plot_token_mixing`.

    Parameters
    ----------
    enc : mixlib.Encoder
    texts : list of str or of (str, str), optional
        Example inputs offered in a drop-down; default: the first 20 pairs of
        ``data/sentence_pairs.tsv``. A text typed into the box is used instead
        while the box is not empty.
    layer : int, optional
        Initial layer (0-based); default the last one.
    example : int, default 0
        Index of the initially selected text.
    mask : bool, default True
        Initially replace ``rate`` of the tokens by ``[MASK]`` (checkbox).
    rate, seed : float, int
        Passed to :func:`mixlib.mask_tokens`.

    Returns
    -------
    Explorer
        ``last.data`` holds ``mixing`` (the :class:`mixlib.Mixing` drawn),
        ``text`` and ``layer``.
    """
    import ipywidgets as widgets

    from . import plots
    from .data import mask_tokens
    from .mixing import decompose

    texts = list(load_sentence_pairs(20) if texts is None else texts)
    if not texts:
        raise ValueError("texts is empty; give at least one str or (str, str) pair, or None for the book's examples.")
    layer = enc.n_layers - 1 if layer is None else enc.check_layer(layer)
    if isinstance(example, bool) or not isinstance(example, (int, np.integer)) or not 0 <= example < len(texts):
        raise ValueError(f"example={example!r} is out of range: there are {len(texts)} texts (0..{len(texts) - 1}).")
    cache: dict[tuple[Any, bool], Any] = {}

    def analyse(text: Any, masked: bool) -> Any:
        key = (tuple(text) if isinstance(text, (list, tuple)) else text, bool(masked))
        if key not in cache:
            if masked:
                batch = mask_tokens(enc, [text], rate=rate, seed=seed)
            else:
                from .data import tokenize

                batch = tokenize(enc, [text], max_length=128)
            cache[key] = decompose(enc, batch, vectors=False, progress=False)
        return cache[key]

    def render(example: int, custom: str, masked: bool, layer: int) -> View:
        text = custom.strip() or texts[example]
        m = analyse(text, masked)
        fig = plots.plot_token_mixing(m, enc, layer=layer, seq=0)
        return View(figure=fig, data={"mixing": m, "text": text, "layer": layer})

    controls = {
        "example": widgets.Dropdown(options=[(_short(t), i) for i, t in enumerate(texts)], value=int(example), description="例文",
                                    layout=widgets.Layout(width="95%")),
        "custom": widgets.Text(value="", placeholder="英文を入力（空欄なら上の例文）", description="入力",
                               continuous_update=False, layout=widgets.Layout(width="95%")),
        "masked": widgets.Checkbox(value=bool(mask), description=f"{rate:.0%} を [MASK] にする"),
        "layer": _slider("層", layer, 0, enc.n_layers - 1),
    }
    return Explorer(controls, render, title=f"混ぜる量と残す量（{enc.describe()}）")


# ---------------------------------------------------------------------------
# chapter 11: norm stretch over clusters
# ---------------------------------------------------------------------------


def head_explorer(cs: Any, clusters: Any, enc: Any, *, layer: int = 0, head: int = 0, n: int = 8,
                  normalized: bool = False) -> Explorer:
    """Choose a layer and a head; see the clusters with the largest mean psi_qkv and their tokens.

    Parameters
    ----------
    cs : numpy.ndarray, (L, H, K)
        :func:`mixlib.cluster_stretch` of the word embeddings.
    clusters : mixlib.VocabClusters
    enc : Encoder or str
        Named in the caption.
    layer, head, n : int
        Initial layer and head (0-based) and how many clusters to list.
    normalized : bool, default False
        ``cs`` was computed from a normalised psi (axis label only).

    Returns
    -------
    Explorer
        ``last.table`` is :func:`mixlib.top_clusters` for the chosen head.
    """
    from . import plots
    from .clusters import top_clusters

    cs = np.asarray(cs)
    if cs.ndim != 3:
        raise ValueError(f"cs must have shape (L, H, K) from cluster_stretch(); got {cs.shape}.")
    L, H, K = cs.shape

    def render(layer: int, head: int, n: int) -> View:
        table = top_clusters(cs, clusters, layer, head, n=n)
        fig = plots.plot_top_clusters(table, enc, layer=layer, head=head, normalized=normalized)
        return View(figure=fig, table=table, data={"layer": layer, "head": head})

    controls = {
        "layer": _slider("層", layer, 0, L - 1),
        "head": _slider("ヘッド", head, 0, H - 1),
        "n": _slider("上位", n, 3, min(20, K)),
    }
    return Explorer(controls, render, title=f"ヘッドが伸ばすクラスタ（{plots.model_label(enc)}）")


def _token_id(enc: Any, token: str) -> int:
    tok = enc.tokenizer
    vocab = tok.get_vocab()
    t = token.strip()
    if not t:
        raise ValueError("type a token (a vocabulary entry such as 'january' or '##ing').")
    if t in vocab:
        return int(vocab[t])
    if t.lower() in vocab and getattr(tok, "do_lower_case", True):
        return int(vocab[t.lower()])
    pieces = tok.tokenize(t)
    raise ValueError(f"{t!r} is not one vocabulary entry of {enc.name}; the tokenizer splits it into {pieces}. "
                     "Type one of those pieces.")


def token_explorer(stretch: Any, clusters: Any, enc: Any, *, token: str = "january") -> Explorer:
    """Type a token; see its cluster and its psi_qkv in every head (a layer x head map).

    Parameters
    ----------
    stretch : mixlib.Stretch
        :func:`mixlib.norm_stretch` of the word embeddings (all tokens).
    clusters : mixlib.VocabClusters
    enc : mixlib.Encoder
        Its tokenizer maps the typed text to a vocabulary id.
    token : str, default "january"

    Returns
    -------
    Explorer
        ``last.data`` holds ``token_id``, ``cluster`` and ``psi`` ((L, H) array).
    """
    import ipywidgets as widgets

    from . import plots

    def render(token: str) -> View:
        tid = _token_id(enc, token)
        c = int(clusters.labels[tid])
        psi = np.asarray(stretch.psi_qkv)[:, :, tid]  # (L, H)
        fig = plots.plot_token_psi(psi, enc, token=clusters.tokens[tid], cluster=c, cluster_type=str(clusters.cluster_types[c]),
                                   layers=stretch.layers, normalized=bool(getattr(stretch, "normalized", False)))
        table = clusters.table([c], n=12)
        return View(figure=fig, table=table, data={"token_id": tid, "cluster": c, "psi": psi})

    controls = {"token": widgets.Text(value=token, description="トークン", continuous_update=False)}
    return Explorer(controls, render, title=f"トークンのノルム伸縮率（{plots.model_label(enc)}）")


# ---------------------------------------------------------------------------
# chapter 12: attention from positions alone
# ---------------------------------------------------------------------------


def position_head_explorer(enc: Any, *, layer: int = 0, head: int = 0, n: int = 64, layernorm: bool = False,
                           max_offset: int = 8) -> Explorer:
    """Choose a layer and a head; see the attention the position embeddings alone produce.

    The weights come from :func:`mixlib.position_attention` (cached per layer
    and LayerNorm setting) and are drawn with
    :func:`mixlib.plots.plot_position_head`: the ``n x n`` map and the mean
    weight at each relative offset (key position minus query position).

    Parameters
    ----------
    enc : mixlib.Encoder
    layer, head : int
        Initial layer and head (0-based).
    n : int, default 64
        Positions 0..n-1.
    layernorm : bool, default False
        Initial state of the "LayerNorm" checkbox (see :func:`mixlib.position_attention`).
    max_offset : int, default 8

    Returns
    -------
    Explorer
        ``last.data`` holds ``attention`` ((n, n) array) and ``profile``.
    """
    import ipywidgets as widgets

    from . import plots
    from .positional import position_attention

    enc.check_layer(layer)
    enc.check_head(head)
    cache: dict[tuple[int, bool], np.ndarray] = {}

    def render(layer: int, head: int, layernorm: bool) -> View:
        key = (int(layer), bool(layernorm))
        if key not in cache:
            cache[key] = position_attention(enc, layer=int(layer), n=n, layernorm=bool(layernorm))
        A = cache[key][int(head)]  # (n, n)
        fig = plots.plot_position_head(A, enc, layer=layer, head=head, max_offset=max_offset)
        return View(figure=fig, data={"attention": A, "profile": plots.attention_by_offset(A, max_offset)})

    controls = {
        "layer": _slider("層", layer, 0, enc.n_layers - 1),
        "head": _slider("ヘッド", head, 0, enc.n_heads - 1),
        "layernorm": widgets.Checkbox(value=bool(layernorm), description="埋め込みの層正規化を通す"),
    }
    return Explorer(controls, render, title=f"位置ベクトルだけから計算した注意（{enc.describe()}）")


# ---------------------------------------------------------------------------
# chapter 10, beyond the papers: token-to-token maps (mixlib.measures)
# ---------------------------------------------------------------------------

__all__ += ["context_explorer"]


def context_explorer(enc: Any, texts: Sequence[Any] | None = None, *, example: int = 0, layer: int | None = None,
                     token: int = 0, rate: float = 0.12, seed: int = 0) -> Explorer:
    """Pick a sentence pair, a layer and a token; see where the token takes its information from.

    The text is masked with :func:`mixlib.mask_tokens` and analysed once with
    :func:`mixlib.context_maps` (all layers, cached per text); the panels are
    drawn by :func:`mixlib.plots.plot_context_row`: attention weights, the
    weighted-norm map, the AttnResLn map and ALTI side by side.

    Returns
    -------
    Explorer
        ``last.data`` holds ``maps`` (the :class:`mixlib.measures.ContextMaps`), ``layer`` and ``token``.
    """
    import ipywidgets as widgets

    from . import plots
    from .data import mask_tokens
    from .measures import context_maps

    texts = list(load_sentence_pairs(20) if texts is None else texts)
    if not texts:
        raise ValueError("texts is empty; give at least one str or (str, str) pair, or None for the book's examples.")
    if isinstance(example, bool) or not isinstance(example, (int, np.integer)) or not 0 <= example < len(texts):
        raise ValueError(f"example={example!r} is out of range: there are {len(texts)} texts (0..{len(texts) - 1}).")
    layer = enc.n_layers - 1 if layer is None else enc.check_layer(layer)
    cache: dict[int, Any] = {}

    def analyse(i: int) -> Any:
        if i not in cache:
            cache[i] = context_maps(enc, mask_tokens(enc, [texts[i]], rate=rate, seed=seed))
        return cache[i]

    def render(example: int, layer: int, token: int) -> View:
        cm = analyse(int(example))
        n = len(cm.token_strings[0])
        if token >= n:
            raise ValueError(f"この文対のトークンは {n} 個（位置 0〜{n - 1}）。位置を小さくする。")
        fig = plots.plot_context_row(cm, enc, layer=layer, token=int(token))
        return View(figure=fig, data={"maps": cm, "layer": layer, "token": int(token)})

    controls = {
        "example": widgets.Dropdown(options=[(_short(t), i) for i, t in enumerate(texts)], value=int(example), description="例文",
                                    layout=widgets.Layout(width="95%")),
        "layer": _slider("層", layer, 0, enc.n_layers - 1),
        "token": _slider("受け取るトークンの位置", token, 0, 127),
    }
    return Explorer(controls, render, title=f"トークンはどこから情報を受け取るか（{enc.describe()}）")


# ---------------------------------------------------------------------------
# chapter 8: fill in the blank
# ---------------------------------------------------------------------------


def fill_mask_explorer(fillers: Mapping[str, Callable[[str, int], Any]], *, text: str = "the queen loves [MASK] crown",
                       k: int = 5, note: str = "") -> Explorer:
    """Type a sentence with ``[MASK]``; see the top-k fill-ins of every model side by side.

    Parameters
    ----------
    fillers : dict of str to callable
        Model name -> ``fill(text, k)`` returning one DataFrame per ``[MASK]``
        (``rank``, ``token``, ``prob``), e.g. ``MiniBert.fill_mask`` or
        ``lambda t, k: mixlib.course.minibert.fill_mask(mlm, tok, t, k=k)``.
        Models without an MLM head are simply left out.
    text : str
        Initial input.
    k : int, default 5
        Initial number of candidates (slider 1..10).
    note : str
        A line under the figure (which models these are).

    Returns
    -------
    Explorer
        The figure (:func:`mixlib.course.minibert.plot_fill_mask`) shows the
        first ``[MASK]``; the table lists every ``[MASK]`` of every model.
        ``last.data`` holds ``results`` (name -> list of DataFrames) and ``text``.
        A text without ``[MASK]`` shows a message instead.
    """
    import ipywidgets as widgets
    import pandas as pd

    from .course.minibert import plot_fill_mask

    if not fillers:
        raise ValueError("fillers is empty; give at least one model name -> fill(text, k) function.")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= 10:
        raise ValueError(f"k={k!r}; give an int between 1 and 10.")

    def render(text: str, k: int) -> View:
        text = text.strip()
        if "[MASK]" not in text:
            raise ValueError("文に [MASK] を一つ以上入れる（例：the queen loves [MASK] crown）。")
        results = {name: fill(text, int(k)) for name, fill in fillers.items()}
        rows = []
        for name, tables in results.items():
            for i, t in enumerate(tables):
                rows.append({"モデル": name, "穴": i + 1} | {f"{r.rank}位": f"{r.token} ({r.prob:.2f})" for r in t.itertuples()})
        fig = plot_fill_mask({name: tables[0] for name, tables in results.items()}, text, note=note)
        return View(figure=fig, table=pd.DataFrame(rows).set_index(["モデル", "穴"]), data={"results": results, "text": text})

    controls = {
        "text": widgets.Text(value=text, placeholder="[MASK] を含む英文", description="文", continuous_update=False,
                             layout=widgets.Layout(width="95%")),
        "k": _slider("候補の数", int(k), 1, 10),
    }
    return Explorer(controls, render, title="[MASK] の穴埋め")
