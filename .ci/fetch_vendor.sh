#!/usr/bin/env bash
# Fetch the browser-side assets the built book serves itself (no CDN at read time):
#   MathJax 3 (equations) and @jupyter-widgets/html-manager (saved ipywidgets states).
# They come from the npm registry with `npm pack` (pinned versions, integrity checked by npm)
# and go to book/_static/vendor/, which is git-ignored (book/_static/.gitignore): the bundles
# are several MB, so they are fetched once per checkout instead of being committed.
# Usage: .ci/fetch_vendor.sh DEST MATHJAX_VERSION HTML_MANAGER_VERSION   (called by `make vendor`)
set -euo pipefail

dest=${1:?destination directory}
mathjax=${2:?mathjax version}
manager=${3:?html-manager version}

if ! command -v npm >/dev/null 2>&1; then
    echo "error: npm (Node.js) is needed once to fetch MathJax and the ipywidgets HTML manager" >&2
    echo "       into $dest (Debian/Ubuntu: apt-get install -y npm)." >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent --loglevel=error "mathjax@$mathjax" "@jupyter-widgets/html-manager@$manager" >/dev/null)
mkdir -p "$tmp/mathjax" "$tmp/manager"
tar xzf "$tmp/mathjax-$mathjax.tgz" -C "$tmp/mathjax"
tar xzf "$tmp/jupyter-widgets-html-manager-$manager.tgz" -C "$tmp/manager"

new="$dest.new"
rm -rf "$new"
mkdir -p "$new/mathjax/output" "$new/html-manager"
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
printf 'mathjax %s\n@jupyter-widgets/html-manager %s\n' "$mathjax" "$manager" > "$new/VERSIONS"

rm -rf "$dest"
mv "$new" "$dest"
echo "vendor assets: mathjax $mathjax, html-manager $manager -> $dest ($(du -sh "$dest" | cut -f1))"
