"""The self-checks of every chapter give nothing away, and check_answer keeps its contract.

Every check cell calls ``mixlib.exercise.check_answer``, which computes the
reference out of the cell. Here: (1) no check cell contains the computation of
its exercise's solution (compared as syntax trees with every name made the
same, so renamed variables do not hide it) or shows anything besides the
verdict; (2) every exercise whose solution computes something has a registered
check, and every registered check an exercise; (3) check_answer's verdicts,
errors and laziness, and the checks that need no model against hand-worked
values. That every solution passes its check is asserted where the notebooks
run (``tests/test_notebooks.py`` runs every chapter with the solutions filled
in).
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from pathlib import Path

import nbformat
import numpy as np
import pytest

import mixlib.exercise as ex
from exercise_cells import check_cells, solutions, with_solutions

ROOT = Path(__file__).resolve().parent.parent
#: every chapter: each one's checks compute their references in mixlib.exercise
CHECKED = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
#: node types whose subtrees are compared; a subtree must have this many nodes (operands, not operators) to count
SHAPED = (ast.Call, ast.BinOp, ast.Compare, ast.Subscript, ast.BoolOp, ast.UnaryOp)
MIN_NODES = 4


class _Anonymise(ast.NodeTransformer):
    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id="_", ctx=node.ctx), node)


def computations(code: str) -> set[str]:
    """Every call, operation, comparison and subscript of ``code`` with names replaced by ``_``."""
    out = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, SHAPED):
            size = sum(1 for n in ast.walk(node) if not isinstance(n, (ast.expr_context, ast.operator, ast.cmpop,
                                                                         ast.boolop, ast.unaryop)))
            if size >= MIN_NODES:
                out.add(ast.unparse(_Anonymise().visit(ast.parse(ast.unparse(node), mode="eval"))))
    return out


def revealed(solution: str, check_cell: str) -> set[str]:
    """The solution's computations that the check cell also contains."""
    return computations(solution) & computations(check_cell)


def shown(check_cell: str, label: str) -> list[str]:
    """What the cell does besides holding answers and calling check_answer(label, …) once."""
    tree = ast.parse(check_cell)
    problems, calls = [], 0
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr):
            call = stmt.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check_answer":
                calls += 1
                if not (call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == label):
                    problems.append(f"check_answer is not called with {label!r}")
                continue
            problems.append(f"line {stmt.lineno} shows a value: {ast.unparse(stmt)[:60]}")
        elif isinstance(stmt, ast.FunctionDef):
            if not (len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return)
                    and isinstance(stmt.body[0].value, ast.Constant) and stmt.body[0].value.value is None):
                problems.append(f"function {stmt.name} is not a stub that returns None")
        elif not isinstance(stmt, ast.Assign):
            problems.append(f"line {stmt.lineno}: {type(stmt).__name__} (a check cell holds answers and one check)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"print", "display", "check"}:
            problems.append(f"line {node.lineno} calls {node.func.id}()")
    if calls != 1:
        problems.append(f"{calls} check_answer calls (want 1)")
    return problems


def _notebook(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize("name", CHECKED)
def test_check_cells_reveal_no_solution(name):
    nb = _notebook(name)
    sols, cells = solutions(nb), check_cells(nb)
    assert sols and set(cells) <= set(sols), f"{name}: checks without a solution: {set(cells) - set(sols)}"
    unchecked = {label for label in set(sols) - set(cells) if sols[label].strip()}
    assert not unchecked, f"{name}: exercises whose solution computes something but that have no self-check: {unchecked}"
    problems = {}
    for label, i in cells.items():
        cell = nb.cells[i].source
        found = shown(cell, label) + [f"contains the solution's {c}" for c in sorted(revealed(sols[label], cell))]
        if not sols[label].strip():
            found.append("the solution has no code to run through the check")
        if found:
            problems[label] = found
    assert not problems, f"{name}: {problems}"


def test_every_checked_exercise_is_registered_and_only_those():
    in_chapters = {label for name in CHECKED for label in check_cells(_notebook(name))}
    prefixes = tuple(f"ex-{name[:2]}-" for name in CHECKED)
    registered = {label for label in ex.exercises() if label.startswith(prefixes)}
    assert in_chapters == registered


def test_the_detector_sees_a_renamed_recomputation():
    """The check cells of ex-10-3 and ex-12-3 as they were: the reference recomputed under other names."""
    sols = solutions(_notebook("10_mixing"))
    old = ("ans_share = None\n_row = m.row(enc.n_layers // 2)\n_w, _r = m.attn_w[_row][m.real], m.ratio[_row][m.real]\n"
           "check(ans_share, float(((_w > 0.9) & (_r < 0.3)).float().mean()), name='ex-10-3')\n")
    assert revealed(sols["ex-10-3"], old)
    assert "line 4 calls check()" in " ".join(shown(old, "ex-10-3"))
    assert not revealed(sols["ex-10-3"], "ans_share = None\n\ncheck_answer('ex-10-3', ans_share, m=m, enc=enc)\n")
    assert shown("ans = None\nprint(m.ratio)\ncheck_answer('ex-10-3', ans, m=m, enc=enc)\n", "ex-10-3")
    assert shown("ans = None\nm.ratio.mean()\ncheck_answer('ex-10-3', ans, m=m, enc=enc)\n", "ex-10-3")


def test_solutions_go_in_after_the_answer_lines():
    nb = with_solutions(_notebook("10_mixing"))
    cell = nb.cells[check_cells(nb)["ex-10-1"]].source
    assert cell.index("return None  # ← ここを書く") < cell.index("total = zs.sum(0)") < cell.index("check_answer(")


# ---------------------------------------------------------------- check_answer


@pytest.fixture
def toy():
    """Two exercises registered for the test only: one value, and two parts whose reference must not run when unanswered."""
    calls = []

    @ex.reference("ex-test-1", ex.Part(hint="平均を取る"))
    def _one(xs):
        calls.append("one")
        return float(np.mean(xs))

    @ex.reference("ex-test-2", ex.Part("a", hint="和"), ex.Part("b", hint="積"))
    def _two(xs, scale=1.0):
        calls.append("two")
        return {"a": scale * float(np.sum(xs)), "b": float(np.prod(xs))}

    yield calls
    ex._EXERCISES.pop("ex-test-1")
    ex._EXERCISES.pop("ex-test-2")


def test_verdicts_never_print_the_reference(toy, capsys):
    xs = [0.125, 0.5, 0.3]
    assert not ex.check_answer("ex-test-1", 0.1, xs=xs)
    out = capsys.readouterr().out
    assert "もう一度" in out and "平均を取る" in out and "0.30" not in out and "0.308" not in out
    verdict = ex.check_answer("ex-test-1", float(np.mean(xs)), xs=xs)
    assert verdict and repr(verdict) == "Verdict(True)"
    assert "ex-test-1: 正解" in capsys.readouterr().out
    assert not ex.check_answer("ex-test-2", {"a": 0.925, "b": 1.0}, xs=xs)
    out = capsys.readouterr().out
    assert "ex-test-2 (a): 正解" in out and "ex-test-2 (b): もう一度 — ヒント：積" in out and "0.01875" not in out
    assert not ex.check_answer("ex-test-2", {"a": 1.85, "b": None}, xs=xs, scale=2.0)
    out = capsys.readouterr().out
    assert "(a): 正解" in out and "(b): 未回答" in out


def test_unanswered_computes_no_reference(toy, capsys):
    assert not ex.check_answer("ex-test-2", {"a": None, "b": None}, xs=[1.0])
    assert toy == [] and capsys.readouterr().out.count("未回答") == 2


def test_bad_calls_say_what_to_pass(toy):
    with pytest.raises(ValueError, match="no exercise 'ex-99-9'.*ex-10-1"):
        ex.check_answer("ex-99-9", 1.0)
    with pytest.raises(TypeError, match=r"needs the chapter's xs=xs"):
        ex.check_answer("ex-test-1", 1.0)
    with pytest.raises(TypeError, match=r"does not take xz"):
        ex.check_answer("ex-test-1", 1.0, xs=[1.0], xz=[1.0])
    with pytest.raises(TypeError, match=r'pass a dict \{"a": …, "b": …\}'):
        ex.check_answer("ex-test-2", 1.0, xs=[1.0])
    with pytest.raises(TypeError, match="got \\['a'\\]"):
        ex.check_answer("ex-test-2", {"a": 1.0}, xs=[1.0])
    with pytest.raises(ValueError, match="registered twice"):
        ex.reference("ex-test-1")(lambda xs: 0.0)


def _rms_shares(zs, gamma, eps, centre=False):
    import torch

    total = zs.sum(0)
    r = torch.sqrt((total**2).mean() + eps)
    z = zs - zs.mean(dim=1, keepdim=True) if centre else zs  # centre=True: LayerNorm's habit, wrong for RMSNorm
    return z / r * gamma


def _all_in_one(zs, gamma, eps):
    """The whole output given to the first part: sums right, but is no split."""
    import torch

    out = torch.zeros_like(zs)
    out[0] = torch.nn.functional.rms_norm(zs.sum(0), (zs.shape[1],), gamma, eps)
    return out


def test_chapter_checks_that_need_no_model(capsys):
    """ex-10-1 runs the student's function; ex-11-1 tests a vector; ex-12-1's exact value against simulation."""
    import torch

    assert ex.check_answer("ex-10-1", _rms_shares)
    zs, gamma = torch.randn(4, 16, dtype=torch.float64), torch.rand(16, dtype=torch.float64) + 0.5
    torch.testing.assert_close(_rms_shares(zs, gamma, 1e-12).sum(0),  # the split sums to torch's own RMSNorm
                               torch.nn.functional.rms_norm(zs.sum(0), (16,), gamma, 1e-12))
    assert not ex.check_answer("ex-10-1", lambda *a: _rms_shares(*a, centre=True))
    assert not ex.check_answer("ex-10-1", _all_in_one)
    assert not ex.check_answer("ex-10-1", lambda zs, *a: zs[:2])  # a wrong shape is a wrong answer, not an error
    assert ex.check_answer("ex-11-1", {"ψ": math.sqrt(5 / 6), "x": [2.0, 0.1, 1.0]})
    assert not ex.check_answer("ex-11-1", {"ψ": 0.9, "x": [0.0, 1.0, 0.0]})
    assert not ex.check_answer("ex-11-1", {"ψ": None, "x": [0.0, 0.0, 0.0]})
    rng = np.random.default_rng(0)
    for seed in range(3):  # the exercise's size and dimension: a simulation passes, whatever its seed ...
        a, b = np.random.default_rng(seed).standard_normal((2, 200_000, 8))
        sim = np.abs((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).mean()
        assert ex.check_answer("ex-12-1", float(sim), d=8)
    # ... and the approximation fails: 3.2% off at d = 8, the gap asked for (at d = 64 it is 0.39%, inside the 0.5% width)
    assert not ex.check_answer("ex-12-1", math.sqrt(2 / (math.pi * 8)), d=8)
    out = capsys.readouterr().out
    assert out.count("正解") == 6 and "未回答" in out


def test_chapter_8_checks_that_need_no_model(capsys):
    """ex-08-2, 08-3 and 08-6 from their data alone, against hand-worked values and loops."""
    import pandas as pd

    from mixlib.paths import data_path

    assert ex.check_answer("ex-08-2", {"対象": 19.2, "[MASK]": 15.36, "ランダム": 1.92, "そのまま": 1.92, "元と同じ単語": 1.92 / 30000},
                           n_tokens=128, vocab_size=30000)
    r = pd.read_csv(data_path("bert_masking_rates.tsv"), sep="\t")
    cols = ["mnli_finetune", "ner_finetune", "ner_feature_based"]
    worst = {c: tuple(int(x) for x in r.sort_values(c).iloc[0][["mask", "same", "rnd"]]) for c in cols}
    base = r.query("mask == 80 and same == 10 and rnd == 10").iloc[0]
    gap = {c: float(r[c].max() - base[c]) for c in cols}
    assert ex.check_answer("ex-08-3", {"(a)": worst, "(b)": gap})
    assert not ex.check_answer("ex-08-3", {"(a)": worst, "(b)": {c: gap[c] for c in cols[:2]}})  # a column missing
    counts = {"walk": 6, "walked": 4, "talk": 5, "talked": 3, "wall": 2, "tall": 1, "ask": 2}
    # (c) by brute force here: every merge's change in the unigram log-likelihood, worked out from the merged corpus
    def loglik(words):
        c = Counter(u for w, n in words for u in w for _ in range(n))
        return sum(v * math.log(v / sum(c.values())) for v in c.values())

    def split(w):
        return [w[0], *("##" + ch for ch in w[1:])]

    def merge(units, a, b):
        out, i = [], 0
        while i < len(units):
            if i + 1 < len(units) and (units[i], units[i + 1]) == (a, b):
                out.append(a + b.removeprefix("##"))
                i += 2
            else:
                out.append(units[i])
                i += 1
        return out

    base = [(split(w), n) for w, n in counts.items()]
    pairs = {(u[i], u[i + 1]) for u, _ in base for i in range(len(u) - 1)}
    gains = {p: loglik([(merge(u, *p), n) for u, n in base]) - loglik(base) for p in pairs}
    best = max(gains, key=gains.get)
    assert best == ("##a", "##l") and gains[best] == pytest.approx(43.3, abs=0.05)  # the BPE pair, not the ratio's ("a", "##s")
    occurrences = {p: sum(n * sum(1 for i in range(len(u) - 1) if (u[i], u[i + 1]) == p) for u, n in base) for p in pairs}
    assert max(pairs, key=lambda p: gains[p] / occurrences[p]) == ("a", "##s")  # the solution: per occurrence, the ratio's pair gains most
    assert ex.check_answer("ex-08-6", {"(a) BPE": ("##a", "##l"), "(b) WordPiece": ["a", "##s"], "(c) 尤度": best}, counts=counts)
    assert not ex.check_answer("ex-08-6", {"(a) BPE": ("##l", "##k"), "(b) WordPiece": None, "(c) 尤度": ("a", "##s")}, counts=counts)
    toy = {"un", "##aff", "##able", "##a", "##ffa", "##ble", "##b", "##l", "##e"}

    class Tok:
        def tokenize(self, word):
            return ["un", "##af", "##fable"]

    assert ex.check_answer("ex-08-1", {"小さな語彙": "un ##aff ##able", "BERT の語彙": ["un", "##af", "##fable"]},
                           toy_vocab=toy, tokenizer=Tok())
    assert not ex.check_answer("ex-08-1", {"小さな語彙": ["un", "##a", "##ffa", "##ble"], "BERT の語彙": None},
                               toy_vocab=toy, tokenizer=Tok())
    out = capsys.readouterr().out
    assert "もう一度" in out and "19.2" not in out


def test_chapter_8_parameter_counts_in_ex_08_4_solution_match_the_models():
    """ex-08-4's solution counts bert-base-uncased by formula (it cannot be loaded offline): the formula and the
    totals it writes down must equal transformers' own BertModel built from each configuration (on the meta device)."""
    import re

    import torch
    from transformers import BertConfig, BertModel

    code = solutions(nbformat.read(ROOT / "notebooks" / "08_bert.ipynb", as_version=4))["ex-08-4"]
    scope: dict = {}
    exec(code[code.index("def bert_params"):], scope)  # the part that needs no model

    def counted(**cfg):
        with torch.device("meta"):
            model = BertModel(BertConfig(**cfg))
        return (sum(p.numel() for p in model.embeddings.parameters()), sum(p.numel() for p in model.parameters()))

    base = counted()  # BertConfig's defaults are bert-base-uncased's: 30522 x 768, 12 layers, 3072, 512 positions
    mini = counted(hidden_size=384, num_hidden_layers=6, intermediate_size=1536)  # all-MiniLM-L6-v2
    assert (scope["base_emb"], scope["base_all"]) == base
    assert (scope["mini_emb"], scope["mini_all"]) == mini
    assert scope["bert_params"](30522, 512, 768, 12) == base[1]
    written = [int(x.replace(",", "")) for x in re.findall(r"\d{1,3}(?:,\d{3})+", code)]
    assert written == [*base, *mini]  # the totals in the comments are the counted ones
    text = nbformat.read(ROOT / "notebooks" / "08_bert.ipynb", as_version=4)
    solution = next(c.source for c in text.cells if ":::{solution} ex-08-4" in c.source)
    shares = [int(x) for x in re.findall(r"約 (\d+)%", solution)]
    assert shares == [round(100 * base[0] / base[1]), round(100 * mini[0] / mini[1])]


def test_ex_08_1_solution_names_the_split_the_vocabulary_gives(packaged_enc):
    """The solution states BERT's split of 'unaffable' (the packaged model has bert-base-uncased's vocabulary)."""
    nb = nbformat.read(ROOT / "notebooks" / "08_bert.ipynb", as_version=4)
    solution = next(c.source for c in nb.cells if ":::{solution} ex-08-1" in c.source)
    got = packaged_enc.tokenizer.tokenize("unaffable")
    assert f"`{' '.join(got)}`" in solution and got[0] != "un"  # the split crosses un | affable, as the solution says


def test_chapter_1_checks_take_a_function_and_hand_worked_values(capsys):
    """ex-01-1 judges one function on two parts; ex-01-2/3 against values worked by hand."""

    def good(x, y):
        n = math.sqrt(sum(a * a for a in x)) * math.sqrt(sum(b * b for b in y))
        if n == 0:
            raise ValueError("zero vector")
        return sum(a * b for a, b in zip(x, y)) / n

    def no_error(x, y):
        n = math.sqrt(sum(a * a for a in x)) * math.sqrt(sum(b * b for b in y))
        return sum(a * b for a, b in zip(x, y)) / n if n else 0.0

    def first_only(x, y):  # checks only the first argument for a zero vector
        if not any(x):
            raise ValueError("zero vector")
        n = math.sqrt(sum(a * a for a in x)) * math.sqrt(sum(b * b for b in y))
        return sum(a * b for a, b in zip(x, y)) / n if n else 0.0

    assert ex.check_answer("ex-01-1", good)
    assert not ex.check_answer("ex-01-1", no_error)
    assert not ex.check_answer("ex-01-1", first_only)
    assert "ex-01-1 (値): 正解" in capsys.readouterr().out
    assert not ex.check_answer("ex-01-1", lambda x, y: None)
    assert capsys.readouterr().out.count("未回答") == 2
    x, y = np.array([2, 4, 6, 8.0]), np.array([5, 3, 4, 1.0])
    xc, yc = x - x.mean(), y - y.mean()
    assert ex.check_answer("ex-01-2", {"(a) 生のコサイン": 54 / math.sqrt(120 * 51), "(b) 相関係数": xc @ yc / math.sqrt((xc @ xc) * (yc @ yc))})
    out = capsys.readouterr().out  # a part named "(a) …" is printed once bracketed, not "((a) …)"
    assert "ex-01-2 (a) 生のコサイン: 正解" in out and "((" not in out
    assert ex.check_answer("ex-01-3", {"(a)": 45.0, "(b)": 3 * math.sqrt(2)})
    assert not ex.check_answer("ex-01-3", {"(a)": 135.0, "(b)": 3 * math.sqrt(2)})


def test_part_3_checks_against_hand_work_and_simulation(capsys):
    """ex-06-1/06-2/06-4/06-5 and ex-07-1/07-5 from hand-worked values, a simulation and known distances."""
    import torch

    assert ex.check_answer("ex-06-1", {"重み": [0.401, 0.198, 0.401], "出力": [0.602, 0.398]})
    rng = np.random.default_rng(0)
    sigma = np.sqrt(2.0)  # components of variance 2
    sim = (rng.normal(scale=sigma, size=(100_000, 64)) * rng.normal(scale=sigma, size=(100_000, 64))).sum(axis=1)
    assert ex.check_answer("ex-06-2", {"分散": float(sim.var()), "割った後": float((sim / 8).var()), "割る数": float(sim.std())})
    assert not ex.check_answer("ex-06-2", {"分散": 64.0, "割った後": 1.0, "割る数": 8.0})  # the unit-variance answers

    def pe_dot(delta, d_model):
        return float(np.cos(10000.0 ** (-np.arange(0, d_model, 2) / d_model) * delta).sum())

    # the first delta below half of delta = 0, by brute force with the student's own function
    first = next(d for d in range(1, 10_000) if pe_dot(d, 512) < 512 / 4)
    assert ex.check_answer("ex-06-4", {"pe_dot": pe_dot, "半分を下回る δ": first})
    assert not ex.check_answer("ex-06-4", {"pe_dot": lambda delta, d: float(np.cos(delta)), "半分を下回る δ": first})
    assert not ex.check_answer("ex-06-4", {"pe_dot": pe_dot, "半分を下回る δ": first + 1})

    def gap(layer, x, perm):
        with torch.no_grad():
            return float((layer(x)[:, perm] - layer(x[:, perm])).abs().max())

    def no_permutation(layer, x, perm):  # compares layer(x) with layer(x[:, perm]): not zero even without positions
        with torch.no_grad():
            return float((layer(x) - layer(x[:, perm])).abs().max())

    assert ex.check_answer("ex-06-5", gap)
    assert not ex.check_answer("ex-06-5", no_permutation)
    assert ex.check_answer("ex-07-1", {"文字正解率": 13 / 15, "完全一致": False})
    assert not ex.check_answer("ex-07-1", {"文字正解率": 13 / 14, "完全一致": False})

    def lev(a, b):
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    assert ex.check_answer("ex-07-5", lev)
    assert not ex.check_answer("ex-07-5", lambda a, b: abs(len(a) - len(b)))
    assert "もう一度" in capsys.readouterr().out
