// Draw every Vega-Lite chart of the page (written by mixlib/_mystnb.py) with the book's own
// vega / vega-lite / vega-embed (book/_static/vendor/vega, `make vendor`): no kernel, no CDN.
// The view is kept on its element (element.__vegaView) so that the site check can read its state.
(function () {
  function draw() {
    document.querySelectorAll("div.mixbook-vega").forEach(function (box) {
      if (box.dataset.state) return;
      var target = box.querySelector(".mixbook-vega-view");
      var spec = JSON.parse(box.querySelector("script.mixbook-vega-spec").textContent);
      box.dataset.state = "drawing";
      vegaEmbed(target, spec, {
        renderer: "svg",
        // saving the figure works offline; the editor and the source links would leave the site
        actions: { export: true, source: false, compiled: false, editor: false },
        i18n: { SVG_ACTION: "SVG で保存", PNG_ACTION: "PNG で保存" },
      }).then(function (result) {
        target.__vegaView = result.view;
        box.dataset.state = "ready";
      }).catch(function (err) {
        box.dataset.state = "error";
        target.textContent = "図を描けなかった: " + err;
        console.error(err);
      });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
