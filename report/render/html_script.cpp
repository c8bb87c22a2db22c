#include "report/render/html_script.h"

namespace torchseal {

const char kHtmlScriptStyle[] = R"css(
#ts-timeline{position:relative;user-select:none}
#ts-timeline canvas{width:100%;height:320px;display:block;border:1px solid #ddd;cursor:crosshair}
.ts-bar{margin:4px 0;font-size:12px}.ts-bar button{font-size:12px;margin-right:4px}
.ts-bar button.on{background:#234;color:#fff}
#ts-tip{position:absolute;display:none;max-width:640px;background:#fff;border:1px solid #888;
box-shadow:0 2px 6px rgba(0,0,0,.25);padding:6px 8px;font-size:12px;z-index:5;pointer-events:none}
#ts-tip.pinned{border:2px solid #234;pointer-events:auto}
#ts-tip ol{margin:4px 0;padding-left:22px}#ts-tip li{font-family:ui-monospace,monospace;font-size:11px}
#ts-tip li.user{font-weight:bold;color:#2a6f2a}#ts-tip .k{color:#666}
#ts-flame{position:relative;width:100%;font:11px ui-monospace,monospace}
#ts-flame div{position:absolute;height:17px;overflow:hidden;white-space:nowrap;box-sizing:border-box;
border:1px solid #fff;padding-left:3px;line-height:15px;cursor:default}
#ts-flame div:hover{border-color:#000}
.ts-growth{display:inline-block;margin:0 16px 12px 0;vertical-align:top;font-size:12px}
.ts-growth canvas{width:360px;height:160px;border:1px solid #ddd;display:block}
)css";

const char kHtmlScript[] = R"js(
(function () {
'use strict';
var D = JSON.parse(document.getElementById('ts-data').textContent);
var TL = document.getElementById('ts-timeline');
if (!TL) return;
var BYTES = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
function bytes(v) {
  var i = 0; v = Math.max(0, v);
  while (v >= 1024 && i < 4) { v /= 1024; i++; }
  return (i ? v.toFixed(v < 10 ? 2 : 1) : String(Math.round(v))) + ' ' + BYTES[i];
}
function secs(ns) {
  var s = ns / 1e9;
  if (s < 1e-3) return (s * 1e6).toFixed(1) + ' us';
  if (s < 1) return (s * 1e3).toFixed(2) + ' ms';
  return s.toFixed(s < 10 ? 3 : 1) + ' s';
}
function el(tag, attrs, text) {
  var e = document.createElement(tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function lowerBound(a, key, v) {  // first index with key(a[i]) > v, minus one
  var lo = 0, hi = a.length;
  while (lo < hi) { var m = (lo + hi) >> 1; if (key(a[m]) <= v) lo = m + 1; else hi = m; }
  return lo - 1;
}

// ---- x axis: steps (each step the same width) or time ----
var span = Math.max(D.span, 1);
var knotsT = [0], knotsU = [0];
(function () {
  var st = D.steps, u = 0;
  if (st.length >= 2) {
    var first = st[0][0];
    if (first > 0) { knotsT = [0]; knotsU = [-1]; u = 0; } else { knotsT = []; knotsU = []; }
    for (var i = 0; i < st.length; i++) {
      if (knotsT.length && st[i][0] <= knotsT[knotsT.length - 1]) continue;
      knotsT.push(st[i][0]); knotsU.push(u++);
    }
    if (span > knotsT[knotsT.length - 1]) { knotsT.push(span); knotsU.push(u); }
  }
})();
var hasSteps = knotsT.length >= 3;
var mode = hasSteps ? 'step' : 'time';
function interp(xs, ys, v) {
  if (v <= xs[0]) return ys[0];
  var i = lowerBound(xs, function (x) { return x; }, v);
  if (i >= xs.length - 1) return ys[ys.length - 1];
  return ys[i] + (ys[i + 1] - ys[i]) * (v - xs[i]) / (xs[i + 1] - xs[i]);
}
function toU(t) { return mode === 'time' ? t : interp(knotsT, knotsU, t); }
function toT(u) { return mode === 'time' ? u : interp(knotsU, knotsT, u); }
function fullView() { return mode === 'time' ? [0, span] : [knotsU[0], knotsU[knotsU.length - 1]]; }
var view = fullView();
function stepAt(t) {  // "step N" label of a time
  var st = D.steps;
  if (!st.length) return secs(t);
  var i = lowerBound(st, function (s) { return s[0]; }, t);
  var kind = D.stepKind === 'window' ? 'window ' : 'step ';
  if (i < 0) return 'before ' + kind + st[0][1] + ' (' + secs(t) + ')';
  return 'after ' + kind + st[i][1] + ' (' + secs(t) + ')';
}

// ---- bands, stacked like memory_viz's Active Memory Timeline ----
var B = D.bands.map(function (b, i) {
  return {i: i, t0: b[0], t1: b[1] < 0 ? span : b[1], size: b[2], s: b[3], kind: D.kinds[b[4]],
          dev: b[5], live: b[1] < 0, pts: []};
});
var bandTop = [[0, 0]];  // [t, stacked band bytes] after each band event
(function () {
  var ev = [];
  B.forEach(function (b) { ev.push([b.t0, 1, b]); if (!b.live) ev.push([b.t1, 0, b]); });
  ev.sort(function (x, y) { return x[0] - y[0] || x[1] - y[1] || x[2].i - y[2].i; });
  var stack = [], total = 0;
  ev.forEach(function (e) {
    var b = e[2], t = e[0];
    if (e[1]) {
      b.pts.push([t, total]); b.pos = stack.length; stack.push(b); total += b.size;
    } else {
      var p = stack.indexOf(b);
      stack.splice(p, 1); total -= b.size;
      for (var k = p; k < stack.length; k++) {
        var a = stack[k], off = a.pts[a.pts.length - 1][1] - b.size;
        if (a.pts[a.pts.length - 1][0] === t) a.pts[a.pts.length - 1][1] = off;
        else a.pts.push([t, off]);
      }
    }
    bandTop.push([t, total]);
  });
})();
function offsetAt(b, t) { var i = lowerBound(b.pts, function (p) { return p[0]; }, t); return b.pts[Math.max(i, 0)][1]; }
function bandTotal(t) { return bandTop[Math.max(lowerBound(bandTop, function (p) { return p[0]; }, t), 0)][1]; }
function restAt(t) { return D.rest[Math.min(D.rest.length - 1, Math.floor(t / D.bucket))] || 0; }
var ymax = Math.max(D.peak[1], 1);
for (var q = 0; q < bandTop.length; q++) ymax = Math.max(ymax, bandTop[q][1] + restAt(bandTop[q][0]));
ymax *= 1.05;

var MC = {o: '#d00', d: '#909', m: '#36c', t: '#f80'};  // moment kinds, as html_report.cpp's CSS
// A hue per site, the shade alternating per allocation (neighbours differ).
function color(b) { return 'hsl(' + ((b.s * 137.5) % 360).toFixed(0) + ',60%,' + (48 + (b.i % 4) * 6) + '%)'; }

// ---- DOM ----
var bar = el('div', {'class': 'ts-bar'});
var bStep = el('button', {id: 'ts-axis-step'}, 'x: steps');
var bTime = el('button', {id: 'ts-axis-time'}, 'x: time');
var bReset = el('button', {id: 'ts-reset'}, 'reset zoom');
var status = el('span', {id: 'ts-status', 'class': 'note'});
if (!hasSteps) bStep.disabled = true;
bar.appendChild(bStep); bar.appendChild(bTime); bar.appendChild(bReset); bar.appendChild(status);
var canvas = el('canvas', {id: 'ts-canvas'});
var tip = el('div', {id: 'ts-tip'});
TL.appendChild(bar); TL.appendChild(canvas); TL.appendChild(tip);
TL.appendChild(el('p', {'class': 'note'}, D.bands.length + ' largest of ' + D.allocs +
  ' allocations drawn one band each; the rest as one grey aggregate on top. Drag to zoom, ' +
  'shift-drag or wheel to pan/zoom, hover for the stack, click to pin and pick that moment.'));
var ctx = canvas.getContext('2d');
var W = 0, H = 0, PADL = 70, PADB = 34, PADT = 8;
var pinned = null, hoverBand = null, brush = null, pan = null, moment = null;

function X(t) { return PADL + (toU(t) - view[0]) / (view[1] - view[0]) * (W - PADL - 4); }
function Tof(x) { return toT(view[0] + (x - PADL) / (W - PADL - 4) * (view[1] - view[0])); }
function Y(v) { return PADT + (H - PADT - PADB) * (1 - v / ymax); }

function draw() {
  var dpr = window.devicePixelRatio || 1;
  W = canvas.clientWidth; H = canvas.clientHeight;
  canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, W, H);
  ctx.font = '11px system-ui,sans-serif';
  // y grid
  ctx.strokeStyle = '#eee'; ctx.fillStyle = '#555'; ctx.textAlign = 'right';
  for (var g = 0; g <= 4; g++) {
    var v = ymax / 1.05 * g / 4, y = Y(v);
    ctx.beginPath(); ctx.moveTo(PADL, y); ctx.lineTo(W, y); ctx.stroke();
    ctx.fillText(bytes(v), PADL - 4, y + 4);
  }
  ctx.save(); ctx.beginPath(); ctx.rect(PADL, 0, W - PADL, H - PADB); ctx.clip();
  var tA = Tof(PADL), tB = Tof(W);
  // bands
  B.forEach(function (b) {
    if (b.t1 < tA || b.t0 > tB) return;
    ctx.fillStyle = color(b);
    for (var k = 0; k < b.pts.length; k++) {
      var s = b.pts[k][0], e = k + 1 < b.pts.length ? b.pts[k + 1][0] : b.t1;
      if (e < tA || s > tB) continue;
      var x0 = X(s), x1 = Math.max(X(e), x0 + 0.5), off = b.pts[k][1];
      ctx.fillRect(x0, Y(off + b.size), x1 - x0, Y(off) - Y(off + b.size));
    }
  });
  // the aggregate, one column per pixel
  ctx.fillStyle = 'rgba(150,150,150,0.55)';
  for (var x = PADL; x < W; x++) {
    var t = Tof(x + 0.5), r = restAt(t);
    if (r > 0) { var base = bandTotal(t); ctx.fillRect(x, Y(base + r), 1, Y(base) - Y(base + r)); }
  }
  var hi = pinned || hoverBand;
  if (hi) {
    ctx.strokeStyle = '#000'; ctx.lineWidth = 1.5;
    for (var k2 = 0; k2 < hi.pts.length; k2++) {
      var s2 = hi.pts[k2][0], e2 = k2 + 1 < hi.pts.length ? hi.pts[k2 + 1][0] : hi.t1;
      var o2 = hi.pts[k2][1];
      ctx.strokeRect(X(s2), Y(o2 + hi.size), Math.max(X(e2) - X(s2), 1), Y(o2) - Y(o2 + hi.size));
    }
    ctx.lineWidth = 1;
  }
  // moments: OOMs, dumps, marks, teardowns; the peak; the chosen moment
  D.moments.forEach(function (m) {
    var mx = X(m[0]); if (mx < PADL || mx > W) return;
    ctx.strokeStyle = MC[m[1]] || '#36c'; ctx.lineWidth = m[1] === 'o' ? 2 : 1;
    ctx.beginPath(); ctx.moveTo(mx, PADT); ctx.lineTo(mx, H - PADB); ctx.stroke();
  });
  ctx.lineWidth = 1;
  if (moment !== null) {
    ctx.strokeStyle = '#000'; ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(X(moment), PADT); ctx.lineTo(X(moment), H - PADB); ctx.stroke();
    ctx.setLineDash([]);
  }
  if (brush) {
    ctx.fillStyle = 'rgba(30,80,160,0.15)';
    ctx.fillRect(Math.min(brush[0], brush[1]), PADT, Math.abs(brush[1] - brush[0]), H - PADT - PADB);
  }
  ctx.restore();
  // x axis: step ticks (labelled sparsely) or time ticks
  ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.strokeStyle = '#bbb';
  var yAxis = H - PADB;
  ctx.beginPath(); ctx.moveTo(PADL, yAxis); ctx.lineTo(W, yAxis); ctx.stroke();
  if (mode === 'step') {
    var st = D.steps, lastLabel = -1e9;
    for (var i = 0; i < st.length; i++) {
      var sx = X(st[i][0]);
      if (sx < PADL || sx > W) continue;
      ctx.beginPath(); ctx.moveTo(sx, yAxis); ctx.lineTo(sx, yAxis + 4); ctx.stroke();
      if (sx - lastLabel > 46) { ctx.fillText(String(st[i][1]), sx, yAxis + 15); lastLabel = sx; }
    }
    ctx.fillText(D.stepKind === 'window' ? 'time window' : 'step', PADL + 20, H - 4);
  } else {
    for (var j = 0; j <= 6; j++) {
      var tx = PADL + (W - PADL - 4) * j / 6;
      ctx.fillText(secs(Tof(tx)), tx, yAxis + 15);
    }
  }
  // Dumps name their trigger under the axis, as far as there is room.
  var lastDump = -1e9;
  ctx.textAlign = 'left';
  D.moments.forEach(function (m) {
    var mx = X(m[0]); if (mx < PADL || mx > W) return;
    ctx.fillStyle = MC[m[1]] || '#36c';
    ctx.beginPath(); ctx.moveTo(mx, yAxis); ctx.lineTo(mx - 4, yAxis + 8); ctx.lineTo(mx + 4, yAxis + 8); ctx.fill();
    if (m[1] !== 'd' || mx - lastDump < 70) return;
    var tw = ctx.measureText(m[2]).width;  // at the right edge, the name goes left of its marker
    ctx.fillText(m[2], mx + 5 + tw > W ? mx - 5 - tw : mx + 5, H - 4);
    lastDump = mx;
  });
  ctx.textAlign = 'center';
  var px = X(D.peak[0]);
  if (px >= PADL && px <= W) { ctx.fillStyle = '#000'; ctx.fillText('peak', px, PADT + 10); }
  status.textContent = ' ' + (mode === 'step' ? stepAt(Tof(PADL)) + ' .. ' + stepAt(Tof(W))
                                              : secs(Tof(PADL)) + ' .. ' + secs(Tof(W)));
}

function bandAt(t, v) {
  for (var i = 0; i < B.length; i++) {
    var b = B[i];
    if (t < b.t0 || (t >= b.t1 && !b.live)) continue;
    var off = offsetAt(b, t);
    if (v >= off && v < off + b.size) return b;
  }
  return null;
}

function stackHtml(si) {
  var s = D.stacks[si], ol = el('ol', {start: '0'});
  s.l.forEach(function (line, k) { ol.appendChild(el('li', k === s.u ? {'class': 'user'} : {}, line)); });
  return ol;
}
function row(box, k, v) {
  var d = el('div'); d.appendChild(el('span', {'class': 'k'}, k + ': ')); d.appendChild(document.createTextNode(v));
  box.appendChild(d);
}
function showTip(b, t, v, mx, my) {
  tip.textContent = '';
  if (b) {
    var s = D.stacks[b.s];
    var head = el('div', {'class': 'ts-tip-head'});
    head.appendChild(el('b', {}, bytes(b.size)));
    head.appendChild(document.createTextNode(' ' + b.kind + ' (' + s.api + ') on ' +
      (b.dev < 0 ? 'host' : 'cuda:' + b.dev)));
    tip.appendChild(head);
    row(tip, 'allocated', stepAt(b.t0));
    row(tip, 'freed', b.live ? 'never (live at the end)' : stepAt(b.t1));
    if (s.v) row(tip, 'site', s.v);
    if (s.h) row(tip, 'held by', s.h);
    if (s.hint) row(tip, 'hint', s.hint);
    tip.appendChild(stackHtml(b.s));
  } else {
    var r = restAt(t);
    tip.appendChild(el('div', {}, 'aggregate of the smaller allocations: ' + bytes(r)));
    row(tip, 'at', stepAt(t));
  }
  placeTip(mx, my);
}
function placeTip(mx, my) {
  tip.style.display = 'block';
  var left = Math.min(mx + 14, TL.clientWidth - Math.min(640, tip.offsetWidth) - 4);
  tip.style.left = Math.max(0, left) + 'px'; tip.style.top = (my + 14) + 'px';
}
// The moment whose axis marker is nearest x, within a few pixels.
function momentNear(x) {
  var best = null, bd = 6;
  D.moments.forEach(function (m) { var d = Math.abs(X(m[0]) - x); if (d <= bd) { best = m; bd = d; } });
  return best;
}
function showMomentTip(m, mx, my) {
  tip.textContent = '';
  var head = el('b', {}, m[2]);
  head.style.color = MC[m[1]] || '#36c';
  tip.appendChild(head);
  row(tip, 'at', stepAt(m[0]));
  placeTip(mx, my);
}
function localXY(ev) { var r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }
function valueAt(y) { return (1 - (y - PADT) / (H - PADT - PADB)) * ymax; }

canvas.addEventListener('mousemove', function (ev) {
  var p = localXY(ev);
  if (brush) { brush[1] = p[0]; draw(); return; }
  if (pan) {
    var du = (p[0] - pan[0]) / (W - PADL - 4) * (pan[2] - pan[1]);
    view = [pan[1] - du, pan[2] - du]; draw(); return;
  }
  if (pinned || p[0] < PADL) return;
  if (p[1] > H - PADB) {  // on the axis: the moment marked there
    var m = momentNear(p[0]);
    if (m) showMomentTip(m, p[0], p[1]); else tip.style.display = 'none';
    if (hoverBand) { hoverBand = null; draw(); }
    return;
  }
  var t = Tof(p[0]), v = valueAt(p[1]);
  var b = bandAt(t, v);
  if (b !== hoverBand) { hoverBand = b; draw(); }
  if (b || (v >= bandTotal(t) && v < bandTotal(t) + restAt(t))) showTip(b, t, v, p[0], p[1]);
  else tip.style.display = 'none';
});
canvas.addEventListener('mouseleave', function () {
  if (!pinned) { tip.style.display = 'none'; hoverBand = null; draw(); }
});
canvas.addEventListener('mousedown', function (ev) {
  var p = localXY(ev);
  if (ev.shiftKey) pan = [p[0], view[0], view[1]];
  else brush = [p[0], p[0]];
  if (!pinned) { tip.style.display = 'none'; hoverBand = null; }
});
window.addEventListener('mouseup', function (ev) {
  if (pan) { pan = null; return; }
  if (!brush) return;
  var b = brush; brush = null;
  if (Math.abs(b[1] - b[0]) > 4) {
    var u0 = toU(Tof(Math.min(b[0], b[1]))), u1 = toU(Tof(Math.max(b[0], b[1])));
    if (u1 > u0) view = [u0, u1];
    draw(); return;
  }
  // a click: pin (or unpin) the band, and pick this moment
  var p = localXY(ev), t = Tof(p[0]);
  var hit = bandAt(t, valueAt(p[1]));
  if (pinned && (!hit || hit === pinned)) { pinned = null; tip.className = ''; tip.style.display = 'none'; }
  else if (hit) { pinned = hit; tip.className = 'pinned'; showTip(hit, t, 0, p[0], p[1]); }
  setMoment(t, 'clicked: ' + stepAt(t));
});
canvas.addEventListener('wheel', function (ev) {
  ev.preventDefault();
  var p = localXY(ev), u = toU(Tof(p[0])), f = ev.deltaY > 0 ? 1.25 : 0.8;
  view = [u - (u - view[0]) * f, u + (view[1] - u) * f]; draw();
}, {passive: false});
document.addEventListener('keydown', function (ev) {
  if (ev.key === 'Escape' && pinned) { pinned = null; tip.className = ''; tip.style.display = 'none'; draw(); }
});
function setMode(m) {
  mode = m; view = fullView();
  bStep.className = m === 'step' ? 'on' : ''; bTime.className = m === 'time' ? 'on' : '';
  draw();
}
bStep.addEventListener('click', function () { setMode('step'); });
bTime.addEventListener('click', function () { setMode('time'); });
bReset.addEventListener('click', function () { view = fullView(); draw(); });
window.addEventListener('resize', draw);

// ---- live memory at a moment: icicle of live bytes by stack ----
var LIVE = document.getElementById('ts-live');
var mbar = el('div', {'class': 'ts-bar', id: 'ts-moments'});
var mlabel = el('span', {id: 'ts-moment-label'});
var flame = el('div', {id: 'ts-flame'});
function siteAt(series, b) {
  var i = lowerBound(series.v, function (p) { return p[0]; }, b);
  return i < 0 ? 0 : series.v[i][1];
}
function setMoment(t, label) {
  moment = t;
  mlabel.textContent = ' ' + label;
  var b = Math.min(D.rest.length - 1, Math.floor(t / D.bucket));
  var root = {name: 'all live', bytes: 0, kids: {}, order: []};
  var exact = D.snapshots.filter(function (x) { return x.t === t; })[0], at = {};
  if (exact) exact.v.forEach(function (p) { at[p[0]] = p[1]; });
  D.sites.forEach(function (s, si) {
    var v = exact ? (at[si] || 0) : siteAt(s, b);
    if (v <= 0) return;
    var path = s.s < 0 ? ['(smaller sites)'] : D.stacks[s.s].p;
    var n = root; n.bytes += v;
    path.forEach(function (name) {
      if (!n.kids[name]) { n.kids[name] = {name: name, bytes: 0, kids: {}, order: []}; n.order.push(n.kids[name]); }
      n = n.kids[name]; n.bytes += v;
    });
  });
  flame.textContent = '';
  var depth = 0, wpx = flame.clientWidth || 1100;
  function lay(n, x, w, d) {
    depth = Math.max(depth, d + 1);
    var box = el('div', {title: n.name + ': ' + bytes(n.bytes) +
      (root.bytes ? ' (' + (100 * n.bytes / root.bytes).toFixed(1) + '%)' : '')}, n.name);
    box.style.left = (100 * x) + '%'; box.style.width = (100 * w) + '%'; box.style.top = (d * 18) + 'px';
    box.style.background = d === 0 ? '#ccc' : ['#f2a65a', '#eec170', '#e4843d', '#f7c59f', '#e9b872'][(n.name.length + d) % 5];
    flame.appendChild(box);
    var cx = x;
    n.order.sort(function (a, c) { return c.bytes - a.bytes; });
    n.order.forEach(function (k) {
      var kw = n.bytes ? w * k.bytes / n.bytes : 0;
      if (kw * wpx >= 2) lay(k, cx, kw, d + 1);
      cx += kw;
    });
  }
  if (root.bytes > 0) lay(root, 0, 1, 0);
  else flame.appendChild(el('p', {'class': 'note'}, 'Nothing live at this moment.'));
  flame.style.height = (Math.max(depth, 1) * 18 + 2) + 'px';
  mlabel.textContent += ': ' + bytes(root.bytes) + ' live' +
    (exact ? '' : ' (at the end of its ' + secs(D.bucket) + ' bucket)');
  draw();
}
if (LIVE) {
  function button(text, t, label) {
    var b = el('button', {}, text);
    b.addEventListener('click', function () { setMoment(t, label); });
    mbar.appendChild(b);
  }
  button('peak', D.peak[0], 'peak (' + bytes(D.peak[1]) + ') ' + stepAt(D.peak[0]));
  var nth = {o: 0, d: 0};
  D.moments.forEach(function (m) {
    if (m[1] === 'o') button('OOM ' + (++nth.o), m[0], m[2] + ', ' + stepAt(m[0]));
    if (m[1] === 'd') button('dump ' + (++nth.d), m[0], m[2] + ', ' + stepAt(m[0]));
  });
  button('end', span, 'end of the run');
  mbar.appendChild(mlabel);
  LIVE.appendChild(mbar); LIVE.appendChild(flame);
}

// ---- growth per site over steps, with the fitted slope ----
var GR = document.getElementById('ts-growth-chart');
if (GR && D.steps.length >= 2) {
  D.growth.forEach(function (g, gi) {
    var series = D.sites.filter(function (s) { return s.s >= 0 && D.stacks[s.s].g === gi; });
    if (!series.length) return;
    var pts = D.steps.map(function (st) {
      var b = Math.min(D.rest.length - 1, Math.floor(st[0] / D.bucket)), v = 0;
      series.forEach(function (s) { v += siteAt(s, b); });
      return [st[1], v];
    });
    var box = el('div', {'class': 'ts-growth'});
    var s0 = D.stacks[series[0].s];
    box.appendChild(el('div', {}, (s0.u >= 0 ? s0.l[s0.u] : s0.l[0] || s0.api) + ': ' +
      bytes(g.slope) + '/step fitted (r ' + g.r.toFixed(3) + ')'));
    var c = el('canvas', {});
    box.appendChild(c); GR.appendChild(box);
    var w = 360, h = 160, dpr = window.devicePixelRatio || 1, cx = c.getContext('2d');
    c.width = w * dpr; c.height = h * dpr; cx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var n0 = pts[0][0], n1 = pts[pts.length - 1][0], top = 1, mx = 0, my = 0;
    pts.forEach(function (p) { top = Math.max(top, p[1]); mx += p[0]; my += p[1]; });
    mx /= pts.length; my /= pts.length;
    var fit = function (n) { return my + g.slope * (n - mx); };
    top = Math.max(top, fit(n1)) * 1.1;
    var px = function (n) { return 50 + (n - n0) / Math.max(n1 - n0, 1) * (w - 60); };
    var py = function (v) { return 10 + (h - 30) * (1 - v / top); };
    cx.font = '10px system-ui'; cx.fillStyle = '#555'; cx.textAlign = 'right';
    cx.fillText(bytes(top / 1.1), 46, 14); cx.fillText('0', 46, h - 18);
    cx.textAlign = 'center'; cx.fillText(String(n0), 50, h - 4); cx.fillText(String(n1), w - 10, h - 4);
    cx.fillStyle = '#1f77b4';
    pts.forEach(function (p) { cx.fillRect(px(p[0]) - 1.5, py(p[1]) - 1.5, 3, 3); });
    cx.strokeStyle = '#d62728'; cx.lineWidth = 1.5; cx.beginPath();
    cx.moveTo(px(n0), py(fit(n0))); cx.lineTo(px(n1), py(fit(n1))); cx.stroke();
  });
}

setMode(mode);
if (LIVE) setMoment(D.peak[0], 'peak (' + bytes(D.peak[1]) + ') ' + stepAt(D.peak[0]));
// The middle of the piece of band i drawn around time t (page coordinates).
window.tsPoint = function (i, t) {
  var b = B[i], r = canvas.getBoundingClientRect();
  var k = Math.max(lowerBound(b.pts, function (p) { return p[0]; }, t), 0);
  var e = k + 1 < b.pts.length ? b.pts[k + 1][0] : b.t1;
  var x = Math.max(PADL, Math.min(W - 1, (X(b.pts[k][0]) + X(e)) / 2));
  return [r.left + x, r.top + Y(b.pts[k][1] + b.size / 2)];
};
// Page coordinates of moment i's marker under the axis; null when out of view.
window.tsMomentPoint = function (i) {
  var mx = X(D.moments[i][0]), r = canvas.getBoundingClientRect();
  return mx < PADL || mx > W ? null : [r.left + mx, r.top + H - PADB + 5];
};
window.tsReadyMs = performance.now();
window.tsReady = true;
})();
)js";

const char kHtmlRowsScript[] = R"js(
(function () {
'use strict';
Array.prototype.forEach.call(document.querySelectorAll('button[data-more]'), function (b) {
  b.addEventListener('click', function () {
    var rows = document.getElementById(b.getAttribute('data-more'));
    var table = b.parentNode.previousElementSibling;
    table.tBodies[table.tBodies.length - 1].appendChild(document.importNode(rows.content, true));
    b.parentNode.parentNode.removeChild(b.parentNode);
  });
});
})();
)js";

}  // namespace torchseal
