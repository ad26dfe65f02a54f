#!/usr/bin/env bash
# Fetch the browser-side assets the built book serves itself (no CDN at read time):
#   MathJax 3 (equations), @jupyter-widgets/html-manager (saved ipywidgets states) and
#   vega + vega-lite + vega-embed (the kernel-free charts of mixlib.interactive; mixlib/_mystnb.py).
# They come from the npm registry with `npm pack` (pinned versions, integrity checked by npm)
# and go to book/_static/vendor/, which is git-ignored (book/_static/.gitignore): the bundles
# are several MB, so they are fetched once per checkout instead of being committed.
# Usage: .ci/fetch_vendor.sh DEST MATHJAX_VERSION HTML_MANAGER_VERSION VEGA VEGA_LITE VEGA_EMBED  (called by `make vendor`)
set -euo pipefail

dest=${1:?destination directory}
mathjax=${2:?mathjax version}
manager=${3:?html-manager version}
vega=${4:?vega version}
vegalite=${5:?vega-lite version}
vegaembed=${6:?vega-embed version}

if ! command -v npm >/dev/null 2>&1; then
    echo "error: npm (Node.js) is needed once to fetch MathJax and the ipywidgets HTML manager" >&2
    echo "       into $dest (Debian/Ubuntu: apt-get install -y npm)." >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent --loglevel=error "mathjax@$mathjax" "@jupyter-widgets/html-manager@$manager" \
    "vega@$vega" "vega-lite@$vegalite" "vega-embed@$vegaembed" >/dev/null)
mkdir -p "$tmp/mathjax" "$tmp/manager" "$tmp/vega" "$tmp/vega-lite" "$tmp/vega-embed"
tar xzf "$tmp/mathjax-$mathjax.tgz" -C "$tmp/mathjax"
tar xzf "$tmp/jupyter-widgets-html-manager-$manager.tgz" -C "$tmp/manager"
tar xzf "$tmp/vega-$vega.tgz" -C "$tmp/vega"
tar xzf "$tmp/vega-lite-$vegalite.tgz" -C "$tmp/vega-lite"
tar xzf "$tmp/vega-embed-$vegaembed.tgz" -C "$tmp/vega-embed"

new="$dest.new"
rm -rf "$new"
mkdir -p "$new/mathjax/output" "$new/html-manager" "$new/vega"
# MathJax: the TeX -> CommonHTML component, the extensions it autoloads, its fonts, the menu
# and accessibility modules the menu may load. (The combined "-full"/SVG builds are not needed.)
mj="$tmp/mathjax/package/es5"
cp "$mj/tex-chtml.js" "$new/mathjax/"
cp -r "$mj/input" "$mj/ui" "$mj/a11y" "$mj/adaptors" "$mj/sre" "$new/mathjax/"
cp -r "$mj/output/chtml" "$mj/output/chtml.js" "$new/mathjax/output/"
cp "$tmp/mathjax/package/LICENSE" "$new/mathjax/LICENSE"
# html-manager: the standalone embedder for the standard widgets (no RequireJS) and its fonts.
hm="$tmp/manager/package/dist"
cp "$hm/embed.js" "$hm/embed.js.LICENSE.txt" "$new/html-manager/"
find "$hm" -maxdepth 1 -type f \( -name '*.woff' -o -name '*.woff2' -o -name '*.ttf' -o -name '*.eot' -o -name '*.svg' \) -exec cp {} "$new/html-manager/" \;
cp "$tmp/manager/package/package.json" "$new/html-manager/package.json"
# vega, vega-lite, vega-embed: the minified UMD builds (globals vega, vegaLite, vegaEmbed), loaded in this order
for pkg in vega vega-lite vega-embed; do
    cp "$tmp/$pkg/package/build/$pkg.min.js" "$new/vega/"
    cp "$tmp/$pkg/package/LICENSE" "$new/vega/$pkg.LICENSE"
done
printf 'mathjax %s\n@jupyter-widgets/html-manager %s\nvega %s\nvega-lite %s\nvega-embed %s\n' \
    "$mathjax" "$manager" "$vega" "$vegalite" "$vegaembed" > "$new/VERSIONS"

rm -rf "$dest"
mv "$new" "$dest"
echo "vendor assets: mathjax $mathjax, html-manager $manager, vega $vega, vega-lite $vegalite, vega-embed $vegaembed -> $dest ($(du -sh "$dest" | cut -f1))"
