/* codec_cmd.c: `pipezip codec` (see codec_cmd.h). */
#include "runtime/cli/codec_cmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "compress/core/npy.h"
#include "base/clock.h"
#include "base/io/file.h"
#include "base/isa.h"
#include "base/mem.h"

/* Prints "pipezip codec: error: MSG", indenting continuation lines so that a
 * caret line still points under the spec it refers to. */
static int fail(void) {
    static const char prefix[] = "pipezip codec: error: ";
    const char *m = pz_last_error();
    fputs(prefix, stderr);
    for (; *m; m++) {
        fputc(*m, stderr);
        if (*m == '\n') fprintf(stderr, "%*s", (int)(sizeof prefix - 1), "");
    }
    fputc('\n', stderr);
    return 1;
}

/* Prefixes the recorded error with the file it is about. */
static pz_status fail_with_path(pz_status st, const char *path) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pz_last_error());
    return pz_fail(st, "%s: %s", path, msg);
}

static pz_status parse_shape(const char *s, pz_shape *shape) {
    memset(shape, 0, sizeof *shape);
    const char *p = s;
    while (*p) {
        if (shape->ndim >= PZ_MAX_DIMS)
            return pz_fail(PZ_ERR_ARG, "--shape '%s': more than %d dims", s, PZ_MAX_DIMS);
        char *end;
        if (*p < '0' || *p > '9') return pz_fail(PZ_ERR_ARG, "--shape '%s': dims are positive integers separated by ','", s);
        unsigned long long v = strtoull(p, &end, 10);
        if (v == 0 || v > (1ull << 40)) return pz_fail(PZ_ERR_ARG, "--shape '%s': dim %llu out of range", s, v);
        shape->dims[shape->ndim++] = (int64_t)v;
        p = end;
        if (*p == ',') {
            p++;
            if (!*p) return pz_fail(PZ_ERR_ARG, "--shape '%s': trailing ','", s);
        } else if (*p) {
            return pz_fail(PZ_ERR_ARG, "--shape '%s': dims are positive integers separated by ','", s);
        }
    }
    if (shape->ndim == 0) return pz_fail(PZ_ERR_ARG, "--shape is empty");
    if (!pz_shape_numel(shape)) return pz_fail(PZ_ERR_ARG, "--shape '%s': more than 2^40 elements", s);
    return PZ_OK;
}

static pz_status read_input(const pz_codec_cmd_opts *o, pz_shape *shape, float **x) {
    if (!o->raw) {
        if (o->shape) return pz_fail(PZ_ERR_ARG, "--shape goes with --raw (an .npy file carries its shape)");
        return pz_npy_read(o->in, shape, x);
    }
    if (!o->shape) return pz_fail(PZ_ERR_ARG, "--raw needs --shape, e.g. --shape 4,1024,768");
    pz_status st = parse_shape(o->shape, shape);
    if (st != PZ_OK) return st;
    uint8_t *buf;
    size_t len;
    if ((st = pz_read_file_max(o->in, (size_t)1 << 30, &buf, &len)) != PZ_OK) return st;
    size_t n = pz_shape_numel(shape);
    if (len != n * 4) {
        free(buf);
        return pz_fail(PZ_ERR_SHAPE, "%s: %zu bytes, but --shape %s needs %zu (little-endian float32)", o->in, len,
                       o->shape, n * 4);
    }
    *x = (float *)(void *)buf;   /* malloc'ed: suitably aligned */
    return PZ_OK;
}

static pz_status write_file(const char *path, const uint8_t *data, size_t len) {
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st != PZ_OK) return st;
    if (fwrite(data, 1, len, af.f) != len) {
        pz_atomic_abort(&af);
        return pz_fail(PZ_ERR_IO, "%s: write failed", path);
    }
    return pz_atomic_commit(&af);
}

static void print_shape(const pz_shape *s) {
    printf("[");
    for (int i = 0; i < s->ndim; i++) printf("%s%lld", i ? "," : "", (long long)s->dims[i]);
    printf("]");
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int do_decode(const pz_codec_cmd_opts *o) {
    if (o->spec || o->in || o->raw || o->shape)
        return pz_fail(PZ_ERR_ARG, "--decode takes only --out and --seed (the spec and shape come from the "
                       "message)"), fail();
    if (!o->out) return pz_fail(PZ_ERR_ARG, "--decode needs --out Y.npy"), fail();
    uint8_t *msg;
    size_t len;
    if (pz_read_file_max(o->decode, (size_t)1 << 30, &msg, &len) != PZ_OK) return fail();
    char spec[1024];
    pz_shape shape;
    pz_status st = pz_codec_peek(msg, len, spec, sizeof spec, &shape);
    if (st != PZ_OK) {
        fail_with_path(st, o->decode);
        free(msg);
        return fail();
    }
    pz_codec *c;
    if ((st = pz_codec_create(spec, &c)) != PZ_OK) {
        free(msg);
        return fail();
    }
    if (pz_codec_is_stateful_decoder(c)) {
        pz_fail(PZ_ERR_ARG, "%s: codec '%s' decodes against state built from earlier messages; "
                "one message cannot be decoded on its own", o->decode, spec);
        pz_codec_free(c);
        free(msg);
        return fail();
    }
    size_t n = pz_shape_numel(&shape);
    float *y = xmalloc(n * sizeof(float));
    pz_codec_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.seed = (uint64_t)o->seed;   /* hadamard()'s signs: the encoder's --seed */
    st = pz_codec_decode(c, msg, len, &ctx, y, n, &shape);
    if (st != PZ_OK) fail_with_path(st, o->decode);
    else st = pz_npy_write(o->out, &shape, y);
    if (st == PZ_OK) {
        printf("{\"spec\":");
        json_str(spec);
        printf(",\"shape\":");
        print_shape(&shape);
        printf(",\"wire_bytes\":%zu,\"out\":", len);
        json_str(o->out);
        printf("}\n");
    }
    free(y);
    pz_codec_free(c);
    free(msg);
    return st == PZ_OK ? 0 : fail();
}

static int do_encode(const pz_codec_cmd_opts *o) {
    if (!o->spec || !o->in || !o->out) return pz_fail(PZ_ERR_ARG, "--spec, --in and --out are required"), fail();
    pz_codec *enc = NULL, *dec = NULL;
    if (pz_codec_create(o->spec, &enc) != PZ_OK) return fail();
    if (pz_codec_create(o->spec, &dec) != PZ_OK) {
        pz_codec_free(enc);
        return fail();
    }
    pz_shape shape;
    float *x = NULL, *y = NULL;
    uint8_t *msg = NULL;
    uint64_t *ids = NULL;
    int rc = 1;
    pz_status st = read_input(o, &shape, &x);
    if (st != PZ_OK) goto out;
    size_t n = pz_shape_numel(&shape);
    /* every codec the same: some would refuse, others carry the value and
     * report an error of nan (fp16, bf16, fp32, topk kept it) */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            st = pz_fail(PZ_ERR_ARG, "%s: element %zu is %s: codecs take finite values", o->in, i,
                         isnan(x[i]) ? "nan" : "inf");
            goto out;
        }
    size_t cap = pz_codec_max_encoded_size(enc, &shape), len = 0;
    msg = xmalloc(cap);
    y = xmalloc(n * sizeof(float));
    ids = xmalloc((size_t)shape.dims[0] * sizeof(uint64_t));
    for (int64_t i = 0; i < shape.dims[0]; i++) ids[i] = (uint64_t)i;
    pz_codec_ctx ctx = {(uint64_t)o->seed, 0, 0, 0, 0, ids};
    double t0 = pz_now();
    if ((st = pz_codec_encode(enc, x, &shape, &ctx, msg, cap, &len)) != PZ_OK) goto out;
    double t_enc = pz_now() - t0;
    pz_shape got;
    t0 = pz_now();
    if ((st = pz_codec_decode(dec, msg, len, &ctx, y, n, &got)) != PZ_OK) goto out;
    double t_dec = pz_now() - t0;
    if ((st = write_file(o->out, msg, len)) != PZ_OK) goto out;
    /* error of what the receiver got */
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)y[i];
        num += d * d;
        den += (double)x[i] * (double)x[i];
    }
    double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    /* timings: stateless codecs are re-run (same input, same message) for a
     * stable median; stateful ones are timed once */
    int stateless = strchr(o->spec, '(') == NULL;
    if (stateless && (t_enc + t_dec) < 0.2) {
        double te[31], td[31];
        int runs = 0;
        double budget = pz_now() + 0.5;
        uint8_t *m2 = xmalloc(cap);
        while (runs < 31 && (runs < 3 || pz_now() < budget)) {
            size_t l2;
            t0 = pz_now();
            if ((st = pz_codec_encode(enc, x, &shape, &ctx, m2, cap, &l2)) != PZ_OK) break;
            te[runs] = pz_now() - t0;
            t0 = pz_now();
            if ((st = pz_codec_decode(dec, m2, l2, &ctx, y, n, &got)) != PZ_OK) break;
            td[runs] = pz_now() - t0;
            runs++;
        }
        free(m2);
        if (st != PZ_OK) goto out;
        qsort(te, (size_t)runs, sizeof(double), cmp_double);
        qsort(td, (size_t)runs, sizeof(double), cmp_double);
        t_enc = te[runs / 2];
        t_dec = td[runs / 2];
    }
    double in_bytes = (double)n * 4.0;
    printf("{\"spec\":");
    json_str(pz_codec_spec(enc));
    printf(",\"shape\":");
    print_shape(&shape);
    printf(",\"input_bytes\":%zu,\"wire_bytes\":%zu,\"ratio\":%.6g,\"bits_per_elem\":%.6g,"
           "\"rel_l2_error\":%.6g,\"encode_gbps\":%.4g,\"decode_gbps\":%.4g,\"isa\":\"%s\"}\n",
           n * 4, len, in_bytes / (double)len, (double)len * 8.0 / (double)n, rel,
           t_enc > 0 ? in_bytes / t_enc * 1e-9 : 0.0, t_dec > 0 ? in_bytes / t_dec * 1e-9 : 0.0,
           pz_isa_name(pz_isa_level()));   /* the speeds are this level's (base/isa.h) */
    rc = 0;
out:
    if (rc) fail();
    free(x);
    free(y);
    free(msg);
    free(ids);
    pz_codec_free(enc);
    pz_codec_free(dec);
    return rc;
}

int pz_codec_cmd(const pz_codec_cmd_opts *o) {
    if (o->decode) return do_decode(o);
    return do_encode(o);
}
