"""The references of Part I's exercises (chapters 1-3), computed out of the student's sight."""

from __future__ import annotations

import math

import numpy as np

from mixlib.exercise import Part, reference

_X_01_2 = np.array([2.0, 4.0, 6.0, 8.0])
_Y_01_2 = np.array([5.0, 3.0, 4.0, 1.0])


@reference(
    "ex-01-1",
    Part("値", hint="分子は成分ごとの積の和、分母は二つのノルムの積", rtol=1e-9),
    Part("零ベクトル", hint="ノルムが 0 のときは raise ValueError(...) とする"),
    judge=True,
    one_answer=True,
)
def _ex_01_1(answers):
    my_cosine = answers["値"]
    t = np.random.default_rng(1).normal(size=(20, 5))
    pairs = [(list(a), list(b)) for a, b in zip(t[:10], t[10:])]
    if my_cosine([1.0, 0.0], [0.0, 1.0]) is None:
        return {"値": (None, None), "零ベクトル": (None, None)}
    refs = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in pairs]
    try:
        my_cosine([0.0, 0.0], [1.0, 2.0])
        raised = False
    except ValueError:
        raised = True
    return {"値": ([my_cosine(a, b) for a, b in pairs], refs), "零ベクトル": (raised, True)}


@reference(
    "ex-01-2",
    Part("(a) 生のコサイン", hint="平均を引く前のベクトルで cosine を計算する"),
    Part("(b) 相関係数", hint="両方のベクトルから、それぞれの平均を引いてから cosine を計算する"),
)
def _ex_01_2():
    x, y = _X_01_2, _Y_01_2
    return {"(a) 生のコサイン": float(x @ y / math.sqrt((x @ x) * (y @ y))), "(b) 相関係数": float(np.corrcoef(x, y)[0, 1])}


@reference(
    "ex-01-3",
    Part("(a)", hint="6cosθ = 6|sinθ| を 0〜180 度で解く", atol=0.2, rtol=0),
    Part("(b)", hint="その角度での 6cosθ", atol=1e-2, rtol=0),
)
def _ex_01_3():
    # scan 0-180 degrees in 0.1-degree steps for the angle where the dot product equals the parallelogram's area
    t = np.radians(np.linspace(0, 180, 1801))
    x = np.array([2.0, 0.0])
    y = 3.0 * np.stack([np.cos(t), np.sin(t)], axis=1)
    dot, area = y @ x, np.abs(x[0] * y[:, 1] - x[1] * y[:, 0])
    i = int(np.argmin(np.abs(dot - area)))
    return {"(a)": float(np.degrees(t[i])), "(b)": float(dot[i])}


@reference("ex-01-4", Part("a", hint="中心化した x_obs, y_obs に proj_coef を使う"), Part("b", hint="b = ȳ − a x̄"))
def _ex_01_4(x_obs, y_obs):
    a, b = np.polyfit(np.asarray(x_obs, dtype=float), np.asarray(y_obs, dtype=float), 1)  # least squares, independently
    return {"a": float(a), "b": float(b)}
