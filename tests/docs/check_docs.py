#!/usr/bin/env python3
"""check_docs.py: the documentation names only flags and files that exist.

For README.md and docs/*.md of the source tree:
  - every `--flag` must be one that its command lists in its --help. The
    command is the one named before the flag in the same command line (a
    line of a code block, or one `inline code` span: `pipezip train ...`,
    `examples/gpt_finetune.sh ...`, `build/bench/bench_codecs ...`), else the
    one the section's heading names (`pipezip generate`, `eval`, ...), else
    the file's default, `pipezip train`. A heading without a command inherits
    its parent's.
  - every repository path (base/..., runtime/..., compress/..., tools/...,
    tests/..., bench/..., docs/..., ...) must exist, a glob must match a file,
    a source file named alone (pipeline_slots.c, sweep.py) must be somewhere,
    and every relative Markdown link must reach a file (and, with #anchor, a
    heading of that file).

Where flags come from, per command:
  - pipezip's subcommands: `pipezip SUB --help`;
  - HELP_SCRIPTS: the scripts whose --help prints their flags and does
    nothing else (run with bash or python3);
  - bench programs and the other scripts that have no --help (they parse a
    few flags by hand, and run a benchmark or a job when called): the flag
    must appear quoted ("--x" or '--x') in their source file;
  - programs of others (meson, mpirun, ...): EXTERNAL_FLAGS, each with the
    reason it is named.

usage: check_docs.py --source DIR --pipezip EXE [--self-test]
--self-test checks the checker: a made-up flag and a made-up path in a
made-up document must be reported, and a correct document must not.
Exit 0 when everything holds, 1 with one line per problem otherwise.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

SUBCOMMANDS = ("train", "eval", "generate", "tokenize", "codec", "schedule", "sweep")
DEFAULT_CMD = ("pipezip", "train")

# Scripts whose --help prints their flags and exits, and the file it is in.
HELP_SCRIPTS = {
    "gpt_finetune.sh": "examples/gpt_finetune.sh",
    "run-main.sh": "examples/gpt_finetune.sh",  # passes its arguments on to the example
    "sweep.py": "examples/sweep.py",
    "sweep_dp.py": "examples/sweep_dp.py",
    "setup.sh": "tools/setup.sh",
    "make_corpus.sh": "tools/make_corpus.sh",
    "netns_pipeline.sh": "tools/netns_pipeline.sh",
}

# Flags of other people's programs that the docs name, and why.
EXTERNAL_FLAGS = {
    "meson": {"--suite": "meson test: run one suite (unit, pipeline, torch, gpu, ...)",
              "--num-processes": "meson test: how many tests at once on a shared machine",
              "--buildtype": "meson setup: the sanitizer build's optimisation level"},
    "huggingface-cli": {"--local-dir": "huggingface-cli download: where the GPT-2 files go"},
    "mpirun": {}, "srun": {}, "nsys": {}, "taskset": {}, "ninja": {}, "torchrun": {},
    "pip": {}, "openssl": {}, "python3": {}, "bash": {}, "git": {}, "apt-get": {},
}
UNIVERSAL = {"--help": "every command here answers it"}

REPO_DIRS = ("base", "kernels", "compress", "schedules", "stages", "runtime", "examples",
             "tests", "bench", "tools", "docs", ".ci")

FLAG_RE = r"(?<![\w./=-])--[a-z0-9][a-z0-9-]*"
PROG_RE = (r"(?P<pz>\bpipezip\s+(?P<sub>" + "|".join(SUBCOMMANDS) + r")\b)"
           r"|(?P<script>(?<![\w.-])(?:[\w.-]+/)*(?P<sname>[\w-]+\.(?:sh|py)))(?![\w.])"
           r"|(?P<bench>(?<![\w.-])(?:build/)?bench/(?P<bname>bench_\w+)\b)(?!\.)"
           r"|(?P<ext>(?<![\w./-])(?:" + "|".join(re.escape(e) for e in EXTERNAL_FLAGS) + r")(?![\w.-]))")
TOKEN_RE = re.compile(PROG_RE + "|(?P<flag>" + FLAG_RE + ")")
PATH_RE = re.compile(r"(?<![\w./~$<>-])((?:" + "|".join(re.escape(d) for d in REPO_DIRS) +
                     r")/[A-Za-z0-9_./*+-]*)")
# Names that look like a source file but are something else.
NOT_FILES = {"llm.c": "Karpathy's llm.c, the project whose token shards and checkpoints pipezip reads"}
# a source file named without its folder ("pipeline_slots.c"): some file of the tree has that name
BARE_RE = re.compile(r"(?<![\w./-])([A-Za-z0-9_][\w+-]*\.(?:c|h|cu|cuh|py|sh))(?!\w|\.\w)")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN_RE = re.compile(r"`([^`]+)`")


def slug(heading):
    """GitHub's anchor for a heading."""
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


class Checker:
    def __init__(self, root, pipezip):
        self.root = root
        self.pipezip = pipezip
        self.helps = {}
        self.errors = []
        self.names = None

    # ---------------------------------------------------------------- flags of a command
    def flags_of(self, prog):
        """The set of flags prog accepts, or None (and an error) when unknown."""
        if prog in self.helps:
            return self.helps[prog]
        kind, name = prog
        flags = None
        if kind == "pipezip":
            flags = self.run_help([self.pipezip, name, "--help"])
        elif kind == "script" and name in HELP_SCRIPTS:
            path = os.path.join(self.root, HELP_SCRIPTS[name])
            runner = "python3" if path.endswith(".py") else "bash"
            flags = self.run_help([runner, path, "--help"])
        elif kind in ("script", "bench"):
            src = self.source_of(name if kind == "script" else name + ".c")
            if src:
                text = open(src, encoding="utf-8", errors="replace").read()
                flags = set(re.findall(r"""["'](--[a-z0-9][a-z0-9-]*)["']""", text))
        elif kind == "ext":
            flags = set(EXTERNAL_FLAGS[name])
        self.helps[prog] = flags
        return flags

    def run_help(self, argv):
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                               stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.errors.append("cannot run %s: %s" % (" ".join(argv), e))
            return None
        return set(re.findall(FLAG_RE, r.stdout.decode("utf-8", "replace")))

    def source_of(self, base):
        for d in ("bench", "tools", "examples", "tests"):
            hits = glob.glob(os.path.join(self.root, d, "**", base), recursive=True)
            if hits:
                return sorted(hits)[0]
        return None

    # ---------------------------------------------------------------- one document
    def check_file(self, rel, text):
        section = {0: [DEFAULT_CMD]}
        for unit, line, is_heading in units(text):
            if is_heading:
                level = len(re.match(r"#+", unit).group(0))
                named = heading_commands(unit)
                parent = max(k for k in section if k < level)
                for k in [k for k in section if k >= level]:
                    del section[k]
                section[level] = named or section[parent]
            cmds = section[max(section)]
            self.check_unit(rel, line, unit, cmds)
            self.check_paths(rel, line, unit)

    def check_unit(self, rel, line, unit, cmds):
        for span, inline in pieces(unit):
            current = None  # the command named in this piece, if any
            for m in TOKEN_RE.finditer(span):
                if m.group("flag") is None:
                    current = prog_of(m)
                    continue
                flag = m.group("flag")
                if flag in UNIVERSAL:
                    continue
                candidates = [current] if current else cmds
                known = [self.flags_of(c) for c in candidates]
                if any(k is None for k in known):
                    unknown = [c for c, k in zip(candidates, known) if k is None]
                    self.errors.append("%s:%d: %s: no --help or source for %s" % (rel, line, flag, describe(unknown[0])))
                elif not any(flag in k for k in known):
                    self.errors.append("%s:%d: %s is not a flag of %s" % (rel, line, flag,
                                       " or ".join(describe(c) for c in candidates)))

    def check_paths(self, rel, line, unit):
        here = os.path.dirname(rel)
        for target in LINK_RE.findall(unit):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else rel
            full = os.path.join(self.root, dest)
            if not os.path.exists(full):
                self.errors.append("%s:%d: link to %s: no such file" % (rel, line, target))
            elif anchor and dest.endswith(".md"):
                heads = [slug(h) for h in re.findall(r"^#+ (.*)$", open(full, encoding="utf-8").read(), re.M)]
                if anchor not in heads:
                    self.errors.append("%s:%d: link to %s: %s has no heading with that anchor" % (rel, line, target, dest))
        for m in BARE_RE.finditer(LINK_RE.sub("]", unit)):
            if m.group(1) not in self.tree_names() and m.group(1) not in NOT_FILES:
                self.errors.append("%s:%d: %s: no file of that name in the tree" % (rel, line, m.group(1)))
        for m in PATH_RE.finditer(LINK_RE.sub("]", unit)):
            p = m.group(1).rstrip(".,:;")
            if "*" in p:
                if not glob.glob(os.path.join(self.root, p), recursive=True):
                    self.errors.append("%s:%d: %s matches no file" % (rel, line, p))
            elif not os.path.exists(os.path.join(self.root, p)):
                self.errors.append("%s:%d: %s: no such file or folder" % (rel, line, p))


    def tree_names(self):
        if self.names is None:
            self.names = set()
            for d, dirs, files in os.walk(self.root):
                dirs[:] = [x for x in dirs if not x.startswith((".git", "build")) and x not in ("runs", "data")]
                self.names.update(files)
        return self.names


def prog_of(m):
    if m.group("pz"):
        return ("pipezip", m.group("sub"))
    if m.group("script"):
        return ("script", m.group("sname"))
    if m.group("bench"):
        return ("bench", m.group("bname"))
    return ("ext", m.group("ext"))


def describe(c):
    kind, name = c
    return {"pipezip": "pipezip " + name, "ext": name}.get(kind, name)


def heading_commands(h):
    """The commands a heading names: `pipezip X`, a bare `X` of pipezip, a script or bench."""
    found = [prog_of(m) for m in TOKEN_RE.finditer(h) if m.group("flag") is None]
    for span in CODE_SPAN_RE.findall(h):
        if span in SUBCOMMANDS:
            found.append(("pipezip", span))
    return found


def units(text):
    """(text, first line number, is heading): headings, one line of a code
    block (continued lines joined) or one prose paragraph."""
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        if ln.startswith("```"):
            j = i + 1
            while j < n and not lines[j].startswith("```"):
                j += 1
            yield from code_lines(lines[i + 1:j], i + 2)
            i = j + 1
        elif ln.startswith("#"):
            yield ln, i + 1, True
            i += 1
        elif not ln.strip():
            i += 1
        else:
            j = i
            while j < n and lines[j].strip() and not lines[j].startswith(("```", "#")):
                j += 1
            block = lines[i:j]
            if all(b.startswith("    ") for b in block) and (i == 0 or not lines[i - 1].strip()):
                yield from code_lines(block, i + 1)
            else:
                yield "\n".join(block), i + 1, False
            i = j


def code_lines(block, first):
    k = 0
    while k < len(block):
        start, joined = k, block[k]
        while joined.endswith("\\") and k + 1 < len(block):
            k += 1
            joined = joined[:-1] + " " + block[k]
        yield "`" + joined.replace("`", "'") + "`", first + start, False
        k += 1


def pieces(unit):
    """A unit cut into code spans (each its own command line) and the prose between."""
    pos = 0
    for m in CODE_SPAN_RE.finditer(unit):
        yield unit[pos:m.start()], False
        yield m.group(1), True
        pos = m.end()
    yield unit[pos:], False


def check_tree(root, pipezip):
    c = Checker(root, pipezip)
    files = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    for rel in files:
        c.check_file(rel, open(os.path.join(root, rel), encoding="utf-8").read())
    return c.errors, len(files)


def self_test(root, pipezip):
    """The checker reports what it must, and only that."""
    good = ("# t\n\n    pipezip train --stages 2 --compress none\n\n"
            "## `pipezip generate`\n\nSee `runtime/` and [the CLI](docs/cli.md), `--max-new-tokens`.\n")
    bad = ("# t\n\n    pipezip train --stages 2 --no-such-flag 3\n\n"
           "## `pipezip generate`\n\n`--compress-tied` and runtime/no_such_file.c and [x](docs/nope.md),\n"
           "no_such_file_either.c.\n")
    ok = True
    for text, want in ((good, []), (bad, ["--no-such-flag is not a flag of pipezip train",
                                          "--compress-tied is not a flag of pipezip generate",
                                          "runtime/no_such_file.c: no such file",
                                          "link to docs/nope.md: no such file",
                                          "no_such_file_either.c: no file of that name"])):
        c = Checker(root, pipezip)
        c.check_file("README.md", text)
        for w in want:
            if not any(w in e for e in c.errors):
                print("self-test: the checker missed: %s (it reported %s)" % (w, c.errors))
                ok = False
        if len(c.errors) != len(want):
            print("self-test: expected %d problems, got %s" % (len(want), c.errors))
            ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description="check the flags and paths that README.md and docs/*.md name")
    ap.add_argument("--source", required=True, help="the source tree")
    ap.add_argument("--pipezip", required=True, help="the pipezip executable")
    ap.add_argument("--self-test", action="store_true", help="also check the checker on made-up documents")
    a = ap.parse_args()
    if a.self_test and not self_test(a.source, a.pipezip):
        return 1
    errors, nfiles = check_tree(a.source, a.pipezip)
    for e in errors:
        print(e)
    print("%d files, %d problems" % (nfiles, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
