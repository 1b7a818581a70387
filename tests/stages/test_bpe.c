/* test_bpe.c: GPT-2's byte-level BPE (stages/bpe/bpe.c).
 *
 *   test_bpe                          unit cases on tokenizers built here: merges by rank,
 *                                     added tokens, decoding, and every kind of malformed
 *                                     tokenizer file giving a clear error
 *   test_bpe --compare TOK TEXT IDS   encodes TEXT with TOK (tokenizer.json, vocab.json or
 *                                     a directory) and checks the ids equal IDS (uint32 LE,
 *                                     written by HF `tokenizers`; tests/stages/bpe_vs_hf.sh)
 *                                     and that decoding gives TEXT back */
#include "stages/bpe/bpe.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "tests/check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- building tokenizer files as text */

typedef struct {
    char *s;
    size_t n, cap;
} sb;

static void put(sb *b, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        b->cap = 2 * (b->n + l + 1);
        b->s = realloc(b->s, b->cap);
        if (!b->s) abort();
    }
    memcpy(b->s + b->n, s, l + 1);
    b->n += l;
}

/* GPT-2's character for byte c, UTF-8 */
static void byte_char(int c, char out[4]) {
    int k = 0, cp = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        int v = printable ? b : 256 + k++;
        if (b == c) cp = v;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

/* JSON text of a string, escaping quote and backslash */
static void put_json_str(sb *b, const char *s) {
    put(b, "\"");
    for (; *s; s++) {
        char t[3] = {*s, 0, 0};
        if (*s == '"' || *s == '\\') { t[0] = '\\'; t[1] = *s; }
        put(b, t);
    }
    put(b, "\"");
}

/* merges of the small tokenizer (byte-level strings); each merged token gets the next id after the 256 bytes */
static const char *small_merges[][2] = {
    {"\xc4\xa0", "t"}, {"h", "e"}, {"\xc4\xa0t", "he"}, {"i", "n"}, {"\xc4\xa0", "in"}, {"e", "r"}, {"'", "s"},
    {"\xc4\xa0\xc4\xa0", "\xc4\xa0"}, {"\xc4\xa0", "\xc4\xa0"},
};
#define NSMALL (sizeof small_merges / sizeof small_merges[0])

/* vocab object text: 256 bytes then the merged tokens */
static void put_vocab(sb *b, int dup_id, int with_eot) {
    char ch[4], num[32];
    put(b, "{");
    for (int c = 0; c < 256; c++) {
        byte_char(c, ch);
        if (c) put(b, ", ");
        put_json_str(b, ch);
        snprintf(num, sizeof num, ": %d", c == 'z' && dup_id ? 'y' : c);
        put(b, num);
    }
    for (size_t m = 0; m < NSMALL; m++) {
        char tok[32];
        snprintf(tok, sizeof tok, "%s%s", small_merges[m][0], small_merges[m][1]);
        put(b, ", ");
        put_json_str(b, tok);
        snprintf(num, sizeof num, ": %zu", 256 + m);
        put(b, num);
    }
    if (with_eot) put(b, ", \"<|endoftext|>\": 300");
    put(b, "}");
}

/* a tokenizer.json; `model_extra` goes into "model", `top_extra` at the top level, `merges` replaces the list */
static char *small_json(const char *model_extra, const char *top_extra, const char *merges, int dup_id) {
    sb b = {0};
    put(&b, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 300, \"content\": \"<|endoftext|>\", \"single_word\": false, "
            "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}], ");
    put(&b, top_extra ? top_extra : "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                                    "false, \"trim_offsets\": true, \"use_regex\": true}, \"post_processor\": null, ");
    put(&b, "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"unk_token\": null, ");
    put(&b, model_extra ? model_extra : "\"dropout\": null, ");
    put(&b, "\"vocab\": ");
    put_vocab(&b, dup_id, 1);
    if (merges) {
        put(&b, ", \"merges\": ");
        put(&b, merges);
    } else {
        put(&b, ", \"merges\": [");
        for (size_t m = 0; m < NSMALL; m++) {
            char t[64];
            snprintf(t, sizeof t, "%s%s %s", m ? ", " : "", small_merges[m][0], small_merges[m][1]);
            put(&b, m ? ", " : "");
            snprintf(t, sizeof t, "%s %s", small_merges[m][0], small_merges[m][1]);
            put_json_str(&b, t);
        }
        put(&b, "]");
    }
    put(&b, "}}");
    return b.s;
}

static pz_status from_json(const char *s, pz_bpe **b) { return pz_bpe_from_tokenizer_json(s, strlen(s), "tok.json", b); }

/* the small tokenizer, loaded (checked); NULL when it did not load */
static pz_bpe *small_bpe(void) {
    char *j = small_json(NULL, NULL, NULL, 0);
    pz_bpe *b = NULL;
    CHECK_STATUS(from_json(j, &b), PZ_OK, NULL);
    free(j);
    return b;
}

/* encodes text and compares with want (n ids) */
static void expect_ids(const pz_bpe *b, const char *text, const uint32_t *want, size_t n, int line) {
    pz_bpe_enc *e = pz_bpe_enc_new(b);
    pz_bpe_ids ids = {0};
    checks++;
    pz_status st = pz_bpe_encode(e, text, strlen(text), "text", &ids);
    if (st) check_fail(__FILE__, line, "encode \"%s\": %s", text, pz_last_error());
    else if (ids.n != n || (n && memcmp(ids.ids, want, n * sizeof *want) != 0)) {
        char got[256] = "";
        for (size_t i = 0; i < ids.n && strlen(got) < 200; i++) snprintf(got + strlen(got), 16, "%u ", ids.ids[i]);
        check_fail(__FILE__, line, "encode \"%s\": got %zu ids [%s], want %zu", text, ids.n, got, n);
    }
    char *back = NULL;
    size_t bl = 0;
    if (!st) {
        checks++;
        if (pz_bpe_decode(b, ids.ids, ids.n, &back, &bl) || bl != strlen(text) || memcmp(back, text, bl) != 0)
            check_fail(__FILE__, line, "decode(encode(\"%s\")) differs", text);
    }
    free(back);
    free(ids.ids);
    pz_bpe_enc_free(e);
}
#define EXPECT_IDS(b, text, ...)                                                              \
    do {                                                                                      \
        const uint32_t want_[] = {__VA_ARGS__};                                               \
        expect_ids((b), (text), want_, sizeof want_ / sizeof want_[0], __LINE__);             \
    } while (0)

static void test_small(void) {
    pz_bpe *b = small_bpe();
    if (!b) return;
    CHECK(pz_bpe_n_vocab(b) == 301, "n_vocab %u", pz_bpe_n_vocab(b));
    CHECK(pz_bpe_added_id(b, "<|endoftext|>") == 300, "eot id");
    /* " the" -> Ġt (256) + he (257) -> Ġthe (258); "in" alone has no Ġ */
    EXPECT_IDS(b, " the", 258);
    EXPECT_IDS(b, "the", 't', 257);
    EXPECT_IDS(b, "in in", 259, 260);
    EXPECT_IDS(b, "he's", 257, 262);            /* contraction split: "he" "'s" */
    EXPECT_IDS(b, "<|endoftext|> the<|endoftext|>", 300, 258, 300);
    /* three spaces then a word: "\s+(?!\S)" leaves the last space to the word: "  " + " the" */
    EXPECT_IDS(b, "   the", 264, 258);
    /* Ġ Ġ (rank 9) and ĠĠ Ġ (rank 8): "   " at the end: Ġ Ġ first, then ĠĠ Ġ */
    EXPECT_IDS(b, "x   ", 'x', 263);
    expect_ids(b, "", NULL, 0, __LINE__);
    pz_bpe_enc *e = pz_bpe_enc_new(b);
    pz_bpe_ids ids = {0};
    CHECK_STATUS(pz_bpe_encode(e, "ok \xff\xfe", 5, "bad.txt", &ids), PZ_ERR_FORMAT, "bad.txt: not UTF-8 text at byte 3");
    CHECK_STATUS(pz_bpe_encode(e, "\xed\xa0\x80", 3, "sur.txt", &ids), PZ_ERR_FORMAT, "not UTF-8");
    free(ids.ids);
    pz_bpe_enc_free(e);
    uint32_t bad[] = {1, 2, 299};
    char *t = NULL;
    size_t tl;
    CHECK_STATUS(pz_bpe_decode(b, bad, 3, &t, &tl), PZ_ERR_FORMAT, "id 299 at position 2");
    pz_bpe_free(b);

    /* merges as pairs (tokenizers >= 0.20 writes them so) */
    char *j = small_json(NULL, NULL, "[[\"\xc4\xa0\", \"t\"], [\"h\", \"e\"], [\"\xc4\xa0t\", \"he\"]]", 0);
    CHECK_STATUS(from_json(j, &b), PZ_OK, NULL);
    free(j);
    if (b) EXPECT_IDS(b, " the", 258);
    pz_bpe_free(b);
}

/* long pieces (heap) against the scan, on random text of the small tokenizer's letters and spaces */
static void test_long_pieces(void) {
    pz_bpe *b = small_bpe();
    if (!b) return;
    pz_bpe_enc *heap = pz_bpe_enc_new(b), *scan = pz_bpe_enc_new(b);
    pz_bpe_enc_force_scan(scan, 1);
    uint64_t x = 12345;
    char text[4096];
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + (size_t)(round * 13 % 4000);
        const char *alpha = round % 3 == 0 ? "  \t" : round % 3 == 1 ? "thein'rs" : "theinr  ";
        size_t na = strlen(alpha);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            text[i] = alpha[(x >> 33) % na];
        }
        text[n] = 0;
        pz_bpe_ids a = {0}, c = {0};
        CHECK_STATUS(pz_bpe_encode(heap, text, n, "heap", &a), PZ_OK, NULL);
        CHECK_STATUS(pz_bpe_encode(scan, text, n, "scan", &c), PZ_OK, NULL);
        CHECK(a.n == c.n && (a.n == 0 || memcmp(a.ids, c.ids, a.n * sizeof *a.ids) == 0),
              "round %d (%zu bytes): the heap's %zu ids differ from the scan's %zu", round, n, a.n, c.n);
        free(a.ids);
        free(c.ids);
    }
    /* 1001 spaces after a word: Ġ Ġ (rank 8) then ĠĠ Ġ (rank 7), left to right */
    memset(text, ' ', 1001);
    text[1001] = 0;
    pz_bpe_ids a = {0};
    CHECK_STATUS(pz_bpe_encode(heap, text, 1001, "spaces", &a), PZ_OK, NULL);
    CHECK(a.n == 334 && a.ids[0] == 263 && a.ids[332] == 263 && a.ids[333] == 264, "1001 spaces: %zu ids", a.n);
    free(a.ids);
    pz_bpe_enc_free(heap);
    pz_bpe_enc_free(scan);
    pz_bpe_free(b);
}

static void test_malformed(void) {
    struct {
        const char *model_extra, *top_extra, *merges;
        int dup_id;
        const char *needle;
    } cases[] = {
        {NULL, NULL, "[\"\xc4\xa0 t\", \"Q z\"]", 0, "merge 2 (\"Q z\"): the merged token \"Qz\" is not in the vocabulary"},
        {NULL, NULL, "[\"\xc4\xa0 t\", \"\xc4\xa0t nope\"]", 0, "merge 2 (\"\xc4\xa0t nope\"): \"nope\" is not in the vocabulary"},
        {NULL, NULL, "[\"h e\", \"h e\"]", 0, "merge 2 (\"h e\") repeats merge 1"},
        {NULL, NULL, "[\"he\"]", 0, "merge number 1 (\"he\") is not two tokens"},
        {NULL, NULL, "[\"h e x\"]", 0, "is not two tokens"},
        {NULL, NULL, "[[\"h\"]]", 0, "merge number 1 must hold two"},
        {NULL, NULL, "[[\"h\", \"e\", \"r\"]]", 0, "must hold two strings"},
        {NULL, NULL, "[1]", 0, "merge number 1 must be a string"},
        {NULL, NULL, "{}", 0, "\"merges\" must be an array"},
        {NULL, NULL, NULL, 1, "duplicate id 121: tokens \"y\" and \"z\""},
        {"\"dropout\": 0.1, ", NULL, NULL, 0, "\"dropout\" is set"},
        {"\"continuing_subword_prefix\": \"##\", ", NULL, NULL, 0, "continuing_subword_prefix"},
        {"\"byte_fallback\": true, ", NULL, NULL, 0, "byte_fallback"},
        {"\"ignore_merges\": true, ", NULL, NULL, 0, "ignore_merges"},
        {NULL, "\"normalizer\": {\"type\": \"NFC\"}, ", NULL, 0, "\"normalizer\" is set"},
        {NULL, "\"pre_tokenizer\": {\"type\": \"Whitespace\"}, ", NULL, 0, "\"pre_tokenizer\" of type \"Whitespace\" is not supported"},
        {NULL, "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true}, ", NULL, 0, "add_prefix_space"},
        {NULL, "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": false}, ", NULL, 0, "use_regex"},
        {NULL, "\"post_processor\": {\"type\": \"TemplateProcessing\"}, ", NULL, 0, "\"post_processor\" of type"},
        {NULL, "\"truncation\": {\"max_length\": 5}, ", NULL, 0, "\"truncation\" is set"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j = small_json(cases[i].model_extra, cases[i].top_extra, cases[i].merges, cases[i].dup_id);
        pz_bpe *b = NULL;
        CHECK_STATUS(from_json(j, &b), PZ_ERR_FORMAT, cases[i].needle);
        CHECK(!b, "case %zu: a tokenizer despite the error", i);
        pz_bpe_free(b);
        free(j);
    }
    /* whole-file problems */
    const struct { const char *text, *needle; } files[] = {
        {"", "tok.json: bad JSON at byte 0"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}", "tok.json: bad JSON at byte"},
        {"{\"model\": {\"type\": \"BPE\", \"merges\": []}}", "tok.json: no vocabulary"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", "tok.json: no merges"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", "the vocabulary is empty"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}, \"merges\": []}}", "\"model\" of type \"WordPiece\""},
        {"{\"model\": {\"vocab\": {\"a\": 16777216}, \"merges\": []}}", "id 16777216 is not a whole number from 0 to 16777215"},
        /* HF's order, "id" before "content": the token named by its place, not as "" */
        {"{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": 99999999, \"content\": \"<t>\"}], "
         "\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}}",
         "added token number 2: id 99999999 is not a whole number from 0 to 16777215"},
        {"{\"model\": {\"vocab\": {\"a\": -1}, \"merges\": []}}", "is not a whole number"},
        {"{\"model\": {\"vocab\": {\"a\": 1.5}, \"merges\": []}}", "is not a whole number"},
        {"{\"model\": {\"vocab\": {\"a\": \"1\"}, \"merges\": []}}", "the id must be a number"},
        {"{\"model\": {\"vocab\": {\"a\": 0, \"a\": 1}, \"merges\": []}}", "vocabulary token \"a\" appears twice"},
        {"{\"model\": {\"vocab\": {\"a b\": 0}, \"merges\": []}}", "vocabulary token \"a b\" (id 0) is not byte-level text"},
        {"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}, \"model\": {}}", "duplicate key"},
        {"{\"added_tokens\": [{\"id\": 0, \"content\": \"<s>\"}], \"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}}",
         "added token \"<s>\" has id 0, which the vocabulary gives to \"a\""},
        {"{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": 1, \"content\": \"<t>\"}], \"model\": {\"vocab\": "
         "{\"a\": 0}, \"merges\": []}}", "repeats the id or text"},
        {"{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"lstrip\": true}], \"model\": {\"vocab\": {\"a\": 0}, "
         "\"merges\": []}}", "\"lstrip\": true is not supported"},
        {"{\"added_tokens\": [{\"id\": 1}], \"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}}", "needs an \"id\" and"},
        {"[1, 2]", "the top level must be an object"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        pz_bpe *b = NULL;
        CHECK_STATUS(from_json(files[i].text, &b), PZ_ERR_FORMAT, files[i].needle);
        pz_bpe_free(b);
    }
    /* a vocabulary without some byte: encoding that byte is an error, not a silent drop */
    pz_bpe *b = NULL;
    CHECK_STATUS(from_json("{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}", &b), PZ_OK, NULL);
    if (b) {
        EXPECT_IDS(b, "abba", 2, 1, 0);
        pz_bpe_enc *e = pz_bpe_enc_new(b);
        pz_bpe_ids ids = {0};
        CHECK_STATUS(pz_bpe_encode(e, "abc", 3, "t.txt", &ids), PZ_ERR_FORMAT, "t.txt: byte 0x63 at byte 2 has no token");
        free(ids.ids);
        pz_bpe_enc_free(e);
        pz_bpe_free(b);
    }
}

static void write_text(const char *path, const char *mode, const char *text) {
    FILE *f = fopen(path, mode);
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

/* vocab.json + merges.txt, as files and as a directory */
static void test_files(void) {
    char dir[] = "/tmp/pz_bpe_XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    char vp[256], mp[256], tp[256];
    snprintf(vp, sizeof vp, "%s/vocab.json", dir);
    snprintf(mp, sizeof mp, "%s/merges.txt", dir);
    snprintf(tp, sizeof tp, "%s/tokenizer.json", dir);
    pz_bpe *b = NULL;
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_ERR_IO, "no tokenizer.json, nor vocab.json with merges.txt");
    sb v = {0};
    put_vocab(&v, 0, 1);
    write_text(vp, "w", v.s);
    CHECK_STATUS(pz_bpe_load(vp, &b), PZ_ERR_IO, "no merges.txt beside it");
    write_text(mp, "w", "#version: 0.2\n");
    for (size_t m = 0; m < NSMALL; m++) {
        char line[64];
        snprintf(line, sizeof line, "%s %s\n", small_merges[m][0], small_merges[m][1]);
        write_text(mp, "a", line);
    }
    CHECK_STATUS(pz_bpe_load(vp, &b), PZ_OK, NULL);
    if (b) EXPECT_IDS(b, " the<|endoftext|>", 258, 300);
    pz_bpe_free(b);
    b = NULL;
    /* gpt2-vocab.json takes gpt2-merges.txt before merges.txt */
    char gv[256], gm[256];
    snprintf(gv, sizeof gv, "%s/gpt2-vocab.json", dir);
    snprintf(gm, sizeof gm, "%s/gpt2-merges.txt", dir);
    CHECK(rename(vp, gv) == 0, "rename");
    CHECK_STATUS(pz_bpe_load(gv, &b), PZ_OK, NULL);   /* merges.txt */
    pz_bpe_free(b);
    b = NULL;
    write_text(gm, "w", "h zz\n");
    CHECK_STATUS(pz_bpe_load(gv, &b), PZ_ERR_FORMAT, "gpt2-merges.txt: merge 1");
    remove(gm);
    CHECK(rename(gv, vp) == 0, "rename back");
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_OK, NULL);
    if (b) EXPECT_IDS(b, " the", 258);
    pz_bpe_free(b);
    b = NULL;
    write_text(mp, "a", "\nh e\n");   /* an empty line */
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_ERR_FORMAT, "merges.txt: merge on line 11 (\"\") is not two tokens");
    write_text(mp, "w", "h e\nh zz\n");
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_ERR_FORMAT, "merges.txt: merge 2 (\"h zz\"): \"zz\" is not in the vocabulary");
    /* tokenizer.json wins in a directory */
    char *j = small_json(NULL, NULL, NULL, 0);
    write_text(tp, "w", j);
    free(j);
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_OK, NULL);
    pz_bpe_free(b);
    b = NULL;
    /* files are told by content, not by name (issue 24): a tokenizer.json
     * named gpt2_vocab.json, a vocab.json named vocab-copy.json, merges.txt
     * itself (vocab.json beside it) */
    char other[256];
    snprintf(other, sizeof other, "%s/gpt2_vocab.json", dir);
    CHECK(rename(tp, other) == 0, "rename");
    CHECK_STATUS(pz_bpe_load(other, &b), PZ_OK, NULL);
    if (b) CHECK(pz_bpe_added_id(b, "<|endoftext|>") >= 0, "the tokenizer.json's added token");
    pz_bpe_free(b);
    b = NULL;
    CHECK(rename(other, tp) == 0, "rename back");
    write_text(mp, "w", "#version: 0.2\n");
    for (size_t m = 0; m < NSMALL; m++) {
        char line[64];
        snprintf(line, sizeof line, "%s %s\n", small_merges[m][0], small_merges[m][1]);
        write_text(mp, "a", line);
    }
    snprintf(other, sizeof other, "%s/vocab-copy.json", dir);
    write_text(other, "w", v.s);
    CHECK_STATUS(pz_bpe_load(other, &b), PZ_OK, NULL);
    if (b) EXPECT_IDS(b, " the", 258);
    pz_bpe_free(b);
    b = NULL;
    CHECK_STATUS(pz_bpe_load(mp, &b), PZ_OK, NULL);   /* merges.txt: vocab.json beside it */
    if (b) EXPECT_IDS(b, " the", 258);
    pz_bpe_free(b);
    b = NULL;
    remove(other);
    write_text(tp, "w", "{\"model\": {\"vocab\": {\"a\": 0");
    CHECK_STATUS(pz_bpe_load(dir, &b), PZ_ERR_FORMAT, "tokenizer.json: bad JSON at byte");
    remove(vp);
    remove(mp);
    remove(tp);
    rmdir(dir);
    free(v.s);
}

static int compare(const char *tok, const char *text_path, const char *ids_path) {
    pz_bpe *b = NULL;
    uint8_t *text = NULL, *raw = NULL;
    size_t tl = 0, rl = 0;
    CHECK_STATUS(pz_bpe_load(tok, &b), PZ_OK, NULL);
    CHECK_STATUS(pz_read_file(text_path, &text, &tl), PZ_OK, NULL);
    CHECK_STATUS(pz_read_file(ids_path, &raw, &rl), PZ_OK, NULL);
    if (!b || !text || !raw) return check_summary("bpe-compare");
    size_t nw = rl / 4;
    uint32_t *want = xmalloc(rl + 4);
    memcpy(want, raw, rl);   /* little-endian host */
    pz_bpe_enc *e = pz_bpe_enc_new(b);
    pz_bpe_ids ids = {0};
    CHECK_STATUS(pz_bpe_encode(e, (const char *)text, tl, text_path, &ids), PZ_OK, NULL);
    size_t i = 0;
    while (i < ids.n && i < nw && ids.ids[i] == want[i]) i++;
    CHECK(i == nw && ids.n == nw, "%s: ids differ from HF's at position %zu of %zu (ours %zu ids): ours %u, HF %u", tok, i,
          nw, ids.n, i < ids.n ? ids.ids[i] : 0, i < nw ? want[i] : 0);
    if (i < nw && i < ids.n) {
        /* the text around the first difference, by decoding HF's ids */
        size_t lo = i > 8 ? i - 8 : 0;
        char *ctx = NULL;
        size_t cl;
        if (pz_bpe_decode(b, want + lo, (i + 8 < nw ? i + 8 : nw) - lo, &ctx, &cl) == PZ_OK)
            printf("  HF's tokens %zu..: \"%.*s\"\n", lo, (int)cl, ctx);
        free(ctx);
    }
    /* the same ids when every piece goes through the scan (no heap) */
    pz_bpe_enc *scan = pz_bpe_enc_new(b);
    pz_bpe_enc_force_scan(scan, 1);
    pz_bpe_ids sids = {0};
    CHECK_STATUS(pz_bpe_encode(scan, (const char *)text, tl, text_path, &sids), PZ_OK, NULL);
    CHECK(sids.n == ids.n && (ids.n == 0 || memcmp(sids.ids, ids.ids, ids.n * sizeof *ids.ids) == 0),
          "%s: the scan's ids differ from the heap's", tok);
    free(sids.ids);
    pz_bpe_enc_free(scan);
    char *back = NULL;
    size_t bl = 0;
    CHECK_STATUS(pz_bpe_decode(b, ids.ids, ids.n, &back, &bl), PZ_OK, NULL);
    CHECK(back && bl == tl && memcmp(back, text, tl) == 0, "decode(encode(text)) != text (%zu vs %zu bytes)", bl, tl);
    printf("%s: %zu bytes -> %zu ids, equal to HF's: %s\n", tok, tl, ids.n, i == nw && ids.n == nw ? "yes" : "no");
    free(back);
    free(ids.ids);
    free(want);
    free(raw);
    free(text);
    pz_bpe_enc_free(e);
    pz_bpe_free(b);
    return check_summary("bpe-compare");
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--compare") == 0) return compare(argv[2], argv[3], argv[4]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_bpe [--compare TOKENIZER TEXT IDS.u32]\n");
        return 2;
    }
    test_small();
    test_long_pieces();
    test_malformed();
    test_files();
    return check_summary("bpe");
}
