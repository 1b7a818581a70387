/* codec_cmd.h: the `pipezip codec` subcommand (flags parsed by runtime/cli/cli.c).
 *
 *   pipezip codec --spec SPEC --in X.npy --out MSG [--seed N]
 *   pipezip codec --spec SPEC --in X.f32 --raw --shape 4,1024,768 --out MSG
 *   pipezip codec --decode MSG --out Y.npy [--seed N]   (hadamard(): the encoder's seed)
 * Encoding prints one JSON line: {"spec", "shape", "input_bytes",
 * "wire_bytes", "ratio", "bits_per_elem", "rel_l2_error", "encode_gbps",
 * "decode_gbps", "isa"}; rel_l2_error = |x - decode(encode(x))| / |x| (0 when x is 0),
 * decoded by a second codec object made from the same spec, as a receiver
 * would. GB/s are of float input (4 bytes per element), one thread, the median
 * of repeated runs for stateless codecs, at the instruction-set level "isa"
 * names (base/isa.h: x86-64 ... x86-64-v4+vbmi2, PIPEZIP_ISA caps it). Decoding prints {"spec", "shape",
 * "wire_bytes", "out"}. Files are written atomically. */
#ifndef PZ_CODEC_CLI_H
#define PZ_CODEC_CLI_H

typedef struct {
    const char *spec, *in, *out, *decode, *shape;
    int raw;
    long seed;
} pz_codec_cmd_opts;

/* Returns the process exit status; errors are printed to stderr. */
int pz_codec_cmd(const pz_codec_cmd_opts *o);

#endif
