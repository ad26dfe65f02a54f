// Tables in the book's cell outputs (pandas DataFrame and Styler HTML) are marked up for reading:
// a cell that holds a number (or numbers: "23.4", "1.2e-06", "41%", "0.12 (0.10〜0.14)", "3 / 12"; not a list of
// number tokens such as "1987, 1988", which is text), a column
// heading such as a head's index included, gets the class mixbook-num (right-aligned, tabular figures, no
// minimum width: see mixbook.css; an "estimate (interval)" cell also gets mixbook-interval, which may wrap
// before its interval), and a body row where a
// multi-index group starts (a row heading spanning several rows) gets mixbook-group (a rule above it).
// pandas gives the index's name(s) a header row of their own ("層 | | | |") under the column headings: the names
// move up into the corner cells above them and the near-empty row goes (where the corner already names the
// columns, it shows both: "カテゴリ →" over "層 ↓"). A symbol with an index written the way code writes it
// (d_k, ψ_qkv, ‖x_j‖, b_V W_O in a table's heading or cell, where DataFrame labels are plain text, or in a printed
// sentence or text glued into the prose) is set with a subscript. Headings and cells break between phrases
// (mixbook.css) where the table still fits its output area, anywhere where it would not (class mixbook-tight).
(function () {
  "use strict";
  var NUMERIC = /^[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*\d[\s\d.,%+\-\u2212\u00b1/()\u00d7~\u301c\u2026eE]*$/;
  var MISSING = /^[\u2014\u2013\u25cb\u00d7-]$/;  // "—" (a number that is not there) or a ○/× mark: set like a number
  var INTERVAL = /\d\s+\(/;  // "23.4 (21.0〜25.9)": may break before its interval when the table is too wide
  var LIST = /,\s/;  // "1987, 1988, 1989": a list of tokens that are numbers, read as text (left, like its column's words)
  function foldIndexNames(table) {
    var head = table.tHead;
    if (!head || head.rows.length < 2) return;
    var names = head.rows[head.rows.length - 1], above = head.rows[head.rows.length - 2];
    var cells = Array.prototype.slice.call(names.cells), k = 0, i;
    while (k < cells.length && cells[k].textContent.trim() !== "") k++;
    if (k === 0 || k === cells.length) return;
    for (i = k; i < cells.length; i++) if (cells[i].textContent.trim() !== "") return;  // not an index-name row
    var corner = Array.prototype.slice.call(above.cells, 0, k);
    for (i = 0; i < k; i++) if (!corner[i] || corner[i].colSpan > 1 || corner[i].rowSpan > 1) return;
    var named = corner.filter(function (c) { return c.textContent.trim() !== ""; });
    if (k === 1 && named.length === 1) {
      // the corner names the columns: it names both, the columns' name (→) over the rows' name (↓)
      var columns = corner[0].textContent.trim(), rows = cells[0].textContent.trim();
      corner[0].textContent = "";
      [columns + " \u2192", rows + " \u2193"].forEach(function (text, j) {
        if (j) corner[0].appendChild(document.createElement("br"));
        corner[0].appendChild(document.createTextNode(text));
      });
      corner[0].classList.add("mixbook-index-name");
      names.parentNode.removeChild(names);
      return;
    }
    if (named.length) return;
    for (i = 0; i < k; i++) {
      corner[i].textContent = cells[i].textContent;
      corner[i].className = cells[i].className;
      corner[i].classList.add("mixbook-index-name");
    }
    names.parentNode.removeChild(names);
  }
  // one or two letters (Latin or Greek), "_", a short index; not inside a longer identifier such as token_id
  var SUBSCRIPT = /(^|[^A-Za-z0-9_\u0370-\u03ff])([A-Za-z\u0370-\u03ff]{1,2})_([A-Za-z0-9]{1,5})(?![A-Za-z0-9_])/g;
  var HAS_SUBSCRIPT = new RegExp(SUBSCRIPT.source);  // no "g": test() keeps no state between nodes
  var CONSTANT = /^[A-Z]{2}_[A-Z]{2,}$/;
  function subscripts(root) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), nodes = [], node;
    while ((node = walker.nextNode())) if (HAS_SUBSCRIPT.test(node.nodeValue)) nodes.push(node);
    nodes.forEach(function (text) {
      if (text.parentNode.closest("code, mjx-container, div.cell_input")) return;
      var value = text.nodeValue, frag = document.createDocumentFragment(), last = 0, m;
      SUBSCRIPT.lastIndex = 0;
      while ((m = SUBSCRIPT.exec(value))) {
        if (CONSTANT.test(m[2] + "_" + m[3])) continue;  // HF_HOME, JA_LR: a setting's name, not a symbol
        frag.appendChild(document.createTextNode(value.slice(last, m.index) + m[1] + m[2]));
        var sub = document.createElement("sub");
        sub.textContent = m[3];
        frag.appendChild(sub);
        last = SUBSCRIPT.lastIndex;
      }
      frag.appendChild(document.createTextNode(value.slice(last)));
      text.parentNode.replaceChild(frag, text);
    });
  }
  function mark() {
    document.querySelectorAll("article.bd-article div.cell_output table").forEach(function (table) {
      foldIndexNames(table);
      subscripts(table);
    });
    // printed sentences (the chapters print Japanese, not code) and text glued into the prose get the same subscripts
    document.querySelectorAll("article.bd-article div.cell_output div.output.stream pre, article.bd-article span.pasted-text")
      .forEach(subscripts);
    document.querySelectorAll("article.bd-article table").forEach(function (table) {
      table.querySelectorAll("td, th").forEach(function (cell) {
        var text = cell.textContent.trim();
        if ((NUMERIC.test(text) && !LIST.test(text)) || MISSING.test(text)) cell.classList.add("mixbook-num");
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
  // phrase breaks (mixbook.css) only where the table still fits its output area; otherwise break anywhere
  function fit() {
    document.querySelectorAll("article.bd-article div.cell_output table").forEach(function (table) {
      var area = table.closest("div.output, div.cell_output");
      table.classList.remove("mixbook-tight");
      if (area && table.getBoundingClientRect().width > area.clientWidth + 1) table.classList.add("mixbook-tight");
    });
  }
  function start() {
    mark();
    fit();
    window.addEventListener("resize", fit);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
