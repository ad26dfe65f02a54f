// The table of contents' buttons (☰, and ☷ for the page's own contents) on every width.
// pydata-sphinx-theme 0.17 put a second ☰ in its top bar, hidden in this layout. Its script and
// sphinx-book-theme's both bind to the *first* `.primary-toggle` in the page (document.querySelector), which is
// that hidden one: the ☰ a reader sees, sphinx-book-theme's, has no listener, so on a phone the contents could not
// be opened, and at 1280 px ☰ did not hide the sidebar (pydata-sphinx-theme#2451, sphinx-book-theme#988).
// Here a click on any other `.primary-toggle` / `.secondary-toggle` is passed on to the first one, which does what
// the themes meant: below 992 px it opens the contents in a dialog, above it hides or shows the sidebar.
// .ci/check_toc.py (make site-check) opens the contents at 390 px and hides the sidebar at 1280 px.
(function () {
  "use strict";
  function forward() {
    [".primary-toggle", ".secondary-toggle"].forEach(function (selector) {
      var all = document.querySelectorAll(selector);
      for (var i = 1; i < all.length; i++) {
        all[i].addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          all[0].click();
        });
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", forward);
  else forward();
})();
