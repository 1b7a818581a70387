/* test_gpt2_layout.c: loads a file laid out like openai-community/gpt2's
 * model.safetensors (written by tests/stages/make_gpt2_layout.py) into a full
 * 124M host array and checks the config and every element.
 *
 * usage: test_gpt2_layout PYTHON3 MAKE_GPT2_LAYOUT_PY
 * Needs ~550 MB in /tmp and ~500 MB of memory; exits 77 (skip) if /tmp has
 * too little space. Exits non-zero on any failure. */
#include "stages/gpt2_checkpoint.h"
#include "base/clock.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"

/* Runs argv to completion; returns its exit status (or -1). */
static int run(char *const argv[]) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    int ws;
    if (waitpid(pid, &ws, 0) != pid) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* The sentinel the script stores at HF position (r, c) of tensor `id`. */
static float sentinel(int id, size_t r, size_t c) {
    return (float)(id * 65536 + (int)(r % 16) * 4096 + (int)c);
}

/* Counts elements of our tensor t (rows R, cols K; 1-D when K == 0) that
 * differ from the HF sentinels, undoing the Conv1D transpose. */
static size_t count_bad(const pz_tensor_info *t, int id, size_t valid_rows) {
    size_t bad = 0;
    if (t->ndim == 1) {
        for (size_t c = 0; c < t->numel; c++) bad += t->data[c] != sentinel(id, 0, c);
        return bad;
    }
    size_t R = (size_t)t->shape[0], K = (size_t)t->shape[1];
    for (size_t r = 0; r < R; r++)
        for (size_t k = 0; k < K; k++) {
            float want = r >= valid_rows ? 0.0f
                       : t->conv1d ? sentinel(id, k, r) /* HF (in, out): row k, column r */
                       : sentinel(id, r, k);
            bad += t->data[r * K + k] != want;
        }
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s PYTHON3 MAKE_GPT2_LAYOUT_PY\n", argv[0]); return 2; }
    struct statvfs vs;
    if (statvfs("/tmp", &vs) == 0 && (double)vs.f_bavail * (double)vs.f_frsize < 700e6) {
        printf("SKIP: less than 700 MB free in /tmp\n");
        return 77;
    }
    char dir[] = "/tmp/pz_gpt2_layout_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);

    double t0 = pz_now();
    char *cmd[] = {argv[1], argv[2], path, NULL};
    int rc = run(cmd);
    double t1 = pz_now();
    CHECK(rc == 0, "%s %s exited with %d", argv[1], argv[2], rc);

    pz_gpt2_config c;
    pz_ckpt_format fmt;
    pz_status st = rc == 0 ? pz_ckpt_read_config(path, &c, &fmt) : PZ_ERR_IO;
    CHECK(st == PZ_OK, "read_config: %s", pz_last_error());
    if (st == PZ_OK) {
        CHECK(fmt == PZ_CKPT_SAFETENSORS, "format");
        CHECK(c.num_layers == 12 && c.num_heads == 12 && c.channels == 768 && c.vocab_size == 50257
              && c.padded_vocab_size == 50304 && c.max_seq_len == 1024,
              "config L=%d NH=%d C=%d V=%d Vp=%d maxT=%d", c.num_layers, c.num_heads, c.channels,
              c.vocab_size, c.padded_vocab_size, c.max_seq_len);

        /* the header layout itself */
        pz_st_file f;
        CHECK(pz_st_open(&f, path) == PZ_OK, "open: %s", pz_last_error());
        CHECK(f.ntensors == 160 && f.header_len % 8 == 0, "%d tensors, header %llu bytes", f.ntensors,
              (unsigned long long)f.header_len);
        const pz_st_tensor *mask = pz_st_find(&f, "h.7.attn.bias");
        CHECK(mask && mask->ndim == 4 && mask->shape[2] == 1024 && mask->dtype == PZ_ST_F32, "mask buffer");
        const pz_st_tensor *h10 = pz_st_find(&f, "h.10.ln_1.weight"), *h2 = pz_st_find(&f, "h.2.ln_1.weight");
        CHECK(h10 && h2 && h10->begin < h2->begin, "h.10 before h.2");
        const char *format = pz_st_meta_get(&f, "format");
        CHECK(f.nmeta == 1 && format && strcmp(format, "pt") == 0, "metadata");
        pz_st_close(&f);

        size_t n = pz_gpt2_numel(&c);
        CHECK(n == 124475904, "numel %zu", n);
        float *mem = xmalloc(n * sizeof(float));
        memset(mem, 0xFF, n * sizeof(float)); /* NaN: every element must be written */
        pz_gpt2_params p;
        pz_stage_range whole = pz_whole_model(&c);
        pz_gpt2_params_bind(&p, &c, &whole, mem);
        double t2 = pz_now();
        st = pz_ckpt_load(path, &p);
        double t3 = pz_now();
        CHECK(st == PZ_OK, "load: %s", pz_last_error());

        int nt = pz_gpt2_params_tensors(&p, NULL);
        pz_tensor_info *ts = xcalloc((size_t)nt, sizeof *ts);
        pz_gpt2_params_tensors(&p, ts);
        CHECK(nt == 2 + 12 * 12 + 2, "tensor count %d", nt);
        size_t bad = 0;
        for (int i = 0; st == PZ_OK && i < nt; i++) {
            /* our order: wte wpe | 12 tensors per block | ln_f.weight ln_f.bias */
            int id = i == 0 ? 1 : i == 1 ? 2 : i == nt - 2 ? 3 : i == nt - 1 ? 4 : 8 + (i - 2);
            size_t rows = i == 0 ? (size_t)c.vocab_size : (size_t)ts[i].shape[0];
            size_t b = count_bad(&ts[i], id, rows);
            if (b) fprintf(stderr, "  %s: %zu elements wrong\n", ts[i].name, b);
            bad += b;
        }
        CHECK(bad == 0, "%zu elements differ from the sentinels", bad);
        /* spot checks that document the transpose rule */
        if (st == PZ_OK) {
            /* h.0.attn.c_attn.weight (id 10) is HF (768, 2304): HF[5][1000] lands at our qkvw[1000][5] */
            CHECK(p.blocks[0].qkvw[1000 * 768 + 5] == 10 * 65536 + 5 * 4096 + 1000, "qkvw spot check");
            /* h.11.mlp.c_proj.weight (id 150) is HF (3072, 768): HF[3000][7] lands at our fcprojw[7][3000] */
            CHECK(p.blocks[11].fcprojw[7 * 3072 + 3000] == (8 + 12 * 11 + 10) * 65536 + (3000 % 16) * 4096 + 7,
                  "fcprojw spot check");
            CHECK(p.wte[50256 * 768 + 3] == 1 * 65536 + (50256 % 16) * 4096 + 3, "last real wte row");
            CHECK(p.wte[50257 * 768] == 0.0f && p.wte[50303 * 768 + 767] == 0.0f, "padded wte rows are 0");
            CHECK(p.lnfb[767] == 4 * 65536 + 767, "ln_f.bias");
        }
        free(ts);
        pz_gpt2_params_unbind(&p);
        free(mem);
        printf("gpt2-layout: python %.2fs, load %.2fs (%.0f MB/s)\n", t1 - t0, t3 - t2,
               (double)n * 4 / 1e6 / (t3 - t2 > 0 ? t3 - t2 : 1e-9));
    }
    remove(path);
    rmdir(dir);
    return check_summary("gpt2-layout");
}
