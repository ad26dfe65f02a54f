"""mixlib on a Japanese BERT, offline: loading, MeCab tokenization, punctuation, vocabulary types, the CLI.

``tests/standin_ja.py`` builds random-weight stand-ins for tohoku-nlp/bert-base-japanese-v3 (12 layers, 12
heads, 768; a real ``BertJapaneseTokenizer`` whose vocabulary comes from the book's own text), its character-level
sibling and cl-tohoku/bert-base-japanese-whole-word-masking into a Hugging Face cache outside the repository.
The tests here assert what the Japanese path must do -- which files load, which tokenizer and dictionary run,
which tokens are punctuation and of which type, that every CLI command finishes with Japanese labels and its
self-checks passed -- never the stand-ins' numbers, which mean nothing.

Code that needs the stand-in runs in subprocesses: huggingface_hub reads HF_HOME / HF_HUB_CACHE /
HF_HUB_OFFLINE once, at import.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import standin_ja
from mixlib import japanese

REPO = Path(__file__).resolve().parents[1]
EXTRA_LINE = 'pip install -e ".[ja]"'  # a command that works: mixlib is not on PyPI

#: Japanese sentence pairs with 、。「」！？ in them and no . , or … (which NFKC makes "..."), so that a 句読点
#: column is filled only if Japanese punctuation is counted (a header file, like data/sentence_pairs.tsv).
PAIRS = (
    "sentence_a\tsentence_b\n"
    "今日は朝から雨が降っていた。\tそれでも、子どもたちは元気に学校へ向かった。\n"
    "「また明日ね」と彼女は言った。\t駅までの道は、いつもより静かだった。\n"
    "新しい図書館が町の中心にできた。\t週末には多くの人が本を借りに来る。\n"
    "この問題は、思ったより難しい！\tでも、もう一度考えてみよう？\n"
)


# ---------------------------------------------------------------------------
# torch-free: the rules themselves
# ---------------------------------------------------------------------------

TAGS, SPECIAL = {"[CLS]", "[SEP]", "[MASK]", "[UNK]"}, {"[PAD]"}


@pytest.mark.torch_free
@pytest.mark.parametrize("token, want", [
    ("日本", "漢字"), ("々", "漢字"), ("人々", "漢字"), ("ます", "ひらがな"), ("ちょっと", "ひらがな"), ("データ", "カタカナ"),
    ("ー", "カタカナ"), ("コーヒー", "カタカナ"), ("食べ", "混在"), ("お茶", "混在"), ("3月", "混在"), ("Tシャツ", "混在"),
    ("BERT", "ラテン文字"), ("mp3", "ラテン文字"), ("Ｂ", "ラテン文字"), ("α", "その他の文字"), ("한국", "その他の文字"),
    ("##的", "サブワード"), ("##る", "サブワード"), ("##", "記号"), ("2024", "数字"), ("３", "数字"), ("三", "漢字"),
    ("、", "記号"), ("。", "記号"), ("「", "記号"), ("...", "記号"), ("→", "記号"),
    ("[PAD]", "特殊"), ("[unused7]", "特殊"), ("<unused7>", "特殊"), ("<unused>", "混在"), ("[unused7", "混在"),  # not a placeholder: no digits, no bracket ("", "特殊"), ("[CLS]", "タグ"), ("[UNK]", "タグ"),
    ("ゝ", "ひらがな"), ("ゞ", "ひらがな"), ("ヽ", "カタカナ"), ("ヶ月", "漢字"), ("ヵ国", "漢字"), ("〻", "漢字"), ("〇", "漢字"),
])
def test_japanese_token_types(token, want):
    assert japanese.token_type(token, TAGS, SPECIAL) == want


@pytest.mark.torch_free
def test_to_hiragana_writes_each_word_as_it_is_spelt():
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    assert japanese.to_hiragana("東京の大学で、言語を学んだ。") == "とうきょうのだいがくで、げんごをまなんだ。"
    assert japanese.to_hiragana("今日は本を読む") == "きょうはほんをよむ"  # は and を as written, not わ and お
    assert japanese.to_hiragana("ころも ほす") == "ころもほす"  # spaces go, as MeCab drops them
    out = japanese.to_hiragana("「カタカナ」とBERTと2019年")
    assert out.startswith("「かたかな」と") and "BERT" in out and "ねん" in out  # no kana reading: kept as it is
    assert not any("ァ" <= c <= "ヶ" or "一" <= c <= "鿿" for c in japanese.to_hiragana("漢字とカタカナの文。"))
    with pytest.raises(TypeError, match="string"):
        japanese.to_hiragana(None)
    assert japanese.mecab_words("東京の大学で学んだ。") == ["東京", "の", "大学", "で", "学ん", "だ", "。"]
    with pytest.raises(TypeError, match="string"):
        japanese.mecab_words(b"bytes")


def test_types_and_punctuation_lists():
    assert len(set(japanese.TYPES)) == len(japanese.TYPES)
    from mixlib import plots

    assert plots.JA_TYPE_ORDER == japanese.TYPES and set(japanese.TYPES) <= set(plots.TYPE_COLORS)
    assert not set(plots.TYPE_ORDER) & set(plots.JA_TYPE_ORDER)  # one figure never mixes the two schemes' names
    for p in "、。「」『』・…！？，．":
        assert p in japanese.PUNCTUATION
    # the forms NFKC gives them, which is what reaches the vocabulary
    import unicodedata

    assert {unicodedata.normalize("NFKC", p) for p in japanese.PUNCTUATION} <= set(japanese.PUNCTUATION)


@pytest.mark.torch_free
def test_tokenizer_kwargs_and_the_missing_extra(monkeypatch):
    v3 = standin_ja.TOKENIZER_CONFIGS[standin_ja.MODEL]
    legacy = standin_ja.TOKENIZER_CONFIGS[standin_ja.WWM_MODEL]
    monkeypatch.setattr(japanese, "_installed", lambda m: True)
    assert japanese.tokenizer_kwargs(v3) == {}
    # the first models name no dictionary: they were trained with ipadic (transformers 4's default, not 5's)
    assert japanese.tokenizer_kwargs(legacy) == {"mecab_kwargs": {"mecab_dic": "ipadic"}}
    assert japanese.tokenizer_kwargs({"word_tokenizer_type": "basic"}) == {}
    with pytest.raises(ValueError, match="sudachi"):
        japanese.tokenizer_kwargs({"word_tokenizer_type": "sudachi"}, "'x'")

    for absent, named in (("fugashi", "fugashi"), ("unidic_lite", "unidic-lite")):
        monkeypatch.setattr(japanese, "_installed", lambda m, absent=absent: m != absent)
        with pytest.raises(japanese.MissingExtra) as err:
            japanese.tokenizer_kwargs(v3, "'tohoku-nlp/bert-base-japanese-v3'")
        assert named in str(err.value) and EXTRA_LINE in str(err.value) and "\n" not in str(err.value)
        assert isinstance(err.value, ImportError)
    # the full UniDic is not part of the extra: the message says how to get it
    monkeypatch.setattr(japanese, "_installed", lambda m: m != "unidic")
    with pytest.raises(japanese.MissingExtra, match=r"needs unidic \(not installed\): pip install unidic, then python -m unidic download") as err:
        japanese.tokenizer_kwargs({"word_tokenizer_type": "mecab", "mecab_kwargs": {"mecab_dic": "unidic"}})
    assert EXTRA_LINE not in str(err.value)
    monkeypatch.setattr(japanese, "_installed", lambda m: m != "ipadic")
    assert japanese.tokenizer_kwargs(v3) == {}  # v3 needs no ipadic
    with pytest.raises(japanese.MissingExtra, match="ipadic"):
        japanese.tokenizer_kwargs(legacy)
    # a known Japanese hub id fails before any download or cache lookup, for what that model needs only
    japanese.check_installed("tohoku-nlp/bert-base-japanese-v3")  # fugashi + unidic-lite are enough for v3
    with pytest.raises(japanese.MissingExtra, match="ipadic"):
        japanese.check_installed("cl-tohoku/bert-base-japanese-whole-word-masking")
    monkeypatch.setattr(japanese, "_installed", lambda m: m != "unidic_lite")
    with pytest.raises(japanese.MissingExtra, match="unidic-lite") as err:
        japanese.check_installed("tohoku-nlp/bert-base-japanese-v3")
    assert "ipadic" not in str(err.value) and EXTRA_LINE in str(err.value)
    japanese.check_installed("bert-base-uncased")  # not Japanese: nothing to check


@pytest.mark.torch_free
def test_a_damaged_tokenizer_config_is_not_a_cache_miss(tmp_path):
    """A ValueError (bad input), not an OSError, which load_encoder would take for "not cached" and fall back."""
    (tmp_path / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot be read as JSON"):
        japanese.read_tokenizer_config(str(tmp_path))
    assert japanese.read_tokenizer_config(str(tmp_path / "absent")) == {}


@pytest.mark.torch_free
def test_japanese_names():
    for name in ("tohoku-nlp/bert-base-japanese-v3", "cl-tohoku/bert-base-japanese-char-whole-word-masking",
                 "izumi-lab/bert-small-japanese"):
        assert japanese.is_japanese_name(name)
    assert not japanese.is_japanese_name("bert-base-uncased") and not japanese.is_japanese_name("all-MiniLM-L6-v2")
    assert set(japanese.MODEL_DICTIONARIES.values()) <= set(japanese.DICTIONARY_PACKAGES)


def test_real_tohoku_ids_are_not_typos():
    """Offline, a near miss of a known name is called a typo: the family's other real ids must not be."""
    from mixlib import models

    for name in japanese.MODELS:
        assert models._typo_of(name) == [], name
    assert "tohoku-nlp/bert-base-japanese-v3" in models._typo_of("tohoku-nlp/bert-base-japanese-v4")


def test_english_path_is_unchanged(packaged_enc):
    """The packaged (English) tokenizer is not Japanese: 、。 stay その他 and its types stay Maeda et al.'s."""
    from mixlib import token_categories, tokenize
    from mixlib.clusters import TYPES, type_names

    assert not japanese.is_japanese(packaged_enc) and type_names(packaged_enc.tokenizer) == TYPES
    batch = tokenize(packaged_enc, ["今日は、雨。", "It rains, today."])
    cats = token_categories(packaged_enc, batch["input_ids"], batch["attention_mask"])
    toks = [packaged_enc.tokenizer.convert_ids_to_tokens(row) for row in batch["input_ids"].tolist()]
    got = {t: c for row_t, row_c in zip(toks, cats) for t, c in zip(row_t, row_c)}
    assert got["、"] == "その他" and got["。"] == "その他" and got[","] == "句読点" and got["."] == "句読点"


# ---------------------------------------------------------------------------
# on the stand-ins
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ja_env() -> dict[str, str]:
    pytest.importorskip("fugashi", reason="mixlib[ja] (fugashi) is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_ENDPOINT", "MIXLIB_MODEL", "MIXLIB_FAST")}
    env.update(standin_ja.env())
    env["PYTHONPATH"] = str(REPO)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _python(code: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def _card(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(next(line[5:] for line in proc.stdout.splitlines() if line.startswith("CARD ")))


def test_the_standin_lives_outside_the_repository(ja_env):
    root = Path(ja_env["HF_HOME"]).resolve()
    assert REPO not in root.parents and root != REPO
    rev = standin_ja.revision_of(root)
    for repo_id in standin_ja.TOKENIZER_CONFIGS:
        snap = root / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / rev
        assert json.loads((snap / "config.json").read_text())["tokenizer_class"] == "BertJapaneseTokenizer"
        assert (snap / "model.safetensors").is_file() and (snap / "vocab.txt").is_file()


def test_load_encoder_and_the_three_tokenizers(ja_env):
    proc = _python(
        """
        import json, fugashi, ipadic, unidic_lite, mixlib
        from transformers import AutoModelForMaskedLM
        text = "吾輩は猫である。名前はまだ無い！「こんにちは」と言った…"
        def words(dicdir):
            tagger = fugashi.GenericTagger(f'-r /dev/null -d "{dicdir}" -Owakati')
            import unicodedata
            return tagger.parse(unicodedata.normalize("NFKC", text)).split()
        out = {}
        for name in ("tohoku-nlp/bert-base-japanese-v3", "tohoku-nlp/bert-base-japanese-char-v3",
                     "cl-tohoku/bert-base-japanese-whole-word-masking"):
            enc = mixlib.load_encoder(name, fallback=False)
            tok = enc.tokenizer
            out[name] = {
                "name": enc.name, "source": enc.source, "caption": enc.describe(),
                "sizes": [enc.n_layers, enc.n_heads, enc.d_model, enc.vocab_size],
                "class": type(tok).__name__, "dic": tok.mecab_kwargs, "subword": tok.subword_tokenizer_type,
                "words": tok.word_tokenizer.tokenize(text), "tokens": tok.tokenize(text),
                "vocab": len(tok),
            }
        out["unidic_words"], out["ipadic_words"] = words(unidic_lite.DICDIR), words(ipadic.DICDIR)
        mlm = AutoModelForMaskedLM.from_pretrained("tohoku-nlp/bert-base-japanese-v3", local_files_only=True)
        out["mlm"] = type(mlm).__name__
        print("CARD", json.dumps(out, ensure_ascii=False))
        """, ja_env)
    assert "[mixlib]" not in proc.stdout  # no fallback line
    card = _card(proc)
    v3 = card["tohoku-nlp/bert-base-japanese-v3"]
    assert v3["name"] == "tohoku-nlp/bert-base-japanese-v3" and v3["source"] == "cache"
    assert v3["caption"] == "tohoku-nlp/bert-base-japanese-v3（12層・12ヘッド・768次元）"
    assert v3["sizes"][:3] == [12, 12, 768] and v3["sizes"][3] == v3["vocab"]
    assert v3["class"] == "BertJapaneseTokenizer" and v3["dic"] == {"mecab_dic": "unidic_lite"}
    assert v3["words"] == card["unidic_words"]  # MeCab with unidic-lite, as the model's config says
    assert any(t.startswith("##") for t in v3["tokens"]) and "[UNK]" in v3["tokens"]  # WordPiece after MeCab
    char = card["tohoku-nlp/bert-base-japanese-char-v3"]
    assert char["subword"] == "character" and all(len(t) == 1 for t in char["tokens"] if t != "[UNK]")
    wwm = card["cl-tohoku/bert-base-japanese-whole-word-masking"]
    # no dictionary in its tokenizer_config.json: mixlib gives it ipadic, which it was trained with
    assert wwm["dic"] == {"mecab_dic": "ipadic"} and wwm["words"] == card["ipadic_words"]
    assert card["ipadic_words"] != card["unidic_words"]  # the test can tell the two dictionaries apart
    assert card["mlm"] == "BertForMaskedLM"


def test_japanese_punctuation_and_vocabulary_types(ja_env):
    proc = _python(
        """
        import json, collections, mixlib
        from mixlib.clusters import cluster_summary, type_names, token_type
        enc = mixlib.load_encoder("tohoku-nlp/bert-base-japanese-v3", fallback=False)
        b = mixlib.tokenize(enc, [("「雨だ」と言った、そして。『本』・", "本当に！まさか？いや…")])
        toks = enc.tokenizer.convert_ids_to_tokens(b["input_ids"][0].tolist())
        cats = mixlib.token_categories(enc, b["input_ids"], b["attention_mask"])[0].tolist()
        wwm = mixlib.load_encoder("cl-tohoku/bert-base-japanese-whole-word-masking", fallback=False)
        w = mixlib.tokenize(wwm, ["「すごい！！」と言った……。本当？！"])
        wwm_pairs = list(zip(wwm.tokenizer.convert_ids_to_tokens(w["input_ids"][0].tolist()),
                             mixlib.token_categories(wwm, w["input_ids"], w["attention_mask"])[0].tolist()))
        vc = mixlib.cluster_vocab(enc, k=12, seed=0, cache=False)
        from mixlib.clusters import feature_sets
        sets = {name: enc.tokenizer.convert_ids_to_tokens(ids) for name, ids in feature_sets(enc.tokenizer).items()}
        types = [token_type(t, enc.tokenizer) for t in enc.token_strings()]
        print("CARD", json.dumps({
            "pairs": list(zip(toks, cats)), "names": list(type_names(enc.tokenizer)), "types": collections.Counter(types),
            "vc_types": list(vc.types), "token_types": collections.Counter(vc.token_types.tolist()),
            "summary": cluster_summary(vc)["type"].tolist(), "k": vc.k, "V": len(vc.labels), "vocab": enc.vocab_size,
            "sets": sets, "wwm": wwm_pairs,
        }, ensure_ascii=False))
        """, ja_env)
    card = _card(proc)
    pairs = card["pairs"]
    assert pairs[0] == ["[CLS]", "[CLS]"] and pairs[-1] == ["[SEP]", "[SEP]"]
    punct = {t for t, c in pairs if c == "句読点"}
    assert {"「", "」", "、", "。", "『", "』", "・", "!", "?", "."} <= punct  # ！？… arrive NFKC-normalised: ! ? ...
    assert all(c != "句読点" for t, c in pairs if t in ("雨", "言っ", "本当", "[SEP]"))
    names = card["names"]
    assert names == list(japanese.TYPES) == card["vc_types"] and card["summary"] == [*names, "Total"]
    assert card["token_types"] == card["types"]  # cluster_vocab types every token by the same rules
    assert sum(card["types"].values()) == card["V"] == card["vocab"] and card["k"] == 12
    # the stand-in's vocabulary holds every kind its recipe puts there
    for kind in ("漢字", "ひらがな", "カタカナ", "混在", "ラテン文字", "サブワード", "数字", "記号", "特殊", "タグ"):
        assert card["types"].get(kind, 0) > 0, kind
    assert card["types"]["タグ"] == 4 and card["types"]["特殊"] == 1 + standin_ja.N_UNUSED
    # chapter 11's English lists are not half-matched against a Japanese vocabulary: its own sets instead
    sets = card["sets"]
    assert list(sets) == ["年だけ", "曜日", "助詞", "助動詞", "音便形"]
    lists = {"曜日": japanese.WEEKDAYS, "助詞": japanese.PARTICLES, "助動詞": japanese.AUXILIARIES, "音便形": japanese.ONBIN_STEMS}
    for name, allowed in lists.items():
        assert set(sets[name]) <= set(allowed), (name, sets[name])
    assert all(len(t) == 4 and t.isdigit() and 1000 <= int(t) <= 2099 for t in sets["年だけ"])
    assert {"が", "を", "に", "は"} <= set(sets["助詞"]) and "た" in sets["助動詞"] and "言っ" in sets["音便形"], sets
    # ipadic joins runs of symbols into one MeCab word, which WordPiece splits into ## pieces: all are 句読点
    wwm = card["wwm"]
    pieces = [t for t, c in wwm if c == "句読点"]
    assert any(t.startswith("##") for t in pieces), wwm
    for t, c in wwm:
        body = t[2:] if t.startswith("##") else t
        is_punct = bool(body) and set(body) <= set("".join(japanese.PUNCTUATION))
        assert (c == "句読点") == is_punct, (t, c, wwm)
    assert sum(c == "句読点" for t, c in wwm) >= 10  # 「 ！ ！ 」 . . . . . . 。 ？ ！ less what MeCab joins


#: command -> (small options, files that must be written)
COMMANDS = {
    "mixing": (["--texts", "{texts}", "--max-length", "48", "--batch-size", "4"],
               ["mixing_ratio_by_layer.csv", "summary.csv", "mixing_ratio_by_layer.png", "norms_by_layer.png"]),
    "stretch": ([], ["psi_by_head.csv", "psi_qkv_mean_by_head.png"]),
    "clusters": (["--k", "12", "--upper-k", "3", "--top", "3"],
                 ["cluster_summary.csv", "top_clusters_by_head.csv", "type_map.csv", "type_map.png", "tokens.csv",
                  "token_types.csv"]),
    "positional": (["--n", "16", "--layer", "11"], ["cos_histogram.csv", "top_pairs.csv", "pca.png"]),
    "maps": (["--texts", "{texts}", "--max-length", "48"], ["own_share.csv", "maps.npz"]),
    "stream-mixing": (["--texts", "{texts}", "--max-length", "48", "--chunk-size", "2"], []),
}


@pytest.fixture(scope="module")
def cli_runs(ja_env, tmp_path_factory) -> dict:
    """Every CLI command on the v3 stand-in, in one process (one import of torch), then ``merge`` of the stream."""
    tmp = tmp_path_factory.mktemp("ja-cli")
    texts = tmp / "pairs.tsv"
    texts.write_text(PAIRS, encoding="utf-8")
    runs = {}
    for command, (options, _) in COMMANDS.items():
        runs[command] = ["--model", standin_ja.MODEL, "--device", "cpu", "--no-fallback", "--out", str(tmp / command),
                         *(o.format(texts=texts) for o in options)]
    runs["merge"] = ["--chunks", str(tmp / "stream-mixing"), "--out", str(tmp / "merge")]
    proc = _python(
        f"""
        import contextlib, io, json, sys
        from mixlib.cli import main
        codes = {{}}
        for command, args in {runs!r}.items():
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                codes[command] = [main([command, *args]), err.getvalue()[-2000:]]
        print("CARD", json.dumps(codes, ensure_ascii=False))
        """, ja_env, timeout=900)
    return {"codes": _card(proc), "out": tmp, "stdout": proc.stdout}


@pytest.mark.parametrize("command", [*COMMANDS, "merge"])
def test_cli_runs_on_the_japanese_model(command, cli_runs):
    code, err = cli_runs["codes"][command]
    assert code == 0, f"{command}: exit {code}\n{err}"
    assert "[mixlib]" not in cli_runs["stdout"] and "Traceback" not in err
    out = cli_runs["out"] / command
    expected = COMMANDS.get(command, ([], ["mixing_ratio_by_layer.csv", "summary.csv"]))[1]
    missing = [n for n in expected if not (out / n).is_file() or (out / n).stat().st_size == 0]
    assert not missing, f"{command} did not write {missing}"
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    if command == "stream-mixing":
        assert len(list(out.glob("*.parquet"))) == 2  # 4 pairs in chunks of 2
        return
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    if command != "merge":
        assert run["model"] == standin_ja.MODEL and run["n_layers"] == 12 and run["source"] == "cache"


@pytest.mark.parametrize("command", ["mixing", "merge"])
def test_mixing_tables_count_japanese_punctuation(command, cli_runs):
    """句読点 is its own column, filled (the texts hold 、。「」！？…), in the direct run and in the merged stream."""
    import pandas as pd

    if cli_runs["codes"][command][0] != 0:
        pytest.fail(f"{command} failed: {cli_runs['codes'][command][1]}")
    table = pd.read_csv(cli_runs["out"] / command / "mixing_ratio_by_layer.csv")
    assert list(table.columns) == ["layer", "全体", "[CLS]", "[SEP]", "[MASK]", "句読点", "その他"]
    assert len(table) == 12 and table["句読点"].notna().all()
    if command == "mixing":
        run = json.loads((cli_runs["out"] / command / "run.json").read_text(encoding="utf-8"))
        assert run["punctuation"].startswith("、 。 「 」")


def test_cli_labels_vocabulary_types_in_japanese(cli_runs):
    import pandas as pd

    assert cli_runs["codes"]["clusters"][0] == 0, cli_runs["codes"]["clusters"][1]
    out = cli_runs["out"] / "clusters"
    summary = pd.read_csv(out / "cluster_summary.csv")
    assert summary["type"].tolist() == [*japanese.TYPES, "Total"]
    tokens = pd.read_csv(out / "tokens.csv", keep_default_na=False)
    assert set(tokens["type"]) <= set(japanese.TYPES)
    counts = collections.Counter(tokens["type"])
    assert counts["漢字"] > 0 and counts["ひらがな"] > 0 and counts["サブワード"] > 0
    table = pd.read_csv(out / "token_types.csv")
    assert table["type"].tolist() == list(japanese.TYPES)
    assert dict(zip(table["type"], table["n_tokens"])) == {t: counts.get(t, 0) for t in japanese.TYPES}


def test_missing_extra_is_one_line(ja_env, tmp_path):
    """fugashi (or the dictionary) absent: load_encoder raises MissingExtra naming the extra; the CLI exits 2 in one line."""
    texts = tmp_path / "pairs.tsv"
    texts.write_text(PAIRS, encoding="utf-8")
    proc = _python(
        f"""
        import contextlib, io, json, sys
        results = {{}}
        import shutil
        from huggingface_hub import snapshot_download
        folder = shutil.copytree(snapshot_download("tohoku-nlp/bert-base-japanese-char-v3", local_files_only=True),
                                 {str(tmp_path / "char-v3")!r})
        for hidden in ("fugashi", "unidic_lite"):
            sys.modules[hidden] = None  # as if not installed
            import mixlib
            from mixlib.cli import main
            from mixlib.japanese import MissingExtra
            try:
                mixlib.load_encoder("tohoku-nlp/bert-base-japanese-v3", fallback=True)
                api = "loaded"
            except MissingExtra as err:
                api = str(err)
            try:  # a local folder: not a known name, so the check is the tokenizer config's, before the weights
                mixlib.load_encoder(folder)
                local = "loaded"
            except MissingExtra as err:
                local = str(err)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(["mixing", "--model", "tohoku-nlp/bert-base-japanese-v3", "--texts", {str(texts)!r},
                             "--out", {str(tmp_path / "out")!r}])
            results[hidden] = [api, code, err.getvalue(), local]
            del sys.modules[hidden]
        print("CARD", json.dumps(results))
        """, ja_env)
    card = _card(proc)
    for hidden, named in (("fugashi", "fugashi"), ("unidic_lite", "unidic-lite")):
        api, code, err, local = card[hidden]
        assert named in api and EXTRA_LINE in api, api
        assert named in local and EXTRA_LINE in local and "char-v3" in local, local
        assert code == 2 and err.count("\n") == 1 and EXTRA_LINE in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_a_japanese_model_never_falls_back_to_the_english_one(tmp_path):
    """Offline and not cached: an OSError saying so (even with fallback=True), not the packaged English model."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_ENDPOINT", "MIXLIB_MODEL")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_CACHE=str(tmp_path / "hf" / "hub"), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(REPO))
    proc = _python(
        """
        import contextlib, io, json, mixlib
        from mixlib.cli import main
        try:
            mixlib.load_encoder("tohoku-nlp/bert-base-japanese-v3", fallback=True)
            api = "loaded"
        except OSError as err:
            api = str(err)
        try:  # not in mixlib.japanese.MODELS, but its name says Japanese
            mixlib.load_encoder("izumi-lab/bert-small-japanese", fallback=True)
            other = "loaded"
        except OSError as err:
            other = str(err)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["stretch", "--model", "tohoku-nlp/bert-base-japanese-v3", "--out", OUT])
        print("CARD", json.dumps([api, code, err.getvalue(), other]))
        """.replace("OUT", repr(str(tmp_path / "out"))), env)
    api, code, err, other = _card(proc)
    assert "no offline stand-in" in other, other
    assert "no offline stand-in" in api and "hf download tohoku-nlp/bert-base-japanese-v3" in api, api
    assert "[mixlib]" not in proc.stdout  # no fallback line
    assert code == 2 and err.count("\n") == 1 and "no offline stand-in" in err and not (tmp_path / "out").exists()


def test_long_japanese_lines_are_read_in_pieces_with_the_same_tokens(ja_env):
    """Issue 53: a long line is tokenized piece by piece (cut after 。 where there is no space); MeCab + WordPiece
    give the Japanese model exactly the tokens of the whole line, single texts and pairs."""
    proc = _python(
        """
        import json, re, warnings, torch, mixlib, mixlib.data as d
        nb = json.load(open("notebooks/13_japanese.ipynb", encoding="utf-8"))
        prose = re.sub(r"\\s+", "", "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))
        prose = prose[:12000]
        ja = mixlib.load_encoder("tohoku-nlp/bert-base-japanese-v3")
        d.LONG_CHARS, d.LONG_CHARS_PER_TOKEN = 300, 2
        warnings.simplefilter("ignore")
        tok = ja.tokenizer
        for texts in ([prose, "短い文。"], [(prose[:5000], prose[3000:9000]), ("一つ目。", prose)]):
            args = ([a for a, _ in texts], [b for _, b in texts]) if isinstance(texts[0], tuple) else (texts,)
            for ml in (64, 512):
                got = mixlib.tokenize(ja, texts, max_length=ml)["input_ids"]
                with d.special_tokens_as_text(tok):
                    want = tok(*args, truncation="longest_first", max_length=ml, padding="longest", return_tensors="pt")
                assert torch.equal(got, want["input_ids"]), (ml, texts[0][:20])
        # the lost-sentence warning from a slow tokenizer that makes no segment ids
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mixlib.tokenize(ja, [("一つ目の長い文です。", "二つ目の文です。")], max_length=4)
        lost = [str(w.message) for w in caught if "left nothing" in str(w.message)]
        assert lost == ["texts[0]: truncating the pair to max_length=4 tokens left nothing of its second sentence; "
                        "give a larger max_length."], lost
        print("OK")
        """, ja_env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]
