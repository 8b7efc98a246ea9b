/* svg.c - the timeline and frontier pictures (svg.h), and bytes for people.
 *
 * Both charts share the frame: a white page, a title, round ticks (1, 2,
 * 2.5 or 5 times a power of ten) in a unit chosen from the largest value,
 * and a legend on a white box.  Text from outside is escaped on the way in
 * (esc below); everything else written is numbers and literals. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rematx/dynbuf.h"
#include "rematx/svg.h"

const char *rematx_plan_label(enum remat_algorithm a)
{
    return a == REMAT_ALG_MIN_PEAK ? "min-peak (single-level)" : remat_algorithm_name(a);
}

char *rematx_human_bytes(int64_t bytes, char *out)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int neg = bytes < 0;
    double v = neg ? -(double)bytes : (double)bytes;
    int u = 0;
    while (v >= 1023.995 && u < 6) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, REMATX_HUMAN_MAX, "%s%.0f B", neg ? "-" : "", v);
    else
        snprintf(out, REMATX_HUMAN_MAX, "%s%.*f %s", neg ? "-" : "",
                 v < 9.995   ? 2
                 : v < 99.95 ? 1
                             : 0,
                 v, unit[u]);
    return out;
}

/* Appends to b; a failure is sticky (dynbuf.h) and seen once, at the end. */
static void put(struct rematx_dynbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct rematx_dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rematx_dyn_vaddf(b, fmt, ap);
    va_end(ap);
}

/* Appends s as XML character data, at most about max bytes of it (then
 * "…", never cutting a UTF-8 sequence): markup characters as entities, and
 * the control characters XML 1.0 does not allow as '?'. */
static void esc(struct rematx_dynbuf *b, const char *s, size_t max)
{
    size_t i = 0;
    if (s == NULL)
        return;
    for (; s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= max && (c & 0xc0) != 0x80)
            break;
        switch (c) {
        case '&':
            rematx_dyn_add(b, "&amp;");
            break;
        case '<':
            rematx_dyn_add(b, "&lt;");
            break;
        case '>':
            rematx_dyn_add(b, "&gt;");
            break;
        case '"':
            rematx_dyn_add(b, "&quot;");
            break;
        default:
            rematx_dyn_addn(b, c < 0x20 || c == 0x7f ? "?" : &s[i], 1);
        }
    }
    if (s[i] != '\0')
        rematx_dyn_add(b, "\xe2\x80\xa6");
}

/* A step of 1, 2, 2.5 or 5 times a power of ten giving about n ticks. */
static double nice_step(double range, int n)
{
    double raw = range / n;
    if (!(raw > 0))
        return 1;
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    double s = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
    return s * p;
}

/* The binary unit that shows max_bytes with a few digits. */
static double byte_unit(double max_bytes, const char **name)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double u = 1;
    int i = 0;
    while (max_bytes >= 1024 * u && i < 5) {
        u *= 1024;
        i++;
    }
    *name = names[i];
    return u;
}

static void head(struct rematx_dynbuf *b, int w, int h, int x, const char *title)
{
    put(b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
        "%d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
        w, h, w, h, x);
    esc(b, title, 200);
    put(b, "</text>\n");
}

/* ------------------------------------------------------------------------
 * The timeline
 */

#define TW 900
#define TH 540
#define TML 90
#define TMR 30
#define TMT 56
#define TMB 112

enum band { BAND_FORWARD, BAND_BACKWARD, BAND_RECOMPUTE };

static size_t loss_index(const struct remat_op *ops, size_t n)
{
    for (size_t k = 0; ops != NULL && k < n; k++)
        if (ops[k].kind == REMAT_OP_LOSS)
            return k;
    return n;
}

/* Where op k of a series sits on the axis of the first series (a0 ops, the
 * loss at l0): forwards onto forwards and backwards onto backwards when
 * both have a loss, else stretched end to end. */
struct xmap {
    double a_last, a_loss, s_last, s_loss;
    int piecewise;
};

static struct xmap xmap_of(const struct rematx_svg_series *axis, const struct rematx_svg_series *s)
{
    struct xmap m;
    m.a_last = axis->n > 1 ? (double)(axis->n - 1) : 1;
    m.s_last = s->n > 1 ? (double)(s->n - 1) : 1;
    size_t la = loss_index(axis->ops, axis->n), ls = loss_index(s->ops, s->n);
    m.a_loss = (double)la;
    m.s_loss = (double)ls;
    m.piecewise = la > 0 && la + 1 < axis->n && ls > 0 && ls + 1 < s->n && s != axis;
    return m;
}

static double xmap_at(const struct xmap *m, double k)
{
    if (!m->piecewise)
        return k / m->s_last * m->a_last;
    if (k <= m->s_loss)
        return k / m->s_loss * m->a_loss;
    return m->a_loss + (k - m->s_loss) / (m->s_last - m->s_loss) * (m->a_last - m->a_loss);
}

static enum band band_of(const struct remat_op *ops, size_t k, size_t loss)
{
    if (k <= loss)
        return BAND_FORWARD;
    return ops[k].kind == REMAT_OP_B ? BAND_BACKWARD : BAND_RECOMPUTE;
}

static const char *const band_fill[] = {"#eaf2fb", "#fdf1e3", "#f6dede"};
static const char *const band_name[] = {"forward", "backward", "recompute"};

char *rematx_svg_timeline(const char *title, const struct remat_profile *profile,
                          const struct rematx_svg_series *s, size_t n_series, size_t *len)
{
    int64_t max_b = 1;
    for (size_t i = 0; i < n_series; i++) {
        if (s[i].peak_bytes > max_b)
            max_b = s[i].peak_bytes;
        for (size_t k = 0; k < s[i].n; k++)
            if (s[i].bytes[k] > max_b)
                max_b = s[i].bytes[k];
    }
    const char *uname;
    double unit = byte_unit((double)max_b, &uname);
    double ystep = nice_step((double)max_b / unit, 5);
    double ymax = ceil((double)max_b / unit / ystep) * ystep * 1.0001;
    if (!(ymax > 0))
        ymax = ystep;
    const struct rematx_svg_series *axis = n_series > 0 ? &s[0] : NULL;
    double xmax = axis != NULL && axis->n > 1 ? (double)(axis->n - 1) : 1;
    const struct remat_op *ops = axis != NULL ? axis->ops : NULL;
    size_t n_ops = ops != NULL ? axis->n : 0, loss = loss_index(ops, n_ops);
    const double pw = TW - TML - TMR, ph = TH - TMT - TMB, base = TMT + ph;
#define X(v) (TML + (v) / xmax * pw)
#define Y(v) (TMT + ph - (v) / unit / ymax * ph)

    struct rematx_dynbuf b;
    rematx_dyn_init(&b, REMATX_SVG_MAX);
    rematx_dyn_grow(&b, 16384);
    head(&b, TW, TH, TML, title);
    /* Phase bands: one pixel column at a time takes the band of the op
     * under its middle, and runs of one band are one rectangle, so a
     * million ops make at most a few hundred. */
    if (n_ops > 0) {
        int start = 0;
        enum band cur = band_of(ops, 0, loss);
        for (int c = 1; c <= (int)pw; c++) {
            enum band bc = cur;
            if (c < (int)pw) {
                size_t k = (size_t)llround((c + 0.5) / pw * xmax);
                bc = band_of(ops, k < n_ops ? k : n_ops - 1, loss);
            }
            if (c == (int)pw || bc != cur) {
                put(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%.0f\" fill=\"%s\"/>\n",
                    TML + start, TMT, c - start, ph, band_fill[cur]);
                start = c;
                cur = bc;
            }
        }
    }
    /* Grid and y ticks. */
    for (double v = 0; v <= ymax + 1e-9; v += ystep) {
        double y = TMT + ph - v / ymax * ph;
        put(&b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#d8d8d8\"/>\n"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
            "dominant-baseline=\"middle\">%g</text>\n",
            TML, y, TW - TMR, y, TML - 8, y, v);
    }
    if (n_ops > 0) {
        /* The x axis by stage: a tick per op while they fit, else about
         * 30, each labelled with its stage's name and its op. */
        size_t every = n_ops / 30 + 1;
        for (size_t k = 0; k < n_ops; k += every) {
            double x = X((double)k);
            uint32_t st = ops[k].stage;
            const char *name = profile != NULL && st >= 1 && st <= profile->n_stages
                                   ? profile->stages[st - 1].name
                                   : NULL;
            put(&b,
                "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#555\"/>\n"
                "<text transform=\"translate(%.1f %.0f) rotate(-40)\" text-anchor=\"end\" "
                "font-size=\"10\">",
                x, base, x, base + 4, x + 3, base + 14);
            if (ops[k].kind == REMAT_OP_LOSS)
                put(&b, "loss");
            else if (name != NULL && name[0] != '\0')
                esc(&b, name, 14);
            else
                put(&b, "stage %u", (unsigned)st);
            put(&b, " %s</text>\n",
                ops[k].kind == REMAT_OP_B      ? "B"
                : ops[k].kind == REMAT_OP_LOSS ? ""
                                               : "F");
        }
        if (loss < n_ops)
            put(&b,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#888\" "
                "stroke-dasharray=\"2 3\"/>\n",
                X((double)loss), TMT, X((double)loss), base);
    } else {
        double xstep = ceil(nice_step(xmax, 8));
        for (double v = 0; v <= xmax + 1e-9; v += xstep)
            put(&b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", X(v),
                base + 18, v);
    }
    put(&b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.0f\" stroke=\"black\"/>\n"
        "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"black\"/>\n"
        "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n"
        "<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">live memory "
        "(%s)</text>\n",
        TML, TMT, TML, base, TML, base, TW - TMR, base, TML + pw / 2, TH - 12,
        n_ops > 0 ? "op, by stage (F forward or recompute, B backward), in the order they run"
                  : "phase index (forward, then backward and recomputation)",
        TMT + ph / 2, uname);
    /* Series: polylines, thinned to at most four points per pixel column
     * (first, min, max, last) so a million-op chart stays small. */
    for (size_t i = 0; i < n_series; i++) {
        struct xmap m = xmap_of(axis, &s[i]);
        put(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
            s[i].measured ? "black" : s[i].color,
            i == 0          ? "2.2"
            : s[i].measured ? "1.2"
                            : "1.4",
            s[i].measured ? " stroke-dasharray=\"3 2\"" : "");
        size_t per = s[i].n / (size_t)pw + 1;
        for (size_t k = 0; k < s[i].n; k += per) {
            size_t e = k + per < s[i].n ? k + per : s[i].n;
            int64_t lo = s[i].bytes[k], hi = s[i].bytes[k];
            for (size_t j = k; j < e; j++) {
                if (s[i].bytes[j] < lo)
                    lo = s[i].bytes[j];
                if (s[i].bytes[j] > hi)
                    hi = s[i].bytes[j];
            }
            double xk = X(xmap_at(&m, (double)k)), xe = X(xmap_at(&m, (double)(e - 1)));
            put(&b, "%.1f,%.1f ", xk, Y((double)s[i].bytes[k]));
            if (per > 1)
                put(&b, "%.1f,%.1f %.1f,%.1f %.1f,%.1f ", xk, Y((double)hi), xk, Y((double)lo), xe,
                    Y((double)s[i].bytes[e - 1]));
        }
        put(&b, "\"/>\n");
        put(&b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-dasharray=\"6 4\" stroke-opacity=\"0.7\"/>\n",
            TML, Y((double)s[i].peak_bytes), TW - TMR, Y((double)s[i].peak_bytes),
            s[i].measured ? "black" : s[i].color);
    }
    /* Legend, top right inside the plot, on a white box. */
    int lx = TW - TMR - 330, ly = TMT + 8, rows = (int)n_series + 1 + (n_ops > 0);
    put(&b,
        "<rect x=\"%d\" y=\"%d\" width=\"322\" height=\"%d\" fill=\"white\" fill-opacity=\"0.9\" "
        "stroke=\"#999\"/>\n",
        lx, ly, 22 * rows + 8);
    for (size_t i = 0; i < n_series; i++) {
        int y = ly + 16 + (int)(22 * i);
        char h[REMATX_HUMAN_MAX];
        put(&b,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n"
            "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">",
            lx + 10, y, lx + 40, y, s[i].measured ? "black" : s[i].color,
            s[i].measured ? " stroke-dasharray=\"3 2\"" : "", lx + 48, y);
        esc(&b, s[i].label, 40);
        put(&b, ": peak %s</text>\n", rematx_human_bytes(s[i].peak_bytes, h));
    }
    int y = ly + 16 + (int)(22 * n_series);
    put(&b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n"
        "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">peak during an op</text>\n",
        lx + 10, y, lx + 40, y, lx + 48, y);
    if (n_ops > 0) {
        y += 22;
        for (int k = 0; k < 3; k++)
            put(&b,
                "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\" stroke=\"#bbb\"/>\n"
                "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%s</text>\n",
                lx + 10 + 100 * k, y - 6, band_fill[k], lx + 28 + 100 * k, y, band_name[k]);
    }
    put(&b, "</svg>\n");
#undef X
#undef Y
    return rematx_dyn_take(&b, len); /* NULL after any failure */
}

/* ------------------------------------------------------------------------
 * The frontier
 */

#define FW 900
#define FH 560
#define FML 90
#define FMR 40
#define FMT 56
#define FMB 64

struct mark {
    const char *label;
    const char *color;
    int64_t peak_bytes;
    double ms;
};

static int solve_mark(const struct remat_profile *p, enum remat_algorithm alg, struct mark *mk,
                      struct remat_error *err)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = alg;
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = remat_solve(p, &o, &plan, err);
    if (rc == REMAT_OK) {
        mk->peak_bytes = plan.peak_bytes;
        mk->ms = plan.total_ms;
    }
    remat_plan_clear(&plan);
    return rc;
}

/* Step time in ms or s, whichever keeps the numbers short. */
static void human_ms(double ms, char *out, size_t size)
{
    if (ms >= 10000)
        snprintf(out, size, "%.3g s", ms / 1000);
    else
        snprintf(out, size, "%.3g ms", ms);
}

char *rematx_svg_frontier(const char *title, const struct remat_profile *profile,
                          const struct remat_frontier *f, const struct rematx_svg_measured *m,
                          size_t n_measured, size_t *len, struct remat_error *err)
{
    struct mark marks[3] = {
        {"store-all", "#1f77b4", 0, 0}, {"sqrt(n)", "#2ca02c", 0, 0}, {NULL, "#d62728", 0, 0}};
    static const enum remat_algorithm algs[3] = {REMAT_ALG_STORE_ALL, REMAT_ALG_SQRT,
                                                 REMAT_ALG_MIN_PEAK};
    marks[2].label = rematx_plan_label(REMAT_ALG_MIN_PEAK);
    for (int i = 0; i < 3; i++) {
        int rc = solve_mark(profile, algs[i], &marks[i], err);
        if (rc != REMAT_OK)
            return NULL;
    }
    /* The ranges: every point, mark and measurement is inside. */
    double tmin = INFINITY, tmax = 0;
    int64_t bmax = 1, bmin = INT64_MAX;
#define SEE(t, bytes)                                                                              \
    do {                                                                                           \
        if ((t) >= 0 && (t) < tmin)                                                                \
            tmin = (t);                                                                            \
        if ((t) > tmax)                                                                            \
            tmax = (t);                                                                            \
        if ((bytes) > bmax)                                                                        \
            bmax = (bytes);                                                                        \
        if ((bytes) < bmin)                                                                        \
            bmin = (bytes);                                                                        \
    } while (0)
    for (size_t i = 0; i < f->n_points; i++)
        SEE(f->points[i].total_ms, f->points[i].peak_bytes);
    for (int i = 0; i < 3; i++)
        SEE(marks[i].ms, marks[i].peak_bytes);
    for (size_t i = 0; i < n_measured; i++) {
        SEE(m[i].step_ms, m[i].measured_peak_bytes);
        SEE(m[i].predicted_ms, m[i].predicted_peak_bytes);
    }
#undef SEE
    if (!isfinite(tmin))
        tmin = 0;
    const char *ms_name = tmax >= 10000 ? "s" : "ms";
    double tu = tmax >= 10000 ? 1000 : 1;
    double span = (tmax - tmin) / tu;
    if (!(span > 0))
        span = tmax > 0 ? tmax / tu * 0.1 : 1;
    double xstep = nice_step(span, 7);
    double x0 = floor((tmin / tu - 0.05 * span) / xstep) * xstep;
    if (x0 < 0)
        x0 = 0;
    double x1 = ceil((tmax / tu + 0.05 * span) / xstep) * xstep;
    if (!(x1 > x0))
        x1 = x0 + xstep;
    /* Memory from a round value below the least peak, not from zero: the
     * plans differ by a fraction of the peak, and the axis says where it
     * starts. */
    if (bmin > bmax)
        bmin = 0;
    const char *uname;
    double unit = byte_unit((double)bmax, &uname);
    double bspan = (double)(bmax - bmin) / unit;
    if (!(bspan > 0))
        bspan = (double)bmax / unit * 0.1 + 1e-9;
    double ystep = nice_step(bspan, 6);
    double y0 = floor(((double)bmin / unit - 0.08 * bspan) / ystep) * ystep;
    if (y0 < 0)
        y0 = 0;
    double ymax = ceil(((double)bmax / unit + 0.12 * bspan) / ystep) * ystep;
    if (!(ymax > y0))
        ymax = y0 + ystep;
    const double pw = FW - FML - FMR, ph = FH - FMT - FMB, base = FMT + ph;
#define X(ms) (FML + ((ms) / tu - x0) / (x1 - x0) * pw)
#define Y(v) (FMT + ph - ((double)(v) / unit - y0) / (ymax - y0) * ph)

    struct rematx_dynbuf b;
    rematx_dyn_init(&b, REMATX_SVG_MAX);
    rematx_dyn_grow(&b, 16384);
    head(&b, FW, FH, FML, title);
    for (double v = y0; v <= ymax + 1e-9 * (ymax - y0); v += ystep)
        put(&b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
            "dominant-baseline=\"middle\">%g</text>\n",
            FML, Y(v * unit), FW - FMR, Y(v * unit), FML - 8, Y(v * unit), v);
    for (double v = x0; v <= x1 + 1e-9 * (x1 - x0); v += xstep)
        put(&b,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#f0f0f0\"/>\n"
            "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n",
            X(v * tu), FMT, X(v * tu), base, X(v * tu), base + 18, v);
    put(&b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.0f\" stroke=\"black\"/>\n"
        "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"black\"/>\n"
        "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">step time (%s): forward, "
        "recomputation and backward; predicted, or measured (validation runs)</text>\n"
        "<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">peak memory "
        "(%s)</text>\n",
        FML, FMT, FML, base, FML, base, FW - FMR, base, FML + pw / 2, FH - 14, ms_name,
        FMT + ph / 2, uname);
    /* The frontier: a staircase (a budget between two points buys the
     * time of the lower one), then a dot per point. */
    if (f->n_points > 0) {
        put(&b, "<polyline fill=\"none\" stroke=\"#7f7f7f\" stroke-width=\"1.5\" points=\"");
        for (size_t i = 0; i < f->n_points; i++) {
            if (i > 0)
                put(&b, "%.1f,%.1f ", X(f->points[i - 1].total_ms), Y(f->points[i].peak_bytes));
            put(&b, "%.1f,%.1f ", X(f->points[i].total_ms), Y(f->points[i].peak_bytes));
        }
        put(&b, "\"/>\n");
        for (size_t i = 0; i < f->n_points; i++)
            put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#444\"/>\n",
                X(f->points[i].total_ms), Y(f->points[i].peak_bytes));
    }
    /* The three named plans, each labelled with its peak and time; labels
     * sit at different heights so that close marks stay readable. */
    for (int i = 0; i < 3; i++) {
        double x = X(marks[i].ms), y = Y(marks[i].peak_bytes);
        char h[REMATX_HUMAN_MAX], t[32];
        rematx_human_bytes(marks[i].peak_bytes, h);
        human_ms(marks[i].ms, t, sizeof t);
        if (i == 0)
            put(&b,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"11\" height=\"11\" fill=\"none\" "
                "stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                x - 5.5, y - 5.5, marks[i].color);
        else if (i == 1)
            put(&b,
                "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"none\" "
                "stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                x, y - 8, x + 8, y, x, y + 8, x - 8, y, marks[i].color);
        else
            put(&b,
                "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"none\" stroke=\"%s\" "
                "stroke-width=\"2.5\"/>\n",
                x, y - 8, x + 7.5, y + 6, x - 7.5, y + 6, marks[i].color);
        /* Right of the mark, unless that runs off the plot. */
        int left = x > FML + pw - 300;
        put(&b,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"%s\" stroke=\"white\" "
            "stroke-width=\"4\" paint-order=\"stroke\" font-weight=\"bold\">%s: %s, %s</text>\n",
            left ? x - 12 : x + 12, y + (i == 2 ? 20 : -12), left ? "end" : "start", marks[i].color,
            marks[i].label, h, t);
    }
    /* Measured runs: a cross at the measurement, joined to the plan's
     * prediction by a dotted line. */
    for (size_t i = 0; i < n_measured; i++) {
        double ms = m[i].step_ms >= 0 ? m[i].step_ms : m[i].predicted_ms;
        double x = X(ms), y = Y(m[i].measured_peak_bytes);
        put(&b,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#9467bd\" "
            "stroke-dasharray=\"2 2\"/>\n"
            "<path d=\"M%.1f %.1fl10 10m0 -10l-10 10\" stroke=\"#9467bd\" stroke-width=\"2.5\"/>\n",
            X(m[i].predicted_ms), Y(m[i].predicted_peak_bytes), x, y, x - 5, y - 5);
        if (n_measured <= 8 && m[i].label != NULL) {
            put(&b,
                "<text x=\"%.1f\" y=\"%.1f\" fill=\"#9467bd\" stroke=\"white\" "
                "stroke-width=\"3\" paint-order=\"stroke\" font-size=\"10\">",
                x + 8, y - 8);
            esc(&b, m[i].label, 24);
            put(&b, "</text>\n");
        }
    }
    /* Legend, top right.  It says what min-peak is the least of: the
     * frontier's multi-level plans can sit below its mark. */
    int lx = FML + (int)pw - 388, ly = FMT + 8;
    put(&b,
        "<rect x=\"%d\" y=\"%d\" width=\"380\" height=\"%d\" fill=\"white\" fill-opacity=\"0.9\" "
        "stroke=\"#999\"/>\n"
        "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"#444\"/>\n"
        "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">frontier: %zu plans, least time "
        "per peak (multi-level)</text>\n"
        "<polygon points=\"%d,%d %.1f,%d %.1f,%d\" fill=\"none\" stroke=\"%s\" "
        "stroke-width=\"2\"/>\n"
        "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">min-peak: least peak of "
        "single-level plans</text>\n"
        "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">(each stage recomputed at most "
        "once)</text>\n",
        lx, ly, n_measured > 0 ? 98 : 76, lx + 16, ly + 16, lx + 30, ly + 16, f->n_points, lx + 16,
        ly + 32, lx + 21.5, ly + 43, lx + 10.5, ly + 43, marks[2].color, lx + 30, ly + 38, lx + 30,
        ly + 58);
    if (n_measured > 0)
        put(&b,
            "<path d=\"M%d %dl10 10m0 -10l-10 10\" stroke=\"#9467bd\" stroke-width=\"2.5\"/>\n"
            "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">measured: %zu validation "
            "run%s</text>\n",
            lx + 11, ly + 77, lx + 30, ly + 82, n_measured, n_measured == 1 ? "" : "s");
    put(&b, "</svg>\n");
#undef X
#undef Y
    char *out = rematx_dyn_take(&b, len);
    if (out == NULL && err != NULL) {
        memset(err, 0, sizeof *err);
        err->code = REMAT_ENOMEM;
        snprintf(err->message, sizeof err->message, "out of memory drawing the frontier");
    }
    return out;
}
