/* flags.c: see flags.h. */
#include "base/flags.h"

#include <string.h>

#include "base/parse.h"
#include "base/status.h"

void pz_flags_print(FILE *f, const pz_flag *fs, int n) {
    for (int i = 0; i < n; i++) {
        const char *arg = fs[i].kind == PZ_FLAG_BOOL ? "" : fs[i].kind == PZ_FLAG_STR ? " S" : " N";
        char left[64];
        snprintf(left, sizeof left, "%s%s", fs[i].name, arg);
        fprintf(f, "  %-22s %s", left, fs[i].help);
        /* a help that states its default itself ("default: steps/10"), or
         * that there is none ("required"), knows better than the variable's
         * start value, which may be a sentinel */
        if (strstr(fs[i].help, "default") || strstr(fs[i].help, "required")) {
            fputc('\n', f);
            continue;
        }
        switch (fs[i].kind) {
        case PZ_FLAG_INT: fprintf(f, " (default %d)", *(int *)fs[i].ptr); break;
        case PZ_FLAG_LONG: fprintf(f, " (default %ld)", *(long *)fs[i].ptr); break;
        case PZ_FLAG_FLOAT: fprintf(f, " (default %g)", (double)*(float *)fs[i].ptr); break;
        case PZ_FLAG_STR:
            if (*(const char **)fs[i].ptr) fprintf(f, " (default %s)", *(const char **)fs[i].ptr);
            break;
        case PZ_FLAG_BOOL: break;
        }
        fputc('\n', f);
    }
}

/* whether arg names one of the flags, as "--name" or "--name=value" */
static int is_flag(const pz_flag *fs, int n, const char *arg) {
    if (strncmp(arg, "--", 2) != 0) return 0;
    size_t len = strcspn(arg, "=");
    for (int k = 0; k < n; k++)
        if (strlen(fs[k].name) == len && strncmp(fs[k].name, arg, len) == 0) return 1;
    return strcmp(arg, "--help") == 0;
}

int pz_flags_parse(const char *cmd, const char *usage, int argc, char **argv,
                   const pz_flag *fs, int n, int *rest_start) {
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s\n\nflags:\n", usage);
            pz_flags_print(stdout, fs, n);
            return 2;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (rest_start) break;   /* positional arguments follow */
            fprintf(stderr, "pipezip %s: error: unexpected argument '%s' (see --help)\n", cmd, a);
            return 1;
        }
        if (strcmp(a, "--") == 0) { i++; break; }
        /* accept --flag=value as well as --flag value */
        char name[64];
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        if (nlen >= sizeof name) nlen = sizeof name - 1;
        memcpy(name, a, nlen);
        name[nlen] = 0;
        const pz_flag *f = NULL;
        for (int k = 0; k < n; k++)
            if (strcmp(fs[k].name, name) == 0) f = &fs[k];
        if (!f) {
            fprintf(stderr, "pipezip %s: error: unknown flag '%s' (see --help)\n", cmd, name);
            return 1;
        }
        if (f->given) *f->given = 1;
        if (f->kind == PZ_FLAG_BOOL) {
            if (eq) { fprintf(stderr, "pipezip %s: error: %s takes no value\n", cmd, name); return 1; }
            *(int *)f->ptr = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            fprintf(stderr, "pipezip %s: error: %s needs a value\n", cmd, name);
            return 1;
        }
        /* "--save --steps 3": the value left out, the next flag taken for it
         * (else the error blames the stray '3') */
        if (!eq && is_flag(fs, n, val)) {
            fprintf(stderr, "pipezip %s: error: %s needs a value: the next argument, %s, is a flag (write %s=%s for a "
                    "value that looks like one)\n", cmd, name, val, name, val);
            return 1;
        }
        pz_status st = PZ_OK;
        if (f->kind == PZ_FLAG_STR) {
            if (!*val) { fprintf(stderr, "pipezip %s: error: %s: empty value\n", cmd, name); return 1; }
            *(const char **)f->ptr = val;
        } else if (f->kind == PZ_FLAG_INT || f->kind == PZ_FLAG_LONG) {
            long v;
            st = pz_parse_int(val, (long)f->lo, (long)f->hi, &v, name);
            if (st == PZ_OK) {
                if (f->kind == PZ_FLAG_INT) *(int *)f->ptr = (int)v;
                else *(long *)f->ptr = v;
            }
        } else {
            double v;
            st = pz_parse_float(val, f->lo, f->hi, &v, name);
            if (st == PZ_OK) *(float *)f->ptr = (float)v;
        }
        if (st != PZ_OK) {
            fprintf(stderr, "pipezip %s: error: %s\n", cmd, pz_last_error());
            return 1;
        }
    }
    if (rest_start) *rest_start = i;
    return 0;
}

