#!/usr/bin/env python3
"""test_check_layers.py CHECKER: tools/check_layers.py on made-up trees in a
temp folder. A tree whose includes follow the layers and rooms passes; each
bad include (a lower layer or room including a higher one, two rooms of the
same rank, a file outside every room) fails, and the message names the file
and line."""
import os
import subprocess
import sys
import tempfile

CHECKER = sys.argv[1]
GOOD = {
    "base/status.h": "",
    "base/io/file.c": '#include "base/status.h"\n',
    "base/formats/json.c": '#include "base/io/file.h"\n#include "base/status.h"\n',
    "compress/core/codec.h": '#include "base/status.h"\n',
    "compress/codecs/q.c": '#include "compress/core/codec.h"\n',
    "compress/wrappers/ef.c": '#include "compress/core/codec.h"\n#include "compress/codecs/q.h"\n',
    "runtime/net/transport.c": '#include "runtime/net/frame.h"\n#include "compress/core/codec.h"\n',
    "runtime/observe/metrics.c": '#include "runtime/edge/policy.h"\n',
    "runtime/exec/pipeline.c": '#include "runtime/plan/train.h"\n#include "runtime/net/transport.h"\n',
    "runtime/cli/cli.c": '#include "runtime/exec/pipeline.h"\n',
    "stages/stage.c": '#include "stages/bpe/bpe.h"\n#include "kernels/backend.h"\n',
    "tests/anything.c": '#include "runtime/cli/cli.h"\n',
}
# (file, text, words the message must hold)
BAD = [
    ("runtime/net/bootstrap.c", '#include "runtime/net/frame.h"\n#include "runtime/exec/pipeline.h"\n',
     ["runtime/net/bootstrap.c:2", "runtime/net/ may not include runtime/exec/", "a room above it"]),
    ("runtime/net/frame.c", '#include "runtime/edge/policy.h"\n',
     ["runtime/net/frame.c:1", "same rank"]),
    ("runtime/plan/train.c", '#include "runtime/ckpt/resume.h"\n', ["runtime/plan/train.c:1", "runtime/ckpt/"]),
    ("compress/core/registry.c", '#include "compress/wrappers/wrappers.h"\n',
     ["compress/core/registry.c:1", "compress/core/ may not include compress/wrappers/"]),
    ("compress/codecs/topk.c", '#include "compress/jointsq/mckp.h"\n', ["compress/codecs/topk.c:1", "same rank"]),
    ("base/status.c", '#include "base/formats/json.h"\n', ["base/status.c:1", "base/ may not include base/formats/"]),
    ("base/mem.c", '#include "runtime/net/transport.h"\n', ["base/mem.c:1", "base/ may not include runtime/"]),
    ("runtime/loose.c", "", ["runtime/loose.c", "not a room of runtime/"]),
    ("compress/misc/x.c", "", ["compress/misc/x.c", "not a room of compress/"]),
    ("runtime/exec/x.c", '#include "runtime/nowhere.h"\n', ["runtime/exec/x.c:1", "in no room"]),
]


def make(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(root):
    p = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
    return p.returncode, p.stderr


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        make(good, GOOD)
        rc, err = run(good)
        if rc != 0:
            print(f"FAIL: a tree that follows the rooms was refused: {err}")
            fails += 1
        for i, (path, text, words) in enumerate(BAD):
            root = os.path.join(tmp, f"bad{i}")
            make(root, GOOD)
            make(root, {path: text})
            rc, err = run(root)
            missing = [w for w in words if w not in err]
            if rc != 1 or missing:
                print(f"FAIL: {path} ({text.strip() or 'no include'}): exit {rc}, message lacks {missing}: {err}")
                fails += 1
            else:
                print(f"ok: {path} refused: {err.splitlines()[1]}")
    print(f"test_check_layers: {len(BAD) + 1} cases, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
