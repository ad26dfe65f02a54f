// What a reader of the site meets besides the text: a handout to print, a skip link to the charts, tooltips in
// Japanese, English marked as English.
// .ci/check_reader.py (make site-check) checks all three in Chromium.
(function () {
  "use strict";

  // 1. Print a handout: the download menu's ".pdf" prints the page with its solutions; a second entry prints it
  //    without them (mixbook.css hides div.solution in print while <html> has the class mixbook-handout).
  function addHandoutButton() {
    var print = document.querySelector(".btn-download-pdf-button");
    if (!print || !document.querySelector("div.solution")) return;
    var item = print.closest("li").cloneNode(true);
    var button = item.querySelector("button");
    button.removeAttribute("onclick");
    button.classList.remove("btn-download-pdf-button");
    button.classList.add("mixbook-handout-button");
    button.setAttribute("title", "解答を除いて印刷（配布用）");
    button.setAttribute("aria-label", "解答を除いて印刷（配布用）");
    button.querySelector(".btn__text-container").textContent = "解答なし";
    button.addEventListener("click", function () {
      document.documentElement.classList.add("mixbook-handout");
      window.print();
    });
    window.addEventListener("afterprint", function () {
      document.documentElement.classList.remove("mixbook-handout");
    });
    print.closest("li").after(item);
  }

  // 2. A second skip link, after the theme's 「本文へ移動」: 「最初の動く図へ移動」 on a page with a chart. From the top of
  //    chapter 10 the first chart control was 125 Tab presses away (links of the contents, each code cell's copy
  //    button, each folded cell's toggle); with the link it is three presses and Enter.
  function addChartSkipLink() {
    var chart = document.querySelector("div.mixbook-vega");
    var skip = document.querySelector("div.skip-link");  // the theme's: <div class="skip-link"><a href="#main-content">
    if (!chart || !skip) return;
    chart.id = chart.id || "mixbook-first-chart";
    chart.setAttribute("tabindex", "-1");
    var box = document.createElement("div");
    box.className = "skip-link d-print-none mixbook-skip-chart";
    var link = document.createElement("a");
    link.href = "#" + chart.id;
    link.textContent = "最初の動く図へ移動";
    box.appendChild(link);
    skip.after(box);
  }

  // 3. Tooltips and labels the themes and extensions leave in English (their Japanese catalogues lack them).
  var JA = {
    "Toggle hidden content": "隠した内容を表示する",
    "Link to this heading": "この見出しへのリンク",
    "Link to this figure": "この図へのリンク",
    "Link to this table": "この表へのリンク",
    "Link to this equation": "この式へのリンク",
    "Link to this code": "このコードへのリンク",
    "Toggle primary sidebar": "目次を開く・閉じる",
    "Toggle secondary sidebar": "このページの目次を開く・閉じる",
    "Color mode": "色の設定",
    "System Settings": "システムの設定に従う",
    "Launch on Colab": "Colab で開く",
    "Copy": "コピー",
    "Copy to clipboard": "クリップボードにコピー",
    "Copied!": "コピーした",
    "Back to top": "ページの先頭へ",
    "Skip to main content": "本文へ移動",
    "Search": "検索",
    "Fullscreen mode": "全画面モード",
  };
  var ATTRIBUTES = ["title", "aria-label", "data-bs-title", "data-bs-original-title", "data-tooltip"];
  function translate(root) {
    ATTRIBUTES.forEach(function (name) {
      root.querySelectorAll("[" + name + "]").forEach(function (el) {
        var ja = JA[el.getAttribute(name).trim()];
        if (ja) el.setAttribute(name, ja);
      });
    });
    root.querySelectorAll(".pst-expand-sidebar-label, .skip-link, .btn__text-container").forEach(function (el) {
      var ja = JA[el.textContent.trim()];
      if (ja) el.textContent = ja;
    });
  }

  // 4. English passages (an English sentence in a table, a reference, an English output) say so, so that a screen
  //    reader reads them with an English voice: a block with Latin letters and no Japanese character gets lang="en".
  var JAPANESE = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]/;
  var LATIN_WORD = /[A-Za-z]{2,}/;
  function markEnglish(root) {
    root.querySelectorAll("article.bd-article :is(p, li, td, th, dd, dt, figcaption, caption, div.output pre)")
      .forEach(function (el) {
        if (el.closest("[lang]:not(html)") || el.closest("div.cell_input, .highlight, mjx-container")) return;
        var text = el.textContent;
        if (LATIN_WORD.test(text) && !JAPANESE.test(text)) el.setAttribute("lang", "en");
      });
  }

  function run() {
    addHandoutButton();
    addChartSkipLink();
    translate(document);
    markEnglish(document);
    // the themes add some tooltips later (bootstrap's): translate what appears afterwards too
    new MutationObserver(function (records) {
      records.forEach(function (r) {
        if (r.type === "attributes" && ATTRIBUTES.indexOf(r.attributeName) >= 0) {
          var ja = JA[(r.target.getAttribute(r.attributeName) || "").trim()];
          if (ja) r.target.setAttribute(r.attributeName, ja);
        }
      });
    }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ATTRIBUTES});
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
