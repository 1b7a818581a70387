/* cli.c: subcommands and a small table-driven flag parser, so that --help is
 * generated from the same table that parses the flags and cannot drift. */
#include "runtime/cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cli/codec_cmd.h"
#include "kernels/backend.h"
#include "runtime/plan/cores.h"
#include "stages/data.h"
#include "runtime/plan/device.h"
#include "runtime/net/jobsecret.h"
#include "runtime/ckpt/job.h"
#include "runtime/net/launcher.h"
#include "runtime/plan/partition.h"
#include "runtime/plan/memplan.h"
#include "runtime/plan/options.h"
#include "runtime/edge/policy.h"
#include "runtime/exec/pipeline.h"
#include "runtime/edge/tied.h"
#include "runtime/observe/trace.h"
#include "runtime/plan/train.h"
#include "schedules/schedule.h"
#include "stages/bpe/bpe.h"
#include "runtime/cli/schedule_cmd.h"
#include "runtime/cli/tokenize_cmd.h"
#include "runtime/cli/generate_cmd.h"
#include "base/mem.h"
#include "base/io/file.h"
#include "base/io/iocheck.h"
#include "base/isa.h"
#include "base/flags.h"
#include "base/parse.h"

/* the whole command line, for the launcher to start the same command per rank */
static int full_argc;
static char **full_argv;

static int fail(const char *cmd, pz_status st) {
    fprintf(stderr, "pipezip %s: error: %s\n", cmd, pz_last_error());
    (void)st;
    return 1;
}

#define NFLAGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* What a pipeline's flags must satisfy, checked once before any process
 * starts (and by each rank under mpirun): the policy (a bad one with its
 * pointer), links a rank can wait for, the tied codec, the model and its cut
 * into stages (or chunks). */
static pz_status pipeline_check(const pz_train_opts *o) {
    pz_policy pol;
    pz_status st = pz_train_policy(&o->link, pz_train_nchunks(&o->sched), &pol);
    if (st != PZ_OK) return st;
    st = pz_policy_check_latency(&pol, o->sched.stages, o->net.peer_timeout);
    pz_policy_free(&pol);
    if (st != PZ_OK) return st;
    pz_tied tied = {0};
    st = pz_tied_init(&tied, o->link.compress_tied, 1, 1);   /* the spec only */
    pz_tied_free(&tied);
    if (st != PZ_OK) return st;
    pz_gpt2_config cfg;
    if ((st = pz_model_config(o->model.preset, o->model.init, o->model.heads, &cfg)) != PZ_OK) return st;
    int V = pz_train_nchunks(&o->sched) / o->sched.stages;   /* interleaved: chunks per stage */
    pz_stage_range *ranges = xcalloc((size_t)o->sched.stages * (size_t)V, sizeof *ranges);
    st = pz_partition_chunks(&cfg, o->model.seq, o->sched.stages, V, o->sched.split, ranges);
    free(ranges);
    return st;
}

/* A checked training run: one rank of a pipeline (its variables are set),
 * the local launcher of --stages ranks, or one process. */
static int train_run(pz_train_opts *o, const pz_train_words *w) {
    int rank, world, port;
    const char *addr;
    int is_rank = pz_env_rank(&rank, &world, &addr, &port);
    pz_status st;
    if (o->sched.stages > 1 && (st = pipeline_check(o)) != PZ_OK) return fail("train", st);
    if (is_rank) {
        /* one rank of a pipeline started by us, torchrun-style variables, mpirun or srun */
        pz_name_process(rank);
        if (w->max_restarts > 0 && rank == 0 && !getenv("PZ_LAUNCHED"))
            fprintf(stderr, "pipezip train: note: --max-restarts is the local launcher's; under mpirun, srun or a "
                    "manual launch, restarting is the scheduler's: resubmit the job with --resume auto\n");
        pz_job_secret *sec = xcalloc(1, sizeof *sec);
        if ((st = pz_job_secret_load(o->net.job_secret_file, sec)) != PZ_OK) {
            free(sec);
            return fail("train", st);
        }
        unsetenv(PZ_JOB_SECRET_ENV); /* loaded: no process this one starts needs to see it */
        o->net.job_secret = sec->len ? sec->key : NULL;
        o->net.job_secret_len = sec->len;
        st = pz_pipeline_run_rank(o, rank, world, addr, port);
        pz_job_secret_clear(sec);
        free(sec);
        if (st == PZ_OK && pz_pipeline_stopped_by()) return 128 + pz_pipeline_stopped_by();
        /* refused at start: the local launcher must not restart it (launcher.h) */
        if (st != PZ_OK && pz_ckpt_refused() && getenv("PZ_LAUNCHED")) {
            fail("train", st);
            return PZ_EXIT_REFUSED;
        }
        /* it lost a peer: the local launcher names another rank as the cause (launcher.h) */
        if (st == PZ_ERR_PEER && getenv("PZ_LAUNCHED")) {
            fail("train", st);
            return PZ_EXIT_PEER;
        }
        return st == PZ_OK ? 0 : fail("train", st);
    }
    if (o->sched.stages * o->dp.replicas > 1) {   /* world = stages x replicas processes */
        /* every output writable and none an input, before any process starts
         * (each rank's executor checks again: under mpirun they may be on other hosts) */
        if ((st = pz_train_check_io(o, 1)) != PZ_OK) return fail("train", st);
        if (o->net.job_secret_file) { /* a bad file fails here once; the ranks read it themselves */
            pz_job_secret *sec = xcalloc(1, sizeof *sec);
            st = pz_job_secret_read_file(o->net.job_secret_file, sec);
            pz_job_secret_clear(sec);
            free(sec);
            if (st != PZ_OK) return fail("train", st);
        }
        pz_rank_layout names = {o->sched.stages, o->dp.replicas, o->dp.layout};
        int rc = pz_launch_local(o->sched.stages * o->dp.replicas, full_argc, full_argv, w->max_restarts, &names);
        if (rc == 0 && o->observe.trace) {
            if ((st = pz_trace_merge(o->observe.trace, o->sched.stages * o->dp.replicas)) != PZ_OK) return fail("train", st);
            fprintf(stderr, "pipezip train: wrote trace %s\n", o->observe.trace);
        }
        return rc;
    }
    /* one process is a pipeline of one stage: the same loop, no transport */
    st = pz_pipeline_run_rank(o, 0, 1, NULL, 0);
    if (st == PZ_OK && pz_pipeline_stopped_by()) return 128 + pz_pipeline_stopped_by();
    return st == PZ_OK ? 0 : fail("train", st);
}

/* --check: the launcher's pre-flight of the flags (pipeline_check reads only
 * the model's configuration, never its weights or the data), so that a
 * script learns of a bad flag before its slow steps */
static int train_check_only(const pz_train_opts *o) {
    pz_status st;
    (void)pz_isa_level();   /* a PIPEZIP_ISA the run would refuse exits 1 here, naming it (base/isa.h) */
    if (o->sched.stages > 1) st = pipeline_check(o);
    else {
        pz_gpt2_config cfg;
        st = pz_model_config(o->model.preset, o->model.init, o->model.heads, &cfg);
    }
    if (st != PZ_OK) return fail("train", st);
    fprintf(stderr, "pipezip train: --check: the command line is valid\n");
    return 0;
}

static int cmd_train(int argc, char **argv) {
    pz_train_opts o;
    pz_train_words w;
    int r = pz_train_parse(argc, argv, &o, &w);   /* runtime/plan/options.c: every flag, parsed and checked */
    if (r) return r == 2 ? 0 : 1;
    if (w.check) return train_check_only(&o);
    return train_run(&o, &w);
}

static int cmd_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL;
    int batch = 4, seq = 64, batches = 0, threads = 0, heads = 0;
    const pz_flag fs[] = {
        {"--model", PZ_FLAG_STR, &model, "checkpoint: HF safetensors or llm.c .bin, or an HF model directory", 0, 0, NULL},
        {"--heads", PZ_FLAG_INT, &heads, "attention heads when neither the model nor its config.json says", 0, 65536, NULL},
        {"--data", PZ_FLAG_STR, &data, "token shards", 0, 0, NULL},
        {"--batch", PZ_FLAG_INT, &batch, "sequences per batch (B)", 1, 65536, NULL},
        {"--seq", PZ_FLAG_INT, &seq, "tokens per sequence (T)", 1, 65536, NULL},
        {"--batches", PZ_FLAG_INT, &batches, "batches to evaluate, in file order (0 = all)", 0, 100000000, NULL},
        {"--threads", PZ_FLAG_INT, &threads, "CPU threads (0 = all cores)", 0, 1024, NULL},
    };
    int r = pz_flags_parse("eval", "usage: pipezip eval --model FILE --data SHARDS [--batch B --seq T --batches N]\n\n"
                        "Prints {\"loss\": mean next-token cross-entropy (natural log)} over the first N\n"
                        "batches in file order: batch k is tokens [k*B*T, (k+1)*B*T] of the data, inputs\n"
                        "and targets shifted by one, as llm.c's loader reads them.",
                        argc, argv, fs, NFLAGS(fs), NULL);
    if (r) return r == 2 ? 0 : 1;
    if (!model || !data) {
        fprintf(stderr, "pipezip eval: error: --model and --data are required\n");
        return 1;
    }
    pz_backend_cpu_set_threads(threads);
    pz_stage s;
    pz_acts a;
    pz_dataset d;
    pz_gpt2_config cfg;   /* the header only: the need is known before anything big is allocated */
    pz_status st = pz_model_config(NULL, model, heads, &cfg);
    if (st == PZ_OK && seq <= cfg.max_seq_len) st = pz_mem_check_eval(&cfg, batch, seq);
    if (st == PZ_OK) st = pz_model_create(&s, pz_backend_cpu(), NULL, model, heads, 0, batch, seq);
    if (st != PZ_OK) return fail("eval", st);
    if ((st = pz_dataset_open(&d, data, seq, s.cfg.vocab_size)) != PZ_OK) {
        pz_stage_free(&s);
        return fail("eval", st);
    }
    pz_acts_init(&a, &s);
    double loss;
    int used = 0;
    st = pz_eval_loss(&s, &a, &d, batches, &loss, &used);
    if (st == PZ_OK && !isfinite(loss)) {
        /* JSON has no NaN: null, and the reason */
        char bad[160] = "";
        int nf = pz_params_nonfinite(&s, bad, sizeof bad);
        printf("{\"loss\":null,\"batches\":%d,\"tokens\":%ld}\n", used, (long)used * batch * seq);
        st = nf ? pz_fail(PZ_ERR_FORMAT, "%s: the loss is %g: the model holds non-finite weights (%s)", model, loss, bad)
                : pz_fail(PZ_ERR_FORMAT, "%s: the loss is %g although every weight is finite", model, loss);
    } else if (st == PZ_OK) {
        printf("{\"loss\":%.7f,\"batches\":%d,\"tokens\":%ld}\n", loss, used, (long)used * batch * seq);
    }
    pz_acts_free(&a, &s);
    pz_dataset_close(&d);
    pz_stage_free(&s);
    return st == PZ_OK ? 0 : fail("eval", st);
}

static int cmd_generate(int argc, char **argv) {
    pz_generate_opts o = {0};
    o.sampling.temperature = 1.0f;
    o.sampling.top_p = 1.0f;
    o.stages = 1;
    o.max_new_tokens = -1;
    o.peer_timeout = 60.0f;   /* train's default; --help prints it */
    long seed = 1337;
    /* one position per token is too little work to split: on the demo model
     * (2 vCPUs, AMD EPYC) 1 thread made 141 tokens/s, 2 threads 43 */
    int threads = 1;
    const pz_flag fs[] = {
        {"--model", PZ_FLAG_STR, &o.model, "checkpoint: HF safetensors or llm.c .bin, or an HF model directory", 0, 0, NULL},
        {"--heads", PZ_FLAG_INT, &o.heads, "attention heads when neither the model nor its config.json says", 0, 65536, NULL},
        {"--tokenizer", PZ_FLAG_STR, &o.tokenizer, "GPT-2 BPE: tokenizer.json, vocab.json or a directory (default: the model directory's)", 0, 0, NULL},
        {"--prompt", PZ_FLAG_STR, &o.prompt, "prompt text", 0, 0, NULL},
        {"--prompt-ids", PZ_FLAG_STR, &o.prompt_ids, "prompt as token ids: 1,2,3", 0, 0, NULL},
        {"--max-new-tokens", PZ_FLAG_INT, &o.max_new_tokens, "tokens to generate (required)", 0, 1 << 20, NULL},
        {"--temperature", PZ_FLAG_FLOAT, &o.sampling.temperature, "softmax temperature; 0 is greedy", 0, 100, NULL},
        {"--top-k", PZ_FLAG_INT, &o.sampling.top_k, "draw among the K most likely tokens (0: all)", 0, 1 << 20, NULL},
        {"--top-p", PZ_FLAG_FLOAT, &o.sampling.top_p, "draw among the most likely tokens holding probability P (nucleus)", 1e-6, 1, NULL},
        {"--seed", PZ_FLAG_LONG, &seed, "seed of the sampling RNG", 0, 9.2e18, NULL},
        {"--threads", PZ_FLAG_INT, &threads, "CPU threads (default 1: a token is little work; 0 = all cores)", 0, 1024, NULL},
        {"--no-kv-cache", PZ_FLAG_BOOL, &o.no_kv_cache, "recompute the whole prefix for every token (slow; for tests)", 0, 0, NULL},
        {"--stages", PZ_FLAG_INT, &o.stages, "pipeline stages, one process each, passing one position's hidden state per token", 1, 255, NULL},
        {"--split", PZ_FLAG_STR, &o.split, "blocks per stage, e.g. 3,3 (default: balanced)", 0, 0, NULL},
        {"--compress", PZ_FLAG_STR, &o.compress, "fwd codecs per edge, as for train (wrappers give way to their inner codec)", 0, 0, NULL},
        {"--peer-timeout", PZ_FLAG_FLOAT, &o.peer_timeout, "seconds a stage waits for a peer before failing", 0.1, 86400, NULL},
        {"--device", PZ_FLAG_STR, &o.device, "cpu, cuda or cuda:tf32; or one per stage, e.g. cpu,cuda (default cpu)", 0, 0, NULL},
    };
    int r = pz_flags_parse("generate", "usage: pipezip generate --model FILE|DIR [--tokenizer F] (--prompt TEXT | --prompt-ids 1,2,3)\n"
                        "                        --max-new-tokens N [--temperature T --top-k K --top-p P --seed S]\n"
                        "                        [--stages S [--split A,B --compress fwd=...]] [--device cpu|cuda]\n\n"
                        "Continues the prompt with a KV cache: each new token costs one position. Text\n"
                        "streams to stdout as it is produced, decoded with the tokenizer (--tokenizer,\n"
                        "else tokenizer.json / vocab.json in the model directory), as bytes for a model\n"
                        "of vocabulary 256, else as ids. The last line is JSON: ids (prompt and\n"
                        "generated tokens), prompt_tokens, new_tokens, seconds and tok_s. With --stages S\n"
                        "each stage is a process with its part of the model and its own cache, passing\n"
                        "one position's hidden state per token through the edge's fwd codec.",
                        argc, argv, fs, NFLAGS(fs), NULL);
    if (r) return r == 2 ? 0 : 1;
    if (!o.model || o.max_new_tokens < 0) {
        fprintf(stderr, "pipezip generate: error: --model and --max-new-tokens are required\n");
        return 1;
    }
    o.seed = (uint64_t)seed;
    o.threads = threads;
    pz_backend_cpu_set_threads(threads);
    if (pz_device_check(o.device ? o.device : "cpu", o.stages) != PZ_OK) return fail("generate", PZ_ERR_ARG);
    int rank, world, port;
    const char *addr;
    pz_status st;
    if (pz_env_rank(&rank, &world, &addr, &port)) {   /* one stage of a pipeline */
        if (world != o.stages) {
            fprintf(stderr, "pipezip generate: error: WORLD_SIZE %d does not match --stages %d\n", world, o.stages);
            return 1;
        }
        pz_name_process(rank);
        pz_job_secret *sec = xcalloc(1, sizeof *sec);   /* the launcher's, or PIPEZIP_JOB_SECRET */
        if ((st = pz_job_secret_load(NULL, sec)) != PZ_OK) {
            free(sec);
            return fail("generate", st);
        }
        unsetenv(PZ_JOB_SECRET_ENV);
        o.job_secret = sec->len ? sec->key : NULL;
        o.job_secret_len = sec->len;
        st = pz_generate_rank(&o, rank, world, addr, port);
        pz_job_secret_clear(sec);
        free(sec);
        return st == PZ_OK ? 0 : fail("generate", st);
    }
    if (o.stages > 1) {
        if ((st = pz_generate_check(&o)) != PZ_OK) return fail("generate", st);
        return pz_launch_local(o.stages, full_argc, full_argv, 0, NULL);
    }
    if (o.split || o.compress) {
        fprintf(stderr, "pipezip generate: error: %s needs --stages 2 or more\n", o.split ? "--split" : "--compress");
        return 1;
    }
    st = pz_generate(&o);
    return st == PZ_OK ? 0 : fail("generate", st);
}

/* the shards written are neither an input nor the tokenizer's files, and can be written */
static int tokenize_check_io(const char *out, const char *val_out, const char *tokenizer, char **inputs, int n) {
    pz_io_set io = {0};
    for (int i = 0; i < n; i++) pz_io_add(&io, PZ_IO_IN, "input", inputs[i]);
    pz_io_add(&io, PZ_IO_IN, "--tokenizer", tokenizer);
    char *files[3] = {NULL, NULL, NULL};
    if (tokenizer && pz_bpe_files(tokenizer, &files[0], &files[1], &files[2]) == PZ_OK)
        for (int i = 0; i < 3; i++) pz_io_add(&io, PZ_IO_IN, "--tokenizer", files[i]);
    for (int i = 0; i < 3; i++) free(files[i]);
    pz_io_add(&io, PZ_IO_OUT_FILE, "--out", out);
    pz_io_add(&io, PZ_IO_OUT_FILE, "--val-out", val_out);
    pz_status st = pz_io_check(&io);
    pz_io_free(&io);
    return st == PZ_OK ? 0 : fail("tokenize", st);
}

static int cmd_tokenize(int argc, char **argv) {
    const char *out = NULL, *val_out = NULL, *tokenizer = NULL;
    float val_fraction = 0.0f;
    int eot = 0, threads = 0;
    const pz_flag fs[] = {
        {"--out", PZ_FLAG_STR, &out, "training shard to write", 0, 0, NULL},
        {"--val-out", PZ_FLAG_STR, &val_out, "validation shard to write (the tail of the text; byte-level only)", 0, 0, NULL},
        {"--val-fraction", PZ_FLAG_FLOAT, &val_fraction, "fraction of bytes for validation", 0, 0.99, NULL},
        {"--tokenizer", PZ_FLAG_STR, &tokenizer, "GPT-2 BPE: tokenizer.json, vocab.json (merges.txt beside it) or a directory", 0, 0, NULL},
        {"--eot-between-files", PZ_FLAG_BOOL, &eot, "with --tokenizer: <|endoftext|> between consecutive files", 0, 0, NULL},
        {"--threads", PZ_FLAG_INT, &threads, "with --tokenizer: files encoded at once (0: one per core)", 0, 4096, NULL},
    };
    int rest = 0;
    int r = pz_flags_parse("tokenize", "usage: pipezip tokenize --out TRAIN.bin [--val-out VAL.bin --val-fraction F] FILE...\n"
                        "       pipezip tokenize --tokenizer FILE|DIR [--eot-between-files] [--threads N] --out X.bin FILE...\n\n"
                        "Byte-level tokenizer (vocabulary 256): concatenates the text files in the order\n"
                        "given and writes llm.c token shards. The last F of the bytes (cut back to a\n"
                        "newline when one is within 4 KiB) go to the validation shard.\n\n"
                        "With --tokenizer: GPT-2's byte-level BPE, read from an HF tokenizer.json, a\n"
                        "vocab.json with merges.txt beside it, or a directory holding either (as HF\n"
                        "publishes gpt2/). Files (UTF-8 text) are encoded in parallel, each on its own,\n"
                        "and joined in order into one shard; special tokens such as <|endoftext|> in the\n"
                        "text become their ids. An id above 65535 is an error (uint16 shards). Prints one\n"
                        "JSON line: files, bytes, tokens, seconds, mb_per_s.",
                        argc, argv, fs, NFLAGS(fs), &rest);
    if (r) return r == 2 ? 0 : 1;
    if (!out || rest >= argc) {
        fprintf(stderr, "pipezip tokenize: error: --out and at least one input file are required\n");
        return 1;
    }
    if ((r = tokenize_check_io(out, val_out, tokenizer, argv + rest, argc - rest)) != 0) return r;
    if (tokenizer) {
        if (val_out || val_fraction > 0.0f) {
            fprintf(stderr, "pipezip tokenize: error: --val-out and --val-fraction are for the byte-level tokenizer; with "
                    "--tokenizer, tokenize the validation files into their own shard\n");
            return 1;
        }
        pz_tokenize_bpe_opts o = {tokenizer, out, eot, threads};
        pz_status st = pz_tokenize_bpe(&o, (const char *const *)(argv + rest), argc - rest);
        return st == PZ_OK ? 0 : fail("tokenize", st);
    }
    if (eot || threads) {
        fprintf(stderr, "pipezip tokenize: error: %s needs --tokenizer\n", eot ? "--eot-between-files" : "--threads");
        return 1;
    }
    if ((val_out != NULL) != (val_fraction > 0.0f)) {
        fprintf(stderr, "pipezip tokenize: error: --val-out and --val-fraction go together\n");
        return 1;
    }
    pz_status st = pz_tokenize_bytes((const char *const *)(argv + rest), argc - rest, out, val_out, val_fraction);
    return st == PZ_OK ? 0 : fail("tokenize", st);
}

static int cmd_codec(int argc, char **argv) {
    pz_codec_cmd_opts o = {NULL, NULL, NULL, NULL, NULL, 0, 0};
    const pz_flag fs[] = {
        {"--spec", PZ_FLAG_STR, &o.spec, "codec spec, e.g. q4, q4:group=row,round=nearest, topk:0.1, ef(sign)+zstd", 0, 0, NULL},
        {"--in", PZ_FLAG_STR, &o.in, "float32 tensor to encode: .npy ('<f4', C order), or raw with --raw", 0, 0, NULL},
        {"--raw", PZ_FLAG_BOOL, &o.raw, "--in is raw little-endian float32 (needs --shape)", 0, 0, NULL},
        {"--shape", PZ_FLAG_STR, &o.shape, "dims of a raw input, e.g. 4,1024,768", 0, 0, NULL},
        {"--out", PZ_FLAG_STR, &o.out, "where to write the message (encode) or the .npy (decode)", 0, 0, NULL},
        {"--decode", PZ_FLAG_STR, &o.decode, "decode this message instead of encoding", 0, 0, NULL},
        {"--seed", PZ_FLAG_LONG, &o.seed, "seed of stochastic rounding and of hadamard()'s signs (--decode: the encoder's)",
         0, 1e18, NULL},
    };
    int r = pz_flags_parse("codec", "usage: pipezip codec --spec SPEC --in X.npy --out MSG [--seed N]\n"
                        "       pipezip codec --spec SPEC --in X.f32 --raw --shape D0,D1,.. --out MSG\n"
                        "       pipezip codec --decode MSG --out Y.npy [--seed N]\n\n"
                        "Encodes a float32 tensor with a codec (grammar and codecs: compress/README.md) and\n"
                        "prints one JSON line: input_bytes, wire_bytes, ratio, bits_per_elem, rel_l2_error\n"
                        "(of the decoded tensor), encode_gbps and decode_gbps (one thread) and isa, the\n"
                        "instruction-set level they ran at (PIPEZIP_ISA caps it). --decode turns a\n"
                        "message of a codec without receiver state back into an .npy file.",
                        argc, argv, fs, NFLAGS(fs), NULL);
    if (r) return r == 2 ? 0 : 1;
    pz_io_set io = {0};   /* the output is no input */
    pz_io_add(&io, PZ_IO_IN, "--in", o.in);
    pz_io_add(&io, PZ_IO_IN, "--decode", o.decode);
    pz_io_add(&io, PZ_IO_OUT_FILE, "--out", o.out);
    pz_status st = pz_io_check(&io);
    pz_io_free(&io);
    return st == PZ_OK ? pz_codec_cmd(&o) : fail("codec", st);
}

/* `pipezip sweep` runs examples/sweep.py (python3; plots need matplotlib)
 * from this source tree, pointing it at this very executable. */
static int cmd_sweep(int argc, char **argv) {
    char script[4096], self[4096];
    snprintf(script, sizeof script, "%s/examples/sweep.py", PZ_SOURCE_ROOT);
    if (pz_self_exe(self, sizeof self) != 0) {
        fprintf(stderr, "pipezip sweep: error: cannot find this executable (/proc/self/exe)\n");
        return 1;
    }
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "pipezip sweep: error: %s: %s (the sweep script lives in the source tree this pipezip "
                "was built from)\n", script, strerror(errno));
        return 1;
    }
    char **args = xcalloc((size_t)argc + 5, sizeof *args);
    int k = 0, has_pz = 0;
    args[k++] = "python3";
    args[k++] = script;
    for (int i = 0; i < argc; i++) has_pz |= strncmp(argv[i], "--pipezip", 9) == 0;
    if (!has_pz) { args[k++] = "--pipezip"; args[k++] = self; }
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execvp("python3", args);
    fprintf(stderr, "pipezip sweep: error: cannot run python3: %s (bash tools/setup.sh installs it)\n", strerror(errno));
    free(args);
    return 1;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"train", cmd_train, "train a GPT-2, in one process or as a pipeline of stages"},
    {"eval", cmd_eval, "mean next-token loss of a checkpoint on token shards"},
    {"generate", cmd_generate, "continue a prompt with a model (KV cache, CPU or GPU): streamed text and a JSON line"},
    {"tokenize", cmd_tokenize, "turn text files into token shards (byte-level, or GPT-2 BPE with --tokenizer)"},
    {"codec", cmd_codec, "encode a tensor with a codec and report size, error and speed"},
    {"sweep", cmd_sweep, "grid of fwd x bwd codecs on one fine-tuning task: table and plots (examples/sweep.py)"},
    {"schedule", pz_cmd_schedule, "print the instruction table of a pipeline schedule"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: pipezip COMMAND [flags]   (pipezip COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int pz_cli_main(int argc, char **argv) {
    full_argc = argc;
    full_argv = argv;
    if (argc < 2) { usage(stderr); return 1; }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) { printf("pipezip 0.1.0\n"); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "pipezip: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 1;
}
