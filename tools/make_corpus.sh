#!/usr/bin/env bash
# make_corpus.sh: builds pipezip's built-in datasets without any download,
# from human-written text that Debian packages put on the machine:
#
#   pydoc     pretraining   reStructuredText sources of the Python 3.11 docs
#                           (package python3.11-doc), 5% validation
#   fortunes  fine-tuning   the fortune cookie files (package fortunes),
#                           10% validation
#
# Each corpus becomes NAME_train.bin and NAME_val.bin, byte-level token shards
# written by `pipezip tokenize`. The packages are installed by the set-up
# script, not here; a missing one is an error naming it.
#
# usage: tools/make_corpus.sh [--force] [OUTDIR [PIPEZIP]]
#   OUTDIR   where the shards go (default: data/ in the repository)
#   PIPEZIP  the pipezip binary (default: $PIPEZIP, else build/pipezip in the
#            repository); only needed when a corpus has to be (re)built
#   --force  rebuild even when the outputs are up to date
# Environment: PYDOC_SRC and FORTUNES_SRC replace the two source directories
# (for tests, or a system that installs the same files elsewhere).
#
# Re-running is cheap: a corpus is skipped when its stamp file holds the same
# input hash (file list and contents, split rule) and both shards are newer
# than the stamp.
set -euo pipefail
export LC_ALL=C   # sorted file order (and so sample ids) must not depend on the locale

prog=${0##*/}
repo=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "$prog: error: $*" >&2; exit 1; }

force=0
args=()
for a in "$@"; do
    case $a in
        --force) force=1 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) die "unknown option '$a' (see --help)" ;;
        *) args+=("$a") ;;
    esac
done
[ ${#args[@]} -le 2 ] || die "too many arguments (see --help)"
outdir=${args[0]:-$repo/data}
pipezip=${args[1]:-${PIPEZIP:-$repo/build/pipezip}}

mkdir -p "$outdir" || die "cannot create output directory $outdir"
# per-corpus summaries are scratch files for the manifest; never leave them
trap 'rm -f "$outdir"/.*.summary "$outdir"/*_files.txt.tmp "$outdir"/README.txt.tmp' EXIT

# The rule is part of the stamp: changing how the text is split must rebuild.
split_rule="byte tokenizer (token = byte value, vocab 256); inputs concatenated in LC_ALL=C sorted path order with nothing between them; the last F of the bytes form the validation shard, the cut moved back to just after the nearest newline among the 4096 bytes before it"

need_pipezip() {
    [ -x "$pipezip" ] || die "pipezip binary not found at '$pipezip': build it (meson setup build && ninja -C build), pass its path as the second argument, or set PIPEZIP"
}

# header slot 2 of an llm.c shard: the token count
shard_tokens() { od -An -t d4 -j 8 -N 4 "$1" | tr -d ' '; }

# Moves TMP over DST only when the contents differ, so an up-to-date rerun
# leaves every file's timestamp alone.
replace_if_changed() {
    if cmp -s "$1" "$2"; then rm -f "$1"; else mv "$1" "$2"; fi
}

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "unknown"; }

# build NAME "PACKAGE [MORE...]" DIR VAL_FRACTION FIND_ARGS...
#   Lists the inputs with find DIR FIND_ARGS, sorted; (re)builds the shards if
#   needed; leaves a summary for the manifest in $outdir/.NAME.summary.
build() {
    local name=$1 pkg=$2 dir=$3 frac=$4 pkg_desc="" p
    shift 4
    for p in $pkg; do pkg_desc+="${pkg_desc:+, }$p $(pkg_version "$p")"; done
    pkg=${pkg%% *}   # the package to name in errors: the one that pulls in the rest
    [ -d "$dir" ] || die "$dir not found: install the Debian package '$pkg' (apt-get install $pkg)"

    local files=()
    mapfile -d '' files < <(find "$dir" "$@" -print0 | sort -z)
    [ ${#files[@]} -gt 0 ] || die "no input files in $dir: is the Debian package '$pkg' complete? (apt-get install --reinstall $pkg)"

    # Byte-level tokens accept anything, so check the inputs are text: a NUL
    # byte means an index or binary file slipped into the list.
    local nul
    nul=$(cat -- "${files[@]}" | tr -dc '\000' | wc -c)
    if [ "$nul" -ne 0 ]; then
        local f
        for f in "${files[@]}"; do
            [ "$(tr -dc '\000' < "$f" | wc -c)" -eq 0 ] || die "$f contains NUL bytes: not a plain text file"
        done
    fi

    local selection="" a
    for a in "$@"; do case $a in *[*?]*) selection+=" '$a'" ;; *) selection+=" $a" ;; esac; done

    local nbytes hash list=$outdir/${name}_files.txt
    nbytes=$(cat -- "${files[@]}" | wc -c)
    # The hash covers every file's name and contents, the split fraction and
    # the rule, so any change to the inputs or the split triggers a rebuild.
    hash=$( { printf 'val_fraction %s\n%s\n' "$frac" "$split_rule"; sha256sum -- "${files[@]}"; } | sha256sum | cut -d' ' -f1)

    local train=$outdir/${name}_train.bin val=$outdir/${name}_val.bin stamp=$outdir/.${name}.stamp
    if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ] &&
       [ "$train" -nt "$stamp" ] && [ "$val" -nt "$stamp" ]; then
        echo "$prog: $name: up to date (${#files[@]} files, $nbytes bytes)"
    else
        need_pipezip
        echo "$prog: $name: tokenizing ${#files[@]} files, $nbytes bytes from $dir"
        # The stamp is written first and dated a second back, so outputs
        # written afterwards are newer even on file systems with coarse
        # timestamps; a failed run leaves outputs older than the stamp (or
        # none), which the check above treats as stale.
        echo "$hash" > "$stamp"
        touch -d "@$(( $(date +%s) - 1 ))" "$stamp"
        if ! "$pipezip" tokenize --out "$train" --val-out "$val" --val-fraction "$frac" -- "${files[@]}"; then
            rm -f "$stamp"
            die "$name: '$pipezip tokenize' failed"
        fi
    fi
    printf '%s\n' "${files[@]}" > "$list.tmp"
    replace_if_changed "$list.tmp" "$list"

    # a cheap end-to-end check: byte tokenization keeps every byte
    local ntrain nval
    ntrain=$(shard_tokens "$train")
    nval=$(shard_tokens "$val")
    [ $((ntrain + nval)) -eq "$nbytes" ] ||
        die "$name: shards hold $ntrain + $nval tokens but the inputs have $nbytes bytes (delete $stamp and rerun)"

    cat > "$outdir/.${name}.summary" <<EOF
$name
  source:     $dir (Debian: $pkg_desc)
  selection:  find $dir$selection
  files:      ${#files[@]} (listed in ${name}_files.txt, in this order)
  bytes:      $nbytes
  val split:  fraction $frac
  train:      ${name}_train.bin, $ntrain tokens
  val:        ${name}_val.bin, $nval tokens
  input hash: $hash
EOF
}

build pydoc python3.11-doc "${PYDOC_SRC:-/usr/share/doc/python3.11/html/_sources}" 0.05 \
    -type f -name '*.rst.txt'
# fortunes depends on fortunes-min, which ships three of the files (fortunes,
# literature, riddles); both versions go into the manifest.
# The fortune directory also holds strfile indexes (*.dat, binary) and *.u8
# symlinks to the same text; -type f and the name filters keep one copy of
# the text only, and -maxdepth 1 keeps out the offensive set (off/) that
# another package would add.
build fortunes "fortunes fortunes-min" "${FORTUNES_SRC:-/usr/share/games/fortunes}" 0.10 \
    -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8'

manifest=$outdir/README.txt
{
    echo "pipezip built-in datasets, written by tools/make_corpus.sh (do not edit)."
    echo
    echo "Tokenizer and split: $split_rule."
    echo "Shards: llm.c format (256 int32 header: magic 20240520, version 1, token count; then uint16 tokens)."
    echo "Pretraining: pydoc. Fine-tuning: fortunes."
    echo
    cat "$outdir/.pydoc.summary"
    echo
    cat "$outdir/.fortunes.summary"
} > "$manifest.tmp"
rm -f "$outdir/.pydoc.summary" "$outdir/.fortunes.summary"
replace_if_changed "$manifest.tmp" "$manifest"
echo "$prog: done; see $manifest"
