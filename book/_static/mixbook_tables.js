// Tables in the book's cell outputs (pandas DataFrame and Styler HTML) are marked up for reading:
// a cell that holds a number (or numbers: "23.4", "1.2e-06", "41%", "0.12 (0.10〜0.14)", "3 / 12"), a column
// heading such as a head's index included, gets the class mixbook-num (right-aligned, tabular figures, no
// minimum width: see mixbook.css), and a body row where a
// multi-index group starts (a row heading spanning several rows) gets mixbook-group (a rule above it).
(function () {
  "use strict";
  var NUMERIC = /^[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*\d[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*$/;
  var MISSING = /^[\u2014\u2013\u25cb\u00d7-]$/;  // "—" (a number that is not there) or a ○/× mark: set like a number
  function mark() {
    document.querySelectorAll("article.bd-article table").forEach(function (table) {
      table.querySelectorAll("td, th").forEach(function (cell) {
        var text = cell.textContent.trim();
        if (NUMERIC.test(text) || MISSING.test(text)) cell.classList.add("mixbook-num");
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
