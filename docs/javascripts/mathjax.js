// Configuration for the bundled MathJax (vendor/mathjax/tex-svg.js): SVG output draws its own glyphs, so nothing is
// fetched from the network; the menu is off because it loads further components on demand.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
    enableMenu: false
  },
  svg: {
    fontCache: "global"
  }
};

document$.subscribe(() => {
  if (MathJax.typesetPromise) {
    MathJax.startup.output.clearCache()
    MathJax.typesetClear()
    MathJax.texReset()
    MathJax.typesetPromise()
  }
})
