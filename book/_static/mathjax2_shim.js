// The ipywidgets HTML manager (@jupyter-widgets/html-manager 1.x) typesets widget labels through
// the MathJax 2 API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]). The book loads MathJax 3,
// which has no Hub, so the manager would throw while rendering a saved widget. This file gives it a
// MathJax 2-shaped entry point that forwards to MathJax 3's typesetPromise. Loaded (deferred, after
// MathJax) only on pages that embed widget state; see nb_ipywidgets_js in _config.yml.
(function () {
  function install() {
    var mj = window.MathJax;
    if (!mj || mj.Hub || typeof mj.typesetPromise !== "function") return;
    mj.Hub = {
      Queue: function (job) {
        var element = job && job[2];
        if (element) mj.typesetPromise([element]).catch(function () {});
      },
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
  window.addEventListener("load", install);
})();
