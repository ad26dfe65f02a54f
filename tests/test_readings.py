"""mixlib.course.readings: every branch of every sentence a chapter chooses from its numbers, read here."""

from __future__ import annotations

import numpy as np
import pytest

from mixlib.course import readings as r


def test_reproduction_verdict_every_branch():
    kw = dict(paper_model="bert-base-uncased")
    assert r.reproduction_verdict(0.53, 0.55, same_model=True, **kw) == "論文の値（0.55）に近く、再現した"
    assert r.reproduction_verdict(0.40, 0.55, same_model=True, **kw) == "論文の値（0.55）からは遠く、再現しなかった"
    assert r.reproduction_verdict(0.50, 0.55, same_model=True, **kw).endswith("再現しなかった")  # 0.05 is not within
    assert r.reproduction_verdict(0.123, 0.55, same_model=False, **kw) == (
        "論文の値（0.55）は bert-base-uncased のもので、別のモデルである手元の値（0.12）とは比べられない")


@pytest.mark.parametrize("raw, centred, want", [
    (1, 1, "中心化してもしなくても全組で最大である"),
    (1, 3, "中心化してもしなくても全組の上位 0.01% に入る"),
    (3, 1, "中心化してもしなくても全組の上位 0.01% に入る"),
    (5, 6, "中心化しないときだけ全組の上位 0.01% に入るので、大きく見えるのは二つの平均の向きがそろっているためかもしれない"),
    (6, 1, "全組の上位 0.01% には入らず、順位の上でも例外とは言えない"),
])
def test_cls_rank_reading_every_branch(raw, centred, want):
    assert r.cls_rank_reading(raw, centred, top=5) == want


def test_top_pairs_reading_every_branch():
    assert r.top_pairs_reading([], top=1562) == "全組の上位 10 組は、[CLS] と [SEP] の組だけである"
    assert r.top_pairs_reading([("the", 3, 0.2512, 0.1, 9000), ("a", 7, -0.3, -0.2, 4000)], top=1562) == (
        "全組の上位 10 組には、ほかに the と位置 3（+0.251）、a と位置 7（-0.300）も入る")
    note = "。[unused…] は通常の文からは作られない予約トークンで、全位置に共通のずれを持ちうる（ヒストグラムの節）"
    kept = r.top_pairs_reading([("[unused80]", 127, 0.334, 0.253, 3)], top=1562)  # the cold read's pair: 3rd when centred
    assert kept == ("全組の上位 10 組には、ほかに [unused80] と位置 127（+0.334）も入る" + note
                    + "。[unused80] と位置 127 は、中心化すると +0.253（|cos| で全組の 3 番目）で、上位 0.01% に残るので、"
                    "全位置に共通のずれだけでは説明できない")
    shifted = r.top_pairs_reading([("the", 3, 0.25, 0.1, 9000), ("[unused5]", 12, 0.41, 0.02, 2_000_000)], top=1562)
    assert shifted.endswith("。[unused5] と位置 12 は、中心化すると +0.020（|cos| で全組の 2,000,000 番目）で、上位 0.01% から外れるので、"
                            "上位に入ったのは全位置に共通のずれのためと考えられる")
    assert note in shifted


def test_unused_reading_every_branch():
    cos = [0.30, 0.10, 0.02, 0.00, -0.02, 0.01, 0.0, 0.0, 0.0, 0.0]  # two reserved tokens (mean +0.200), eight others
    unused = [True, True] + [False] * 8  # 20% of the vocabulary
    assert r.unused_reading([False] * 10, cos, [3] + [0] * 9, 0.12) == "この語彙には予約トークン [unused…] がない"
    head = "予約トークン [unused…] は 2 個（語彙の 20.0%）で、全位置とのコサインの平均は +0.200（ほかのトークンは +0.001）である"
    assert r.unused_reading(unused, cos, [0] * 10, 0.122) == head + "。コサインが 0.12 を超える組はない"
    most = r.unused_reading(unused, cos, [3, 0, 0, 0, 1] + [0] * 5, 0.122)  # 3 of the 4 pairs above 0.12 are reserved
    assert most == head + ("。コサインが 0.12 を超える組の 75% が、この予約トークンの組である。右側の大きなコサインの半分以上は、"
                           "単語と位置の組ごとの関係ではなく、通常の文に現れないこのトークン群がそろって全位置と同じ向きにずれていることから来る"
                           "（全位置とのコサインの平均が正の予約トークンは 100%）")
    split = [0.50, -0.10] + cos[2:]  # the same tail from one reserved token while the other leans away: not "together"
    apart = r.unused_reading(unused, split, [3, 0, 0, 0, 1] + [0] * 5, 0.122)
    assert apart.endswith("。右側の大きなコサインの半分以上はこのトークン群の組から来るが、このトークン群がそろって同じ向きにずれているのではない"
                          "（全位置とのコサインの平均が正の予約トークンは 50%）")
    some = r.unused_reading(unused, cos, [1, 0, 0, 0, 1, 1] + [0] * 4, 0.122)  # a third: under twice their 20% share
    assert some.endswith("。コサインが 0.12 を超える組の 33% が、この予約トークンの組である。語彙に占める割合と大差なく、"
                         "右側の大きなコサインはこのトークン群から来ているのではない")
    part = r.unused_reading(unused, cos, [2, 0, 0, 0, 1, 1, 1] + [0] * 3, 0.122)  # 40%: twice their share, under half
    assert part.endswith("。コサインが 0.12 を超える組の 40% が、この予約トークンの組である。語彙に占める割合よりずっと多く、"
                         "右側の大きなコサインの一部はこのトークン群のずれから来る")


def test_near_positions_cuts_a_long_list():
    assert r.near_positions([1, 2, 3]) == "1・2・3"
    assert r.near_positions(list(range(1, 25))) == "・".join(map(str, range(1, 21))) + " …"


def _spread(near=(), pos0=0.9, second=5, c2=0.41, early=(0.2, 0.35), sep=(3, 0.22)):
    return {"pos0": pos0, "near": list(near), "second": second, "c2": c2, "early_lo": early[0], "early_hi": early[1],
            "sep_pos": sep[0], "sep_c": sep[1]}


KW = dict(near=0.1, early=16, pbar_share=[0.61, 0.87], cls_pbar=0.58, q_early=0.3, q_all=0.25, n_positions=512)


def test_cls_spread_reading_isolated_either_way():
    text = r.cls_spread_reading(_spread(), _spread(second=4, c2=0.377), **KW)
    assert text == ("中心化してもしなくても、[CLS] とほかの位置のコサインはどれも位置 0 の値より 0.1 以上小さく"
                    "（中心化した値で 2 番目は位置 4 の 0.377）、[CLS] と位置 0 の組は孤立して大きい")


def test_cls_spread_reading_aligned_even_centred():
    text = r.cls_spread_reading(_spread(near=[1, 2]), _spread(near=[1, 2, 3]), **KW)
    assert text == ("中心化しても、[CLS] は位置 0 以外とも広くそろっている（位置 0 の値との差が 0.1 以内の位置が 3 個：位置 1・2・3）。"
                    "論文が例外として挙げたのは [CLS] と位置 0 の一組だけだが、手元のモデルでは先頭付近の位置が広くそろっている")


@pytest.mark.parametrize("early_lo, sep_c, middle, end", [
    (0.31, 0.20, "最小の値でも、[CLS] の代わりにランダムな方向を置いて同じ 15 位置の最大を取った値（200 方向の 97.5% 点 0.30）を超える。",
     "より大きい。先頭付近の位置との弱いそろいは残る"),
    (0.20, 0.30, "[CLS] の代わりにランダムな方向を置いて同じ 15 位置の最大を取った値（200 方向の 97.5% 点 0.30）を超えない位置もある。",
     "より大きい。先頭付近の位置との弱いそろいは残る"),
    (0.20, 0.20, "[CLS] の代わりにランダムな方向を置いて同じ 15 位置の最大を取った値（200 方向の 97.5% 点 0.30）を超えない位置もある。",
     "を超えない。先頭付近の位置とのそろいは、偶然と区別できない"),
])
def test_cls_spread_reading_aligned_only_before_centring(early_lo, sep_c, middle, end):
    raw = _spread(near=[1, 2, 3, 4])
    centred = _spread(pos0=0.612, second=1, c2=0.455, early=(early_lo, 0.45), sep=(2, sep_c))
    text = r.cls_spread_reading(raw, centred, **KW)
    assert text == (
        "中心化しないコサインでは、[CLS] は位置 0 以外とも広くそろって見える（位置 0 の値との差が 0.1 以内の位置が 4 個：位置 1・2・3・4）。"
        "これらの位置では、[CLS] との内積の 61%〜87% が、全位置に共通の成分（位置の平均ベクトル、[CLS] とのコサイン 0.58）との内積である。"
        "中心化すると 0.1 以内の位置はなくなる（位置 0 は 0.612、2 番目は位置 1 の 0.455）。中心化したうえでは、[CLS] と位置 0 の組は"
        f"孤立して大きい。ただし [CLS] と位置 1〜15 の中心化したコサインも {early_lo:.2f}〜0.45 で、" + middle
        + f"[SEP] の中心化したコサインの最大は位置 2 の {sep_c:.3f} で、ランダムな方向で全 512 位置の最大を取った値の 97.5% 点 0.250 " + end)


def test_listed():
    assert r.listed([1, 2, 8]) == "1、2、8" and r.listed([3, 0], prefix="H") == "H3、H0" and r.listed([]) == "なし"


SEP = "「単語と位置は別の部分空間に住む」"


@pytest.mark.parametrize("below, above, want", [
    ([1, 2, 4], [], f"位置ベクトルは、調べたすべての k で単語埋め込みが大きくばらつく方向を避けている。これが{SEP}という主張の、"
                    "ランダムと比べたうえでの形である"),
    ([1, 2], [], f"位置ベクトルは、k = 1、2 で単語埋め込みが大きくばらつく方向を避けている。これが{SEP}という主張の、"
                 "ランダムと比べたうえでの形である"),
    ([], [4], f"位置ベクトルは、単語埋め込みが大きくばらつく方向にむしろ多く入っており、{SEP}とは言えない"),
    ([1], [4], f"k によってランダムより小さくも大きくもなり、{SEP}と一言では言えない"),
    ([], [], f"どの k でもランダムな部分空間と区別できず、{SEP}とは、ランダムと比べたうえでは言えない"),
])
def test_share_reading_every_branch(below, above, want):
    assert r.share_reading(below, above, n_k=3) == want


def test_angle_reading_every_branch():
    assert r.angle_reading([1], [8, 2]) == "k = 2、8 では「ランダム以上に直交」という主張は成り立たない"
    assert r.angle_reading([1, 2], []) == "調べたすべての k で、ランダムな部分空間以上に直交している"
    assert r.angle_reading([], [1, 2]) == "どの k でも「ランダム以上に直交」という主張は成り立たない"
    # k where random subspaces are already within a degree of 90: untestable, not failed
    untestable = "k = 1 では、ランダムな部分空間どうしの最小の主角もほぼ 90 度（97.5% 点が 89 度以上）で、「ランダム以上に直交」かどうかをこの比較では判定できない"
    assert r.angle_reading([5], [2, 1], ceiling=[1]) == "k = 2 では「ランダム以上に直交」という主張は成り立たない。" + untestable
    assert r.angle_reading([5], [1], ceiling=[1]) == "判定できたすべての k で、ランダムな部分空間以上に直交している。" + untestable
    assert r.angle_reading([], [1, 2], ceiling=[1]) == "判定できたどの k でも「ランダム以上に直交」という主張は成り立たない。" + untestable
    assert r.angle_reading([], [1], ceiling=[1]) == untestable
    assert r.angle_reading([], []) == "調べた k がない"


def test_raw_reading_every_branch():
    assert r.raw_reading([2, 4], [2, 4], [1]) == (
        "k = 2、4 では、中心化した割合はランダムより小さいのに、中心化しない割合はランダムより大きく、結論が逆転する")
    assert r.raw_reading([], [4], [1]) == "中心化しない割合だけを見ても、k によって結論が逆転する"
    assert r.raw_reading([], [4], []) == "中心化するかどうかで、ランダムとの比較の結論は逆転しない"


@pytest.mark.parametrize("percentile, below, above, want", [
    (1.0, [1], [], "単語と位置は、ランダムに置いた場合よりもはっきり別の方向を使っている、というのが中心化したうえでの結論である"),
    (99.0, [1], [], "中心化すると、単語と位置はランダムに置いた場合よりもむしろそろっており、直交しているとは言えない"),
    (50.0, [], [2], "中心化すると、単語と位置はランダムに置いた場合よりもむしろそろっており、直交しているとは言えない"),
    (1.0, [1], [2], "ランダムに置いた場合より別の方向を使っているという兆しはあるが、指標によって結論が分かれる"),
    (50.0, [1], [2], "ランダムに置いた場合より別の方向を使っているという兆しはあるが、指標によって結論が分かれる"),
    (50.0, [], [], "中心化すると、単語と位置の関係はランダムに置いた場合と区別できない"),
])
def test_ortho_conclusion_every_branch(percentile, below, above, want):
    assert r.ortho_conclusion(percentile, below, above) == want


def test_own_reading_every_branch():
    import pandas as pd

    none_own = {0: "not_own", 1: "not_own"}
    assert r.own_reading(none_own, none_own, 0.05) == "位置のパターンが、そのヘッドに固有の形で実際の注意に残っているヘッドはない"
    both = ("H3、H7 の位置のパターンは、位置 0 を含めた地図でも除いた地図でも、実際の注意に、そのヘッドに固有の形で残っている"
            "（自分自身の実際の地図との相関が、次に近いほかのヘッドより、系列の二つの半分のどちらでも 0.05 以上高い）")
    neither = "位置 0 を含めた地図と除いた地図の両方で固有の形と確かめられるヘッドはない"
    only0 = "H10 が固有に見えるのは位置 0 を含めた地図でだけで、位置 0 の行と列を除くと固有とは確かめられない（その判定は先頭への注意に頼っている）"
    only_no0 = "H5 は位置 0 を除いた地図でだけ固有で、含めた地図では固有とは確かめられない"
    unsure = "固有かどうか決まらず（差が全系列の平均か半分の一方でだけ 0.05 以上）"
    indistinct, indistinct_ = "ほかのヘッドと区別できず（差がどの平均でも 0.05 に届かない）", "ほかのヘッドと区別できない（差がどの平均でも 0.05 に届かない）"
    not_own = "自分自身と対応しない（帰無分布を超えないか、ほかのヘッドの実際の地図のほうが近い）"
    d = "distinct"
    assert r.own_reading({3: d, 7: d}, {3: d, 7: d}, 0.05) == both
    # the chapter's case, as pandas Series: each head said on both maps, as the table beside the sentence shows
    with0 = pd.Series({0: "unsure", 3: d, 5: "indistinct", 7: d, 10: d, 11: "indistinct"})
    without0 = pd.Series({0: "not_own", 3: d, 5: d, 7: d, 10: "not_own", 11: "not_own"})
    assert r.own_reading(with0, without0, 0.05) == "。".join([
        both, only0, only_no0, f"H0 は、位置 0 を含めた地図では{unsure}、除いた地図では{not_own}",
        f"H11 は、位置 0 を含めた地図では{indistinct}、除いた地図では{not_own}"])
    assert r.own_reading({0: "unsure", 11: "unsure"}, {0: "indistinct", 11: "indistinct"}, 0.05) == "。".join(
        [neither, f"H0、H11 は、位置 0 を含めた地図では{unsure}、除いた地図では{indistinct_}"])  # same verdicts: one sentence
    assert r.own_reading({10: d}, {10: "unsure"}, 0.05) == "。".join([neither, only0])


def test_attn_and_worst_reading_every_branch():
    kept = r.attn_reading([2, 10], True)
    assert kept.startswith("H2、H10 では、位置ベクトルだけから計算したパターンが、そのヘッドに固有の形で（ほかのヘッドの地図より、はっきり高く相関して）実際の注意にも残っている。")
    assert kept.endswith("位置の部分だけでパターンが説明できることの証明ではない")
    assert r.attn_reading([], True) == "実際の地図で自分自身ともっとも相関するヘッドはあるが、その形がそのヘッドに固有だとは確かめられない"
    assert r.attn_reading([], False) == "位置ベクトルだけから計算したパターンが、そのヘッドに固有の形で実際の注意に残っているとは言えない"
    unstable = "実際の平均の地図そのものが二組の系列で食い違い、定まっていないので、低い相関は位置の寄与がないことを意味しない"
    assert r.worst_reading(0.1, 0.69, 0.9) == unstable
    head = "実際の平均の地図は二組の系列でおおむね定まっている（折半信頼性 0.83、r の上限 0.95）"
    low = r.worst_reading(0.17, 0.83, 0.95)
    assert low.startswith(head + "のに、相関 0.17 はその上限の半分にも届かないので") and low.endswith("ここでは切り分けていない")
    assert r.worst_reading(0.475, 0.7, 0.95).startswith("実際の平均の地図は二組の系列でおおむね定まっている（折半信頼性 0.70")  # half: low
    assert r.worst_reading(0.6, 0.83, 0.95) == (
        head + "。相関 0.60 は上限の半分を超えるので、もっとも合わないこのヘッドでも、形の一部は位置ベクトルだけの地図で説明できる")


def test_one_sided_align_and_infl_readings_every_branch():
    assert r.one_sided_reading(0.05, 0.02) == "水増しの大部分は、位置の平均ベクトル（全位置に共通の成分）による"
    assert r.one_sided_reading(0.02, 0.05) == "水増しの大部分は、単語の平均ベクトル（全単語に共通の成分）による"
    assert r.one_sided_reading(0.04, 0.02) == "水増しには、二つの平均ベクトルのどちらも同じくらい効いている"  # exactly twice: not more
    assert r.align_reading(12.4) == "平均どうしのコサインはその 12 倍で、二つの平均は偶然では説明できないほど同じ向きにそろっている"
    assert r.align_reading(-4.0) == "平均どうしのコサインはその -4 倍で、二つの平均は偶然では説明できないほど逆向きにそろっている"
    assert r.align_reading(3.0) == r.align_reading(-3.0) == "平均どうしのコサインはランダムな二つの方向と区別できない"
    assert r.infl_reading(2.34) == "中心化しない値は 2.3 倍に水増しされていたことになる"
    assert r.infl_reading(0.854) == "中心化しない値は、中心化した値の 0.85 倍で、小さく出ていたことになる"
    assert r.infl_reading(1.05) == "中心化してもほとんど変わらない"


def test_fixed_and_offset_readings_every_branch():
    claim = "論文の「決まった相対位置を見るヘッドがある」は、"
    raw = "論文の式（生の位置ベクトル）では、相対位置ごとの平均はどのヘッドでも最大で一様の 1.26 倍で、実際の注意に求める 1.5 倍に届かず、ほぼ一様である。"
    assert r.fixed_reading(1.26, [(3, 1, 4.52), (7, -1, 2.0)], peak_min=1.5, shares=[0.999, 0.62],
                           around=[(0.0, 1.0, 0.0, 0.0), (0.7, 0.1, 0.05, 0.05)]) == (
        raw + "実際の入力の尺度で層正規化を通すと、H3（相対位置 +1、実際の尺度で一様の 4.5 倍）、H7（相対位置 -1、実際の尺度で一様の 2.0 倍）"
        "が 0 でない決まった相対位置に集まり、実際の注意でも同じ相対位置に定まる。"
        "どれも重みの半分以上（少ないヘッドでも 62%）を隣の一語に置くので、skip-gram の窓というより、直前（直後）の一語を見る bigram に近い。"
        + claim + "実際の入力の尺度で層正規化を通した位置ベクトルでなら手元のモデルでも見える")
    # H5 as the cold reads measured it: 26% next door, 44% on the two before, 2% on the two after, 8% on itself, 19% on
    # the first token: the neighbours hold under half, so no window is claimed
    h5 = r.fixed_reading(1.26, [(2, -1, 9.0), (5, -1, 3.1)], peak_min=1.5, shares=[0.999, 0.26],
                         around=[(1.0, 0.0, 0.0, 0.0), (0.44, 0.02, 0.08, 0.19)])
    assert ("どれももっとも重いのは隣の一語だが、H5（隣に 26%。直前の 2 語に 44%、直後の 2 語に 2%、自分自身に 8%、先頭の位置 0 に 19%）"
            "は隣に置く重みが半分に満たず、前後 2 語（自分自身を除く）にも半分はない（決まった相対位置だけでは、このヘッドの注意は説明できない）。"
            ) in h5 and "bigram に近い" not in h5 and "窓に近い" not in h5
    one_sided = r.fixed_reading(1.26, [(5, -1, 3.1)], peak_min=1.5, shares=[0.30], around=[(0.60, 0.05, 0.1, 0.1)])
    assert ("H5（隣に 30%。直前の 2 語に 60%、直後の 2 語に 5%、自分自身に 10%、先頭の位置 0 に 10%）は隣に置く重みが半分に満たず、"
            "重みの半分以上が前後 2 語にある（一語だけを見る bigram より、片側だけの狭い窓に近い）。") in one_sided
    two_sided = r.fixed_reading(1.26, [(5, -1, 3.1)], peak_min=1.5, shares=[0.30], around=[(0.35, 0.30, 0.1, 0.1)])
    assert "重みの半分以上が前後 2 語にある（一語だけを見る bigram より、狭い窓に近い）。" in two_sided
    wider = r.fixed_reading(1.26, [(3, 1, 4.52), (7, -2, 2.0)], peak_min=1.5, shares=[0.9, 0.9], around=[(0, 1, 0, 0)] * 2)
    assert "bigram" not in wider and "H7（相対位置 -2" in wider  # one head two back: no bigram sentence
    with pytest.raises(ValueError, match="have 1 and 2 values for 2 heads"):
        r.fixed_reading(1.26, [(3, 1, 4.52), (7, -2, 2.0)], peak_min=1.5, shares=[0.9], around=[(0, 1, 0, 0)] * 2)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):  # a sum of per-offset means can pass 100%: not a share
        r.fixed_reading(1.26, [(2, -1, 9.0)], peak_min=1.5, shares=[0.99], around=[(1.01, 0, 0, 0)])
    with pytest.raises(ValueError, match=r"heads \[1\] peak under 1.5 times uniform"):  # the cold read's H1: a flat map, 1.1x
        r.fixed_reading(1.26, [(1, -1, 1.1)], peak_min=1.5, shares=[0.6], around=[(0.9, 0, 0, 0)])
    assert r.fixed_reading(1.26, [], peak_min=1.5) == (
        raw + "実際の入力の尺度で層正規化を通しても、0 でない決まった相対位置に集まり、実際の注意でも同じ相対位置に定まるヘッドはない。"
        + claim + "手元のモデルでは見えない")
    assert r.fixed_reading(1.5, [], peak_min=1.5).startswith(  # at the bar the raw maps count as peaked, as real attention does
        "論文の式（生の位置ベクトル）でも、相対位置ごとの平均が一様の 1.5 倍以上に集まるヘッドがある（最大 1.50 倍）。実際の入力の尺度で")
    assert r.fixed_cell(1.26, [(3, 1), (7, -1)]) == "H3（+1）、H7（-1）（生の位置ベクトルでは最大でも一様の 1.26 倍）"
    assert r.fixed_cell(1.26, []) == "なし（生の位置ベクトルでは最大でも一様の 1.26 倍）"
    other = r.offset_reading([2], [3, 4], [0])
    assert other.startswith("地図全体の相関が高くても、注意がもっとも集まる相対位置までは")
    assert other.endswith("地図の形が似ているという意味で、どこを一番見るかまでは言っていない")
    assert r.offset_reading([2, 5], [], []) == "H2、H5 では、注意がもっとも集まる相対位置まで、位置ベクトルだけの計算と実際の注意で一致する"
    why = "どちらかが相対位置に集まらないか、実際の注意の集まる相対位置が二つの半分で食い違うので"
    assert r.offset_reading([2, 5], [], [0, 11]) == ("H2、H5 では、注意がもっとも集まる相対位置まで、位置ベクトルだけの計算と実際の注意で一致する"
                                                     f"（H0、H11 は、{why}比べられない）")
    assert r.offset_reading([], [], [0, 11]) == f"自分自身と対応するヘッド（H0、H11）はどれも、{why}、もっとも集まる相対位置は比べられない"
    assert r.offset_reading([], [], []) == "自分自身と対応するヘッドがないので、もっとも集まる相対位置を比べるヘッドもない"


def test_psi_readings_every_branch():
    assert r.psi_reading(0, 0, 72) == ("どのヘッド・位置でも順位相関の 95% 区間は 0 より大きく、1 より小さい。単語埋め込みだけで求めた順位は、"
                                       "実際の入力でも偶然以上に一致するが、そのままは保たれない")
    assert r.psi_reading(0, 3, 72) == ("どのヘッド・位置でも順位相関の 95% 区間は 0 より大きく、69 組では 1 より小さい。単語埋め込みだけで求めた"
                                       "順位は、実際の入力でも偶然以上に一致するが、そのままは保たれない")
    assert r.psi_reading(2, 0, 72) == ("72 組中 2 組では順位相関の 95% 区間が 0 に届き、単語埋め込みだけで求めた順位と実際の入力の順位は、"
                                       "偶然以上に一致するとも言えない")
    assert r.psi_reading(0, 72, 72) == "どのヘッド・位置でも順位相関の 95% 区間が 1 に届き、順位は保たれていないとは言えない"
    kept = "どのヘッドでも比は 0.9〜1.1 倍の中にあり、値もおおむね保たれる"
    assert r.psi_value_reading(0.95, 1.05) == r.psi_value_reading(0.9, 1.1) == kept
    lost = ("比が 0.9〜1.1 倍の外に出るヘッドがあり、値はヘッドによって大きく変わる。単語だけで計算した ψ の値を、そのまま実際の入力での"
            "ヘッドの伸ばし方の大きさとして読むことはできない")
    assert r.psi_value_reading(0.89, 1.0) == r.psi_value_reading(1.0, 1.11) == lost


def test_paper_comparison_every_branch():
    assert r.paper_comparison(0.531, 0.55, same_model=True, paper_model="bert-base-uncased") == (
        "0.531（論文の bert-base-uncased: 0.55、差 -0.019）")
    assert r.paper_comparison(0.2, 0.55, same_model=False, paper_model="bert-base-uncased") == (
        "0.200（論文の bert-base-uncased: 0.55。別のモデルの値）")


# the largest layer-0 head per feature: on words alone, and at positions 1, 5, 10 (head, share of resamplings won)
_WORDS = {"年": (2, 0.97), "数": (5, 0.95), "人名": (1, 0.6)}
_SAME = {"年": {1: (2, 0.99), 5: (2, 0.99), 10: (2, 0.99)}, "数": {1: (5, 0.9), 5: (5, 0.9), 10: (5, 0.9)},
         "人名": {1: (1, 0.7), 5: (1, 0.7), 10: (1, 0.7)}}


def test_head_changes_counts_settled_and_open_pairs():
    at = {**_SAME, "年": {1: (3, 0.95), 5: (3, 0.92), 10: (4, 0.5)}, "人名": {1: (4, 0.99), 5: (1, 0.7), 10: (1, 0.7)}}
    ch = r.head_changes(_WORDS, at, settled=0.9)
    assert ch["moved"] == {"年": {3: [1, 5]}} and ch["open"] == {"年": [10], "人名": [1]}
    assert ch["changed"] == ["年"] and ch["unsettled"] == ["年", "人名"] and (ch["n_changed"], ch["n_open"]) == (2, 2)
    assert r.head_changes(_WORDS, _SAME, 0.9) == {"moved": {}, "open": {}, "changed": [], "unsettled": [], "n_changed": 0, "n_open": 0}


def test_head_label_reading_every_branch():
    assert r.head_label_reading(_WORDS, _SAME, 0.9) == (
        "どの特徴・どの位置でも、層 0 でいちばん大きいヘッドは単語埋め込みだけのときと同じで、前章の層 0 のヘッドの読みは実際の入力でも保たれる")
    # a settled change, an unsettled one in the same feature, and a feature whose words-only head is itself unsettled
    at = {**_SAME, "年": {1: (3, 0.95), 5: (3, 0.92), 10: (4, 0.5)}, "人名": {1: (4, 0.99), 5: (1, 0.7), 10: (1, 0.7)}}
    got = r.head_label_reading(_WORDS, at, 0.9)
    assert got.startswith(
        "「年」は単語だけで最大の H2 が、位置 1・5 では H3 になる。「年」は、位置 10 で最大のヘッドが単語だけのとき（H2）と違うが、"
        "選び直しで定まらないので、替わったとは言えない。「人名」は、単語だけでも最大のヘッドが選び直しで定まらない（最大の H1 が勝つのは 60%）"
        "ので、位置 1 で最大のヘッドが違っても、替わったとは言えない。ほかの特徴では、どの位置でも単語だけのときと同じヘッドである。")
    assert got.endswith("替わった先が前章の「ヘッドの読み」の候補に入っていれば、読みは変わらない）")
    # two settled heads at different positions of one feature
    two = {**_SAME, "数": {1: (6, 0.95), 5: (7, 0.95), 10: (6, 0.95)}}
    assert r.head_label_reading(_WORDS, two, 0.9).startswith("「数」は単語だけで最大の H5 が、位置 1・10 では H6、位置 5 では H7 になる。ほかの特徴")
    # only unsettled changes
    only_open = {**_SAME, "人名": {1: (4, 0.99), 5: (1, 0.7), 10: (1, 0.7)}}
    assert r.head_label_reading(_WORDS, only_open, 0.9) == (
        "「人名」は、単語だけでも最大のヘッドが選び直しで定まらない（最大の H1 が勝つのは 60%）ので、位置 1 で最大のヘッドが違っても、"
        "替わったとは言えない。定まったヘッドどうしで替わった特徴はなく、ほかの特徴では、どの位置でも単語だけのときと同じヘッドである")


# -- chapter 11 ------------------------------------------------------------------------------------------------------


def test_eig_reading_every_branch():
    assert r.eig_reading(0.31, 0.01, 0.5).endswith("という説明と合う")  # aligned: the row space does not matter
    weak = r.eig_reading(0.12, 0.3, 0.083)
    assert weak.startswith("ψ の大きいトークンは、最大固有ベクトル 1 本の向きにそろっているのではなく、ヘッドが写す部分空間全体に多く入っている")
    assert weak.endswith("手元のモデルの数字が支えるのは、この弱い形である")
    assert r.eig_reading(0.12, 0.05, 0.083) == (
        "ψ の大きいトークンは、最大固有ベクトルの向きにも、ヘッドが写す部分空間にも、ランダムな向きより多くは入っていない")


def test_beyond_chance_and_shape_reading_every_branch():
    assert (r.beyond_chance(True), r.beyond_chance(False)) == ("偶然を超える", "偶然と区別できない")
    assert (r.beyond_chance(True, past=True), r.beyond_chance(False, past=True)) == ("偶然を超えた", "偶然を超えない")
    for stat in ("peak_ratio", "top1pct_ratio"):
        assert r.shape_reading(stat, False, 0.99, 0.05) == "偶然と区別できない（突出は言えない）"
        assert r.shape_reading(stat, True, 0.9, 0.05) == "ほぼどのヘッドでも偶然を超え、論文の読みを支える"
        assert r.shape_reading(stat, True, 0.34, 0.05) == (
            "超えたヘッドは 34%（偶然なら 5%）で、突出は一部のヘッドでだけ偶然を超える。論文の「どのヘッドでも」は支えない")
    assert r.shape_reading("tail_cv", True, 1.0, 0.05) == (
        "裾はメンバーをランダムにしたクラスタよりわずかに大きくばらつく（頂点と比べた「平ら」は、この比較では測れない）")
    assert r.shape_reading("tail_cv", False, 0.0, 0.05) == "裾のばらつきはメンバーをランダムにしたクラスタと区別できない"
    with pytest.raises(ValueError, match="stat="):
        r.shape_reading("median", True, 0.5, 0.05)


def test_year_control_reading_every_branch():
    assert r.year_control_reading([]) == "年の特徴は偶然を超えなかったので、対照は比べない"
    rows = [("年だけ", "L3-H2", 1.8, 1.2), ("年・月", "L3-H2", 1.6, 1.2)]
    assert r.year_control_reading(rows) == (
        "「年だけ」と「年・月」のヘッド L3-H2 では、年でない 3 桁の数のスコアは 1.20、「年だけ」は 1.80・「年・月」は 1.60 である。"
        "このヘッドは年でない数より年を強く伸ばしており、この対照に対しては年に特有の好みがあると読める")
    two = [("年だけ", "L3-H2", 1.8, 1.2), ("年・月", "L5-H0", 1.1, 1.3)]
    assert r.year_control_reading(two) == (
        "「年だけ」のヘッド L3-H2 では、年でない 3 桁の数のスコアは 1.20、「年だけ」は 1.80 である。「年・月」のヘッド L5-H0 では、"
        "年でない 3 桁の数のスコアは 1.30、「年・月」は 1.10 である。このヘッドは年に特有ではない（年でない 3 桁の数のほうが高い）。"
        "何を伸ばすヘッドなのかは、この対照だけでは決まらない")
    assert (r.year_specific(True), r.year_specific(False)) == ("（年に特有）", "（年に特有とは言えない）")


def test_special_bias_band_and_note_every_branch():
    assert r.special_reading(0.41, 0.1) == "ランダムに選んだときの 4 倍の割合で入る"
    assert r.special_reading(0.2, 0.1) == "ランダムに選んだときと大きくは変わらない割合で入る"  # exactly twice: not more
    assert r.bias_reading(0.8).startswith("実際の尺度の入力では、どの層・ヘッドでも、バイアスを入れた ψ_qkv の順位は入れない ψ_qkv と")
    assert "（順位相関の最小 0.93）" in r.bias_reading(0.931)
    assert r.bias_reading(0.79).startswith("順位相関の低い層・射影（印字した一覧）では")
    assert [r.layer_band(l, 12) for l in (0, 3, 4, 7, 8, 11)] == ["低層", "低層", "中層", "中層", "高層", "高層"]
    assert [r.layer_band(l, 6) for l in range(6)] == ["低層", "低層", "中層", "中層", "高層", "高層"]
    assert r.band_claim(True) == "そうなっている（不確かさは測っていない。差は数枠分のことがある）"
    assert r.band_claim(False) == "そうなっていない（不確かさは測っていない。差は数枠分のことがある）"
    assert r.paper_model_note(True) == "" and r.paper_model_note(False) == "。論文は別のモデルなので、平均ノルムと距離は比べられない"


# -- chapter 10 ------------------------------------------------------------------------------------------------------


def test_chapter10_interval_readings_every_branch():
    assert r.spread_reading(0.41, 9.0) == "全体の列の揺れの最大 0.41 ポイントは、層どうしの差の最大 9.00 ポイントよりずっと小さい。"
    assert r.spread_reading(1.8, 9.0).endswith("9.00 ポイントより小さいとは言えない。")  # exactly a fifth: not smaller
    assert r.cls_peak_reading(3, 41.23, 39.0, 43.5, 38.2, 0.95) == (
        "[CLS] は層 3 で最大（41.2%、95% 区間 39.0〜43.5%）。ほかの層の区間の上端は最大 38.2% で、区間は重ならない。")
    assert r.cls_peak_reading(3, 41.23, 38.0, 43.5, 38.2, 0.95).endswith("区間が重なるので、最大の層は決めきれない。")
    assert r.dominance_reading(31.26, 0.95) == (
        "全体の 95% 区間の上端は全層で最大 31.3%。50% を下回るので、「残す作用が支配的」は文対の選び直しに対して頑健である。")
    assert r.dominance_reading(50.0, 0.95).endswith("50% をまたぐ層があり、残す作用が支配的とは言えない。")
    assert r.min_layer_reading(5, 9.04, 11.0, [4, 11], 0.9) == (
        "全体がもっとも小さいのは層 5（90% 区間 9.0〜11.0%）。層 4, 11 の区間と重なるので、最小の層は決めきれない。")
    assert r.min_layer_reading(5, 9.04, 11.0, [], 0.9).endswith("ほかの層の区間とは重ならない。")


def test_mixing_facts_reads_the_table():
    import pandas as pd

    tab = pd.DataFrame({"全体": [20.0, 12.0, 30.0, 25.0, 18.0, 22.0], "[CLS]": [5.0, 40.0, 8.0, 9.0, 7.0, 6.0],
                        "[MASK]": [25.0, 10.0, 35.0, 30.0, 10.0, 20.0]}, index=pd.RangeIndex(6, name="layer"))
    f = r.mixing_facts(tab, min_overlaps=[4])
    assert f["全体の混ぜる割合：各層の最小 (%)"] == "12" and f["全体の混ぜる割合：各層の最大 (%)"] == "30"
    assert f["全体がもっとも小さい層"] == "1（最終層は 5）。区間が層 4 と重なり、決めきれない"
    assert f["全体がもっとも大きい層"] == "2" and f["[CLS] がもっとも大きい層"] == "1（40%）"
    assert f["[MASK] が全体より大きい層の数"] == "3 / 6"
    assert f["中盤の層で [MASK] − 全体（ポイント）"] == "+5.0（層 2〜3）"  # layers 2, 3 of 6: (5 + 5) / 2
    assert f["全層で全体 < 50%（残す作用が支配的）"] == "○"
    assert r.mixing_facts(tab.assign(全体=tab["全体"] + 30))["全層で全体 < 50%（残す作用が支配的）"] == "×"
    assert r.mixing_facts(tab)["全体がもっとも小さい層"] == "1（最終層は 5）"


def test_chapter10_sentences_every_branch():
    got = r.ln_paper_reading(4, 6, {"[MASK]": 3.21, "全体": 1.0}, 24, 20, {"[CLS]": 1.234, "全体": 1.1})
    assert got == ("手元のモデルでは、層正規化で全体の割合が下がる層は 4 / 6 である。層で平均した低下は [MASK] 3.2、全体 1.0 ポイント、"
                   "拡大率が 1 を超えるのは（層 × 種類の）24 マス中 20 マスで、層で平均した拡大率は [CLS] 1.23、全体 1.10 倍である"
                   "（区間はつけていないので、値の近い種類どうしの順位は決めない）")
    assert r.ln_reading(("本書（m）", 30.0, 20.0), ("論文（b）", 18.0, 19.5)) == (
        "本書（m）では 30.0% から 20.0% に下がり、論文（b）では 18.0% から 19.5% に上がる")
    assert r.ln_reading(("本書（m）", 20.0, 20.0), ("論文（b）", 18.0, 17.0)) == (
        "本書（m）では 20.0% から 20.0% に上がり、論文（b）では 18.0% から 17.0% に下がる")  # equal: not lowered
    assert r.width_verdict(0.1, 1.0) == "よりずっと小さい" and r.width_verdict(0.2, 1.0) == "と比べて無視できない大きさである"
    assert r.agreement_verdict(True) == "偶然を上回る一致" and r.agreement_verdict(False) == "偶然と区別できない"


# -- chapter 13 ------------------------------------------------------------------------------------------------------


def test_chapter13_readings_every_branch():
    from mixlib.japanese import MissingExtra

    assert r.ja_missing_reason("", None) == "JA_MODEL が空"
    assert r.ja_missing_reason("cl-tohoku/bert-base-japanese", MissingExtra("fugashi")) == "MeCab（fugashi と辞書）が入っていない"
    assert r.ja_missing_reason("cl-tohoku/bert-base-japanese", OSError("offline")) == "この環境のキャッシュになく、ダウンロードもできない"
    assert r.ja_missing_reason("cl-tohoku/bert-base-japanese", ValueError("sudachi")) == "このモデルの分かち書きか設定に対応していない"
    assert r.half_reading(49.9) == "区間の上端は 50% に届かない" and r.half_reading(50.0) == "区間の上端は 50% にちょうど届く"
    assert r.half_reading(50.1) == "区間の上端は 50% を超える"
    assert r.half_verdict(40.0, 49.9) == "：成り立つ" and r.half_verdict(50.0, 60.0) == "：成り立たない"
    assert r.half_verdict(45.0, 55.0) == "：決まらない（区間が 50% をまたぐ）"
    assert r.gap_reading(0.2, 3.0) == r.gap_reading(-3.0, -0.2) == "区間は 0 をまたがない"
    assert r.gap_reading(-0.2, 3.0) == "区間が 0 をまたぐ（文の選び方の偶然と区別できない）"
    assert r.fwe_reading(3, 12, 2, 1, 5) == "全層で補正して p < 0.05 の層：3 / 12（歌のほうが高い層 2、低い層 1）。補正しない層ごとの判定では 5 層"
    assert r.fwe_reading(0, 12, 0, 0, 1) == "全層で補正して p < 0.05 の層：0 / 12。補正しない層ごとの判定では 1 層"


def test_poem_controls_reading_every_branch():
    none = r.poem_controls_reading(12, 0, 0, 0, 0, [0, 0, 0])
    assert none == ("歌と現代文で、全層で補正して差が出る層はない（0 / 12。差がないことの証明ではない）。"
                    "学習前の重みのモデルでも（乱数の種 3 個のどれでも）、補正して差が出る層はない")
    assert r.poem_controls_reading(12, 0, 3, 3, 3, [0, 3, 1]) == (
        "歌と現代文で、全層で補正して差が出る層はない（0 / 12。差がないことの証明ではない）。"
        "学習前の重みのモデルでは乱数の種 3 個のうち 2 個で差の出る層があり（最多 3 / 12 層）、学習したモデルでは出なかった")
    all_hold = r.poem_controls_reading(12, 5, 4, 5, 2, (0, 0))
    assert all_hold == ("歌と現代文は 5 / 12 層で違う。学習前の重みのモデルでは、乱数の種 2 個のどれでも補正して差が出る層はない"
                        "（入力の形だけでは差が出ない、とまでは言えない）。"
                        "長さをそろえた現代文とでも 4 / 12 層で同じ向きの差が残り、長さの違いだけでは説明できない。"
                        "句読点を文から除いた現代文とでも 5 / 12 層で同じ向きの差が残り、句読点の有無だけでは説明できない。"
                        "同じ現代文をひらがなに書き換えると 2 / 12 層で値が動く（書き換えはトークンの区切りと数も変える）")
    none_hold = r.poem_controls_reading(12, 5, 0, 0, 0, [5])
    assert none_hold == ("歌と現代文は 5 / 12 層で違う。学習前の重みのモデルでも乱数の種 1 個のうち 1 個で差の出る層があり（最多 5 / 12 層）、"
                         "入力の形の違いだけでも値は動きうる。"
                         "歌と現代文の差のうちどれだけが学習によるかは、この対照からは決まらない。"
                         "長さをそろえた現代文とでは、同じ向きの差が残る層はない（比べる数も減るので、検出する力も下がる）。"
                         "句読点を文から除いた現代文とでは、同じ向きの差が残る層はない。"
                         "同じ現代文をひらがなに書き換えても、補正して値が動く層はない（動かないことの証明ではない）")
    way = r.poem_controls_reading(12, 5, 4, 5, 3, (0,), script_same=1)
    assert way.endswith("同じ現代文をひらがなに書き換えると 3 / 12 層で値が動く（そのうち歌 − 現代文と同じ向きは 1 層。書き換えはトークンの区切りと数も変える）")
    with pytest.raises(ValueError, match="script_same=4"):
        r.poem_controls_reading(12, 5, 4, 5, 3, (0,), script_same=4)
    unbalanced = r.poem_controls_reading(12, 5, 4, 5, 2, [0], balanced=False)
    assert "長さをそろえた対照は、長さが歌にそろわなかったので（上に印字した長さの差）、長さの説明には使えない" in unbalanced
    assert "4 / 12" not in unbalanced
    with pytest.raises(ValueError, match=r"untrained\[1\]=13"):
        r.poem_controls_reading(12, 1, 1, 1, 1, [0, 13])
    with pytest.raises(ValueError, match="untrained is empty"):
        r.poem_controls_reading(12, 1, 1, 1, 1, [])


def test_unused_pca_reading_every_branch():
    assert r.unused_pca_reading(0, 0.5) == "この語彙には予約トークン [unused…] がない"
    assert r.unused_pca_reading(994, 0.068) == (
        "予約トークン [unused…]（994 個）の座標の広がりは、ほかの単語の 7% しかなく、図ではほぼ一点に固まった濃い灰色の塊に見える")
    assert r.unused_pca_reading(994, 0.5) == (
        "予約トークン [unused…]（994 個）の座標の広がりは、ほかの単語の 50% で、図ではほかの単語より狭くまとまった灰色の群れに見える")
    assert r.unused_pca_reading(994, 0.9) == (
        "予約トークン [unused…]（994 個）の座標の広がりは、ほかの単語の 90% で、ほかの単語とあまり変わらず、図では塊に見えない")


def test_tail_reading_every_branch_and_the_expected_count():
    """The three branches, and the expected count the chapter passes: the share of random unit vectors (d = 384) whose
    cosine with a fixed direction exceeds a threshold, from cos^2 ~ Beta(1/2, (d - 1)/2), against a simulation."""
    from scipy.stats import beta

    assert r.tail_reading(2000, 1000.0) == ("ヒストグラムの右の裾（コサインが正で大きい側）は、ランダムな方向の曲線より厚い"
                                             "（ランダムな方向の平均 |cos| の 3 倍を超える組が 2,000 組、ランダムな方向なら約 1,000 組）")
    assert "より薄い" in r.tail_reading(500, 1000.0) and "ほぼ同じ厚さ" in r.tail_reading(1999, 1000.0)
    with pytest.raises(ValueError, match="expected=0"):
        r.tail_reading(3, 0)
    d, t = 384, 0.12
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200_000, d))
    share = float((x[:, 0] / np.linalg.norm(x, axis=1) > t).mean())
    assert abs(0.5 * beta.sf(t**2, 0.5, (d - 1) / 2) - share) < 0.002


def test_bottleneck_verdict_every_branch():
    above = r.bottleneck_verdict([0.80, 0.62], 0.10)
    assert above.startswith("どちらの対照でも、注意機構のモデルの区間は、予算を増やしたボトルネックのモデルの区間と重ならず、その上にある。")
    assert above.endswith("固定長のボトルネックによる、と言える（各設定 1 回ずつの学習での判定）")
    overlap = ("この実行では、注意機構のモデルの区間の少なくとも一つが、予算を増やしたボトルネックのモデルの区間と重なる（か、その下にある）。"
               "したがって、この実行だけでは、差を固定長のボトルネックによるとは言えない")
    assert r.bottleneck_verdict([0.80, 0.10], 0.10) == overlap  # the small model's interval touches the bottleneck's
    assert r.bottleneck_verdict([0.05, 0.62], 0.10) == overlap
    with pytest.raises(ValueError, match="attention_lows is empty"):
        r.bottleneck_verdict([], 0.1)


def test_proportion_interval_against_scipy_and_its_edges():
    from scipy.stats import binomtest

    ci = binomtest(7, 40).proportion_ci()
    assert r.proportion_interval(7, 40) == f"{ci.low:.0%}〜{ci.high:.0%}" == "7%〜33%"
    assert r.proportion_interval(0, 0) == "区間なし（数える文がない）"
    assert r.proportion_interval(5, 5).endswith("〜100%")
    with pytest.raises(ValueError, match="0 <= k <= n"):
        r.proportion_interval(6, 5)


def test_people_verdict_both_branches():
    assert r.people_verdict(0.01) == "形の正しい文のうち一致を誤る割合は、人の文でほかの型より高い（フィッシャーの正確検定、片側 p < 0.05。上の出力）"
    assert r.people_verdict(0.05) == ("形の正しい文のうち一致を誤る割合が、人の文でほかの型より高いとは言えない"
                                      "（フィッシャーの正確検定、片側 p ≥ 0.05。上の出力）")


@pytest.mark.parametrize("before, after, want", [
    (12, 20, "完全一致 0.5 以上を保つ最長の長さは 12 から 20 に伸びた"),
    (12, 12, "完全一致 0.5 以上を保つ最長の長さは 12 のまま変わらなかった"),
    (20, 12, "完全一致 0.5 以上を保つ最長の長さは 20 から 12 に縮んだ"),
    (None, 9, "完全一致 0.5 以上を保つ長さは、1 倍の予算ではなかったが、予算を増やすと 9 まで届いた"),
    (9, None, "完全一致 0.5 以上を保つ最長の長さは、1 倍の予算では 9 だったが、予算を増やすとなくなった"),
    (None, None, "完全一致 0.5 以上を保つ長さは、どちらの予算でもない"),
])
def test_reach_reading_every_branch(before, after, want):
    assert r.reach_reading(before, after) == want


@pytest.mark.parametrize("low, high, want", [(0.01, 0.2, "上"), (-0.2, -0.01, "下"), (-0.1, 0.1, "どちらとも"), (0.0, 0.1, "どちらとも")])
def test_by_interval_every_branch(low, high, want):
    assert r.by_interval(low, high, above="上", below="下", neither="どちらとも") == want


def test_by_interval_refuses_a_reversed_interval():
    with pytest.raises(ValueError, match="lower end first"):
        r.by_interval(0.2, 0.1, above="上", below="下", neither="どちらとも")


def test_offset_verdict_every_branch():
    assert r.offset_verdict(30, ["国と首都", "時制"], ["性別"]) == "30 次元では、ずれ b − a が基準を上回ったのは国と首都・時制で、性別は基準との差を示せなかった"
    assert r.offset_verdict(30, ["時制"], []) == "30 次元では、ずれ b − a が基準を上回ったのは時制"
    assert r.offset_verdict(30, [], ["性別", "時制"]) == "30 次元では、ずれ b − a が基準を上回った関係はなかった。性別・時制は基準との差を示せなかった"
    assert r.offset_verdict(30, [], []) == "30 次元では、ずれ b − a が基準を上回った関係はなかった"


@pytest.mark.parametrize("n_later, n_chars, want", [(3, 60, "遅く"), (29, 60, "遅く"), (30, 60, "早く"), (59, 60, "早く")])
def test_learned_side_every_branch(n_later, n_chars, want):
    assert r.learned_side(n_later, n_chars) == want


def test_learned_side_refuses_impossible_counts():
    with pytest.raises(ValueError, match="0 <= n_later < n_chars"):
        r.learned_side(60, 60)


def test_listed_with_another_separator():
    assert r.listed(["性別", "過去形"], sep="・") == "性別・過去形" and r.listed([], sep="・") == "なし"


def test_beats_by_space_every_branch():
    assert r.beats_by_space({"SGNS": ["国と首都", "過去形"], "CBOW": []}) == "SGNS では国と首都・過去形、CBOW ではどの関係でもない"
    with pytest.raises(ValueError, match="beats is empty"):
        r.beats_by_space({})


@pytest.mark.parametrize("r_, slope, diff, want", [
    (0.9, (0.9, 1.1), (-0.1, 0.2), "傾きの区間は 1 を、平均の差の区間は 0 を含むので、この設定でも等式と矛盾しない"),
    (0.9, (0.5, 0.8), (-0.1, 0.2), "傾きの区間が 1 を含まないので、相関は高くても、等式そのものはこの設定では成り立っていない"),
    (0.9, (0.9, 1.1), (-0.9, -0.2), "平均の差の区間が 0 を含まないので、相関は高くても、等式そのものはこの設定では成り立っていない"),
    (0.7, (0.5, 0.8), (-0.9, -0.2), "傾きの区間が 1 を含まず、平均の差の区間が 0 を含まないので、相関は高くても、等式そのものはこの設定では成り立っていない"),
    (0.05, (0.0, 0.1), (-0.9, -0.2), "傾きの区間が 1 を含まず、平均の差の区間が 0 を含まないうえ、相関も低く、等式はこの設定では成り立っていない"),
])
def test_lg_verdict_every_branch(r_, slope, diff, want):
    assert r.lg_verdict(r_, slope, diff) == want


def test_offset_agreement_reading_every_branch():
    assert r.offset_agreement_reading("SGNS", 0.80, 0.20, 0.35) == (
        "SGNS では 0.80 で、入れ替えた場合の平均 0.20 との差は 0.60、95 パーセンタイルを超えた")
    assert r.offset_agreement_reading("SGNS", 0.30, 0.20, 0.35).endswith("95 パーセンタイルを超えなかった")
    shared = r.offset_agreement_reading("MiniLM", 0.75, 0.62, 0.70)
    assert shared.startswith("MiniLM では 0.75 で、入れ替えた場合の平均 0.62 との差は 0.13、95 パーセンタイルを超えた（入れ替えた組でも")
    assert shared.endswith("その国に固有のそろいは差の分だけである）")


def test_ja_offset_verdict_every_branch():
    assert r.ja_offset_verdict([], ["性別"]) == "どの関係でも 3CosAdd の区間は基準の区間より上に離れておらず、ずれが学習されたとは言えない"
    beats = "3CosAdd の正解率の 95% 区間が基準の区間より上に離れているのは国と首都・過去形で、これらの関係はベクトルのずれとして学習された"
    assert r.ja_offset_verdict(["国と首都", "過去形"], []) == beats
    assert r.ja_offset_verdict(["国と首都", "過去形"], ["性別"]) == beats + "。性別では基準との差が区間の中にあり、そうは言えない"


def test_listed_says_what_none_is():
    assert r.listed([], none="一つもない") == "一つもない" and r.listed(["a"], none="一つもない") == "a"


def test_chapter8_readings_every_branch():
    assert r.interval_contains(0.45, 0.55, 0.5) == "含む" and r.interval_contains(0.51, 0.6, 0.5) == "含まない"
    assert r.interval_contains(0.5, 0.5, 0.5) == "含む"
    with pytest.raises(ValueError, match="lower end first"):
        r.interval_contains(0.6, 0.5, 0.5)
    assert r.all_or_some(7, 7) == "7 列すべてで" and r.all_or_some(5, 7) == "7 列のうち 5 列で"
    assert r.all_or_some(0, 3, unit="課題") == "3 課題のうち 0 課題で"
    with pytest.raises(ValueError, match="0 <= k <= n"):
        r.all_or_some(8, 7)
    assert r.safe_choice_reading({"MNLI": 0.2, "NER": 0.3}, {"MNLI": 0.5, "NER": 0.3}).startswith(
        "80/10/10 は、各列の最良との差がどの列でも物差しの内側にある")  # at the yardstick still inside
    assert r.safe_choice_reading({"MNLI": 0.9, "NER": 0.3, "POS": 2.0}, {"MNLI": 0.5, "NER": 0.4, "POS": 1.0}) == (
        "80/10/10 と最良との差が物差しを超える列がある（MNLI・POS）。")
    assert r.tense_reading(True, True) == "左右どちらの手がかりも読まれている"
    assert r.tense_reading(True, False) == r.tense_reading(False, True) == r.tense_reading(False, False) == (
        "少なくとも一方の手がかりが読まれている証拠はない")


def test_lg_relation_and_famous_readings_every_branch():
    assert r.lg_relation_reading(0.87).startswith("それでも、予測による方法の内積が数え上げの PMI と強く相関する")
    assert r.lg_relation_reading(0.05) == "この設定では内積と PMI の相関も 0.05 と低く、二つの方法が近いとは、ここからは言えない"
    assert r.famous_reading(3, 3).startswith("有名な 3 問がすべて解けたことから受ける印象と、問題集全体の正解率は別である")
    assert r.famous_reading(1, 3) == "有名な 3 問のうち解けたのは 1 問で、数問の出来は、問題集全体の正解率の目安にはならない"
    with pytest.raises(ValueError, match="0 <= n_solved <= n"):
        r.famous_reading(4, 3)


@pytest.mark.parametrize("kind", sorted(r.WORDS))
def test_word_every_label_both_ways(kind):
    yes, no = r.WORDS[kind]
    assert r.word(kind, True) == yes and r.word(kind, False) == no and yes != no


def test_word_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="no label 'maybe'"):
        r.word("maybe", True)


def test_grammar_label_and_closer_reading_every_branch():
    assert [r.grammar_label(f, a) for f, a in ((False, False), (True, False), (True, True))] == [
        "形が誤り", "形は正しい", "一致まで正しい"]
    with pytest.raises(ValueError, match="agrees without form_ok"):
        r.grammar_label(False, True)
    assert r.closer_reading(0.9, 0.8) == "語順を入れ替えた文の方が近い"
    assert r.closer_reading(0.8, 0.8) == r.closer_reading(0.7, 0.8) == "言い換えの方が近い"

