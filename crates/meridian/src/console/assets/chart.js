// Line charts in SVG for the console: a title, round axis ticks (a step
// of 1, 2 or 5 times a power of ten: 0, 100, 200, never 0, 121, 242),
// one polyline per series, a legend. Redrawn whole on each update: the
// charts hold at most an hour of points.
(() => {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

// The top of an axis for values up to `max`, and the step of its ticks.
function niceAxis(max) {
  if (!(max > 0) || !isFinite(max)) return { top: 1, step: 0.25 };
  const magnitude = Math.pow(10, Math.floor(Math.log10(max / 5)));
  let step = 10 * magnitude;
  for (const m of [1, 2, 5, 10]) {
    if (max / (m * magnitude) <= 5) { step = m * magnitude; break; }
  }
  return { top: Math.max(1, Math.ceil(max / step - 1e-9)) * step, step };
}

// A time axis (Unix seconds) from `from` to `to`: ticks on round clock
// times (every 5, 10, 15 or 30 seconds, 1, 2, 5, 10, 15 or 30 minutes,
// or hours), at most six of them.
function timeAxis(from, to) {
  const span = Math.max(1, to - from);
  const steps = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200];
  const step = steps.find((s) => span / s <= 6) || 7200;
  const start = Math.floor(from / step) * step;
  return { start, top: Math.max(step, Math.ceil((to - start) / step) * step), step };
}

function clockLabel(unix, step) {
  const text = new Date(unix * 1000).toTimeString();
  return step < 60 ? text.slice(0, 8) : text.slice(0, 5);
}

function tickLabel(v) {
  const a = Math.abs(v);
  const trim = (x) => String(Number(x.toPrecision(3)));
  if (a >= 1e9) return trim(v / 1e9) + "G";
  if (a >= 1e6) return trim(v / 1e6) + "M";
  if (a >= 1e4) return trim(v / 1e3) + "k";
  return trim(v);
}

function svgElement(name, attributes, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

class LineChart {
  // options: { title, xLabel, yLabel, xFrom (the x axis's start, else the
  // smallest x), time (x values are Unix seconds: ticks on clock times) }
  constructor(container, options) {
    this.container = container;
    this.options = options;
    this.series = [];
    this.draw();
  }

  update(series) {
    this.series = series;
    this.draw();
  }

  draw() {
    const W = 720, H = 260, L = 64, R = 16, T = 28, B = 40;
    const o = this.options;
    const svg = svgElement("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": o.title });
    svg.appendChild(svgElement("text", { x: W / 2, y: 18, "text-anchor": "middle", class: "chart-title" }, o.title));
    const points = this.series.flatMap((s) => s.points);
    const xs = points.map((p) => p[0]);
    let x0, xSpan;
    if (o.time) {
      const now = Date.now() / 1000;
      const axis = timeAxis(xs.length ? Math.min(...xs) : now - 60, xs.length ? Math.max(...xs) : now);
      x0 = axis.start;
      xSpan = axis;
    } else {
      x0 = o.xFrom !== undefined ? o.xFrom : (xs.length ? Math.min(...xs) : 0);
      xSpan = niceAxis(Math.max(1e-9, (xs.length ? Math.max(...xs) : 1) - x0));
    }
    const yAxis = niceAxis(Math.max(0, ...points.map((p) => p[1]).filter((y) => isFinite(y))));
    const pw = W - L - R, ph = H - T - B;
    const px = (x) => L + (pw * (x - x0)) / xSpan.top;
    const py = (y) => H - B - (ph * y) / yAxis.top;
    for (let v = 0; v <= yAxis.top + 1e-9; v += yAxis.step) {
      svg.appendChild(svgElement("line", { x1: L, x2: W - R, y1: py(v), y2: py(v), class: "grid" }));
      svg.appendChild(svgElement("text", { x: L - 6, y: py(v) + 4, "text-anchor": "end", class: "tick" }, tickLabel(v)));
    }
    const xFormat = o.time ? ((v) => clockLabel(x0 + v, xSpan.step)) : ((v) => tickLabel(v));
    for (let v = 0; v <= xSpan.top + 1e-9; v += xSpan.step) {
      svg.appendChild(svgElement("text", { x: px(x0 + v), y: H - B + 16, "text-anchor": "middle", class: "tick" }, xFormat(v, x0)));
    }
    svg.appendChild(svgElement("text", { x: L + pw / 2, y: H - 6, "text-anchor": "middle", class: "axis" }, o.xLabel || ""));
    svg.appendChild(svgElement("text", { x: 12, y: T + ph / 2, "text-anchor": "middle", class: "axis",
      transform: `rotate(-90 12 ${T + ph / 2})` }, o.yLabel || ""));
    this.series.forEach((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const coords = s.points.filter((p) => isFinite(p[1])).map((p) => `${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`);
      const line = svgElement("polyline", { points: coords.join(" "), fill: "none", stroke: colour, "stroke-width": 1.6,
        "data-series": s.name, "data-points": coords.length });
      line.appendChild(svgElement("title", {}, s.name));
      svg.appendChild(line);
      svg.appendChild(svgElement("text", { x: L + 8, y: T + 12 + 13 * i, fill: colour, class: "legend" }, s.name));
    });
    this.container.replaceChildren(svg);
  }
}

window.MeridianCharts = { LineChart, niceAxis, timeAxis, tickLabel };
})();
