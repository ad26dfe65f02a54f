// Tables in the book's cell outputs (pandas DataFrame and Styler HTML) are marked up for reading:
// a cell that holds a number (or numbers: "23.4", "1.2e-06", "41%", "0.12 (0.10〜0.14)", "3 / 12"), a column
// heading such as a head's index included, gets the class mixbook-num (right-aligned, tabular figures, no
// minimum width: see mixbook.css; an "estimate (interval)" cell also gets mixbook-interval, which may wrap
// before its interval), and a body row where a
// multi-index group starts (a row heading spanning several rows) gets mixbook-group (a rule above it).
(function () {
  "use strict";
  var NUMERIC = /^[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*\d[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*$/;
  var MISSING = /^[\u2014\u2013\u25cb\u00d7-]$/;  // "—" (a number that is not there) or a ○/× mark: set like a number
  var INTERVAL = /\d\s+\(/;  // "23.4 (21.0〜25.9)": may break before its interval when the table is too wide
  function mark() {
    document.querySelectorAll("article.bd-article table").forEach(function (table) {
      table.querySelectorAll("td, th").forEach(function (cell) {
        var text = cell.textContent.trim();
        if (NUMERIC.test(text) || MISSING.test(text)) cell.classList.add("mixbook-num");
        if (NUMERIC.test(text) && INTERVAL.test(text) && cell.children.length === 0) {
          // the estimate and its interval each stay on one line; only the space between them may break
          var cut = text.search(INTERVAL) + 1, parts = [text.slice(0, cut), text.slice(cut).trim()];
          cell.textContent = "";
          parts.forEach(function (part, i) {
            var span = document.createElement("span");
            span.textContent = part;
            cell.appendChild(span);
            if (i === 0) cell.appendChild(document.createTextNode(" "));
          });
          cell.classList.add("mixbook-interval");
        }
      });
      table.querySelectorAll("tbody th[rowspan]").forEach(function (th) {
        var row = th.parentElement;
        if (parseInt(th.getAttribute("rowspan"), 10) > 1 && row !== row.parentElement.firstElementChild) row.classList.add("mixbook-group");
      });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mark);
  else mark();
})();
