// Search results: Sphinx's snippets are the pages' text before MathJax ran, so math shows as raw TeX
// ("\(\gamma\)"). Turn the TeX of a snippet into readable text: Greek letters and common symbols as Unicode,
// the delimiters, \mathbf{..}-style commands and braces dropped.
(() => {
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ", lambda: "λ",
    mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", varphi: "φ", omega: "ω", Omega: "Ω", Delta: "Δ",
    Gamma: "Γ", Sigma: "Σ", sum: "Σ", infty: "∞", to: "→", rightarrow: "→", le: "≤", leq: "≤", ge: "≥",
    geq: "≥", ne: "≠", neq: "≠", approx: "≈", partial: "∂", cdot: "·", times: "×", in: "∈", ell: "ℓ",
    top: "ᵀ", nabla: "∇", log: "log", exp: "exp", max: "max", min: "min", arg: "arg", quad: " ", qquad: " ",
  };
  const texToText = (tex) => tex
    .replace(/\\[,;:! ]/g, " ")
    .replace(/\\([A-Za-z]+)/g, (m, name) => (name in SYMBOLS ? SYMBOLS[name] : ""))
    .replace(/[{}]/g, "")
    .replace(/\s+/g, " ")
    .trim();
  const readable = (text) => text
    .replace(/\\\[([\s\S]*?)\\\]/g, (m, tex) => texToText(tex))
    .replace(/\\\(([\s\S]*?)\\\)/g, (m, tex) => texToText(tex))
    .replace(/\$\$([\s\S]*?)\$\$/g, (m, tex) => texToText(tex));
  const patch = () => {
    if (typeof Search === "undefined" || Search._vlrReadable) return;
    const htmlToText = Search.htmlToText;
    Search.htmlToText = (html, anchor) => readable(htmlToText(html, anchor) || "");
    Search._vlrReadable = true;
  };
  patch();
  document.addEventListener("DOMContentLoaded", patch);
})();
