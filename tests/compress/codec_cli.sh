#!/usr/bin/env bash
# `pipezip codec`: encode/decode round trips through .npy files (versions 1, 2
# and 3, raw f32), the JSON line, and clear errors for bad files and specs,
# with no half-written outputs. Needs python3 (standard library only).
#   usage: codec_cli.sh PATH/TO/pipezip
set -u
pz="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; n=0

ok()   { n=$((n + 1)); echo "ok: $1"; }
bad()  { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL: $1"; }

# expect_fail "description" "regex the message must match" cmd...
expect_fail() {
  local what="$1" pattern="$2"; shift 2
  local out rc
  out=$("$@" 2>&1 >/dev/null </dev/null); rc=$?
  if [ "$rc" = 0 ]; then bad "$what: exit 0"
  elif ! grep -qE -- "$pattern" <<<"$out"; then bad "$what: message does not match /$pattern/: $out"
  else ok "$what -> $(head -n 1 <<<"$out")"
  fi
}

# write .npy files with the standard library only
python3 - "$dir" <<'EOF'
import struct, random, sys, os
d = sys.argv[1]
random.seed(1)
def npy(path, shape, data, ver=(1, 0), descr="<f4", fortran="False", extra="", pad_to=64, raw_header=None, tail=b""):
    if raw_header is None:
        sh = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
        h = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), %s}" % (descr, fortran, sh, extra)
    else:
        h = raw_header
    pre = 10 if ver[0] == 1 else 12
    h += " " * ((-(pre + len(h) + 1)) % pad_to) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes(ver))
        f.write(struct.pack("<H" if ver[0] == 1 else "<I", len(h)))
        f.write(h.encode())
        f.write(struct.pack("<%df" % len(data), *data))
        f.write(tail)
shape = (4, 16, 48)
n = 4 * 16 * 48
x = [random.gauss(0, 1) for _ in range(n)]
npy(f"{d}/x.npy", shape, x)
npy(f"{d}/x_v2.npy", shape, x, ver=(2, 0))
npy(f"{d}/x_v3.npy", shape, x, ver=(3, 0))
npy(f"{d}/nan.npy", (2, 4), [1, 2, float("nan"), 3, 4, 5, 6, 7])
npy(f"{d}/inf.npy", (2, 4), [1, 2, 3, 4, 5, float("-inf"), 6, 7])
npy(f"{d}/x_1d.npy", (n,), x)
with open(f"{d}/x.f32", "wb") as f: f.write(struct.pack("<%df" % n, *x))
npy(f"{d}/f8.npy", shape, x, descr="<f8")
npy(f"{d}/be.npy", shape, x, descr=">f4")
npy(f"{d}/fortran.npy", shape, x, fortran="True")
npy(f"{d}/dims5.npy", (1, 2, 2, 2, 2), x[:16])
npy(f"{d}/scalar.npy", (), x[:1])
npy(f"{d}/zero.npy", (4, 0), [])
npy(f"{d}/short.npy", shape, x[:-1])
npy(f"{d}/long.npy", shape, x, tail=b"\0\0\0\0")
npy(f"{d}/unknown_key.npy", shape, x, extra="'foo': 1, ")
npy(f"{d}/dup_key.npy", shape, x, raw_header="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4, 16, 48), }")
npy(f"{d}/v4.npy", shape, x, ver=(4, 0))
npy(f"{d}/garbage_hdr.npy", shape, x, raw_header="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 16, 48), }}}")
with open(f"{d}/badmagic.npy", "wb") as f: f.write(b"\x93NUMPZ\x01\x00" + b"\0" * 100)
with open(f"{d}/x.npy", "rb") as f: b = f.read()
with open(f"{d}/trunc_hdr.npy", "wb") as f: f.write(b[:40])
with open(f"{d}/huge_hdr.npy", "wb") as f: f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xffffff00) + b"{")
EOF

# round trip through .npy with a lossy codec, and the JSON line
if out=$("$pz" codec --spec q4:group=row --in "$dir/x.npy" --out "$dir/m.bin" --seed 3); then
  if python3 - "$out" <<'EOF'
import json, sys
j = json.loads(sys.argv[1])
need = ["spec", "shape", "input_bytes", "wire_bytes", "ratio", "bits_per_elem", "rel_l2_error", "encode_gbps", "decode_gbps", "isa"]
missing = [k for k in need if k not in j]
assert not missing, missing
assert j["shape"] == [4, 16, 48] and j["input_bytes"] == 4 * 3072
assert abs(j["ratio"] - j["input_bytes"] / j["wire_bytes"]) < 1e-3 * j["ratio"]
assert abs(j["bits_per_elem"] - 8 * j["wire_bytes"] / 3072) < 1e-3
assert 0 < j["rel_l2_error"] < 0.3, j
assert j["spec"].startswith("q4:scale=absmax,group=row")
EOF
  then ok "encode prints a complete JSON line: $out"; else bad "JSON line: $out"; fi
else bad "encode of a good .npy failed"; fi
[ "$(stat -c %s "$dir/m.bin")" = "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['wire_bytes'])" "$out")" ] \
  && ok "message size equals wire_bytes" || bad "message size differs from wire_bytes"
# the speeds name the level they ran at (a -Dnative=true build has one level, "native")
out=$(PIPEZIP_ISA=x86-64 "$pz" codec --spec q4 --in "$dir/x.npy" --out "$dir/m.bin" 2>/dev/null)
grep -q -E '"isa":"(x86-64|native)"}$' <<<"$out" && ok "PIPEZIP_ISA=x86-64: the line says isa x86-64" ||
  bad "PIPEZIP_ISA=x86-64: the line does not name that level: $out"

if dout=$("$pz" codec --decode "$dir/m.bin" --out "$dir/y.npy"); then
  if python3 - "$dir/x.npy" "$dir/y.npy" "$out" <<'EOF'
import struct, sys, json, math, ast
def load(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY"
    hl = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + hl].decode())
    assert (10 + hl) % 64 == 0 and h["descr"] == "<f4" and not h["fortran_order"]
    n = 1
    for d in h["shape"]: n *= d
    assert len(b) == 10 + hl + 4 * n
    return h["shape"], struct.unpack("<%df" % n, b[10 + hl:])
sx, x = load(sys.argv[1]); sy, y = load(sys.argv[2])
assert sx == sy, (sx, sy)
err = math.sqrt(sum((a - b) ** 2 for a, b in zip(x, y)) / sum(a * a for a in x))
want = json.loads(sys.argv[3])["rel_l2_error"]
assert abs(err - want) < 1e-4 * max(want, 1e-6) + 1e-6, (err, want)
EOF
  then ok "decode writes an .npy whose error matches the JSON ($dout)"; else bad "decoded .npy: $dout"; fi
else bad "decode failed"; fi

# lossless: fp32 gives back the same bytes, for .npy v1/v2/v3 and raw input
for f in x.npy x_v2.npy x_v3.npy x_1d.npy; do
  if "$pz" codec --spec fp32+zstd --in "$dir/$f" --out "$dir/m32.bin" >/dev/null &&
     "$pz" codec --decode "$dir/m32.bin" --out "$dir/y32.npy" >/dev/null &&
     python3 -c "
import sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
assert a[-4*3072:] == b[-4*3072:] and len(b) % 64 == (4*3072) % 64" "$dir/$f" "$dir/y32.npy"; then
    ok "fp32 round trip of $f is exact"
  else bad "fp32 round trip of $f"; fi
done
if "$pz" codec --spec fp16 --in "$dir/x.f32" --raw --shape 4,16,48 --out "$dir/mraw.bin" >/dev/null &&
   "$pz" codec --decode "$dir/mraw.bin" --out "$dir/yraw.npy" >/dev/null; then ok "raw input with --shape"
else bad "raw input with --shape"; fi
# the same seed gives the same message
"$pz" codec --spec q2:round=stochastic --in "$dir/x.npy" --out "$dir/s1.bin" --seed 9 >/dev/null
"$pz" codec --spec q2:round=stochastic --in "$dir/x.npy" --out "$dir/s2.bin" --seed 9 >/dev/null
"$pz" codec --spec q2:round=stochastic --in "$dir/x.npy" --out "$dir/s3.bin" --seed 10 >/dev/null
cmp -s "$dir/s1.bin" "$dir/s2.bin" && ! cmp -s "$dir/s1.bin" "$dir/s3.bin" && ok "--seed fixes stochastic rounding" \
  || bad "--seed does not fix stochastic rounding"

# bad .npy files and raw inputs: encoding with q4 fails, saying why
# description | regex the message must match | input in $dir | more flags
while IFS='|' read -r what pattern in flags; do
  # shellcheck disable=SC2086  # flags: several words
  expect_fail "$what" "$pattern" "$pz" codec --spec q4 --in "$dir/$in" $flags --out "$dir/o.bin"
done <<'EOF'
bad magic|badmagic.npy.*not an .npy|badmagic.npy
float64|'<f8' is not little-endian float32|f8.npy
big-endian|'>f4' is not little-endian float32|be.npy
Fortran order|Fortran order|fortran.npy
5 dims|more than 4 dims|dims5.npy
0-d array|0-d scalar|scalar.npy
zero dimension|zero dimension|zero.npy
data too short|short.npy: .npy data is 12284 bytes, shape needs 12288|short.npy
data too long|data is 12292 bytes|long.npy
unknown header key|unknown key|unknown_key.npy
duplicate header key|duplicate key 'descr'|dup_key.npy
unsupported version|unsupported .npy version 4.0|v4.npy
text after the dict|text after the dict|garbage_hdr.npy
truncated header|truncated .npy header|trunc_hdr.npy
huge header length|implausible|huge_hdr.npy
missing input|nope.npy: cannot open|nope.npy
raw size mismatch|needs 12544|x.f32|--raw --shape 4,16,49
raw 5 dims|more than 4 dims|x.f32|--raw --shape 4,16,48,1,1
raw shape mismatch|x.f32: 12288 bytes, but --shape 3,16,48 needs 9216|x.f32|--raw --shape 3,16,48
raw without shape|--raw needs --shape|x.f32|--raw
shape without raw|--shape goes with --raw|x.npy|--shape 4
bad shape|dims are positive integers|x.f32|--raw --shape 4,x
EOF

# bad specs point at the offending text
# description | regex the message must match | spec
while IFS='|' read -r what pattern spec; do
  expect_fail "$what" "$pattern" "$pz" codec --spec "$spec" --in "$dir/x.npy" --out "$dir/o.bin"
done <<'EOF'
bits out of range|bad codec spec 'q9': bits must be 1..8 at offset 1|q9
unknown codec|unknown codec 'foo'|foo
unknown wrapper|unknown wrapper 'xx'|xx(q4)
missing paren|missing '\)'|ef(q4
EOF
out=$("$pz" codec --spec q4:round=up --in "$dir/x.npy" --out "$dir/o.bin" 2>&1 >/dev/null)
python3 - "$out" <<'EOF' && ok "caret points under the offending text" || bad "caret misplaced: $out"
import sys
l1, l2 = sys.argv[1].split("\n")[:2]
assert l1.endswith("q4:round=up") and l2.rstrip().endswith("^")
assert l2.index("^") == len(l1) - len("q4:round=up") + 9, (l1, l2)
EOF
expect_fail "no spec" "--spec, --in and --out are required" "$pz" codec --in "$dir/x.npy" --out "$dir/o.bin"
[ -e "$dir/o.bin" ] && bad "a failed encode left o.bin" || ok "failed encodes leave no output"

# bad messages: garbage, cut short, one bit flipped, and ef21's (needs earlier state)
head -c 300 /dev/urandom > "$dir/garbage.bin"
head -c 100 "$dir/m.bin" > "$dir/cut.bin"
python3 -c "
import sys; b = bytearray(open(sys.argv[1],'rb').read()); b[len(b)//2] ^= 1; open(sys.argv[2],'wb').write(b)" \
  "$dir/m.bin" "$dir/flip.bin"
"$pz" codec --spec "ef21(q4)" --in "$dir/x.npy" --out "$dir/ef21.bin" >/dev/null || bad "ef21 encode"
# description | regex the message must match | message in $dir
while IFS='|' read -r what pattern msg; do
  expect_fail "$what" "$pattern" "$pz" codec --decode "$dir/$msg" --out "$dir/o.npy"
done <<'EOF'
garbage message|garbage.bin: codec message: bad magic|garbage.bin
truncated message|cut.bin: codec message|cut.bin
corrupted message|CRC32C mismatch|flip.bin
stateful decoder|decodes against state built from earlier messages|ef21.bin
EOF
expect_fail "decode with a spec" "--decode takes only --out" "$pz" codec --decode "$dir/m.bin" --spec q4 --out "$dir/o.npy"
[ -e "$dir/o.npy" ] && bad "a failed decode left o.npy" || ok "failed decodes leave no output"
"$pz" codec --spec "ef(q4)" --in "$dir/x.npy" --out "$dir/ef.bin" >/dev/null &&
  "$pz" codec --decode "$dir/ef.bin" --out "$dir/yef.npy" >/dev/null && ok "ef() messages decode on their own" \
  || bad "ef() message decode"

# hadamard(): its signs come from the seed, so --decode takes the encoder's --seed
if "$pz" codec --spec "hadamard(fp32)" --in "$dir/x.npy" --out "$dir/h.bin" --seed 5 >/dev/null &&
  "$pz" codec --decode "$dir/h.bin" --out "$dir/yh5.npy" --seed 5 >/dev/null &&
  "$pz" codec --decode "$dir/h.bin" --out "$dir/yh6.npy" --seed 6 >/dev/null &&
  python3 - "$dir" <<'EOF'
import struct, sys, math
d = sys.argv[1]
def load(p):
    b = open(p, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
    off = (10 if b[6] == 1 else 12) + hl
    return struct.unpack("<%df" % ((len(b) - off) // 4), b[off:])
x, y5, y6 = load(f"{d}/x.npy"), load(f"{d}/yh5.npy"), load(f"{d}/yh6.npy")
def rel(a, b): return math.sqrt(sum((p - q) ** 2 for p, q in zip(a, b)) / sum(p * p for p in a))
sys.exit(0 if len(y5) == len(x) and rel(x, y5) < 1e-6 and rel(x, y6) > 0.1 else 1)
EOF
then ok "hadamard(fp32) decodes with the encoder's --seed (and not with another)"
else bad "hadamard() --decode --seed"; fi

# atomic writes: an unwritable destination fails and leaves nothing behind
expect_fail "encode into a missing directory" "no/such" "$pz" codec --spec q4 --in "$dir/x.npy" --out "$dir/no/such/m.bin"
expect_fail "decode into a missing directory" "no/such" "$pz" codec --decode "$dir/m.bin" --out "$dir/no/such/y.npy"
# non-finite input is refused by every codec alike (issue 24: fp16, bf16,
# fp32, topk and ef(topk) reported rel_l2_error nan with exit 0)
for c in fp16:nan bf16:inf fp32:nan topk:0.5:inf 'ef(topk:0.5):nan'; do
  expect_fail "$c input to ${c%:*}" "${c##*:}.npy: element [25] is (nan|inf): codecs take finite values" \
    "$pz" codec --spec "${c%:*}" --in "$dir/${c##*:}.npy" --out "$dir/nf.bin"
done
[ ! -e "$dir/nf.bin" ] && ok "no message written for non-finite input" || bad "non-finite input wrote nf.bin"
# the output is no input, also through a symbolic or a hard link (issue 24)
cp "$dir/x.npy" "$dir/keep.npy"; ln -s keep.npy "$dir/sym.npy"; ln "$dir/keep.npy" "$dir/hard.npy"
expect_fail "--out onto --in" "--out .*sym.npy is the same file as --in .*keep.npy" \
  "$pz" codec --spec q4 --in "$dir/keep.npy" --out "$dir/sym.npy"
expect_fail "--out onto --decode" "--out .*hard.npy is the same file as --decode" \
  "$pz" codec --decode "$dir/keep.npy" --out "$dir/hard.npy"
cmp -s "$dir/x.npy" "$dir/keep.npy" && ok "the input is unchanged" || bad "the input was changed"
[ -n "$(find "$dir" -name '*.tmp.*')" ] && bad "temporary files left behind" || ok "no temporary files left"

echo "$((n - fails)) of $n codec cli checks passed"
[ "$fails" = 0 ]
