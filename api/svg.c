/* svg.c - the memory timeline as an SVG line chart: one polyline per plan
 * (bytes live after each phase), a dashed line at each plan's peak (the
 * peak happens during a phase, so it can sit above the line), axes in MiB
 * or GiB with round ticks, and a legend. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rematd.h"

/* An SVG is at most a few hundred kilobytes: each series is thinned to
 * four points per pixel column below. */
#define MAX_SVG ((size_t)16 << 20)

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

/* A step of 1, 2, 2.5 or 5 times a power of ten giving about n ticks. */
static double nice_step(double range, int n)
{
    double raw = range / n;
    if (raw <= 0)
        return 1;
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    double s = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
    return s * p;
}

#define W 900
#define H 500
#define ML 90
#define MR 30
#define MT 56
#define MB 64

char *rematd_svg_timeline(const char *title, const struct rematd_series *s, size_t n_series,
                          size_t *len)
{
    size_t max_n = 1;
    int64_t max_b = 1;
    for (size_t i = 0; i < n_series; i++) {
        if (s[i].n > max_n)
            max_n = s[i].n;
        if (s[i].peak_bytes > max_b)
            max_b = s[i].peak_bytes;
        for (size_t k = 0; k < s[i].n; k++)
            if (s[i].bytes[k] > max_b)
                max_b = s[i].bytes[k];
    }
    const double GiB = 1024.0 * 1024 * 1024, MiB = 1024.0 * 1024;
    double unit = max_b >= GiB ? GiB : MiB;
    const char *uname = max_b >= GiB ? "GiB" : "MiB";
    double ystep = nice_step(max_b / unit, 5);
    double ymax = ceil(max_b / unit / ystep) * ystep * 1.0001;
    if (ymax <= 0)
        ymax = ystep;
    double xmax = (double)(max_n > 1 ? max_n - 1 : 1);
    /* Phases are whole numbers: a step of 2.5 would label phases that do
     * not exist, so round it to a whole step. */
    double xstep = ceil(nice_step(xmax, 8));
    if (xstep < 1)
        xstep = 1;
    const double pw = W - ML - MR, ph = H - MT - MB;
#define X(v) (ML + (v) / xmax * pw)
#define Y(v) (MT + ph - (v) / unit / ymax * ph)

    struct rematx_dynbuf b;
    rematx_dyn_init(&b, MAX_SVG);
    rematx_dyn_grow(&b, 16384);
    put(&b,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
        "%d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
        W, H, W, H, ML, title);
    /* Grid and y ticks. */
    for (double v = 0; v <= ymax + 1e-9; v += ystep) {
        double y = MT + ph - v / ymax * ph;
        put(&b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
            "dominant-baseline=\"middle\">%g</text>\n",
            ML, y, W - MR, y, ML - 8, y, v);
    }
    for (double v = 0; v <= xmax + 1e-9; v += xstep) {
        double x = ML + v / xmax * pw;
        put(&b,
            "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#f0f0f0\"/>\n"
            "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
            x, MT, x, (int)(MT + ph), x, (int)(MT + ph + 18), v);
    }
    put(&b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
        "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">phase index (forward, then backward "
        "and recomputation)</text>\n"
        "<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">live memory "
        "(%s)</text>\n",
        ML, MT, ML, (int)(MT + ph), ML, (int)(MT + ph), W - MR, (int)(MT + ph), ML + pw / 2, H - 14,
        MT + ph / 2, uname);
    /* Series: polylines, thinned to at most four points per pixel column
     * (first, min, max, last) so a million-phase chart stays small. */
    for (size_t i = 0; i < n_series; i++) {
        put(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", s[i].color,
            i == 0 ? "2.2" : "1.4");
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
            put(&b, "%.1f,%.1f ", X((double)k), Y((double)s[i].bytes[k]));
            if (per > 1)
                put(&b, "%.1f,%.1f %.1f,%.1f %.1f,%.1f ", X((double)k), Y((double)hi), X((double)k),
                    Y((double)lo), X((double)(e - 1)), Y((double)s[i].bytes[e - 1]));
        }
        put(&b, "\"/>\n");
        put(&b,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 "
            "4\" "
            "stroke-opacity=\"0.7\"/>\n",
            ML, Y((double)s[i].peak_bytes), W - MR, Y((double)s[i].peak_bytes), s[i].color);
    }
    /* Legend, top right inside the plot, on a white box. */
    int lx = W - MR - 300, ly = MT + 8;
    put(&b,
        "<rect x=\"%d\" y=\"%d\" width=\"292\" height=\"%d\" fill=\"white\" fill-opacity=\"0.9\" "
        "stroke=\"#999\"/>\n",
        lx, ly, (int)(22 * n_series + 24));
    for (size_t i = 0; i < n_series; i++) {
        int y = ly + 16 + (int)(22 * i);
        /* Each peak in its own unit: 205 MiB reads better than 0.2 GiB. */
        int gib = s[i].peak_bytes >= GiB;
        put(&b,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n"
            "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%s: peak %.3g %s</text>\n",
            lx + 10, y, lx + 40, y, s[i].color, lx + 48, y, s[i].label,
            s[i].peak_bytes / (gib ? GiB : MiB), gib ? "GiB" : "MiB");
    }
    int y = ly + 16 + (int)(22 * n_series);
    put(&b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"6 4\"/>\n"
        "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">peak during a phase</text>\n",
        lx + 10, y, lx + 40, y, lx + 48, y);
    put(&b, "</svg>\n");
#undef X
#undef Y
    return rematx_dyn_take(&b, len); /* NULL after any failure */
}
