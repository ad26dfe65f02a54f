"""Sentences that the chapters print, chosen from the numbers a run computed.

A chapter must read true on any model (bert-base-uncased on Colab, the packaged
model offline, a Japanese BERT), so some of its sentences depend on what was
measured. Each such sentence is chosen here, by a plain function of the numbers,
and not in the notebook: every branch is unit-tested (``tests/test_readings.py``
asserts the sentence each one produces), so a sentence a given run never prints
has still been read and checked. The notebook computes the numbers, passes them
in, and glues what comes back.

Chapters 2-9 (any)
------------------
* :func:`by_interval` -- a label from where an interval of a difference lies: above 0, below 0, or across it;
* :func:`word` -- a table's or a figure's label chosen by a flag (:data:`WORDS`: はい/いいえ, あり/なし …);
* :func:`grammar_label` -- a generated sentence's grammar check (chapter 4);
* :func:`closer_reading` -- which of two sentences is nearer (chapter 9).

Chapter 2 (distributional vectors)
----------------------------------
* :func:`offset_verdict` -- the relations where the offset b − a beats the nearest-neighbour baseline.

Chapter 3 (word2vec)
--------------------
* :func:`beats_by_space` -- per vector space, the relations where the offset beats the baseline;
* :func:`lg_verdict`, :func:`lg_relation_reading` -- does SGNS's dot product equal PMI − log K (slope 1, mean
  difference 0), by their intervals; and what its correlation says;
* :func:`famous_reading` -- the famous analogies against the whole question set;
* :func:`offset_agreement_reading` -- do the capital − country offsets line up beyond shuffled pairings;
* :func:`ja_offset_verdict` -- the Japanese relations learned as offsets, by non-overlapping intervals.

Chapter 4 (seq2seq)
-------------------
* :func:`proportion_interval` -- a share's exact 95% interval, as text;
* :func:`people_verdict` -- do the "people" sentences get agreement wrong more often than the others;
* :func:`reach_reading` -- how the longest length reversed at least half the time moved with more budget.

Chapter 5 (attention)
---------------------
* :func:`bottleneck_verdict` -- do the attention models beat the bottleneck model given more budget, by their intervals.

Chapter 7 (ちはやふる)
---------------------
* :func:`learned_side` -- is a character among those learned late or early.

Chapter 8 (BERT)
----------------
* :func:`interval_contains` -- ``含む`` or ``含まない``: does an interval contain a value;
* :func:`all_or_some` -- ``7 列すべてで`` or ``7 列のうち 5 列で``;
* :func:`safe_choice_reading` -- is 80/10/10 within the yardstick of each column's best;
* :func:`tense_reading` -- are both the left and the right cue read.

Chapter 12 (word and position embeddings)
-----------------------------------------
* :func:`reproduction_verdict` -- one number against the paper's;
* :func:`cls_rank_reading` -- where the [CLS] x position 0 pair ranks among all pairs;
* :func:`top_pairs_reading` -- which other tokens are among the ten largest pairs;
* :func:`unused_reading` -- how much of the histogram's right tail the reserved ``[unused…]`` tokens make;
* :func:`cls_spread_reading` -- is that pair isolated, or do nearby positions align with [CLS] too;
* :func:`listed` -- ``k`` values or heads in a sentence (``なし`` when there are none);
* :func:`share_reading`, :func:`angle_reading`, :func:`raw_reading`, :func:`ortho_conclusion` -- what the centred
  overlap of word and position subspaces says, against random subspaces and rotations;
* :func:`one_sided_reading`, :func:`align_reading`, :func:`infl_reading` -- which mean inflates the raw cosines, and
  by how much;
* :func:`own_reading`, :func:`attn_reading`, :func:`worst_reading` -- whether a head's position-only attention pattern
  survives, as that head's own, in its real attention;
* :func:`fixed_reading`, :func:`fixed_cell`, :func:`offset_reading` -- figure 6's fixed relative positions;
* :func:`psi_reading`, :func:`psi_value_reading` -- whether words-only ψ carries over to the real input;
* :func:`head_changes`, :func:`head_label_reading` -- whether layer 0's head labels hold once positions are added;
* :func:`paper_comparison` -- a table cell: our value beside the paper's.

Chapter 11 (norm stretch ψ)
---------------------------
* :func:`eig_reading` -- do the most stretched tokens lie along the top eigenvector, or only in the row space;
* :func:`beyond_chance`, :func:`shape_reading` -- figure 2's curve shape against shuffled clusters;
* :func:`year_control_reading`, :func:`year_specific` -- the year heads against 3-digit numbers that are not years;
* :func:`special_reading` -- Special clusters among the heads' top clusters;
* :func:`bias_reading` -- can the projection biases be left out;
* :func:`layer_band`, :func:`band_claim` -- figure 3's reading by layer band;
* :func:`paper_model_note` -- a caption's note when the paper's table is of another model.

Chapter 10 (mixing and preserving)
----------------------------------
* :func:`spread_reading`, :func:`cls_peak_reading`, :func:`dominance_reading`, :func:`min_layer_reading` -- the
  mixing ratio read with its intervals;
* :func:`mixing_facts` -- the paper's main observations as numbers, for a table;
* :func:`ln_paper_reading`, :func:`ln_reading`, :func:`width_verdict` -- what LayerNorm does to the ratio;
* :func:`agreement_verdict` -- two context maps against the permutation null.

Chapter 13 (a Japanese BERT)
----------------------------
* :func:`ja_missing_reason` -- why the Japanese model did not load;
* :func:`half_reading`, :func:`half_verdict`, :func:`gap_reading` -- the mixing ratio against 50%, and a difference
  against 0, by their intervals;
* :func:`fwe_reading`, :func:`poem_controls_reading` -- the poems against modern sentences, layer by layer, and
  the controls (length, punctuation, script, untrained weights).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["reproduction_verdict", "cls_rank_reading", "top_pairs_reading", "unused_reading", "unused_pca_reading",
           "near_positions", "cls_spread_reading", "listed", "share_reading", "angle_reading", "raw_reading",
           "ortho_conclusion", "own_reading", "attn_reading", "worst_reading", "one_sided_reading", "align_reading",
           "infl_reading", "fixed_reading", "fixed_cell", "offset_reading", "psi_reading", "psi_value_reading",
           "head_changes", "head_label_reading", "paper_comparison", "eig_reading", "beyond_chance",
           "shape_reading", "year_control_reading", "year_specific", "special_reading", "bias_reading",
           "layer_band", "band_claim", "paper_model_note", "spread_reading", "cls_peak_reading",
           "dominance_reading", "min_layer_reading", "mixing_facts", "ln_paper_reading", "ln_reading",
           "width_verdict", "agreement_verdict", "ja_missing_reason", "bottleneck_verdict", "lg_relation_reading",
           "famous_reading", "word", "WORDS", "grammar_label", "closer_reading", "interval_contains", "all_or_some",
           "safe_choice_reading", "tense_reading", "beats_by_space", "lg_verdict", "offset_agreement_reading",
           "ja_offset_verdict", "learned_side", "by_interval", "offset_verdict", "proportion_interval",
           "people_verdict", "reach_reading", "tail_reading", "half_reading", "half_verdict", "gap_reading",
           "fwe_reading", "poem_controls_reading"]


def reproduction_verdict(ours: float, paper: float, *, same_model: bool, paper_model: str, tol: float = 0.05) -> str:
    """Whether ``ours`` reproduces the paper's ``paper`` (within ``tol``); with another model, that they cannot be compared.

    >>> reproduction_verdict(0.53, 0.55, same_model=True, paper_model="bert-base-uncased")
    '論文の値（0.55）に近く、再現した'
    """
    if not same_model:
        return f"論文の値（{paper}）は {paper_model} のもので、別のモデルである手元の値（{ours:.2f}）とは比べられない"
    if abs(ours - paper) < tol:
        return f"論文の値（{paper}）に近く、再現した"
    return f"論文の値（{paper}）からは遠く、再現しなかった"


def cls_rank_reading(rank_raw: int, rank_centred: int, top: int) -> str:
    """The rank of the [CLS] x position 0 pair among all word-position pairs (1 = the largest |cos|), without and
    with centring; ``top`` is the rank that marks the top 0.01%."""
    if rank_raw == 1 and rank_centred == 1:
        return "中心化してもしなくても全組で最大である"
    if rank_raw <= top and rank_centred <= top:
        return "中心化してもしなくても全組の上位 0.01% に入る"
    if rank_raw <= top:
        return "中心化しないときだけ全組の上位 0.01% に入るので、大きく見えるのは二つの平均の向きがそろっているためかもしれない"
    return "全組の上位 0.01% には入らず、順位の上でも例外とは言えない"


_UNUSED_NOTE = "。[unused…] は通常の文からは作られない予約トークンで、全位置に共通のずれを持ちうる（ヒストグラムの節）"


def top_pairs_reading(others: Sequence[tuple[str, int, float, float, int]], top: int) -> str:
    """The pairs among the ten largest that involve neither [CLS] nor [SEP]: ``(token, position, cos, centred cos,
    rank of the centred |cos| among all pairs)`` each. A reserved ``[unused…]`` token's pair is read by its centred
    rank: still within the top ``top`` (0.01%), a shift shared by every position cannot explain it; outside, it can."""
    if not len(others):
        return "全組の上位 10 組は、[CLS] と [SEP] の組だけである"
    listed = "、".join(f"{token} と位置 {position}（{cos:+.3f}）" for token, position, cos, _, _ in others)
    parts = [f"全組の上位 10 組には、ほかに {listed}も入る"]
    for token, position, _, cos_c, rank_c in others:
        if not str(token).startswith("[unused"):
            continue
        where = f"{token} と位置 {position} は、中心化すると {cos_c:+.3f}（|cos| で全組の {rank_c:,} 番目）で、"
        parts.append(where + ("上位 0.01% に残るので、全位置に共通のずれだけでは説明できない" if rank_c <= top else
                              "上位 0.01% から外れるので、上位に入ったのは全位置に共通のずれのためと考えられる"))
    if len(parts) > 1:
        parts[0] += _UNUSED_NOTE
    return "。".join(parts)


def unused_pca_reading(n_unused: int, spread_ratio: float) -> str:
    """What the grey points of the reserved ``[unused…]`` tokens look like in the joint PCA figure: their coordinates
    spread ``spread_ratio`` times as much as the other words' (mean standard deviation over the axes). A quarter or
    less reads as one clump, under three quarters as a tight group, more as no clump at all."""
    if not n_unused:
        return "この語彙には予約トークン [unused…] がない"
    head = f"予約トークン [unused…]（{n_unused:,} 個）の座標の広がりは、ほかの単語の {100 * spread_ratio:.0f}% "
    if spread_ratio <= 0.25:
        return head + "しかなく、図ではほぼ一点に固まった濃い灰色の塊に見える"
    if spread_ratio < 0.75:
        return head + "で、図ではほかの単語より狭くまとまった灰色の群れに見える"
    return head + "で、ほかの単語とあまり変わらず、図では塊に見えない"


def tail_reading(observed: int, expected: float) -> str:
    """Whether the cosine histogram's right tail is heavier than random directions give: ``observed`` pairs above the
    threshold (three times the random mean |cos|) against ``expected``, the number random directions would put there.
    Heavier or lighter means at least twice or at most half as many."""
    if expected <= 0 or observed < 0:
        raise ValueError(f"observed={observed}, expected={expected}: give a count >= 0 and an expected count > 0.")
    counts = f"（ランダムな方向の平均 |cos| の 3 倍を超える組が {observed:,} 組、ランダムな方向なら約 {expected:,.0f} 組）"
    if observed >= 2 * expected:
        return "ヒストグラムの右の裾（コサインが正で大きい側）は、ランダムな方向の曲線より厚い" + counts
    if observed <= expected / 2:
        return "ヒストグラムの右の裾（コサインが正で大きい側）は、ランダムな方向の曲線より薄い" + counts
    return "ヒストグラムの右の裾（コサインが正で大きい側）は、ランダムな方向の曲線とほぼ同じ厚さである" + counts


def unused_reading(is_unused: Sequence[bool], cos_tok: Sequence[float], n_high: Sequence[int], threshold: float) -> str:
    """Where the right tail of the cosine histogram comes from: the reserved ``[unused…]`` tokens (said to lean
    together towards every position only when at least 90% of them have a positive mean cosine).

    Per token of the vocabulary: ``is_unused`` (a reserved ``[unused…]`` token), ``cos_tok`` (its mean cosine with
    every position) and ``n_high`` (the number of positions whose cosine with it exceeds ``threshold``)."""
    is_unused, cos_tok, n_high = np.asarray(is_unused, bool), np.asarray(cos_tok, float), np.asarray(n_high)
    n = int(is_unused.sum())
    if not n:
        return "この語彙には予約トークン [unused…] がない"
    head = (f"予約トークン [unused…] は {n:,} 個（語彙の {100 * n / is_unused.size:.1f}%）で、全位置とのコサインの平均は "
            f"{cos_tok[is_unused].mean():+.3f}（ほかのトークンは {cos_tok[~is_unused].mean():+.3f}）である")
    if not n_high.sum():
        return head + f"。コサインが {threshold:.2f} を超える組はない"
    share = n_high[is_unused].sum() / n_high.sum()
    head += f"。コサインが {threshold:.2f} を超える組の {100 * share:.0f}% が、この予約トークンの組である"
    if share >= 0.5:
        aligned = float((cos_tok[is_unused] > 0).mean())  # "そろって同じ向き" only if nearly all lean towards the positions
        if aligned >= 0.9:
            return head + ("。右側の大きなコサインの半分以上は、単語と位置の組ごとの関係ではなく、通常の文に現れないこのトークン群が"
                           f"そろって全位置と同じ向きにずれていることから来る（全位置とのコサインの平均が正の予約トークンは {100 * aligned:.0f}%）")
        return head + ("。右側の大きなコサインの半分以上はこのトークン群の組から来るが、このトークン群がそろって同じ向きにずれているのではない"
                       f"（全位置とのコサインの平均が正の予約トークンは {100 * aligned:.0f}%）")
    if share >= 2 * n / is_unused.size:  # at least twice their share of the vocabulary
        return head + "。語彙に占める割合よりずっと多く、右側の大きなコサインの一部はこのトークン群のずれから来る"
    return head + "。語彙に占める割合と大差なく、右側の大きなコサインはこのトークン群から来ているのではない"


def near_positions(positions: Sequence[int], shown: int = 20) -> str:
    """``1・2・3 …``: the positions, the first ``shown`` of them."""
    return "・".join(str(k) for k in positions[:shown]) + (" …" if len(positions) > shown else "")


def cls_spread_reading(raw: Mapping[str, Any], centred: Mapping[str, Any], *, near: float, early: int,
                       pbar_share: Sequence[float], cls_pbar: float, q_early: float, q_all: float, n_positions: int) -> str:
    """Is the [CLS] x position 0 pair isolated? From the cosines of [CLS] (and [SEP]) with every position.

    Parameters
    ----------
    raw, centred : mapping
        Without and with centring: ``pos0`` ([CLS] x position 0), ``near`` (other positions within ``near`` of it),
        ``second`` and ``c2`` (the largest other position and its cosine), ``early_lo`` / ``early_hi`` (the range over
        positions 1..early-1), ``sep_pos`` / ``sep_c`` ([SEP]'s largest position and cosine).
    near, early : float, int
        What counts as "near position 0's value", and the first positions.
    pbar_share : sequence of float
        At the positions near position 0 (raw), the share of [CLS]'s dot product that the mean position vector carries.
    cls_pbar : float
        The cosine of [CLS] with the mean position vector.
    q_early, q_all : float
        The 97.5% points of the largest centred cosine over positions 1..early-1 (and over all positions) when a random
        direction stands in for [CLS] (for [SEP]).
    n_positions : int
    """
    if centred["near"]:
        return (f"中心化しても、[CLS] は位置 0 以外とも広くそろっている（位置 0 の値との差が {near} 以内の位置が "
                f"{len(centred['near'])} 個：位置 {near_positions(centred['near'])}）。論文が例外として挙げたのは [CLS] と位置 0 の"
                "一組だけだが、手元のモデルでは先頭付近の位置が広くそろっている")
    if not raw["near"]:
        return (f"中心化してもしなくても、[CLS] とほかの位置のコサインはどれも位置 0 の値より {near} 以上小さく"
                f"（中心化した値で 2 番目は位置 {centred['second']} の {centred['c2']:.3f}）、[CLS] と位置 0 の組は孤立して大きい")
    early_strong, sep_strong = centred["early_lo"] > q_early, centred["sep_c"] > q_all
    null = f"[CLS] の代わりにランダムな方向を置いて同じ {early - 1} 位置の最大を取った値（200 方向の 97.5% 点 {q_early:.2f}）"
    return (
        f"中心化しないコサインでは、[CLS] は位置 0 以外とも広くそろって見える（位置 0 の値との差が {near} 以内の位置が "
        f"{len(raw['near'])} 個：位置 {near_positions(raw['near'])}）。これらの位置では、[CLS] との内積の "
        f"{np.nanmin(pbar_share):.0%}〜{np.nanmax(pbar_share):.0%} が、全位置に共通の成分（位置の平均ベクトル、[CLS] とのコサイン "
        f"{cls_pbar:.2f}）との内積である。中心化すると {near} 以内の位置はなくなる（位置 0 は {centred['pos0']:.3f}、2 番目は位置 "
        f"{centred['second']} の {centred['c2']:.3f}）。中心化したうえでは、[CLS] と位置 0 の組は孤立して大きい。ただし [CLS] と位置 "
        f"1〜{early - 1} の中心化したコサインも {centred['early_lo']:.2f}〜{centred['early_hi']:.2f} で、"
        + (f"最小の値でも、{null}を超える。" if early_strong else f"{null}を超えない位置もある。")
        + f"[SEP] の中心化したコサインの最大は位置 {centred['sep_pos']} の {centred['sep_c']:.3f} で、ランダムな方向で全 "
        f"{n_positions} 位置の最大を取った値の 97.5% 点 {q_all:.3f} "
        + ("より大きい。先頭付近の位置との弱いそろいは残る" if sep_strong or early_strong
           else "を超えない。先頭付近の位置とのそろいは、偶然と区別できない"))


def listed(items: Sequence[Any], prefix: str = "", sep: str = "、", none: str = "なし") -> str:
    """``1、2、8`` (with ``prefix="H"``: ``H1、H2``, heads that cannot be read as numbers; ``sep="・"``: ``1・2``), or
    ``none`` (``なし``) when there are none."""
    return sep.join(f"{prefix}{x}" for x in items) if len(items) else none


_SEPARATE = "「単語と位置は別の部分空間に住む」"


def share_reading(below: Sequence[int], above: Sequence[int], n_k: int) -> str:
    """The share of position variance in the words' top-k subspace, centred, against random subspaces: the ``k``
    where it is below (``below``) or above (``above``) their 95% interval, of the ``n_k`` values of k examined."""
    if below and not above:
        where = "調べたすべての k で" if len(below) == n_k else f"k = {listed(below)} で"
        return (f"位置ベクトルは、{where}単語埋め込みが大きくばらつく方向を避けている。これが{_SEPARATE}という主張の、"
                "ランダムと比べたうえでの形である")
    if above and not below:
        return f"位置ベクトルは、単語埋め込みが大きくばらつく方向にむしろ多く入っており、{_SEPARATE}とは言えない"
    if above:
        return f"k によってランダムより小さくも大きくもなり、{_SEPARATE}と一言では言えない"
    return f"どの k でもランダムな部分空間と区別できず、{_SEPARATE}とは、ランダムと比べたうえでは言えない"


def angle_reading(wider: Sequence[int], not_wider: Sequence[int], ceiling: Sequence[int] = ()) -> str:
    """The smallest principal angle, centred: the ``k`` where it is wider than random subspaces give (97.5% or more),
    and those where it is not; ``ceiling``: those of ``not_wider`` where random subspaces already sit within a degree of
    90, so that the comparison cannot show "more orthogonal than random" (untestable, not failed)."""
    failed = sorted(k for k in not_wider if k not in ceiling)
    if not (len(wider) or failed or len(ceiling)):
        return "調べた k がない"
    untestable = (f"k = {listed(sorted(ceiling))} では、ランダムな部分空間どうしの最小の主角もほぼ 90 度（97.5% 点が 89 度以上）で、"
                  "「ランダム以上に直交」かどうかをこの比較では判定できない") if len(ceiling) else ""
    if wider and failed:
        verdict = f"k = {listed(failed)} では「ランダム以上に直交」という主張は成り立たない"
    elif wider:
        verdict = "判定できたすべての k で、ランダムな部分空間以上に直交している" if untestable else "調べたすべての k で、ランダムな部分空間以上に直交している"
    elif failed:
        verdict = ("判定できたどの k でも" if untestable else "どの k でも") + "「ランダム以上に直交」という主張は成り立たない"
    else:  # every k hits the ceiling
        verdict = ""
    return "。".join(p for p in (verdict, untestable) if p)


def raw_reading(reversed_k: Sequence[int], above_raw: Sequence[int], below_raw: Sequence[int]) -> str:
    """Does centring turn the conclusion round? ``reversed_k``: k below random centred but above it raw."""
    if reversed_k:
        return (f"k = {listed(reversed_k)} では、中心化した割合はランダムより小さいのに、中心化しない割合はランダムより大きく、"
                "結論が逆転する")
    if above_raw and below_raw:
        return "中心化しない割合だけを見ても、k によって結論が逆転する"
    return "中心化するかどうかで、ランダムとの比較の結論は逆転しない"


def ortho_conclusion(percentile: float, below: Sequence[int], above: Sequence[int]) -> str:
    """The chapter's conclusion on orthogonality, centred: ``percentile`` of the mean |cos| among random rotations
    (small = more orthogonal than chance), and the share test's ``below`` / ``above`` k."""
    if percentile <= 2.5 and below and not above:
        return "単語と位置は、ランダムに置いた場合よりもはっきり別の方向を使っている、というのが中心化したうえでの結論である"
    if percentile >= 97.5 or (above and not below):
        return "中心化すると、単語と位置はランダムに置いた場合よりもむしろそろっており、直交しているとは言えない"
    if percentile <= 2.5 or below:
        return "ランダムに置いた場合より別の方向を使っているという兆しはあるが、指標によって結論が分かれる"
    return "中心化すると、単語と位置の関係はランダムに置いた場合と区別できない"


def own_reading(with0: Mapping[int, str], without0: Mapping[int, str], margin: float) -> str:
    """The heads whose real attention keeps their own position-only pattern, judged on the maps with and without
    position 0 (a head's verdict can rest on the one cell query 0 → key 0).

    Parameters
    ----------
    with0, without0 : head → label of :func:`mixlib.positional.own_sieve` (``"distinct"``, ``"unsure"``,
        ``"indistinct"``, ``"not_own"``) on the whole maps and on the maps without position 0's row and column.
    margin : the sieve's margin.
    """
    with0, without0 = dict(with0.items()), dict(without0.items())  # a pandas Series iterates over its values
    heads = sorted(set(with0) | set(without0))
    both = [h for h in heads if with0.get(h) == without0.get(h) == "distinct"]
    only0 = [h for h in heads if with0.get(h) == "distinct" != without0.get(h)]
    only_no0 = [h for h in heads if without0.get(h) == "distinct" != with0.get(h)]
    rest = [h for h in heads if "distinct" not in (with0.get(h), without0.get(h))
            and {with0.get(h), without0.get(h)} - {"not_own", None}]
    if not (both or only0 or only_no0 or rest):
        return "位置のパターンが、そのヘッドに固有の形で実際の注意に残っているヘッドはない"
    parts = [f"{listed(both, prefix='H')} の位置のパターンは、位置 0 を含めた地図でも除いた地図でも、実際の注意に、そのヘッドに固有の形で"
             f"残っている（自分自身の実際の地図との相関が、次に近いほかのヘッドより、系列の二つの半分のどちらでも {margin} 以上高い）"
             if both else "位置 0 を含めた地図と除いた地図の両方で固有の形と確かめられるヘッドはない"]
    if only0:
        parts.append(f"{listed(only0, prefix='H')} が固有に見えるのは位置 0 を含めた地図でだけで、位置 0 の行と列を除くと固有とは確かめられない"
                     "（その判定は先頭への注意に頼っている）")
    if only_no0:
        parts.append(f"{listed(only_no0, prefix='H')} は位置 0 を除いた地図でだけ固有で、含めた地図では固有とは確かめられない")
    why = {"unsure": f"（差が全系列の平均か半分の一方でだけ {margin} 以上）",
           "indistinct": f"（差がどの平均でも {margin} に届かない）",
           "not_own": "（帰無分布を超えないか、ほかのヘッドの実際の地図のほうが近い）", None: ""}
    first = {"unsure": "固有かどうか決まらず", "indistinct": "ほかのヘッドと区別できず", "not_own": "自分自身と対応せず",
             None: "調べておらず"}  # the first clause in the continuative form
    last = {"unsure": "固有かどうか決まらない", "indistinct": "ほかのヘッドと区別できない", "not_own": "自分自身と対応しない",
            None: "調べていない"}
    pairs: dict[tuple, list[int]] = {}
    for h in rest:  # heads with the same verdicts on the two maps, in one sentence
        pairs.setdefault((with0.get(h), without0.get(h)), []).append(h)
    for (a, b), hs in pairs.items():
        parts.append(f"{listed(hs, prefix='H')} は、位置 0 を含めた地図では{first[a]}{why[a]}、除いた地図では{last[b]}{why[b]}")
    return "。".join(parts)


def attn_reading(distinct: Sequence[int], any_own: bool) -> str:
    """What the position-only maps say about real attention: ``distinct`` heads keep their own pattern (ahead of every
    other head's map in both halves); ``any_own``: some head's real map matches its own best, if not clearly."""
    if len(distinct):
        return (f"{listed(distinct, prefix='H')} では、位置ベクトルだけから計算したパターンが、そのヘッドに固有の形で（ほかのヘッドの地図"
                "より、はっきり高く相関して）実際の注意にも残っている。ただし、並べ替えの帰無分布は「地図に構造がない」ことを"
                "退けるだけの弱い基準で、相関が高いことは、位置の部分だけでパターンが説明できることの証明ではない")
    if any_own:
        return "実際の地図で自分自身ともっとも相関するヘッドはあるが、その形がそのヘッドに固有だとは確かめられない"
    return "位置ベクトルだけから計算したパターンが、そのヘッドに固有の形で実際の注意に残っているとは言えない"


def worst_reading(r: float, reliability: float, ceiling: float, threshold: float = 0.7) -> str:
    """The head whose real map correlates least with its position-only map (correlation ``r``): only a settled real map
    (split-half ``reliability`` at least ``threshold``) can say anything, and then ``r`` is read against the ``ceiling``
    a perfect position-only map could reach (half of it or less: a shape position alone does not explain)."""
    if reliability < threshold:
        return "実際の平均の地図そのものが二組の系列で食い違い、定まっていないので、低い相関は位置の寄与がないことを意味しない"
    head = f"実際の平均の地図は二組の系列でおおむね定まっている（折半信頼性 {reliability:.2f}、r の上限 {ceiling:.2f}）"
    if r <= ceiling / 2:
        return (head + f"のに、相関 {r:.2f} はその上限の半分にも届かないので、このヘッドの実際の注意は、位置ベクトルだけの地図では"
                "説明できない形をしている。違いが何から来るか（省いた query・key のバイアス、層正規化の非線形性、単語と位置の"
                "交差項）は、ここでは切り分けていない")
    return head + f"。相関 {r:.2f} は上限の半分を超えるので、もっとも合わないこのヘッドでも、形の一部は位置ベクトルだけの地図で説明できる"


def one_sided_reading(drop_pos: float, drop_word: float) -> str:
    """Which set's mean vector inflates the raw mean |cos|: how far it falls when only the positions are centred
    (``drop_pos``) or only the words (``drop_word``); one counts as the main cause at twice the other's drop."""
    if drop_pos > 2 * drop_word:
        return "水増しの大部分は、位置の平均ベクトル（全位置に共通の成分）による"
    if drop_word > 2 * drop_pos:
        return "水増しの大部分は、単語の平均ベクトル（全単語に共通の成分）による"
    return "水増しには、二つの平均ベクトルのどちらも同じくらい効いている"


def align_reading(z: float) -> str:
    """The cosine of the two mean vectors, in units of a random pair's spread ``1/sqrt(d)``; beyond 3 it is no chance."""
    if z > 3:
        return f"平均どうしのコサインはその {z:.0f} 倍で、二つの平均は偶然では説明できないほど同じ向きにそろっている"
    if z < -3:
        return f"平均どうしのコサインはその {z:.0f} 倍で、二つの平均は偶然では説明できないほど逆向きにそろっている"
    return "平均どうしのコサインはランダムな二つの方向と区別できない"


def infl_reading(inflation: float) -> str:
    """The raw mean |cos| over the centred one: inflated (1.1 or more), deflated (0.9 or less) or about the same."""
    if inflation >= 1.1:
        return f"中心化しない値は {inflation:.1f} 倍に水増しされていたことになる"
    if inflation <= 0.9:
        return f"中心化しない値は、中心化した値の {inflation:.2f} 倍で、小さく出ていたことになる"
    return "中心化してもほとんど変わらない"


_FIXED_CLAIM = "論文の「決まった相対位置を見るヘッドがある」は、"


def fixed_reading(raw_peak: float, fixed: Sequence[tuple[int, int, float]], *, peak_min: float,
                  shares: Sequence[float] = (), around: Sequence[tuple[float, float, float, float]] = ()) -> str:
    """Figure 6's claim (some heads attend to a fixed relative position), from the position-only maps.

    ``raw_peak``: the largest per-offset mean of any head with the raw position vectors, in multiples of uniform;
    ``fixed``: ``(head, offset, times uniform)`` for the heads whose real attention settles on a non-zero offset and
    whose real-scale position-only map peaks there too, at least ``peak_min`` times uniform (the multiple of uniform
    the chapter asks of real attention before it reads a peak, asked of the raw maps too). For each head of
    ``fixed``, in its real attention: ``shares``, the weight at that offset; ``around``, the weight on the two
    tokens before, the two after, the token itself and the first token (an absolute position).
    A head is called bigram-like only when its peak is a neighbour (offset ±1) holding at least half of its weight;
    a narrow window only when the two tokens on each side (itself excluded, as in skip-gram) hold at least half,
    said to be one-sided when one side holds less than a quarter of that.

    Raises ValueError if a fixed head's position-only peak is under ``peak_min`` (a flat map is not a fixed offset),
    the shares do not match the heads, or a share is outside [0, 1].
    """
    if not len(shares) == len(around) == len(fixed):
        raise ValueError(f"shares and around have {len(shares)} and {len(around)} values for {len(fixed)} heads: "
                         "give each fixed head's shares of weight.")
    if any(not 0 <= x <= 1 for x in (*shares, *(y for a in around for y in a))) or any(len(a) != 4 for a in around):
        raise ValueError("shares and around (before, after, self, first) must be shares of a row's weight, in [0, 1].")
    flat = [h for h, _, times in fixed if times < peak_min]
    if flat:
        raise ValueError(f"heads {flat} peak under {peak_min} times uniform in the position-only map: they are flat, "
                         "not fixed; select fixed heads with the same bar.")
    raw = (f"論文の式（生の位置ベクトル）では、相対位置ごとの平均はどのヘッドでも最大で一様の {raw_peak:.2f} 倍で、実際の注意に求める "
           f"{peak_min} 倍に届かず、ほぼ一様である。" if raw_peak < peak_min else
           f"論文の式（生の位置ベクトル）でも、相対位置ごとの平均が一様の {peak_min} 倍以上に集まるヘッドがある（最大 {raw_peak:.2f} 倍）。")
    if fixed:
        heads = "、".join(f"H{h}（相対位置 {offset:+d}、実際の尺度で一様の {times:.1f} 倍）" for h, offset, times in fixed)
        spread = [(h, share, *a) for (h, _, _), share, a in zip(fixed, shares, around) if share < 0.5]
        near = ""
        if all(abs(offset) == 1 for _, offset, _ in fixed):
            if not spread:
                near = (f"どれも重みの半分以上（少ないヘッドでも {min(shares):.0%}）を隣の一語に置くので、skip-gram の窓というより、"
                        "直前（直後）の一語を見る bigram に近い。")
            else:
                def say(group):
                    return "、".join(f"H{h}（隣に {share:.0%}。直前の 2 語に {before:.0%}、直後の 2 語に {after:.0%}、自分自身に {self_:.0%}、"
                                    f"先頭の位置 0 に {first:.0%}）" for h, share, before, after, self_, first in group)
                narrow = [x for x in spread if x[2] + x[3] >= 0.5]
                loose = [x for x in spread if x[2] + x[3] < 0.5]
                near = "どれももっとも重いのは隣の一語だが、"
                if narrow:
                    sided = all(min(x[2], x[3]) < (x[2] + x[3]) / 4 for x in narrow)
                    near += (f"{say(narrow)}は隣に置く重みが半分に満たず、重みの半分以上が前後 2 語にある"
                             f"（一語だけを見る bigram より、{'片側だけの' if sided else ''}狭い窓に近い）。")
                if loose:
                    near += (f"{say(loose)}は隣に置く重みが半分に満たず、前後 2 語（自分自身を除く）にも半分はない"
                             "（決まった相対位置だけでは、このヘッドの注意は説明できない）。")
        return (raw + f"実際の入力の尺度で層正規化を通すと、{heads}が 0 でない決まった相対位置に集まり、実際の注意でも同じ相対位置に"
                f"定まる。{near}{_FIXED_CLAIM}実際の入力の尺度で層正規化を通した位置ベクトルでなら手元のモデルでも見える")
    return (raw + "実際の入力の尺度で層正規化を通しても、0 でない決まった相対位置に集まり、実際の注意でも同じ相対位置に定まるヘッドはない。"
            f"{_FIXED_CLAIM}手元のモデルでは見えない")


def fixed_cell(raw_peak: float, fixed: Sequence[tuple[int, int]]) -> str:
    """The verdict table's cell for figure 6: ``H3（+1）、H7（-1）`` (``(head, offset)`` each) or なし, and the raw peak."""
    return ("、".join(f"H{h}（{offset:+d}）" for h, offset in fixed) or "なし") + f"（生の位置ベクトルでは最大でも一様の {raw_peak:.2f} 倍）"


def offset_reading(same: Sequence[int], other: Sequence[int], rest: Sequence[int]) -> str:
    """Whether the heads whose real map matches their own position-only map also peak at the same relative position:
    ``same`` (both concentrate on one offset, the same), ``other`` (real attention settles on another offset), ``rest``
    (no offset to compare: one of the two is flat, or the halves disagree); the groups of
    :func:`mixlib.positional.offset_groups`."""
    if other:
        return ("地図全体の相関が高くても、注意がもっとも集まる相対位置までは位置ベクトルだけの計算で決まらないヘッドがある。"
                "上の「位置のパターンが実際の注意に残っている」は、地図の形が似ているという意味で、どこを一番見るかまでは言っていない")
    why = "どちらかが相対位置に集まらないか、実際の注意の集まる相対位置が二つの半分で食い違うので"
    if same:
        return (f"{listed(same, prefix='H')} では、注意がもっとも集まる相対位置まで、位置ベクトルだけの計算と実際の注意で一致する"
                + (f"（{listed(rest, prefix='H')} は、{why}比べられない）" if rest else ""))
    if rest:
        return f"自分自身と対応するヘッド（{listed(rest, prefix='H')}）はどれも、{why}、もっとも集まる相対位置は比べられない"
    return "自分自身と対応するヘッドがないので、もっとも集まる相対位置を比べるヘッドもない"


def psi_reading(n_zero: int, n_one: int, n_all: int) -> str:
    """Do words-only ψ ranks carry over to the real input? Read against the two ends a rank correlation has, not a
    chosen bar: of the ``n_all`` (head, position) pairs, ``n_zero`` have a 95% interval reaching 0 (no agreement beyond
    chance) and ``n_one`` one reaching 1 (the ranks kept whole)."""
    if n_zero:
        return (f"{n_all} 組中 {n_zero} 組では順位相関の 95% 区間が 0 に届き、単語埋め込みだけで求めた順位と実際の入力の順位は、"
                "偶然以上に一致するとも言えない")
    if n_one == n_all:
        return "どのヘッド・位置でも順位相関の 95% 区間が 1 に届き、順位は保たれていないとは言えない"
    return ("どのヘッド・位置でも順位相関の 95% 区間は 0 より大きく、" + (f"{n_all - n_one} 組では " if n_one else "")
            + "1 より小さい。単語埋め込みだけで求めた順位は、実際の入力でも偶然以上に一致するが、そのままは保たれない")


def psi_value_reading(ratio_min: float, ratio_max: float) -> str:
    """Are ψ's values kept too? The per-head ratio of medians (real input over words only), its smallest and largest."""
    if ratio_min < 0.9 or ratio_max > 1.1:
        return ("比が 0.9〜1.1 倍の外に出るヘッドがあり、値はヘッドによって大きく変わる。単語だけで計算した ψ の値を、そのまま実際の入力での"
                "ヘッドの伸ばし方の大きさとして読むことはできない")
    return "どのヘッドでも比は 0.9〜1.1 倍の中にあり、値もおおむね保たれる"


def head_changes(words: Mapping[str, tuple[int, float]], at: Mapping[str, Mapping[int, tuple[int, float]]],
                 settled: float) -> dict[str, Any]:
    """Where layer 0's largest head for a feature moves when positions are added to the word embeddings.

    Parameters
    ----------
    words : ``feature -> (head, won)``: the largest head on the word embeddings alone, and the share of resamplings of
        the feature's tokens it wins.
    at : ``feature -> position -> (head, won)``: the same on the real input at each position.
    settled : a head is settled when it wins at least this share.

    Returns
    -------
    dict
        ``moved``: ``feature -> head -> positions`` where both heads are settled and differ; ``open``: ``feature ->
        positions`` where they differ but one is not settled; ``changed`` and ``unsettled``: the features with any of
        each, in order; ``n_changed`` / ``n_open``: the (feature, position) pairs of each.
    """
    moved: dict[str, dict[int, list[int]]] = {}
    open_: dict[str, list[int]] = {}
    for name, (w, w_won) in words.items():
        for k, (h, won) in at[name].items():
            if h == w:
                continue
            if won >= settled and w_won >= settled:
                moved.setdefault(name, {}).setdefault(h, []).append(k)
            else:
                open_.setdefault(name, []).append(k)
    return {"moved": moved, "open": open_, "changed": [n for n in words if n in moved],
            "unsettled": [n for n in words if n in open_],
            "n_changed": sum(len(ks) for m in moved.values() for ks in m.values()),
            "n_open": sum(len(ks) for ks in open_.values())}


def _feature_head(name: str, head: int, won: float, moved: Mapping[int, Sequence[int]], open_: Sequence[int],
                  settled: float) -> str:
    """「年」は単語だけで最大の H2 が、位置 1・5 では H3 になる: one feature's sentence."""
    dots = lambda ks: "・".join(str(k) for k in ks)  # noqa: E731
    parts = []
    if moved:
        parts.append(f"「{name}」は単語だけで最大の H{head} が、" + "、".join(f"位置 {dots(ks)} では H{h}" for h, ks in moved.items())
                     + " になる")
    if open_ and won < settled:
        parts.append(f"「{name}」は、単語だけでも最大のヘッドが選び直しで定まらない（最大の H{head} が勝つのは {won:.0%}）ので、"
                     f"位置 {dots(open_)} で最大のヘッドが違っても、替わったとは言えない")
    elif open_:
        parts.append(f"「{name}」は、位置 {dots(open_)} で最大のヘッドが単語だけのとき（H{head}）と違うが、選び直しで定まらないので、"
                     "替わったとは言えない")
    return "。".join(parts)


def head_label_reading(words: Mapping[str, tuple[int, float]], at: Mapping[str, Mapping[int, tuple[int, float]]],
                       settled: float) -> str:
    """Do the head labels read from word embeddings alone (chapter 11) hold on the real input? Arguments as in
    :func:`head_changes`; one sentence per feature whose largest head moves."""
    ch = head_changes(words, at, settled)
    said = lambda names: "。".join(_feature_head(n, *words[n], ch["moved"].get(n, {}), ch["open"].get(n, []), settled)  # noqa: E731
                                  for n in names)
    if ch["changed"]:
        return (said(ch["changed"] + [n for n in ch["unsettled"] if n not in ch["changed"]])
                + "。ほかの特徴では、どの位置でも単語だけのときと同じヘッドである。単語埋め込みだけで選んだ層 0 のヘッドの名前は、"
                "替わった特徴については、位置によっては実際の入力に当てはまらないことがある（前章でヘッドが一つに決まらなかった特徴は、"
                "替わった先が前章の「ヘッドの読み」の候補に入っていれば、読みは変わらない）")
    if ch["unsettled"]:
        return said(ch["unsettled"]) + "。定まったヘッドどうしで替わった特徴はなく、ほかの特徴では、どの位置でも単語だけのときと同じヘッドである"
    return "どの特徴・どの位置でも、層 0 でいちばん大きいヘッドは単語埋め込みだけのときと同じで、前章の層 0 のヘッドの読みは実際の入力でも保たれる"


def paper_comparison(ours: float, paper: float, *, same_model: bool, paper_model: str) -> str:
    """A table cell: our value beside the paper's, with the difference only when the model is the paper's.

    >>> paper_comparison(0.531, 0.55, same_model=True, paper_model="bert-base-uncased")
    '0.531（論文の bert-base-uncased: 0.55、差 -0.019）'
    """
    if same_model:
        return f"{ours:.3f}（論文の {paper_model}: {paper}、差 {ours - paper:+.3f}）"
    return f"{ours:.3f}（論文の {paper_model}: {paper}。別のモデルの値）"


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 11 (norm stretch ψ)
# ---------------------------------------------------------------------------------------------------------------------


def eig_reading(top_cos: float, row_share: float, row_rand: float) -> str:
    """Do the tokens ψ stretches most lie along the top eigenvector, or only in the head's row space?

    ``top_cos``: their median ``|cos|`` with the top eigenvector (0.3 or more counts as aligned); ``row_share``: the
    share of their squared length in the head's row space, against ``row_rand`` (``d'/d``, a random direction's).
    """
    if top_cos >= 0.3:
        return ("ψ の大きいトークンは、最大固有ベクトルの向きにもある程度そろっており、論文（3.1 節）の「最大固有値の固有ベクトルに沿う"
                "分散表現を持つ単語を抽出している」という説明と合う")
    if row_share > row_rand:
        return ("ψ の大きいトークンは、最大固有ベクトル 1 本の向きにそろっているのではなく、ヘッドが写す部分空間全体に多く入っている"
                "（その中で大きい固有値の方向ほど重く数えられる）。論文（3.1 節）は ψ を「最大固有値の固有ベクトルに沿う分散表現を持つ単語を"
                "抽出している」と説明したが、手元のモデルの数字が支えるのは、この弱い形である")
    return "ψ の大きいトークンは、最大固有ベクトルの向きにも、ヘッドが写す部分空間にも、ランダムな向きより多くは入っていない"


def beyond_chance(above: bool, past: bool = False) -> str:
    """A table cell: whether a share of heads (or a score) is beyond chance; ``past`` for a single test's outcome."""
    if past:
        return "偶然を超えた" if above else "偶然を超えない"
    return "偶然を超える" if above else "偶然と区別できない"


_NOT_EVERY_HEAD = "超えたヘッドは {share:.0%}（偶然なら {chance:.0%}）で、突出は一部のヘッドでだけ偶然を超える。論文の「どのヘッドでも」は支えない"


def shape_reading(stat: str, above: bool, share: float, chance: float) -> str:
    """What one statistic of figure 2's curve shape says about the paper's reading, from the heads beyond the shuffled
    clusters' level: ``stat`` is ``peak_ratio`` or ``top1pct_ratio`` (a peak: supports the paper when nearly every
    head, 90% or more, passes) or ``tail_cv`` (the tail's spread: passing means the tail is not flat);
    ``above``: the share ``share`` of heads passing is beyond the ``chance`` share (its interval's lower end)."""
    if stat == "tail_cv":
        return ("裾はメンバーをランダムにしたクラスタよりわずかに大きくばらつく（頂点と比べた「平ら」は、この比較では測れない）" if above
                else "裾のばらつきはメンバーをランダムにしたクラスタと区別できない")
    if stat not in ("peak_ratio", "top1pct_ratio"):
        raise ValueError(f"stat={stat!r}: expected peak_ratio, top1pct_ratio or tail_cv.")
    if not above:
        return "偶然と区別できない（突出は言えない）"
    if share >= 0.9:
        return "ほぼどのヘッドでも偶然を超え、論文の読みを支える"
    return _NOT_EVERY_HEAD.format(share=share, chance=chance)


def year_control_reading(rows: Sequence[tuple[str, str, float, float]]) -> str:
    """The year heads against a control, 3-digit numbers that are not years: ``(feature, head, feature score,
    3-digit score)`` for each year feature beyond chance, one sentence per head, then whether it is year-specific."""
    if not rows:
        return "年の特徴は偶然を超えなかったので、対照は比べない"
    texts = []
    for head in dict.fromkeys(h for _, h, _, _ in rows):
        rs = [r for r in rows if r[1] == head]
        texts.append("と".join(f"「{f}」" for f, _, _, _ in rs) + f"のヘッド {head} では、年でない 3 桁の数のスコアは {rs[0][3]:.2f}、"
                     + "・".join(f"「{f}」は {s:.2f}" for f, _, s, _ in rs) + " である")
    if all(three < s for _, _, s, three in rows):
        verdict = "このヘッドは年でない数より年を強く伸ばしており、この対照に対しては年に特有の好みがあると読める"
    else:
        verdict = "このヘッドは年に特有ではない（年でない 3 桁の数のほうが高い）。何を伸ばすヘッドなのかは、この対照だけでは決まらない"
    return "。".join(texts) + "。" + verdict


def year_specific(specific: bool) -> str:
    """A table cell: the control's outcome."""
    return "（年に特有）" if specific else "（年に特有とは言えない）"


def special_reading(share: float, chance: float) -> str:
    """How often a Special cluster is among a head's top clusters (``share`` of heads) against random clusters
    (``chance``); more than twice chance is reported as a multiple."""
    if share > 2 * chance:
        return f"ランダムに選んだときの {share / chance:.0f} 倍の割合で入る"
    return "ランダムに選んだときと大きくは変わらない割合で入る"


def bias_reading(rho_min: float, threshold: float = 0.8) -> str:
    """Can the biases be left out of ψ? The smallest rank correlation (over layers and heads) of ψ_qkv with and
    without them, at the real input's scale."""
    if rho_min >= threshold:
        return (f"実際の尺度の入力では、どの層・ヘッドでも、バイアスを入れた ψ_qkv の順位は入れない ψ_qkv とほとんど同じで"
                f"（順位相関の最小 {rho_min:.2f}）、バイアスを省いても「どのトークンを伸ばすか」の読みは変わらない")
    return ("順位相関の低い層・射影（印字した一覧）では、論文の定義（バイアスなし）で選んだ「上位のトークン」は、実際にヘッドが計算する"
            "ベクトルの長さの順位とはかなり違う")


def layer_band(layer: int, n_layers: int) -> str:
    """低層, 中層 or 高層: the third of the ``n_layers`` layers that ``layer`` (0-based) falls in."""
    if layer < n_layers / 3:
        return "低層"
    return "中層" if layer < 2 * n_layers / 3 else "高層"


def band_claim(holds: bool) -> str:
    """A table cell: whether a reading of figure 3 holds (a direct comparison of bands, with no interval)."""
    return ("そうなっている" if holds else "そうなっていない") + "（不確かさは測っていない。差は数枠分のことがある）"


def paper_model_note(same_model: bool) -> str:
    """Appended to a caption that puts the paper's table beside ours: nothing when the model is the paper's."""
    return "" if same_model else "。論文は別のモデルなので、平均ノルムと距離は比べられない"


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 10 (mixing and preserving)
# ---------------------------------------------------------------------------------------------------------------------


def spread_reading(worst: float, spread: float) -> str:
    """Is the mixing ratio's uncertainty (``worst``: the largest interval width or seed-to-seed range, in points)
    small next to the differences between layers (``spread``)? Small means under a fifth."""
    return (f"全体の列の揺れの最大 {worst:.2f} ポイントは、層どうしの差の最大 {spread:.2f} ポイントより"
            + ("ずっと小さい。" if worst < spread / 5 else "小さいとは言えない。"))


def cls_peak_reading(layer: int, estimate: float, low: float, high: float, others_high: float, ci: float) -> str:
    """The layer where [CLS] mixes most, its interval, and whether the other layers' intervals reach it."""
    return (f"[CLS] は層 {layer} で最大（{estimate:.1f}%、{ci:.0%} 区間 {low:.1f}〜{high:.1f}%）。ほかの層の区間の上端は最大 "
            f"{others_high:.1f}% で、" + ("区間は重ならない。" if low > others_high else "区間が重なるので、最大の層は決めきれない。"))


def dominance_reading(high_max: float, ci: float) -> str:
    """Does preserving dominate (the whole ratio under 50%) in every layer, interval included?"""
    return (f"全体の {ci:.0%} 区間の上端は全層で最大 {high_max:.1f}%。"
            + ("50% を下回るので、「残す作用が支配的」は文対の選び直しに対して頑健である。" if high_max < 50
               else "50% をまたぐ層があり、残す作用が支配的とは言えない。"))


def min_layer_reading(layer: int, low: float, high: float, overlapping: Sequence[int], ci: float) -> str:
    """The layer that mixes least, and the layers whose intervals reach its own."""
    return (f"全体がもっとも小さいのは層 {layer}（{ci:.0%} 区間 {low:.1f}〜{high:.1f}%）。"
            + (f"層 {', '.join(map(str, overlapping))} の区間と重なるので、最小の層は決めきれない。" if len(overlapping)
               else "ほかの層の区間とは重ならない。"))


def mixing_facts(tab: Any, min_overlaps: Sequence[int] = ()) -> Any:
    """The paper's main observations as numbers, from a mixing-ratio table (layers x token kinds, %).

    ``min_overlaps``: the layers whose interval reaches that of the least-mixing layer (then the least is not
    decided). Returns a ``pandas.Series`` of strings, one per observation.
    """
    import pandas as pd

    n = len(tab)
    mid = [layer for layer in tab.index if n / 3 <= layer < 2 * n / 3]  # the middle third (4..7 of 12, 2..3 of 6)
    o = tab["全体"]
    return pd.Series({
        "全体の混ぜる割合：各層の最小 (%)": f"{o.min():.0f}",
        "全体の混ぜる割合：各層の最大 (%)": f"{o.max():.0f}",
        "全体がもっとも小さい層": f"{int(o.idxmin())}（最終層は {n - 1}）"
        + (f"。区間が層 {', '.join(map(str, min_overlaps))} と重なり、決めきれない" if len(min_overlaps) else ""),
        "全体がもっとも大きい層": f"{int(o.idxmax())}",
        "[CLS] がもっとも大きい層": f"{int(tab['[CLS]'].idxmax())}（{tab['[CLS]'].max():.0f}%）",
        "[MASK] が全体より大きい層の数": f"{int((tab['[MASK]'] > o).sum())} / {n}",
        "中盤の層で [MASK] − 全体（ポイント）": f"{(tab.loc[mid, '[MASK]'] - o[mid]).mean():+.1f}（層 {mid[0]}〜{mid[-1]}）",
        "全層で全体 < 50%（残す作用が支配的）": "○" if (o < 50).all() else "×",
    })


def ln_paper_reading(n_lower: int, n_layers: int, drop: Mapping[str, float], n_cells: int, n_expand: int,
                     grow: Mapping[str, float]) -> str:
    """Section 4.4's two observations on the model at hand: in how many layers LayerNorm lowers the whole ratio,
    the mean drop per token kind (points), and how often and how much it expands the residual (``grow``)."""
    return (f"手元のモデルでは、層正規化で全体の割合が下がる層は {n_lower} / {n_layers} である。層で平均した低下は "
            + "、".join(f"{k} {v:.1f}" for k, v in drop.items()) + " ポイント、拡大率が 1 を超えるのは（層 × 種類の）"
            f"{n_cells} マス中 {n_expand} マスで、層で平均した拡大率は " + "、".join(f"{k} {v:.2f}" for k, v in grow.items())
            + " 倍である（区間はつけていないので、値の近い種類どうしの順位は決めない）")


def ln_reading(ours: tuple[str, float, float], paper: tuple[str, float, float]) -> str:
    """How LayerNorm moves the mean mixing ratio, ours and the paper's: ``(who, AttnRes-N %, AttnResLn-N %)`` each."""
    def moved(who: str, before: float, after: float, end: str) -> str:
        return f"{who}では {before:.1f}% から {after:.1f}% に" + ("下が" if after < before else "上が") + end
    return moved(*ours, "り、") + moved(*paper, "る")


def width_verdict(width: float, gap: float) -> str:
    """The widest interval of a variant's mean against the smallest gap between two variants: much smaller (under a
    fifth) or not negligible. Follows 「区間の幅は変種どうしの差」."""
    return "よりずっと小さい" if width < gap / 5 else "と比べて無視できない大きさである"


def agreement_verdict(beyond: bool) -> str:
    """Two maps' rank correlation against the permutation null's 97.5% point."""
    return "偶然を上回る一致" if beyond else "偶然と区別できない"


# ---------------------------------------------------------------------------------------------------------------------
# Chapter 13 (a Japanese BERT)
# ---------------------------------------------------------------------------------------------------------------------


def ja_missing_reason(model: str, error: BaseException | None) -> str:
    """Why the Japanese model did not load, in one phrase: no model named, MeCab missing, not cached and no
    download, or a tokenizer or configuration mixlib does not support."""
    from mixlib.japanese import MissingExtra

    if not model:
        return "JA_MODEL が空"
    if isinstance(error, MissingExtra):
        return "MeCab（fugashi と辞書）が入っていない"
    if isinstance(error, OSError):
        return "この環境のキャッシュになく、ダウンロードもできない"
    return "このモデルの分かち書きか設定に対応していない"


def half_reading(high: float) -> str:
    """Whether the upper end of the mixing ratio's interval stays under 50% (preserving dominates)."""
    return "区間の上端は 50% " + ("に届かない" if high < 50 else "にちょうど届く" if high == 50 else "を超える")


def half_verdict(low: float, high: float) -> str:
    """A table cell: 「混ぜる割合は 50% を下回る」 holds (the whole interval under 50%), fails (the whole interval at or
    over 50%), or cannot be decided (the interval straddles 50%)."""
    if high < 50:
        return "：成り立つ"
    return "：成り立たない" if low >= 50 else "：決まらない（区間が 50% をまたぐ）"


def gap_reading(low: float, high: float) -> str:
    """A difference's interval: clear of 0, or across it."""
    return "区間は 0 をまたがない" if low > 0 or high < 0 else "区間が 0 をまたぐ（文の選び方の偶然と区別できない）"


def fwe_reading(n_fwe: int, n_layers: int, n_higher: int, n_lower: int, n_uncorrected: int) -> str:
    """The poems against modern sentences, layer by layer: layers with p < 0.05 corrected over all layers (split by
    the sign of the difference), and without the correction."""
    split = f"（歌のほうが高い層 {n_higher}、低い層 {n_lower}）" if n_fwe else ""
    return f"全層で補正して p < 0.05 の層：{n_fwe} / {n_layers}{split}。補正しない層ごとの判定では {n_uncorrected} 層"


def poem_controls_reading(n_layers: int, poem: int, matched: int, no_punct: int, script: int, untrained: Sequence[int],
                          *, balanced: bool = True, script_same: int | None = None) -> str:
    """What the 百人一首 comparison and its controls say, from each comparison's count of layers where a difference
    is found (chapter 13 counts a layer when the permutation test, corrected over all layers, and the interval that
    resamples topics whole both find it): poems against modern pairs (``poem``), against modern sentences cut to the
    poems' lengths, paired (``matched``; ``balanced``: whether the lengths came out equal), against the modern pairs
    with their punctuation removed from the text (``no_punct``) -- these two count only layers where the poems differ
    from the modern pairs and the control's difference has the same direction, a difference that "remains" --, the same modern pairs rewritten in hiragana, paired (``script``, either direction), and
    poems against modern pairs in models with untrained weights, one count per random seed (``untrained``, what the
    form of the input alone can do); ``script_same``: of the ``script`` layers, those that move the poems' way. A
    count of 0 is never read as "no difference": it says no layer passed."""
    seeds = [int(k) for k in untrained]
    if not seeds:
        raise ValueError("untrained is empty: give one count per untrained model (random seed).")
    counts = dict(poem=poem, matched=matched, no_punct=no_punct, script=script)
    counts |= {f"untrained[{i}]": k for i, k in enumerate(seeds)}
    if script_same is not None and not 0 <= script_same <= script:
        raise ValueError(f"script_same={script_same}: it counts some of the script={script} layers.")
    for name, k in counts.items():
        if not 0 <= k <= n_layers:
            raise ValueError(f"{name}={k}: a count of layers must be between 0 and n_layers={n_layers}.")
    moved = sum(k > 0 for k in seeds)
    where = f"乱数の種 {len(seeds)} 個のうち {moved} 個で差の出る層があり（最多 {max(seeds)} / {n_layers} 層）"
    if not poem:
        head = f"歌と現代文で、全層で補正して差が出る層はない（0 / {n_layers}。差がないことの証明ではない）"
        return head + (f"。学習前の重みのモデルでは{where}、学習したモデルでは出なかった" if moved
                       else f"。学習前の重みのモデルでも（乱数の種 {len(seeds)} 個のどれでも）、補正して差が出る層はない")
    parts = [f"歌と現代文は {poem} / {n_layers} 層で違う"]
    parts.append(f"学習前の重みのモデルでも{where}、入力の形の違いだけでも値は動きうる。"
                 "歌と現代文の差のうちどれだけが学習によるかは、この対照からは決まらない" if moved else
                 f"学習前の重みのモデルでは、乱数の種 {len(seeds)} 個のどれでも補正して差が出る層はない"
                 "（入力の形だけでは差が出ない、とまでは言えない）")
    if not balanced:
        parts.append("長さをそろえた対照は、長さが歌にそろわなかったので（上に印字した長さの差）、長さの説明には使えない")
    else:
        parts.append(f"長さをそろえた現代文とでも {matched} / {n_layers} 層で同じ向きの差が残り、長さの違いだけでは説明できない" if matched
                     else "長さをそろえた現代文とでは、同じ向きの差が残る層はない（比べる数も減るので、検出する力も下がる）")
    parts.append(f"句読点を文から除いた現代文とでも {no_punct} / {n_layers} 層で同じ向きの差が残り、句読点の有無だけでは説明できない"
                 if no_punct else "句読点を文から除いた現代文とでは、同じ向きの差が残る層はない")
    way = f"そのうち歌 − 現代文と同じ向きは {script_same} 層。" if script_same is not None else ""
    parts.append(f"同じ現代文をひらがなに書き換えると {script} / {n_layers} 層で値が動く（{way}書き換えはトークンの区切りと数も変える）"
                 if script else "同じ現代文をひらがなに書き換えても、補正して値が動く層はない（動かないことの証明ではない）")
    return "。".join(parts)


# -- chapters 2-9 ----------------------------------------------------------------------------------------------------


def by_interval(low: float, high: float, *, above: str, below: str, neither: str) -> str:
    """``above`` when the interval [low, high] of a difference lies above 0, ``below`` when below, else ``neither``.

    >>> by_interval(0.02, 0.10, above="PPMI が多い", below="回数が多い", neither="差があるとは言えない")
    'PPMI が多い'
    """
    if not low <= high:
        raise ValueError(f"low={low} > high={high}: give an interval's lower end first.")
    if low > 0:
        return above
    if high < 0:
        return below
    return neither


#: labels a table or a figure shows, chosen by a flag: kind -> (when true, when false)
WORDS: dict[str, tuple[str, str]] = {
    "yes": ("はい", "いいえ"),
    "has": ("あり", "なし"),
    "right": ("正解", "誤り"),
    "exact": ("完全一致", "一致しない"),
    "inside": ("内側", "外側"),
    "smaller": ("小さい", "小さくない"),
    "kanji": ("漢字", "仮名"),
    "clear": ("まとめて見ても超える", "わずかに超えるだけ"),
    "never": ("（覚えなかった）", ""),
    "paper_model": ("（論文と同じモデル）", ""),
}


def word(kind: str, flag: bool) -> str:
    """The label ``kind`` of :data:`WORDS` for ``flag``: ``word("yes", True) == "はい"``."""
    if kind not in WORDS:
        raise ValueError(f"no label {kind!r}; choose one of {sorted(WORDS)}.")
    return WORDS[kind][0 if flag else 1]


def grammar_label(form_ok: bool, agrees: bool) -> str:
    """A generated sentence against the grammar (chapter 4): its form wrong, its form right, or right down to the
    agreement (which needs the form)."""
    if agrees and not form_ok:
        raise ValueError("agrees without form_ok: agreement is checked only on a well-formed sentence.")
    return "一致まで正しい" if agrees else ("形は正しい" if form_ok else "形が誤り")


def closer_reading(cos_swapped: float, cos_paraphrase: float) -> str:
    """Chapter 9's trio: is the sentence with its words swapped (a different meaning) nearer than the passive
    paraphrase (the same meaning)?"""
    return "語順を入れ替えた文の方が近い" if cos_swapped > cos_paraphrase else "言い換えの方が近い"


# -- chapter 2 (distributional vectors) ------------------------------------------------------------------------------


def offset_verdict(k: int, shown: Sequence[str], not_shown: Sequence[str]) -> str:
    """The relations where 3CosAdd (the offset b − a) beats the baseline "c's nearest neighbour" (the paired
    difference's interval above 0: ``shown``), and those where it could not be shown (``not_shown``), at ``k``
    dimensions."""
    head = f"{k} 次元では、ずれ b − a が基準を上回った"
    if shown and not_shown:
        return head + f"のは{'・'.join(shown)}で、{'・'.join(not_shown)}は基準との差を示せなかった"
    if shown:
        return head + f"のは{'・'.join(shown)}"
    if not_shown:
        return head + f"関係はなかった。{'・'.join(not_shown)}は基準との差を示せなかった"
    return head + "関係はなかった"


# -- chapter 3 (word2vec) ------------------------------------------------------------------------------------------


def beats_by_space(beats: Mapping[str, Sequence[str]]) -> str:
    """Per vector space (``name -> relations``), the relations where the offset b − a adds to the baseline "c's
    nearest neighbour" (the paired difference's interval above 0): ``SGNS では国と首都・過去形、CBOW ではどの関係でもない``."""
    if not beats:
        raise ValueError("beats is empty: give each vector space's relations (an empty list where none).")
    return "、".join(f"{name} では{'・'.join(rels)}" if len(rels) else f"{name} ではどの関係でもない" for name, rels in beats.items())


def lg_verdict(r: float, slope_ci: Sequence[float], diff_ci: Sequence[float], *, high: float = 0.7) -> str:
    """Levy and Goldberg's identity (SGNS's dot product = PMI − log K) holds only if the slope's interval contains 1
    and the mean difference's (dot − (PMI − log K)) contains 0; a high correlation ``r`` (at least ``high``) alone
    does not show it."""
    misses = [f"{name}の区間が {target} を含ま" for name, (lo, hi), target in
              (("傾き", slope_ci, 1), ("平均の差", diff_ci, 0)) if not lo <= target <= hi]
    if not misses:
        return "傾きの区間は 1 を、平均の差の区間は 0 を含むので、この設定でも等式と矛盾しない"
    missed = "ず、".join(misses) + "ない"  # the first of two in the continuative form: 「…を含まず、…を含まない」
    if r >= high:
        return missed + "ので、相関は高くても、等式そのものはこの設定では成り立っていない"
    return missed + "うえ、相関も低く、等式はこの設定では成り立っていない"


def lg_relation_reading(r: float, *, high: float = 0.7) -> str:
    """What the correlation between SGNS's dot products and PMI − log K says about the two methods (counting and
    predicting), whether or not the identity itself holds."""
    if r >= high:
        return "それでも、予測による方法の内積が数え上げの PMI と強く相関することは、二つの方法が見かけほど違わないことを示している"
    return f"この設定では内積と PMI の相関も {r:.2f} と低く、二つの方法が近いとは、ここからは言えない"


def famous_reading(n_solved: int, n: int) -> str:
    """The famous analogies shown first (``n_solved`` of ``n`` answered as expected) against the accuracy over the
    whole question set: a few solved examples do not vouch for the rest."""
    if not 0 <= n_solved <= n:
        raise ValueError(f"n_solved={n_solved}, n={n}: give 0 <= n_solved <= n.")
    if n_solved == n:
        return f"有名な {n} 問がすべて解けたことから受ける印象と、問題集全体の正解率は別である。選んだ数問がすべて解けても、全体の正解率がそれに見合うとは限らない"
    return f"有名な {n} 問のうち解けたのは {n_solved} 問で、数問の出来は、問題集全体の正解率の目安にはならない"


def offset_agreement_reading(label: str, observed: float, null_mean: float, null_q95: float) -> str:
    """The mean cosine between the offsets capital − country (``observed``) against pairings shuffled between
    countries (their mean and 95th percentile). When even shuffled pairs line up (mean above 0.5), most of what looks
    parallel is the general capital-minus-country direction, and only the difference belongs to each pair."""
    text = (f"{label} では {observed:.2f} で、入れ替えた場合の平均 {null_mean:.2f} との差は {observed - null_mean:.2f}、"
            + ("95 パーセンタイルを超えた" if observed > null_q95 else "95 パーセンタイルを超えなかった"))
    if null_mean > 0.5:
        text += ("（入れ替えた組でもずれがかなりそろうので、矢印が平行に見えるのは大部分が首都と国の一般的な違いの向きのためで、"
                 "その国に固有のそろいは差の分だけである）")
    return text


def ja_offset_verdict(beats: Sequence[str], rest: Sequence[str]) -> str:
    """The Japanese relations whose 3CosAdd interval lies above the baseline's (``beats``) and the others (``rest``)."""
    if not beats:
        return "どの関係でも 3CosAdd の区間は基準の区間より上に離れておらず、ずれが学習されたとは言えない"
    text = f"3CosAdd の正解率の 95% 区間が基準の区間より上に離れているのは{'・'.join(beats)}で、これらの関係はベクトルのずれとして学習された"
    if rest:
        text += f"。{'・'.join(rest)}では基準との差が区間の中にあり、そうは言えない"
    return text


# -- chapter 4 (seq2seq) -------------------------------------------------------------------------------------------


def proportion_interval(k: int, n: int) -> str:
    """``k`` of ``n`` as its exact (Clopper-Pearson) 95% interval in percent, ``"12%〜30%"``; with ``n == 0`` there is
    nothing to count and no interval."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k}, n={n}: give 0 <= k <= n.")
    if n == 0:
        return "区間なし（数える文がない）"
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci()
    return f"{ci.low:.0%}〜{ci.high:.0%}"


def people_verdict(p_value: float, alpha: float = 0.05) -> str:
    """Whether, among well-formed generated sentences, agreement fails more often in the "people" sentences than in
    the others (one-sided Fisher exact test, ``p_value``)."""
    if p_value < alpha:
        return f"形の正しい文のうち一致を誤る割合は、人の文でほかの型より高い（フィッシャーの正確検定、片側 p < {alpha}。上の出力）"
    return f"形の正しい文のうち一致を誤る割合が、人の文でほかの型より高いとは言えない（フィッシャーの正確検定、片側 p ≥ {alpha}。上の出力）"


def reach_reading(before: int | None, after: int | None) -> str:
    """The longest input length still reversed exactly at least half the time, with the base budget (``before``) and
    with more (``after``); None where no length reaches it. A whole clause."""
    if before is None and after is None:
        return "完全一致 0.5 以上を保つ長さは、どちらの予算でもない"
    if before is None:
        return f"完全一致 0.5 以上を保つ長さは、1 倍の予算ではなかったが、予算を増やすと {after} まで届いた"
    if after is None:
        return f"完全一致 0.5 以上を保つ最長の長さは、1 倍の予算では {before} だったが、予算を増やすとなくなった"
    if after > before:
        return f"完全一致 0.5 以上を保つ最長の長さは {before} から {after} に伸びた"
    if after == before:
        return f"完全一致 0.5 以上を保つ最長の長さは {before} のまま変わらなかった"
    return f"完全一致 0.5 以上を保つ最長の長さは {before} から {after} に縮んだ"


# -- chapter 5 (attention) -----------------------------------------------------------------------------------------


def bottleneck_verdict(attention_lows: Sequence[float], bottleneck_high: float) -> str:
    """The controls of chapter 5: whether every attention model's 95% interval of exact matches on the long inputs
    (their lower ends, ``attention_lows``: the full model and the one with fewer parameters than the bottleneck
    model) lies above the interval of the bottleneck model given more budget (its upper end, ``bottleneck_high``)."""
    if not len(attention_lows):
        raise ValueError("attention_lows is empty: give the lower ends of the attention models' intervals.")
    if min(attention_lows) > bottleneck_high:
        return ("どちらの対照でも、注意機構のモデルの区間は、予算を増やしたボトルネックのモデルの区間と重ならず、その上にある。"
                "したがって、この大きさのモデルと、試した予算の範囲では、長い入力での落ち込みの大部分は、学習不足でもパラメータの多さでもなく、"
                "固定長のボトルネックによる、と言える（各設定 1 回ずつの学習での判定）")
    return ("この実行では、注意機構のモデルの区間の少なくとも一つが、予算を増やしたボトルネックのモデルの区間と重なる（か、その下にある）。"
            "したがって、この実行だけでは、"
            "差を固定長のボトルネックによるとは言えない")


# -- chapter 7 (ちはやふる) -----------------------------------------------------------------------------------------------


def learned_side(n_later: int, n_chars: int) -> str:
    """Which half a character's learning epoch falls in: ``遅く`` (late) when fewer than half of the ``n_chars``
    characters were learned after it (``n_later``), else ``早く`` (early). Glued into 「…は{}覚えられた方に入る」."""
    if not 0 <= n_later < max(n_chars, 1):
        raise ValueError(f"n_later={n_later}, n_chars={n_chars}: give 0 <= n_later < n_chars.")
    return "遅く" if n_later < n_chars / 2 else "早く"


# -- chapter 8 (BERT) ------------------------------------------------------------------------------------------------


def interval_contains(low: float, high: float, value: float) -> str:
    """``含む`` when ``low <= value <= high``, else ``含まない``."""
    if not low <= high:
        raise ValueError(f"low={low} > high={high}: give an interval's lower end first.")
    return "含む" if low <= value <= high else "含まない"


def all_or_some(k: int, n: int, unit: str = "列") -> str:
    """``7 列すべてで`` when ``k == n``, else ``7 列のうち 5 列で`` (``unit``: the counter word)."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k}, n={n}: give 0 <= k <= n.")
    return f"{n} {unit}すべてで" if k == n else f"{n} {unit}のうち {k} {unit}で"


def safe_choice_reading(gap_best: Mapping[str, float], yardstick: Mapping[str, float]) -> str:
    """BERT's masking table: is 80/10/10 within the yardstick of each column's best setting (``gap_best``: best minus
    80/10/10 per column; ``yardstick``: the half-width of a difference's 95% interval per column)?"""
    over = [c for c, gap in gap_best.items() if gap > yardstick[c]]
    if not over:
        return "80/10/10 は、各列の最良との差がどの列でも物差しの内側にある、という意味で無難な選択であって、最良であることが示されたわけではない。"
    return "80/10/10 と最良との差が物差しを超える列がある（" + "・".join(over) + "）。"


def tense_reading(time_read: bool, object_read: bool) -> str:
    """The small BERT's tense blanks: is the left cue (the time word) read, and the right one (the object)? Each is
    shown by a minimal-pair group that the model changes correctly throughout."""
    if time_read and object_read:
        return "左右どちらの手がかりも読まれている"
    return "少なくとも一方の手がかりが読まれている証拠はない"

