/* The closed-form curves redrawn in the browser as the K and alpha sliders move, from the tables
   the server sends once per setting of the other controls (specsight/explore/closed_form.py says
   what they hold). The figures are figures.py's batch_figure, k_figure and alpha_figure (their
   layouts come from it; the traces and lines are written again here): a browser test checks
   them against Python's, value for value. */
(function () {
    "use strict";

    function f64(b64) {
        const bin = atob(b64), bytes = new Uint8Array(bin.length);
        for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
        return new Float64Array(bytes.buffer);
    }

    const decoded = new WeakMap();        // the tables' arrays, decoded once per server answer
    function tables(d) {
        let t = decoded.get(d);
        if (!t) {
            t = {plain: f64(d.plain), spec: f64(d.spec), etok: f64(d.etok), nb: d.batches.length + 1,
                 na: d.alphas.length, memo: new Map()};
            decoded.set(d, t);
        }
        return t;
    }

    // NOTE: plotly.react redraws a trace from scratch when its x or y is a new array and only
    // restyles it when the array is the one it drew: each curve's arrays are kept by what they
    // depend on, so a K move leaves the other K's curves (and the K curve) as drawn
    function memo(t, key, make) {
        let v = t.memo.get(key);
        if (v === undefined) {
            v = make();
            t.memo.set(key, v);
        }
        return v;
    }

    // speedup at batch column bi (the chosen batch is the last), or null outside the tables
    function speedup(d, t, k, alpha, bi) {
        const ki = d.ks.indexOf(k), ai = d.alphas.indexOf(alpha);
        if (ki < 0 || ai < 0) return null;
        const si = d.spec_alpha_free ? 0 : ai;
        return t.etok[ki * t.na + ai] * t.plain[bi] / t.spec[(ki * (d.spec_alpha_free ? 1 : t.na) + si) * t.nb + bi];
    }

    function layout(d, name, title) {       // the figure's layout from figures.speedup_layout, titled
        const lay = JSON.parse(JSON.stringify(d.layouts[name]));
        lay.title.text = title;
        return lay;
    }

    function vline(lay, x, color, label) {          // figures._vline
        lay.shapes.push({type: "line", yref: "paper", y0: 0, y1: 1, xref: "x", x0: x, x1: x,
                         line: {color: color, width: 1.5, dash: "dash"}});
        if (label) {
            const at = lay.xaxis.type === "log" ? Math.log10(x) : x;
            lay.annotations.push({x: at, xref: "x", y: 1, yref: "paper", text: label, showarrow: false,
                                  xanchor: "right", yanchor: "top", font: {color: color, size: 11}});
        }
    }

    // {batch, k, alpha} figures for the slider values, or null where the tables do not hold them
    function figures(d, kIn, alphaIn) {
        const k = Number(kIn), A = Number(alphaIn);
        if (!Number.isInteger(k) || d.ks.indexOf(k) < 0) return null;
        if (d.alpha_by_k === null && !(A >= 0 && A < 1)) return null;
        const t = tables(d), last = t.nb - 1;
        const alphaOf = kk => (d.alpha_by_k === null ? A : d.alpha_by_k[String(kk)]);
        const alpha = alphaOf(k);
        const label = d.alpha_by_k === null ? alpha.toFixed(2) : d.alpha_label_by_k[String(k)];
        const ks = Array.from(new Set(d.k_axis.concat([k]))).sort((a, b) => a - b);

        const ksKey = ks.join(",");
        const xKs = memo(t, "ks|" + ksKey, () => ks);
        const batchData = [];
        for (let i = 0; i < ks.length; i++) {
            const kk = ks[i], a = alphaOf(kk);
            const y = memo(t, "batch|" + kk + "|" + a, () => {
                const ys = [];
                for (let bi = 0; bi < last; bi++) ys.push(speedup(d, t, kk, a, bi));
                return ys.includes(null) ? null : ys;
            });
            if (y === null) return null;
            const bold = kk === k;
            batchData.push({type: "scatter", mode: "lines", name: "K=" + kk, x: d.batches, y: y,
                            line: {width: bold ? 3.5 : 1.2, color: d.k_colors[i % d.k_colors.length]},
                            opacity: bold ? 1.0 : 0.5});
        }
        const atPoint = speedup(d, t, k, alpha, last);
        const byK = memo(t, "k|" + ksKey + "|" + (d.alpha_by_k === null ? A : ""),
                         () => ks.map(kk => speedup(d, t, kk, alphaOf(kk), last)));
        const byAlpha = memo(t, "alpha|" + k, () => d.alpha_axis.map(a => speedup(d, t, k, a, last)));
        if (atPoint === null || byK.includes(null) || byAlpha.includes(null)) return null;

        const lb = layout(d, "batch", "analytic speedup vs batch (alpha " + label + " at K=" + k + ")");
        const kv = d.kv_limit[d.ks.indexOf(k)];
        if (kv !== null) vline(lb, kv, "#d62728", "KV memory limit");
        batchData.push({type: "scatter", mode: "markers", name: "this batch", x: [d.batch], y: [atPoint],
                        marker: {size: 11, color: "black", symbol: "diamond"}});

        const lk = layout(d, "k", "analytic speedup vs K at batch " + d.batch_label);
        vline(lk, k, "black", null);
        const la = layout(d, "alpha", "analytic speedup vs alpha at batch " + d.batch_label + ", K=" + k);
        vline(la, alpha, "black", null);
        return {batch: {data: batchData, layout: lb},
                k: {data: [{type: "scatter", mode: "lines+markers", name: "speedup", x: xKs, y: byK}], layout: lk},
                alpha: {data: [{type: "scatter", mode: "lines", name: "speedup", x: d.alpha_axis,
                                y: byAlpha}], layout: la}};
    }

    // the clientside callback: the three figures, or (outside the tables) a request to the server
    function redraw(d, k, alpha) {
        const no = window.dash_clientside.no_update;
        if (!d) return [no, no, no, no];
        const f = figures(d, k, alpha);
        if (f === null) return [no, no, no, {k: k, alpha: alpha, at: Date.now()}];
        return [f.batch, f.k, f.alpha, no];
    }

    window.dash_clientside = Object.assign({}, window.dash_clientside,
                                           {specsight: {redraw: redraw, figures: figures}});
})();
